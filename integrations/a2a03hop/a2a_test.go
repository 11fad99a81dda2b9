package a2a03hop_test

import (
	"bytes"
	"context"
	"errors"
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
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/observe"
)

const (
	assistant = handoff.AgentID("spiffe://a.example/assistant")
	planner   = handoff.AgentID("spiffe://a.example/planner")
	coder     = handoff.AgentID("spiffe://b.example/coder")
	tester    = handoff.AgentID("spiffe://c.example/tester")
	dialog    = "ctx-7c1e"
)

// work is the wrapped executor: it counts its invocations.
type work struct {
	calls   atomic.Int32
	cancels atomic.Int32 // invocations of Cancel
	body    func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error

	mu   sync.Mutex
	seen []*handoff.Received
}

func (w *work) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	w.calls.Add(1)
	in, ok := ha2a.FromContext(ctx)
	if !ok {
		return nil
	}
	w.mu.Lock()
	w.seen = append(w.seen, in)
	w.mu.Unlock()
	if w.body != nil {
		return w.body(ctx, in, reqCtx, q)
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (w *work) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	w.cancels.Add(1)
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

type node struct {
	p      *agenttest.Party
	w      *work
	url    string
	client *ha2a.Client

	mu        sync.Mutex
	canceled  []*handoff.StatusResult
	notices   []handoff.Notice
	requested []bool // whether A2A-Extensions named the extension, per Receive
}

// bearer sends the caller's AgentID as its token: the loopback endpoint
// stands in for an authenticated transport.
type bearer struct {
	a2aclient.PassthroughInterceptor
	id handoff.AgentID
}

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + string(b.id)}
	return ctx, nil
}

func newNode(t *testing.T, p *agenttest.Party, rec *observe.Recorder, opts ...func(*ha2a.ServerConfig)) *node {
	t.Helper()
	n := &node{p: p, w: &work{}}
	var err error
	n.client, err = ha2a.NewClient(ha2a.ClientConfig{Agent: p.Agent, Observe: rec})
	require.NoError(t, err)
	cfg := ha2a.ServerConfig{Agent: p.Agent, Executor: n.w, Observe: rec,
		OnReceive: func(ctx context.Context, _ *handoff.Received) {
			exts, ok := a2asrv.ExtensionsFrom(ctx)
			n.mu.Lock()
			n.requested = append(n.requested, ok && exts.Requested(ha2a.Extension))
			n.mu.Unlock()
		},
		OnCancel: func(_ context.Context, r *handoff.StatusResult) {
			n.mu.Lock()
			n.canceled = append(n.canceled, r)
			n.mu.Unlock()
		},
		OnNotices: func(_ context.Context, ns []handoff.Notice) {
			n.mu.Lock()
			n.notices = append(n.notices, ns...)
			n.mu.Unlock()
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	exec, err := ha2a.NewExecutor(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(ha2a.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(r *http.Request) (handoff.AgentID, bool) {
			id := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			return handoff.AgentID(id), id != ""
		}))
	t.Cleanup(srv.Close)
	n.url = srv.URL
	return n
}

// dial returns an A2A client of from (with its interceptor) to n.
func dial(t *testing.T, from handoff.AgentID, c *ha2a.Client, n *node, polling bool) *a2aclient.Client {
	t.Helper()
	cl, err := a2aclient.NewFromEndpoints(context.Background(),
		[]a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: n.url}},
		a2aclient.WithConfig(a2aclient.Config{Polling: polling}),
		a2aclient.WithInterceptors(bearer{id: from}, c))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Destroy() })
	return cl
}

func text(s string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: s})
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

func TestA2A_ThreeHopChain_HC46_HC66(t *testing.T) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		t.Run(f.String(), func(t *testing.T) {
			ctx := context.Background()
			ps := agenttest.New(t, agenttest.Spec{ID: assistant, Format: f}, agenttest.Spec{ID: planner, Format: f},
				agenttest.Spec{ID: coder, Format: f}, agenttest.Spec{ID: tester, Format: f})
			te, co, pl := newNode(t, ps[tester], nil), newNode(t, ps[coder], nil), newNode(t, ps[planner], nil)
			toTester := dial(t, coder, co.client, te, false)
			toCoder := dial(t, planner, pl.client, co, false)
			pass := func(n *node, to handoff.AgentID, cl *a2aclient.Client) func(context.Context, *handoff.Received, *a2asrv.RequestContext, eventqueue.Queue) error {
				return func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
					d, err := n.client.Send(ctx, cl, text("pass it on"), handoff.OfferParams{To: to, From: in})
					if err != nil {
						return err
					}
					st := a2a.TaskStateFailed
					if len(d.Statuses) > 0 && d.Statuses[len(d.Statuses)-1].State == state.Completed {
						st = a2a.TaskStateCompleted
					}
					ev := a2a.NewStatusUpdateEvent(reqCtx, st, nil)
					ev.Final = true
					return q.Write(ctx, ev)
				}
			}
			co.w.body = pass(co, tester, toTester)
			pl.w.body = pass(pl, coder, toCoder)
			as, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[assistant].Agent})
			require.NoError(t, err)
			toPlanner := dial(t, assistant, as, pl, false)

			d, err := as.Send(ctx, toPlanner, text("fix the pager"), handoff.OfferParams{To: planner, Task: "fix-pager"})
			require.NoError(t, err)
			task, ok := d.Result.(*a2a.Task)
			require.True(t, ok, "%T", d.Result)
			require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
			// "accepted" (working) then "completed", both verified.
			var states []state.State
			for _, s := range d.Statuses {
				require.NoError(t, s.Err())
				states = append(states, s.Status.State)
			}
			require.Contains(t, states, state.Completed)
			info, _, err := ps[assistant].Agent.Hop(ctx, d.Hop)
			require.NoError(t, err)
			require.Equal(t, state.Completed, info.State)
			require.True(t, info.Resolved)

			for _, n := range []*node{pl, co, te} {
				require.EqualValues(t, 1, n.w.calls.Load(), "executor invocations of %s", n.p.ID)
				// The client listed the extension in A2A-Extensions (HC-66).
				require.Equal(t, []bool{true}, n.requested, "A2A-Extensions at %s", n.p.ID)
			}
			in := te.w.seen[0]
			require.Equal(t, handoff.ChainFull, in.Chain())
			links := in.Links()
			require.Len(t, links, 2)
			require.Equal(t, assistant, links[0].Offer().Iss)
			require.Equal(t, planner, links[1].Offer().Iss)
			require.Equal(t, coder, in.Offer().Iss)
			require.Equal(t, dialog, in.Offer().Dialog)
			require.Equal(t, f, in.Handoff().Offer.Format)
		})
	}
}

func TestA2A_ForgedOffer_RefusedBeforeExecutor_HC30(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], nil)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)

	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	require.NoError(t, err)
	forged := agenttest.Tamper(t, out.Handoff, "write-patch", "drop-table!")
	res, err := cl.SendMessage(ha2a.WithHandoff(ctx, forged), &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	task := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateRejected, task.Status.State)
	_, err = carry.Status(task.Status.Message.Metadata)
	require.ErrorIs(t, err, carry.ErrAbsent, "a status for an offer whose signature failed")
	require.Zero(t, co.w.calls.Load(), "the executor ran for a forged offer")

	// The dialog differs from the contextId: refused at check 5 with a
	// signed "rejected" (reason "policy") that the delegator verifies.
	other, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "another-dialog"})
	require.NoError(t, err)
	cctx := ha2a.WithHandoff(ctx, other.Handoff)
	res, err = cl.SendMessage(cctx, &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State)
	sts := ha2a.Statuses(cctx)
	require.Len(t, sts, 1)
	require.NoError(t, sts[0].Err())
	require.Equal(t, state.Rejected, sts[0].State)
	require.Equal(t, reason.Policy, sts[0].Status.Reason)
	require.Zero(t, co.w.calls.Load())

	// No Handoff at all.
	res, err = cl.SendMessage(ctx, &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	_, isMsg := res.(*a2a.Message)
	require.True(t, isMsg)
	require.Zero(t, co.w.calls.Load())
}

func TestA2A_Retransmission_NotRunAgain_HC38_HC39(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], nil)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)
	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder})
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
	require.EqualValues(t, 1, co.w.calls.Load(), "the executor ran again for a retransmission")

	// Another caller replaying the offer is not sent the status (HC-39).
	intruder, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[coder].Agent})
	require.NoError(t, err)
	icl := dial(t, coder, intruder, co, false)
	h, err := ps[planner].Agent.Retransmit(ctx, d.Hop)
	require.NoError(t, err)
	res, err := icl.SendMessage(ha2a.WithHandoff(ctx, h), &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	_, err = carry.Status(res.(*a2a.Message).Metadata)
	require.ErrorIs(t, err, carry.ErrAbsent)
	require.EqualValues(t, 1, co.w.calls.Load())
}

func TestA2A_RetransmitOnTimeout_Backoff_HC37(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], nil)
	release := make(chan struct{})
	co.w.body = func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		<-release
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent, Attempts: 2})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)
	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder, TTL: 2 * time.Second})
	close(release)
	require.NoError(t, err)
	require.Equal(t, 2, d.Attempts)
	// The retransmission got the "accepted" the first delivery sent.
	_, isMsg := d.Result.(*a2a.Message)
	require.True(t, isMsg)
	require.Len(t, d.Statuses, 1)
	require.Equal(t, state.Accepted, d.Statuses[0].Status.State)
	require.EqualValues(t, 1, co.w.calls.Load())
}

func TestA2A_Equivocation_HC53(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], nil)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)
	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder, Task: "one"})
	require.NoError(t, err)
	second := agenttest.Equivocate(t, ps[planner], d.Offer, "two")
	res, err := cl.SendMessage(ha2a.WithHandoff(ctx, second), &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	task := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateRejected, task.Status.State)
	_, err = carry.Status(task.Status.Message.Metadata)
	require.ErrorIs(t, err, carry.ErrAbsent, "HC-53/HC-54: no status after the first hop's terminal status")
	require.EqualValues(t, 1, co.w.calls.Load(), "the executor ran for an equivocating offer")
}

func TestA2A_Cancel_SignedAndPropagated_HC28_HC66(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE},
		agenttest.Spec{ID: tester, Format: handoff.JWS})
	co, te := newNode(t, ps[coder], nil), newNode(t, ps[tester], nil)
	started, passed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		once.Do(func() { close(started) })
		<-ctx.Done() // canceled when the cancel is applied
		return nil
	}
	te.w.body = hold
	toTester := dial(t, coder, co.client, te, true)
	// The coder passes the hop on to the tester and waits.
	co.w.body = func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		if _, err := co.client.Send(ctx, toTester, text("test"), handoff.OfferParams{To: tester, From: in}); err != nil {
			return err
		}
		close(passed)
		<-ctx.Done()
		return nil
	}
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, true) // polling: the task comes back "working"
	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateWorking, d.Result.(*a2a.Task).Status.State)
	<-started
	<-passed

	task, n, err := pc.Cancel(ctx, cl, d.Hop)
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCanceled, task.Status.State)
	co.mu.Lock()
	require.Len(t, co.canceled, 1)
	got := co.canceled[0]
	notices := co.notices
	co.mu.Unlock()
	require.NoError(t, got.Err())
	require.Equal(t, state.Canceled, got.Status.State)
	require.Equal(t, planner, got.Status.Iss)
	require.True(t, got.Status.Offer.Equal(d.Offer.Digest))
	require.Equal(t, n.Hop, got.Status.Hop)
	// HC-28: the coder signed a "canceled" for the hop it passed on.
	require.Len(t, notices, 1)
	require.Equal(t, tester, notices[0].To)

	// It sends it on to the tester, whose hop is canceled in turn.
	tt, ok := co.client.TaskOf(notices[0].Hop)
	require.True(t, ok)
	_, err = toTester.CancelTask(ha2a.WithCancel(ctx, notices[0].Status), &a2a.TaskIDParams{ID: tt})
	require.NoError(t, err)
	te.mu.Lock()
	require.Len(t, te.canceled, 1)
	require.NoError(t, te.canceled[0].Err())
	require.Equal(t, coder, te.canceled[0].Status.Iss)
	te.mu.Unlock()
	require.EqualValues(t, 1, co.w.calls.Load())
	require.EqualValues(t, 1, te.w.calls.Load())
}

func TestA2A_Equivocation_RejectFirst_HC54(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], nil)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "one"})
	require.NoError(t, err)
	wire, err := out.Handoff.Encode(handoff.CBOR)
	require.NoError(t, err)
	first, err := ps[coder].Agent.Receive(ctx, wire, handoff.Host{Peer: planner})
	require.NoError(t, err)
	require.True(t, first.Accepted()) // remembered, not taken

	cctx := ha2a.WithHandoff(ctx, agenttest.Equivocate(t, ps[planner], out, "two"))
	res, err := cl.SendMessage(cctx, &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State)
	sts := ha2a.Statuses(cctx)
	require.Len(t, sts, 1)
	require.NoError(t, sts[0].Err())
	require.Equal(t, state.Rejected, sts[0].State)
	require.Equal(t, reason.Equivocation, sts[0].Status.Reason)
	require.True(t, sts[0].Status.Offer.Equal(out.Digest), "the status answers the FIRST offer")
	require.Zero(t, co.w.calls.Load())
}

// message/stream: every status in the task updates goes to HandleStatus.
func TestA2A_Streaming_StatusesFromTaskUpdates_HC29(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], nil)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	cctx := ha2a.WithHandoff(ctx, out.Handoff)
	var states []a2a.TaskState
	for ev, err := range cl.SendStreamingMessage(cctx, &a2a.MessageSendParams{Message: text("x")}) {
		require.NoError(t, err)
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			states = append(states, u.Status.State)
		}
	}
	require.Contains(t, states, a2a.TaskStateWorking)
	require.Contains(t, states, a2a.TaskStateCompleted)
	var got []state.State
	for _, s := range ha2a.Statuses(cctx) {
		require.NoError(t, s.Err())
		got = append(got, s.Status.State)
	}
	require.Equal(t, []state.State{state.Accepted, state.Completed}, got)
	info, _, err := ps[planner].Agent.Hop(ctx, out.Offer.Hop)
	require.NoError(t, err)
	require.True(t, info.Resolved)
	require.EqualValues(t, 1, co.w.calls.Load())
}

// HC-29: the hop states map to the draft's nearest A2A task states.
func TestA2A_TaskState_HC29(t *testing.T) {
	for s, want := range map[state.State]a2a.TaskState{
		state.Offered: a2a.TaskStateSubmitted, state.Accepted: a2a.TaskStateWorking,
		state.Rejected: a2a.TaskStateRejected, state.Completed: a2a.TaskStateCompleted,
		state.Failed: a2a.TaskStateFailed, state.Canceled: a2a.TaskStateCanceled,
		state.Expired: a2a.TaskStateUnspecified,
	} {
		require.Equal(t, want, ha2a.TaskState(s), s)
	}
}

// A failed task with a known partial effect is answered "failed" with the
// refs of what took effect (HC-44); without a reported outcome, no terminal
// status is signed (HC-45).
func TestA2A_FailedOutcome_HC44_HC45(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], nil)
	report := true
	r := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("half a patch"))}
	co.w.body = func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		if report {
			ha2a.Report(ctx, ha2a.Outcome{Effect: state.EffectPartial, Refs: []ref.Ref{r}})
		}
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateFailed, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)

	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder})
	require.NoError(t, err)
	last := d.Statuses[len(d.Statuses)-1]
	require.Equal(t, state.Failed, last.State)
	require.Len(t, last.Status.Refs, 1)
	require.True(t, last.Status.Refs[0].Dig.Equal(r.Dig))

	report = false
	d, err = pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateFailed, d.Result.(*a2a.Task).Status.State)
	for _, s := range d.Statuses {
		require.Equal(t, state.Accepted, s.State, "a terminal status without a known outcome")
	}
	info, _, err := ps[planner].Agent.Hop(ctx, d.Hop)
	require.NoError(t, err)
	require.False(t, info.Resolved)
}

func TestA2A_Equivocation_FinishFirst_HC54(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], nil)
	started := make(chan struct{})
	co.w.body = func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		close(started)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), ha2a.ErrEquivocated) {
			return context.Cause(ctx)
		}
		ha2a.Report(ctx, ha2a.Outcome{Effect: state.EffectNone})
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateFailed, nil)
		ev.Final = true
		return q.Write(context.WithoutCancel(ctx), ev)
	}
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "one"})
	require.NoError(t, err)
	firstCtx := ha2a.WithHandoff(ctx, out.Handoff)
	done := make(chan error, 1)
	go func() {
		_, err := cl.SendMessage(firstCtx, &a2a.MessageSendParams{Message: text("x")})
		done <- err
	}()
	<-started
	secondCtx := ha2a.WithHandoff(ctx, agenttest.Equivocate(t, ps[planner], out, "two"))
	res, err := cl.SendMessage(secondCtx, &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State)
	require.Empty(t, ha2a.Statuses(secondCtx), "the second offer gets no status (HC-53)")
	require.NoError(t, <-done)
	info, _, err := ps[planner].Agent.Hop(ctx, out.Offer.Hop)
	require.NoError(t, err)
	require.Equal(t, state.Failed, info.State)
	require.Equal(t, reason.Equivocation, info.Reason)
	require.EqualValues(t, 1, co.w.calls.Load())
}

// A signed "canceled" cancels only its own hop's task (HC-28, HC-55). Alice
// signs "canceled" for her own finished hop and sends it in a Cancel Task
// request for Bob's running task: it is refused before it is verified, the
// executor's Cancel never runs, no hop changes state, and Bob's task goes
// on to complete. Bob's own "canceled" then cancels his next task.
func TestA2A_Cancel_OnlyItsOwnHopsTask_HC28_HC55(t *testing.T) {
	const (
		alice = handoff.AgentID("spiffe://a.example/alice")
		bob   = handoff.AgentID("spiffe://b.example/bob")
	)
	for _, required := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "RequireSignedCancel"}[required], func(t *testing.T) {
			ctx := context.Background()
			ps := agenttest.New(t, agenttest.Spec{ID: alice, Format: handoff.JWS}, agenttest.Spec{ID: bob, Format: handoff.COSE},
				agenttest.Spec{ID: coder, Format: handoff.JWS})
			co := newNode(t, ps[coder], nil, func(c *ha2a.ServerConfig) { c.RequireSignedCancel = required })
			release := make(chan struct{})
			co.w.body = func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
				if in.Offer().Iss == bob {
					select {
					case <-release:
					case <-ctx.Done():
						return nil
					}
				}
				ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
				ev.Final = true
				return q.Write(ctx, ev)
			}
			ac, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[alice].Agent})
			require.NoError(t, err)
			bc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[bob].Agent})
			require.NoError(t, err)
			toCoderA := dial(t, alice, ac, co, false)
			toCoderB := dial(t, bob, bc, co, true) // polling: the task comes back "working"

			da, err := ac.Send(ctx, toCoderA, text("alice's"), handoff.OfferParams{To: coder})
			require.NoError(t, err)
			require.Equal(t, a2a.TaskStateCompleted, da.Result.(*a2a.Task).Status.State)
			db, err := bc.Send(ctx, toCoderB, text("bob's"), handoff.OfferParams{To: coder})
			require.NoError(t, err)
			bobTask := db.Result.(*a2a.Task)
			require.Equal(t, a2a.TaskStateWorking, bobTask.Status.State)

			// Alice's verified "canceled", for her own hop, against Bob's task.
			n, err := ps[alice].Agent.Cancel(ctx, da.Hop)
			require.NoError(t, err)
			_, err = toCoderA.CancelTask(ha2a.WithCancel(ctx, n.Status), &a2a.TaskIDParams{ID: bobTask.ID})
			require.ErrorIs(t, err, a2a.ErrInvalidParams)
			require.Zero(t, co.w.cancels.Load(), "the executor's Cancel ran for another hop's \"canceled\"")
			co.mu.Lock()
			require.Empty(t, co.canceled, "another hop's \"canceled\" was applied")
			co.mu.Unlock()
			got, err := toCoderB.GetTask(ctx, &a2a.TaskQueryParams{ID: bobTask.ID})
			require.NoError(t, err)
			require.Equal(t, a2a.TaskStateWorking, got.Status.State, "Bob's task was canceled")

			// The task goes on, and completes with Bob's verified "completed".
			close(release)
			require.Eventually(t, func() bool {
				got, err := toCoderB.GetTask(ctx, &a2a.TaskQueryParams{ID: bobTask.ID})
				return err == nil && got.Status.State == a2a.TaskStateCompleted
			}, 5*time.Second, 10*time.Millisecond)
			info, _, err := ps[bob].Agent.Hop(ctx, db.Hop)
			require.NoError(t, err)
			require.Equal(t, state.Completed, info.State, "Bob learns his hop's verified \"completed\"")
			_, sts, err := bc.Retransmit(ctx, toCoderB, text("bob's"), db.Hop)
			require.NoError(t, err)
			require.Len(t, sts, 1)
			require.Equal(t, state.Completed, sts[0].Status.State)

			// Bob's own "canceled" cancels Bob's next task.
			hold := make(chan struct{})
			co.w.body = func(ctx context.Context, in *handoff.Received, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
				close(hold)
				<-ctx.Done()
				return nil
			}
			db2, err := bc.Send(ctx, toCoderB, text("bob's second"), handoff.OfferParams{To: coder})
			require.NoError(t, err)
			<-hold
			task, _, err := bc.Cancel(ctx, toCoderB, db2.Hop)
			require.NoError(t, err)
			require.Equal(t, a2a.TaskStateCanceled, task.Status.State)
			require.EqualValues(t, 1, co.w.cancels.Load())
			require.EqualValues(t, 3, co.w.calls.Load())
		})
	}
}

// A client whose interceptors lack the handoff Client sends nothing of the
// handoff: Send, Retransmit and Cancel say so with ErrNotIntercepted,
// whatever the server answered, and the executor never runs. A delivery
// says how it ended: State, Refused, Reason.
func TestA2A_MissingInterceptor_TypedError_And_DeliveryOutcome(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], nil)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	bare, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: co.url}},
		a2aclient.WithInterceptors(bearer{id: planner})) // no pc
	require.NoError(t, err)
	t.Cleanup(func() { bare.Destroy() })

	d, err := pc.Send(ctx, bare, text("x"), handoff.OfferParams{To: coder})
	require.ErrorIs(t, err, ha2a.ErrNotIntercepted)
	require.Equal(t, 1, d.Attempts, "not sent again")
	_, _, err = pc.Retransmit(ctx, bare, text("x"), d.Hop)
	require.ErrorIs(t, err, ha2a.ErrNotIntercepted)
	require.Zero(t, co.w.calls.Load(), "the executor ran without a Handoff")

	cl := dial(t, planner, pc, co, false)
	d, err = pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	require.False(t, d.Refused)
	require.Empty(t, d.Reason)

	d, err = pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder, Dialog: "another-dialog"})
	require.NoError(t, err)
	require.Equal(t, state.Rejected, d.State)
	require.True(t, d.Refused)
	require.Equal(t, reason.Policy, d.Reason)
	require.EqualValues(t, 1, co.w.calls.Load())
}
