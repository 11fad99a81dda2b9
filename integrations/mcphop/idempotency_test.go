package mcphop_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/boltauthority"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
)

// Issue 33 over MCP: an answer resumes the call once (finding 3), it is
// bound to the call that paused (finding 4), a call runs once across
// replicas sharing the ledger, and the ledger is the system of record of
// each hop.

// ambiguous is a delegate whose must-ask "refund" answers as a gateway
// that timed out would: an error result, whose outcome is unknown, so
// that the hop stays "accepted" and the answer that resumed it could be
// presented again. It counts the refunds.
func newAmbiguous(t *testing.T, f *pauseFixture) *pausing {
	t.Helper()
	ag, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: f.ps[coder].Signer, Trust: f.ps[coder].Trust, Store: f.store, Now: f.now.Now})
	require.NoError(t, err)
	mw, err := hmcp.Server(hmcp.ServerConfig{Agent: ag, Action: refundAction,
		Peer:      func(*mcp.CallToolRequest) handoff.AgentID { return planner },
		Approvals: &hmcp.Approvals{Key: stateKey, Guard: f.e.Guard, Now: f.now.Now}})
	require.NoError(t, err)
	d := &pausing{server: mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)}
	d.server.AddReceivingMiddleware(mw)
	mcp.AddTool(d.server, &mcp.Tool{Name: "refund"}, func(ctx context.Context, _ *mcp.CallToolRequest, a refundArgs) (*mcp.CallToolResult, any, error) {
		d.refunds.Add(1)
		d.mu.Lock()
		d.amounts = append(d.amounts, a.Amount)
		d.mu.Unlock()
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "gateway timeout: refund re_7 may have been made"}}}, nil, nil
	})
	return d
}

// pausedAmbiguous starts an ambiguous delegate and pauses a refund on
// it, through a client that retries by hand.
func pausedAmbiguous(t *testing.T) (*pauseFixture, *pausing, *mcp.ClientSession, *hmcp.Delivery, *mcp.CallToolResult) {
	t.Helper()
	f := newPauseFixture(t)
	srv := newAmbiguous(t, f)
	cs := dial(t, f.cl, srv.server, nil)
	d, paused := f.first(t, cs, "refund-INV-1042")
	return f, srv, cs, d, paused
}

// answer is the retried call of params with the answer to the pause whose
// request state is st.
func answer(params *mcp.CallToolParams, st string, content map[string]any) *mcp.CallToolParams {
	p := *params
	p.RequestState = st
	p.InputResponses = mcp.InputResponseMap{hmcp.ApprovalInput: &mcp.ElicitResult{Action: "accept", Content: content}}
	return &p
}

// Finding 3: one MCP answer resumed the work again and again. A used
// answer, presented again while the hop is still "accepted" (the tool's
// outcome unknown), ran the tool each time (5 replays, 5 runs), and
// concurrent answers ran it more than once. Now the answer is used once:
// the pause is claimed in the ledger before the tool runs, and the tool
// runs under its call's key; every other presentation is answered with
// the contract's outcome (Idempotency: "replayed" with the recorded
// result, or "in_flight"), and one approval is recorded (HC-38: a
// delegate never does the work again).
func TestMCP_OneAnswerOneResume(t *testing.T) {
	ctx := context.Background()
	t.Run("Replayed", func(t *testing.T) {
		f, srv, cs, d, paused := pausedAmbiguous(t)
		ans := answer(refund("refund-INV-1042"), paused.RequestState, map[string]any{"decision": "approve"})
		res, _, err := f.cl.Retransmit(ctx, cs, ans, d.Hop)
		require.NoError(t, err)
		require.True(t, res.IsError)
		_, replayed := hmcp.IdempotencyOf(res)
		require.False(t, replayed, "the tool's own result")
		first, err := json.Marshal(res.Content)
		require.NoError(t, err)
		require.EqualValues(t, 1, srv.refunds.Load())
		require.Equal(t, state.Accepted, f.state(t, d.Hop), "the outcome is unknown: the hop stays accepted")
		for range 5 {
			res, _, err := f.cl.Retransmit(ctx, cs, ans, d.Hop)
			require.NoError(t, err)
			id, ok := hmcp.IdempotencyOf(res)
			require.True(t, ok, "the used answer again: %v", res.Content)
			require.Equal(t, hmcp.Replayed, id.Outcome)
			rec, err := json.Marshal(id.Result.(map[string]any)["content"])
			require.NoError(t, err)
			require.JSONEq(t, string(first), string(rec), "the recorded result")
		}
		require.EqualValues(t, 1, srv.refunds.Load(), "5 replays, one refund")
		require.Equal(t, 1, f.approvals(t, d), "one approval")
	})
	t.Run("Concurrent", func(t *testing.T) {
		f, srv, cs, d, paused := pausedAmbiguous(t)
		ans := answer(refund("refund-INV-1042"), paused.RequestState, map[string]any{"decision": "approve"})
		outcomes := make([]string, 8)
		var wg sync.WaitGroup
		for i := range outcomes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, _, err := f.cl.Retransmit(ctx, cs, ans, d.Hop)
				if err != nil {
					outcomes[i] = err.Error()
					return
				}
				if id, ok := hmcp.IdempotencyOf(res); ok {
					outcomes[i] = id.Outcome
				}
			}()
		}
		wg.Wait()
		ran := 0
		for _, o := range outcomes {
			switch o {
			case "":
				ran++
			case hmcp.Replayed, hmcp.InFlight:
			default:
				t.Fatalf("an answer got %q", o)
			}
		}
		require.Equal(t, 1, ran, "one answer resumed the call: %v", outcomes)
		require.EqualValues(t, 1, srv.refunds.Load(), "8 answers, one refund")
		require.Equal(t, 1, f.approvals(t, d), "one approval")
	})
	t.Run("SignedTwinsAndEncodings", func(t *testing.T) {
		// The owner's signed approval of the call, its high-S twin, a
		// second signature and a re-encoding, each sent twice, at once,
		// then again one by one: one grant, one refund.
		f, srv, cs, d, paused := pausedAmbiguous(t)
		owner := f.e.Owner()
		p := pendingOf(t, d.Offer.Handoff.Offer.Digest(), "refund-INV-1042")
		st := owner.Statement(d.Offer.Handoff.Offer.Digest(), "refund-INV-1042")
		st.Tool, st.Args = p["tool"].(string), p["args"].(string)
		variants := owner.Variants(st)
		var wg sync.WaitGroup
		for _, signed := range append(variants, variants...) {
			ans := answer(refund("refund-INV-1042"), paused.RequestState, map[string]any{"decision": "approve", "approval": string(signed)})
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, _ = f.cl.Retransmit(ctx, cs, ans, d.Hop)
			}()
		}
		wg.Wait()
		for _, signed := range variants {
			ans := answer(refund("refund-INV-1042"), paused.RequestState, map[string]any{"decision": "approve", "approval": string(signed)})
			res, _, err := f.cl.Retransmit(ctx, cs, ans, d.Hop)
			require.NoError(t, err)
			id, ok := hmcp.IdempotencyOf(res)
			require.True(t, ok)
			require.Equal(t, hmcp.Replayed, id.Outcome)
		}
		require.EqualValues(t, 1, srv.refunds.Load(), "one refund")
		as, err := f.e.Ledger.Approvals(ctx, d.Offer.Handoff.Offer.Digest().String())
		require.NoError(t, err)
		require.Len(t, as, 1, "one grant for one statement, however signed or encoded")
		require.Equal(t, authority.SourceSigned, as[0].Source)
		require.Zero(t, as[0].Remaining)
	})
}

// Finding 4: an answer was not bound to the call that paused. The pause
// of a refund of 10 was resumed as a refund of 1,000,000, or as another
// tool, and the hop completed. Now the request state is sealed to the
// call (its tool, the digest of its canonical arguments, its key), the
// pending approval shows the arguments, and a retried call that differs
// is refused (evidence.ErrApprovalMismatch): nothing runs, nothing is
// recorded, and the hop waits, paused, for the answer to its own call.
func TestMCP_AnswerBoundToTheCall(t *testing.T) {
	ctx := context.Background()
	f := newPauseFixture(t)
	srv := newPausing(t, f.ps[coder], f.store, f.e, f.now)
	mcp.AddTool(srv.server, &mcp.Tool{Name: "wire"}, func(context.Context, *mcp.CallToolRequest, refundArgs) (*mcp.CallToolResult, any, error) {
		srv.refunds.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wired"}}}, nil, nil
	})
	cs := dial(t, f.cl, srv.server, nil)
	ten := &mcp.CallToolParams{Name: "refund", Arguments: refundArgs{Operation: "refund-INV-1042", Amount: 10}}
	d, err := f.cl.Call(ctx, cs, ten, f.offer())
	require.NoError(t, err)
	require.True(t, d.Result.NeedsInput())
	ask := d.Result.InputRequests[hmcp.ApprovalInput].(*mcp.ElicitParams)
	p, ok := hmcp.PendingApproval(ask)
	require.True(t, ok)
	require.Equal(t, map[string]any{"operation_id": "refund-INV-1042", "amount": float64(10)}, p["arguments"], "the owner is shown the arguments")
	args, err := evidence.ArgsDigest([]byte(`{"amount":10,"operation_id":"refund-INV-1042"}`))
	require.NoError(t, err)
	require.Equal(t, args.String(), p["args"])
	require.Contains(t, ask.Message, args.String())

	for name, other := range map[string]*mcp.CallToolParams{
		"Amount":    {Name: "refund", Arguments: refundArgs{Operation: "refund-INV-1042", Amount: 1000000}},
		"Tool":      {Name: "wire", Arguments: refundArgs{Operation: "refund-INV-1042", Amount: 10}},
		"Operation": {Name: "refund", Arguments: refundArgs{Operation: "refund-INV-7", Amount: 10}},
	} {
		res, _, err := f.cl.Retransmit(ctx, cs, answer(other, d.Result.RequestState, map[string]any{"decision": "approve"}), d.Hop)
		require.NoError(t, err, name)
		require.True(t, res.IsError, name)
		require.Contains(t, res.Content[0].(*mcp.TextContent).Text, evidence.ErrApprovalMismatch.Error(), name)
		require.Zero(t, srv.refunds.Load(), "%s: resumed as another call", name)
		require.Zero(t, f.approvals(t, d), "%s: nothing recorded", name)
		require.Equal(t, state.Accepted, f.state(t, d.Hop), "%s: the hop waits, paused", name)
	}
	res, _, err := f.cl.Retransmit(ctx, cs, answer(ten, d.Result.RequestState, map[string]any{"decision": "approve"}), d.Hop)
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, []int{10}, srv.amounts, "the call that paused, once")
	require.Equal(t, state.Completed, f.state(t, d.Hop))
}

// Two replicas of the delegate, two middleware instances with replay
// stores of their own and one authority ledger, a bbolt file both open
// (boltauthority, Shared), race the same tools/call (the same Handoff,
// the same arguments): the tool runs once, and the other replica answers
// with the contract's outcome, "in_flight" while it runs, "replayed" with
// the recorded result once it ran. The same Handoff with other arguments
// is a conflict: nothing runs.
func TestMCP_ReplicasRace(t *testing.T) {
	ctx := context.Background()
	f := newPauseFixture(t)
	path := filepath.Join(t.TempDir(), "authority.db")
	var runs atomic.Int32
	release := make(chan struct{})
	replica := func() *mcp.ClientSession {
		ledger, err := boltauthority.Open(path, boltauthority.Options{Shared: true})
		require.NoError(t, err)
		t.Cleanup(func() { ledger.Close() })
		guard := func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error) {
			return f.e.GuardOn(ctx, in, ledger)
		}
		ag, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: f.ps[coder].Signer, Trust: f.ps[coder].Trust,
			Store: replay.NewMemory(replay.MemoryOptions{}), Now: f.now.Now})
		require.NoError(t, err)
		mw, err := hmcp.Server(hmcp.ServerConfig{Agent: ag, Peer: func(*mcp.CallToolRequest) handoff.AgentID { return planner },
			Approvals: &hmcp.Approvals{Key: stateKey, Guard: guard, Now: f.now.Now}})
		require.NoError(t, err)
		srv := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
		srv.AddReceivingMiddleware(mw)
		mcp.AddTool(srv, &mcp.Tool{Name: agenttest.Allowed}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			runs.Add(1)
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "INV-1042 paid"}}}, nil, nil
		})
		return dial(t, f.cl, srv, nil)
	}
	a, b, c := replica(), replica(), replica()
	out, err := f.ps[planner].Agent.Offer(ctx, f.offer())
	require.NoError(t, err)
	read := &mcp.CallToolParams{Name: agenttest.Allowed, Arguments: map[string]any{"invoice": "INV-1042"}}
	call := func(cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
		pp := *p // the SDK writes the call's _meta
		res, err := cs.CallTool(hmcp.WithHandoff(ctx, out.Handoff), &pp)
		require.NoError(t, err)
		return res
	}
	results := make([]*mcp.CallToolResult, 2)
	var wg sync.WaitGroup
	for i, cs := range []*mcp.ClientSession{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = call(cs, read)
		}()
	}
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	var ran, told []*mcp.CallToolResult
	for _, r := range results {
		if _, ok := hmcp.IdempotencyOf(r); ok {
			told = append(told, r)
		} else {
			ran = append(ran, r)
		}
	}
	require.Len(t, ran, 1, "one replica ran the tool")
	require.Len(t, told, 1)
	id, _ := hmcp.IdempotencyOf(told[0])
	require.Contains(t, []string{hmcp.InFlight, hmcp.Replayed}, id.Outcome)
	require.EqualValues(t, 1, runs.Load(), "racing replicas: one effect")

	// A third replica, which saw nothing: the recorded result.
	res := call(c, read)
	id, ok := hmcp.IdempotencyOf(res)
	require.True(t, ok)
	require.Equal(t, hmcp.Replayed, id.Outcome)
	rec, err := json.Marshal(id.Result.(map[string]any)["content"])
	require.NoError(t, err)
	require.JSONEq(t, `[{"type":"text","text":"INV-1042 paid"}]`, string(rec), "the outcome the first recorded")
	key, err := evidence.Call{Hop: out.Handoff.Offer.Digest(), Action: agenttest.Allowed, Tool: agenttest.Allowed,
		Args: []byte(`{"invoice":"INV-1042"}`), IdempotencyKey: out.Handoff.Offer.Digest().String()}.Key()
	require.NoError(t, err)
	require.Equal(t, key.String(), id.Key, "the call's key, derived by the middleware")

	// Other arguments under the same Handoff: a conflict.
	res = call(replica(), &mcp.CallToolParams{Name: agenttest.Allowed, Arguments: map[string]any{"invoice": "INV-9999"}})
	id, ok = hmcp.IdempotencyOf(res)
	require.True(t, ok)
	require.Equal(t, hmcp.Conflict, id.Outcome)
	require.EqualValues(t, 1, runs.Load())
}

// The authority ledger is the system of record of each hop: the
// middleware records the acknowledgement of a hop accepted with its
// package and the final disposition it signs, which a test reads back
// from the ledger (authority.Ledger.Hop): completed, failed (a refusal
// before any effect), rejected (a package that did not pass).
func TestMCP_LedgerSystemOfRecord(t *testing.T) {
	ctx := context.Background()
	f := newPauseFixture(t)
	srv := newGuarded(t, f.ps[coder], f.e, f.now, true)
	cs := dial(t, f.cl, srv.server, &approver{decision: "approve"})
	hopOf := func(d *hmcp.Delivery) authority.HopRecord {
		t.Helper()
		h, err := f.e.Ledger.Hop(ctx, d.Offer.Handoff.Offer.Digest().String())
		require.NoError(t, err)
		return h
	}
	offer := handoff.OfferParams{To: coder, Dialog: dialog, Deliver: agenttest.Deliver}
	for _, c := range []struct {
		call *mcp.CallToolParams
		want state.State
	}{
		{act(agenttest.Allowed, ""), state.Completed},
		{act(agenttest.MustAsk, "refund-INV-1042"), state.Completed},
		{act(agenttest.Denied, ""), state.Failed},
	} {
		d, err := f.cl.Call(ctx, cs, c.call, offer)
		require.NoError(t, err)
		h := hopOf(d)
		require.NotNil(t, h.Ack)
		require.Equal(t, authority.Accepted, h.Ack.Decision)
		require.Equal(t, evidence.Refs(d.Offer.Offer.Refs)[0].Dig.String(), h.Ack.Package)
		require.NotNil(t, h.Final)
		require.Equal(t, string(c.want), h.Final.State)
		require.Equal(t, c.want, d.State)
	}
	d, err := f.cl.Call(ctx, cs, act(agenttest.Allowed, ""), handoff.OfferParams{To: coder, Dialog: dialog, Deliver: agenttest.OtherOffers(t, f.ps[planner].Agent, coder)})
	require.NoError(t, err)
	require.True(t, d.Refused)
	h := hopOf(d)
	require.Equal(t, authority.Rejected, h.Ack.Decision)
	require.NotEmpty(t, h.Ack.Findings)
	require.Equal(t, string(state.Rejected), h.Final.State)
}

// A read (ServerConfig.ReadOnly, the readOnlyHint the server declares) is
// decided by the guard and recorded nowhere: while its hop is open it runs
// every time, on every replica, as a read must see the state as it is; a
// read the package does not allow is refused, and the hop closed, as any
// call.
func TestMCP_ReadOnlyRunsEveryTime(t *testing.T) {
	ctx := context.Background()
	f := newPauseFixture(t)
	var reads atomic.Int32
	replica := func() *mcp.ClientSession {
		ag, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: f.ps[coder].Signer, Trust: f.ps[coder].Trust,
			Store: replay.NewMemory(replay.MemoryOptions{}), Now: f.now.Now})
		require.NoError(t, err)
		mw, err := hmcp.Server(hmcp.ServerConfig{Agent: ag, Peer: func(*mcp.CallToolRequest) handoff.AgentID { return planner },
			Approvals: &hmcp.Approvals{Key: stateKey, Guard: f.e.Guard, Now: f.now.Now},
			ReadOnly:  func(r *mcp.CallToolRequest) bool { return r.Params.Name != "refund" }})
		require.NoError(t, err)
		srv := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
		srv.AddReceivingMiddleware(mw)
		for _, name := range []string{agenttest.Allowed, agenttest.Denied} {
			mcp.AddTool(srv, &mcp.Tool{Name: name, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
					reads.Add(1)
					hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectUnknown}) // the hop stays open
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "INV-1042 paid"}}}, nil, nil
				})
		}
		return dial(t, f.cl, srv, nil)
	}
	out, err := f.ps[planner].Agent.Offer(ctx, f.offer())
	require.NoError(t, err)
	read := func(cs *mcp.ClientSession, tool string) *mcp.CallToolResult {
		res, err := cs.CallTool(hmcp.WithHandoff(ctx, out.Handoff), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"invoice": "INV-1042"}})
		require.NoError(t, err)
		return res
	}
	for range 2 {
		res := read(replica(), agenttest.Allowed)
		require.False(t, res.IsError, "%v", res.Content)
		_, replayed := hmcp.IdempotencyOf(res)
		require.False(t, replayed)
	}
	require.EqualValues(t, 2, reads.Load(), "the same read on two replicas: run on both")
	rs, err := f.e.Ledger.Lookup(ctx, out.Handoff.Offer.Digest().String())
	require.NoError(t, err)
	require.Empty(t, rs, "a read is recorded nowhere")

	out, err = f.ps[planner].Agent.Offer(ctx, f.offer())
	require.NoError(t, err)
	res := read(replica(), agenttest.Denied)
	require.True(t, res.IsError)
	require.EqualValues(t, 2, reads.Load(), "a denied read never runs")
}
