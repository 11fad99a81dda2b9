package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/a2a1hop/gateway"
)

// target is a Go agent with a2a1hop's executor: it does the work of the
// offers it accepts ("wait" waits until canceled), and keeps each offer it
// saw and each "canceled" it was sent.
type target struct {
	URL   string
	calls atomic.Int32
	stop  chan struct{}

	mu       sync.Mutex
	seen     []*handoff.Received
	canceled []*handoff.StatusResult
}

// newTarget serves a target for the coder of w; wrap, when set, is put in
// front of its A2A endpoint.
func newTarget(t *testing.T, w *handofftest.World, wrap func(http.Handler) http.Handler) *target {
	t.Helper()
	tg := &target{stop: make(chan struct{})}
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: w.Agent(coder), Executor: tg,
		Peer: func(context.Context, *a2asrv.ExecutorContext) handoff.AgentID { return planner },
		OnCancel: func(_ context.Context, r *handoff.StatusResult) {
			tg.mu.Lock()
			tg.canceled = append(tg.canceled, r)
			tg.mu.Unlock()
		}})
	require.NoError(t, err)
	srv, base := listen(t)
	card := &a2a.AgentCard{Name: "coder", Description: "a Go agent with the middleware", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/a2a", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Capabilities: a2a.AgentCapabilities{Streaming: true},
		Skills:       []a2a.AgentSkill{{ID: "work", Name: "work", Description: "does the work", Tags: []string{"work"}}}}
	a2a1hop.Declare(card, true)
	var h http.Handler = a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec))
	if wrap != nil {
		h = wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle(gateway.CardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", h)
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(func() { close(tg.stop) })
	tg.URL = base
	return tg
}

func (tg *target) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		in, ok := a2a1hop.FromContext(ctx)
		if !ok {
			yield(nil, fmt.Errorf("no accepted offer"))
			return
		}
		tg.calls.Add(1)
		tg.mu.Lock()
		tg.seen = append(tg.seen, in)
		tg.mu.Unlock()
		if ec.Message.Parts[0].Text() == "input" {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, nil), nil)
			return
		}
		if ec.Message.Parts[0].Text() == "wait" {
			if yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
				select {
				case <-ctx.Done():
				case <-tg.stop:
					yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
				}
			}
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (tg *target) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (tg *target) received() []*handoff.Received {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]*handoff.Received(nil), tg.seen...)
}

// delegatorFor starts a Delegator for the planner of w in front of the
// agent at upstream.
func delegatorFor(t *testing.T, w *handofftest.World, agent *handoff.Agent, upstream string, cfg gateway.DelegatorConfig) (*gateway.Delegator, string) {
	t.Helper()
	srv, base := listen(t)
	cfg.Agent, cfg.To, cfg.Upstream, cfg.URL = agent, coder, upstream, base
	d, err := gateway.NewDelegator(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	srv.Config.Handler = d
	srv.Start()
	return d, base
}

// An A2A client that knows nothing of handoffs delegates through the
// gateway: the target sees a verified offer from the planner, on the
// client's dialog, with a full chain; the client gets the target's reply,
// status included; the hop is "completed" at the planner.
func TestDelegator_PlainClient_DelegatesWithAnOffer(t *testing.T) {
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			w := world(t)
			tg := newTarget(t, w, nil)
			p := w.Agent(planner)
			_, base := delegatorFor(t, w, p, tg.URL, gateway.DelegatorConfig{})
			cl := client(t, base, b)
			m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("fix the pager")) // no contextId: the gateway makes one
			res, err := cl.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: m})
			require.NoError(t, err)
			task, ok := res.(*a2a.Task)
			require.True(t, ok, "%T", res)
			assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)

			require.EqualValues(t, 1, tg.calls.Load())
			in := tg.received()[0]
			o := in.Offer()
			require.NotNil(t, o)
			assert.Equal(t, planner, o.Iss)
			assert.Equal(t, coder, o.Aud)
			assert.Equal(t, task.ContextID, o.Dialog, "the dialog is the message's contextId")
			assert.Equal(t, handoff.ChainFull, in.Chain(), "a verified chain: the planner starts it")
			w.AssertStatus(t, statusOf(task), in.Handoff().Offer, state.Completed, "")

			info, ok, err := p.Hop(context.Background(), o.Hop)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, state.Completed, info.State, "the statuses were verified and applied")
		})
	}
}

// A message that follows on the task of a hop the gateway sent carries
// that hop's identical Handoff: on a task the target paused for input, it
// resumes the hop's work there (the same hop, never a new one), and the
// hop then completes.
func TestDelegator_FollowUp_TheHopsHandoff(t *testing.T) {
	w := world(t)
	tg := newTarget(t, w, nil)
	p := w.Agent(planner)
	_, base := delegatorFor(t, w, p, tg.URL, gateway.DelegatorConfig{})
	cl := client(t, base, overJSONRPC)
	res, err := cl.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: message("ctx-f", "input")})
	require.NoError(t, err)
	task := taskOf(t, res)
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	next := message(task.ContextID, "this file")
	next.TaskID = task.ID
	res, err = cl.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: next})
	require.NoError(t, err)
	assert.EqualValues(t, 2, tg.calls.Load(), "the input resumes the work")
	seen := tg.received()
	require.Len(t, seen, 2)
	hop := seen[0].Offer().Hop
	assert.Equal(t, hop, seen[1].Offer().Hop, "resumed on the same hop")
	w.AssertStatus(t, statusOf(res), seen[0].Handoff().Offer, state.Completed, "")
	info, _, err := p.Hop(context.Background(), hop)
	require.NoError(t, err)
	assert.Equal(t, state.Completed, info.State)
}

// Streamed, the target's events come back as they are, and their statuses
// are applied on the way.
func TestDelegator_Stream(t *testing.T) {
	w := world(t)
	tg := newTarget(t, w, nil)
	p := w.Agent(planner)
	_, base := delegatorFor(t, w, p, tg.URL, gateway.DelegatorConfig{})
	var last a2a.TaskState
	for ev, err := range client(t, base, overREST).SendStreamingMessage(context.Background(),
		&a2a.SendMessageRequest{Message: message("ctx-st", "stream it")}) {
		require.NoError(t, err)
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			last = u.Status.State
		}
	}
	assert.Equal(t, a2a.TaskStateCompleted, last)
	hop := tg.received()[0].Offer().Hop
	info, _, err := p.Hop(context.Background(), hop)
	require.NoError(t, err)
	assert.Equal(t, state.Completed, info.State)
}

// A reply lost on the way back is asked for again with the identical
// Handoff: the target does the work once and answers the retransmission
// with the hop's last status, which the client gets (HC-37, HC-38).
func TestDelegator_LostReply_AskedAgain(t *testing.T) {
	w := world(t)
	tg := newTarget(t, w, func(h http.Handler) http.Handler { return &dropFirstReply{next: h} })
	p := w.Agent(planner)
	_, base := delegatorFor(t, w, p, tg.URL, gateway.DelegatorConfig{})
	res, err := client(t, base, overJSONRPC).SendMessage(context.Background(), &a2a.SendMessageRequest{Message: message("ctx-l", "once")})
	require.NoError(t, err)
	assert.EqualValues(t, 1, tg.calls.Load(), "the work ran once")
	in := tg.received()[0]
	w.AssertStatus(t, statusOf(res), in.Handoff().Offer, state.Completed, "")
	info, _, err := p.Hop(context.Background(), in.Offer().Hop)
	require.NoError(t, err)
	assert.Equal(t, state.Completed, info.State)
}

// The client's tasks/cancel carries the planner's signed "canceled" for
// the hop of the task (HC-28).
func TestDelegator_Cancel_Signed(t *testing.T) {
	w := world(t)
	tg := newTarget(t, w, nil)
	p := w.Agent(planner)
	_, base := delegatorFor(t, w, p, tg.URL, gateway.DelegatorConfig{})
	cl := client(t, base, overJSONRPC)
	res, err := cl.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: message("ctx-x", "wait"),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	task := taskOf(t, res)
	got, err := cl.CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, got.Status.State)
	tg.mu.Lock()
	canceled := tg.canceled
	tg.mu.Unlock()
	require.Len(t, canceled, 1)
	require.NotNil(t, canceled[0].Status, "the target verified the canceled")
	assert.Equal(t, planner, canceled[0].Status.Iss)
	assert.Equal(t, state.Canceled, canceled[0].Status.State)
	info, _, err := p.Hop(context.Background(), tg.received()[0].Offer().Hop)
	require.NoError(t, err)
	assert.True(t, info.Canceled)
	assert.False(t, info.Resolved, "a canceled hop stays unresolved (HC-41)")
}

// A message that carries a Handoff of its own is refused: the gateway
// signs the offers.
func TestDelegator_ClientHandoff_Refused(t *testing.T) {
	w := world(t)
	tg := newTarget(t, w, nil)
	_, base := delegatorFor(t, w, w.Agent(planner), tg.URL, gateway.DelegatorConfig{})
	m := message("ctx-h", "mine")
	m.Metadata = map[string]any{a2a1hop.ExtensionURI: map[string]any{"offer": "a.b.c"}}
	_, err := client(t, base, overJSONRPC).SendMessage(context.Background(), &a2a.SendMessageRequest{Message: m})
	require.ErrorIs(t, err, a2a.ErrInvalidParams)
	assert.Zero(t, tg.calls.Load())
}

// The Delegator's card is the target's with the gateway's interfaces, and
// without the handoff extension, which the gateway speaks for the client;
// with CardTrust, the target's card must verify for To.
func TestDelegator_Card(t *testing.T) {
	w := world(t)
	up := newUpstream(t, upstreamOptions{})
	_, dgURL := delegate(t, w, up, gateway.DelegateConfig{CardKey: w.Key(coder)})
	d, base := delegatorFor(t, w, w.Agent(planner), dgURL, gateway.DelegatorConfig{CardTrust: w.Trust()})
	var card a2a.AgentCard
	require.NoError(t, json.Unmarshal(d.Card(), &card))
	assert.Empty(t, card.Capabilities.Extensions)
	assert.Empty(t, card.Signatures, "the target's signatures covered its own interfaces")
	require.Len(t, card.SupportedInterfaces, 2)
	assert.Equal(t, base+gateway.JSONRPCPath, card.SupportedInterfaces[0].URL)
	assert.Equal(t, base+gateway.RESTPath, card.SupportedInterfaces[1].URL)

	// Signed by another key than the one the trust binds to To; unsigned.
	_, err := gateway.NewDelegator(context.Background(), gateway.DelegatorConfig{Agent: w.Agent(planner), To: planner,
		Upstream: dgURL, URL: "http://x", CardTrust: w.Trust()})
	require.ErrorIs(t, err, gateway.ErrUpstream)
	var ue *agentcard.UnverifiedError
	require.ErrorAs(t, err, &ue)
	_, err = gateway.NewDelegator(context.Background(), gateway.DelegatorConfig{Agent: w.Agent(planner), To: coder,
		Upstream: up.URL, URL: "http://x", CardTrust: w.Trust()})
	require.ErrorIs(t, err, agentcard.ErrUnsigned)
}

// Both sides: an unchanged client, the Delegator, the Delegate, an
// unchanged upstream. The upstream works once; the hop completes at the
// planner; the client gets the upstream's artifact.
func TestGateways_EndToEnd(t *testing.T) {
	w := world(t)
	up := newUpstream(t, upstreamOptions{})
	_, dgURL := delegate(t, w, up, gateway.DelegateConfig{})
	p := w.Agent(planner)
	_, base := delegatorFor(t, w, p, dgURL, gateway.DelegatorConfig{})
	res, err := client(t, base, overREST).SendMessage(context.Background(), &a2a.SendMessageRequest{Message: message("ctx-e2e", "ship it")})
	require.NoError(t, err)
	task := taskOf(t, res)
	assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Len(t, task.Artifacts, 1)
	assert.Equal(t, "done: ship it", task.Artifacts[0].Parts[0].Text())
	assert.EqualValues(t, 1, up.calls.Load())
	unresolved, err := p.Unresolved(context.Background())
	require.NoError(t, err)
	assert.Empty(t, unresolved, "the hop is resolved: completed")
}
