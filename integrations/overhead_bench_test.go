package integrations_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	carrya2a "github.com/agentproto/handoff/a2a"
	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
	carrymcp "github.com/agentproto/handoff/mcp"
	"github.com/agentproto/handoff/state"
)

// What the middleware adds to a round trip, against the signature work it
// must do. BenchmarkMiddlewareOverhead runs, on loopback HTTP, an A2A
// message/send and an MCP tools/call, each iteration once plain and once
// carrying a handoff through the middleware of both sides, and the
// signature floor of such a hop: signing and verifying the offer, and
// signing and verifying each status the round trip returns (A2A:
// "accepted" and "completed"; MCP: "completed"). It reports x-plain, the
// handoff round trip's time as a multiple of the plain one's, and x-floor,
// the time the handoff adds to the round trip as a multiple of the floor,
// all measured in the same iterations.
//
// Each iteration also runs the round trip "carried": the same SDKs with no
// middleware, exchanging the very messages the handoff round trip does (the
// Handoff in the request's metadata, the statuses in the replies, and over
// A2A the task's "working" state that carries "accepted"), signed once
// before the loop. x-floor-carried, the time the handoff round trip takes
// beyond the carried one as a multiple of the floor, is what the
// middleware itself adds; x-floor less x-floor-carried is what the SDKs
// spend on carrying the handoff's octets and states.
//
// The signing keys count and time their signatures, in the round trip and
// in the floor alike: extra-signs is how many more signatures the round
// trip made than the floor (zero: the middleware signs only what it
// sends), and x-sign-in-situ how long the round trip's signatures took
// against the floor's same number, the same signing work measured amid
// the SDKs' work instead of back to back. It reports figures, not pass or
// fail:
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
	signs   *signCount // of both keys
}

// signCount counts the signatures of the keys that share it, and their
// time.
type signCount struct{ n, ns atomic.Int64 }

func (c *signCount) load() (int64, time.Duration) { return c.n.Load(), time.Duration(c.ns.Load()) }

// countingKey is an ECDSA key that counts its signatures.
type countingKey struct {
	*ecdsa.PrivateKey
	c *signCount
}

func (k countingKey) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	start := time.Now()
	sig, err := k.PrivateKey.Sign(r, digest, opts)
	k.c.ns.Add(int64(time.Since(start)))
	k.c.n.Add(1)
	return sig, err
}

func newOHWorld(b *testing.B) *ohWorld {
	w := &ohWorld{signs: &signCount{}}
	var err error
	for _, s := range []**handoff.Signer{&w.ps, &w.cs} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if *s, err = handoff.NewSigner(countingKey{k, w.signs}, handoff.JWS, nil); err != nil {
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
// the plain round trip, of the carried one, of the one carrying a handoff
// and of the floor, each iteration running all four, so that a drift of the
// machine's load weighs on all alike; and the signatures of the handoff
// round trip and of the floor, counted and timed by the keys.
type overhead struct {
	plain, carried, handoff, floor time.Duration
	signs, floorSigns              int64
	signTime, floorSignTime        time.Duration
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// hop runs the handoff round trip f and then the floor of its statuses,
// adding their times and their signatures to o.
func (o *overhead) hop(b *testing.B, w *ohWorld, statuses int, f func()) {
	n0, t0 := w.signs.load()
	o.handoff += timed(f)
	n1, t1 := w.signs.load()
	o.floor += w.floor(b, statuses)
	n2, t2 := w.signs.load()
	o.signs, o.signTime = o.signs+n1-n0, o.signTime+t1-t0
	o.floorSigns, o.floorSignTime = o.floorSigns+n2-n1, o.floorSignTime+t2-t1
}

func (o *overhead) report(b *testing.B) {
	n := time.Duration(b.N)
	b.ReportMetric(float64((o.plain / n).Nanoseconds()), "plain-ns")
	b.ReportMetric(float64((o.carried / n).Nanoseconds()), "carried-ns")
	b.ReportMetric(float64((o.handoff / n).Nanoseconds()), "handoff-ns")
	b.ReportMetric(float64((o.floor / n).Nanoseconds()), "floor-ns")
	b.ReportMetric(float64(o.handoff)/float64(o.plain), "x-plain")
	b.ReportMetric(float64(o.handoff-o.plain)/float64(o.floor), "x-floor")
	b.ReportMetric(float64(o.handoff-o.carried)/float64(o.floor), "x-floor-carried")
	b.ReportMetric(float64(o.signs-o.floorSigns)/float64(b.N), "extra-signs")
	b.ReportMetric(float64(o.signTime)/float64(o.floorSignTime), "x-sign-in-situ")
}

// sample is one hop's Handoff and statuses, signed once, for the carried
// round trips.
type sample struct {
	h                   *handoff.Handoff
	accepted, completed handoff.Signed
}

func (w *ohWorld) sample(b *testing.B) sample {
	hop, _ := handoff.NewHopID(nil)
	now := handoff.TimeOf(time.Now())
	o, err := w.ps.SignOffer(&handoff.Offer{Hop: hop, Dialog: "ctx-7c1e", Task: "fix-pager", Iss: ohPlanner, Aud: ohCoder, Iat: now, Exp: now + 120})
	if err != nil {
		b.Fatal(err)
	}
	sm := sample{h: &handoff.Handoff{Offer: o}}
	for st, out := range map[state.State]*handoff.Signed{state.Accepted: &sm.accepted, state.Completed: &sm.completed} {
		if *out, err = w.cs.SignStatus(&handoff.Status{Hop: hop, Offer: o.Digest(), Iss: ohCoder, Aud: ohPlanner, Iat: now, State: st}); err != nil {
			b.Fatal(err)
		}
	}
	return sm
}

// ohCarried answers as the handoff executor does, with the sample's
// statuses and without the middleware: "working" carrying "accepted", then
// "completed" carrying "completed".
type ohCarried struct{ sample }

func (x ohCarried) status(reqCtx *a2asrv.RequestContext, text string, st handoff.Signed) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text})
	m.Metadata = map[string]any{}
	carrya2a.AttachStatus(m.Metadata, st)
	m.Extensions = []string{ha2a.ExtensionURI}
	return m
}

func (x ohCarried) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, x.status(reqCtx, "accepted", x.accepted))); err != nil {
		return err
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, x.status(reqCtx, "completed", x.completed))
	ev.Final = true
	return q.Write(ctx, ev)
}

func (ohCarried) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return ohWork{}.Cancel(ctx, reqCtx, q)
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
	sm := w.sample(b)

	b.Run("a2a", func(b *testing.B) {
		dial := func(exec a2asrv.AgentExecutor) *a2aclient.Client {
			srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
			b.Cleanup(srv.Close)
			cl, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: srv.URL}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = cl.Destroy() })
			return cl
		}
		plain, carried := dial(ohWork{}), dial(ohCarried{sm})
		carriedMeta := map[string]any{}
		carriedExts, err := carrya2a.AttachHandoff(carriedMeta, nil, sm.h)
		if err != nil {
			b.Fatal(err)
		}

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
			o.carried += timed(func() {
				msg := message()
				msg.Metadata, msg.Extensions = carriedMeta, carriedExts
				if _, err := carried.SendMessage(ctx, &a2a.MessageSendParams{Message: msg}); err != nil {
					b.Fatal(err)
				}
			})
			o.hop(b, w, 2, func() { // "accepted" and "completed"
				d, err := hc.Send(ctx, client, message(), handoff.OfferParams{To: ohCoder, Task: "fix-pager"})
				if err != nil || len(d.Statuses) != 2 {
					b.Fatal(err, d)
				}
			})
		}
		o.report(b)
	})

	b.Run("mcp", func(b *testing.B) {
		tool := func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "patched"}}}, nil, nil
		}
		// The carried tool answers as the middleware does, with the
		// sample's "completed" in the result's _meta.
		carriedTool := func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res := &mcp.CallToolResult{Meta: mcp.Meta{}, Content: []mcp.Content{&mcp.TextContent{Text: "patched"}}}
			carrymcp.AttachStatus(res.Meta, sm.completed)
			return res, nil, nil
		}
		serve := func(mw mcp.Middleware, tool mcp.ToolHandlerFor[struct{}, any]) *httptest.Server {
			server := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
			if mw != nil {
				server.AddReceivingMiddleware(mw)
			}
			mcp.AddTool(server, &mcp.Tool{Name: "write_patch"}, tool)
			return httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
		}
		connect := func(srv *httptest.Server) *mcp.ClientSession {
			b.Cleanup(srv.Close)
			s, err := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
		plain, carried := connect(serve(nil, tool)), connect(serve(nil, carriedTool))
		carriedMeta := mcp.Meta{}
		if err := carrymcp.AttachHandoff(carriedMeta, sm.h); err != nil {
			b.Fatal(err)
		}

		mw, err := hmcp.Server(hmcp.ServerConfig{Agent: w.coder, Peer: func(*mcp.CallToolRequest) handoff.AgentID { return ohPlanner }})
		if err != nil {
			b.Fatal(err)
		}
		srv := serve(mw, tool)
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
			o.carried += timed(func() {
				if _, err := carried.CallTool(ctx, &mcp.CallToolParams{Name: "write_patch", Meta: carriedMeta}); err != nil {
					b.Fatal(err)
				}
			})
			o.hop(b, w, 1, func() { // "completed"
				d, err := pc.Call(ctx, session, &mcp.CallToolParams{Name: "write_patch"},
					handoff.OfferParams{To: ohCoder, Dialog: "ctx-7c1e", Task: "fix-pager"})
				if err != nil || len(d.Statuses) != 1 {
					b.Fatal(err, d)
				}
			})
		}
		o.report(b)
	})
}
