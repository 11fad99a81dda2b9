// Package a2a1hop makes every A2A 1.0 message that carries work a signed,
// checked hop of the draft "Signed Handoff Context for Agentic Dialogs"
// (section 6, HC-66), for servers and clients of a2a-go/v2
// (github.com/a2aproject/a2a-go/v2, A2A spec 1.0). The A2A 0.3 line is
// package a2a03hop; the carriage helpers both use are the root's package
// a2a. The Handoff travels as the draft says, whatever the SDK: in
// Message.metadata under ExtensionURI, with the URI in Message.extensions
// and in the A2A-Extensions service parameter.
//
// # Delegate (server)
//
// NewExecutor wraps an a2asrv.AgentExecutor. For each message it reads the
// Handoff and runs Agent.Receive before the wrapped executor is called:
//
//   - a message without a Handoff is refused with
//     a2a.ErrExtensionSupportRequired, unless ServerConfig.Optional;
//   - an offer that fails a check never reaches the executor: the task is
//     TASK_STATE_REJECTED with the signed "rejected" in its status message
//     when the draft asks for one (HC-30);
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
//     Each state change it yields gets the signed status of the matching
//     hop state in its status message (HC-29): TASK_STATE_COMPLETED
//     "completed", TASK_STATE_FAILED "failed" when the outcome is known
//     (Report). TASK_STATE_INPUT_REQUIRED, TASK_STATE_AUTH_REQUIRED and the
//     others stay in the host protocol: A2A 1.0 (section 7.6.4) does not let
//     TASK_STATE_AUTH_REQUIRED authorize anything by itself, and neither
//     does the handoff.
//
// With ServerConfig.Approvals, a must-ask action of the hop's evidence
// guard pauses the task in TASK_STATE_INPUT_REQUIRED for its owner's
// approval (AskApproval), and the answer on the same task resumes it
// (Answer); see Approvals.
//
// A Cancel Task request whose metadata carries the delegator's signed
// "canceled" is handed to Agent.HandleStatus before the wrapped executor's
// Cancel (HC-28, HC-66). It must name the hop the task runs, signed by that
// hop's delegator: any other is refused with ErrForeignCancel before it is
// verified, and the task goes on.
//
// Declare lists the extension in an AgentCard's capabilities.extensions,
// with the required flag the server chooses. a2acompat/a2av0 serves A2A 0.3
// clients from the same executor with the handoff intact.
//
// # Delegator (client)
//
// A Client is an a2aclient.CallInterceptor: it attaches the Handoff that
// WithHandoff put in the call's context, activates the extension in the
// A2A-Extensions service parameter, and hands every status found in
// responses and task updates to Agent.HandleStatus. Client.Send does all of
// it, with retransmissions per asking.Backoff, and tells how the delivery
// ended (Delivery.State, Refused, Reason); Client.Cancel sends the signed
// "canceled" in a Cancel Task request. An A2A client without the Client
// among its interceptors is an error (ErrNotIntercepted), never a result.
//
// # Trace context
//
// The Client puts the W3C trace context of the call's context in
// Message.metadata under "traceparent" and "tracestate", beside the
// Handoff; the Executor runs the wrapped executor in the hop's span, a
// child of that context (observe.StartHop). The trace context is not
// signed and decides nothing: the offer is checked as if it were absent.
package a2a1hop

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

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

// Extension is the handoff extension as the A2A SDK names extensions, for
// a2asrv.Extensions.Requested and Activate.
var Extension = &a2a.AgentExtension{URI: ExtensionURI, Description: "Signed Handoff Context (draft-handoff-01)"}

// Declare lists the handoff extension in card.Capabilities.Extensions, once,
// with required as the server chooses: true tells clients that a message
// without a Handoff is refused (ServerConfig.Optional false).
func Declare(card *a2a.AgentCard, required bool) {
	ext := *Extension
	ext.Required = required
	for i, e := range card.Capabilities.Extensions {
		if e.URI == ExtensionURI {
			card.Capabilities.Extensions[i] = ext
			return
		}
	}
	card.Capabilities.Extensions = append(card.Capabilities.Extensions, ext)
}

// ServerConfig configures the delegate's executor.
type ServerConfig struct {
	// Agent is the delegate. Required.
	Agent *handoff.Agent
	// Executor is the wrapped executor that does the work. Required.
	Executor a2asrv.AgentExecutor
	// Optional lets a message without a Handoff reach the executor, with no
	// offer in the context. By default it is refused with
	// a2a.ErrExtensionSupportRequired and the executor is not run; Declare
	// the extension required then.
	Optional bool
	// Peer returns the AgentID the transport authenticated the caller as;
	// the last status of a retransmitted hop goes back only to its
	// delegator (HC-39). Nil means the caller Authenticate or WithPeer
	// named, else the executor context's authenticated user.
	Peer func(context.Context, *a2asrv.ExecutorContext) handoff.AgentID
	// OnNotices receives the "canceled" statuses the agent signed for the
	// hops it passed on when a hop it received was canceled (HC-28).
	OnNotices func(context.Context, []handoff.Notice)
	// OnCancel, when set, is called with the outcome of every "canceled"
	// that arrived with a Cancel Task request and was handed to
	// Agent.HandleStatus, verified or refused.
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
	// with TASK_STATE_INPUT_REQUIRED (AskApproval); nil leaves both to the
	// executor.
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
// yield TASK_STATE_FAILED, or TASK_STATE_COMPLETED if the work took full
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

// CancelFromContext returns, in the wrapped executor's Cancel, the verified
// "canceled" that came with the request.
func CancelFromContext(ctx context.Context) (*handoff.StatusResult, bool) {
	r, ok := ctx.Value(keyCancel).(*handoff.StatusResult)
	return r, ok
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
// wrapped executor yields its final state. Without it TASK_STATE_COMPLETED
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
// request's context, for the handler next (a2asrv.NewJSONRPCHandler, or
// a2av0.NewJSONRPCHandler for A2A 0.3 clients). who returns the AgentID
// the request authenticates, or false to refuse it with 401.
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

func (e *Executor) peer(ctx context.Context, ec *a2asrv.ExecutorContext) handoff.AgentID {
	if e.cfg.Peer != nil {
		return e.cfg.Peer(ctx, ec)
	}
	if id, ok := ctx.Value(keyPeer).(handoff.AgentID); ok {
		return id
	}
	if ec.User != nil && ec.User.Authenticated {
		return handoff.AgentID(ec.User.Name)
	}
	return ""
}

// Execute implements a2asrv.AgentExecutor.
func (e *Executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		msg := ec.Message
		var meta map[string]any
		if msg != nil {
			meta = msg.Metadata
		}
		octets, err := carry.Handoff(meta)
		if err != nil {
			if errors.Is(err, carry.ErrAbsent) && e.cfg.Optional {
				for ev, err := range e.cfg.Executor.Execute(observe.Extract(ctx, meta), ec) {
					if !yield(ev, err) {
						return
					}
				}
				return
			}
			_, end := e.cfg.Observe.StartReceive(ctx, Transport)
			end(nil, nil)
			yield(nil, fmt.Errorf("%w: %s: %w", a2a.ErrExtensionSupportRequired, ExtensionURI, err))
			return
		}
		if exts, ok := a2asrv.ExtensionsFrom(ctx); ok {
			exts.Activate(Extension)
		}
		// The dialog is the A2A contextId the client gave (step 5); a
		// message that names none starts a context of the server's: no
		// dialog to check.
		dialog := msg.ContextID
		if dialog == "" && ec.StoredTask != nil {
			dialog = ec.ContextID
		}
		// The hop's span, a child of the delegator's trace context in the
		// message metadata when there is one; the executor runs in it. The
		// trace context decides nothing: the offer is checked as if it
		// were absent.
		ctx, span := e.cfg.Observe.StartHop(ctx, Transport, meta)
		defer span.End()
		rctx, end := e.cfg.Observe.StartReceive(ctx, Transport)
		in, err := e.cfg.Agent.Receive(rctx, octets, handoff.Host{Dialog: dialog, Peer: e.peer(ctx, ec)})
		end(in, err)
		hopwork.LogReceived(ctx, e.cfg.Logger, Transport, in, err)
		span.Received(in, err)
		if err == nil && e.cfg.OnReceive != nil {
			e.cfg.OnReceive(ctx, in)
		}
		if err != nil {
			yield(nil, fmt.Errorf("handoff: offer refused: %w", err)) // fail closed
			return
		}
		e.serve(ctx, ec, in, yield)
	}
}

func (e *Executor) serve(ctx context.Context, ec *a2asrv.ExecutorContext, in *handoff.Received, yield func(a2a.Event, error) bool) {
	hop := handoff.HopID("")
	if o := hopwork.Verified(in); o != nil {
		hop = o.Hop
	}
	fail := func(err error) { yield(nil, err) }
	switch {
	case in.Retransmission():
		// The answer to a pause of the hop's work resumes it (Approvals).
		if accepted, ok := e.resumable(ec, in); ok {
			e.run(ctx, ec, in, taskEvent(ec, a2a.TaskStateWorking, "resumed", &accepted), yield)
			return
		}
		// Never processed again (HC-38): answer with what was sent before.
		if last, ok := in.LastStatus(); ok {
			e.sent(ctx, hop, last)
			if ec.StoredTask != nil {
				// A message on a task that exists (a paused one): the task
				// keeps its state; A2A 1.0 takes no Message reply there.
				yield(a2a.NewStatusUpdateEvent(ec, ec.StoredTask.Status.State, reply(ec, "retransmission: last status resent", &last)), nil)
				return
			}
			yield(reply(ec, "retransmission: last status resent", &last), nil)
			return
		}
		if in.OwesAccepted() {
			st, err := e.cfg.Agent.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
			if err != nil {
				fail(err)
				return
			}
			e.sent(ctx, hop, st)
			yield(reply(ec, "retransmission: work taken", &st), nil)
			return
		}
		yield(reply(ec, "retransmission: not decided yet", nil), nil)
		return

	case in.Equivocation() != "":
		if in.Equivocation() == state.AnswerFinishFirst {
			e.running.Stop(in.Refused().Iss, hop) // stop the first offer's work if it runs
		}
		var st *handoff.Signed
		if in.Equivocation() == state.AnswerRejectFirst {
			signed, err := e.cfg.Agent.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: reason.Equivocation})
			if err != nil {
				fail(err)
				return
			}
			e.sent(ctx, hop, signed)
			st = &signed
		}
		yield(taskEvent(ec, a2a.TaskStateRejected, "rejected: equivocation", st), nil)
		return

	case !in.Accepted():
		// The reason code goes back; the detail stays here (HC-05, HC-65).
		var st *handoff.Signed
		if in.StatusDue() {
			signed, err := e.cfg.Agent.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
			if err != nil {
				fail(err)
				return
			}
			e.sent(ctx, hop, signed)
			st = &signed
		}
		yield(taskEvent(ec, a2a.TaskStateRejected, "rejected: "+string(in.Reason()), st), nil)
		return
	}

	st, err := e.cfg.Agent.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
	if err != nil {
		fail(err)
		return
	}
	e.sent(ctx, hop, st)
	if b, ok := binding.Of(in); ok {
		e.tasks.Bind(ec.TaskID, b) // only its delegator's "canceled" cancels this task
	}
	e.run(ctx, ec, in, taskEvent(ec, a2a.TaskStateWorking, "accepted", &st), yield)
}

// run yields working, which carries the hop's "accepted", and runs the
// wrapped executor of an accepted or resumed hop.
func (e *Executor) run(ctx context.Context, ec *a2asrv.ExecutorContext, in *handoff.Received, working a2a.Event, yield func(a2a.Event, error) bool) {
	hop := hopwork.Verified(in).Hop
	gctx, err := e.guarded(ctx, ec, in)
	if err != nil {
		yield(refusedAnswer(ec, e.cfg.Approvals, err), nil) // the executor does not run
		return
	}
	if !yield(working, nil) {
		return
	}
	inner := *ec
	if t, ok := working.(*a2a.Task); ok {
		// The task exists now: the wrapped executor does not make another.
		inner.StoredTask = t
	}
	wctx, box, done := e.running.Start(context.WithValue(gctx, keyReceived, in), in)
	defer done()
	wctx = context.WithValue(wctx, keyOutcome, box)
	s := &signer{e: e, in: in, hop: hop, box: box, ec: ec}
	for ev, err := range e.cfg.Executor.Execute(wctx, &inner) {
		if err == nil {
			err = s.sign(ctx, ev)
		}
		if !yield(ev, err) || err != nil {
			return
		}
	}
}

// Cancel implements a2asrv.AgentExecutor: a "canceled" in the request's
// metadata must name the task's hop; it is verified and applied (HC-28,
// HC-55) before the wrapped executor's Cancel.
func (e *Executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		octets, err := carry.Status(ec.Metadata)
		switch {
		case errors.Is(err, carry.ErrAbsent) && !e.cfg.RequireSignedCancel:
			e.cancel(ctx, ec, yield)
			return
		case err != nil:
			yield(nil, fmt.Errorf("%w: cancel task: %w", a2a.ErrInvalidParams, err))
			return
		}
		own, err := binding.Check(octets, e.tasks.Hops(ec.TaskID))
		if err != nil {
			yield(nil, fmt.Errorf("%w: cancel task %s: %w", a2a.ErrInvalidParams, ec.TaskID, err))
			return
		}
		res, err := e.cfg.Agent.HandleStatus(ctx, octets)
		e.cfg.Observe.StatusReceived(ctx, Transport, res, err)
		hopwork.LogStatus(ctx, e.cfg.Logger, Transport, res, err)
		if err != nil {
			yield(nil, err)
			return
		}
		if e.cfg.OnCancel != nil {
			e.cfg.OnCancel(ctx, res)
		}
		if err := binding.Confirm(res, own); err != nil {
			// Not the delegator's verified "canceled" of this task's hop:
			// the task goes on.
			yield(nil, fmt.Errorf("%w: cancel task %s: the handoff status was refused: %w", a2a.ErrInvalidParams, ec.TaskID, err))
			return
		}
		if n := res.Notices; len(n) > 0 && e.cfg.OnNotices != nil {
			e.cfg.OnNotices(ctx, n)
		}
		e.cancel(context.WithValue(ctx, keyCancel, res), ec, yield)
	}
}

func (e *Executor) cancel(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	for ev, err := range e.cfg.Executor.Cancel(ctx, ec) {
		if !yield(ev, err) || err != nil {
			return
		}
	}
	e.tasks.Unbind(ec.TaskID)
}

// signer attaches the signed status of each state change the wrapped
// executor yields.
type signer struct {
	e   *Executor
	in  *handoff.Received
	hop handoff.HopID
	box *hopwork.Box
	ec  *a2asrv.ExecutorContext

	done bool // a terminal status was signed
}

func (s *signer) sign(ctx context.Context, ev a2a.Event) error {
	var ts *a2a.TaskStatus
	switch ev := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		ts = &ev.Status
	case *a2a.Task:
		ts = &ev.Status
	default:
		return nil
	}
	if ts.State.Terminal() {
		defer s.e.tasks.Unbind(s.ec.TaskID) // a task in a terminal state is not canceled
	}
	var otherwise hopwork.Outcome
	switch ts.State {
	case a2a.TaskStateCompleted:
		otherwise.Effect = state.EffectFull // unless the work reported less
	case a2a.TaskStateFailed:
		// EffectUnknown unless the work reported its outcome.
	default:
		return nil // the host protocol's own states (HC-29)
	}
	state, o := s.box.Final(otherwise)
	if state == "" || s.done {
		return nil // outcome unknown (HC-45), or the terminal status was sent
	}
	st, err := s.e.cfg.Agent.Reply(ctx, s.in, state, handoff.ReplyOptions{Effect: o.Effect, Reason: o.Reason, Refs: o.Refs})
	if err != nil {
		return err
	}
	s.done = true
	s.e.sent(ctx, s.hop, st)
	if ts.Message == nil {
		ts.Message = reply(s.ec, string(state), nil)
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
func reply(ec *a2asrv.ExecutorContext, text string, st *handoff.Signed) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
	m.Metadata = map[string]any{}
	if st != nil {
		carry.AttachStatus(m.Metadata, *st)
		m.Extensions = []string{ExtensionURI}
	}
	return m
}

// state is the event that puts the task in ts with st in its status
// message: the task itself when it does not exist yet (the first event of
// an execution must be a Task or a Message), else a status update.
func taskEvent(ec *a2asrv.ExecutorContext, ts a2a.TaskState, text string, st *handoff.Signed) a2a.Event {
	m := reply(ec, text, st)
	if ec.StoredTask == nil {
		t := a2a.NewSubmittedTask(ec, ec.Message)
		t.Status = a2a.TaskStatus{State: ts, Message: m}
		return t
	}
	return a2a.NewStatusUpdateEvent(ec, ts, m)
}

func addURI(list []string) []string {
	for _, u := range list {
		if u == ExtensionURI {
			return list
		}
	}
	return append(list, ExtensionURI)
}

// TaskState returns the TASK_STATE_* value nearest a hop state (HC-29), or
// TaskStateUnspecified for "expired", which has none.
func TaskState(s state.State) a2a.TaskState {
	return a2a.TaskState(carry.TaskState(s))
}
