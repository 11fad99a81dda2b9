package mcphop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/mcp"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/integrations/observe"
)

const (
	assistant = handoff.AgentID("spiffe://a.example/assistant")
	planner   = handoff.AgentID("spiffe://a.example/planner")
	coder     = handoff.AgentID("spiffe://b.example/coder")
	tester    = handoff.AgentID("spiffe://c.example/tester")
	dialog    = "ctx-7c1e"
)

type args struct {
	Change string `json:"change"`
}

// node is a delegate: an MCP server with one guarded tool, and a client
// side for the hops it passes on.
type node struct {
	p      *agenttest.Party
	server *mcp.Server
	client *hmcp.Client
	calls  atomic.Int32 // tool handler invocations
	// work is the tool's body, after the invocation is counted.
	work func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error)

	logs lockedBuffer // the server's log records, JSON lines

	mu       sync.Mutex
	seen     []*handoff.Received
	canceled []*handoff.StatusResult
	foreign  []error // "canceled" statuses refused before verification
}

func newNode(t *testing.T, p *agenttest.Party, peer handoff.AgentID, rec *observe.Recorder) *node {
	t.Helper()
	n := &node{p: p}
	var err error
	n.client, err = hmcp.NewClient(hmcp.ClientConfig{Agent: p.Agent, Observe: rec})
	require.NoError(t, err)
	mw, err := hmcp.Server(hmcp.ServerConfig{
		Agent: p.Agent,
		// The in-memory and loopback transports authenticate nobody: the
		// test names the one peer each server serves.
		Peer:    func(*mcp.CallToolRequest) handoff.AgentID { return peer },
		Observe: rec,
		Logger:  slog.New(slog.NewJSONHandler(&n.logs, nil)),
		OnCancel: func(_ context.Context, r *handoff.StatusResult) {
			n.mu.Lock()
			n.canceled = append(n.canceled, r)
			n.mu.Unlock()
		},
		OnForeignCancel: func(_ context.Context, err error) {
			n.mu.Lock()
			n.foreign = append(n.foreign, err)
			n.mu.Unlock()
		},
	})
	require.NoError(t, err)
	n.server = mcp.NewServer(&mcp.Implementation{Name: string(p.ID), Version: "v1"}, nil)
	n.server.AddReceivingMiddleware(mw)
	mcp.AddTool(n.server, &mcp.Tool{Name: "work"}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		n.calls.Add(1)
		in, ok := hmcp.FromContext(ctx)
		if !ok {
			t.Error("tool ran without an accepted offer in its context")
			return nil, nil, nil
		}
		n.mu.Lock()
		n.seen = append(n.seen, in)
		n.mu.Unlock()
		if n.work != nil {
			res, err := n.work(ctx, in)
			return res, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done: " + a.Change}}}, nil, nil
	})
	return n
}

// connect returns a client session of c to srv, over the in-memory
// transport or streamable HTTP on loopback.
func connect(t *testing.T, c *hmcp.Client, srv *mcp.Server, httpT bool) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	var tr mcp.Transport
	if httpT {
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		tr = &mcp.StreamableClientTransport{Endpoint: hs.URL, DisableStandaloneSSE: true}
	} else {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		require.NoError(t, err)
		t.Cleanup(func() { ss.Close() })
		tr = ct
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1"}, nil)
	cl.AddSendingMiddleware(c.Middleware())
	cs, err := cl.Connect(ctx, c.Transport(tr), nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(change string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "work", Arguments: args{Change: change}}
}

func statusOf(t *testing.T, res *mcp.CallToolResult) []byte {
	t.Helper()
	b, err := carry.Status(res.Meta)
	require.NoError(t, err)
	return b
}

func TestMCP_ThreeHopChain_HC46_HC67(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format handoff.Format
		http   bool
	}{
		{"JWS/in-memory", handoff.JWS, false},
		{"COSE/in-memory", handoff.COSE, false},
		{"JWS/streamable-HTTP", handoff.JWS, true},
		{"COSE/streamable-HTTP", handoff.COSE, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ps := agenttest.New(t, agenttest.Spec{ID: assistant, Format: tc.format}, agenttest.Spec{ID: planner, Format: tc.format},
				agenttest.Spec{ID: coder, Format: tc.format}, agenttest.Spec{ID: tester, Format: tc.format})
			te := newNode(t, ps[tester], coder, nil)
			co := newNode(t, ps[coder], planner, nil)
			pl := newNode(t, ps[planner], assistant, nil)
			toTester := connect(t, co.client, te.server, tc.http)
			toCoder := connect(t, pl.client, co.server, tc.http)
			// Each delegate passes the work on and completes only when the
			// hop it made has completed.
			passOn := func(n *node, s *mcp.ClientSession, to handoff.AgentID) func(context.Context, *handoff.Received) (*mcp.CallToolResult, error) {
				return func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
					d, err := n.client.Call(ctx, s, call("pass it on"), handoff.OfferParams{To: to, From: in})
					if err != nil {
						return nil, err
					}
					if len(d.Statuses) != 1 || d.Statuses[0].State != state.Completed {
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{}}, nil
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
				}
			}
			co.work = passOn(co, toTester, tester)
			pl.work = passOn(pl, toCoder, coder)
			as, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[assistant].Agent})
			require.NoError(t, err)
			toPlanner := connect(t, as, pl.server, tc.http)

			d, err := as.Call(ctx, toPlanner, call("plan it"), handoff.OfferParams{To: planner, Dialog: dialog, Task: "fix-pager"})
			require.NoError(t, err)
			require.False(t, d.Result.IsError)
			require.Len(t, d.Statuses, 1)
			require.NoError(t, d.Statuses[0].Err())
			require.Equal(t, state.Completed, d.Statuses[0].State)
			info, ok, err := ps[assistant].Agent.Hop(ctx, d.Hop)
			require.NoError(t, err)
			require.True(t, ok)
			require.True(t, info.Resolved)

			for _, n := range []*node{pl, co, te} {
				require.EqualValues(t, 1, n.calls.Load(), "handler invocations of %s", n.p.ID)
			}
			// The tester saw the whole chain: assistant->planner, planner->coder.
			in := te.seen[0]
			require.Equal(t, handoff.ChainFull, in.Chain())
			links := in.Links()
			require.Len(t, links, 2)
			require.Equal(t, assistant, links[0].Offer().Iss)
			require.Equal(t, planner, links[1].Offer().Iss)
			require.Equal(t, coder, in.Offer().Iss)
			require.Equal(t, dialog, in.Offer().Dialog)
			require.Equal(t, tc.format, in.Handoff().Offer.Format)
		})
	}
}

func TestMCP_ForgedOffer_RefusedBeforeHandler_HC30(t *testing.T) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		t.Run(f.String(), func(t *testing.T) {
			ctx := context.Background()
			ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: f}, agenttest.Spec{ID: coder, Format: f})
			co := newNode(t, ps[coder], planner, nil)
			pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
			require.NoError(t, err)
			s := connect(t, pc, co.server, false)

			out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
			require.NoError(t, err)
			forged := agenttest.Tamper(t, out.Handoff, "write-patch", "drop-table!")
			if f == handoff.COSE {
				forged = agenttest.Tamper(t, out.Handoff, "write-patch", "drop-tables")
			}
			cctx := hmcp.WithHandoff(ctx, forged)
			res, err := s.CallTool(cctx, call("x"))
			require.NoError(t, err)
			require.True(t, res.IsError)
			_, err = carry.Status(res.Meta)
			require.ErrorIs(t, err, carry.ErrAbsent, "no status for an offer whose signature failed")
			require.Zero(t, co.calls.Load(), "the handler ran for a forged offer")

			// An offer for someone else: refused at check 2, with a signed
			// "rejected" the delegator verifies.
			other, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: planner, Dialog: dialog})
			require.NoError(t, err)
			cctx = hmcp.WithHandoff(ctx, other.Handoff)
			res, err = s.CallTool(cctx, call("x"))
			require.NoError(t, err)
			require.True(t, res.IsError)
			sts := hmcp.Statuses(cctx)
			require.Len(t, sts, 1)
			require.Zero(t, co.calls.Load())

			// A call without any Handoff is refused too.
			res, err = s.CallTool(ctx, call("x"))
			require.NoError(t, err)
			require.True(t, res.IsError)
			require.Zero(t, co.calls.Load())
		})
	}
}

func TestMCP_Retransmission_NotRunAgain_HC38_HC39(t *testing.T) {
	for _, httpT := range []bool{false, true} {
		ctx := context.Background()
		ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
		co := newNode(t, ps[coder], planner, nil)
		pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
		require.NoError(t, err)
		s := connect(t, pc, co.server, httpT)
		d, err := pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
		require.NoError(t, err)
		first := statusOf(t, d.Result)
		for range 3 {
			res, sts, err := pc.Retransmit(ctx, s, call("x"), d.Hop)
			require.NoError(t, err)
			require.True(t, bytes.Equal(first, statusOf(t, res)), "a retransmission got other status octets")
			require.Len(t, sts, 1)
			require.NoError(t, sts[0].Err())
		}
		require.EqualValues(t, 1, co.calls.Load(), "the handler ran again for a retransmission")
	}
}

// HC-39: a retransmission from a caller not authenticated as the offer's
// iss gets no status, though the hop is completed, and the answer says the
// status was withheld and why, never that the hop is undecided.
func TestMCP_Retransmission_StatusWithheldFromUnauthenticated_HC39(t *testing.T) {
	for _, c := range []struct {
		peer handoff.AgentID
		want string
	}{
		{"", "retransmission: status withheld: the caller is not authenticated (ServerConfig.Peer, or a verified " +
			"bearer token, names it), and a hop's status goes only to the offer's iss (HC-39)"},
		{tester, `retransmission: status withheld: the caller is authenticated as "` + string(tester) +
			`", not as the offer's iss, to whom alone a hop's status goes (HC-39)`},
	} {
		ctx := context.Background()
		ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
		co := newNode(t, ps[coder], c.peer, nil)
		pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
		require.NoError(t, err)
		s := connect(t, pc, co.server, false)
		d, err := pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
		require.NoError(t, err)
		require.Equal(t, state.Completed, d.Statuses[len(d.Statuses)-1].State, "the hop was completed")
		res, sts, err := pc.Retransmit(ctx, s, call("x"), d.Hop)
		require.NoError(t, err)
		require.Empty(t, sts, "a status went to a caller not authenticated as the offer's iss")
		require.False(t, res.IsError)
		require.Len(t, res.Content, 1)
		require.Equal(t, c.want, res.Content[0].(*mcp.TextContent).Text)
		require.EqualValues(t, 1, co.calls.Load(), "the handler ran again for a retransmission")
	}
}

// The hop is taken, not answered, while the tool runs: a retransmission
// meanwhile is answered "accepted" (HC-39), and the first call, whose
// outcome stays unknown, then carries no status of its own, since the
// "accepted" was sent; later retransmissions get the same octets.
func TestMCP_AcceptedOnceWhileTheToolRuns_HC39(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, nil)
	started, release := make(chan struct{}), make(chan struct{})
	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		close(started)
		<-release
		hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectUnknown})
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	}
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	s := connect(t, pc, co.server, false)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)

	first := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := s.CallTool(hmcp.WithHandoff(ctx, out.Handoff), call("x"))
		assert.NoError(t, err)
		first <- res
	}()
	<-started
	res, sts, err := pc.Retransmit(ctx, s, call("x"), out.Offer.Hop)
	require.NoError(t, err)
	require.Len(t, sts, 1)
	require.Equal(t, state.Accepted, sts[0].State)
	accepted := statusOf(t, res)
	close(release)

	got := <-first
	require.NotNil(t, got)
	require.False(t, got.IsError)
	_, err = carry.Status(got.Meta)
	require.ErrorIs(t, err, carry.ErrAbsent, "the first call's reply carries an \"accepted\" of its own")
	res, _, err = pc.Retransmit(ctx, s, call("x"), out.Offer.Hop)
	require.NoError(t, err)
	require.Equal(t, accepted, statusOf(t, res), "the hop's last status changed")
	require.EqualValues(t, 1, co.calls.Load())
}

func TestMCP_RetransmitOnTimeout_Backoff_HC37(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, nil)
	release := make(chan struct{})
	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		<-release // the first call hangs past its backoff instant
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	}
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent, Attempts: 2})
	require.NoError(t, err)
	s := connect(t, pc, co.server, false)
	// TTL 2 s: the first retransmission is due at iat + 1 s.
	d, err := pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog, TTL: 2 * time.Second})
	close(release)
	require.NoError(t, err)
	// The retransmission was told the work was taken, and the work ran
	// once. On a loaded machine the first retransmission's answer can miss
	// its deadline too, and the last attempt (no deadline) gets it.
	require.GreaterOrEqual(t, d.Attempts, 2)
	require.NotEmpty(t, d.Statuses)
	for _, s := range d.Statuses {
		require.Equal(t, state.Accepted, s.State)
	}
	require.EqualValues(t, 1, co.calls.Load())
}

func TestMCP_Equivocation_HC53(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], planner, nil)
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	s := connect(t, pc, co.server, false)
	d, err := pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog, Task: "one"})
	require.NoError(t, err)
	require.EqualValues(t, 1, co.calls.Load())

	second := agenttest.Equivocate(t, ps[planner], d.Offer, "two")
	res, err := s.CallTool(hmcp.WithHandoff(ctx, second), call("x"))
	require.NoError(t, err)
	require.True(t, res.IsError)
	// The first hop was completed: no status may be sent (HC-54 "none"),
	// and the second offer never gets one (HC-53).
	_, err = carry.Status(res.Meta)
	require.ErrorIs(t, err, carry.ErrAbsent)
	require.EqualValues(t, 1, co.calls.Load(), "the handler ran for an equivocating offer")
}

func TestMCP_Cancel_SignedInNotificationsCancelled_HC28_HC67(t *testing.T) {
	for _, httpT := range []bool{false, true} {
		ctx := context.Background()
		ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
		co := newNode(t, ps[coder], planner, nil)
		started := make(chan struct{})
		stopped := make(chan struct{})
		co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
			close(started)
			<-ctx.Done() // the SDK cancels the handler's context
			close(stopped)
			hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectNone})
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{}}, nil
		}
		pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent, Attempts: -1})
		require.NoError(t, err)
		s := connect(t, pc, co.server, httpT)
		out, errc := callInFlight(t, ps[planner].Agent, s, started)
		n, err := pc.Cancel(ctx, out.Offer.Hop)
		require.NoError(t, err)
		require.ErrorIs(t, <-errc, context.Canceled)
		<-stopped
		require.Eventually(t, func() bool {
			co.mu.Lock()
			defer co.mu.Unlock()
			return len(co.canceled) == 1
		}, 5*time.Second, 10*time.Millisecond)
		co.mu.Lock()
		got := co.canceled[0]
		co.mu.Unlock()
		require.NoError(t, got.Err())
		require.Equal(t, state.Canceled, got.Status.State)
		require.Equal(t, planner, got.Status.Iss, "the cancel is signed by the delegator")
		require.Equal(t, out.Offer.Hop, got.Status.Hop)
		require.True(t, got.Status.Offer.Equal(out.Digest), "the cancel names the offer by its digest")
		require.Equal(t, n.Hop, got.Status.Hop)

		require.EqualValues(t, 1, co.calls.Load())
	}
}

func TestMCP_CancelledNotification_Helpers(t *testing.T) {
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	ctx := context.Background()
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	n, err := ps[planner].Agent.Cancel(ctx, out.Offer.Hop)
	require.NoError(t, err)
	id, err := jsonrpc.MakeID(float64(7))
	require.NoError(t, err)

	msg, err := hmcp.CancelledNotification(id, n.Status)
	require.NoError(t, err)
	var p mcp.CancelledParams
	require.NoError(t, json.Unmarshal(msg.Params, &p))
	require.EqualValues(t, 7, p.RequestID)
	got, err := carry.Status(p.Meta)
	require.NoError(t, err)
	require.Equal(t, n.Status.Octets, got)

	// AttachCancel keeps the members the SDK wrote.
	sdk := &jsonrpc.Request{Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":"r-1","reason":"context canceled"}`)}
	require.NoError(t, hmcp.AttachCancel(sdk, n.Status))
	p = mcp.CancelledParams{}
	require.NoError(t, json.Unmarshal(sdk.Params, &p))
	require.Equal(t, "r-1", p.RequestID)
	require.Equal(t, "context canceled", p.Reason)
	got, err = carry.Status(p.Meta)
	require.NoError(t, err)
	require.Equal(t, n.Status.Octets, got)

	// Only a notifications/cancelled.
	require.ErrorIs(t, hmcp.AttachCancel(&jsonrpc.Request{Method: "tools/call", ID: id}, n.Status), handoff.ErrArgument)
	require.ErrorIs(t, hmcp.AttachCancel(&jsonrpc.Request{Method: "notifications/cancelled", Params: json.RawMessage(`[1]`)}, n.Status), handoff.ErrMalformed)
}

// The gap: without Client.Transport the SDK sends notifications/cancelled
// without _meta, and the delegate never learns the hop was canceled.
func TestMCP_Cancel_SDKSendsNoMeta_Gap(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, nil)
	started := make(chan struct{})
	stopped := make(chan struct{})
	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		close(stopped)
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	}
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := co.server.Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cl := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1"}, nil)
	cl.AddSendingMiddleware(pc.Middleware())
	s, err := cl.Connect(ctx, ct, nil) // not wrapped
	require.NoError(t, err)
	defer s.Close()
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(hmcp.WithHandoff(ctx, out.Handoff))
	go func() { <-started; cancel() }()
	_, err = s.CallTool(cctx, call("x"))
	require.ErrorIs(t, err, context.Canceled)
	<-stopped
	// The call's context was canceled by the SDK's notification, yet it
	// carried no status: nothing reached the agent.
	co.mu.Lock()
	defer co.mu.Unlock()
	require.Empty(t, co.canceled)
	// And Client.Cancel refuses a hop whose calls it could not index.
	_, err = pc.Cancel(ctx, out.Offer.Hop)
	require.ErrorIs(t, err, handoff.ErrArgument)
}

// The first offer was received but neither taken nor answered: the rules
// let the delegate reject the FIRST offer for equivocation (HC-54), and the
// second gets no status of its own (HC-53).
func TestMCP_Equivocation_RejectFirst_HC54(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, nil)
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	s := connect(t, pc, co.server, false)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "one"})
	require.NoError(t, err)
	wire, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	first, err := ps[coder].Agent.Receive(ctx, wire, handoff.Host{Peer: planner})
	require.NoError(t, err)
	require.True(t, first.Accepted()) // remembered, not taken

	cctx := hmcp.WithHandoff(ctx, agenttest.Equivocate(t, ps[planner], out, "two"))
	res, err := s.CallTool(cctx, call("x"))
	require.NoError(t, err)
	require.True(t, res.IsError)
	sts := hmcp.Statuses(cctx)
	require.Len(t, sts, 1)
	require.NoError(t, sts[0].Err())
	require.Equal(t, state.Rejected, sts[0].State)
	require.Equal(t, reason.Equivocation, sts[0].Status.Reason)
	require.True(t, sts[0].Status.Offer.Equal(out.Digest), "the status answers the FIRST offer")
	require.Zero(t, co.calls.Load())
}

// A hop whose call has returned: over a connection the client wraps, the
// cancel goes as a notifications/cancelled naming the hop's last request;
// over streamable HTTP, where the client has no connection of its own to
// write on, Cancel says so.
func TestMCP_Cancel_AfterTheCall_HC28(t *testing.T) {
	for _, httpT := range []bool{false, true} {
		ctx := context.Background()
		ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
		co := newNode(t, ps[coder], planner, nil)
		co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
			hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectUnknown}) // still working after the reply
			return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
		}
		pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
		require.NoError(t, err)
		s := connect(t, pc, co.server, httpT)
		d, err := pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
		require.NoError(t, err)
		require.Equal(t, state.Accepted, d.Statuses[0].State)

		_, err = pc.Cancel(ctx, d.Hop)
		if httpT {
			require.ErrorIs(t, err, handoff.ErrArgument)
			continue
		}
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			co.mu.Lock()
			defer co.mu.Unlock()
			return len(co.canceled) == 1
		}, 5*time.Second, 10*time.Millisecond)
		co.mu.Lock()
		got := co.canceled[0]
		co.mu.Unlock()
		require.NoError(t, got.Err())
		require.Equal(t, state.Canceled, got.State)
		require.EqualValues(t, 1, co.calls.Load())
	}
}

// A hop whose call ended it ("completed") is no longer bound to the
// session: its "canceled" is refused before it is verified, as a task in a
// terminal state is over A2A, and a session that runs hop after hop holds
// only the hops that can still be canceled.
func TestMCP_Cancel_AfterCompleted_NotBound_HC28(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, nil)
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	s := connect(t, pc, co.server, false)
	d, err := pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)

	_, err = pc.Cancel(ctx, d.Hop)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		co.mu.Lock()
		defer co.mu.Unlock()
		return len(co.foreign) == 1
	}, 5*time.Second, 10*time.Millisecond)
	co.mu.Lock()
	defer co.mu.Unlock()
	require.ErrorIs(t, co.foreign[0], hmcp.ErrForeignCancel)
	require.Empty(t, co.canceled, "the \"canceled\" of a hop that ended was handed to HandleStatus")
}

// The first offer's work is running when an equivocating offer arrives:
// the work is stopped (its context's cause is ErrEquivocated) and its
// "failed" carries the reason "equivocation" (HC-54 finish-first).
func TestMCP_Equivocation_FinishFirst_HC54(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, nil)
	started := make(chan struct{})
	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), hmcp.ErrEquivocated) {
			return nil, context.Cause(ctx)
		}
		hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectNone})
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "stopped"}}}, nil
	}
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	s := connect(t, pc, co.server, false)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "one"})
	require.NoError(t, err)
	firstCtx := hmcp.WithHandoff(ctx, out.Handoff)
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(firstCtx, call("x"))
		done <- err
	}()
	<-started
	secondCtx := hmcp.WithHandoff(ctx, agenttest.Equivocate(t, ps[planner], out, "two"))
	res, err := s.CallTool(secondCtx, call("x"))
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Empty(t, hmcp.Statuses(secondCtx), "the second offer gets no status (HC-53)")
	require.NoError(t, <-done)
	sts := hmcp.Statuses(firstCtx)
	require.Len(t, sts, 1)
	require.NoError(t, sts[0].Err())
	require.Equal(t, state.Failed, sts[0].State)
	require.Equal(t, reason.Equivocation, sts[0].Status.Reason)
	require.EqualValues(t, 1, co.calls.Load())
}

// swapCancel is a client transport that puts a given "canceled" in every
// notifications/cancelled it writes: a captured status replayed on a
// session of another delegator.
type swapCancel struct {
	mcp.Transport
	status handoff.Signed
}

type swapConn struct {
	mcp.Connection
	status handoff.Signed
}

func (s swapCancel) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := s.Transport.Connect(ctx)
	return swapConn{Connection: c, status: s.status}, err
}

func (c swapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Request); ok && r.Method == "notifications/cancelled" {
		cp := *r
		if err := hmcp.AttachCancel(&cp, c.status); err != nil {
			return err
		}
		msg = &cp
	}
	return c.Connection.Write(ctx, msg)
}

// A signed "canceled" cancels only a hop accepted on the session it comes
// on (HC-28, HC-55): Alice's "canceled" for her own finished hop, sent in
// the notifications/cancelled of Bob's running call, is refused before it
// is verified and reaches neither Agent.HandleStatus nor OnCancel; Bob's
// hop is not canceled. (The SDK ends Bob's request's context on any
// notifications/cancelled: that is MCP's transport, not the hop.)
func TestMCP_Cancel_OnlyItsOwnHop_HC28_HC55(t *testing.T) {
	const (
		alice = handoff.AgentID("spiffe://a.example/alice")
		bob   = handoff.AgentID("spiffe://b.example/bob")
	)
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: alice, Format: handoff.JWS}, agenttest.Spec{ID: bob, Format: handoff.COSE},
		agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], "", nil)
	started := make(chan struct{})
	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		if in.Offer().Iss == bob {
			close(started)
			<-ctx.Done()
			hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectUnknown})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	}
	ac, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[alice].Agent})
	require.NoError(t, err)
	da, err := ac.Call(ctx, connect(t, ac, co.server, false), call("alice's"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	require.Equal(t, state.Completed, da.State)
	n, err := ps[alice].Agent.Cancel(ctx, da.Hop)
	require.NoError(t, err)

	bc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[bob].Agent})
	require.NoError(t, err)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := co.server.Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cl := mcp.NewClient(&mcp.Implementation{Name: "bob", Version: "v1"}, nil)
	cl.AddSendingMiddleware(bc.Middleware())
	s, err := cl.Connect(ctx, swapCancel{Transport: ct, status: n.Status}, nil)
	require.NoError(t, err)
	defer s.Close()
	out, err := ps[bob].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(hmcp.WithHandoff(ctx, out.Handoff))
	go func() { <-started; cancel() }()
	_, err = s.CallTool(cctx, call("bob's"))
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool {
		co.mu.Lock()
		defer co.mu.Unlock()
		return len(co.foreign) == 1
	}, 5*time.Second, 10*time.Millisecond)
	co.mu.Lock()
	require.ErrorIs(t, co.foreign[0], hmcp.ErrForeignCancel)
	require.Empty(t, co.canceled, "another hop's \"canceled\" was handed to HandleStatus")
	co.mu.Unlock()
	require.EqualValues(t, 2, co.calls.Load())
}

// A session whose client lacks the handoff middleware sends no Handoff:
// Call and Retransmit say so with ErrNotIntercepted, whatever the server
// answered, and the tool never runs. A delivery says how it ended: State,
// Refused, Reason.
func TestMCP_MissingMiddleware_TypedError_And_DeliveryOutcome(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], planner, nil)
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := co.server.Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	bare, err := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "v1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer bare.Close()

	d, err := pc.Call(ctx, bare, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.ErrorIs(t, err, hmcp.ErrNotIntercepted)
	require.Equal(t, 1, d.Attempts, "not sent again")
	_, _, err = pc.Retransmit(ctx, bare, call("x"), d.Hop)
	require.ErrorIs(t, err, hmcp.ErrNotIntercepted)
	require.Zero(t, co.calls.Load(), "the tool ran without a Handoff")

	s := connect(t, pc, co.server, false)
	d, err = pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	require.False(t, d.Refused)

	// A forged offer: refused with no status the delegator could verify.
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	require.NoError(t, err)
	res, err := s.CallTool(hmcp.WithHandoff(ctx, agenttest.Tamper(t, out.Handoff, "write-patch", "drop-table!")), call("x"))
	require.NoError(t, err)
	require.True(t, res.IsError)

	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectNone, Reason: reason.Policy})
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{}}, nil
	}
	d, err = pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	require.Equal(t, state.Failed, d.State)
	require.False(t, d.Refused, "a failed hop was taken, not refused")
	require.EqualValues(t, 2, co.calls.Load())
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The middleware logs each delivery and each status it handles with the
// logger it is given, the Agent's decision as its LogValue gives it.
func TestMCP_LoggerHearsEachDecision(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, nil)
	var clientLogs lockedBuffer
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent, Logger: slog.New(slog.NewJSONHandler(&clientLogs, nil))})
	require.NoError(t, err)
	s := connect(t, pc, co.server, false)
	d, err := pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)

	var rec struct {
		Msg       string `json:"msg"`
		Transport string `json:"transport"`
		Received  struct {
			Decision, Iss, Hop string
		} `json:"received"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(co.logs.String(), "\n", 2)[0]), &rec))
	assert.Equal(t, "handoff: delivery", rec.Msg)
	assert.Equal(t, hmcp.Transport, rec.Transport)
	assert.Equal(t, "accepted", rec.Received.Decision)
	assert.Equal(t, string(planner), rec.Received.Iss)
	assert.Equal(t, string(d.Hop), rec.Received.Hop)

	assert.Contains(t, clientLogs.String(), `"msg":"handoff: status"`)
	assert.Contains(t, clientLogs.String(), `"decision":"applied"`)
	assert.Contains(t, clientLogs.String(), `"iss":"`+string(coder)+`"`)
}
