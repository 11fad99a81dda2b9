package a2a03hop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"

	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/a2acore/a2atest"
)

// TestA2A03 runs the scenarios of the A2A test kit on A2A 0.3 (a2a-go
// v0.3).
func TestA2A03(t *testing.T) { a2atest.Run(t, line{}) }

// line is A2A 0.3 through a2a-go v0.3, for the test kit.
type line struct{}

var _ a2atest.Line = line{}

func (line) Serve(t *testing.T, d *a2atest.Delegate) string {
	t.Helper()
	cfg := ha2a.ServerConfig{Agent: d.Agent, Executor: executor{d.Work}, Optional: d.Optional, Observe: d.Observe,
		RequireSignedCancel: d.RequireSignedCancel, OnCancel: d.OnCancel, OnNotices: d.OnNotices,
		OnReceive: func(ctx context.Context, in *handoff.Received) {
			exts, ok := a2asrv.ExtensionsFrom(ctx)
			d.OnReceive(ctx, in, ok && exts.Requested(ha2a.Extension))
		}}
	if a := d.Approvals; a != nil {
		cfg.Approvals = &ha2a.Approvals{Key: a.Key, Guard: a.Guard, Now: a.Now, AuthRequired: a.AuthRequired}
	}
	cfg.Evidence = d.Evidence
	exec, err := ha2a.NewExecutor(cfg)
	require.NoError(t, err)
	var opts []a2asrv.RequestHandlerOption
	if d.Tasks != nil {
		opts = append(opts, a2asrv.WithTaskStore(d.Tasks.(*tasks)))
	}
	srv := httptest.NewServer(ha2a.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec, opts...)),
		func(r *http.Request) (handoff.AgentID, bool) {
			id := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			return handoff.AgentID(id), id != ""
		}))
	t.Cleanup(srv.Close)
	return srv.URL
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

func (line) Dial(t *testing.T, a *handoff.Agent, url string, o a2atest.Dial) a2atest.Delegator {
	t.Helper()
	hc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: a, Attempts: o.Attempts, Observe: o.Observe})
	require.NoError(t, err)
	if o.Via != nil {
		hc = o.Via.(*delegator).hc
	}
	var ics []a2aclient.CallInterceptor
	if o.From != "" {
		ics = append(ics, bearer{id: o.From})
	}
	if !o.Bare {
		ics = append(ics, hc)
	}
	cl, err := a2aclient.NewFromEndpoints(context.Background(), []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: url}},
		a2aclient.WithConfig(a2aclient.Config{Polling: o.Immediate}), a2aclient.WithInterceptors(ics...))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Destroy() })
	return &delegator{hc: hc, cl: cl}
}

func (line) NewTasks() any {
	return &tasks{m: map[a2a.TaskID][]byte{}, v: map[a2a.TaskID]a2a.TaskVersion{}}
}
func (line) TaskState(s state.State) string { return a2acore.From03(string(ha2a.TaskState(s))) }
func (line) PausesAuthRequired() bool       { return true }
func (line) NotIntercepted() error          { return ha2a.ErrNotIntercepted }
func (line) InvalidParams() error           { return a2a.ErrInvalidParams }

// NoHandoff: A2A 0.3 answers with a message that says why.
func (line) NoHandoff(t *testing.T, res *a2atest.Result, err error) {
	require.NoError(t, err)
	require.False(t, res.Task, "a task for a message without a Handoff")
	require.Contains(t, res.Text, "handoff required")
}

// executor runs the kit's Work as an a2asrv.AgentExecutor.
type executor struct{ w *a2atest.Work }

func (e executor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return e.w.Execute(ctx, &exec{reqCtx: reqCtx, q: q})
}

func (e executor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return e.w.Cancel(ctx, &exec{reqCtx: reqCtx, q: q})
}

// exec is one execution: the events of the Work are written to q.
type exec struct {
	reqCtx *a2asrv.RequestContext
	q      eventqueue.Queue
}

func (x *exec) Received(ctx context.Context) (*handoff.Received, bool) { return ha2a.FromContext(ctx) }

func (x *exec) Write(ctx context.Context, s string) error {
	ev := a2a.NewStatusUpdateEvent(x.reqCtx, a2a.TaskState(a2acore.V03(s)), nil)
	ev.Final = a2acore.Terminal(s) || s == a2acore.InputRequired // the blocking send returns
	return x.q.Write(ctx, ev)
}

func (x *exec) Ask(ctx context.Context, err error) (bool, error) {
	ev, ok := ha2a.AskApproval(ctx, x.reqCtx, err)
	if !ok {
		return false, nil
	}
	return true, x.q.Write(ctx, ev)
}

func (x *exec) Report(ctx context.Context, o a2atest.Outcome) bool {
	return ha2a.Report(ctx, ha2a.Outcome(o))
}

func (x *exec) Meta() map[string]any {
	if m := x.reqCtx.Message; m != nil {
		return m.Metadata
	}
	return nil
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

// delegator is an A2A 0.3 client with the handoff Client.
type delegator struct {
	hc *ha2a.Client
	cl *a2aclient.Client
}

func message(m a2atest.Msg) *a2a.Message {
	if raw, ok := m.Raw.(*a2a.Message); ok {
		return raw
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: m.Text})
	msg.ContextID, msg.TaskID, msg.Metadata, msg.Extensions = m.ContextID, a2a.TaskID(m.TaskID), m.Meta, m.Exts
	return msg
}

func text(m *a2a.Message) string {
	if m == nil || len(m.Parts) == 0 {
		return ""
	}
	p, _ := m.Parts[0].(a2a.TextPart)
	return p.Text
}

func taskResult(t *a2a.Task) *a2atest.Result {
	if t == nil {
		return nil
	}
	r := &a2atest.Result{Task: true, ID: string(t.ID), ContextID: t.ContextID, State: a2acore.From03(string(t.Status.State)), Raw: t}
	if m := t.Status.Message; m != nil {
		r.Meta, r.Text = m.Metadata, text(m)
	}
	return r
}

func result(res a2a.SendMessageResult) *a2atest.Result {
	if m, ok := res.(*a2a.Message); ok {
		return &a2atest.Result{ID: string(m.TaskID), ContextID: m.ContextID, Meta: m.Metadata, Text: text(m), Raw: m}
	}
	t, _ := res.(*a2a.Task)
	return taskResult(t)
}

func (d *delegator) Send(ctx context.Context, m a2atest.Msg, p handoff.OfferParams) (*a2atest.Delivery, error) {
	dl, err := d.hc.Send(ctx, d.cl, message(m), p)
	if dl == nil {
		return nil, err
	}
	out := &a2atest.Delivery{Hop: dl.Hop, Offer: dl.Offer, Statuses: dl.Statuses, Attempts: dl.Attempts, State: dl.State}
	out.Result, out.Refused, out.Reason = result(dl.Result), dl.Refused, dl.Reason
	return out, err
}

func (d *delegator) Retransmit(ctx context.Context, m a2atest.Msg, hop handoff.HopID) (*a2atest.Result, []*handoff.StatusResult, error) {
	res, sts, err := d.hc.Retransmit(ctx, d.cl, message(m), hop)
	return result(res), sts, err
}

func (d *delegator) Cancel(ctx context.Context, hop handoff.HopID) (*a2atest.Result, handoff.Notice, error) {
	t, n, err := d.hc.Cancel(ctx, d.cl, hop)
	return taskResult(t), n, err
}

func (d *delegator) TaskOf(hop handoff.HopID) (string, bool) {
	t, ok := d.hc.TaskOf(hop)
	return string(t), ok
}

func (d *delegator) Get(ctx context.Context, task string) (*a2atest.Result, error) {
	t, err := d.cl.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(task)})
	return taskResult(t), err
}

func (d *delegator) SendMessage(ctx context.Context, m a2atest.Msg) (*a2atest.Result, error) {
	res, err := d.cl.SendMessage(ctx, &a2a.MessageSendParams{Message: message(m)})
	return result(res), err
}

func (d *delegator) Stream(ctx context.Context, m a2atest.Msg) (states []string, err error) {
	for ev, err := range d.cl.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: message(m)}) {
		if err != nil {
			return states, err
		}
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			states = append(states, a2acore.From03(string(u.Status.State)))
		}
	}
	return states, nil
}

func (d *delegator) CancelTask(ctx context.Context, task string) (*a2atest.Result, error) {
	t, err := d.cl.CancelTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(task)})
	return taskResult(t), err
}

func (d *delegator) Context() a2atest.Context {
	return a2atest.Context{WithHandoff: ha2a.WithHandoff, WithCancel: ha2a.WithCancel, Statuses: ha2a.Statuses}
}

func (d *delegator) Answer(task *a2atest.Result, decision string, signed []byte) (a2atest.Msg, error) {
	m, err := ha2a.Answer(task.Raw.(*a2a.Task), decision, signed)
	if err != nil {
		return a2atest.Msg{}, err
	}
	return a2atest.Msg{Text: decision, ContextID: m.ContextID, TaskID: string(m.TaskID), Meta: m.Metadata, Raw: m}, nil
}
