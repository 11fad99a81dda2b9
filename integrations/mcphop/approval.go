package mcphop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/internal/hopcheck"
	"github.com/agentproto/handoff/integrations/internal/pause"
)

// Approvals pauses a tool call whose action is "must ask" in the hop's
// evidence package for its owner's approval, with an MCP input request
// (protocol 2026-07-28, SEP-2322): the middleware, which runs every tool
// call under the hop's guard, answers a call the guard refuses for want of
// an approval with an elicitation carrying the pending approval (the
// action, its owner, the hop, the operation, the tool, the call's
// arguments and their digest, and the call's key) and a request state
// sealed to exactly that call. The client answers it and retries the call
// with the same Handoff (and package), the same arguments, its input
// responses and the request state. The middleware checks the state against
// the retried call: a state sealed for another hop, altered, or expired,
// and a call that is not the one that paused (another tool, other
// arguments: evidence.ErrApprovalMismatch), resume nothing. It then claims
// the pause in the guard's authority ledger, once, records the answer (a
// local approval of exactly the paused call, evidence.Guard.ApproveLocal
// with ApprovalRequest.Grant, or the owner's signed one, ApproveSigned)
// and runs the tool, with the hop's accepted offer in its context
// (FromContext, through handoff.Agent.Resume), under the guard, which
// consumes the approval with the call's claim, atomically. The retried
// call is the same hop's work resumed, not its offer processed again
// (HC-38): only a hop still "accepted", with a state this server sealed
// for it, resumes.
//
// # One answer, one resumption
//
// A request state and its answer are used once, across every replica
// sharing the ledger: the same answer presented again, replayed or
// concurrent, or another answer to the same pause, resumes nothing; it is
// answered with the outcome of the one that resumed ("replayed", with the
// recorded result) or, while it runs, "in flight" (see Idempotency). The
// tool runs once, and one approval is recorded. The owner is asked once
// per approval, whatever the client's protocol: a client of an older
// protocol, which cannot retry, is asked inside the call (elicitation/
// create on the same request), and the tool runs once its answer is
// recorded.
//
// # The client's side
//
// The MCP Go SDK's client answers input requests with the elicitation
// handler of its options, and retries the call itself (its multi-round-
// trip middleware, on by default): without a handler the call fails with
// "client does not support elicitation". The handler shows the pending
// approval (PendingApproval: action, owner, hop, operation_id, tool, args,
// arguments, key, ...) to its owner and answers with the form's content:
//
//	client := mcp.NewClient(impl, &mcp.ClientOptions{
//		ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
//			pending, ok := mcphop.PendingApproval(r.Params)
//			if !ok {
//				return &mcp.ElicitResult{Action: "decline"}, nil // not an approval
//			}
//			if !ownerApproves(ctx, pending) {
//				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny"}}, nil
//			}
//			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
//		},
//	})
//	client.AddSendingMiddleware(hc.Middleware())
//
// The answer's shape is {"decision": "approve"} for a local operator's
// approval of the call shown, recorded under the operator the delegate
// authenticated on the retried call (Operator); {"decision": "approve",
// "approval": JWS} to give the owner's signed approval statement
// (evidence.SignApproval; evidence.ApprovalRequest.Statement approves
// exactly the call shown), which the guard verifies; {"decision": "deny"},
// an Action "decline" or "cancel", or anything else declines. The request
// state and the Handoff travel with the retry without the handler's help.
//
// # A refused answer
//
// A declined answer records nothing and the tool does not run: the hop
// ends with "failed", no refs (the work took no effect, HC-44), reason
// "policy", in an error result, so that the delegator resolves it and may
// offer the work again; so does an answer that comes once the offer, and
// with it the request state, expired. A pause with no answer ends with the
// offer: the request state expires at the offer's exp, and so does every
// authority of the guard. Any other unusable answer (a state sealed for
// another hop or altered, a retried call that is not the paused one, a
// signed approval the guard refuses) records nothing, runs nothing, and
// leaves the hop "accepted", paused.
type Approvals struct {
	// Key seals the request states (HMAC-SHA256), at least 32 bytes. Keep
	// it across restarts for a pause to outlive one; share it between
	// replicas. Required.
	Key []byte
	// Guard returns the evidence guard of the hop a call runs, for a host
	// that builds its guards itself: leave it nil with
	// ServerConfig.Evidence, which builds each from the package that came
	// with the offer. Build it over a durable or shared authority ledger,
	// so that an approval recorded before a restart is honoured after it.
	// The middleware puts it in the tool's context
	// (evidence.GuardFromContext). Its Received is the hop's, with the
	// accepted offer, on the retried call too (handoff.Agent.Resume).
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
// idempotency_key, item, tool, args (the digest of the call's canonical
// arguments), arguments (as the call carried them) and key (the call's
// key). It is the draft's _meta key with "-approval", a prefix and one
// name, as MCP's _meta keys are.
const ApprovalMetaKey = MetaKey + "-approval"

// ErrApprovalState is the error of a retried call whose request state this
// server did not seal for the call's hop, or that expired: the tool does
// not run.
var ErrApprovalState = pause.ErrState

// ErrApprovalDeclined is the error of a retried call whose answer declined
// the approval: nothing is recorded, the tool does not run, and the hop
// ends with "failed".
var ErrApprovalDeclined = pause.ErrDeclined

func (a *Approvals) config() pause.Config {
	return pause.Config{Key: a.Key, Now: a.Now}
}

func (a *Approvals) validate() error {
	if a == nil {
		return nil
	}
	return a.config().Validate()
}

// elicitation is the form that asks the owner for the approval of req:
// "decision" ("approve" or "deny") and, optionally, "approval", a signed
// approval (compact JWS); the pending approval is in its _meta.
func elicitation(req evidence.ApprovalRequest) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode: "form",
		Message: fmt.Sprintf("%s must approve %q: tool %q, arguments %s (operation %q)", req.Owner, req.Action, req.Tool,
			req.Args, req.OperationID),
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
			"decision": map[string]any{"type": "string", "enum": []string{"approve", "deny"}},
			"approval": map[string]any{"type": "string", "description": "a signed approval (compact JWS)"},
		}, "required": []string{"decision"}},
		Meta: mcp.Meta{ApprovalMetaKey: pause.Of(req).Map()},
	}
}

// retries reports whether the client of ss takes input requests and
// retries the call (protocol 2026-07-28, SEP-2322).
func retries(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= "2026-07-28"
}

// PendingApproval returns the pending approval an input request of the
// middleware carries, for the client to show its owner.
func PendingApproval(p *mcp.ElicitParams) (map[string]any, bool) {
	if p == nil {
		return nil, false
	}
	m, ok := p.Meta[ApprovalMetaKey].(map[string]any)
	return m, ok
}

// answerOf is the answer a retried call carries.
func answerOf(r *mcp.CallToolRequest) pause.Answer {
	if er, ok := r.Params.InputResponses[ApprovalInput].(*mcp.ElicitResult); ok && er.Action == "accept" {
		return pause.AnswerOf(er.Content)
	}
	return pause.Answer{}
}

// ask asks for the approval req: the input request and its sealed state
// for a client that retries, or, for an older client, the question
// inside the call, whose answer is recorded (true: the call is tried
// again). A nil result and false: the approval cannot be asked for.
func (s *server) ask(ctx context.Context, r *mcp.CallToolRequest, in *handoff.Received, g *evidence.Guard, err error) (*mcp.CallToolResult, bool, error) {
	a := s.cfg.Approvals
	req, state, ok := pause.Ask(a.Key, in, err)
	if !ok {
		return nil, false, err
	}
	ask := elicitation(req)
	if ss := r.Session; ss != nil && !retries(ss) {
		var ans pause.Answer
		res, eerr := ss.Elicit(ctx, ask)
		if eerr != nil {
			return nil, false, eerr
		}
		if res != nil && res.Action == "accept" {
			ans = pause.AnswerOf(res.Content)
		}
		b := pause.BoundOf(req, in.Digest(), time.Time{})
		if err := pause.Record(ctx, g, b, ans, s.operator(r)); err != nil {
			return nil, false, err
		}
		return nil, true, nil
	}
	return &mcp.CallToolResult{Meta: mcp.Meta{}, InputRequests: mcp.InputRequestMap{ApprovalInput: ask}, RequestState: state}, false, nil
}

// inputRequired returns res marked as an input-required result
// (resultType "input_required", SEP-2322). The SDK marks a result so only
// when its own tool handler returned it, and the middleware answers
// before the tool: the mark is unexported, and travels in the result's
// wire form, which carries it here.
func inputRequired(res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["resultType"] = json.RawMessage(`"input_required"`)
	if b, err = json.Marshal(m); err != nil {
		return nil, err
	}
	out := &mcp.CallToolResult{}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	if !out.NeedsInput() {
		return nil, errors.New("mcphop: the SDK does not mark an input-required result from its wire form")
	}
	return out, nil
}

// operator is who a local approval carried by r is recorded under:
// Approvals.Operator's answer, else the call's peer.
func (s *server) operator(r *mcp.CallToolRequest) string {
	if a := s.cfg.Approvals; a != nil && a.Operator != nil {
		return a.Operator(r)
	}
	return string(s.peer(r))
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

func refusedAnswer(err error, st *handoff.Signed) *mcp.CallToolResult {
	msg := "refused: " + err.Error()
	if errors.Is(err, pause.ErrDeclined) {
		msg = "approval declined"
	}
	return errorResult(msg, st)
}

// Idempotency is the structured content of the result of a tool call the
// middleware did not run because the idempotency key contract answered
// for it (evidence.Guard.Do): the same call replayed, in flight, or its
// operation used by another call. Such a result has isError set and no
// other structured content; a client tells the three apart by Outcome
// (and tells them from the tool's own results by IdempotencyOf):
//
//   - "replayed" (evidence.ErrReplayed): the call ran once already, on
//     this hop; Result is the result it returned then, as recorded (the
//     JSON of its CallToolResult), and Error the protocol error it ended
//     with, if any. Use Result; do not call again for the same effect.
//   - "in_flight" (evidence.ErrInFlight): the same call is running, or
//     its process died before its outcome was recorded; retry later, and
//     get the result once it is recorded.
//   - "conflict" (evidence.ErrIdempotencyConflict): the call's operation
//     (its operation_id or idempotency_key argument, else the hop) was
//     used on this hop by another call: other arguments, another tool or
//     action. Nothing ran.
//
// Key is the call's key (evidence.Call.Key). The hop's status travels in
// _meta as with every result: the hop's work is not closed by any of
// them.
type Idempotency struct {
	Outcome string `json:"outcome"`
	Key     string `json:"key,omitempty"`
	Result  any    `json:"result,omitempty"`
	Error   string `json:"error,omitempty"`
}

// The outcomes of Idempotency.
const (
	Replayed = hopcheck.Replayed
	InFlight = hopcheck.InFlight
	Conflict = hopcheck.Conflict
)

// IdempotencyOf returns the Idempotency a result carries: false for a
// result the tool made, or any other.
func IdempotencyOf(res *mcp.CallToolResult) (Idempotency, bool) {
	if res == nil || !res.IsError || res.StructuredContent == nil {
		return Idempotency{}, false
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return Idempotency{}, false
	}
	var id Idempotency
	if json.Unmarshal(b, &id) != nil {
		return Idempotency{}, false
	}
	switch id.Outcome {
	case Replayed, InFlight, Conflict:
		return id, true
	}
	return Idempotency{}, false
}

// idempotentResult is the result of a call the idempotency key contract
// answered for (hopcheck.Idempotent), with st, the hop's status, if any.
func idempotentResult(m map[string]any, st *handoff.Signed) *mcp.CallToolResult {
	text := "idempotency: " + fmt.Sprint(m["outcome"])
	if e, ok := m["error"].(string); ok {
		text += ": " + e
	}
	res := errorResult(text, st)
	res.StructuredContent = m
	return res
}
