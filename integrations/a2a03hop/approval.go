package a2a03hop

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
)

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

// AskApproval returns the event that pauses the task for the approval err
// asks for (err wraps evidence.ErrApprovalRequired, or
// evidence.ErrApprovalMismatch: the operation's approval is for another
// call): a final status update to input-required (auth-required with
// Approvals.AuthRequired) whose message carries the pending approval
// under ApprovalKey. It reports false for any other error, or outside an
// execution the wrapper serves with Approvals.
func AskApproval(ctx context.Context, ec *a2asrv.RequestContext, err error) (a2a.Event, bool) {
	p, ok := a2acore.Ask(ctx, err)
	if !ok {
		return nil, false
	}
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.TextPart{Text: p.Text})
	m.Metadata, m.Extensions = p.Meta, []string{ExtensionURI}
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskState(a2acore.V03(p.State)), m)
	ev.Final = true
	return ev, true
}

// PendingApproval returns the pending approval a status message of
// AskApproval carries.
func PendingApproval(m *a2a.Message) (map[string]any, bool) {
	if m == nil {
		return nil, false
	}
	return a2acore.Pending(m.Metadata)
}

// Answer returns the follow-up message that answers the pause of task (a
// pending approval in its status message, or in its history): on the same
// task and context, with decision ("approve" or "deny") and, when set, a
// signed approval. Send it with Client.Retransmit, which carries the hop's
// identical Handoff.
func Answer(task *a2a.Task, decision string, signed []byte) (*a2a.Message, error) {
	if task == nil {
		return nil, fmt.Errorf("%w: no task", handoff.ErrArgument)
	}
	meta, err := a2acore.Answer(view, task.Status.Message, task.History, decision, signed)
	if err != nil {
		return nil, err
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: decision})
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
