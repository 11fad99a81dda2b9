package a2a1hop_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/a2acore/a2atest"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/integrations/observe"
)

const (
	planner = a2atest.Planner
	coder   = a2atest.Coder
	tester  = a2atest.Tester
)

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
	pp, bp, cp := a2atest.NewProcess(t), a2atest.NewProcess(t), a2atest.NewProcess(t) // planner, coder (A2A server), tester (MCP server)
	var sent [3]offered

	// The tester: an MCP server over streamable HTTP whose tool passes the
	// work back to the coder (hop 3).
	co := a2atest.Serve(t, line{}, ps[coder], func(d *a2atest.Delegate) { d.Observe = bp.Rec })
	toCoder := co.Dial(t, line{}, ps[tester])
	mw, err := mcphop.Server(mcphop.ServerConfig{Agent: ps[tester].Agent, Observe: cp.Rec,
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
		d, err := toCoder.Send(ctx, a2atest.Text("review the test"), handoff.OfferParams{To: coder, From: in, Task: "review"})
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
	co.Work.Do(func(ctx context.Context, in *handoff.Received, x a2atest.Exec) error {
		if in.Offer().Task == "review" {
			return x.Write(ctx, a2acore.Completed)
		}
		d, err := mc.Call(ctx, session, &mcp.CallToolParams{Name: "test", Arguments: args{What: "the pager"}},
			handoff.OfferParams{To: tester, From: in, Task: "test"})
		if err != nil || d.State != state.Completed {
			t.Logf("hop 2: %v", err)
			return x.Write(ctx, a2acore.Failed)
		}
		sent[1] = offeredOf(d.Offer)
		return x.Write(ctx, a2acore.Completed)
	})

	// The planner sends hop 1 from its own span.
	pctx, root := pp.TP.Tracer("planner").Start(ctx, "plan")
	d, err := co.Dial(t, line{}, ps[planner]).Send(pctx, a2atest.Text("fix the pager"), handoff.OfferParams{To: coder, Task: "fix"})
	root.End()
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	sent[0] = offeredOf(d.Offer)

	traceID := root.SpanContext().TraceID()
	byHop := map[string]sdktrace.ReadOnlySpan{}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, p := range []*a2atest.Process{pp, bp, cp} {
		for _, s := range p.Spans.Ended() {
			require.Equal(t, traceID, s.SpanContext().TraceID(), "span %s of another trace", s.Name())
			byID[s.SpanContext().SpanID().String()] = s
			if s.Name() == observe.SpanHop {
				byHop[a2atest.Attr(s, observe.KeyHop)] = s
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
		for k, want := range map[attribute.Key]string{observe.KeyHop: string(sent[i].hop), observe.KeyOfferDigest: sent[i].digest,
			observe.KeyTransport: transports[i], observe.KeyDecision: observe.DecisionAccepted} {
			require.Equal(t, want, a2atest.Attr(h, k), "hop %d: %s", i+1, k)
		}
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
		require.Equal(t, a2atest.Attr(parent, observe.KeyOfferDigest), a2atest.Attr(s, observe.KeyOfferDigest))
	}
	require.Equal(t, 3, receives)
}
