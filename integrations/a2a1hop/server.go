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
//   - a message without a Handoff that would start a task is refused with
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
// A message on a task that exists changes that task only when it carries
// the verified offer of the hop the task runs, from that hop's delegator
// as the transport authenticated it (as a Cancel Task request must):
// anything else (no Handoff, a malformed one, a refused or foreign offer,
// another hop's) is answered with a status update that keeps the task's
// state, so that no stranger ends another party's paused task. The task's
// metadata names its hop (under ExtensionURI + "/hop"), with the task
// store, so that this holds after a restart.
//
// With ServerConfig.Approvals, a must-ask call of the hop's evidence guard
// pauses the task in TASK_STATE_INPUT_REQUIRED for its owner's approval
// of exactly that call (AskApproval), and the answer on the same task
// resumes it, once (Answer); see Approvals.
//
// # The package, the guard, and how a hop ends
//
// ServerConfig.Evidence checks the handoff package that comes beside the
// offer (this project's carriage, see the root's package a2a) once the
// offer passed the receive checks, before the executor runs: a package
// that fails, or none, makes the task TASK_STATE_REJECTED with "rejected",
// reason "policy", the findings in its detail. A package that passes
// gives the hop's guard; the executor finds it, or the one
// Approvals.Guard gives, with evidence.GuardFromContext, and asks it
// before each effect. An execution that ends with the guard's refusal as
// its error (a *evidence.Refusal), before any effect, ends the task in
// TASK_STATE_FAILED with "failed", no refs and reason "policy": the work
// took no effect (HC-44), the delegator resolves the hop and may offer
// the work again. An outcome reported with Report wins: an executor that
// did something before it was refused says so (EffectPartial, refs).
//
// The task of a hop may span several messages: a pause in
// TASK_STATE_INPUT_REQUIRED (AskApproval's, or the executor's own, as
// ADK's tool confirmation is) and the follow-up that answers it, with the
// hop's identical Handoff and package. The follow-up runs the executor
// again as the hop's work resumed: FromContext gives the hop's accepted
// offer (handoff.Agent.Resume) and the package is checked again. The hop
// ends with the task's terminal state, whose status message carries its
// terminal status, whichever message brings it: an approval declined, or
// answered once the offer expired, ends it with "failed" and no refs.
//
// A Cancel Task request whose metadata carries the delegator's signed
// "canceled" is handed to Agent.HandleStatus before the wrapped executor's
// Cancel (HC-28, HC-66). It must name the hop the task runs, signed by that
// hop's delegator: any other is refused with ErrForeignCancel before it is
// verified, and the task goes on.
//
// # The outcome of a canceled hop
//
// A verified "canceled" is recorded in the authority ledger as the hop's
// final disposition (with ServerConfig.Evidence), its first terminal
// state, so that no guard of the hop takes an effect after it. The
// delegate still owes the outcome of the hop's work (section 4: a
// "canceled" does not show that the work took no effect), which the
// wrapper signs on the task state the wrapped executor's Cancel sets
// (its TASK_STATE_CANCELED status message: the Cancel Task request
// returns it, and a retransmission gets the same octets):
//
//   - the outcome the executor's Cancel reports with Report, which works
//     there as in Execute: EffectNone "failed" with no refs, EffectPartial
//     "failed" with the refs of what took effect, EffectFull "completed";
//   - else, when the ledger holds no effect of the hop
//     (authority.HopRecord.Effects) and none can be taken after the
//     "canceled": "failed", no refs, the work took none; it is signed
//     even if the executor's Cancel sets no task state;
//   - else none: the outcome is not known, and the hop stays "accepted"
//     (HC-25), unresolved at the delegator (HC-40), until the executor,
//     or an operator, learns it and signs it (Agent.ReplyHop). So does a
//     hop with no ledger at hand (Approvals.Guard alone: the wrapper
//     builds no guard for a "canceled").
//
// The ledger knows the effects asked of the hop's guard under a name
// (evidence.Guard.Do, Claim, or Authorize with an operation id or
// idempotency key, and every tool call of adkhop's plugin); an executor
// that takes an effect without asking the guard so reports its outcome
// itself.
//
// Declare lists the extension in an AgentCard's capabilities.extensions,
// with the required flag the server chooses. a2acompat/a2av0 serves A2A 0.3
// clients from the same executor with the handoff intact.
//
// # Each execution once
//
// With a guard (ServerConfig.Evidence's, or Approvals.Guard's), each
// execution of the wrapped executor is the hop's unit of work under the
// idempotency key contract (evidence.Guard.Once), claimed in the guard's
// authority ledger before the executor runs: the execution for the
// message that carried the offer under the hop (its offer's handoff
// digest, with the digest of the message's parts as the call's
// arguments), the one for an answer to a pause of AskApproval under that
// pause, once. The
// reason: an A2A executor is an agent, whose effects are its own calls
// (each asks the guard, with its tool and arguments, or is an ADK
// agent's tool call, which adkhop runs once under its key); what the
// wrapper knows is the message, and it runs the executor once per
// message, on any replica sharing the ledger, whatever its replay and
// task stores. Another presentation of the same execution changes no
// task: it is answered with a message that carries the contract's answer
// under IdempotencyOutcomeKey. The hop's acknowledgement and final
// disposition are recorded in the ledger as the wrapper signs them.
//
// # Delegator (client)
//
// A Client is an a2aclient.CallInterceptor: it attaches the Handoff that
// WithHandoff put in the call's context, and the hop's package beside it
// (OfferParams.Deliver's, kept for every send of the hop until it is
// resolved), activates the extension in the A2A-Extensions service
// parameter, and hands every status found in responses and task updates
// to Agent.HandleStatus. A message without a Handoff that names the task
// of a hop it sent (ADK's remote agent's answer to an input request)
// continues that hop: it gets the hop's identical Handoff and package. Client.Send does all of
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
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/observe"
)

// ExtensionURI is the A2A extension URI and metadata key of the draft.
const ExtensionURI = carry.ExtensionURI

// Transport is the name recorded in spans and metrics.
const Transport = a2acore.Transport

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
	// offer in the context, on a new task or one that runs no hop. By
	// default it is refused with a2a.ErrExtensionSupportRequired and the
	// executor is not run; Declare the extension required then.
	Optional bool
	// Peer returns the AgentID the transport authenticated the caller as:
	// the last status of a retransmitted hop goes back only to its
	// delegator (HC-39), and only the delegator changes its hop's task.
	// Nil means the caller Authenticate or WithPeer named, else the
	// executor context's authenticated user.
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
	// Logger, when set, hears of each delivery and each "canceled"
	// handled: the outcome as the Agent decided it (a slog.LogValuer),
	// with the transport. Nil is silent; the Agent has a logger of its
	// own (handoff.Config.Logger).
	Logger *slog.Logger
	// Approvals, when set, pauses a must-ask action of the hop's evidence
	// guard for its owner's approval with TASK_STATE_INPUT_REQUIRED
	// (AskApproval); nil leaves it to the executor.
	Approvals *Approvals
	// Evidence, when set, checks the handoff package that comes beside
	// each offer (under ExtensionURI + "/package", see the root's package
	// a2a) right after the offer passed the receive checks, before the
	// executor runs: a package that fails, or none, is answered
	// TASK_STATE_REJECTED with "rejected", reason "policy" and the
	// findings in the status detail; one that passes gives the hop's
	// guard, in the executor's context (evidence.GuardFromContext). The
	// message that resumes a paused task carries the package again, and is
	// checked again against the same offer. Nil checks no package: the
	// guard, if any, is Approvals.Guard's.
	Evidence *evidence.HostConfig
}

// Executor is the wrapping a2asrv.AgentExecutor.
type Executor struct {
	cfg  ServerConfig
	core *a2acore.Server
}

// ErrEquivocated is the cause of the context of an execution stopped
// because its delegator signed another offer under the same hop (HC-54):
// the executor should stop if it can, then report its outcome (Report) and
// yield TASK_STATE_FAILED, or TASK_STATE_COMPLETED if the work took full
// effect; "failed" then carries the reason "equivocation".
var ErrEquivocated = a2acore.ErrEquivocated

// ErrForeignCancel is the error of a Cancel Task request whose "canceled"
// names another hop than the task's: a "canceled" captured from one task
// and replayed against another. The task goes on (HC-28, HC-55).
var ErrForeignCancel = a2acore.ErrForeignCancel

var _ a2asrv.AgentExecutor = (*Executor)(nil)

// NewExecutor returns the executor wrapping cfg.Executor.
func NewExecutor(cfg ServerConfig) (*Executor, error) {
	e := &Executor{cfg: cfg}
	var err error
	e.core, err = a2acore.NewServer(a2acore.ServerConfig{Agent: cfg.Agent, Executor: cfg.Executor, Optional: cfg.Optional,
		OnNotices: cfg.OnNotices, OnCancel: cfg.OnCancel, RequireSignedCancel: cfg.RequireSignedCancel,
		OnReceive: cfg.OnReceive, Observe: cfg.Observe, Logger: cfg.Logger, Approvals: cfg.Approvals.core(), Evidence: cfg.Evidence})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// FromContext returns the Received of the hop the wrapped executor
// serves, whose Offer is the verified, accepted offer: on the message that
// carried it first and on the follow-up that resumes the hop's work
// (handoff.Agent.Resume), never nil in an execution the wrapper runs.
func FromContext(ctx context.Context) (*handoff.Received, bool) { return a2acore.FromContext(ctx) }

// CancelFromContext returns, in the wrapped executor's Cancel, the verified
// "canceled" that came with the request.
func CancelFromContext(ctx context.Context) (*handoff.StatusResult, bool) {
	return a2acore.CancelFromContext(ctx)
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
// counts as EffectFull, TASK_STATE_FAILED as EffectUnknown: no status, and
// an execution that ends with a refusal of the hop's guard as its error
// as EffectNone: "failed" with no refs. In the wrapped executor's Cancel
// of a hop its delegator canceled, it reports the canceled work's outcome
// (see "The outcome of a canceled hop"). It reports false outside a
// wrapped execution or Cancel.
func Report(ctx context.Context, o Outcome) bool { return a2acore.Report(ctx, a2acore.Outcome(o)) }

// Authenticate returns a handler that puts the caller's identity in the
// request's context, for the handler next (a2asrv.NewJSONRPCHandler, or
// a2av0.NewJSONRPCHandler for A2A 0.3 clients). who returns the AgentID
// the request authenticates, or false to refuse it with 401.
func Authenticate(next http.Handler, who func(*http.Request) (handoff.AgentID, bool)) http.Handler {
	return a2acore.Authenticate(next, who)
}

// WithPeer returns a context naming the AgentID the transport authenticated
// the caller as, for a server that authenticates in its own way.
func WithPeer(ctx context.Context, id handoff.AgentID) context.Context {
	return a2acore.WithPeer(ctx, id)
}

// PeerFromContext returns, in the wrapped executor, the caller the
// transport authenticated for the message it serves (ServerConfig.Peer's
// answer, else Authenticate's or WithPeer's, else the SDK's authenticated
// user): on the message that resumes a hop's task, the hop's delegator,
// whom alone the wrapper lets change it. False when no one was
// authenticated.
func PeerFromContext(ctx context.Context) (handoff.AgentID, bool) {
	id, ok := a2acore.PeerOf(ctx)
	return id, ok && id != ""
}

// errStopped ends an execution whose consumer stopped, or whose error was
// yielded already.
var errStopped = errors.New("a2a1hop: the execution's events are no longer consumed")

// Execute implements a2asrv.AgentExecutor.
func (e *Executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return e.serve(ec, func(x *exchange) error { return e.core.Execute(ctx, x) })
}

// Cancel implements a2asrv.AgentExecutor: a "canceled" in the request's
// metadata must name the task's hop; it is verified and applied (HC-28,
// HC-55) before the wrapped executor's Cancel.
func (e *Executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return e.serve(ec, func(x *exchange) error {
		r := a2acore.CancelRequest{Meta: ec.Metadata, TaskID: string(ec.TaskID), Task: taskOf(ec.StoredTask), Invalid: a2a.ErrInvalidParams}
		return e.core.Cancel(ctx, r, func(ctx context.Context, w *a2acore.Work) error { return x.forward(e.cfg.Executor.Cancel(ctx, ec), w) })
	})
}

func (e *Executor) serve(ec *a2asrv.ExecutorContext, f func(*exchange) error) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if err := f(&exchange{e: e, ec: ec, yield: yield}); err != nil && !errors.Is(err, errStopped) {
			yield(nil, err)
		}
	}
}

// exchange is one request, as the core sees it: its events are yielded.
type exchange struct {
	e     *Executor
	ec    *a2asrv.ExecutorContext
	yield func(a2a.Event, error) bool
	made  *a2a.Task // the task this execution made
}

var _ a2acore.Exchange = (*exchange)(nil)

func (x *exchange) Message() (map[string]any, string) {
	if m := x.ec.Message; m != nil {
		return m.Metadata, m.ContextID
	}
	return nil, ""
}

func (x *exchange) Task() *a2acore.Task { return taskOf(x.ec.StoredTask) }

func taskOf(t *a2a.Task) *a2acore.Task {
	if t == nil {
		return nil
	}
	return &a2acore.Task{ContextID: t.ContextID, State: string(t.Status.State), Meta: t.Metadata,
		Asked: a2acore.Asked(view, t.Status.Message, t.History) != ""}
}

func (x *exchange) Activate(ctx context.Context) {
	if exts, ok := a2asrv.ExtensionsFrom(ctx); ok {
		exts.Activate(Extension)
	}
}

func (x *exchange) Peer(ctx context.Context) handoff.AgentID {
	if x.e.cfg.Peer != nil {
		return x.e.cfg.Peer(ctx, x.ec)
	}
	if id, ok := a2acore.PeerOf(ctx); ok {
		return id
	}
	if u := x.ec.User; u != nil && u.Authenticated {
		return handoff.AgentID(u.Name)
	}
	return ""
}

func (x *exchange) Operator(ctx context.Context) (string, bool) {
	if a := x.e.cfg.Approvals; a != nil && a.Operator != nil {
		return a.Operator(ctx, x.ec), true
	}
	return "", false
}

func (x *exchange) emit(ev a2a.Event) error {
	if !x.yield(ev, nil) {
		return errStopped
	}
	return nil
}

func (x *exchange) stored() *a2a.Task {
	if x.made != nil {
		return x.made
	}
	return x.ec.StoredTask
}

// Reply yields a Message, or, on a task that exists, a status update that
// keeps the task's state: A2A 1.0 takes no Message there.
func (x *exchange) Reply(_ context.Context, text string, st *handoff.Signed, meta map[string]any) error {
	m := reply(x.ec, text, st)
	for k, v := range meta {
		m.Metadata[k] = v
	}
	if t := x.stored(); t != nil {
		return x.emit(a2a.NewStatusUpdateEvent(x.ec, t.Status.State, m))
	}
	return x.emit(m)
}

func (x *exchange) Parts() []byte {
	if m := x.ec.Message; m != nil {
		if b, err := json.Marshal(m.Parts); err == nil {
			return b
		}
	}
	return nil
}

// SetState yields the task itself when it does not exist yet (the first
// event of an execution must be a Task or a Message), else a status
// update.
func (x *exchange) SetState(_ context.Context, s, text string, st *handoff.Signed, meta map[string]any) error {
	m := reply(x.ec, text, st)
	if x.stored() == nil {
		x.made = a2a.NewSubmittedTask(x.ec, x.ec.Message)
		x.made.Status, x.made.Metadata = a2a.TaskStatus{State: a2a.TaskState(s), Message: m}, meta
		return x.emit(x.made)
	}
	ev := a2a.NewStatusUpdateEvent(x.ec, a2a.TaskState(s), m)
	ev.Metadata = meta
	return x.emit(ev)
}

func (x *exchange) Refuse(_ context.Context, _ string, err error) error {
	return fmt.Errorf("%w: %s: %w", a2a.ErrExtensionSupportRequired, ExtensionURI, err)
}

func (x *exchange) Plain(ctx context.Context) error {
	return x.forward(x.e.cfg.Executor.Execute(ctx, x.ec), nil)
}

// Run runs the wrapped executor on the task that exists now: it does not
// make another.
func (x *exchange) Run(ctx context.Context, w *a2acore.Work) error {
	inner := *x.ec
	inner.StoredTask = x.stored()
	return x.forward(x.e.cfg.Executor.Execute(ctx, &inner), w)
}

// forward yields the events of the wrapped executor, each with the status
// of the task state it sets when w is set. The executor's own error is
// returned, not yielded: the core may end the hop with it (a refusal of
// the hop's guard), and serve yields it otherwise.
func (x *exchange) forward(events iter.Seq2[a2a.Event, error], w *a2acore.Work) error {
	for ev, err := range events {
		if err != nil && ev == nil {
			return err
		}
		if err == nil && w != nil {
			err = sign(w, x.ec, ev)
		}
		if !x.yield(ev, err) || err != nil {
			return errStopped
		}
	}
	return nil
}

// sign attaches the signed status of the task state an event sets (HC-29).
func sign(w *a2acore.Work, ec *a2asrv.ExecutorContext, ev a2a.Event) error {
	var ts *a2a.TaskStatus
	switch ev := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		ts = &ev.Status
	case *a2a.Task:
		ev.Metadata = w.Bind(ev.Metadata)
		ts = &ev.Status
	default:
		return nil
	}
	st, hs, err := w.Status(string(ts.State))
	if st == nil || err != nil {
		return err
	}
	if ts.Message == nil {
		ts.Message = reply(ec, string(hs), nil)
	}
	ts.Message.Metadata, ts.Message.Extensions = a2acore.Attach(ts.Message.Metadata, ts.Message.Extensions, *st)
	return nil
}

// reply is an agent Message in the request's context carrying st.
func reply(ec *a2asrv.ExecutorContext, text string, st *handoff.Signed) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
	m.Metadata = map[string]any{}
	if st != nil {
		m.Metadata, m.Extensions = a2acore.Attach(m.Metadata, nil, *st)
	}
	return m
}

// TaskState returns the TASK_STATE_* value nearest a hop state (HC-29), or
// TaskStateUnspecified for "expired", which has none.
func TaskState(s state.State) a2a.TaskState {
	return a2a.TaskState(a2acore.TaskState(s))
}
