package observe

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
)

// The W3C Trace Context (https://www.w3.org/TR/trace-context/) of the
// delegator travels beside the Handoff, in the same metadata map: A2A
// Message.metadata, MCP params._meta (where MCP reserves these two keys).
//
// It is not signed, it is not part of the Handoff, and it decides
// nothing. A receiver reads it only to make its spans children of the
// delegator's; the offer is checked exactly as if it were absent, and a
// traceparent that is altered, forged, malformed or replayed changes no
// verdict, no status and no chain. The chain of signed offers (section 2.1
// of the draft) is the record of who delegated what to whom; a trace is
// only where a reader of telemetry looks for it.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// SpanHop is the span of one hop at the delegate: from the message that
// carried the Handoff to the end of the work it ran. Its parent is the
// delegator's span when the message carried a trace context.
const SpanHop = "handoff.hop"

// traceContext is the W3C propagator: traceparent and tracestate only,
// whatever the process's global propagator is.
var traceContext = propagation.TraceContext{}

// metaCarrier is a metadata map as a propagation.TextMapCarrier. Only
// string values are read; anything else under the two keys is ignored.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// Inject puts the W3C trace context of the span in ctx into meta under
// MetaTraceparent and MetaTracestate. It does nothing when ctx carries no
// valid span context or meta is nil. The middlewares call it on every
// message that carries a Handoff.
func Inject(ctx context.Context, meta map[string]any) {
	if meta == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	delete(meta, MetaTracestate) // the tracestate of another trace must not survive
	traceContext.Inject(ctx, metaCarrier(meta))
}

// Extract returns ctx with the span context of meta's trace context as its
// remote parent, for the spans the delegate records for the hop and the
// work it runs. ctx is returned unchanged when meta carries no trace
// context, or one that does not parse: a bad traceparent is ignored, never
// an error, since it decides nothing.
func Extract(ctx context.Context, meta map[string]any) context.Context {
	if meta == nil {
		return ctx
	}
	if _, ok := meta[MetaTraceparent].(string); !ok {
		return ctx
	}
	out := traceContext.Extract(ctx, metaCarrier(meta))
	if !trace.SpanContextFromContext(out).IsRemote() {
		return ctx
	}
	return out
}

// Hop is the span of one hop at the delegate. A nil *Hop records nothing.
type Hop struct {
	span trace.Span
}

// StartHop starts the span of the hop whose message carried meta: its
// parent is the trace context in meta (Extract), or the span in ctx when
// meta has none. The returned context carries the hop's span, for the
// Receive and for the work the hop runs; call End when the work is over.
// With a Recorder that records nothing, the context still carries the
// delegator's trace context, so that the work's own spans join its trace.
func (r *Recorder) StartHop(ctx context.Context, transport string, meta map[string]any) (context.Context, *Hop) {
	ctx = Extract(ctx, meta)
	if !r.on() {
		return ctx, nil
	}
	ctx, span := r.tracer.Start(ctx, SpanHop, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(KeyTransport.String(transport)))
	return ctx, &Hop{span: span}
}

// Received names the offer of the hop: its hop id once verified, and its
// handoff digest.
func (h *Hop) Received(in *handoff.Received, err error) {
	if h == nil {
		return
	}
	dec, reason, _ := Decide(in, err)
	h.span.SetAttributes(KeyDecision.String(dec), KeyReason.String(string(reason)))
	if in != nil {
		if o := hopwork.Verified(in); o != nil {
			h.span.SetAttributes(KeyHop.String(string(o.Hop)))
		}
		if d := in.Digest(); !d.IsZero() {
			h.span.SetAttributes(KeyOfferDigest.String(d.String()))
		}
	}
	if err != nil || dec == DecisionRejected || dec == DecisionEquivocation {
		h.span.SetStatus(codes.Error, string(reason))
	}
}

// End ends the hop's span.
func (h *Hop) End() {
	if h != nil {
		h.span.End()
	}
}
