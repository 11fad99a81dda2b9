package a2a1hop

import (
	"context"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
)

// Approvals pauses a must-ask action of the evidence guard for its owner's
// approval in A2A's own terms: the wrapped executor yields AskApproval's
// event, which puts the task in TASK_STATE_INPUT_REQUIRED with the pending
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
// TASK_STATE_AUTH_REQUIRED alone authorizes nothing (A2A 1.0, section
// 7.6.4), and neither does TASK_STATE_INPUT_REQUIRED or the answer: the
// guard decides, from what its ledger records. An answer that declines,
// or comes once the offer expired, records nothing, the wrapped executor
// does not run, and the task ends TASK_STATE_FAILED with the hop's
// "failed", no refs, reason "policy": the work took no effect (HC-44). Any
// other refused answer (a state not sealed for this hop, a signed approval
// the guard refuses) records and runs nothing and leaves the task in
// TASK_STATE_INPUT_REQUIRED. A pause with no answer ends with the offer,
// whose exp bounds the state and every authority of the guard.
type Approvals struct {
	// Key seals the request states (HMAC-SHA256), at least 32 bytes. Keep
	// it across restarts for a pause to outlive one. Required.
	Key []byte
	// Guard returns the evidence guard of the hop a message runs, for a
	// host that builds its guards itself (nil with ServerConfig.Evidence,
	// which builds each from the package that came with the offer), over
	// a durable or shared authority ledger so that an approval recorded
	// before a restart is honoured after it. It is put in the wrapped
	// executor's context (evidence.GuardFromContext). Its Received is the
	// hop's with the accepted offer, on the message that resumes the task
	// too (handoff.Agent.Resume).
	Guard func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error)
	// Operator names the operator a local approval is recorded under. Nil
	// means the caller (ServerConfig.Peer, Authenticate); a local approval
	// with no operator is not recorded.
	Operator func(context.Context, *a2asrv.ExecutorContext) string
	// Now is the clock of the request states; nil means time.Now.
	Now func() time.Time
}

// core is a's SDK-neutral part. The pause is TASK_STATE_INPUT_REQUIRED,
// not TASK_STATE_AUTH_REQUIRED: a2a-go/v2 answers a blocking send at it
// while the execution goes on, waiting for an authorization out of band,
// so no message on the task could carry the answer.
func (a *Approvals) core() *a2acore.Approvals {
	if a == nil {
		return nil
	}
	return &a2acore.Approvals{Key: a.Key, Guard: a.Guard, Now: a.Now, Pause: a2acore.InputRequired}
}

// ApprovalKey is the status message's metadata key of a pending approval:
// action, owner, hop (the offer's handoff digest), operation_id,
// idempotency_key, item, and, when the paused call carried them, tool,
// args (the digest of its canonical arguments, evidence.ArgsDigest),
// arguments and key (the call's key, evidence.Call.Key); and state, the
// request state to answer with, sealed to that call.
const ApprovalKey = a2acore.ApprovalKey

// AnswerKey is the follow-up message's metadata key of the answer:
// "state", "decision" ("approve" or "deny") and "approval" (a signed
// approval, compact JWS).
const AnswerKey = a2acore.AnswerKey

// IdempotencyOutcomeKey is the metadata key, in the message that answers
// a message whose execution the wrapper did not run again, of the
// idempotency key contract's answer: "outcome" ("replayed", "in_flight"
// or "conflict"), "key", and for a replay "result", the recorded outcome
// of the execution that ran ({"state": the task state it left, "status":
// the hop's terminal status it signed, base64url}), and "error". A client
// tells the three apart by "outcome": "replayed", the execution ran once
// already (the same message, or another answer to the same pause);
// "in_flight", it runs now, retry later; "conflict", the hop's execution
// ran for another message. None changes the task.
const IdempotencyOutcomeKey = a2acore.IdempotencyOutcomeKey

// ErrApprovalState: the answer's request state was not sealed by this
// server for the message's hop, or it expired.
var ErrApprovalState = a2acore.ErrApprovalState

// ErrApprovalDeclined: the answer declined the approval.
var ErrApprovalDeclined = a2acore.ErrApprovalDeclined

// AskApproval returns the event that pauses the task for the approval err
// asks for (err wraps evidence.ErrApprovalRequired, or
// evidence.ErrApprovalMismatch: the operation's approval is for another
// call): a status update to TASK_STATE_INPUT_REQUIRED whose message
// carries the pending approval under ApprovalKey. It reports false for
// any other error, or outside an execution the wrapper serves with
// Approvals.
func AskApproval(ctx context.Context, ec *a2asrv.ExecutorContext, err error) (a2a.Event, bool) {
	p, ok := a2acore.Ask(ctx, err)
	if !ok {
		return nil, false
	}
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(p.Text))
	m.Metadata, m.Extensions = p.Meta, []string{ExtensionURI}
	return a2a.NewStatusUpdateEvent(ec, a2a.TaskState(p.State), m), true
}

// PendingApproval returns the pending approval a status message of
// AskApproval carries.
func PendingApproval(m *a2a.Message) (map[string]any, bool) {
	if m == nil {
		return nil, false
	}
	return a2acore.Pending(m.Metadata)
}

// Answer returns the follow-up message that answers the pause of task
// (TASK_STATE_INPUT_REQUIRED with a pending approval, in its status
// message or, when a later answer to another message stands there, in
// its history): on the same task and context, with decision ("approve" or
// "deny") and, when set, a signed approval. Send it with
// Client.Retransmit, which carries the hop's identical Handoff.
func Answer(task *a2a.Task, decision string, signed []byte) (*a2a.Message, error) {
	if task == nil {
		return nil, fmt.Errorf("%w: no task", handoff.ErrArgument)
	}
	meta, err := a2acore.Answer(view, task.Status.Message, task.History, decision, signed)
	if err != nil {
		return nil, err
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(decision))
	m.TaskID, m.ContextID, m.Metadata = task.ID, task.ContextID, meta
	return m, nil
}

// view is a message as the core reads it: its metadata, and whether it is
// the agent's.
func view(m *a2a.Message) (map[string]any, bool) {
	if m == nil {
		return nil, false
	}
	return m.Metadata, m.Role == a2a.MessageRoleAgent
}
