package gateway

import (
	"context"
	"crypto"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/observe"
)

// DelegateConfig configures a Delegate.
type DelegateConfig struct {
	// Agent is the delegate the gateway answers for: offers must name its
	// ID as aud, and it signs the hop's statuses. Required. Give it a
	// durable replay.Store (HC-34), or set its MemoryLostAt (HC-59).
	Agent *handoff.Agent
	// Upstream is the base URL of the A2A 1.0 agent behind the gateway: its
	// card is fetched from Upstream + CardPath when the gateway starts, and
	// its interfaces are called. Required.
	Upstream string
	// URL is the gateway's own base URL, as its clients reach it: the
	// interfaces of the card it serves name it. Required.
	URL string
	// CardKey, when set, signs the card the gateway serves (agentcard.Sign,
	// with SignOptions.DropEmpty so that @a2a-js/sdk verifies it too): the
	// agent's handoff key, so that a peer checks the card with the Trust it
	// checks the agent's statuses with. Nil serves the card unsigned.
	CardKey crypto.Signer
	// Optional lets a message without a Handoff through to the upstream,
	// and declares the extension not required. By default such a message
	// is refused, as a2a1hop refuses it.
	Optional bool
	// KeepHandoff passes the Handoff on to the upstream in the message's
	// metadata, with the extension in its extensions and in A2A-Extensions.
	// By default they are removed: see the package documentation.
	KeepHandoff bool
	// FailedMeansNoEffect says that a task the upstream ends in
	// TASK_STATE_FAILED did nothing, so the hop gets "failed" without
	// refs. By default such a task's outcome is unknown, and the hop stays
	// "accepted" (HC-25, HC-45): only the operator of the upstream knows.
	FailedMeansNoEffect bool
	// RequireSignedCancel refuses a tasks/cancel that carries no verified
	// "canceled" (a2a1hop.ServerConfig.RequireSignedCancel).
	RequireSignedCancel bool
	// Peer names the caller the transport authenticated, from its request:
	// a retransmission gets the hop's last status only when the caller is
	// the offer's iss (HC-39), and only that delegator changes its hop's
	// task. Nil, or false, authenticates nobody.
	Peer func(*http.Request) (handoff.AgentID, bool)
	// ForwardHeaders names the headers of a call that go on to the
	// upstream (such as Authorization). A2A-Extensions always does.
	ForwardHeaders []string
	// HTTPClient calls the upstream; nil means a client with no timeout,
	// for streams: a call ends with the execution that makes it.
	HTTPClient *http.Client
	// Tasks stores the gateway's A2A tasks; nil means in memory.
	Tasks taskstore.Store
	// OnReceive, when set, is called with the outcome of every offer
	// checked, before it is answered (a2a1hop.ServerConfig.OnReceive).
	OnReceive func(context.Context, *handoff.Received)
	// OnCancel, when set, is called with the outcome of every "canceled"
	// a tasks/cancel carried (a2a1hop.ServerConfig.OnCancel).
	OnCancel func(context.Context, *handoff.StatusResult)
	// Observe records spans and counters; nil records nothing.
	Observe *observe.Recorder
	// Logger hears of each delivery and each "canceled" handled; nil is
	// silent.
	Logger *slog.Logger
}

// Delegate is the gateway in front of an A2A agent: an http.Handler
// serving CardPath, JSONRPCPath and RESTPath. It is safe for concurrent
// use.
type Delegate struct {
	card    []byte
	up      *a2aclient.Client
	handler http.Handler
}

// NewDelegate fetches the upstream's card and returns the gateway in front
// of it. ctx bounds the fetch.
func NewDelegate(ctx context.Context, cfg DelegateConfig) (*Delegate, error) {
	switch {
	case cfg.Agent == nil:
		return nil, fmt.Errorf("%w: DelegateConfig.Agent is required", handoff.ErrConfig)
	case cfg.Upstream == "" || cfg.URL == "":
		return nil, fmt.Errorf("%w: DelegateConfig.Upstream and DelegateConfig.URL are required", handoff.ErrConfig)
	}
	hc, raw, upCard, err := fetchCard(ctx, cfg.HTTPClient, cfg.Upstream)
	if err != nil {
		return nil, err
	}
	card, err := servedCard(raw, cfg.URL, func(c members) error {
		exts, err := c.extensions()
		if err != nil {
			return err
		}
		ext := *a2a1hop.Extension
		ext.Required = !cfg.Optional
		b, err := jsonValue(ext)
		if err != nil {
			return err
		}
		if err := c.set("extensions", append(exts, b)); err != nil {
			return err
		}
		// The gateway streams whatever the upstream does; it keeps no push
		// configurations and serves no extended card.
		delete(c, "pushNotifications")
		delete(c, "extendedAgentCard")
		return c.set("streaming", true)
	})
	if err != nil {
		return nil, err
	}
	if cfg.CardKey != nil {
		if card, err = agentcard.Sign(card, cfg.CardKey, agentcard.SignOptions{DropEmpty: true}); err != nil {
			return nil, fmt.Errorf("gateway: sign the card: %w", err)
		}
	}
	up, err := dial(ctx, upCard, hc)
	if err != nil {
		return nil, err
	}
	fw := &forwarder{up: up, keep: cfg.KeepHandoff, failedNone: cfg.FailedMeansNoEffect, headers: cfg.ForwardHeaders,
		streams: upCard.Capabilities.Streaming}
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: cfg.Agent, Executor: fw, Optional: cfg.Optional,
		RequireSignedCancel: cfg.RequireSignedCancel, OnReceive: cfg.OnReceive, OnCancel: cfg.OnCancel,
		Observe: cfg.Observe, Logger: cfg.Logger})
	if err != nil {
		_ = up.Destroy()
		return nil, err
	}
	var opts []a2asrv.RequestHandlerOption
	if cfg.Tasks != nil {
		opts = append(opts, a2asrv.WithTaskStore(cfg.Tasks))
	}
	if cfg.Logger != nil {
		opts = append(opts, a2asrv.WithLogger(cfg.Logger))
	}
	return &Delegate{card: card, up: up, handler: serve(card, a2asrv.NewHandler(exec, opts...), cfg.Peer)}, nil
}

// ServeHTTP implements http.Handler.
func (d *Delegate) ServeHTTP(rw http.ResponseWriter, r *http.Request) { d.handler.ServeHTTP(rw, r) }

// Card returns the card the gateway serves at CardPath.
func (d *Delegate) Card() []byte { return slices.Clone(d.card) }

// Close releases the connections to the upstream.
func (d *Delegate) Close() error { return d.up.Destroy() }

// forwarder is the executor a2a1hop's wraps: it runs only for an accepted
// offer (or, with Optional, a message without a Handoff), sends the
// message to the upstream and yields the upstream's events as the
// gateway's task's.
type forwarder struct {
	up         *a2aclient.Client
	keep       bool
	failedNone bool
	headers    []string
	streams    bool // the upstream streams: a task is followed by tasks/subscribe, else polled

	mu        sync.Mutex
	canceling map[a2a.TaskID]chan struct{} // the gateway's tasks a Cancel is canceling, closed when it returns
}

// cancel notes that a Cancel runs for the gateway's task id, until done.
func (f *forwarder) cancel(id a2a.TaskID) (done func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	if f.canceling == nil {
		f.canceling = map[a2a.TaskID]chan struct{}{}
	}
	f.canceling[id] = ch
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.canceling, id)
		f.mu.Unlock()
		close(ch)
	}
}

// canceled returns, while a Cancel runs for the gateway's task id, a
// channel closed when it returns.
func (f *forwarder) canceled(id a2a.TaskID) (<-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.canceling[id]
	return ch, ok
}

var _ a2asrv.AgentExecutor = (*forwarder)(nil)

// Execute implements a2asrv.AgentExecutor.
func (f *forwarder) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		r := f.relay(ctx, ec, yield)
		m := f.outgoing(ec)
		ctx := a2aclient.AttachServiceParams(ctx, forwarded(ec.ServiceParams, f.headers, !f.keep))
		req := &a2a.SendMessageRequest{Message: m, Metadata: ec.Metadata, Tenant: ec.Tenant}
		// A stream whatever the client called: its first event names the
		// upstream's task, so that a tasks/cancel reaches it while the work
		// runs. A message/send would answer only once the task ends.
		for ev, err := range f.up.SendStreamingMessage(ctx, req) {
			if err != nil {
				r.lost(ctx, err)
				return
			}
			if !r.event(ctx, ev) {
				return
			}
		}
		f.follow(ctx, r)
	}
}

// follow relays the upstream's task until it ends or waits for input,
// when the call that sent the message returned before: through
// tasks/subscribe, then, if the task is still not settled (its stream
// ended, or it ended before the subscription), tasks/get, at growing
// intervals, as for an upstream that does not stream.
func (f *forwarder) follow(ctx context.Context, r *relay) {
	if r.task == "" || settled(r.last) {
		return
	}
	if f.streams {
		got := false
		for ev, err := range f.up.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: r.task}) {
			if err != nil {
				if got {
					r.lost(ctx, err)
					return
				}
				break // read the task instead
			}
			got = true
			if !r.event(ctx, ev) {
				return
			}
		}
	}
	for wait := 50 * time.Millisecond; !settled(r.last); wait = min(2*wait, 2*time.Second) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			r.lost(ctx, ctx.Err())
			return
		case <-t.C:
		}
		task, err := f.up.GetTask(ctx, &a2a.GetTaskRequest{ID: r.task})
		if err != nil {
			r.lost(ctx, err)
			return
		}
		if task.Status.State == r.last && !settled(r.last) {
			continue // nothing new
		}
		if !r.event(ctx, task) {
			return
		}
	}
}

// settled reports whether a task in state s takes no more work of its
// own: it ended, or waits for its client.
func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// outgoing is the message sent upstream: the client's, on the upstream's
// task when the gateway's task has one, without the Handoff unless keep.
func (f *forwarder) outgoing(ec *a2asrv.ExecutorContext) *a2a.Message {
	m := *ec.Message
	m.ContextID = ec.ContextID
	m.TaskID = upstreamOf(ec.StoredTask)
	if !f.keep {
		m.Metadata = maps.Clone(m.Metadata)
		delete(m.Metadata, a2a1hop.ExtensionURI)
		m.Extensions = slices.DeleteFunc(slices.Clone(m.Extensions), func(e string) bool { return e == a2a1hop.ExtensionURI })
	}
	return &m
}

// upstreamOf returns the upstream task a gateway task forwards to.
func upstreamOf(t *a2a.Task) a2a.TaskID {
	if t == nil {
		return ""
	}
	id, _ := t.Metadata[UpstreamTaskKey].(string)
	return a2a.TaskID(id)
}

// Cancel implements a2asrv.AgentExecutor. a2a1hop's executor has verified
// and applied the delegator's "canceled" first, when there was one; the
// upstream's task is canceled, and the gateway's follows it.
func (f *forwarder) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		task := upstreamOf(ec.StoredTask)
		if task == "" {
			// Nothing reached the upstream yet, or nothing says where.
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
			return
		}
		// The upstream's own task stream may bring its "canceled" to the
		// execution before this returns: the execution leaves it to this
		// Cancel, whose events a2a-go writes to the execution's queue.
		defer f.cancel(ec.TaskID)()
		meta := ec.Metadata
		if !f.keep {
			meta = maps.Clone(meta)
			delete(meta, a2a1hop.ExtensionURI)
		}
		ctx := a2aclient.AttachServiceParams(ctx, forwarded(ec.ServiceParams, f.headers, !f.keep))
		t, err := f.up.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task, Metadata: meta, Tenant: ec.Tenant})
		if err != nil {
			yield(nil, fmt.Errorf("gateway: the upstream's tasks/cancel: %w", err))
			return
		}
		r := f.relay(ctx, ec, yield)
		r.canceler = true
		r.event(ctx, t)
	}
}

// relay yields the upstream's events as the gateway task's.
type relay struct {
	f     *forwarder
	ec    *a2asrv.ExecutorContext
	yield func(a2a.Event, error) bool
	hop   bool // an accepted offer runs: its statuses follow the task
	made  bool // the gateway's task exists
	state a2a.TaskState
	task  a2a.TaskID    // the upstream's task
	last  a2a.TaskState // the upstream task's last state
	noted bool          // the gateway's task names task
	// canceler: the relay of a Cancel, not of the execution.
	canceler bool
}

func (f *forwarder) relay(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) *relay {
	_, hop := a2a1hop.FromContext(ctx)
	r := &relay{f: f, ec: ec, yield: yield, hop: hop, made: ec.StoredTask != nil, task: upstreamOf(ec.StoredTask)}
	if r.made {
		r.state = ec.StoredTask.Status.State
		r.noted = r.task != ""
	}
	return r
}

// event relays one upstream event; false once the gateway's task is
// settled or its events are no longer consumed.
func (r *relay) event(ctx context.Context, ev a2a.Event) bool {
	switch ev := ev.(type) {
	case *a2a.Message:
		if !r.made {
			m := r.message(ev)
			m.TaskID = ""
			r.yield(m, nil)
			return false
		}
		// A direct answer: the upstream finished.
		return r.status(ctx, a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: ev}, nil)
	case *a2a.Task:
		r.task = ev.ID
		if !r.made {
			return r.first(ev)
		}
		for _, a := range ev.Artifacts {
			if !r.emit(&a2a.TaskArtifactUpdateEvent{TaskID: r.ec.TaskID, ContextID: r.ec.ContextID, Artifact: a, LastChunk: true}) {
				return false
			}
		}
		return r.status(ctx, ev.Status, ev.Metadata)
	case *a2a.TaskStatusUpdateEvent:
		if r.task == "" {
			r.task = ev.TaskID
		}
		return r.status(ctx, ev.Status, ev.Metadata)
	case *a2a.TaskArtifactUpdateEvent:
		cp := *ev
		cp.TaskID, cp.ContextID, cp.Metadata = r.ec.TaskID, r.ec.ContextID, own(ev.Metadata)
		return r.emit(&cp)
	}
	r.yield(nil, fmt.Errorf("gateway: the upstream sent an event of type %T: %w", ev, a2a.ErrInvalidAgentResponse))
	return false
}

func (r *relay) emit(ev a2a.Event) bool { return r.yield(ev, nil) }

// first yields the task a message without a Handoff made upstream
// (Optional), as the gateway's.
func (r *relay) first(t *a2a.Task) bool {
	cp := *t
	cp.ID, cp.ContextID, cp.Metadata = r.ec.TaskID, r.ec.ContextID, r.note(t.Metadata)
	cp.History = make([]*a2a.Message, len(t.History))
	for i, m := range t.History {
		cp.History[i] = r.message(m)
	}
	cp.Status.Message = r.message(t.Status.Message)
	r.made, r.state, r.last = true, t.Status.State, t.Status.State
	return r.emit(&cp) && !settled(r.state)
}

// status yields the upstream task's status as the gateway task's, with
// what the hop's status follows from (see the package documentation).
func (r *relay) status(ctx context.Context, st a2a.TaskStatus, meta map[string]any) bool {
	r.last = st.State
	if ch, ok := r.f.canceled(r.ec.TaskID); ok && st.State == a2a.TaskStateCanceled && !r.canceler {
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
	s := st.State
	switch {
	case s == a2a.TaskStateSubmitted || s == a2a.TaskStateUnspecified:
		s = r.state // the gateway's task is already past it
	case r.hop && s == a2a.TaskStateRejected:
		// Taken by the gateway, so not "rejected" (HC-24): the upstream
		// declined to do the work, which therefore took no effect.
		s = a2a.TaskStateFailed
		a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectNone})
	case r.hop && s == a2a.TaskStateFailed && r.f.failedNone:
		a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectNone})
	}
	ev := a2a.NewStatusUpdateEvent(r.ec, s, r.message(st.Message))
	if st.Timestamp != nil {
		ev.Status.Timestamp = st.Timestamp
	}
	ev.Metadata = r.note(meta)
	r.state = s
	return r.emit(ev) && !settled(s)
}

// lost ends the gateway's task when the upstream's call failed: "failed"
// when the upstream refused it or never got it; else the outcome is
// unknown, and the hop stays "accepted" (HC-45). Without a task, as for a
// message without a Handoff, the error goes back as it is.
func (r *relay) lost(ctx context.Context, err error) {
	if !r.made {
		r.yield(nil, err)
		return
	}
	if r.hop && (answered(err) || unsent(err)) && r.task == "" {
		a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectNone})
	}
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, r.ec, a2a.NewTextPart("upstream: "+err.Error()))
	ev := a2a.NewStatusUpdateEvent(r.ec, a2a.TaskStateFailed, m)
	ev.Metadata = r.note(nil)
	r.yield(ev, nil)
}

// message returns m as the gateway's: on its task and context, without
// the upstream's keys of the extension's namespace (the statuses in the
// gateway's replies are the gateway's).
func (r *relay) message(m *a2a.Message) *a2a.Message {
	if m == nil {
		return nil
	}
	cp := *m
	cp.TaskID, cp.ContextID, cp.Metadata = r.ec.TaskID, r.ec.ContextID, own(m.Metadata)
	return &cp
}

// note returns the upstream's metadata for the gateway's task, naming the
// upstream's task the first time.
func (r *relay) note(meta map[string]any) map[string]any {
	out := own(meta)
	if !r.noted && r.task != "" {
		if out == nil {
			out = map[string]any{}
		}
		out[UpstreamTaskKey] = string(r.task)
		r.noted = true
	}
	return out
}

// own returns the upstream's metadata without the keys of the extension's
// namespace, which only the gateway writes (the hop a task runs, the
// upstream task).
func own(meta map[string]any) map[string]any {
	if meta == nil {
		return nil
	}
	out := maps.Clone(meta)
	maps.DeleteFunc(out, func(k string, _ any) bool { return strings.HasPrefix(k, a2a1hop.ExtensionURI) })
	return out
}
