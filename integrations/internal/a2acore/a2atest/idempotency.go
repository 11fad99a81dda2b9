package a2atest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// Issue 33 over A2A: an answer resumes the work once (finding 3), it is
// bound to the call that paused (finding 4), an execution runs once per
// message across replicas sharing the ledger, and the ledger is the
// system of record of each hop.

// Payer is one life of a delegate whose executor refunds what the message
// it serves names: the amount (metadata "amount", "10" by default) with
// the tool ("tool", "refund" by default), as an agent takes a call's
// arguments from the conversation. The refund is must-ask; its call
// carries the tool and the arguments, which the guard binds (operation
// "refund-1"). With second, a refund made asks for another one
// (operation "refund-2"), so that the hop pauses again.
type Payer struct {
	*Refunder
	mu   sync.Mutex
	paid []string // "tool amount" per effect
}

// Paid returns the effects made, "tool amount" each.
func (p *Payer) Paid() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.paid...)
}

// Payer starts one life of the paying delegate.
func (f *PauseFixture) Payer(t *testing.T, second bool) *Payer {
	t.Helper()
	p := &Payer{Refunder: f.Delegate(t, "unused")}
	ops := []string{"refund-1"}
	if second {
		ops = append(ops, "refund-2")
	}
	p.Work.Do(func(ctx context.Context, in *handoff.Received, x Exec) error {
		amount, tool := "10", "refund"
		if v, ok := x.Meta()["amount"].(string); ok {
			amount = v
		}
		if v, ok := x.Meta()["tool"].(string); ok {
			tool = v
		}
		g := evidence.GuardFromContext(ctx)
		for _, op := range ops {
			c := evidence.Call{Hop: in.Digest(), Action: agenttest.MustAsk, Tool: tool, Args: []byte(`{"amount":` + amount + `}`), OperationID: op}
			err := g.Authorize(ctx, c)
			if errors.Is(err, evidence.ErrReplayed) {
				continue // made already, by this very call
			}
			if asked, werr := x.Ask(ctx, err); asked {
				return werr // paused for the owner's approval
			}
			if err != nil {
				x.Report(ctx, Outcome{Effect: state.EffectNone})
				return x.Write(ctx, a2acore.Failed)
			}
			p.mu.Lock()
			p.paid = append(p.paid, tool+" "+amount)
			p.mu.Unlock()
		}
		return x.Write(ctx, a2acore.Completed)
	})
	return p
}

// answerOf is the answer to the pause task shows, with the metadata extra
// merged into the message (what a client may add to it).
func answerOf(t *testing.T, cl Delegator, task *Result, signed []byte, extra map[string]any) Msg {
	t.Helper()
	m, err := cl.Answer(task, "approve", signed)
	require.NoError(t, err)
	for k, v := range extra {
		m.Meta[k] = v
	}
	m.Raw = nil
	return m
}

// idempotency returns the idempotency key contract's answer a result
// carries, "" for none.
func idempotency(r *Result) string {
	if r == nil {
		return ""
	}
	m, _ := r.Meta[a2acore.IdempotencyOutcomeKey].(map[string]any)
	o, _ := m["outcome"].(string)
	return o
}

// Finding 3: one answer resumed the work again and again. A used answer
// presented again, while the hop is still "accepted" (paused again for a
// second approval), ran the executor each time; concurrent answers ran
// it more than once. Now an answer resumes the work once: the pause is
// claimed in the ledger before the executor runs, and every other
// presentation of it is answered "replayed" (or "in flight" while it
// runs), changing no task; one approval is recorded, one refund made
// (HC-38: a delegate never does the work again).
func pauseOneAnswerOneResume(t *testing.T, l Line) {
	ctx := context.Background()
	t.Run("Replayed", func(t *testing.T) {
		f := NewPauseFixture(t, l)
		p := f.Payer(t, true)
		d, task := f.First(t, p.Refunder)
		ans := answerOf(t, p.Client, task, nil, nil)
		res, _, err := p.Client.Retransmit(ctx, ans, d.Hop)
		require.NoError(t, err)
		require.Equal(t, a2acore.InputRequired, res.State, "the first refund made, the second waits")
		require.Equal(t, []string{"refund 10"}, p.Paid())
		require.EqualValues(t, 2, p.Work.Calls.Load())
		for range 5 {
			res, _, err := p.Client.Retransmit(ctx, ans, d.Hop)
			require.NoError(t, err)
			require.Equal(t, "replayed", idempotency(res), "the used answer again")
		}
		require.Equal(t, []string{"refund 10"}, p.Paid(), "one refund")
		require.EqualValues(t, 2, p.Work.Calls.Load(), "a used answer resumes nothing")
		require.Equal(t, 1, f.Approvals(t, d), "one approval recorded")
		got, err := p.Client.Get(ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, a2acore.InputRequired, got.State)
		// The second pause, answered once, completes the hop.
		res, _, err = p.Client.Retransmit(ctx, answerOf(t, p.Client, got, nil, nil), d.Hop)
		require.NoError(t, err)
		require.Equal(t, a2acore.Completed, res.State)
		require.Equal(t, []string{"refund 10", "refund 10"}, p.Paid())
		require.EqualValues(t, 3, p.Work.Calls.Load())
	})
	t.Run("Concurrent", func(t *testing.T) {
		// Eight answers at once. The hop pauses again after the first
		// refund, so that an answer the SDK runs after it finds the hop
		// paused still (a2a-go/v2 runs one execution of a task at a time
		// in a process, and refuses the others meanwhile).
		f := NewPauseFixture(t, l)
		p := f.Payer(t, true)
		d, task := f.First(t, p.Refunder)
		ans := answerOf(t, p.Client, task, nil, nil)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, _ = p.Client.Retransmit(ctx, ans, d.Hop)
			}()
		}
		wg.Wait()
		require.Equal(t, []string{"refund 10"}, p.Paid(), "8 answers, one refund")
		require.EqualValues(t, 2, p.Work.Calls.Load(), "8 answers, one resumption")
		require.Equal(t, 1, f.Approvals(t, d), "one approval recorded")
		require.Equal(t, state.Accepted, f.HopState(t, d.Hop), "paused for the second refund")
	})
	t.Run("SignedTwinsAndEncodings", func(t *testing.T) {
		// The owner's signed approval of the call, its high-S twin, a
		// second signature and a re-encoding, each sent twice, at once:
		// one grant, one resumption, one refund.
		f := NewPauseFixture(t, l)
		owner := f.E.Owner()
		p := f.Payer(t, false)
		d, task := f.First(t, p.Refunder)
		pending, ok := a2acore.Pending(task.Meta)
		require.True(t, ok)
		st := owner.Statement(d.Offer.Handoff.Offer.Digest(), "refund-1")
		st.Tool, st.Args = pending["tool"].(string), pending["args"].(string)
		var wg sync.WaitGroup
		for _, signed := range append(owner.Variants(st), owner.Variants(st)...) {
			ans := answerOf(t, p.Client, task, signed, nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, _ = p.Client.Retransmit(ctx, ans, d.Hop)
			}()
		}
		wg.Wait()
		require.Equal(t, []string{"refund 10"}, p.Paid(), "one refund")
		require.EqualValues(t, 2, p.Work.Calls.Load(), "one resumption")
		as, err := f.E.Ledger.Approvals(ctx, d.Offer.Handoff.Offer.Digest().String())
		require.NoError(t, err)
		require.Len(t, as, 1, "one grant for one statement, however signed or encoded")
		require.Equal(t, authority.SourceSigned, as[0].Source)
		require.Zero(t, as[0].Remaining)
		require.Equal(t, state.Completed, f.HopState(t, d.Hop))
	})
}

// Finding 4: an answer was not bound to the call that paused. The pause
// of a refund of 10 was resumed as a refund of 1,000,000, or with another
// tool, and the hop completed. Now the pending approval names the call's
// tool, its arguments and their digest, the answer records the approval
// of exactly that call, and a resumption that makes another call is
// refused by the guard (evidence.ErrApprovalMismatch): nothing is paid,
// the hop pauses again, showing the call it was asked to make, and only
// the call that paused is paid, once.
func pauseAnswerBoundToTheCall(t *testing.T, l Line) {
	ctx := context.Background()
	f := NewPauseFixture(t, l)
	p := f.Payer(t, false)
	d, task := f.First(t, p.Refunder)
	pending, ok := a2acore.Pending(task.Meta)
	require.True(t, ok)
	args, err := evidence.ArgsDigest([]byte(`{"amount":10}`))
	require.NoError(t, err)
	require.Equal(t, "refund", pending["tool"])
	require.Equal(t, args.String(), pending["args"])
	require.Equal(t, map[string]any{"amount": float64(10)}, pending["arguments"], "the owner is shown the arguments")

	for _, extra := range []map[string]any{{"amount": "1000000"}, {"tool": "wire"}} {
		cur, err := p.Client.Get(ctx, task.ID)
		require.NoError(t, err)
		res, _, err := p.Client.Retransmit(ctx, answerOf(t, p.Client, cur, nil, extra), d.Hop)
		require.NoError(t, err)
		require.Equal(t, a2acore.InputRequired, res.State, "%v: paused again", extra)
		again, ok := a2acore.Pending(res.Meta)
		require.True(t, ok, "%v", extra)
		require.NotEqual(t, pending["key"], again["key"], "%v: the owner is asked about the call it makes", extra)
		require.Empty(t, p.Paid(), "%v: resumed as another call", extra)
		require.Equal(t, state.Accepted, f.HopState(t, d.Hop), "%v", extra)
	}
	cur, err := p.Client.Get(ctx, task.ID)
	require.NoError(t, err)
	res, _, err := p.Client.Retransmit(ctx, answerOf(t, p.Client, cur, nil, nil), d.Hop)
	require.NoError(t, err)
	require.Equal(t, a2acore.Completed, res.State)
	require.Equal(t, []string{"refund 10"}, p.Paid(), "the call that paused, once")
}

// An execution runs once per message, across replicas that share the
// ledger and nothing else (each its own replay and task store): the same
// message with the same Handoff, on a replica that did not see it,
// changes no task and is answered "replayed" with the outcome the first
// recorded, or "in flight" while it runs; the same Handoff with another
// message is a conflict. Racing, two replicas run it once.
func replicasOneExecution(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE})
	e := agenttest.NewEvidence(t)
	var runs atomic.Int32
	replica := func() (*Node, Delegator) {
		ag, err := handoff.NewAgent(handoff.Config{ID: Coder, Signer: ps[Coder].Signer, Trust: ps[Coder].Trust})
		require.NoError(t, err)
		n := Serve(t, l, &agenttest.Party{ID: Coder, Signer: ps[Coder].Signer, Agent: ag, Trust: ps[Coder].Trust}, func(d *Delegate) {
			d.Approvals = &Approvals{Key: StateKey, Guard: e.Guard}
		})
		n.Work.Do(func(ctx context.Context, _ *handoff.Received, x Exec) error {
			runs.Add(1)
			return x.Write(ctx, a2acore.Completed)
		})
		return n, n.Dial(t, l, ps[Planner])
	}
	offer := func() *handoff.Handoff {
		out, err := ps[Planner].Agent.Offer(ctx, handoff.OfferParams{To: Coder, Dialog: Dialog, Prepare: e.Prepare})
		require.NoError(t, err)
		return out.Handoff
	}
	_, a := replica()
	_, b := replica()
	_, c := replica()
	h := offer()
	res, _, err := SendWith(ctx, a, h, Text("refund INV-1042"))
	require.NoError(t, err)
	require.Equal(t, a2acore.Completed, res.State)
	res, _, err = SendWith(ctx, b, h, Text("refund INV-1042"))
	require.NoError(t, err)
	require.Equal(t, "replayed", idempotency(res), "the same message on a replica that did not see it")
	m := res.Meta[a2acore.IdempotencyOutcomeKey].(map[string]any)
	require.Equal(t, a2acore.Completed, m["result"].(map[string]any)["state"], "with the recorded outcome")
	res, _, err = SendWith(ctx, c, h, Text("refund INV-9999, twice"))
	require.NoError(t, err)
	require.Equal(t, "conflict", idempotency(res), "the same hop with another message")
	require.EqualValues(t, 1, runs.Load())

	// Racing.
	_, a = replica()
	_, b = replica()
	h = offer()
	var wg sync.WaitGroup
	outcomes := make([]string, 2)
	for i, cl := range []Delegator{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := SendWith(ctx, cl, h, Text("refund INV-1042"))
			if err == nil {
				outcomes[i] = idempotency(res)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 2, runs.Load(), "racing replicas: one execution")
	require.Contains(t, outcomes, "", "one ran")
	require.Condition(t, func() bool {
		return outcomes[0] == "" && (outcomes[1] == "replayed" || outcomes[1] == "in_flight") ||
			outcomes[1] == "" && (outcomes[0] == "replayed" || outcomes[0] == "in_flight")
	}, "the other is told: %v", outcomes)
}

// The authority ledger is the system of record of each hop: the
// middleware records the acknowledgement of a hop accepted with its
// package, and the final disposition it signs, and a test reads both back
// from the ledger (authority.Ledger.Hop): completed, failed (a declined
// approval), canceled (by the delegator), rejected (a package that did
// not pass).
func ledgerSystemOfRecord(t *testing.T, l Line) {
	ctx := context.Background()
	hopOf := func(t *testing.T, f *PauseFixture, d *Delivery) authority.HopRecord {
		t.Helper()
		h, err := f.E.Ledger.Hop(ctx, d.Offer.Handoff.Offer.Digest().String())
		require.NoError(t, err)
		return h
	}
	for _, decision := range []string{"approve", "deny"} {
		f := NewPauseFixture(t, l)
		f.Package = true
		r := f.Delegate(t, "refund-INV-1042")
		d, task := f.First(t, r)
		h := hopOf(t, f, d)
		require.NotNil(t, h.Ack, "acknowledged when accepted")
		require.Equal(t, authority.Accepted, h.Ack.Decision)
		named := evidence.Refs(d.Offer.Offer.Refs)
		require.Len(t, named, 1)
		require.Equal(t, named[0].Dig.String(), h.Ack.Package, "the package acknowledged")
		require.Nil(t, h.Final, "paused: not final")
		f.Answer(t, r, d, task, decision)
		h = hopOf(t, f, d)
		want := state.Completed
		if decision == "deny" {
			want = state.Failed
		}
		require.NotNil(t, h.Final)
		require.Equal(t, string(want), h.Final.State, "the final disposition the delegate signed")
		require.Equal(t, want, f.HopState(t, d.Hop))
	}
	// Canceled by the delegator while paused: final, "canceled".
	f := NewPauseFixture(t, l)
	f.Package = true
	r := f.Delegate(t, "refund-INV-1042")
	d, _ := f.First(t, r)
	_, _, err := r.Client.Cancel(ctx, d.Hop)
	require.NoError(t, err)
	h := hopOf(t, f, d)
	require.NotNil(t, h.Final)
	require.Equal(t, string(state.Canceled), h.Final.State)

	// A package that did not pass: acknowledged "rejected", with its
	// findings, and final.
	f = NewPauseFixture(t, l)
	f.Package = true
	r = f.Delegate(t, "refund-INV-1042")
	p := f.Offer()
	p.Deliver = agenttest.OtherOffers(t, f.Ps[Planner].Agent, Coder)
	d, err = r.Client.Send(ctx, Text("refund INV-1042"), p)
	require.NoError(t, err)
	require.True(t, d.Refused)
	h = hopOf(t, f, d)
	require.NotNil(t, h.Ack)
	require.Equal(t, authority.Rejected, h.Ack.Decision)
	require.NotEmpty(t, h.Ack.Findings)
	require.NotNil(t, h.Final)
	require.Equal(t, string(state.Rejected), h.Final.State)
}
