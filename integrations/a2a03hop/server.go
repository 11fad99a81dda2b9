// Package a2a03hop makes every A2A 0.3 message that carries work a signed,
// checked hop of the draft "Signed Handoff Context for Agentic Dialogs"
// (section 6, HC-66), for servers and clients of the a2a-go SDK's v0.3 line
// (github.com/a2aproject/a2a-go v0.3.15). A2A 1.0, through a2a-go/v2, is
// package a2a1hop, in its own module; the carriage helpers both use are
// the root's package a2a.
//
// # Delegate (server)
//
// NewExecutor wraps an a2asrv.AgentExecutor. For each message it reads the
// Handoff from Message.metadata under ExtensionURI and runs Agent.Receive
// before the wrapped executor is called:
//
//   - an offer that fails a check never reaches the executor: the task is
//     rejected (TASK_STATE_REJECTED) with the signed "rejected" in its status
//     message when the draft asks for one (HC-30);
//   - a retransmission never reaches the executor: the reply is a Message
//     with the identical octets of the hop's last status, or a new
//     "accepted" when the work was taken and nothing was sent yet (HC-38,
//     HC-39);
//   - an equivocating offer never reaches the executor: the second offer
//     gets no status (HC-53); what HC-54 allows for the first is attached,
//     and an execution of the first that still runs is stopped
//     (ErrEquivocated);
//   - an accepted offer is answered "accepted" (TASK_STATE_WORKING) and the
//     wrapped executor runs with the Received in its context (FromContext).
//     Each state change it writes gets the signed status of the matching
//     hop state in its status message (HC-29): TASK_STATE_COMPLETED
//     "completed", TASK_STATE_FAILED "failed" when the outcome is known
//     (Report). Other A2A states stay in the host protocol.
//
// A Cancel Task request whose metadata carries the delegator's signed
// "canceled" is handed to Agent.HandleStatus before the wrapped executor's
// Cancel (HC-28, HC-66); the cancels the agent signs for the hops it passed
// on go to ServerConfig.OnNotices. The "canceled" must name the hop the
// task runs, signed by that hop's delegator: any other is refused with
// ErrForeignCancel before it is verified, and the task goes on. Authenticate
// (or WithPeer) names the caller the transport authenticated.
//
// With ServerConfig.Approvals, a must-ask action of the hop's evidence
// guard pauses the task in input-required for its owner's approval
// (AskApproval), and the answer on the same task resumes it (Answer); an
// auth-required state, like input-required, authorizes nothing: the guard
// decides. See Approvals.
//
// # Delegator (client)
//
// A Client is an a2aclient.CallInterceptor: it attaches the Handoff that
// WithHandoff put in the call's context to Message.metadata, lists
// ExtensionURI in Message.extensions and in the A2A-Extensions service
// parameter, and hands every status found in responses and task updates to
// Agent.HandleStatus. Client.Send does all of it, with retransmissions per
// asking.Backoff, and tells how the delivery ended (Delivery.State,
// Refused, Reason); Client.Cancel sends the signed "canceled" in a Cancel
// Task request. An A2A client without the Client among its interceptors
// is an error (ErrNotIntercepted), never a result.
//
// # Trace context
//
// The Client puts the W3C trace context of the call's context in
// Message.metadata under "traceparent" and "tracestate", beside the
// Handoff; the Executor runs the wrapped executor in the hop's span, a
// child of that context (observe.StartHop). The trace context is not
// signed and decides nothing: the offer is checked as if it were absent.
package a2a03hop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/binding"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/observe"
)

// ExtensionURI is the A2A extension URI and metadata key of the draft.
const ExtensionURI = carry.ExtensionURI

// Transport is the name recorded in spans and metrics.
const Transport = "a2a"

// Extension is the handoff extension as the A2A SDK names extensions.
var Extension = &a2a.AgentExtension{URI: ExtensionURI, Description: "Signed Handoff Context (draft-handoff-01)"}

// ServerConfig configures the delegate's executor.
type ServerConfig struct {
	// Agent is the delegate. Required.
	Agent *handoff.Agent
	// Executor is the wrapped executor that does the work. Required.
	Executor a2asrv.AgentExecutor
	// Optional lets a message without a Handoff reach the executor, with no
	// offer in the context. By default it is answered with a refusal and
	// the executor is not run.
	Optional bool
	// Peer returns the AgentID the transport authenticated the caller as;
	// the last status of a retransmitted hop goes back only to its
	// delegator (HC-39). Nil means the name of the call context's
	// authenticated caller (see Authenticate and WithPeer), else the name
	// of the A2A call context's authenticated user.
	Peer func(context.Context) handoff.AgentID
	// OnNotices receives the "canceled" statuses the agent signed for the
	// hops it passed on when a hop it received was canceled (HC-28).
	OnNotices func(context.Context, []handoff.Notice)
	// OnCancel, when set, is called with the outcome of every "canceled"
	// that arrived with a Cancel Task request, verified or refused.
	OnCancel func(context.Context, *handoff.StatusResult)
	// RequireSignedCancel refuses a Cancel Task request that carries no
	// verified "canceled". By default such a request cancels the A2A task
	// only: the hop's state does not change.
	RequireSignedCancel bool
	// OnReceive, when set, is called with the outcome of every Receive,
	// before the offer is answered: for logs and audit.
	OnReceive func(context.Context, *handoff.Received)
	// Observe records spans and counters; nil records nothing.
	Observe *observe.Recorder
	// Logger, when set, hears of each delivery and each "canceled" handled: the outcome as the Agent decided
	// it (a slog.LogValuer), with the transport. Nil is silent. Give the
	// Agent a logger too (handoff.Config.Logger) for its own decisions.
	Logger *slog.Logger
	// Approvals, when set, gives every accepted hop's executor its
	// evidence guard and pauses a must-ask action for its owner's approval
	// with input-required (AskApproval); nil leaves both to the executor.
	Approvals *Approvals
}

// Executor is the wrapping a2asrv.AgentExecutor.
type Executor struct {
	cfg     ServerConfig
	running hopwork.Running           // accepted hops whose executor runs
	tasks   binding.Table[a2a.TaskID] // the hops each task runs
}

// ErrEquivocated is the cause of the context of an execution stopped
// because its delegator signed another offer under the same hop (HC-54):
// the executor should stop if it can, then report its outcome (Report) and
// write TASK_STATE_FAILED, or TASK_STATE_COMPLETED if the work took full
// effect; "failed" then carries the reason "equivocation".
var ErrEquivocated = hopwork.ErrEquivocated

// ErrForeignCancel is the error of a Cancel Task request whose "canceled"
// names another hop than the task's: a "canceled" captured from one task
// and replayed against another. The task goes on (HC-28, HC-55).
var ErrForeignCancel = binding.ErrForeign

var _ a2asrv.AgentExecutor = (*Executor)(nil)

// NewExecutor returns the executor wrapping cfg.Executor.
func NewExecutor(cfg ServerConfig) (*Executor, error) {
	if cfg.Agent == nil || cfg.Executor == nil {
		return nil, fmt.Errorf("%w: ServerConfig.Agent and ServerConfig.Executor are required", handoff.ErrConfig)
	}
	if err := cfg.Approvals.validate(); err != nil {
		return nil, err
	}
	return &Executor{cfg: cfg}, nil
}

type ctxKey int

const (
	keyReceived ctxKey = iota
	keyOutcome
	keyHandoff
	keyCancel
	keyPeer
)

// FromContext returns the verified, accepted offer of the message the
// wrapped executor serves.
func FromContext(ctx context.Context) (*handoff.Received, bool) {
	in, ok := ctx.Value(keyReceived).(*handoff.Received)
	return in, ok
}

// Outcome is what the wrapped executor knows of its work's effect
// ("Knowing the Outcome" in the draft).
type Outcome struct {
	// Effect decides the status sent with TASK_STATE_COMPLETED or
	// TASK_STATE_FAILED: EffectFull "completed"; EffectNone and
	// EffectPartial "failed"; EffectUnknown none (HC-25, HC-45).
	Effect state.Effect
	Reason reason.Code
	Refs   []ref.Ref
}

// Report tells the executor wrapper what the work achieved, before the
// wrapped executor writes its final state. Without it TASK_STATE_COMPLETED
// counts as EffectFull, and TASK_STATE_FAILED as EffectUnknown: no status.
// It reports false outside a wrapped execution.
func Report(ctx context.Context, o Outcome) bool {
	b, ok := ctx.Value(keyOutcome).(*hopwork.Box)
	if ok {
		b.Report(hopwork.Outcome(o))
	}
	return ok
}

// Authenticate returns a handler that puts the caller's identity in the
// request's context, for the handler next (a2asrv.NewJSONRPCHandler). who
// returns the AgentID the request authenticates, or false to refuse it with
// 401. The SDK's JSON-RPC handler makes the A2A call context itself (its
// service parameters come from the request's headers), so the identity
// travels beside it and Peer reads it first.
func Authenticate(next http.Handler, who func(*http.Request) (handoff.AgentID, bool)) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		id, ok := who(r)
		if !ok {
			http.Error(rw, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(rw, r.WithContext(WithPeer(r.Context(), id)))
	})
}

// WithPeer returns a context naming the AgentID the transport authenticated
// the caller as, for a server that authenticates in its own way.
func WithPeer(ctx context.Context, id handoff.AgentID) context.Context {
	return context.WithValue(ctx, keyPeer, id)
}

func (e *Executor) peer(ctx context.Context) handoff.AgentID {
	if e.cfg.Peer != nil {
		return e.cfg.Peer(ctx)
	}
	if id, ok := ctx.Value(keyPeer).(handoff.AgentID); ok {
		return id
	}
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil && cc.User.Authenticated() {
		return handoff.AgentID(cc.User.Name())
	}
	return ""
}

// Execute implements a2asrv.AgentExecutor.
func (e *Executor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	msg := reqCtx.Message
	var meta map[string]any
	if msg != nil {
		meta = msg.Metadata
	}
	octets, err := carry.Handoff(meta)
	if err != nil {
		if errors.Is(err, carry.ErrAbsent) && e.cfg.Optional {
			return e.cfg.Executor.Execute(observe.Extract(ctx, meta), reqCtx, q)
		}
		_, end := e.cfg.Observe.StartReceive(ctx, Transport)
		end(nil, nil)
		return q.Write(ctx, reply(reqCtx, "handoff required: "+err.Error(), nil))
	}
	if exts, ok := a2asrv.ExtensionsFrom(ctx); ok {
		exts.Activate(Extension)
	}
	// The dialog is the A2A contextId the client gave (step 5); a message
	// that names none starts a context of the server's: no dialog to check.
	dialog := msg.ContextID
	if dialog == "" && reqCtx.StoredTask != nil {
		dialog = reqCtx.ContextID
	}
	// The hop's span, a child of the delegator's trace context in the
	// message metadata when there is one; the executor runs in it. The
	// trace context decides nothing: the offer is checked as if it were
	// absent.
	ctx, span := e.cfg.Observe.StartHop(ctx, Transport, meta)
	defer span.End()
	rctx, end := e.cfg.Observe.StartReceive(ctx, Transport)
	in, err := e.cfg.Agent.Receive(rctx, octets, handoff.Host{Dialog: dialog, Peer: e.peer(ctx)})
	end(in, err)
	hopwork.LogReceived(ctx, e.cfg.Logger, Transport, in, err)
	span.Received(in, err)
	if err == nil && e.cfg.OnReceive != nil {
		e.cfg.OnReceive(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("handoff: offer refused: %w", err) // fail closed
	}
	hop := handoff.HopID("")
	if o := hopwork.Verified(in); o != nil {
		hop = o.Hop
	}

	switch {
	case in.Retransmission():
		// The answer to a pause of the hop's work resumes it (Approvals).
		if accepted, ok := e.resumable(reqCtx, in); ok {
			return e.run(ctx, reqCtx, q, in, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, reply(reqCtx, "resumed", &accepted)))
		}
		// Never processed again (HC-38): answer with what was sent before.
		if last, ok := in.LastStatus(); ok {
			e.sent(ctx, hop, last)
			return q.Write(ctx, reply(reqCtx, "retransmission: last status resent", &last))
		}
		if in.OwesAccepted() {
			st, err := e.cfg.Agent.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
			if err != nil {
				return err
			}
			e.sent(ctx, hop, st)
			return q.Write(ctx, reply(reqCtx, "retransmission: work taken", &st))
		}
		return q.Write(ctx, reply(reqCtx, "retransmission: not decided yet", nil))

	case in.Equivocation() != "":
		if in.Equivocation() == state.AnswerFinishFirst {
			e.running.Stop(in.Refused().Iss, hop) // stop the first offer's work if it runs
		}
		var st *handoff.Signed
		if in.Equivocation() == state.AnswerRejectFirst {
			signed, err := e.cfg.Agent.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: reason.Equivocation})
			if err != nil {
				return err
			}
			e.sent(ctx, hop, signed)
			st = &signed
		}
		return q.Write(ctx, final(reqCtx, a2a.TaskStateRejected, "rejected: equivocation", st))

	case !in.Accepted():
		// The reason code goes back; the detail stays here (HC-05, HC-65).
		var st *handoff.Signed
		if in.StatusDue() {
			signed, err := e.cfg.Agent.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
			if err != nil {
				return err
			}
			e.sent(ctx, hop, signed)
			st = &signed
		}
		return q.Write(ctx, final(reqCtx, a2a.TaskStateRejected, "rejected: "+string(in.Reason()), st))
	}

	st, err := e.cfg.Agent.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
	if err != nil {
		return err
	}
	e.sent(ctx, hop, st)
	if b, ok := binding.Of(in); ok {
		e.tasks.Bind(reqCtx.TaskID, b) // only its delegator's "canceled" cancels this task
	}
	return e.run(ctx, reqCtx, q, in, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, reply(reqCtx, "accepted", &st)))
}

// run writes working, which carries the hop's "accepted", and runs the
// wrapped executor of an accepted or resumed hop.
func (e *Executor) run(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, in *handoff.Received, working a2a.Event) error {
	hop := hopwork.Verified(in).Hop
	gctx, err := e.guarded(ctx, reqCtx, in)
	if err != nil {
		return q.Write(ctx, refusedAnswer(reqCtx, e.cfg.Approvals, err)) // the executor does not run
	}
	if err := q.Write(ctx, working); err != nil {
		return err
	}
	wctx, box, done := e.running.Start(context.WithValue(gctx, keyReceived, in), in)
	defer done()
	wctx = context.WithValue(wctx, keyOutcome, box)
	return e.cfg.Executor.Execute(wctx, reqCtx, &queue{Queue: q, e: e, in: in, hop: hop, box: box, reqCtx: reqCtx})
}

// Cancel implements a2asrv.AgentExecutor: a "canceled" in the request's
// metadata is verified and applied (HC-28, HC-55) before the wrapped
// executor's Cancel. It must name the hop the task runs, with that hop's
// offer, signed by that hop's delegator: a "canceled" for any other hop is
// refused with ErrForeignCancel before it is verified, the state of no hop
// changes and the task goes on.
func (e *Executor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	octets, err := carry.Status(reqCtx.Metadata)
	switch {
	case errors.Is(err, carry.ErrAbsent) && !e.cfg.RequireSignedCancel:
		return e.cfg.Executor.Cancel(ctx, reqCtx, q)
	case err != nil:
		return fmt.Errorf("%w: cancel task: %w", a2a.ErrInvalidParams, err)
	}
	own, err := binding.Check(octets, e.tasks.Hops(reqCtx.TaskID))
	if err != nil {
		return fmt.Errorf("%w: cancel task %s: %w", a2a.ErrInvalidParams, reqCtx.TaskID, err)
	}
	res, err := e.cfg.Agent.HandleStatus(ctx, octets)
	e.cfg.Observe.StatusReceived(ctx, Transport, res, err)
	hopwork.LogStatus(ctx, e.cfg.Logger, Transport, res, err)
	if err != nil {
		return err
	}
	if e.cfg.OnCancel != nil {
		e.cfg.OnCancel(ctx, res)
	}
	if err := binding.Confirm(res, own); err != nil {
		// Not the delegator's verified "canceled" of this task's hop: the
		// task goes on.
		return fmt.Errorf("%w: cancel task %s: the handoff status was refused: %w", a2a.ErrInvalidParams, reqCtx.TaskID, err)
	}
	if n := res.Notices; len(n) > 0 && e.cfg.OnNotices != nil {
		e.cfg.OnNotices(ctx, n)
	}
	if err := e.cfg.Executor.Cancel(context.WithValue(ctx, keyCancel, res), reqCtx, q); err != nil {
		return err
	}
	e.tasks.Unbind(reqCtx.TaskID)
	return nil
}

// CancelFromContext returns, in the wrapped executor's Cancel, the verified
// "canceled" that came with the request.
func CancelFromContext(ctx context.Context) (*handoff.StatusResult, bool) {
	r, ok := ctx.Value(keyCancel).(*handoff.StatusResult)
	return r, ok
}

// queue signs the status of each state change the wrapped executor writes.
type queue struct {
	eventqueue.Queue
	e      *Executor
	in     *handoff.Received
	hop    handoff.HopID
	box    *hopwork.Box
	reqCtx *a2asrv.RequestContext

	mu   sync.Mutex
	done bool // a terminal status was signed
}

func (w *queue) Write(ctx context.Context, ev a2a.Event) error {
	var st *a2a.TaskStatus
	switch ev := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		st = &ev.Status
	case *a2a.Task:
		st = &ev.Status
	}
	if st != nil {
		if err := w.sign(ctx, st); err != nil {
			return err
		}
	}
	if err := w.Queue.Write(ctx, ev); err != nil {
		return err
	}
	if st != nil && st.State.Terminal() {
		w.e.tasks.Unbind(w.reqCtx.TaskID) // a task in a terminal state is not canceled
	}
	return nil
}

// sign attaches the signed status of the hop state matching a task state
// (HC-29), when the rules let one be sent.
func (w *queue) sign(ctx context.Context, ts *a2a.TaskStatus) error {
	var otherwise hopwork.Outcome
	switch ts.State {
	case a2a.TaskStateCompleted:
		otherwise.Effect = state.EffectFull // unless the work reported less
	case a2a.TaskStateFailed:
		// EffectUnknown unless the work reported its outcome.
	default:
		return nil // the host protocol's own states (HC-29)
	}
	state, o := w.box.Final(otherwise)
	if state == "" {
		return nil // outcome unknown: no terminal status (HC-45)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	st, err := w.e.cfg.Agent.Reply(ctx, w.in, state, handoff.ReplyOptions{Effect: o.Effect, Reason: o.Reason, Refs: o.Refs})
	if err != nil {
		return err
	}
	w.done = true
	w.e.sent(ctx, w.hop, st)
	if ts.Message == nil {
		ts.Message = reply(w.reqCtx, string(state), nil)
	}
	if ts.Message.Metadata == nil {
		ts.Message.Metadata = map[string]any{}
	}
	carry.AttachStatus(ts.Message.Metadata, st)
	ts.Message.Extensions = addURI(ts.Message.Extensions)
	return nil
}

func (e *Executor) sent(ctx context.Context, hop handoff.HopID, st handoff.Signed) {
	if e.cfg.Observe == nil {
		return
	}
	state, reason := state.State(""), reason.Code("")
	if _, sts, err := handoff.InspectUnverified(st, handoff.Limits{}); err == nil && sts != nil {
		state, reason = sts.State, sts.Reason
	}
	e.cfg.Observe.StatusSent(ctx, Transport, hop, state, reason)
}

// reply is an agent Message in the request's context carrying st.
func reply(reqCtx *a2asrv.RequestContext, text string, st *handoff.Signed) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text})
	m.Metadata = map[string]any{}
	if st != nil {
		carry.AttachStatus(m.Metadata, *st)
		m.Extensions = []string{ExtensionURI}
	}
	return m
}

func final(reqCtx *a2asrv.RequestContext, state a2a.TaskState, text string, st *handoff.Signed) *a2a.TaskStatusUpdateEvent {
	ev := a2a.NewStatusUpdateEvent(reqCtx, state, reply(reqCtx, text, st))
	ev.Final = true
	return ev
}

func addURI(list []string) []string {
	for _, u := range list {
		if u == ExtensionURI {
			return list
		}
	}
	return append(list, ExtensionURI)
}

// TaskState returns the a2a-go TaskState nearest a hop state (HC-29), or
// TaskStateUnspecified for "expired", which has none.
func TaskState(s state.State) a2a.TaskState {
	name := strings.TrimPrefix(carry.TaskState(s), "TASK_STATE_")
	return a2a.TaskState(strings.ReplaceAll(strings.ToLower(name), "_", "-"))
}
