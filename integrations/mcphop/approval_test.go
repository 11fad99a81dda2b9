package mcphop_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
)

type refundArgs struct {
	Operation string `json:"operation_id,omitempty"`
	Amount    int    `json:"amount,omitempty"`
}

// pausing is one life of the delegate: an MCP server whose "refund" tool
// is the must-ask refund of the hop's evidence package
// (ServerConfig.Action), which the middleware runs under the hop's guard
// and pauses for its owner's approval. A restart is a new pausing over the
// same replay store, ledger and sealing key.
type pausing struct {
	server  *mcp.Server
	refunds atomic.Int32 // the refund's invocations: the action ran
	mu      sync.Mutex
	amounts []int // the amounts refunded
}

var stateKey = []byte("0123456789abcdef0123456789abcdef")

// refundAction maps the "refund" tool to the package's must-ask action.
func refundAction(r *mcp.CallToolRequest) string {
	if r.Params.Name == "refund" {
		return agenttest.MustAsk
	}
	return r.Params.Name
}

func newPausing(t *testing.T, p *agenttest.Party, store replay.Store, e *agenttest.Evidence, now *agenttest.Clock) *pausing {
	t.Helper()
	ag, err := handoff.NewAgent(handoff.Config{ID: p.ID, Signer: p.Signer, Trust: p.Trust, Store: store, Now: now.Now})
	require.NoError(t, err)
	mw, err := hmcp.Server(hmcp.ServerConfig{Agent: ag, Action: refundAction,
		Peer:      func(*mcp.CallToolRequest) handoff.AgentID { return planner },
		Approvals: &hmcp.Approvals{Key: stateKey, Guard: e.Guard, Now: now.Now},
	})
	require.NoError(t, err)
	d := &pausing{server: mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)}
	d.server.AddReceivingMiddleware(mw)
	mcp.AddTool(d.server, &mcp.Tool{Name: "refund"}, func(ctx context.Context, req *mcp.CallToolRequest, a refundArgs) (*mcp.CallToolResult, any, error) {
		d.refunds.Add(1) // the effect: the middleware runs the tool only once the guard allows it
		d.mu.Lock()
		d.amounts = append(d.amounts, a.Amount)
		d.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil, nil
	})
	return d
}

// approver is the scripted approver: the client's elicitation handler.
type approver struct {
	decision string // "approve", "deny", or "" to cancel
	asked    atomic.Int32
	mu       sync.Mutex
	pending  []map[string]any
}

func (a *approver) handle(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.asked.Add(1)
	p, ok := hmcp.PendingApproval(r.Params)
	if ok {
		a.mu.Lock()
		a.pending = append(a.pending, p)
		a.mu.Unlock()
	}
	if a.decision == "" {
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": a.decision}}, nil
}

// dial connects the delegator's client to srv; a nil approver disables the
// SDK's multi-round-trip handling, for the test to retry by hand.
func dial(t *testing.T, c *hmcp.Client, srv *mcp.Server, a *approver) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	opts := &mcp.ClientOptions{}
	if a != nil {
		opts.ElicitationHandler = a.handle
	} else {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, opts)
	cl.AddSendingMiddleware(c.Middleware())
	cs, err := cl.Connect(ctx, c.Transport(ct), nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

func refund(op string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "refund", Arguments: refundArgs{Operation: op}}
}

// pendingOf is the pending approval the pause of a refund of op shows on
// hop: the call, its arguments and their digest, and its key.
func pendingOf(t *testing.T, hop digest.Digest, op string) map[string]any {
	t.Helper()
	args := []byte(`{"operation_id":"` + op + `"}`)
	d, err := evidence.ArgsDigest(args)
	require.NoError(t, err)
	k, err := evidence.Call{Hop: hop, Action: agenttest.MustAsk, Tool: "refund", Args: args, OperationID: op}.Key()
	require.NoError(t, err)
	return map[string]any{"action": agenttest.MustAsk, "owner": agenttest.Owner, "hop": hop.String(), "operation_id": op,
		"item": "refund", "tool": "refund", "args": d.String(), "arguments": map[string]any{"operation_id": op}, "key": k.String()}
}

type pauseFixture struct {
	ps    map[handoff.AgentID]*agenttest.Party
	e     *agenttest.Evidence
	store replay.Store
	now   *agenttest.Clock
	cl    *hmcp.Client
}

func newPauseFixture(t *testing.T) *pauseFixture {
	t.Helper()
	f := &pauseFixture{ps: agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE}),
		e: agenttest.NewEvidence(t), store: replay.NewMemory(replay.MemoryOptions{}), now: agenttest.NewClock(time.Now())}
	f.e.Now = f.now.Now
	var err error
	f.cl, err = hmcp.NewClient(hmcp.ClientConfig{Agent: f.ps[planner].Agent})
	require.NoError(t, err)
	return f
}

func (f *pauseFixture) offer() handoff.OfferParams {
	return handoff.OfferParams{To: coder, Dialog: dialog, Task: "refund-INV-1042", TTL: time.Minute, Prepare: f.e.Prepare}
}

// first sends the offer with a call the tool pauses: it returns the hop
// and the input-required result.
func (f *pauseFixture) first(t *testing.T, cs *mcp.ClientSession, op string) (*hmcp.Delivery, *mcp.CallToolResult) {
	t.Helper()
	d, err := f.cl.Call(context.Background(), cs, refund(op), f.offer())
	require.NoError(t, err)
	require.True(t, d.Result.NeedsInput(), "the must-ask refund paused the call: %+v", d.Result)
	require.Contains(t, d.Result.InputRequests, hmcp.ApprovalInput)
	require.NotEmpty(t, d.Result.RequestState)
	require.Equal(t, state.Accepted, d.State, "the paused hop is \"accepted\"")
	return d, d.Result
}

// retry sends the hop's identical Handoff again with the answer and the
// request state, as the SDK's multi-round-trip retry does.
func (f *pauseFixture) retry(t *testing.T, cs *mcp.ClientSession, hop handoff.HopID, op, state, decision string) *mcp.CallToolResult {
	t.Helper()
	p := refund(op)
	p.RequestState = state
	p.InputResponses = mcp.InputResponseMap{hmcp.ApprovalInput: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}}
	res, _, err := f.cl.Retransmit(context.Background(), cs, p, hop)
	require.NoError(t, err)
	return res
}

func (f *pauseFixture) state(t *testing.T, hop handoff.HopID) state.State {
	t.Helper()
	info, ok, err := f.ps[planner].Agent.Hop(context.Background(), hop)
	require.NoError(t, err)
	require.True(t, ok)
	return info.State
}

// A must-ask refund pauses the call with an MCP input request carrying the
// pending approval (action, owner, hop, operation); the scripted approver
// approves through the client's elicitation handler, the SDK retries the
// call, the approval is recorded in the ledger and the refund runs once;
// the hop completes, and the same answer presented again runs nothing.
func TestMCP_Pause_Approve(t *testing.T) {
	f := newPauseFixture(t)
	srv := newPausing(t, f.ps[coder], f.store, f.e, f.now)
	a := &approver{decision: "approve"}
	cs := dial(t, f.cl, srv.server, a)
	d, err := f.cl.Call(context.Background(), cs, refund("refund-INV-1042"), f.offer())
	require.NoError(t, err)
	require.False(t, d.Result.IsError, "%v", d.Result.Content)
	require.Equal(t, state.Completed, d.State)
	require.EqualValues(t, 1, a.asked.Load())
	require.EqualValues(t, 1, srv.refunds.Load(), "the approved refund runs once, the paused call never")
	a.mu.Lock()
	require.Equal(t, pendingOf(t, d.Offer.Handoff.Offer.Digest(), "refund-INV-1042"), a.pending[0], "the owner is shown the call")
	a.mu.Unlock()
	as, err := f.e.Ledger.Approvals(context.Background(), d.Offer.Handoff.Offer.Digest().String())
	require.NoError(t, err)
	require.Len(t, as, 1, "the approval is in the ledger")
	require.Equal(t, agenttest.Owner, as[0].Approver)
	require.Zero(t, as[0].Remaining, "and used")

	// The completed hop's answer again: not resumed, the last status.
	manual := dial(t, f.cl, srv.server, nil)
	res := f.retry(t, manual, d.Hop, "refund-INV-1042", "hs1.x.y", "approve")
	require.False(t, res.NeedsInput())
	require.EqualValues(t, 1, srv.refunds.Load(), "a finished hop's retransmission never reaches the tool")
}

// A declined approval records nothing and never runs the refund: the hop
// ends with "failed", no refs, reason "policy", and the delegator holds
// no unresolved hop (finding 3).
func TestMCP_Pause_Deny(t *testing.T) {
	for _, decision := range []string{"deny", ""} {
		f := newPauseFixture(t)
		srv := newPausing(t, f.ps[coder], f.store, f.e, f.now)
		a := &approver{decision: decision}
		d, err := f.cl.Call(context.Background(), dial(t, f.cl, srv.server, a), refund("refund-INV-1042"), f.offer())
		require.NoError(t, err)
		require.True(t, d.Result.IsError, "decision %q", decision)
		require.EqualValues(t, 1, a.asked.Load())
		require.Zero(t, srv.refunds.Load(), "a declined refund ran")
		agenttest.RequireClosed(t, f.ps[planner].Agent, d.Hop)
		as, err := f.e.Ledger.Approvals(context.Background(), d.Offer.Handoff.Offer.Digest().String())
		require.NoError(t, err)
		require.Empty(t, as, "nothing recorded")
	}
}

// No answer until the hop's timeout: the request state and the guard's
// authority end with the offer; the late answer runs nothing.
func TestMCP_Pause_NoAnswerUntilTimeout(t *testing.T) {
	f := newPauseFixture(t)
	srv := newPausing(t, f.ps[coder], f.store, f.e, f.now)
	cs := dial(t, f.cl, srv.server, nil)
	d, paused := f.first(t, cs, "refund-INV-1042")
	f.now.Add(2 * time.Minute) // past the offer's exp
	res := f.retry(t, cs, d.Hop, "refund-INV-1042", paused.RequestState, "approve")
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "the offer expired")
	require.True(t, res.IsError)
	require.False(t, res.NeedsInput())
	require.Zero(t, srv.refunds.Load(), "an unanswered refund ran")
	agenttest.RequireClosed(t, f.ps[planner].Agent, d.Hop) // a pause that can no longer be answered
	as, err := f.e.Ledger.Approvals(context.Background(), d.Offer.Handoff.Offer.Digest().String())
	require.NoError(t, err)
	require.Empty(t, as)
}

// The delegate restarts between the pause and the answer: the new process
// (same replay store, ledger and sealing key) takes the answer, records it
// and runs the refund once. An approval recorded before a restart is
// honoured after it, once.
func TestMCP_Pause_RestartInBetween(t *testing.T) {
	f := newPauseFixture(t)
	before := newPausing(t, f.ps[coder], f.store, f.e, f.now)
	d, paused := f.first(t, dial(t, f.cl, before.server, nil), "refund-INV-1042")
	before.server = nil // the process is gone

	after := newPausing(t, f.ps[coder], f.store, f.e, f.now)
	cs := dial(t, f.cl, after.server, nil)
	res := f.retry(t, cs, d.Hop, "refund-INV-1042", paused.RequestState, "approve")
	require.False(t, res.IsError, "%v", res.Content)
	require.EqualValues(t, 1, after.refunds.Load(), "the answer after the restart runs the refund once")
	require.Equal(t, state.Completed, f.state(t, d.Hop))
	res = f.retry(t, cs, d.Hop, "refund-INV-1042", paused.RequestState, "approve")
	require.EqualValues(t, 1, after.refunds.Load(), "once")

	// An approval recorded, by the owner at the operator's console, before
	// the delegate restarts: the resumed call after it uses it, once.
	f2 := newPauseFixture(t)
	before = newPausing(t, f2.ps[coder], f2.store, f2.e, f2.now)
	d, paused = f2.first(t, dial(t, f2.cl, before.server, nil), "refund-INV-7")
	in, err := before.Agent(t, f2, d)
	require.NoError(t, err)
	g, err := f2.e.Guard(context.Background(), in)
	require.NoError(t, err)
	_, err = g.ApproveLocal(context.Background(), evidence.Grant{Action: agenttest.MustAsk, OperationID: "refund-INV-7", Approver: agenttest.Owner}, "console:alice")
	require.NoError(t, err)
	after = newPausing(t, f2.ps[coder], f2.store, f2.e, f2.now)
	cs = dial(t, f2.cl, after.server, nil)
	res = f2.retry(t, cs, d.Hop, "refund-INV-7", paused.RequestState+"x", "approve")
	require.True(t, res.IsError, "an answer this server did not seal does not resume the work")
	require.Zero(t, after.refunds.Load())
	res = f2.retry(t, cs, d.Hop, "refund-INV-7", paused.RequestState, "approve")
	require.False(t, res.IsError, "%v", res.Content)
	require.EqualValues(t, 1, after.refunds.Load(), "the approval recorded before the restart, used once")
	require.Zero(t, before.refunds.Load())
}

// Agent returns the delegate's Received of the hop d, as a host's operator
// console would have it: the identical Handoff received again.
func (p *pausing) Agent(t *testing.T, f *pauseFixture, d *hmcp.Delivery) (*handoff.Received, error) {
	t.Helper()
	ag, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: f.ps[coder].Signer, Trust: f.ps[coder].Trust, Store: f.store, Now: f.now.Now})
	require.NoError(t, err)
	wire, err := d.Offer.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	return ag.Receive(context.Background(), wire, handoff.Host{Dialog: dialog, Peer: planner})
}

// The request state is bound to the hop's offer digest and to the
// operation: a state of one hop presented on another, or altered, is
// refused and nothing is recorded; an answer for one operation never
// unlocks another.
func TestMCP_Pause_StateBoundToHopAndOperation(t *testing.T) {
	f := newPauseFixture(t)
	srv := newPausing(t, f.ps[coder], f.store, f.e, f.now)
	cs := dial(t, f.cl, srv.server, nil)
	hopA, pausedA := f.first(t, cs, "refund-A")
	hopB, _ := f.first(t, cs, "refund-B")

	res := f.retry(t, cs, hopB.Hop, "refund-B", pausedA.RequestState, "approve")
	require.True(t, res.IsError, "hop A's state on hop B")
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "not this one")
	altered := []byte(pausedA.RequestState)
	altered[len(altered)-2] ^= 1
	res = f.retry(t, cs, hopA.Hop, "refund-A", string(altered), "approve")
	require.True(t, res.IsError, "an altered state")
	for _, d := range []*hmcp.Delivery{hopA, hopB} {
		as, err := f.e.Ledger.Approvals(context.Background(), d.Offer.Handoff.Offer.Digest().String())
		require.NoError(t, err)
		require.Empty(t, as, "nothing recorded")
	}
	// Hop A's own state, retried for another operation: the state is
	// sealed to the call that paused, refund-A, and resumes nothing else;
	// the pause still waits.
	res = f.retry(t, cs, hopA.Hop, "refund-Z", pausedA.RequestState, "approve")
	require.True(t, res.IsError)
	require.False(t, res.NeedsInput())
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, evidence.ErrApprovalMismatch.Error())
	require.Equal(t, state.Accepted, f.state(t, hopA.Hop), "paused still")
	require.Zero(t, srv.refunds.Load(), "no refund ran on a replayed or misbound state")
	res = f.retry(t, cs, hopA.Hop, "refund-A", pausedA.RequestState, "approve")
	require.False(t, res.IsError, "%v", res.Content)
	require.EqualValues(t, 1, srv.refunds.Load())
}

// A signed approval (evidence.SignApproval) in the input response is
// recorded with evidence.Guard.ApproveSigned, and the refund runs once.
func TestMCP_Pause_SignedApproval(t *testing.T) {
	f := newPauseFixture(t)
	sign := f.e.SignedApprovals()
	srv := newPausing(t, f.ps[coder], f.store, f.e, f.now)
	cs := dial(t, f.cl, srv.server, nil)
	d, paused := f.first(t, cs, "refund-INV-1042")
	p := refund("refund-INV-1042")
	p.RequestState = paused.RequestState
	p.InputResponses = mcp.InputResponseMap{hmcp.ApprovalInput: &mcp.ElicitResult{Action: "accept",
		Content: map[string]any{"decision": "approve", "approval": string(sign(d.Offer.Handoff.Offer.Digest(), "refund-INV-1042"))}}}
	res, _, err := f.cl.Retransmit(context.Background(), cs, p, d.Hop)
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.EqualValues(t, 1, srv.refunds.Load())
	as, err := f.e.Ledger.Approvals(context.Background(), d.Offer.Handoff.Offer.Digest().String())
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Equal(t, authority.SourceSigned, as[0].Source)
	require.Zero(t, as[0].Remaining)
}

// A client of a protocol before 2026-07-28 is asked once per approval
// (issue 32, finding 6): the middleware asks it inside the call, the
// answer is recorded, and the tool runs in the same call; the SDK's own
// fallback, which would ask it again past the middleware, never sees an
// input request. The refund runs once, on one approval.
func TestMCP_Pause_OlderClient(t *testing.T) {
	f := newPauseFixture(t)
	a := &approver{decision: "approve"}
	ctx := context.Background()
	srv, cs := f.olderClient(t, a.handle)
	d, err := f.cl.Call(ctx, cs, refund("refund-INV-1042"), f.offer())
	require.NoError(t, err)
	require.EqualValues(t, 1, a.asked.Load(), "one question for one approval")
	require.EqualValues(t, 1, srv.refunds.Load(), "run once, with the approval")
	require.Equal(t, 1, f.approvals(t, d), "the answer is recorded")
	require.Equal(t, state.Completed, d.State)

	// Declined inside the call: nothing recorded, the hop closed.
	a.decision = "deny"
	d, err = f.cl.Call(ctx, cs, refund("refund-INV-7"), f.offer())
	require.NoError(t, err)
	require.True(t, d.Result.IsError)
	require.EqualValues(t, 2, a.asked.Load())
	require.EqualValues(t, 1, srv.refunds.Load())
	require.Zero(t, f.approvals(t, d))
	agenttest.RequireClosed(t, f.ps[planner].Agent, d.Hop)
}

// A client of a protocol before 2026-07-28 that answers, inside the call,
// once the offer expired: the approval is the guard's refusal (the offer
// expired), nothing is recorded, the tool never runs, and the hop, whose
// work took no effect, ends "failed" with no refs, as the Approvals doc
// says, not "accepted" with the ledger's "invalid record".
func TestMCP_Pause_OlderClientAnsweredLate(t *testing.T) {
	for _, signed := range []bool{false, true} {
		t.Run(map[bool]string{false: "Local", true: "Signed"}[signed], func(t *testing.T) {
			f := newPauseFixture(t)
			sign := f.e.SignedApprovals()
			var asked atomic.Int32
			srv, cs := f.olderClient(t, func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Add(1)
				answer := map[string]any{"decision": "approve"}
				if signed {
					answer["approval"] = string(sign(pendingHop(t, r), "refund-INV-1042")) // signed while the offer was live
				}
				f.now.Add(2 * time.Minute) // the owner answers once the offer expired
				return &mcp.ElicitResult{Action: "accept", Content: answer}, nil
			})
			d, err := f.cl.Call(context.Background(), cs, refund("refund-INV-1042"), f.offer())
			require.NoError(t, err)
			require.True(t, d.Result.IsError)
			require.EqualValues(t, 1, asked.Load())
			require.Zero(t, srv.refunds.Load(), "the tool ran")
			require.Zero(t, f.approvals(t, d), "an approval was recorded")
			require.NotContains(t, d.Result.Content[0].(*mcp.TextContent).Text, "invalid record")
			agenttest.RequireClosed(t, f.ps[planner].Agent, d.Hop)
		})
	}
}

// olderClient starts the delegate and connects to it a client of a
// protocol before 2026-07-28, which cannot retry a call: the middleware
// asks it inside the call, and handle answers.
func (f *pauseFixture) olderClient(t *testing.T, handle func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) (*pausing, *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	srv := newPausing(t, f.ps[coder], f.store, f.e, f.now)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.server.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	cl := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, &mcp.ClientOptions{ElicitationHandler: handle})
	cl.AddSendingMiddleware(f.cl.Middleware())
	cs, err := cl.Connect(ctx, f.cl.Transport(ct), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return srv, cs
}

// pendingHop is the hop of the pending approval an input request shows.
func pendingHop(t *testing.T, r *mcp.ElicitRequest) digest.Digest {
	t.Helper()
	p, ok := hmcp.PendingApproval(r.Params)
	require.True(t, ok)
	hop, err := digest.Parse(p["hop"].(string))
	require.NoError(t, err)
	return hop
}

func (f *pauseFixture) approvals(t *testing.T, d *hmcp.Delivery) int {
	t.Helper()
	as, err := f.e.Ledger.Approvals(context.Background(), d.Offer.Handoff.Offer.Digest().String())
	require.NoError(t, err)
	return len(as)
}

// An older client that answers, inside the call, with approvals that do
// not unlock it (signed for another operation) is asked a bounded number
// of times in one call; the call then ends with the guard's refusal, and
// the hop, whose work took no effect, with "failed".
func TestMCP_Pause_OlderClientAskedWithoutEnd(t *testing.T) {
	f := newPauseFixture(t)
	sign := f.e.SignedApprovals()
	var asked atomic.Int32
	srv, cs := f.olderClient(t, func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		n := asked.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve",
			"approval": string(sign(pendingHop(t, r), fmt.Sprintf("other-%d", n)))}}, nil
	})
	d, err := f.cl.Call(context.Background(), cs, refund("refund-INV-1042"), f.offer())
	require.NoError(t, err)
	require.True(t, d.Result.IsError)
	require.Less(t, asked.Load(), int32(20), "bounded")
	require.Greater(t, asked.Load(), int32(1), "asked again after an answer that did not unlock the call")
	require.Zero(t, srv.refunds.Load())
	agenttest.RequireClosed(t, f.ps[planner].Agent, d.Hop)
}
