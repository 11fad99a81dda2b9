package mcphop_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/state"
)

// MCP protocol 2026-07-28 over a stateless streamable HTTP server: every
// request is its own session and carries its own _meta. Each tools/call is
// verified on its own (a call without a Handoff is refused, whatever came
// before), a retransmission is answered with the identical octets of the
// hop's last status without running the tool again (HC-38, HC-39, HC-67),
// and the asynchronous cancel of a call in flight reaches its running
// handler's context, with its cause.
func TestMCP_StatelessProtocol20260728_EachCallOnItsOwn(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, nil)
	pc, s := statelessSession(t, co, ps[planner].Agent)
	require.Equal(t, "2026-07-28", s.InitializeResult().ProtocolVersion)

	d1, err := pc.Call(ctx, s, call("one"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	d2, err := pc.Call(ctx, s, call("two"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d1.State)
	require.Equal(t, state.Completed, d2.State)
	require.EqualValues(t, 2, co.calls.Load())
	co.mu.Lock()
	require.Len(t, co.seen, 2)
	require.Equal(t, d1.Hop, co.seen[0].Offer().Hop, "each call verified its own offer")
	require.Equal(t, d2.Hop, co.seen[1].Offer().Hop)
	co.mu.Unlock()

	// A call without a Handoff after two with one: refused on its own.
	res, err := s.CallTool(ctx, call("three"))
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.EqualValues(t, 2, co.calls.Load(), "the tool ran for a call without a Handoff")

	// A retransmission: the identical octets, the tool not run again.
	last := statusOf(t, d1.Result)
	res, sts, err := pc.Retransmit(ctx, s, call("one"), d1.Hop)
	require.NoError(t, err)
	require.True(t, bytes.Equal(last, statusOf(t, res)))
	require.Len(t, sts, 1)
	require.NoError(t, sts[0].Err())
	require.EqualValues(t, 2, co.calls.Load(), "the tool ran again for a retransmission")

	// The asynchronous cancel: the caller gives up, the running handler's
	// context ends, and it is told why.
	started, cause := make(chan struct{}), make(chan error, 1)
	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		close(started)
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(10 * time.Second):
			cause <- errors.New("the cancel never reached the handler")
		}
		hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectNone})
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{}}, nil
	}
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	cctx, cancel := context.WithCancelCause(hmcp.WithHandoff(ctx, out.Handoff))
	go func() { <-started; cancel(errors.New("the planner gave up")) }()
	_, err = s.CallTool(cctx, call("four"))
	require.ErrorIs(t, err, context.Canceled)
	got := <-cause
	require.Error(t, got)
	require.ErrorIs(t, got, context.Canceled, "the handler's context ends with the request's")
	require.EqualValues(t, 3, co.calls.Load())
	// A stateless server answers nothing once the caller left: the hop
	// stays unresolved at the delegator until a retransmission asks (HC-40).
	info, _, err := ps[planner].Agent.Hop(ctx, out.Offer.Hop)
	require.NoError(t, err)
	require.False(t, info.Resolved)
	t.Logf("the handler's context ended with cause %q", got)
}

// statelessSession serves co over a stateless streamable HTTP server on
// loopback, whose requests' cancellation reaches the tool, and returns the
// planner's handoff Client and a session of it to the server.
func statelessSession(t *testing.T, co *node, planner *handoff.Agent) (*hmcp.Client, *mcp.ClientSession) {
	t.Helper()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return co.server },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}))
	t.Cleanup(hs.Close)
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: planner, Attempts: -1})
	require.NoError(t, err)
	cl := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil)
	cl.AddSendingMiddleware(pc.Middleware())
	s, err := cl.Connect(context.Background(), pc.Transport(&mcp.StreamableClientTransport{Endpoint: hs.URL, DisableStandaloneSSE: true}), nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return pc, s
}
