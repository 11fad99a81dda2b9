package a2a03hop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"

	a2a1hop "github.com/agentproto/handoff/integrations/a2a03hop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

var stateKey = []byte("0123456789abcdef0123456789abcdef")

// refunder is the wrapped executor: it asks the hop's guard before the
// must-ask refund, pauses the task for its owner's approval when the guard
// asks for one, and counts the refunds it made.
type refunder struct {
	calls, refunds atomic.Int32
	op             string
}

func (r *refunder) Execute(ctx context.Context, ec *a2asrv.RequestContext, q eventqueue.Queue) error {
	r.calls.Add(1)
	in, _ := a2a1hop.FromContext(ctx)
	g := evidence.GuardFromContext(ctx)
	err := g.Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: agenttest.MustAsk, OperationID: r.op})
	if ev, ok := a2a1hop.AskApproval(ctx, ec, err); ok {
		return q.Write(ctx, ev) // paused for the owner's approval
	}
	st := a2a.TaskStateCompleted
	if err != nil {
		a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectNone})
		st = a2a.TaskStateFailed
	} else {
		r.refunds.Add(1)
	}
	ev := a2a.NewStatusUpdateEvent(ec, st, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (r *refunder) Cancel(ctx context.Context, ec *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// tasks is the task store that outlives a restart of the delegate, as a
// database would.
type tasks struct {
	mu sync.Mutex
	m  map[a2a.TaskID][]byte
	v  map[a2a.TaskID]a2a.TaskVersion
}

func (s *tasks) Save(_ context.Context, t *a2a.Task, _ a2a.Event, _ *a2a.Task, _ a2a.TaskVersion) (a2a.TaskVersion, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[t.ID] = b
	s.v[t.ID]++
	return s.v[t.ID], nil
}

func (s *tasks) Get(_ context.Context, id a2a.TaskID) (*a2a.Task, a2a.TaskVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[id]
	if !ok {
		return nil, 0, a2a.ErrTaskNotFound
	}
	var t a2a.Task
	err := json.Unmarshal(b, &t)
	return &t, s.v[id], err
}

func (s *tasks) List(context.Context, *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return &a2a.ListTasksResponse{}, nil
}

type pauseFixture struct {
	ps    map[handoff.AgentID]*agenttest.Party
	e     *agenttest.Evidence
	store replay.Store
	tasks *tasks
	now   *agenttest.Clock
	pc    *a2a1hop.Client
	auth  bool // pause with auth-required
}

func newPauseFixture(t *testing.T) *pauseFixture {
	t.Helper()
	f := &pauseFixture{ps: agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE}),
		e: agenttest.NewEvidence(t), store: replay.NewMemory(replay.MemoryOptions{}), tasks: &tasks{m: map[a2a.TaskID][]byte{}, v: map[a2a.TaskID]a2a.TaskVersion{}},
		now: agenttest.NewClock(time.Now())}
	f.e.Now = f.now.Now
	var err error
	f.pc, err = a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: f.ps[planner].Agent})
	require.NoError(t, err)
	return f
}

// delegate starts one life of the delegate (a restart is another over
// the same replay store, task store, ledger and sealing key) and returns
// its executor and a client to it.
func (f *pauseFixture) delegate(t *testing.T, op string) (*refunder, *a2aclient.Client) {
	t.Helper()
	ag, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: f.ps[coder].Signer, Trust: f.ps[coder].Trust, Store: f.store, Now: f.now.Now})
	require.NoError(t, err)
	r := &refunder{op: op}
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: ag, Executor: r,
		Approvals: &a2a1hop.Approvals{Key: stateKey, Guard: f.e.Guard, Now: f.now.Now, AuthRequired: f.auth}})
	require.NoError(t, err)
	srv := httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec, a2asrv.WithTaskStore(f.tasks))),
		func(r *http.Request) (handoff.AgentID, bool) {
			id := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			return handoff.AgentID(id), id != ""
		}))
	t.Cleanup(srv.Close)
	return r, dial(t, planner, f.pc, &node{url: srv.URL}, false)
}

func (f *pauseFixture) offer() handoff.OfferParams {
	return handoff.OfferParams{To: coder, Task: "refund-INV-1042", TTL: time.Minute, Prepare: f.e.Prepare}
}

// first sends the offer; the refund pauses the task.
func (f *pauseFixture) first(t *testing.T, cl *a2aclient.Client) (*a2a1hop.Delivery, *a2a.Task) {
	t.Helper()
	d, err := f.pc.Send(context.Background(), cl, text("refund INV-1042"), f.offer())
	require.NoError(t, err)
	task, ok := d.Result.(*a2a.Task)
	require.True(t, ok, "%T", d.Result)
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State, "the must-ask refund paused the task")
	require.Equal(t, state.Accepted, d.State, "the paused hop is \"accepted\"")
	return d, task
}

// answer sends the follow-up message on the paused task.
func (f *pauseFixture) answer(t *testing.T, cl *a2aclient.Client, d *a2a1hop.Delivery, task *a2a.Task, decision string) *a2a.Task {
	t.Helper()
	m, err := a2a1hop.Answer(task, decision, nil)
	require.NoError(t, err)
	res, _, err := f.pc.Retransmit(context.Background(), cl, m, d.Hop)
	require.NoError(t, err)
	got, ok := res.(*a2a.Task)
	require.True(t, ok, "%T", res)
	return got
}

func (f *pauseFixture) hopState(t *testing.T, hop handoff.HopID) state.State {
	t.Helper()
	info, ok, err := f.ps[planner].Agent.Hop(context.Background(), hop)
	require.NoError(t, err)
	require.True(t, ok)
	return info.State
}

func (f *pauseFixture) approvals(t *testing.T, d *a2a1hop.Delivery) int {
	t.Helper()
	as, err := f.e.Ledger.Approvals(context.Background(), d.Offer.Handoff.Offer.Digest().String())
	require.NoError(t, err)
	return len(as)
}

// A must-ask refund puts the task in input-required with the
// pending approval (action, owner, hop, operation) in the status message;
// the scripted approver approves with a follow-up message on the task, the
// approval is recorded in the ledger and the refund runs once; the hop
// completes, and the same answer again runs nothing.
func TestA2A03_Pause_Approve(t *testing.T) {
	f := newPauseFixture(t)
	r, cl := f.delegate(t, "refund-INV-1042")
	d, task := f.first(t, cl)
	p, ok := a2a1hop.PendingApproval(task.Status.Message)
	require.True(t, ok)
	require.Equal(t, agenttest.MustAsk, p["action"])
	require.Equal(t, agenttest.Owner, p["owner"])
	require.Equal(t, d.Offer.Handoff.Offer.Digest().String(), p["hop"])
	require.Equal(t, "refund-INV-1042", p["operation_id"])
	require.Zero(t, r.refunds.Load())

	got := f.answer(t, cl, d, task, "approve")
	require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	require.Equal(t, task.ID, got.ID, "the same task resumed")
	require.EqualValues(t, 1, r.refunds.Load(), "the approved refund runs once")
	require.Equal(t, state.Completed, f.hopState(t, d.Hop))
	require.Equal(t, 1, f.approvals(t, d), "the approval is in the ledger")

	// The finished task takes no message; the hop's refund never runs again.
	m, err := a2a1hop.Answer(task, "approve", nil)
	require.NoError(t, err)
	_, _, _ = f.pc.Retransmit(context.Background(), cl, m, d.Hop)
	require.EqualValues(t, 1, r.refunds.Load())
	require.EqualValues(t, 2, r.calls.Load(), "the paused execution and the resumed one")
}

// A declined approval records nothing and never runs the refund: the task
// stays input-required and the hop "accepted".
func TestA2A03_Pause_Deny(t *testing.T) {
	f := newPauseFixture(t)
	r, cl := f.delegate(t, "refund-INV-1042")
	d, task := f.first(t, cl)
	got := f.answer(t, cl, d, task, "deny")
	require.Equal(t, a2a.TaskStateInputRequired, got.Status.State)
	require.Zero(t, r.refunds.Load(), "a declined refund ran")
	require.EqualValues(t, 1, r.calls.Load(), "the executor is not run again for a declined answer")
	require.Zero(t, f.approvals(t, d))
	require.Equal(t, state.Accepted, f.hopState(t, d.Hop))
}

// No answer until the hop's timeout: the state and the guard's authority
// end with the offer; the late answer runs nothing.
func TestA2A03_Pause_NoAnswerUntilTimeout(t *testing.T) {
	f := newPauseFixture(t)
	r, cl := f.delegate(t, "refund-INV-1042")
	d, task := f.first(t, cl)
	f.now.Add(2 * time.Minute) // past the offer's exp
	m, err := a2a1hop.Answer(task, "approve", nil)
	require.NoError(t, err)
	res, _, err := f.pc.Retransmit(context.Background(), cl, m, d.Hop)
	require.NoError(t, err)
	late, ok := res.(*a2a.Task)
	require.True(t, ok, "%T", res)
	require.Equal(t, a2a.TaskStateInputRequired, late.Status.State, "the late answer resumes nothing")
	require.Contains(t, late.Status.Message.Parts[0].(a2a.TextPart).Text, "the offer expired")
	require.Zero(t, r.refunds.Load(), "an unanswered refund ran")
	require.EqualValues(t, 1, r.calls.Load())
	require.Zero(t, f.approvals(t, d))
}

// The delegate restarts between the pause and the answer, and an approval
// recorded before a restart is honoured after it, once.
func TestA2A03_Pause_RestartInBetween(t *testing.T) {
	f := newPauseFixture(t)
	before, cl := f.delegate(t, "refund-INV-1042")
	d, task := f.first(t, cl)
	after, cl := f.delegate(t, "refund-INV-1042") // the new process
	got := f.answer(t, cl, d, task, "approve")
	require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	require.EqualValues(t, 1, after.refunds.Load(), "the answer after the restart runs the refund once")
	require.Zero(t, before.refunds.Load())
	require.Equal(t, state.Completed, f.hopState(t, d.Hop))

	// Recorded at the operator's console before the restart.
	f2 := newPauseFixture(t)
	before, cl = f2.delegate(t, "refund-INV-7")
	d, task = f2.first(t, cl)
	ag, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: f2.ps[coder].Signer, Trust: f2.ps[coder].Trust, Store: f2.store, Now: f2.now.Now})
	require.NoError(t, err)
	wire, err := d.Offer.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := ag.Receive(context.Background(), wire, handoff.Host{Dialog: d.Offer.Offer.Dialog, Peer: planner})
	require.NoError(t, err)
	g, err := f2.e.Guard(context.Background(), in)
	require.NoError(t, err)
	_, err = g.ApproveLocal(context.Background(), evidence.Grant{Action: agenttest.MustAsk, OperationID: "refund-INV-7", Approver: agenttest.Owner}, "console:alice")
	require.NoError(t, err)
	after, cl = f2.delegate(t, "refund-INV-7")
	got = f2.answer(t, cl, d, task, "deny")
	require.Equal(t, a2a.TaskStateInputRequired, got.Status.State, "a declined answer does not resume the work")
	got = f2.answer(t, cl, d, task, "approve")
	require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	require.EqualValues(t, 1, after.refunds.Load(), "the approval recorded before the restart, used once")
	require.Equal(t, 2, f2.approvals(t, d), "the console's and the answer's; one effect")
}

// The state is bound to the hop: the pause of one hop answered on another
// hop's task is refused and nothing is recorded.
func TestA2A03_Pause_StateBoundToHop(t *testing.T) {
	f := newPauseFixture(t)
	r, cl := f.delegate(t, "refund-INV-1042")
	dA, taskA := f.first(t, cl)
	dB, taskB := f.first(t, cl)
	m, err := a2a1hop.Answer(taskA, "approve", nil)
	require.NoError(t, err)
	m.TaskID = taskB.ID // hop A's state on hop B's task, with hop B's Handoff
	res, _, err := f.pc.Retransmit(context.Background(), cl, m, dB.Hop)
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateInputRequired, res.(*a2a.Task).Status.State)
	require.Contains(t, res.(*a2a.Task).Status.Message.Parts[0].(a2a.TextPart).Text, "not this one")
	require.Zero(t, r.refunds.Load())
	require.Zero(t, f.approvals(t, dA)+f.approvals(t, dB))

	// Hop A's answer, with hop A's Handoff, on hop B's task: the task did
	// not pause for hop A, nothing resumes there.
	m, err = a2a1hop.Answer(taskA, "approve", nil)
	require.NoError(t, err)
	m.TaskID = taskB.ID
	_, _, _ = f.pc.Retransmit(context.Background(), cl, m, dA.Hop)
	require.Zero(t, r.refunds.Load())
	require.EqualValues(t, 2, r.calls.Load(), "the executor ran for another task's answer")
	require.Zero(t, f.approvals(t, dA)+f.approvals(t, dB))
}

// A host that pauses with auth-required: the state authorizes nothing
// (A2A 1.0, section 7.6.4). A follow-up on the task with the hop's Handoff
// but no answer is a retransmission and resumes nothing; the answer does,
// and the guard allows the refund once.
func TestA2A03_Pause_AuthRequiredAuthorizesNothing(t *testing.T) {
	f := newPauseFixture(t)
	f.auth = true
	r, cl := f.delegate(t, "refund-INV-1042")
	d, err := f.pc.Send(context.Background(), cl, text("refund INV-1042"), f.offer())
	require.NoError(t, err)
	task := d.Result.(*a2a.Task)
	require.Equal(t, a2a.TaskStateAuthRequired, task.Status.State)
	_, ok := a2a1hop.PendingApproval(task.Status.Message)
	require.True(t, ok)

	m := text("authorized")
	m.TaskID, m.ContextID = task.ID, task.ContextID
	_, _, err = f.pc.Retransmit(context.Background(), cl, m, d.Hop)
	require.NoError(t, err)
	require.Zero(t, r.refunds.Load(), "auth-required alone authorized the refund")
	require.EqualValues(t, 1, r.calls.Load())

	got := f.answer(t, cl, d, task, "approve")
	require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	require.EqualValues(t, 1, r.refunds.Load())
}
