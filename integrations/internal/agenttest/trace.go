package agenttest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// Remote returns a context whose span is a delegator's, as a message's
// trace context names it: nothing signs it, anyone can write one.
func Remote(tb testing.TB, traceID, spanID string) context.Context {
	tb.Helper()
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		tb.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		tb.Fatal(err)
	}
	return trace.ContextWithRemoteSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
}
