// Package a2a03hop makes every A2A 0.3 message that carries work a signed,
// checked hop of the draft "Signed Handoff Context for Agentic Dialogs"
// (section 6, HC-66), for servers and clients of the a2a-go SDK's v0.3 line
// (github.com/a2aproject/a2a-go v0.3.15). A2A 1.0, through a2a-go/v2, is
// package a2a1hop, in its own module. Both run one flow, so an offer gets
// the same checks, answers and signed statuses over either line; the
// carriage helpers both use are the root's package a2a.
//
// # Delegate (server)
//
// NewExecutor wraps an a2asrv.AgentExecutor. For each message it reads the
// Handoff from Message.metadata under ExtensionURI and runs Agent.Receive
// before anything of the wrapped executor runs. A message without a
// Handoff is answered with a message saying so (unless
// ServerConfig.Optional); an offer that fails a check rejects the task
// (rejected), with the signed "rejected" in its status message when the
// draft asks for one (HC-30); a retransmission is answered with a message
// carrying the identical octets of the hop's last status (HC-38, HC-39);
// an equivocating offer gets no status of its own (HC-53, HC-54). An
// accepted offer is answered "accepted" with the working state, and the
// wrapped executor runs with the Received in its context (FromContext):
// completed gets the signed "completed", failed the signed "failed" when
// the outcome is known (Report), in the status message (HC-29); the other
// states stay A2A's.
//
// # The package, the guard, and how a hop ends
//
// With ServerConfig.Evidence, the handoff package that travels beside the
// offer (this project's carriage, see the root's package a2a) is checked
// before anything of the executor runs; a package that fails, or is
// missing, rejects the task with "rejected", reason "policy" and the
// findings in its detail. One that passes gives the hop's guard, which the
// executor finds with evidence.GuardFromContext, as it finds the guard
// Approvals.Guard gives. The executor asks the guard before each effect;
// ended by the guard's refusal (its error, a *evidence.Refusal), before
// any effect, the task is failed with "failed", no refs, reason "policy"
// (the work took no effect, HC-44), so that the delegator resolves the hop
// and may offer the work again; an outcome the executor reported
// (Report) wins. An executor that took effects before it was refused
// reports them (EffectPartial, with refs).
//
// A hop's task may span several messages: a pause (input-required, the
// wrapper's for an approval or the executor's own) and the follow-up
// that answers it, which carries the hop's identical Handoff and
// package. The follow-up resumes the hop's work: the executor runs again
// with the hop's accepted offer in FromContext (handoff.Agent.Resume),
// the package checked again against it. The hop ends with the task's
// terminal state, whose status message carries the hop's terminal status,
// on whichever message it comes: an approval declined, or answered once
// the offer expired, ends it there with "failed" and no refs.
//
// A message on a task that exists changes that task only when it carries
// the verified offer of the hop the task runs, from that hop's delegator
// as the transport authenticated it; anything else is answered with a
// message, which changes no task, so that no stranger ends another
// party's paused task. The task's metadata names its hop (under
// ExtensionURI + "/hop"), with the task store, so that this holds after a
// restart.
//
// A Cancel Task request whose metadata carries the delegator's signed
// "canceled" is handed to Agent.HandleStatus before the wrapped executor's
// Cancel (HC-28, HC-66); the cancels the agent signs for the hops it passed
// on go to ServerConfig.OnNotices. The "canceled" must name the hop the
// task runs, signed by that hop's delegator: any other is refused with
// ErrForeignCancel before it is verified, and the task goes on. Authenticate
// (or WithPeer) names the caller the transport authenticated.
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
// With ServerConfig.Approvals, a must-ask call of the hop's evidence guard
// pauses the task in input-required for its owner's approval of exactly
// that call (AskApproval), and the answer on the same task resumes it,
// once (Answer); an auth-required state, like input-required, authorizes
// nothing: the guard decides. See Approvals.
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
// WithHandoff put in the call's context to Message.metadata, with the
// hop's package beside it (OfferParams.Deliver's, kept for every send of
// the hop until it is resolved), lists ExtensionURI in Message.extensions
// and in the A2A-Extensions service parameter, and hands every status
// found in responses and task updates to Agent.HandleStatus. A message
// with no Handoff that names the task of a hop this Client sent gets that
// hop's identical Handoff and package: it continues the hop. Client.Send does all of it, with retransmissions per
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
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

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

// Extension is the handoff extension as the A2A SDK names extensions.
var Extension = &a2a.AgentExtension{URI: ExtensionURI, Description: "Signed Handoff Context (draft-handoff-01)"}

// ServerConfig configures the delegate's executor.
type ServerConfig struct {
	// Agent is the delegate. Required.
	Agent *handoff.Agent
	// Executor is the wrapped executor that does the work. Required.
	Executor a2asrv.AgentExecutor
	// Optional lets a message without a Handoff reach the executor, with no
	// offer in the context, on a new task or one that runs no hop. By
	// default it is answered with a refusal and the executor is not run.
	Optional bool
	// Peer returns the AgentID the transport authenticated the caller as;
	// the last status of a retransmitted hop goes back only to its
	// delegator (HC-39), and only its delegator changes the hop's task.
	// Nil means the name of the call context's authenticated caller (see
	// Authenticate and WithPeer), else the name of the A2A call context's
	// authenticated user.
	Peer func(context.Context) handoff.AgentID
	// OnNotices receives the "canceled" statuses the agent signed for the
	// hops it passed on when a hop it received was canceled (HC-28).
	OnNotices func(context.Context, []handoff.Notice)
	// OnCancel, when set, is called with the outcome of every "canceled"
	// that arrived with a Cancel Task request, verified or refused.
	OnCancel func(context.Context, *handoff.StatusResult)
	// RequireSignedCancel refuses a Cancel Task request without a verified
	// "canceled"; by default one cancels the A2A task, not the hop.
	RequireSignedCancel bool
	// OnReceive, when set, hears the outcome of every Receive before the
	// offer is answered, for logs and audit.
	OnReceive func(context.Context, *handoff.Received)
	// Observe records spans and counters; nil records nothing.
	Observe *observe.Recorder
	// Logger, when set, hears of each delivery and each "canceled" handled: the outcome as the Agent decided
	// it (a slog.LogValuer), with the transport. Nil is silent. Give the
	// Agent a logger too (handoff.Config.Logger) for its own decisions.
	Logger *slog.Logger
	// Approvals, when set, pauses a must-ask action of the hop's evidence
	// guard for its owner's approval with input-required (AskApproval);
	// nil leaves it to the executor.
	Approvals *Approvals
	// Evidence, when set, checks the handoff package beside each offer
	// (the root's package a2a names its key) once the offer passed the
	// receive checks and before anything of the executor runs. A package
	// that fails, or is missing, makes the task rejected, its status
	// "rejected" with reason "policy" and the findings as detail; one that
	// passes gives the executor the hop's guard
	// (evidence.GuardFromContext). A follow-up that resumes a paused task
	// brings the package again, checked again against the same offer.
	// Without it no package is checked, and Approvals.Guard gives the
	// guard, if set.
	Evidence *evidence.HostConfig
}

// Approvals pauses a must-ask action of the evidence guard for its owner's
// approval in A2A's own terms: the wrapped executor writes AskApproval's
// event, which puts the task in input-required (A2A 1.0's
// TASK_STATE_INPUT_REQUIRED) with the pending
// approval (action, owner, hop, operation, and the call's tool, its
// arguments and their digest) and a request state sealed to that call in
// the status message's metadata under ApprovalKey. The delegator answers with a follow-up
// message on the same task (Answer) carrying the identical Handoff
// (Client.Retransmit) and the answer under AnswerKey: a local operator's
// approval, which the delegate records under the operator it
// authenticated (evidence.Guard.ApproveLocal), or a signed approval
// (evidence.Guard.ApproveSigned). The executor wrapper checks the state
// against the message's hop, takes the pause once in the guard's
// authority ledger, records the answer (the approval of exactly the
// paused call: its action, operation, tool and arguments' digest) and
// runs the wrapped executor again: the guard, asked again, allows that
// call once, and refuses another (evidence.ErrApprovalMismatch), for
// which the executor asks anew. The same answer again, or another answer
// to the same pause, replayed or concurrent, on any replica sharing the
// ledger, resumes nothing: it is answered under IdempotencyOutcomeKey
// ("replayed", or "in_flight" while the first runs), and the task stays
// as it is. The follow-up is the hop's work resumed, not its
// offer processed again (HC-38): only a hop still "accepted", on its own
// paused task, from its delegator, with a state this server sealed for it,
// resumes.
//
// auth-required alone authorizes nothing (A2A 1.0, section 7.6.4), and
// neither does input-required or the answer: the
// guard decides, from what its ledger records. A declined answer, or one
// sent after the offer expired, records nothing and runs nothing: the
// task fails with "failed" (no refs, reason "policy"; no effect, HC-44).
// An answer refused otherwise (a misbound or altered state, a signed
// approval the guard will not record) leaves the task paused. Without an
// answer the pause ends with the offer, whose exp bounds the state and
// every authority of the guard.
type Approvals struct {
	// Key seals the request states (HMAC-SHA256), at least 32 bytes; keep
	// it across restarts for a pause to outlive one. Required.
	Key []byte
	// Guard returns the evidence guard of the hop a message runs, put in
	// the wrapped executor's context (evidence.GuardFromContext), for a
	// host that builds its guards itself: leave it nil with
	// ServerConfig.Evidence, which builds each from the hop's package.
	// Build it over a durable or shared authority ledger, so that an
	// approval recorded before a restart is honoured after it. Its
	// Received is the hop's, with its accepted offer, on the first message
	// and on the one that resumes it (handoff.Agent.Resume).
	Guard func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error)
	// Operator names the operator a local approval is recorded under. Nil
	// means the caller (ServerConfig.Peer, Authenticate); a local approval
	// with no operator is not recorded.
	Operator func(context.Context, *a2asrv.RequestContext) string
	// Now is the clock of the request states; nil means time.Now.
	Now func() time.Time
	// AuthRequired pauses with auth-required instead of input-required,
	// for a host that asks for approvals so. It is still only a pause: the
	// answer is taken as with input-required, and the guard decides.
	AuthRequired bool
}

// core is a's SDK-neutral part.
func (a *Approvals) core() *a2acore.Approvals {
	if a == nil {
		return nil
	}
	pause := a2acore.InputRequired
	if a.AuthRequired {
		pause = a2acore.AuthRequired
	}
	return &a2acore.Approvals{Key: a.Key, Guard: a.Guard, Now: a.Now, Pause: pause}
}

// Executor is the wrapping a2asrv.AgentExecutor.
type Executor struct {
	cfg  ServerConfig
	core *a2acore.Server
}

// The errors of the delegate's side.
var (
	// ErrEquivocated is the cause of the context of an execution stopped
	// because its delegator signed another offer under the same hop
	// (HC-54): the executor should stop if it can, then report its outcome
	// (Report) and write failed, or completed if the work took full
	// effect; "failed" then carries the reason "equivocation".
	ErrEquivocated = a2acore.ErrEquivocated
	// ErrForeignCancel is the error of a Cancel Task request whose
	// "canceled" names another hop than the task's: a "canceled" captured
	// from one task and replayed against another. The task goes on (HC-28,
	// HC-55).
	ErrForeignCancel = a2acore.ErrForeignCancel
	// ErrApprovalState: the answer's request state was not sealed by this
	// server for the message's hop, or it expired.
	ErrApprovalState = a2acore.ErrApprovalState
	// ErrApprovalDeclined: the answer declined the approval.
	ErrApprovalDeclined = a2acore.ErrApprovalDeclined
)

var _ a2asrv.AgentExecutor = (*Executor)(nil)

// NewExecutor returns the executor wrapping cfg.Executor.
func NewExecutor(cfg ServerConfig) (*Executor, error) {
	core, err := a2acore.NewServer(a2acore.ServerConfig{Agent: cfg.Agent, Executor: cfg.Executor, Optional: cfg.Optional,
		OnNotices: cfg.OnNotices, OnCancel: cfg.OnCancel, RequireSignedCancel: cfg.RequireSignedCancel,
		OnReceive: cfg.OnReceive, Observe: cfg.Observe, Logger: cfg.Logger, Approvals: cfg.Approvals.core(), Evidence: cfg.Evidence})
	if err != nil {
		return nil, err
	}
	return &Executor{cfg: cfg, core: core}, nil
}

// FromContext returns the hop's Received in the wrapped executor: its
// Offer is the verified offer the hop was accepted with, on the first
// message and on a follow-up that resumes the work
// (handoff.Agent.Resume); a handler the wrapper runs never sees it nil.
func FromContext(ctx context.Context) (*handoff.Received, bool) { return a2acore.FromContext(ctx) }

// Outcome is what the wrapped executor knows of its work's effect
// ("Knowing the Outcome" in the draft).
type Outcome struct {
	// Effect decides the status sent with completed or failed: EffectFull
	// "completed"; EffectNone and EffectPartial "failed"; EffectUnknown
	// none (HC-25, HC-45).
	Effect state.Effect
	Reason reason.Code
	Refs   []ref.Ref
}

// Report tells the executor wrapper what the work achieved, before the
// wrapped executor writes its final state. Without it completed counts as
// EffectFull, failed as EffectUnknown (no status), and an Execute that
// returns a refusal of the hop's guard as EffectNone ("failed" with no
// refs). In the wrapped executor's Cancel of a hop its delegator
// canceled, it reports the canceled work's outcome (see "The outcome of a
// canceled hop"). It reports false outside a wrapped execution or Cancel.
func Report(ctx context.Context, o Outcome) bool { return a2acore.Report(ctx, a2acore.Outcome(o)) }

// Authenticate returns a handler that puts the caller's identity in the
// request's context, for the handler next (a2asrv.NewJSONRPCHandler). who
// returns the AgentID the request authenticates, or false to refuse it with
// 401. The SDK's JSON-RPC handler makes the A2A call context itself (its
// service parameters come from the request's headers), so the identity
// travels beside it and Peer reads it first.
func Authenticate(next http.Handler, who func(*http.Request) (handoff.AgentID, bool)) http.Handler {
	return a2acore.Authenticate(next, who)
}

// WithPeer returns a context naming the AgentID the transport authenticated
// the caller as, for a server that authenticates in its own way.
func WithPeer(ctx context.Context, id handoff.AgentID) context.Context {
	return a2acore.WithPeer(ctx, id)
}

// Execute implements a2asrv.AgentExecutor.
func (e *Executor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return e.core.Execute(ctx, &exchange{e: e, reqCtx: reqCtx, q: q})
}

// Cancel implements a2asrv.AgentExecutor: a "canceled" in the request's
// metadata is verified and applied (HC-28, HC-55) before the wrapped
// executor's Cancel. It must name the hop the task runs, with that hop's
// offer, signed by that hop's delegator: a "canceled" for any other hop is
// refused with ErrForeignCancel before it is verified, the state of no hop
// changes and the task goes on.
func (e *Executor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	r := a2acore.CancelRequest{Meta: reqCtx.Metadata, TaskID: string(reqCtx.TaskID), Task: taskOf(reqCtx.StoredTask), Invalid: a2a.ErrInvalidParams}
	return e.core.Cancel(ctx, r, func(ctx context.Context, w *a2acore.Work) error {
		if w == nil {
			return e.cfg.Executor.Cancel(ctx, reqCtx, q)
		}
		return e.cfg.Executor.Cancel(ctx, reqCtx, &queue{Queue: q, w: w, reqCtx: reqCtx})
	})
}

// CancelFromContext returns, in the wrapped executor's Cancel, the verified
// "canceled" that came with the request.
func CancelFromContext(ctx context.Context) (*handoff.StatusResult, bool) {
	return a2acore.CancelFromContext(ctx)
}

// exchange is one request, as the core sees it: its events are written to
// the queue.
type exchange struct {
	e      *Executor
	reqCtx *a2asrv.RequestContext
	q      eventqueue.Queue
}

var _ a2acore.Exchange = (*exchange)(nil)

func (x *exchange) Message() (map[string]any, string) {
	if m := x.reqCtx.Message; m != nil {
		return m.Metadata, m.ContextID
	}
	return nil, ""
}

func (x *exchange) Task() *a2acore.Task { return taskOf(x.reqCtx.StoredTask) }

func taskOf(t *a2a.Task) *a2acore.Task {
	if t == nil {
		return nil
	}
	return &a2acore.Task{ContextID: t.ContextID, State: a2acore.From03(string(t.Status.State)), Meta: t.Metadata,
		Asked: a2acore.Asked(view, t.Status.Message, t.History) != ""}
}

func (x *exchange) Activate(ctx context.Context) {
	if exts, ok := a2asrv.ExtensionsFrom(ctx); ok {
		exts.Activate(Extension)
	}
}

func (x *exchange) Peer(ctx context.Context) handoff.AgentID {
	if x.e.cfg.Peer != nil {
		return x.e.cfg.Peer(ctx)
	}
	if id, ok := a2acore.PeerOf(ctx); ok {
		return id
	}
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil && cc.User.Authenticated() {
		return handoff.AgentID(cc.User.Name())
	}
	return ""
}

func (x *exchange) Operator(ctx context.Context) (string, bool) {
	if a := x.e.cfg.Approvals; a != nil && a.Operator != nil {
		return a.Operator(ctx, x.reqCtx), true
	}
	return "", false
}

// Reply writes a Message, which changes no task in a2a-go v0.3.
func (x *exchange) Reply(ctx context.Context, text string, st *handoff.Signed, meta map[string]any) error {
	m := reply(x.reqCtx, text, st)
	for k, v := range meta {
		m.Metadata[k] = v
	}
	return x.q.Write(ctx, m)
}

func (x *exchange) Parts() []byte {
	if m := x.reqCtx.Message; m != nil {
		if b, err := json.Marshal(m.Parts); err == nil {
			return b
		}
	}
	return nil
}

// SetState writes a status update, final for any state but working.
func (x *exchange) SetState(ctx context.Context, s, text string, st *handoff.Signed, meta map[string]any) error {
	ev := a2a.NewStatusUpdateEvent(x.reqCtx, a2a.TaskState(a2acore.V03(s)), reply(x.reqCtx, text, st))
	ev.Final, ev.Metadata = s != a2acore.Working, meta
	return x.q.Write(ctx, ev)
}

func (x *exchange) Refuse(ctx context.Context, text string, _ error) error {
	return x.Reply(ctx, text, nil, nil)
}

func (x *exchange) Plain(ctx context.Context) error {
	return x.e.cfg.Executor.Execute(ctx, x.reqCtx, x.q)
}

func (x *exchange) Run(ctx context.Context, w *a2acore.Work) error {
	return x.e.cfg.Executor.Execute(ctx, x.reqCtx, &queue{Queue: x.q, w: w, reqCtx: x.reqCtx})
}

// queue signs the status of each state change the wrapped executor writes.
type queue struct {
	eventqueue.Queue
	w      *a2acore.Work
	reqCtx *a2asrv.RequestContext
}

func (q *queue) Write(ctx context.Context, ev a2a.Event) error {
	var ts *a2a.TaskStatus
	switch ev := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		ts = &ev.Status
	case *a2a.Task:
		ev.Metadata = q.w.Bind(ev.Metadata)
		ts = &ev.Status
	}
	if ts != nil {
		st, hs, err := q.w.Status(a2acore.From03(string(ts.State)))
		if err != nil {
			return err
		}
		if st != nil && ts.Message == nil {
			ts.Message = reply(q.reqCtx, string(hs), nil)
		}
		if st != nil {
			ts.Message.Metadata, ts.Message.Extensions = a2acore.Attach(ts.Message.Metadata, ts.Message.Extensions, *st)
		}
	}
	return q.Queue.Write(ctx, ev)
}

// reply is an agent Message in the request's context carrying st.
func reply(reqCtx *a2asrv.RequestContext, text string, st *handoff.Signed) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text})
	m.Metadata = map[string]any{}
	if st != nil {
		m.Metadata, m.Extensions = a2acore.Attach(m.Metadata, nil, *st)
	}
	return m
}

// TaskState returns the a2a-go TaskState nearest a hop state (HC-29), or
// TaskStateUnspecified for "expired", which has none.
func TaskState(s state.State) a2a.TaskState {
	return a2a.TaskState(a2acore.V03(a2acore.TaskState(s)))
}
