package a2a03hop_test

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"

	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/observe"
	"github.com/agentproto/handoff/state"
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
	require.Equal(t, state.Completed, d.State)

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

// The trace context in Message.metadata decides nothing (A2A 0.3): a
// retransmission under another trace is still the same hop, a forged offer
// under a live trace is still refused.
func TestA2A_TraceContextDecidesNothing(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	rec, err := observe.New(observe.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
	require.NoError(t, err)
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], rec)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)

	const t1, t2, s1, s2 = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7", "b7ad6b7169203331"
	d, err := pc.Send(agenttest.Remote(t, t1, s1), cl, text("x"), handoff.OfferParams{To: coder, Task: "write-patch"})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	last := statusOf(t, d.Result.(*a2a.Task).Status.Message)
	res, _, err := pc.Retransmit(agenttest.Remote(t, t2, s2), cl, text("x"), d.Hop)
	require.NoError(t, err)
	require.Equal(t, last, statusOf(t, res.(*a2a.Message)), "a retransmission under another trace gets the identical status")
	forged := agenttest.Tamper(t, d.Offer.Handoff, "write-patch", "drop-table!")
	res, err = cl.SendMessage(ha2a.WithHandoff(agenttest.Remote(t, t1, s1), forged), &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State, "a forged offer under a live trace")
	require.EqualValues(t, 1, co.w.calls.Load())

	got := map[string]string{} // decision -> trace id
	for _, s := range spans.Ended() {
		if s.Name() != observe.SpanHop {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == observe.KeyDecision {
				got[kv.Value.AsString()] = s.SpanContext().TraceID().String()
			}
		}
	}
	require.Equal(t, map[string]string{"accepted": t1, "retransmission": t2, "rejected": t1}, got)
}
