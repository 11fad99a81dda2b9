package a2a1hop_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/internal/a2acore/a2atest"
)

// TestA2A1 runs the scenarios of the A2A test kit on A2A 1.0 (a2a-go/v2).
func TestA2A1(t *testing.T) { a2atest.Run(t, line{}) }

// line is A2A 1.0 through a2a-go/v2, for the test kit.
type line struct{}

var _ a2atest.Line = line{}

// who names the caller by its bearer token: the loopback endpoint stands
// in for an authenticated transport.
func who(r *http.Request) (handoff.AgentID, bool) {
	id := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return handoff.AgentID(id), id != ""
}

func (line) Serve(t *testing.T, d *a2atest.Delegate) string {
	t.Helper()
	cfg := a2a1hop.ServerConfig{Agent: d.Agent, Executor: executor{d.Work}, Optional: d.Optional,
		RequireSignedCancel: d.RequireSignedCancel, Observe: d.Observe, OnCancel: d.OnCancel, OnNotices: d.OnNotices,
		OnReceive: func(ctx context.Context, in *handoff.Received) {
			exts, ok := a2asrv.ExtensionsFrom(ctx)
			d.OnReceive(ctx, in, ok && exts.Requested(a2a1hop.Extension))
		}}
	if a := d.Approvals; a != nil {
		cfg.Approvals = &a2a1hop.Approvals{Key: a.Key, Guard: a.Guard, Now: a.Now}
	}
	cfg.Evidence = d.Evidence
	exec, err := a2a1hop.NewExecutor(cfg)
	require.NoError(t, err)
	var opts []a2asrv.RequestHandlerOption
	if d.Tasks != nil {
		opts = append(opts, a2asrv.WithTaskStore(d.Tasks.(taskstore.Store)))
	}
	srv := httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec, opts...)), who))
	t.Cleanup(srv.Close)
	return srv.URL
}

// bearer sends the caller's AgentID as its token.
type bearer struct {
	a2aclient.PassthroughInterceptor
	id handoff.AgentID
}

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+string(b.id))
	return ctx, nil, nil
}

func (line) Dial(t *testing.T, a *handoff.Agent, url string, o a2atest.Dial) a2atest.Delegator {
	t.Helper()
	cfg := a2a1hop.ClientConfig{Agent: a, Attempts: o.Attempts, Observe: o.Observe}
	if o.Immediate {
		cfg.SendConfig = &a2a.SendMessageConfig{ReturnImmediately: true}
	}
	hc, err := a2a1hop.NewClient(cfg)
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
	cl, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(url, a2a.TransportProtocolJSONRPC)}, a2aclient.WithCallInterceptors(ics...))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Destroy() })
	return &delegator{hc: hc, cl: cl}
}

func (line) NewTasks() any                  { return taskstore.NewInMemory(nil) }
func (line) TaskState(s state.State) string { return string(a2a1hop.TaskState(s)) }
func (line) PausesAuthRequired() bool       { return false }
func (line) NotIntercepted() error          { return a2a1hop.ErrNotIntercepted }
func (line) InvalidParams() error           { return a2a.ErrInvalidParams }
func (line) NoHandoff(t *testing.T, _ *a2atest.Result, err error) {
	require.ErrorIs(t, err, a2a.ErrExtensionSupportRequired)
}

// executor runs the kit's Work as an a2asrv.AgentExecutor.
type executor struct{ w *a2atest.Work }

var errStopped = errors.New("the consumer stopped")

func (e executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return e.run(ctx, ec, e.w.Execute)
}

func (e executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return e.run(ctx, ec, e.w.Cancel)
}

func (executor) run(ctx context.Context, ec *a2asrv.ExecutorContext, f func(context.Context, a2atest.Exec) error) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if _, ok := a2a1hop.FromContext(ctx); ok && ec.StoredTask == nil {
			yield(nil, errors.New("the wrapper did not make the task"))
			return
		}
		if err := f(ctx, &exec{ec: ec, yield: yield}); err != nil && !errors.Is(err, errStopped) {
			yield(nil, err)
		}
	}
}

// exec is one execution: the events of the Work are yielded.
type exec struct {
	ec    *a2asrv.ExecutorContext
	yield func(a2a.Event, error) bool
	made  bool // a task was yielded
}

func (x *exec) emit(ev a2a.Event) error {
	if !x.yield(ev, nil) {
		return errStopped
	}
	return nil
}

func (x *exec) Received(ctx context.Context) (*handoff.Received, bool) {
	return a2a1hop.FromContext(ctx)
}

func (x *exec) Write(_ context.Context, s string) error {
	if x.ec.StoredTask == nil && !x.made {
		x.made = true
		t := a2a.NewSubmittedTask(x.ec, x.ec.Message)
		t.Status.State = a2a.TaskState(s)
		return x.emit(t)
	}
	return x.emit(a2a.NewStatusUpdateEvent(x.ec, a2a.TaskState(s), nil))
}

func (x *exec) Ask(ctx context.Context, err error) (bool, error) {
	ev, ok := a2a1hop.AskApproval(ctx, x.ec, err)
	if !ok {
		return false, nil
	}
	return true, x.emit(ev)
}

func (x *exec) Report(ctx context.Context, o a2atest.Outcome) bool {
	return a2a1hop.Report(ctx, a2a1hop.Outcome(o))
}

func (x *exec) Meta() map[string]any {
	if m := x.ec.Message; m != nil {
		return m.Metadata
	}
	return nil
}

// delegator is an A2A 1.0 client with the handoff Client.
type delegator struct {
	hc *a2a1hop.Client
	cl *a2aclient.Client
}

func message(m a2atest.Msg) *a2a.Message {
	if raw, ok := m.Raw.(*a2a.Message); ok {
		return raw
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(m.Text))
	msg.ContextID, msg.TaskID, msg.Metadata, msg.Extensions = m.ContextID, a2a.TaskID(m.TaskID), m.Meta, m.Exts
	return msg
}

func text(m *a2a.Message) string {
	if m == nil || len(m.Parts) == 0 {
		return ""
	}
	return m.Parts[0].Text()
}

func taskResult(t *a2a.Task) *a2atest.Result {
	if t == nil {
		return nil
	}
	r := &a2atest.Result{Task: true, ID: string(t.ID), ContextID: t.ContextID, State: string(t.Status.State), Raw: t}
	if m := t.Status.Message; m != nil {
		r.Meta, r.Text = m.Metadata, text(m)
	}
	return r
}

func result(res a2a.SendMessageResult) *a2atest.Result {
	switch v := res.(type) {
	case *a2a.Task:
		return taskResult(v)
	case *a2a.Message:
		return &a2atest.Result{ID: string(v.TaskID), ContextID: v.ContextID, Meta: v.Metadata, Text: text(v), Raw: v}
	}
	return nil
}

func (d *delegator) Send(ctx context.Context, m a2atest.Msg, p handoff.OfferParams) (*a2atest.Delivery, error) {
	dl, err := d.hc.Send(ctx, d.cl, message(m), p)
	if dl == nil {
		return nil, err
	}
	return &a2atest.Delivery{Hop: dl.Hop, Offer: dl.Offer, Result: result(dl.Result), Statuses: dl.Statuses, Attempts: dl.Attempts,
		State: dl.State, Refused: dl.Refused, Reason: dl.Reason}, err
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

func (d *delegator) SendMessage(ctx context.Context, m a2atest.Msg) (*a2atest.Result, error) {
	res, err := d.cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: message(m)})
	return result(res), err
}

func (d *delegator) Stream(ctx context.Context, m a2atest.Msg) ([]string, error) {
	var states []string
	for ev, err := range d.cl.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: message(m)}) {
		switch e := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, string(e.Status.State))
		case *a2a.Task:
			states = append(states, string(e.Status.State))
		}
		if err != nil {
			return states, err
		}
	}
	return states, nil
}

func (d *delegator) CancelTask(ctx context.Context, task string) (*a2atest.Result, error) {
	t, err := d.cl.CancelTask(ctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(task)})
	return taskResult(t), err
}

func (d *delegator) Get(ctx context.Context, task string) (*a2atest.Result, error) {
	t, err := d.cl.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(task)})
	return taskResult(t), err
}

func (d *delegator) Context() a2atest.Context {
	return a2atest.Context{WithHandoff: a2a1hop.WithHandoff, WithCancel: a2a1hop.WithCancel, Statuses: a2a1hop.Statuses}
}

func (d *delegator) Answer(task *a2atest.Result, decision string, signed []byte) (a2atest.Msg, error) {
	m, err := a2a1hop.Answer(task.Raw.(*a2a.Task), decision, signed)
	if err != nil {
		return a2atest.Msg{}, err
	}
	return a2atest.Msg{Text: decision, ContextID: m.ContextID, TaskID: string(m.TaskID), Meta: m.Metadata, Raw: m}, nil
}
