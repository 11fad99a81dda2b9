package a2a1hop_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

const (
	planner = handoff.AgentID("spiffe://a.example/planner")
	coder   = handoff.AgentID("spiffe://b.example/coder")
	tester  = handoff.AgentID("spiffe://c.example/tester")
	dialog  = "ctx-7c1e"
)

type body func(ctx context.Context, in *handoff.Received, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error]

// work is the wrapped executor: it counts its invocations.
type work struct {
	calls   atomic.Int32
	cancels atomic.Int32
	body    body

	mu   sync.Mutex
	seen []*handoff.Received
}

func done(ec *a2asrv.ExecutorContext, s a2a.TaskState) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, s, nil), nil)
	}
}

func (w *work) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	w.calls.Add(1)
	in, ok := a2a1hop.FromContext(ctx)
	if !ok {
		return func(yield func(a2a.Event, error) bool) {
			t := a2a.NewSubmittedTask(ec, ec.Message)
			t.Status.State = a2a.TaskStateFailed
			yield(t, nil)
		}
	}
	w.mu.Lock()
	w.seen = append(w.seen, in)
	w.mu.Unlock()
	if ec.StoredTask == nil {
		return func(yield func(a2a.Event, error) bool) {
			yield(nil, errors.New("the wrapper did not make the task"))
		}
	}
	if w.body != nil {
		return w.body(ctx, in, ec)
	}
	return done(ec, a2a.TaskStateCompleted)
}

func (w *work) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	w.cancels.Add(1)
	return done(ec, a2a.TaskStateCanceled)
}

type node struct {
	p    *agenttest.Party
	w    *work
	exec *a2a1hop.Executor
	url  string

	mu        sync.Mutex
	canceled  []*handoff.StatusResult
	requested []bool // whether A2A-Extensions named the extension, per Receive
}

// bearer sends the caller's AgentID as its token: the loopback endpoint
// stands in for an authenticated transport.
type bearer struct {
	a2aclient.PassthroughInterceptor
	id handoff.AgentID
}

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+string(b.id))
	return ctx, nil, nil
}

func who(r *http.Request) (handoff.AgentID, bool) {
	id := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return handoff.AgentID(id), id != ""
}

func newNode(t *testing.T, p *agenttest.Party, opts ...func(*a2a1hop.ServerConfig)) *node {
	t.Helper()
	n := &node{p: p, w: &work{}}
	cfg := a2a1hop.ServerConfig{Agent: p.Agent, Executor: n.w,
		OnReceive: func(ctx context.Context, _ *handoff.Received) {
			exts, ok := a2asrv.ExtensionsFrom(ctx)
			n.mu.Lock()
			n.requested = append(n.requested, ok && exts.Requested(a2a1hop.Extension))
			n.mu.Unlock()
		},
		OnCancel: func(_ context.Context, r *handoff.StatusResult) {
			n.mu.Lock()
			n.canceled = append(n.canceled, r)
			n.mu.Unlock()
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	n.exec, err = a2a1hop.NewExecutor(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(n.exec)), who))
	t.Cleanup(srv.Close)
	n.url = srv.URL
	return n
}

func dial(t *testing.T, from handoff.AgentID, n *node, interceptors ...a2aclient.CallInterceptor) *a2aclient.Client {
	t.Helper()
	cl, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(n.url, a2a.TransportProtocolJSONRPC)},
		a2aclient.WithCallInterceptors(append([]a2aclient.CallInterceptor{bearer{id: from}}, interceptors...)...))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Destroy() })
	return cl
}

func newClient(t *testing.T, p *agenttest.Party, immediate bool) *a2a1hop.Client {
	t.Helper()
	cfg := a2a1hop.ClientConfig{Agent: p.Agent}
	if immediate {
		cfg.SendConfig = &a2a.SendMessageConfig{ReturnImmediately: true}
	}
	c, err := a2a1hop.NewClient(cfg)
	require.NoError(t, err)
	return c
}

func text(s string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(s))
	m.ContextID = dialog
	return m
}

func statusOf(t *testing.T, m *a2a.Message) []byte {
	t.Helper()
	require.NotNil(t, m)
	b, err := carry.Status(m.Metadata)
	require.NoError(t, err)
	return b
}

// A2A 1.0 end to end: the Handoff in Message.metadata, the extension
// activated by A2A-Extensions, "accepted" with TASK_STATE_WORKING and
// "completed" with TASK_STATE_COMPLETED, both verified by the delegator,
// and a chain across two hops (HC-29, HC-46, HC-66).
func TestA2A1_TwoHopChain_HC29_HC46_HC66(t *testing.T) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		t.Run(f.String(), func(t *testing.T) {
			ctx := context.Background()
			ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: f}, agenttest.Spec{ID: coder, Format: f},
				agenttest.Spec{ID: tester, Format: f})
			te, co := newNode(t, ps[tester]), newNode(t, ps[coder])
			cc := newClient(t, ps[coder], false)
			toTester := dial(t, coder, te, cc)
			co.w.body = func(ctx context.Context, in *handoff.Received, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
				d, err := cc.Send(ctx, toTester, text("test it"), handoff.OfferParams{To: tester, From: in})
				if err != nil || d.State != state.Completed {
					return done(ec, a2a.TaskStateFailed)
				}
				return done(ec, a2a.TaskStateCompleted)
			}
			pc := newClient(t, ps[planner], false)
			d, err := pc.Send(ctx, dial(t, planner, co, pc), text("fix the pager"), handoff.OfferParams{To: coder, Task: "fix-pager"})
			require.NoError(t, err)
			task, ok := d.Result.(*a2a.Task)
			require.True(t, ok, "%T", d.Result)
			require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
			require.Equal(t, state.Completed, d.State)
			require.False(t, d.Refused)
			var states []state.State
			for _, s := range d.Statuses {
				require.NoError(t, s.Err())
				states = append(states, s.Status.State)
			}
			require.Equal(t, []state.State{state.Accepted, state.Completed}, states)
			for _, n := range []*node{co, te} {
				require.EqualValues(t, 1, n.w.calls.Load(), "executor invocations of %s", n.p.ID)
				require.Equal(t, []bool{true}, n.requested, "A2A-Extensions at %s", n.p.ID)
			}
			in := te.w.seen[0]
			require.Equal(t, handoff.ChainFull, in.Chain())
			require.Len(t, in.Links(), 1)
			require.Equal(t, planner, in.Links()[0].Offer().Iss)
			require.Equal(t, coder, in.Offer().Iss)
			require.Equal(t, f, in.Handoff().Offer.Format)
		})
	}
}

// Refused offers never reach the executor: a forged one (no status), one
// for another dialog (a signed "rejected", reason "policy"), and a message
// without a Handoff (a2a.ErrExtensionSupportRequired, not a result).
func TestA2A1_Refusals_NeverReachTheExecutor_HC30(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder])
	pc := newClient(t, ps[planner], false)
	cl := dial(t, planner, co, pc)

	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	require.NoError(t, err)
	forged := agenttest.Tamper(t, out.Handoff, "write-patch", "drop-table!")
	res, err := cl.SendMessage(a2a1hop.WithHandoff(ctx, forged), &a2a.SendMessageRequest{Message: text("x")})
	require.NoError(t, err)
	task := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateRejected, task.Status.State)
	_, err = carry.Status(task.Status.Message.Metadata)
	require.ErrorIs(t, err, carry.ErrAbsent, "a status for an offer whose signature failed")

	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder, Dialog: "another-dialog"})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, d.Result.(*a2a.Task).Status.State)
	require.True(t, d.Refused)
	require.Equal(t, state.Rejected, d.State)
	require.Equal(t, reason.Policy, d.Reason)

	_, err = cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: text("x")})
	require.ErrorIs(t, err, a2a.ErrExtensionSupportRequired)
	require.Zero(t, co.w.calls.Load(), "the executor ran for a refused offer")
}

// A retransmission is answered with the identical octets of the last
// status and never runs again (HC-38, HC-39); an equivocating offer is
// refused with no status (HC-53).
func TestA2A1_Retransmission_And_Equivocation_HC38_HC53(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder])
	pc := newClient(t, ps[planner], false)
	cl := dial(t, planner, co, pc)
	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder, Task: "one"})
	require.NoError(t, err)
	last := statusOf(t, d.Result.(*a2a.Task).Status.Message)
	for range 3 {
		res, sts, err := pc.Retransmit(ctx, cl, text("x"), d.Hop)
		require.NoError(t, err)
		m, ok := res.(*a2a.Message)
		require.True(t, ok, "%T", res)
		require.True(t, bytes.Equal(last, statusOf(t, m)), "other status octets for a retransmission")
		require.Len(t, sts, 1)
		require.NoError(t, sts[0].Err())
	}
	second := agenttest.Equivocate(t, ps[planner], d.Offer, "two")
	cctx := a2a1hop.WithHandoff(ctx, second)
	res, err := cl.SendMessage(cctx, &a2a.SendMessageRequest{Message: text("x")})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State)
	require.Empty(t, a2a1hop.Statuses(cctx), "HC-53: no status for the second offer")
	require.EqualValues(t, 1, co.w.calls.Load(), "the executor ran again")
}

// The state changes the executor yields: TASK_STATE_INPUT_REQUIRED and
// TASK_STATE_AUTH_REQUIRED stay in the host protocol (no hop status; A2A
// 1.0 section 7.6.4), TASK_STATE_FAILED with a known outcome is "failed"
// with its refs (HC-29, HC-44).
func TestA2A1_StateChanges_HC29_HC44(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder])
	r := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("half a patch"))}
	co.w.body = func(ctx context.Context, in *handoff.Received, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
		return func(yield func(a2a.Event, error) bool) {
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateAuthRequired, nil), nil) {
				return
			}
			a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectPartial, Refs: []ref.Ref{r}})
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, nil), nil)
		}
	}
	pc := newClient(t, ps[planner], false)
	cl := dial(t, planner, co, pc)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	cctx := a2a1hop.WithHandoff(ctx, out.Handoff)
	var states []a2a.TaskState
	for ev, err := range cl.SendStreamingMessage(cctx, &a2a.SendMessageRequest{Message: text("x")}) {
		require.NoError(t, err)
		switch e := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, e.Status.State)
		case *a2a.Task:
			states = append(states, e.Status.State)
		}
	}
	require.Equal(t, []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateAuthRequired, a2a.TaskStateFailed}, states)
	var got []state.State
	for _, s := range a2a1hop.Statuses(cctx) {
		require.NoError(t, s.Err())
		got = append(got, s.Status.State)
	}
	require.Equal(t, []state.State{state.Accepted, state.Failed}, got)
	info, _, err := ps[planner].Agent.Hop(ctx, out.Offer.Hop)
	require.NoError(t, err)
	require.Equal(t, state.Failed, info.State)
	require.EqualValues(t, 1, co.w.calls.Load())

	for s, want := range map[state.State]a2a.TaskState{
		state.Offered: a2a.TaskStateSubmitted, state.Accepted: a2a.TaskStateWorking,
		state.Rejected: a2a.TaskStateRejected, state.Completed: a2a.TaskStateCompleted,
		state.Failed: a2a.TaskStateFailed, state.Canceled: a2a.TaskStateCanceled,
		state.Expired: a2a.TaskStateUnspecified,
	} {
		require.Equal(t, want, a2a1hop.TaskState(s), s)
	}
}

// A signed "canceled" cancels only its own hop's task (HC-28, HC-55):
// Alice's "canceled" for her finished hop, against Bob's running task, is
// refused before it is verified and the task goes on; Bob's own cancels it.
func TestA2A1_Cancel_OnlyItsOwnHopsTask_HC28_HC55(t *testing.T) {
	const (
		alice = handoff.AgentID("spiffe://a.example/alice")
		bob   = handoff.AgentID("spiffe://b.example/bob")
	)
	for _, required := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "RequireSignedCancel"}[required], func(t *testing.T) {
			ctx := context.Background()
			ps := agenttest.New(t, agenttest.Spec{ID: alice, Format: handoff.JWS}, agenttest.Spec{ID: bob, Format: handoff.COSE},
				agenttest.Spec{ID: coder, Format: handoff.JWS})
			co := newNode(t, ps[coder], func(c *a2a1hop.ServerConfig) { c.RequireSignedCancel = required })
			release := make(chan struct{})
			co.w.body = func(ctx context.Context, in *handoff.Received, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
				if in.Offer().Iss != bob {
					return done(ec, a2a.TaskStateCompleted)
				}
				return func(yield func(a2a.Event, error) bool) {
					select {
					case <-release:
						yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
					case <-ctx.Done():
					}
				}
			}
			ac, bc := newClient(t, ps[alice], false), newClient(t, ps[bob], true)
			toA, toB := dial(t, alice, co, ac), dial(t, bob, co, bc)
			da, err := ac.Send(ctx, toA, text("alice's"), handoff.OfferParams{To: coder})
			require.NoError(t, err)
			require.Equal(t, state.Completed, da.State)
			db, err := bc.Send(ctx, toB, text("bob's"), handoff.OfferParams{To: coder})
			require.NoError(t, err)
			bobTask, ok := bc.TaskOf(db.Hop)
			require.True(t, ok)

			n, err := ps[alice].Agent.Cancel(ctx, da.Hop)
			require.NoError(t, err)
			_, err = toA.CancelTask(a2a1hop.WithCancel(ctx, n.Status), &a2a.CancelTaskRequest{ID: bobTask})
			require.ErrorIs(t, err, a2a.ErrInvalidParams)
			require.Zero(t, co.w.cancels.Load(), "the executor's Cancel ran for another hop's \"canceled\"")
			co.mu.Lock()
			require.Empty(t, co.canceled, "another hop's \"canceled\" was handed to HandleStatus")
			co.mu.Unlock()
			got, err := toB.GetTask(ctx, &a2a.GetTaskRequest{ID: bobTask})
			require.NoError(t, err)
			require.Equal(t, a2a.TaskStateWorking, got.Status.State, "Bob's task was canceled")

			close(release)
			require.Eventually(t, func() bool {
				got, err := toB.GetTask(ctx, &a2a.GetTaskRequest{ID: bobTask})
				return err == nil && got.Status.State == a2a.TaskStateCompleted
			}, 5*time.Second, 10*time.Millisecond)
			info, _, err := ps[bob].Agent.Hop(ctx, db.Hop)
			require.NoError(t, err)
			require.Equal(t, state.Completed, info.State, "Bob's task went on and completed")

			// Bob's own "canceled" cancels his next task.
			hold := make(chan struct{})
			co.w.body = func(ctx context.Context, in *handoff.Received, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
				return func(yield func(a2a.Event, error) bool) {
					close(hold)
					<-ctx.Done()
				}
			}
			db2, err := bc.Send(ctx, toB, text("bob's second"), handoff.OfferParams{To: coder})
			require.NoError(t, err)
			<-hold
			task, _, err := bc.Cancel(ctx, toB, db2.Hop)
			require.NoError(t, err)
			require.Equal(t, a2a.TaskStateCanceled, task.Status.State)
			co.mu.Lock()
			require.Len(t, co.canceled, 1)
			require.NoError(t, co.canceled[0].Err())
			co.mu.Unlock()
			require.EqualValues(t, 1, co.w.cancels.Load())
			require.EqualValues(t, 3, co.w.calls.Load())
		})
	}
}

// A client without the handoff interceptor attaches nothing: Send and
// Retransmit say so with ErrNotIntercepted, and the executor never runs.
func TestA2A1_MissingInterceptor_TypedError(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	for _, optional := range []bool{false, true} {
		co := newNode(t, ps[coder], func(c *a2a1hop.ServerConfig) { c.Optional = optional })
		pc := newClient(t, ps[planner], false)
		bare := dial(t, planner, co) // no pc
		d, err := pc.Send(ctx, bare, text("x"), handoff.OfferParams{To: coder})
		require.ErrorIs(t, err, a2a1hop.ErrNotIntercepted)
		require.Equal(t, 1, d.Attempts)
		_, _, err = pc.Retransmit(ctx, bare, text("x"), d.Hop)
		require.ErrorIs(t, err, a2a1hop.ErrNotIntercepted)
		if !optional {
			require.ErrorIs(t, err, a2a.ErrExtensionSupportRequired, "what the server answered")
			require.Zero(t, co.w.calls.Load())
			continue
		}
		// The Optional server ran the executor without an offer: the
		// wrapped executor saw none in its context.
		require.EqualValues(t, 2, co.w.calls.Load())
		co.w.mu.Lock()
		require.Empty(t, co.w.seen)
		co.w.mu.Unlock()
	}
}

// Declare lists the extension in capabilities.extensions with the
// required flag the server chooses, once.
func TestA2A1_Declare_AgentCard(t *testing.T) {
	card := &a2a.AgentCard{Name: "coder"}
	a2a1hop.Declare(card, true)
	a2a1hop.Declare(card, true)
	require.Len(t, card.Capabilities.Extensions, 1)
	require.Equal(t, a2a1hop.ExtensionURI, card.Capabilities.Extensions[0].URI)
	require.True(t, card.Capabilities.Extensions[0].Required)
	a2a1hop.Declare(card, false)
	require.Len(t, card.Capabilities.Extensions, 1)
	require.False(t, card.Capabilities.Extensions[0].Required)
}

// The first offer's work runs when an equivocating offer arrives: the work
// is stopped (its context's cause is ErrEquivocated), the second offer is
// refused with no status (HC-53), and the first hop's "failed" carries the
// reason "equivocation" (HC-54, finish-first).
func TestA2A1_Equivocation_FinishFirst_HC54(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder])
	started := make(chan struct{})
	co.w.body = func(ctx context.Context, in *handoff.Received, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
		return func(yield func(a2a.Event, error) bool) {
			close(started)
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), a2a1hop.ErrEquivocated) {
				yield(nil, context.Cause(ctx))
				return
			}
			a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectNone})
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, nil), nil)
		}
	}
	pc := newClient(t, ps[planner], false)
	cl := dial(t, planner, co, pc)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "one"})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := cl.SendMessage(a2a1hop.WithHandoff(ctx, out.Handoff), &a2a.SendMessageRequest{Message: text("x")})
		done <- err
	}()
	<-started
	second := a2a1hop.WithHandoff(ctx, agenttest.Equivocate(t, ps[planner], out, "two"))
	res, err := cl.SendMessage(second, &a2a.SendMessageRequest{Message: text("x")})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State)
	require.Empty(t, a2a1hop.Statuses(second), "the second offer gets no status (HC-53)")
	require.NoError(t, <-done)
	info, _, err := ps[planner].Agent.Hop(ctx, out.Offer.Hop)
	require.NoError(t, err)
	require.Equal(t, state.Failed, info.State)
	require.Equal(t, reason.Equivocation, info.Reason)
	require.EqualValues(t, 1, co.w.calls.Load())
}
