package a2atest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/observe"
)

// Process is one process's tracing: its own provider and exporter, so that
// nothing but the messages can carry a trace from one to the other.
type Process struct {
	Spans *tracetest.SpanRecorder
	TP    *sdktrace.TracerProvider
	Rec   *observe.Recorder
}

// NewProcess returns a process's tracing, shut down with the test.
func NewProcess(t *testing.T) *Process {
	t.Helper()
	p := &Process{Spans: tracetest.NewSpanRecorder()}
	p.TP = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.Spans))
	t.Cleanup(func() { _ = p.TP.Shutdown(context.Background()) })
	var err error
	p.Rec, err = observe.New(observe.Options{TracerProvider: p.TP})
	require.NoError(t, err)
	return p
}

// Attr returns the value of a span's attribute k, "" when it has none.
func Attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.Emit()
		}
	}
	return ""
}

// The delegator's trace context travels in Message.metadata beside the
// Handoff: the delegate's hop span is the child of the span the delegator
// sent from, in the delegate's own exporter, and names the hop and the
// offer's digest.
func traceParent(t *testing.T, l Line) {
	theirs, ours := NewProcess(t), NewProcess(t)
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE})
	co := Serve(t, l, ps[Coder], func(d *Delegate) { d.Observe = ours.Rec })
	pctx, root := theirs.TP.Tracer("planner").Start(context.Background(), "plan")
	d, err := co.Dial(t, l, ps[Planner]).Send(pctx, Text("x"), handoff.OfferParams{To: Coder})
	root.End()
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)

	var hops int
	for _, sp := range ours.Spans.Ended() {
		require.Equal(t, root.SpanContext().TraceID(), sp.SpanContext().TraceID(), "span %s", sp.Name())
		if sp.Name() != observe.SpanHop {
			continue
		}
		hops++
		require.True(t, sp.Parent().IsRemote())
		require.Equal(t, root.SpanContext().SpanID(), sp.Parent().SpanID())
		require.Equal(t, string(d.Hop), Attr(sp, observe.KeyHop))
		require.Equal(t, d.Offer.Handoff.Offer.Digest().String(), Attr(sp, observe.KeyOfferDigest))
	}
	require.Equal(t, 1, hops)
}

// The trace context in Message.metadata is not signed and decides nothing:
// a retransmission under another trace is still the same hop (identical
// status, the executor does not run again), a forged offer under a live
// trace is still refused, a malformed traceparent is ignored. The hop's
// span joins whatever trace the message names, and only that.
func traceDecidesNothing(t *testing.T, l Line) {
	ctx := context.Background()
	p := NewProcess(t)
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.COSE}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder], func(d *Delegate) { d.Observe = p.Rec })
	cl := co.Dial(t, l, ps[Planner])

	const t1, t2, s1, s2 = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7", "b7ad6b7169203331"
	d, err := cl.Send(agenttest.Remote(t, t1, s1), Text("x"), handoff.OfferParams{To: Coder, Task: "write-patch"})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	last := StatusOf(t, d.Result)
	res, _, err := cl.Retransmit(agenttest.Remote(t, t2, s2), Text("x"), d.Hop)
	require.NoError(t, err)
	require.Equal(t, last, StatusOf(t, res), "a retransmission under another trace gets the identical status")

	forged := agenttest.Tamper(t, d.Offer.Handoff, "write-patch", "drop-table!")
	res, _, err = SendWith(agenttest.Remote(t, t1, s1), cl, forged, Text("x"))
	require.NoError(t, err)
	require.Equal(t, a2acore.Rejected, res.State, "a forged offer under a live trace")

	msg := Text("y")
	msg.Meta = map[string]any{observe.MetaTraceparent: "00-not-a-trace-context-01", observe.MetaTracestate: []any{1}}
	other, err := cl.Send(ctx, msg, handoff.OfferParams{To: Coder})
	require.NoError(t, err)
	require.Equal(t, state.Completed, other.State, "a malformed traceparent decided the verdict")
	require.EqualValues(t, 2, co.Work.Calls.Load())

	got := map[string][2]string{} // decision/hop -> trace id, parent span id
	for _, s := range p.Spans.Ended() {
		if s.Name() != observe.SpanHop {
			continue
		}
		parent := ""
		if s.Parent().IsValid() {
			parent = s.Parent().SpanID().String()
		}
		got[Attr(s, observe.KeyDecision)+"/"+Attr(s, observe.KeyHop)] = [2]string{s.SpanContext().TraceID().String(), parent}
	}
	fresh := got["accepted/"+string(other.Hop)]
	delete(got, "accepted/"+string(other.Hop))
	require.Equal(t, map[string][2]string{
		"accepted/" + string(d.Hop):       {t1, s1},
		"retransmission/" + string(d.Hop): {t2, s2},
		"rejected/":                       {t1, s1},
	}, got)
	require.NotEmpty(t, fresh[0], "no span for the offer with a malformed traceparent")
	require.NotContains(t, []string{t1, t2}, fresh[0])
	require.Empty(t, fresh[1], "a malformed traceparent became a parent")
}

// A Handoff a framework's callback put in the message itself (as adkhop's
// does) gets the trace context of the call too: the Client's interceptor
// adds it beside the Handoff.
func traceBeside(t *testing.T, l Line) {
	ctx := context.Background()
	p := NewProcess(t)
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder], func(d *Delegate) { d.Observe = p.Rec })
	out, err := ps[Planner].Agent.Offer(ctx, handoff.OfferParams{To: Coder, Dialog: Dialog})
	require.NoError(t, err)
	msg := Text("x")
	msg.Meta = map[string]any{}
	msg.Exts, err = carry.AttachHandoff(msg.Meta, msg.Exts, out.Handoff)
	require.NoError(t, err)
	const t1, s1 = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, _, err := SendWith(agenttest.Remote(t, t1, s1), co.Dial(t, l, ps[Planner]), nil, msg)
	require.NoError(t, err)
	require.Equal(t, a2acore.Completed, res.State)
	var hops int
	for _, s := range p.Spans.Ended() {
		if s.Name() == observe.SpanHop {
			hops++
			require.Equal(t, t1, s.SpanContext().TraceID().String())
			require.Equal(t, s1, s.Parent().SpanID().String())
			require.Equal(t, string(out.Offer.Hop), Attr(s, observe.KeyHop))
		}
	}
	require.Equal(t, 1, hops)
}
