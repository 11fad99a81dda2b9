package gateway_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/a2a1hop/gateway"
)

// What a hop through the gateway costs. Each iteration sends one
// message/send over loopback HTTP (JSON-RPC) three ways, to the same
// upstream work (submitted, working, an artifact, completed):
//
//   - direct: an A2A client straight to the upstream, no handoff;
//   - middleware: a2a1hop's Client to an a2asrv server whose executor is
//     a2a1hop's wrapping that work, in-process: the signature work of a
//     hop (the offer signed and verified, "accepted" and "completed"
//     signed and verified) with no gateway;
//   - gateway: a2a1hop's Client to a Delegate in front of the upstream:
//     the same signature work, plus a second round trip and the relay of
//     the upstream's events to the gateway's own task.
//
// The three alternate within each iteration, so that all three see the
// same machine. It reports the median of each (ns/direct, ns/middleware,
// ns/gateway), the ratios of the medians middleware-x-direct (a hop
// through the A2A 1.0 middleware against the plain call), x-direct
// (gateway/direct) and x-middleware (gateway/middleware), and added-us,
// what the gateway adds
// beyond the signature work (the median gateway less the median
// middleware), all from the same iterations. Figures, not pass or fail:
//
//	go test -run '^$' -bench Gateway -benchtime 300x ./gateway
func BenchmarkGateway(b *testing.B) {
	w := world(b)
	real := func(c *handoff.Config) { c.Now = nil } // a clock that moves: the asking schedule is real time
	up := newUpstream(b, upstreamOptions{})
	direct, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(up.URL+"/a2a", a2a.TransportProtocolJSONRPC)})
	require.NoError(b, err)
	b.Cleanup(func() { _ = direct.Destroy() })

	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: w.Agent(coder, real), Executor: up})
	require.NoError(b, err)
	mw := httptest.NewServer(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
	b.Cleanup(mw.Close)
	mwHC, mwCl := delegator(b, w.Agent(planner, real), mw.URL, overJSONRPC, a2a1hop.ClientConfig{})

	_, gw := delegate(b, w, up, gateway.DelegateConfig{Agent: w.Agent(coder, real)})
	gwHC, gwCl := delegator(b, w.Agent(planner, real), gw, overJSONRPC, a2a1hop.ClientConfig{})

	ctx := context.Background()
	var tDirect, tMW, tGW []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := direct.SendMessage(ctx, &a2a.SendMessageRequest{Message: message("ctx-bench", "complete")})
		t1 := time.Now()
		if task, ok := res.(*a2a.Task); err != nil || !ok || task.Status.State != a2a.TaskStateCompleted {
			b.Fatalf("direct: %v %v", res, err)
		}
		d, err := mwHC.Send(ctx, mwCl, message("ctx-bench", "complete"), handoff.OfferParams{To: coder})
		t2 := time.Now()
		if err != nil || d.State != state.Completed {
			b.Fatalf("middleware: %v %v", d, err)
		}
		d, err = gwHC.Send(ctx, gwCl, message("ctx-bench", "complete"), handoff.OfferParams{To: coder})
		t3 := time.Now()
		if err != nil || d.State != state.Completed {
			b.Fatalf("gateway: %v %v", d, err)
		}
		tDirect, tMW, tGW = append(tDirect, t1.Sub(t0)), append(tMW, t2.Sub(t1)), append(tGW, t3.Sub(t2))
	}
	mDirect, mMW, mGW := median(tDirect), median(tMW), median(tGW)
	b.ReportMetric(float64(mDirect.Nanoseconds()), "ns/direct")
	b.ReportMetric(float64(mMW.Nanoseconds()), "ns/middleware")
	b.ReportMetric(float64(mGW.Nanoseconds()), "ns/gateway")
	b.ReportMetric(float64(mMW)/float64(mDirect), "middleware-x-direct")
	b.ReportMetric(float64(mGW)/float64(mDirect), "x-direct")
	b.ReportMetric(float64(mGW)/float64(mMW), "x-middleware")
	b.ReportMetric(float64((mGW - mMW).Microseconds()), "added-us")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
