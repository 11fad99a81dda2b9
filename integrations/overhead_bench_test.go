package integrations_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/state"
)

// What the middleware adds to a round trip, against the signature work it
// must do. BenchmarkMiddlewareOverhead runs, on loopback HTTP, an A2A
// message/send and an MCP tools/call, each iteration once plain and once
// carrying a handoff through the middleware of both sides, and the
// signature floor of such a hop: signing and verifying the offer, and
// signing and verifying each status the round trip returns (A2A:
// "accepted" and "completed"; MCP: "completed"). It reports x-floor, the
// time the handoff adds to the round trip as a multiple of the floor, all
// measured in the same iterations. It reports figures, not pass or fail:
//
//	go test -run '^$' -bench MiddlewareOverhead ./integrations
const (
	ohPlanner = handoff.AgentID("spiffe://a.example/planner")
	ohCoder   = handoff.AgentID("spiffe://b.example/coder")
)

type ohWorld struct {
	ps, cs  *handoff.Signer
	trust   *handoff.Trust
	planner *handoff.Agent
	coder   *handoff.Agent
}

func newOHWorld(b *testing.B) *ohWorld {
	w := &ohWorld{}
	var err error
	for _, s := range []**handoff.Signer{&w.ps, &w.cs} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if *s, err = handoff.NewSigner(k, handoff.JWS, nil); err != nil {
			b.Fatal(err)
		}
	}
	if w.trust, err = handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{ohPlanner: {w.ps.Key()}, ohCoder: {w.cs.Key()}}); err != nil {
		b.Fatal(err)
	}
	if w.planner, err = handoff.NewAgent(handoff.Config{ID: ohPlanner, Signer: w.ps, Trust: w.trust}); err != nil {
		b.Fatal(err)
	}
	if w.coder, err = handoff.NewAgent(handoff.Config{ID: ohCoder, Signer: w.cs, Trust: w.trust}); err != nil {
		b.Fatal(err)
	}
	return w
}

// floor does the signature work of one hop with statuses statuses and
// returns the time it took.
func (w *ohWorld) floor(b *testing.B, statuses int) time.Duration {
	var lim handoff.Limits
	start := time.Now()
	{
		hop, _ := handoff.NewHopID(nil)
		now := handoff.TimeOf(time.Now())
		o, err := w.ps.SignOffer(&handoff.Offer{Hop: hop, Dialog: "ctx-7c1e", Task: "fix-pager", Iss: ohPlanner, Aud: ohCoder, Iat: now, Exp: now + 120})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := handoff.OpenOffer(o, w.trust, lim); err != nil {
			b.Fatal(err)
		}
		for _, st := range []state.State{state.Accepted, state.Completed}[:statuses] {
			s, err := w.cs.SignStatus(&handoff.Status{Hop: hop, Offer: o.Digest(), Iss: ohCoder, Aud: ohPlanner, Iat: now, State: st})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := handoff.OpenStatus(s, w.trust, lim); err != nil {
				b.Fatal(err)
			}
		}
	}
	return time.Since(start)
}

// overhead accumulates, over the iterations of one benchmark, the time of
// the plain round trip, of the one carrying a handoff and of the floor, each
// iteration running all three, so that a drift of the machine's load
// weighs on all alike.
type overhead struct{ plain, handoff, floor time.Duration }

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func (o *overhead) report(b *testing.B) {
	n := time.Duration(b.N)
	b.ReportMetric(float64((o.plain / n).Nanoseconds()), "plain-ns")
	b.ReportMetric(float64((o.handoff / n).Nanoseconds()), "handoff-ns")
	b.ReportMetric(float64((o.floor / n).Nanoseconds()), "floor-ns")
	b.ReportMetric(float64(o.handoff-o.plain)/float64(o.floor), "x-floor")
}

type ohWork struct{}

func (ohWork) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (ohWork) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func BenchmarkMiddlewareOverhead(b *testing.B) {
	ctx := context.Background()
	w := newOHWorld(b)

	b.Run("a2a", func(b *testing.B) {
		plainSrv := httptest.NewServer(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(ohWork{})))
		defer plainSrv.Close()
		plain, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: plainSrv.URL}})
		if err != nil {
			b.Fatal(err)
		}
		defer plain.Destroy()

		exec, err := ha2a.NewExecutor(ha2a.ServerConfig{Agent: w.coder, Executor: ohWork{}})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(ha2a.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
			func(*http.Request) (handoff.AgentID, bool) { return ohPlanner, true }))
		defer srv.Close()
		hc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: w.planner})
		if err != nil {
			b.Fatal(err)
		}
		client, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: srv.URL}},
			a2aclient.WithInterceptors(hc))
		if err != nil {
			b.Fatal(err)
		}
		defer client.Destroy()
		message := func() *a2a.Message {
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "fix the off-by-one in pager.go"})
			msg.ContextID = "ctx-7c1e"
			return msg
		}
		var o overhead
		for b.Loop() {
			o.plain += timed(func() {
				if _, err := plain.SendMessage(ctx, &a2a.MessageSendParams{Message: message()}); err != nil {
					b.Fatal(err)
				}
			})
			o.handoff += timed(func() {
				d, err := hc.Send(ctx, client, message(), handoff.OfferParams{To: ohCoder, Task: "fix-pager"})
				if err != nil || len(d.Statuses) != 2 {
					b.Fatal(err, d)
				}
			})
			o.floor += w.floor(b, 2) // "accepted" and "completed"
		}
		o.report(b)
	})

	b.Run("mcp", func(b *testing.B) {
		tool := func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "patched"}}}, nil, nil
		}
		serve := func(mw mcp.Middleware) *httptest.Server {
			server := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
			if mw != nil {
				server.AddReceivingMiddleware(mw)
			}
			mcp.AddTool(server, &mcp.Tool{Name: "write_patch"}, tool)
			return httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
		}
		plainSrv := serve(nil)
		defer plainSrv.Close()
		plain, err := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: plainSrv.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer plain.Close()

		mw, err := hmcp.Server(hmcp.ServerConfig{Agent: w.coder, Peer: func(*mcp.CallToolRequest) handoff.AgentID { return ohPlanner }})
		if err != nil {
			b.Fatal(err)
		}
		srv := serve(mw)
		defer srv.Close()
		pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: w.planner})
		if err != nil {
			b.Fatal(err)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil)
		client.AddSendingMiddleware(pc.Middleware())
		session, err := client.Connect(ctx, pc.Transport(&mcp.StreamableClientTransport{Endpoint: srv.URL}), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer session.Close()
		var o overhead
		for b.Loop() {
			o.plain += timed(func() {
				if _, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "write_patch"}); err != nil {
					b.Fatal(err)
				}
			})
			o.handoff += timed(func() {
				d, err := pc.Call(ctx, session, &mcp.CallToolParams{Name: "write_patch"},
					handoff.OfferParams{To: ohCoder, Dialog: "ctx-7c1e", Task: "fix-pager"})
				if err != nil || len(d.Statuses) != 1 {
					b.Fatal(err, d)
				}
			})
			o.floor += w.floor(b, 1) // "completed"
		}
		o.report(b)
	})
}
