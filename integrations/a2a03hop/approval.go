package a2a03hop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/internal/pause"
)

// Approvals pauses a must-ask action of the evidence guard for its owner's
// approval in A2A's own terms: the wrapped executor writes AskApproval's
// event, which puts the task in input-required (A2A 1.0's
// TASK_STATE_INPUT_REQUIRED) with the pending
// approval (action, owner, hop, operation) and a request state bound to
// the hop's offer digest and the operation in the status message's
// metadata under ApprovalKey. The delegator answers with a follow-up
// message on the same task (Answer) carrying the identical Handoff
// (Client.Retransmit) and the answer under AnswerKey: a local operator's
// approval, which the delegate records under the operator it
// authenticated (evidence.Guard.ApproveLocal), or a signed approval
// (evidence.Guard.ApproveSigned). The executor wrapper checks the state
// against the message's hop, records the answer in the guard's authority
// ledger and runs the wrapped executor again: the guard, asked again,
// allows the action once. The follow-up is the hop's work resumed, not its
// offer processed again (HC-38): only a hop still "accepted", with a state
// this server sealed for it, resumes.
//
// auth-required alone authorizes nothing (A2A 1.0, section 7.6.4), and
// neither does input-required or the answer: the
// guard decides, from what its ledger records. A refused or declined
// answer records nothing, the wrapped executor does not run, and the task
// stays input-required; a pause with no answer ends with the
// offer, whose exp bounds the state and every authority of the guard.
type Approvals struct {
	// Key seals the request states (HMAC-SHA256), at least 32 bytes. Keep
	// it across restarts for a pause to outlive one. Required.
	Key []byte
	// Guard returns the evidence guard of the hop a message runs, over a
	// durable or shared authority ledger so that an approval recorded
	// before a restart is honoured after it. It is put in the wrapped
	// executor's context (evidence.GuardFromContext). Required.
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

// pauseState is the task state a pause puts the task in.
func (a *Approvals) pauseState() a2a.TaskState {
	if a.AuthRequired {
		return a2a.TaskStateAuthRequired
	}
	return a2a.TaskStateInputRequired
}

// ApprovalKey is the status message's metadata key of a pending approval:
// action, owner, hop (the offer's handoff digest), operation_id,
// idempotency_key, item, and state, the request state to answer with.
const ApprovalKey = ExtensionURI + "/approval"

// AnswerKey is the follow-up message's metadata key of the answer:
// "state", "decision" ("approve" or "deny") and "approval" (a signed
// approval, compact JWS).
const AnswerKey = ExtensionURI + "/approval-answer"

// ErrApprovalState: the answer's request state was not sealed by this
// server for the message's hop, or it expired.
var ErrApprovalState = pause.ErrState

// ErrApprovalDeclined: the answer declined the approval.
var ErrApprovalDeclined = pause.ErrDeclined

const keyPauser ctxKey = 100

type pauser struct {
	a  *Approvals
	in *handoff.Received
}

func (a *Approvals) config() pause.Config {
	return pause.Config{Key: a.Key, Guard: a.Guard, Now: a.Now}
}

func (a *Approvals) validate() error {
	if a == nil {
		return nil
	}
	return a.config().Validate()
}

// AskApproval returns the event that pauses the task for the approval err
// asks for (err wraps evidence.ErrApprovalRequired): a final status update
// to input-required whose message carries the pending approval
// under ApprovalKey. It reports false for any other error, or outside an
// execution the wrapper serves with Approvals.
func AskApproval(ctx context.Context, ec *a2asrv.RequestContext, err error) (a2a.Event, bool) {
	p, ok := ctx.Value(keyPauser).(*pauser)
	if !ok {
		return nil, false
	}
	req, state, ok := pause.Ask(p.a.Key, p.in, err)
	if !ok {
		return nil, false
	}
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec,
		a2a.TextPart{Text: fmt.Sprintf("%s must approve %q (operation %q)", req.Owner, req.Action, req.OperationID)})
	pending := pause.Of(req).Map()
	pending["state"] = state
	m.Metadata = map[string]any{ApprovalKey: pending}
	m.Extensions = []string{ExtensionURI}
	ev := a2a.NewStatusUpdateEvent(ec, p.a.pauseState(), m)
	ev.Final = true
	return ev, true
}

// PendingApproval returns the pending approval a status message of
// AskApproval carries.
func PendingApproval(m *a2a.Message) (map[string]any, bool) {
	if m == nil {
		return nil, false
	}
	p, ok := m.Metadata[ApprovalKey].(map[string]any)
	return p, ok
}

// Answer returns the follow-up message that answers the pause of task
// (input-required with a pending approval): on the same task
// and context, with decision ("approve" or "deny") and, when set, a signed
// approval. Send it with Client.Retransmit, which carries the hop's
// identical Handoff.
func Answer(task *a2a.Task, decision string, signed []byte) (*a2a.Message, error) {
	if task == nil {
		return nil, fmt.Errorf("%w: no task", handoff.ErrArgument)
	}
	p, ok := PendingApproval(task.Status.Message)
	state, _ := p["state"].(string)
	if !ok || state == "" {
		return nil, fmt.Errorf("%w: the task does not wait for an approval", handoff.ErrArgument)
	}
	ans := map[string]any{"state": state, "decision": decision}
	if len(signed) > 0 {
		ans["approval"] = string(signed)
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: decision})
	m.TaskID, m.ContextID = task.ID, task.ContextID
	m.Metadata = map[string]any{AnswerKey: ans}
	return m, nil
}

func answerOf(m *a2a.Message) (map[string]any, string) {
	if m == nil {
		return nil, ""
	}
	ans, _ := m.Metadata[AnswerKey].(map[string]any)
	state, _ := ans["state"].(string)
	return ans, state
}

// resumable reports whether a retransmitted message answers a pause of its
// hop: Approvals set, an answer with a state, on a task that paused for
// that hop, and the hop still "accepted".
func (e *Executor) resumable(ec *a2asrv.RequestContext, in *handoff.Received) (handoff.Signed, bool) {
	if _, state := answerOf(ec.Message); e.cfg.Approvals == nil || state == "" || ec.StoredTask == nil {
		return handoff.Signed{}, false
	}
	if !pausedFor(ec.StoredTask, in.Digest()) {
		return handoff.Signed{}, false // another task's pause: not resumed here
	}
	return pause.Accepted(in)
}

// guarded returns the wrapped executor's context, with the hop's guard and
// the pauser when Approvals is set; an answer the message carries is
// recorded first, and the executor does not run when it is refused.
func (e *Executor) guarded(ctx context.Context, ec *a2asrv.RequestContext, in *handoff.Received) (context.Context, error) {
	a := e.cfg.Approvals
	if a == nil {
		return ctx, nil
	}
	g, err := a.Guard(ctx, in)
	if err != nil {
		return ctx, fmt.Errorf("handoff: no evidence guard for the hop: %w", err)
	}
	if ans, state := answerOf(ec.Message); state != "" {
		operator := ""
		if a.Operator != nil {
			operator = a.Operator(ctx, ec)
		} else {
			operator = string(e.peer(ctx))
		}
		if err := pause.Take(ctx, a.Key, state, in, a.config().Time(), g, pause.AnswerOf(ans), operator); err != nil {
			return ctx, err
		}
	}
	ctx = evidence.ContextWithGuard(ctx, g)
	return context.WithValue(ctx, keyPauser, &pauser{a: a, in: in}), nil
}

func refusedAnswer(ec *a2asrv.RequestContext, a *Approvals, err error) a2a.Event {
	text := "approval refused: " + err.Error()
	if errors.Is(err, pause.ErrDeclined) {
		text = "approval declined"
	}
	return final(ec, a.pauseState(), text, nil)
}

// pausedFor reports whether task paused for an approval on the hop whose
// offer has the handoff digest hop: its status message or history carries
// a pending approval of that hop.
func pausedFor(task *a2a.Task, hop digest.Digest) bool {
	if task == nil {
		return false
	}
	for _, m := range append([]*a2a.Message{task.Status.Message}, task.History...) {
		if p, ok := PendingApproval(m); ok && p["hop"] == hop.String() {
			return true
		}
	}
	return false
}
