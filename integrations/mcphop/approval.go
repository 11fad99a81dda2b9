package mcphop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/internal/pause"
)

// Approvals pauses a must-ask action of the evidence guard for its owner's
// approval with an MCP input request (protocol 2026-07-28, SEP-2322): the
// tool returns AskApproval's result, an elicitation carrying the pending
// approval with a request state bound to the hop's offer digest and the
// operation; the client answers it and retries the call with the same
// Handoff, its input responses and the request state. The middleware
// checks the state against the retried call's hop, records the answer in
// the guard's authority ledger (a local approval, evidence.Guard.
// ApproveLocal, or a signed one, ApproveSigned) and runs the tool again;
// the guard, asked again, allows the action once. The retried call is the
// same hop's work resumed, not its offer processed again (HC-38): only a
// hop still "accepted", with a state this server sealed for it, resumes.
//
// For a client of an older protocol the SDK elicits the client itself,
// inside the call, and runs the tool again past the middleware: that
// answer is not recorded and the guard asks again (fail closed); only an
// answer retried through the middleware with the request state is
// (TestMCP_Pause_OlderClient).
//
// A declined or unusable answer records nothing: the tool does not run
// again, the result is an error result and the hop stays "accepted". A
// pause with no answer ends with the offer: the request state expires at
// the offer's exp, and so does every authority of the guard.
type Approvals struct {
	// Key seals the request states (HMAC-SHA256), at least 32 bytes. Keep
	// it across restarts for a pause to outlive one; share it between
	// replicas. Required.
	Key []byte
	// Guard returns the evidence guard of the hop a call runs: built from
	// the package delivered with the offer (evidence.CheckReceived,
	// evidence.NewGuard) over a durable or shared authority ledger, so
	// that an approval recorded before a restart is honoured after it. The
	// middleware puts it in the tool's context (evidence.GuardFromContext).
	// Required.
	Guard func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error)
	// Operator names the operator a local approval is recorded under: who
	// the host authenticated on the call that carries the answer. Nil
	// means the call's peer (ServerConfig.Peer, or the bearer token's
	// UserID); a local approval with no operator is not recorded.
	Operator func(*mcp.CallToolRequest) string
	// Now is the clock of the request states; nil means time.Now.
	Now func() time.Time
}

// ApprovalInput is the id of the approval in CallToolResult.InputRequests
// and CallToolParams.InputResponses.
const ApprovalInput = "handoff.approval"

// ApprovalMetaKey is the key, in the elicitation's _meta, of the pending
// approval: action, owner, hop (the offer's handoff digest), operation_id,
// idempotency_key, item. It is the draft's _meta key with "-approval", a
// prefix and one name, as MCP's _meta keys are.
const ApprovalMetaKey = MetaKey + "-approval"

// ErrApprovalState is the error of a retried call whose request state this
// server did not seal for the call's hop, or that expired: the tool does
// not run.
var ErrApprovalState = pause.ErrState

// ErrApprovalDeclined is the error of a retried call whose answer declined
// the approval: nothing is recorded and the tool does not run.
var ErrApprovalDeclined = pause.ErrDeclined

type pauser struct {
	a  *Approvals
	in *handoff.Received
}

type pauserKey struct{}

func (a *Approvals) config() pause.Config {
	return pause.Config{Key: a.Key, Guard: a.Guard, Now: a.Now}
}

func (a *Approvals) validate() error {
	if a == nil {
		return nil
	}
	return a.config().Validate()
}

// AskApproval returns the input-required result of a call whose action the
// guard refused for want of its owner's approval (err wraps
// evidence.ErrApprovalRequired): an elicitation whose _meta carries the
// pending approval under ApprovalMetaKey, with the request state bound to
// the hop and the operation. It reports false for any other error, or
// outside a call the middleware serves with Approvals.
func AskApproval(ctx context.Context, err error) (*mcp.CallToolResult, bool) {
	p, ok := ctx.Value(pauserKey{}).(*pauser)
	if !ok {
		return nil, false
	}
	req, state, ok := pause.Ask(p.a.Key, p.in, err)
	if !ok {
		return nil, false
	}
	pending := pause.Of(req)
	return &mcp.CallToolResult{
		Meta: mcp.Meta{},
		InputRequests: mcp.InputRequestMap{ApprovalInput: &mcp.ElicitParams{
			Mode:    "form",
			Message: fmt.Sprintf("%s must approve %q (operation %q)", req.Owner, req.Action, req.OperationID),
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
				"decision": map[string]any{"type": "string", "enum": []string{"approve", "deny"}},
				"approval": map[string]any{"type": "string", "description": "a signed approval (compact JWS)"},
			}, "required": []string{"decision"}},
			Meta: mcp.Meta{ApprovalMetaKey: pending.Map()},
		}},
		RequestState: state,
	}, true
}

// PendingApproval returns the pending approval an input request of
// AskApproval carries, for the client to show its owner.
func PendingApproval(p *mcp.ElicitParams) (map[string]any, bool) {
	if p == nil {
		return nil, false
	}
	m, ok := p.Meta[ApprovalMetaKey].(map[string]any)
	return m, ok
}

// answer records the answer a retried call carries for the pause its
// request state names; the call runs its tool only when it returns nil.
func (s *server) answer(ctx context.Context, r *mcp.CallToolRequest, in *handoff.Received, g *evidence.Guard) error {
	a := s.cfg.Approvals
	var ans pause.Answer
	if er, ok := r.Params.InputResponses[ApprovalInput].(*mcp.ElicitResult); ok && er.Action == "accept" {
		ans = pause.AnswerOf(er.Content)
	}
	operator := ""
	if a.Operator != nil {
		operator = a.Operator(r)
	} else {
		operator = string(s.peer(r))
	}
	return pause.Take(ctx, a.Key, r.Params.RequestState, in, a.config().Time(), g, ans, operator)
}

// guarded returns the context the tool of an accepted or resumed hop runs
// in: with its guard and the pauser when Approvals is set. A call that
// carries a request state is an answer, recorded before the tool runs;
// the tool does not run when it is refused (the error).
func (s *server) guarded(ctx context.Context, r *mcp.CallToolRequest, in *handoff.Received) (context.Context, error) {
	a := s.cfg.Approvals
	if a == nil {
		return ctx, nil
	}
	g, err := a.Guard(ctx, in)
	if err != nil {
		return ctx, fmt.Errorf("handoff: no evidence guard for the hop: %w", err)
	}
	if r.Params.RequestState != "" {
		if err := s.answer(ctx, r, in, g); err != nil {
			return ctx, err
		}
	}
	ctx = evidence.ContextWithGuard(ctx, g)
	return context.WithValue(ctx, pauserKey{}, &pauser{a: a, in: in}), nil
}

// resumable reports whether a retransmitted call is the answer to a pause
// of its hop: Approvals set, a request state, and the hop still
// "accepted" (its last status), so that the work resumes.
func (s *server) resumable(r *mcp.CallToolRequest, in *handoff.Received) (handoff.Signed, bool) {
	if s.cfg.Approvals == nil || r.Params.RequestState == "" {
		return handoff.Signed{}, false
	}
	return pause.Accepted(in)
}

func refusedAnswer(err error, accepted *handoff.Signed) *mcp.CallToolResult {
	msg := "approval refused: " + err.Error()
	if errors.Is(err, pause.ErrDeclined) {
		msg = "approval declined"
	}
	return errorResult(msg, accepted)
}
