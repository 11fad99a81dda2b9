package a2atest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// StateKey is the key the paused delegates seal their request states with.
var StateKey = []byte("0123456789abcdef0123456789abcdef")

// Refunder is one life of a delegate whose work asks the hop's guard
// before the must-ask refund and pauses the task for its owner's approval
// when the guard asks for one. It counts the refunds it made.
type Refunder struct {
	*Node
	Refunds atomic.Int32
	// Client is the planner's delegator to this life.
	Client Delegator
}

// PauseFixture is a planner and a coder whose executor wrapper has
// Approvals, over stores that outlive a restart of the coder: the replay
// store, the task store, the authority ledger and the sealing key.
type PauseFixture struct {
	L     Line
	Ps    map[handoff.AgentID]*agenttest.Party
	E     *agenttest.Evidence
	Store replay.Store
	Tasks any
	Now   *agenttest.Clock
	// AuthRequired pauses with auth-required.
	AuthRequired bool
	// TrustStranger has the coder trust the Stranger's key too; by default
	// it trusts the planner's and its own.
	TrustStranger bool
	// Package carries the evidence package beside each offer
	// (OfferParams.Deliver) and has the coder check it and build each
	// hop's guard from it (ServerConfig.Evidence), with no Approvals.Guard.
	Package bool
	// Via is the delegator whose handoff Client the planner's clients of
	// later lives share: the planner does not restart with the coder.
	Via Delegator
}

// NewPauseFixture returns the fixture for l.
func NewPauseFixture(t *testing.T, l Line) *PauseFixture {
	t.Helper()
	f := &PauseFixture{L: l, Ps: agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE},
		agenttest.Spec{ID: Stranger, Format: handoff.JWS}),
		E: agenttest.NewEvidence(t), Store: replay.NewMemory(replay.MemoryOptions{}), Tasks: l.NewTasks(),
		Now: agenttest.NewClock(time.Now())}
	f.E.Now = f.Now.Now
	return f
}

// Delegate starts one life of the coder, whose refunds are of operation
// op; opts change its configuration last.
func (f *PauseFixture) Delegate(t *testing.T, op string, opts ...func(*Delegate)) *Refunder {
	t.Helper()
	trust := f.Ps[Coder].Trust
	if !f.TrustStranger {
		var err error
		trust, err = handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{Planner: {f.Ps[Planner].Signer.Key()}, Coder: {f.Ps[Coder].Signer.Key()}})
		require.NoError(t, err)
	}
	ag, err := handoff.NewAgent(handoff.Config{ID: Coder, Signer: f.Ps[Coder].Signer, Trust: trust, Store: f.Store, Now: f.Now.Now})
	require.NoError(t, err)
	r := &Refunder{}
	r.Node = Serve(t, f.L, &agenttest.Party{ID: Coder, Signer: f.Ps[Coder].Signer, Agent: ag, Trust: trust}, func(d *Delegate) {
		d.Agent, d.Tasks = ag, f.Tasks
		d.Approvals = &Approvals{Key: StateKey, Guard: f.E.Guard, Now: f.Now.Now, AuthRequired: f.AuthRequired}
		if f.Package {
			d.Approvals.Guard, d.Evidence = nil, f.E.Host()
		}
		for _, o := range opts {
			o(d)
		}
	})
	r.Work.Do(func(ctx context.Context, in *handoff.Received, x Exec) error {
		err := evidence.GuardFromContext(ctx).Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: agenttest.MustAsk, OperationID: op})
		if asked, werr := x.Ask(ctx, err); asked {
			return werr // paused for the owner's approval
		}
		if err != nil {
			x.Report(ctx, Outcome{Effect: state.EffectNone})
			return x.Write(ctx, a2acore.Failed)
		}
		r.Refunds.Add(1)
		return x.Write(ctx, a2acore.Completed)
	})
	r.Client = r.Dial(t, f.L, f.Ps[Planner], Dial{Via: f.Via})
	return r
}

// Offer is the refund's offer, with an evidence package bound to it:
// carried beside the Handoff with Package, else handed to the coder's
// Approvals.Guard by the test.
func (f *PauseFixture) Offer() handoff.OfferParams {
	p := handoff.OfferParams{To: Coder, Task: "refund-INV-1042", TTL: time.Minute}
	if f.Package {
		p.Deliver = agenttest.Deliver
	} else {
		p.Prepare = f.E.Prepare
	}
	return p
}

// First sends the offer; the must-ask refund pauses the task.
func (f *PauseFixture) First(t *testing.T, r *Refunder) (*Delivery, *Result) {
	t.Helper()
	d, err := r.Client.Send(context.Background(), Text("refund INV-1042"), f.Offer())
	require.NoError(t, err)
	require.True(t, d.Result.Task)
	want := a2acore.InputRequired
	if f.AuthRequired {
		want = a2acore.AuthRequired
	}
	require.Equal(t, want, d.Result.State, "the must-ask refund paused the task")
	require.Equal(t, state.Accepted, d.State, "the paused hop is \"accepted\"")
	return d, d.Result
}

// Answer sends the owner's answer to the pause of task on the hop of d.
func (f *PauseFixture) Answer(t *testing.T, r *Refunder, d *Delivery, task *Result, decision string) *Result {
	t.Helper()
	m, err := r.Client.Answer(task, decision, nil)
	require.NoError(t, err)
	res, _, err := r.Client.Retransmit(context.Background(), m, d.Hop)
	require.NoError(t, err)
	require.True(t, res.Task)
	return res
}

// HopState is the planner's state of hop.
func (f *PauseFixture) HopState(t *testing.T, hop handoff.HopID) state.State {
	t.Helper()
	return hopState(t, f.Ps[Planner].Agent, hop).State
}

// Approvals counts the approvals the ledger holds for d's hop.
func (f *PauseFixture) Approvals(t *testing.T, d *Delivery) int {
	t.Helper()
	as, err := f.E.Ledger.Approvals(context.Background(), d.Offer.Handoff.Offer.Digest().String())
	require.NoError(t, err)
	return len(as)
}

// A must-ask refund pauses the task with the pending approval (action,
// owner, hop, operation) in the status message; the scripted approver
// approves with a follow-up message on the task, the approval is recorded
// in the ledger and the refund runs once; the hop completes, and the same
// answer again runs nothing.
func pauseApprove(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	r := f.Delegate(t, "refund-INV-1042")
	d, task := f.First(t, r)
	p, ok := a2acore.Pending(task.Meta)
	require.True(t, ok)
	require.Equal(t, agenttest.MustAsk, p["action"])
	require.Equal(t, agenttest.Owner, p["owner"])
	require.Equal(t, d.Offer.Handoff.Offer.Digest().String(), p["hop"])
	require.Equal(t, "refund-INV-1042", p["operation_id"])
	require.Zero(t, r.Refunds.Load())

	got := f.Answer(t, r, d, task, "approve")
	require.Equal(t, a2acore.Completed, got.State)
	require.Equal(t, task.ID, got.ID, "the same task resumed")
	require.EqualValues(t, 1, r.Refunds.Load(), "the approved refund runs once")
	require.Equal(t, state.Completed, f.HopState(t, d.Hop))
	require.Equal(t, 1, f.Approvals(t, d), "the approval is in the ledger")

	// The finished task takes no message; the hop's refund never runs again.
	m, err := r.Client.Answer(task, "approve", nil)
	require.NoError(t, err)
	_, _, _ = r.Client.Retransmit(context.Background(), m, d.Hop)
	require.EqualValues(t, 1, r.Refunds.Load())
	require.EqualValues(t, 2, r.Work.Calls.Load(), "the paused execution and the resumed one")
}

// A declined approval records nothing and never runs the refund: the
// refusal came before any effect, so the hop ends with "failed", no refs,
// reason "policy", in the status message of TASK_STATE_FAILED; the
// planner resolves it (issue 32, finding 3: the answer, a second message
// on the task, closes the hop the first one paused).
func pauseDeny(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	r := f.Delegate(t, "refund-INV-1042")
	d, task := f.First(t, r)
	got := f.Answer(t, r, d, task, "deny")
	require.Equal(t, a2acore.Failed, got.State)
	require.Zero(t, r.Refunds.Load(), "a declined refund ran")
	require.EqualValues(t, 1, r.Work.Calls.Load(), "the executor is not run again for a declined answer")
	require.Zero(t, f.Approvals(t, d))
	agenttest.RequireClosed(t, f.Ps[Planner].Agent, d.Hop)
}

// No answer until the hop's timeout: the state and the guard's authority
// end with the offer; the late answer runs nothing, and the hop, whose
// pause can no longer be answered, ends with "failed" and no refs.
func pauseTimeout(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	r := f.Delegate(t, "refund-INV-1042")
	d, task := f.First(t, r)
	f.Now.Add(2 * time.Minute) // past the offer's exp
	late := f.Answer(t, r, d, task, "approve")
	require.Equal(t, a2acore.Failed, late.State, "the late answer resumes nothing")
	require.Contains(t, late.Text, "the offer expired")
	require.Zero(t, r.Refunds.Load(), "an unanswered refund ran")
	require.EqualValues(t, 1, r.Work.Calls.Load())
	require.Zero(t, f.Approvals(t, d))
	agenttest.RequireClosed(t, f.Ps[Planner].Agent, d.Hop)
}

// The delegate restarts between the pause and the answer, and an approval
// recorded before a restart is honoured after it, once.
func pauseRestart(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	before := f.Delegate(t, "refund-INV-1042")
	d, task := f.First(t, before)
	after := f.Delegate(t, "refund-INV-1042") // the new process
	got := f.Answer(t, after, d, task, "approve")
	require.Equal(t, a2acore.Completed, got.State)
	require.EqualValues(t, 1, after.Refunds.Load(), "the answer after the restart runs the refund once")
	require.Zero(t, before.Refunds.Load())
	require.Equal(t, state.Completed, f.HopState(t, d.Hop))

	// Recorded at the operator's console before the restart.
	f2 := NewPauseFixture(t, l)
	before = f2.Delegate(t, "refund-INV-7")
	d, task = f2.First(t, before)
	ag, err := handoff.NewAgent(handoff.Config{ID: Coder, Signer: f2.Ps[Coder].Signer, Trust: f2.Ps[Coder].Trust, Store: f2.Store, Now: f2.Now.Now})
	require.NoError(t, err)
	wire, err := d.Offer.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := ag.Receive(context.Background(), wire, handoff.Host{Dialog: d.Offer.Offer.Dialog, Peer: Planner})
	require.NoError(t, err)
	g, err := f2.E.Guard(context.Background(), in)
	require.NoError(t, err)
	_, err = g.ApproveLocal(context.Background(), evidence.Grant{Action: agenttest.MustAsk, OperationID: "refund-INV-7", Approver: agenttest.Owner}, "console:alice")
	require.NoError(t, err)
	after = f2.Delegate(t, "refund-INV-7")
	m, err := after.Client.Answer(task, "approve", nil)
	require.NoError(t, err)
	m.Meta[a2acore.AnswerKey].(map[string]any)["state"] = "hs1.altered.state"
	got, _, err = after.Client.Retransmit(context.Background(), m, d.Hop)
	require.NoError(t, err)
	require.Equal(t, a2acore.InputRequired, got.State, "an answer this server did not seal resumes nothing, and ends nothing")
	got = f2.Answer(t, after, d, task, "approve")
	require.Equal(t, a2acore.Completed, got.State)
	require.EqualValues(t, 1, after.Refunds.Load(), "the approval recorded before the restart, used once")
	require.Equal(t, 2, f2.Approvals(t, d), "the console's and the answer's; one effect")
}

// The state is bound to the hop: the pause of one hop answered on another
// hop's task is refused and nothing is recorded.
func pauseBound(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	r := f.Delegate(t, "refund-INV-1042")
	dA, taskA := f.First(t, r)
	dB, taskB := f.First(t, r)
	m, err := r.Client.Answer(taskA, "approve", nil)
	require.NoError(t, err)
	m = onTask(m, taskB) // hop A's state on hop B's task, with hop B's Handoff
	res, _, err := r.Client.Retransmit(context.Background(), m, dB.Hop)
	require.NoError(t, err)
	require.Equal(t, a2acore.InputRequired, res.State)
	require.Contains(t, res.Text, "not this one")
	require.Zero(t, r.Refunds.Load())
	require.Zero(t, f.Approvals(t, dA)+f.Approvals(t, dB))

	// Hop A's answer, with hop A's Handoff, on hop B's task: the task did
	// not pause for hop A, nothing resumes there.
	m, err = r.Client.Answer(taskA, "approve", nil)
	require.NoError(t, err)
	_, _, _ = r.Client.Retransmit(context.Background(), onTask(m, taskB), dA.Hop)
	require.Zero(t, r.Refunds.Load())
	require.EqualValues(t, 2, r.Work.Calls.Load(), "the executor ran for another task's answer")
	require.Zero(t, f.Approvals(t, dA)+f.Approvals(t, dB))
}

// onTask is the answer m moved to another task.
func onTask(m Msg, task *Result) Msg {
	m.TaskID, m.Raw = task.ID, nil
	return m
}

// A signed approval (evidence.SignApproval) in the answer is recorded with
// evidence.Guard.ApproveSigned: the refund runs once; one of another
// operation is refused and runs nothing.
func pauseSigned(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	sign := f.E.SignedApprovals()
	r := f.Delegate(t, "refund-INV-1042")
	d, task := f.First(t, r)
	hop := d.Offer.Handoff.Offer.Digest()

	m, err := r.Client.Answer(task, "approve", sign(hop, "refund-other"))
	require.NoError(t, err)
	res, _, err := r.Client.Retransmit(context.Background(), m, d.Hop)
	require.NoError(t, err)
	require.Equal(t, a2acore.InputRequired, res.State, "an approval of another operation")
	require.Zero(t, r.Refunds.Load())

	m, err = r.Client.Answer(task, "approve", sign(hop, "refund-INV-1042"))
	require.NoError(t, err)
	res, _, err = r.Client.Retransmit(context.Background(), m, d.Hop)
	require.NoError(t, err)
	require.Equal(t, a2acore.Completed, res.State)
	require.EqualValues(t, 1, r.Refunds.Load())
	as, err := f.E.Ledger.Approvals(context.Background(), hop.String())
	require.NoError(t, err)
	var signed int
	for _, a := range as {
		if a.Source == authority.SourceSigned {
			signed++
		}
	}
	require.Equal(t, 2, signed, "both statements recorded as signed; only the matching one used")
}

// A follow-up on the paused task with the hop's Handoff but no answer is
// a retransmission: the task stays paused and nothing runs; the answer
// then resumes the work. The task's state alone authorizes nothing (A2A
// 1.0, section 7.6.4).
func pauseFollowUp(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	r := f.Delegate(t, "refund-INV-1042")
	d, task := f.First(t, r)
	m := Text("authorized")
	m.TaskID, m.ContextID = task.ID, task.ContextID
	_, _, err := r.Client.Retransmit(context.Background(), m, d.Hop)
	require.NoError(t, err)
	got, err := r.Client.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, a2acore.InputRequired, got.State, "the task is not changed by a retransmission")
	require.Zero(t, r.Refunds.Load(), "a message without the answer authorized the refund")
	require.EqualValues(t, 1, r.Work.Calls.Load())

	got = f.Answer(t, r, d, task, "approve")
	require.Equal(t, a2acore.Completed, got.State)
	require.EqualValues(t, 1, r.Refunds.Load())
}

// A host that pauses with auth-required: the state authorizes nothing
// (A2A 1.0, section 7.6.4). A follow-up with the hop's Handoff but no
// answer resumes nothing; the answer does, and the guard allows the refund
// once.
func pauseAuthRequired(t *testing.T, l Line) {
	f := NewPauseFixture(t, l)
	f.AuthRequired = true
	r := f.Delegate(t, "refund-INV-1042")
	d, task := f.First(t, r)
	_, ok := a2acore.Pending(task.Meta)
	require.True(t, ok)

	m := Text("authorized")
	m.TaskID, m.ContextID = task.ID, task.ContextID
	_, _, err := r.Client.Retransmit(context.Background(), m, d.Hop)
	require.NoError(t, err)
	require.Zero(t, r.Refunds.Load(), "auth-required alone authorized the refund")
	require.EqualValues(t, 1, r.Work.Calls.Load())

	got := f.Answer(t, r, d, task, "approve")
	require.Equal(t, a2acore.Completed, got.State)
	require.EqualValues(t, 1, r.Refunds.Load())
}
