package mcphop_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/integrations/observe"
)

// The trace context in _meta is not signed and decides nothing: the hop's
// span joins the trace it names, and the verdicts are those the offers
// get without it. A retransmission under another trace is still the same
// hop (the tool does not run again, the identical status comes back); a
// forged offer under a live trace is still refused; a malformed
// traceparent is ignored and the offer accepted.
func TestMCP_TraceContextDecidesNothing(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	rec, err := observe.New(observe.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
	require.NoError(t, err)
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], planner, rec)
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	s := connect(t, pc, co.server, true)

	const t1, t2 = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
	out, err := ps[planner].Agent.Offer(context.Background(), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	first, err := s.CallTool(hmcp.WithHandoff(agenttest.Remote(t, t1, "00f067aa0ba902b7"), out.Handoff), call("x"))
	require.NoError(t, err)
	require.False(t, first.IsError)
	again, err := s.CallTool(hmcp.WithHandoff(agenttest.Remote(t, t2, "b7ad6b7169203331"), out.Handoff), call("x"))
	require.NoError(t, err)
	require.Equal(t, statusOf(t, first), statusOf(t, again), "a retransmission under another trace gets the identical status")
	require.EqualValues(t, 1, co.calls.Load(), "a retransmission under another trace ran the tool again")

	forged := agenttest.Tamper(t, out.Handoff, `"`+dialog+`"`, `"ctx-other"`)
	res, err := s.CallTool(hmcp.WithHandoff(agenttest.Remote(t, t1, "00f067aa0ba902b7"), forged), call("x"))
	require.NoError(t, err)
	require.True(t, res.IsError, "a forged offer under a live trace was accepted")

	other, err := ps[planner].Agent.Offer(context.Background(), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	p := call("y")
	p.Meta = mcp.Meta{observe.MetaTraceparent: "00-not-a-trace-context-01", observe.MetaTracestate: 7}
	res, err = s.CallTool(hmcp.WithHandoff(context.Background(), other.Handoff), p)
	require.NoError(t, err)
	require.False(t, res.IsError, "a malformed traceparent decided the verdict")
	require.EqualValues(t, 2, co.calls.Load())

	got := map[string][2]string{} // decision -> trace id, parent span id
	for _, sp := range spans.Ended() {
		if sp.Name() != observe.SpanHop {
			continue
		}
		a := attrs(sp.Attributes())
		parent := ""
		if sp.Parent().IsValid() {
			parent = sp.Parent().SpanID().String()
		}
		key := a[string(observe.KeyDecision)] + "/" + a[string(observe.KeyHop)]
		got[key] = [2]string{sp.SpanContext().TraceID().String(), parent}
	}
	require.Equal(t, map[string][2]string{
		"accepted/" + string(out.Offer.Hop):       {t1, "00f067aa0ba902b7"},
		"retransmission/" + string(out.Offer.Hop): {t2, "b7ad6b7169203331"},
		"rejected/": {t1, "00f067aa0ba902b7"},
	}, withoutRoot(got, other.Offer.Hop))
	root := got["accepted/"+string(other.Offer.Hop)]
	require.NotEmpty(t, root[0], "no span for the offer with a malformed traceparent")
	require.NotContains(t, []string{t1, t2}, root[0])
	require.Empty(t, root[1], "a malformed traceparent became a parent")
}

func withoutRoot(m map[string][2]string, hop handoff.HopID) map[string][2]string {
	out := map[string][2]string{}
	for k, v := range m {
		if k != "accepted/"+string(hop) {
			out[k] = v
		}
	}
	return out
}
