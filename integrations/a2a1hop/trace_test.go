package a2a1hop_test

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/integrations/observe"
)

// process is one process's tracing: its own provider and exporter, so that
// nothing but the messages can carry a trace from one to the other.
type process struct {
	spans *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider
	rec   *observe.Recorder
}

func newProcess(t *testing.T) *process {
	t.Helper()
	p := &process{spans: tracetest.NewSpanRecorder()}
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans))
	t.Cleanup(func() { _ = p.tp.Shutdown(context.Background()) })
	var err error
	p.rec, err = observe.New(observe.Options{TracerProvider: p.tp})
	require.NoError(t, err)
	return p
}

// offered is what a delegator signed for one hop: its hop id and the
// handoff digest of its offer.
type offered struct {
	hop    handoff.HopID
	digest string
}

func offeredOf(out *handoff.Outgoing) offered {
	return offered{hop: out.Offer.Hop, digest: out.Handoff.Offer.Digest().String()}
}

// One trace across two servers and three hops: the planner (a client)
// hands work to the coder over A2A 1.0 (hop 1), the coder to the tester
// over MCP (hop 2), the tester back to the coder over A2A 1.0 (hop 3).
// Each process exports its own spans; the W3C trace context travels only in
// the message metadata and _meta, beside the Handoff. Every span has the
// planner's trace id, each hop's span is the child of the span the
// delegator sent from, and carries that hop's id and offer digest.
func TestTrace_OneTraceAcrossThreeHops(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE,
		// The tester's call back to the coder is a known re-entry (HC-49).
		Chain: handoff.ChainPolicy{AllowReentry: []handoff.AgentID{coder}}}, agenttest.Spec{ID: tester, Format: handoff.JWS})
	pp, bp, cp := newProcess(t), newProcess(t), newProcess(t) // planner, coder (A2A server), tester (MCP server)
	var sent [3]offered

	// The tester: an MCP server over streamable HTTP whose tool passes the
	// work back to the coder (hop 3).
	co := newNode(t, ps[coder], func(c *a2a1hop.ServerConfig) { c.Observe = bp.rec })
	tc := newClient(t, ps[tester], false)
	toCoder := dial(t, tester, co, tc)
	mw, err := mcphop.Server(mcphop.ServerConfig{Agent: ps[tester].Agent, Observe: cp.rec,
		Peer: func(*mcp.CallToolRequest) handoff.AgentID { return coder }})
	require.NoError(t, err)
	ms := mcp.NewServer(&mcp.Implementation{Name: "tester", Version: "v1"}, nil)
	ms.AddReceivingMiddleware(mw)
	type args struct {
		What string `json:"what"`
	}
	mcp.AddTool(ms, &mcp.Tool{Name: "test"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, any, error) {
		in, ok := mcphop.FromContext(ctx)
		if !ok {
			return nil, nil, fmt.Errorf("no offer")
		}
		d, err := tc.Send(ctx, toCoder, text("review the test"), handoff.OfferParams{To: coder, From: in, Task: "review"})
		if err != nil {
			return nil, nil, err
		}
		sent[2] = offeredOf(d.Offer)
		if d.State != state.Completed {
			return nil, nil, fmt.Errorf("hop 3 ended %s %s", d.State, d.Reason)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "tested"}}}, nil, nil
	})
	mh := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil))
	t.Cleanup(mh.Close)

	// The coder: hop 1 passes the work to the tester over MCP (hop 2); hop
	// 3 is the review, done at once.
	mc, err := mcphop.NewClient(mcphop.ClientConfig{Agent: ps[coder].Agent})
	require.NoError(t, err)
	mcl := mcp.NewClient(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
	mcl.AddSendingMiddleware(mc.Middleware())
	session, err := mcl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mh.URL}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { session.Close() })
	co.w.body = func(ctx context.Context, in *handoff.Received, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
		if in.Offer().Task == "review" {
			return done(ec, a2a.TaskStateCompleted)
		}
		d, err := mc.Call(ctx, session, &mcp.CallToolParams{Name: "test", Arguments: args{What: "the pager"}},
			handoff.OfferParams{To: tester, From: in, Task: "test"})
		if err != nil || d.State != state.Completed {
			t.Logf("hop 2: %v", err)
			return done(ec, a2a.TaskStateFailed)
		}
		sent[1] = offeredOf(d.Offer)
		return done(ec, a2a.TaskStateCompleted)
	}

	// The planner sends hop 1 from its own span.
	pctx, root := pp.tp.Tracer("planner").Start(ctx, "plan")
	pc := newClient(t, ps[planner], false)
	d, err := pc.Send(pctx, dial(t, planner, co, pc), text("fix the pager"), handoff.OfferParams{To: coder, Task: "fix"})
	root.End()
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	sent[0] = offeredOf(d.Offer)

	traceID := root.SpanContext().TraceID()
	byHop := map[string]sdktrace.ReadOnlySpan{}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, p := range []*process{pp, bp, cp} {
		for _, s := range p.spans.Ended() {
			require.Equal(t, traceID, s.SpanContext().TraceID(), "span %s of another trace", s.Name())
			byID[s.SpanContext().SpanID().String()] = s
			if s.Name() == observe.SpanHop {
				byHop[attr(s, observe.KeyHop)] = s
			}
		}
	}
	require.Len(t, byHop, 3)
	hops := []sdktrace.ReadOnlySpan{byHop[string(sent[0].hop)], byHop[string(sent[1].hop)], byHop[string(sent[2].hop)]}
	for i, h := range hops {
		require.NotNil(t, h, "no span for hop %d", i+1)
	}
	parents := []string{root.SpanContext().SpanID().String(), hops[0].SpanContext().SpanID().String(), hops[1].SpanContext().SpanID().String()}
	transports := []string{"a2a", "mcp", "a2a"}
	for i, h := range hops {
		require.Equal(t, string(sent[i].hop), attr(h, observe.KeyHop), "hop %d", i+1)
		require.Equal(t, sent[i].digest, attr(h, observe.KeyOfferDigest), "hop %d", i+1)
		require.Equal(t, transports[i], attr(h, observe.KeyTransport), "hop %d", i+1)
		require.Equal(t, observe.DecisionAccepted, attr(h, observe.KeyDecision), "hop %d", i+1)
		require.True(t, h.Parent().IsRemote(), "hop %d: the parent came in the message", i+1)
		require.Equal(t, parents[i], h.Parent().SpanID().String(), "hop %d's parent", i+1)
	}
	// Each receive span is a child of its hop's span and names the same
	// offer.
	receives := 0
	for _, s := range byID {
		if s.Name() != observe.SpanReceive {
			continue
		}
		receives++
		parent, ok := byID[s.Parent().SpanID().String()]
		require.True(t, ok, "receive span without a recorded parent")
		require.Equal(t, observe.SpanHop, parent.Name())
		require.Equal(t, attr(parent, observe.KeyOfferDigest), attr(s, observe.KeyOfferDigest))
	}
	require.Equal(t, 3, receives)
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.Emit()
		}
	}
	return ""
}

// The trace context in Message.metadata is not signed and decides nothing:
// a retransmission under another trace is still the same hop (identical
// status, the executor does not run again), a forged offer under a live
// trace is still refused, a malformed traceparent is ignored. The hop's
// span joins whatever trace the message names, and only that.
func TestA2A1_TraceContextDecidesNothing(t *testing.T) {
	ctx := context.Background()
	p := newProcess(t)
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], func(c *a2a1hop.ServerConfig) { c.Observe = p.rec })
	pc := newClient(t, ps[planner], false)
	cl := dial(t, planner, co, pc)

	const t1, t2, s1, s2 = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7", "b7ad6b7169203331"
	d, err := pc.Send(agenttest.Remote(t, t1, s1), cl, text("x"), handoff.OfferParams{To: coder, Task: "write-patch"})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	last := statusOf(t, d.Result.(*a2a.Task).Status.Message)
	res, _, err := pc.Retransmit(agenttest.Remote(t, t2, s2), cl, text("x"), d.Hop)
	require.NoError(t, err)
	require.Equal(t, last, statusOf(t, res.(*a2a.Message)), "a retransmission under another trace gets the identical status")

	forged := agenttest.Tamper(t, d.Offer.Handoff, "write-patch", "drop-table!")
	res, err = cl.SendMessage(a2a1hop.WithHandoff(agenttest.Remote(t, t1, s1), forged), &a2a.SendMessageRequest{Message: text("x")})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State, "a forged offer under a live trace")

	msg := text("y")
	msg.Metadata = map[string]any{observe.MetaTraceparent: "00-not-a-trace-context-01", observe.MetaTracestate: []any{1}}
	other, err := pc.Send(ctx, cl, msg, handoff.OfferParams{To: coder})
	require.NoError(t, err)
	require.Equal(t, state.Completed, other.State, "a malformed traceparent decided the verdict")
	require.EqualValues(t, 2, co.w.calls.Load())

	got := map[string][2]string{} // decision/hop -> trace id, parent span id
	for _, s := range p.spans.Ended() {
		if s.Name() != observe.SpanHop {
			continue
		}
		parent := ""
		if s.Parent().IsValid() {
			parent = s.Parent().SpanID().String()
		}
		got[attr(s, observe.KeyDecision)+"/"+attr(s, observe.KeyHop)] = [2]string{s.SpanContext().TraceID().String(), parent}
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
func TestA2A1_TraceContextBesideAnAttachedHandoff(t *testing.T) {
	ctx := context.Background()
	p := newProcess(t)
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], func(c *a2a1hop.ServerConfig) { c.Observe = p.rec })
	cl := dial(t, planner, co, newClient(t, ps[planner], false))
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	msg := text("x")
	msg.Metadata = map[string]any{}
	msg.Extensions, err = carry.AttachHandoff(msg.Metadata, msg.Extensions, out.Handoff)
	require.NoError(t, err)
	const t1, s1 = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, err := cl.SendMessage(agenttest.Remote(t, t1, s1), &a2a.SendMessageRequest{Message: msg})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, res.(*a2a.Task).Status.State)
	var hops int
	for _, s := range p.spans.Ended() {
		if s.Name() == observe.SpanHop {
			hops++
			require.Equal(t, t1, s.SpanContext().TraceID().String())
			require.Equal(t, s1, s.Parent().SpanID().String())
			require.Equal(t, string(out.Offer.Hop), attr(s, observe.KeyHop))
		}
	}
	require.Equal(t, 1, hops)
}
