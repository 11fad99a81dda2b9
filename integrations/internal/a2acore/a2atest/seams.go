package a2atest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// The seams of issue 32, on both lines: the package rides with its offer
// (finding 1), a resumed message is a hop like any other (finding 2), and
// every refusal of the guard before any effect closes its hop (finding 3).

// The delegator names the package once, where it makes the offer
// (OfferParams.Deliver): it travels beside the Handoff, the delegate
// checks it right after the receive checks and the executor finds the
// hop's guard under evidence's name; the "accepted" names the package.
// A package that fails, or is missing, is "rejected" with reason "policy"
// and the findings in the detail, and the executor never runs.
func packageCarried(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE})
	e := agenttest.NewEvidence(t)
	co := Serve(t, l, ps[Coder], func(d *Delegate) { d.Evidence = e.Host() })
	var guarded, allowed atomic.Int32
	co.Work.Do(func(ctx context.Context, in *handoff.Received, x Exec) error {
		g := evidence.GuardFromContext(ctx)
		if g == nil {
			return x.Write(ctx, a2acore.Failed)
		}
		guarded.Add(1)
		if err := g.Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: agenttest.Allowed}); err != nil {
			return err
		}
		allowed.Add(1)
		return x.Write(ctx, a2acore.Completed)
	})
	cl := co.Dial(t, l, ps[Planner])
	d, err := cl.Send(ctx, Text("refund INV-1042"), handoff.OfferParams{To: Coder, Task: "refund-INV-1042", Deliver: agenttest.Deliver})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	require.EqualValues(t, 1, co.Work.Calls.Load())
	require.EqualValues(t, 1, guarded.Load(), "the executor found the hop's guard")
	require.EqualValues(t, 1, allowed.Load())
	named := evidence.Refs(d.Offer.Offer.Refs)
	require.Len(t, named, 1, "the offer names the package by digest")
	require.NotContains(t, string(d.Offer.Handoff.Offer.Octets), "INV-1042 paid", "the offer does not embed it")
	require.NotEmpty(t, d.Statuses)
	require.Equal(t, state.Accepted, d.Statuses[0].Status.State)
	require.Contains(t, d.Statuses[0].Status.Refs, named[0], "the acknowledgement names the package checked")

	corrupt := func(o *handoff.Offer) (ref.Ref, ref.Object, error) {
		r, obj, err := agenttest.Deliver(o)
		obj.Octets = []byte(strings.Replace(string(obj.Octets), "INV-1042 paid", "INV-1042 open", 1))
		return r, obj, err
	}
	for name, p := range map[string]handoff.OfferParams{
		"NoPackage":        {To: Coder},
		"NamedNotCarried":  {To: Coder, Prepare: e.Prepare},
		"NotTheNamedOne":   {To: Coder, Deliver: corrupt},
		"FromAnotherOffer": {To: Coder, Deliver: agenttest.OtherOffers(t, ps[Planner].Agent, Coder)},
	} {
		d, err := cl.Send(ctx, Text("refund INV-1042"), p)
		require.NoError(t, err, name)
		require.True(t, d.Refused, name)
		require.Equal(t, state.Rejected, d.State, name)
		require.Equal(t, reason.Policy, d.Reason, name)
		require.Len(t, d.Statuses, 1, name)
		require.Contains(t, d.Statuses[0].Status.Detail, "evidence", name)
		require.Equal(t, a2acore.Rejected, d.Result.State, name)
	}
	require.EqualValues(t, 1, co.Work.Calls.Load(), "the executor ran for a refused package")
}

// The message that answers a pause runs the executor with the hop's
// accepted offer, where the first message had it (FromContext, the
// Received given to Approvals.Guard): a handler written from the docs
// never sees nil, and Refused keeps its meaning (finding 2).
func pauseResumedIsTheHop(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	var (
		mu              sync.Mutex
		executed, asked []handoff.HopID
		refused         []bool
	)
	r := f.Delegate(t, "refund-INV-1042", func(d *Delegate) {
		guard := d.Approvals.Guard
		d.Approvals.Guard = func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error) {
			mu.Lock()
			asked = append(asked, in.Offer().Hop) // the doc's accessor, on every message
			mu.Unlock()
			return guard(ctx, in)
		}
	})
	r.Work.Do(func(ctx context.Context, in *handoff.Received, x Exec) error {
		got, _ := x.Received(ctx)
		mu.Lock()
		executed = append(executed, got.Offer().Hop, in.Offer().Hop)
		refused = append(refused, got.Refused() != nil)
		mu.Unlock()
		err := evidence.GuardFromContext(ctx).Authorize(ctx, evidence.Call{Hop: got.Digest(), Action: agenttest.MustAsk, OperationID: "refund-INV-1042"})
		if ok, werr := x.Ask(ctx, err); ok {
			return werr
		}
		if err != nil {
			return err
		}
		r.Refunds.Add(1)
		return x.Write(ctx, a2acore.Completed)
	})
	d, task := f.First(t, r)
	got := f.Answer(t, r, d, task, "approve")
	require.Equal(t, a2acore.Completed, got.State)
	require.EqualValues(t, 1, r.Refunds.Load())
	require.EqualValues(t, 2, r.Work.Calls.Load(), "the paused execution and the resumed one")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []handoff.HopID{d.Hop, d.Hop, d.Hop, d.Hop}, executed, "FromContext(ctx).Offer() on both messages")
	require.Equal(t, []handoff.HopID{d.Hop, d.Hop}, asked, "Approvals.Guard's Received.Offer() on both messages")
	require.Equal(t, []bool{false, false}, refused, "Refused is for what was not accepted")
}

// Every refusal of the hop's guard before any effect closes the hop: the
// executor ends with the guard's refusal of a denied action, or of an
// operation the package lists as performed, or the owner declines the
// approval; each time the task is TASK_STATE_FAILED with "failed", no
// refs, reason "policy", the delegator holds no unresolved hop, and the
// same work can be offered again (HC-42; finding 3).
func refusalsCloseTheHop(t *testing.T, l Line) {
	ctx := context.Background()
	calls := map[string]evidence.Call{
		"Denied":   {Action: agenttest.Denied},
		"Repeated": {Action: agenttest.Allowed, OperationID: agenttest.Performed},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			f := NewPauseFixture(t, l)
			r := f.Delegate(t, "refund-INV-1042")
			var ran atomic.Int32
			r.Work.Do(func(ctx context.Context, in *handoff.Received, x Exec) error {
				c := call
				c.Hop = in.Digest()
				if err := evidence.GuardFromContext(ctx).Authorize(ctx, c); err != nil {
					return err // the guard's refusal, before any effect
				}
				ran.Add(1)
				return x.Write(ctx, a2acore.Completed)
			})
			p := f.Offer()
			p.Work = "refund-INV-1042"
			d, err := r.Client.Send(ctx, Text("refund INV-1042"), p)
			require.NoError(t, err)
			require.Equal(t, a2acore.Failed, d.Result.State)
			require.Zero(t, ran.Load(), "the refused action ran")
			require.EqualValues(t, 1, r.Work.Calls.Load())
			agenttest.RequireClosed(t, f.Ps[Planner].Agent, d.Hop)
			_, err = f.Ps[Planner].Agent.Offer(ctx, handoff.OfferParams{To: Coder, Dialog: Dialog, Work: "refund-INV-1042"})
			require.NoError(t, err, "the same work is offered again once its hop is resolved")
		})
	}
	t.Run("Declined", func(t *testing.T) {
		f := NewPauseFixture(t, l)
		r := f.Delegate(t, "refund-INV-1042")
		p := f.Offer()
		p.Work = "refund-INV-1042"
		d, err := r.Client.Send(ctx, Text("refund INV-1042"), p)
		require.NoError(t, err)
		require.Equal(t, a2acore.InputRequired, d.Result.State)
		got := f.Answer(t, r, d, d.Result, "deny")
		require.Equal(t, a2acore.Failed, got.State)
		require.Zero(t, r.Refunds.Load())
		agenttest.RequireClosed(t, f.Ps[Planner].Agent, d.Hop)
		_, err = f.Ps[Planner].Agent.Offer(ctx, handoff.OfferParams{To: Coder, Dialog: Dialog, Work: "refund-INV-1042"})
		require.NoError(t, err, "the same work is offered again once its hop is resolved")
	})
}

// With the package carried, the delegate restarts between the pause and
// the answer: the new life checks the package that comes again with the
// answer against the same offer, builds the hop's guard over the same
// ledger, and the refund runs once. An answer sent without the package
// (a delegator that lost it) resumes nothing and leaves the task paused.
func pausePackageAcrossRestart(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	f.Package = true
	before := f.Delegate(t, "refund-INV-1042")
	f.Via = before.Client // the planner does not restart
	d, task := f.First(t, before)
	after := f.Delegate(t, "refund-INV-1042")

	forgetful := after.Dial(t, l, f.Ps[Planner]) // a client that never sent the hop
	m, err := forgetful.Answer(task, "approve", nil)
	require.NoError(t, err)
	res, _, err := forgetful.Retransmit(context.Background(), m, d.Hop)
	require.NoError(t, err)
	require.Contains(t, res.Text, "did not come with it")
	paused, err := after.Client.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, a2acore.InputRequired, paused.State, "an answer without the package resumes nothing")
	require.Zero(t, after.Refunds.Load())
	require.EqualValues(t, 0, after.Work.Calls.Load())

	got := f.Answer(t, after, d, task, "approve")
	require.Equal(t, a2acore.Completed, got.State)
	require.EqualValues(t, 1, after.Refunds.Load(), "the answer after the restart runs the refund once")
	require.Zero(t, before.Refunds.Load())
	require.Equal(t, state.Completed, f.HopState(t, d.Hop))
	require.Equal(t, 1, f.Approvals(t, d))
}
