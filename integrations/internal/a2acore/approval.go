package a2acore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/internal/pause"
)

// ApprovalKey is the status message's metadata key of a pending approval:
// action, owner, hop (the offer's handoff digest), operation_id,
// idempotency_key, item, and, when the paused call carried them, tool,
// args (the digest of its canonical arguments), arguments and key (the
// call's key); and state, the request state to answer with, sealed to
// that call.
const ApprovalKey = carry.ExtensionURI + "/approval"

// AnswerKey is the follow-up message's metadata key of the answer:
// "state", "decision" ("approve" or "deny") and "approval" (a signed
// approval, compact JWS).
const AnswerKey = carry.ExtensionURI + "/approval-answer"

// IdempotencyOutcomeKey is the metadata key, in the message that answers instead
// of running an execution again, of the idempotency key contract's answer
// (hopcheck.Idempotent): "outcome" ("replayed", "in_flight" or
// "conflict"), "key", and for a replay "result", the execution's recorded
// outcome ({"state": the task state it left, "status": the hop's terminal
// status it signed, base64url}), and "error".
const IdempotencyOutcomeKey = carry.ExtensionURI + "/idempotency"

// Errors of an answer to a pause.
var (
	ErrApprovalState    = pause.ErrState
	ErrApprovalDeclined = pause.ErrDeclined
)

// Approvals is the SDK-neutral part of the lines' Approvals.
type Approvals struct {
	Key   []byte
	Guard func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error)
	Now   func() time.Time
	// Pause is the task state a pause puts the task in.
	Pause string
}

func (a *Approvals) config() pause.Config {
	return pause.Config{Key: a.Key, Now: a.Now}
}

func (a *Approvals) validate() error {
	if a == nil {
		return nil
	}
	return a.config().Validate()
}

type pauser struct {
	a   *Approvals
	in  *handoff.Received
	box *hopwork.Box // the execution's, once it starts
}

// Pause is what pauses a task for an approval: the task state, and the
// status message's text and metadata (the pending approval under
// ApprovalKey, with the state to answer with).
type Pause struct {
	State string
	Text  string
	Meta  map[string]any
}

// Ask returns the pause for the approval err asks for (err wraps
// evidence.ErrApprovalRequired). It reports false for any other error,
// outside an execution the wrapper serves with Approvals, and for an
// execution that reported an effect (Report): a pause declined ends the
// hop with "failed" and no refs, which would say the work took none; such
// an execution ends with the refusal and the outcome it reported.
func Ask(ctx context.Context, err error) (Pause, bool) {
	p, ok := ctx.Value(keyPauser).(*pauser)
	if !ok || (p.box != nil && p.box.TookEffect()) {
		return Pause{}, false
	}
	req, sealed, ok := pause.Ask(p.a.Key, p.in, err)
	if !ok {
		return Pause{}, false
	}
	pending := pause.Of(req).Map()
	pending["state"] = sealed
	text := fmt.Sprintf("%s must approve %q (operation %q)", req.Owner, req.Action, req.OperationID)
	if !req.Args.IsZero() {
		text = fmt.Sprintf("%s must approve %q: tool %q, arguments %s (operation %q)", req.Owner, req.Action, req.Tool, req.Args, req.OperationID)
	}
	return Pause{State: p.a.Pause, Text: text, Meta: map[string]any{ApprovalKey: pending}}, true
}

// Pending returns the pending approval a message's metadata carries.
func Pending(meta map[string]any) (map[string]any, bool) {
	p, ok := meta[ApprovalKey].(map[string]any)
	return p, ok
}

// Answer returns the metadata of the answer to the pending approval of a
// task: decision ("approve" or "deny") and, when set, a signed approval.
// The pending approval is the one in status, the task's status message,
// else the newest in the agent's messages of history, oldest first: a
// later answer to another message may stand in the status message of a
// task that still waits. view reads a message of the SDK (View).
func Answer[M any](view func(M) (map[string]any, bool), status M, history []M, decision string, signed []byte) (map[string]any, error) {
	sealed := Asked(view, status, history)
	if sealed == "" {
		return nil, fmt.Errorf("%w: the task does not wait for an approval", handoff.ErrArgument)
	}
	ans := map[string]any{"state": sealed, "decision": decision}
	if len(signed) > 0 {
		ans["approval"] = string(signed)
	}
	return map[string]any{AnswerKey: ans}, nil
}

// Asked returns the request state of the pending approval a task shows:
// the one in status, the task's status message, else the newest in the
// agent's messages of history, oldest first; "" when none.
func Asked[M any](view func(M) (map[string]any, bool), status M, history []M) string {
	agents := Metas(view, history...)
	slices.Reverse(agents)
	meta, _ := view(status)
	for _, meta := range append([]map[string]any{meta}, agents...) {
		p, _ := Pending(meta)
		if sealed, _ := p["state"].(string); sealed != "" {
			return sealed
		}
	}
	return ""
}

// Metas returns the metadata of the agent's messages among ms, in order;
// view returns a message's metadata and whether it is the agent's (a nil
// message is no one's).
func Metas[M any](view func(M) (map[string]any, bool), ms ...M) []map[string]any {
	var out []map[string]any
	for _, m := range ms {
		if meta, agent := view(m); agent {
			out = append(out, meta)
		}
	}
	return out
}

func answerOf(meta map[string]any) (map[string]any, string) {
	ans, _ := meta[AnswerKey].(map[string]any)
	sealed, _ := ans["state"].(string)
	return ans, sealed
}

// resumable reports whether a retransmitted message, on the task its hop
// owns, is the answer to a pause of the hop's work, and the hop still
// "accepted" (its last status): the answer to the wrapper's pause (Ask,
// with Approvals), carrying the sealed state under AnswerKey; or, on a
// task in TASK_STATE_INPUT_REQUIRED that the wrapped executor paused
// itself, the input it asked for (as ADK's tool confirmation is), which
// the delegator sends with the hop's identical Handoff. A follow-up on the
// wrapper's pause without the answer resumes nothing.
func (s *Server) resumable(c *call, in *handoff.Received, mine bool) (handoff.Signed, bool) {
	if c.task == nil || !mine {
		return handoff.Signed{}, false
	}
	meta, _ := c.x.Message()
	_, sealed := answerOf(meta)
	switch {
	case sealed != "" && s.cfg.Approvals != nil && c.task.State == s.cfg.Approvals.Pause && c.task.Asked:
	case sealed == "" && !c.task.Asked && c.task.State == InputRequired:
	default:
		return handoff.Signed{}, false
	}
	return pause.Accepted(in)
}

func refusedText(err error) string {
	if errors.Is(err, pause.ErrDeclined) {
		return "approval declined"
	}
	return "approval refused: " + err.Error()
}
