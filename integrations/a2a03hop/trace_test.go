package a2a03hop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"

	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/observe"
)

// The delegator's trace context travels in Message.metadata beside the
// Handoff (A2A 0.3): the delegate's hop span is the child of the span the
// delegator sent from, in its own process's exporter, and names the hop
// and the offer's digest.
func TestA2A_TraceContextInMetadata(t *testing.T) {
	ctx := context.Background()
	theirs, ours := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	rec, err := observe.New(observe.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(ours))})
	require.NoError(t, err)
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], rec)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)

	pctx, root := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(theirs)).Tracer("planner").Start(ctx, "plan")
	d, err := pc.Send(pctx, dial(t, planner, pc, co, false), text("x"), handoff.OfferParams{To: coder})
	root.End()
	require.NoError(t, err)
	require.Equal(t, handoff.Completed, d.State)

	var hops int
	for _, sp := range ours.Ended() {
		require.Equal(t, root.SpanContext().TraceID(), sp.SpanContext().TraceID(), "span %s", sp.Name())
		if sp.Name() != observe.SpanHop {
			continue
		}
		hops++
		require.True(t, sp.Parent().IsRemote())
		require.Equal(t, root.SpanContext().SpanID(), sp.Parent().SpanID())
		a := map[string]string{}
		for _, kv := range sp.Attributes() {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		require.Equal(t, string(d.Hop), a[string(observe.KeyHop)])
		require.Equal(t, d.Offer.Handoff.Offer.Digest().String(), a[string(observe.KeyOfferDigest)])
	}
	require.Equal(t, 1, hops)
}
