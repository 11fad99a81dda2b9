package mcphop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/internal/pause"
)

// Approvals pauses a must-ask action of the evidence guard for its owner's
// approval with an MCP input request (protocol 2026-07-28, SEP-2322): the
// tool returns AskApproval's result, an elicitation carrying the pending
// approval with a request state bound to the hop's offer digest and the
// operation; the client answers it and retries the call with the same
// Handoff (and package), its input responses and the request state. The
// middleware checks the state against the retried call's hop, records the
// answer in the guard's authority ledger (a local approval, evidence.Guard.
// ApproveLocal, or a signed one, ApproveSigned) and runs the tool again,
// with the hop's accepted offer in its context (FromContext, through
// handoff.Agent.Resume); the guard, asked again, allows the action once.
// The retried call is the same hop's work resumed, not its offer processed
// again (HC-38): only a hop still "accepted", with a state this server
// sealed for it, resumes. The owner is asked once per approval, whatever
// the client's protocol (see AskApproval for an older client's).
//
// # The client's side
//
// The MCP Go SDK's client answers input requests with the elicitation
// handler of its options, and retries the call itself (its multi-round-
// trip middleware, on by default): without a handler the call fails with
// "client does not support elicitation". The handler shows the pending
// approval (PendingApproval: action, owner, hop, operation_id, ...) to its
// owner and answers with the form's content:
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
// approval, recorded under the operator the delegate authenticated on the
// retried call (Operator); {"decision": "approve", "approval": JWS} to
// give the owner's signed approval statement (evidence.SignApproval),
// which the guard verifies; {"decision": "deny"}, an Action "decline" or
// "cancel", or anything else declines. The request state and the Handoff
// travel with the retry without the handler's help.
//
// # A refused answer
//
// A declined answer records nothing and the tool does not run again: the
// hop ends with "failed", no refs (the work took no effect, HC-44), reason
// "policy", in an error result, so that the delegator resolves it and may
// offer the work again; so does an answer that comes once the offer, and
// with it the request state, expired. A pause with no answer ends with the
// offer: the request state expires at the offer's exp, and so does every
// authority of the guard. Any other unusable answer (a state sealed for
// another hop or altered, a signed approval the guard refuses) records
// nothing, runs nothing, and leaves the hop "accepted", paused.
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
// idempotency_key, item. It is the draft's _meta key with "-approval", a
// prefix and one name, as MCP's _meta keys are.
const ApprovalMetaKey = MetaKey + "-approval"

// ErrApprovalState is the error of a retried call whose request state this
// server did not seal for the call's hop, or that expired: the tool does
// not run.
var ErrApprovalState = pause.ErrState

// ErrApprovalDeclined is the error of a retried call whose answer declined
// the approval: nothing is recorded, the tool does not run, and the hop
// ends with "failed".
var ErrApprovalDeclined = pause.ErrDeclined

type pauser struct {
	a   *Approvals
	in  *handoff.Received
	g   *evidence.Guard
	s   *server
	r   *mcp.CallToolRequest
	mu  sync.Mutex
	box *hopwork.Box // the running execution's
	// again: an answer given inside the call (an older client) was
	// recorded; the tool runs again.
	again bool
}

type pauserKey struct{}

func (a *Approvals) config() pause.Config {
	return pause.Config{Key: a.Key, Now: a.Now}
}

func (a *Approvals) validate() error {
	if a == nil {
		return nil
	}
	return a.config().Validate()
}

// start is the start of an execution of the tool, with its box.
func (p *pauser) start(box *hopwork.Box) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.box, p.again = box, false
}

// answered reports that the execution that ended was answered inside the
// call, and the tool is to run again.
func (p *pauser) answered() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.again
}

// AskApproval returns the input-required result of a call whose action the
// guard refused for want of its owner's approval (err wraps
// evidence.ErrApprovalRequired): an elicitation whose _meta carries the
// pending approval under ApprovalMetaKey, with the request state bound to
// the hop and the operation. It reports false for any other error,
// outside a call the middleware serves with Approvals, and once the tool
// reported an effect (Report) in this call: a pause declined ends the hop
// with "failed" and no refs, which would say the work took none, so such a
// call ends with the refusal and the outcome it reported.
//
// The owner is asked once per approval. A client of protocol 2026-07-28 or
// later gets the input request and retries the call with the answer
// (its SDK does so when it has an elicitation handler, see Approvals). A
// client of an older protocol cannot retry: the MCP Go SDK would then ask
// it itself, inside the call, past this middleware, which would record
// nothing, and the tool would ask again. For such a client AskApproval
// asks it, inside the call (elicitation/create, the same request), records
// the answer in the guard's ledger, and returns a result the middleware
// drops: the tool runs again, once, and the guard decides. A declined
// answer comes back as an error result (ErrApprovalDeclined) that the
// tool returns: the hop ends with "failed".
func AskApproval(ctx context.Context, err error) (*mcp.CallToolResult, bool) {
	p, ok := ctx.Value(pauserKey{}).(*pauser)
	if !ok {
		return nil, false
	}
	p.mu.Lock()
	took := p.box != nil && p.box.TookEffect()
	p.mu.Unlock()
	if took {
		return nil, false
	}
	req, state, ok := pause.Ask(p.a.Key, p.in, err)
	if !ok {
		return nil, false
	}
	ask := elicitation(req)
	if ss := p.r.Session; ss != nil && !retries(ss) {
		return p.inline(ctx, ss, req, ask)
	}
	return &mcp.CallToolResult{
		Meta:          mcp.Meta{},
		InputRequests: mcp.InputRequestMap{ApprovalInput: ask},
		RequestState:  state,
	}, true
}

// elicitation is the form that asks the owner for the approval of req:
// "decision" ("approve" or "deny") and, optionally, "approval", a signed
// approval (compact JWS); the pending approval is in its _meta.
func elicitation(req evidence.ApprovalRequest) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: fmt.Sprintf("%s must approve %q (operation %q)", req.Owner, req.Action, req.OperationID),
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

// inline asks an older client for the approval inside the call, and
// records its answer in the guard's ledger (pause.Record): the tool runs
// again once it returns the result; a declined or failed answer is an
// error result the tool returns.
func (p *pauser) inline(ctx context.Context, ss *mcp.ServerSession, req evidence.ApprovalRequest, ask *mcp.ElicitParams) (*mcp.CallToolResult, bool) {
	var ans pause.Answer
	res, err := ss.Elicit(ctx, ask)
	if err == nil && res != nil && res.Action == "accept" {
		ans = pause.AnswerOf(res.Content)
	}
	if err == nil {
		err = pause.Record(ctx, p.g, pause.BoundOf(req, p.in.Digest(), hopwork.Verified(p.in).Exp.Std()), ans, p.s.operator(p.r))
	}
	if err != nil {
		out := &mcp.CallToolResult{}
		out.SetError(err)
		return out, true
	}
	p.mu.Lock()
	p.again = true
	p.mu.Unlock()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "approval recorded; the call runs again"}}}, true
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
	return pause.Take(ctx, a.Key, r.Params.RequestState, in, a.config().Time(), g, ans, s.operator(r))
}

// operator is who a local approval carried by r is recorded under:
// Approvals.Operator's answer, else the call's peer.
func (s *server) operator(r *mcp.CallToolRequest) string {
	if a := s.cfg.Approvals; a != nil && a.Operator != nil {
		return a.Operator(r)
	}
	return string(s.peer(r))
}

// guarded returns the context the tool of an accepted or resumed hop runs
// in: with its guard, g or the application's (Approvals.Guard), under
// evidence's name (evidence.ContextWithGuard), and the pauser when
// Approvals is set. A call that carries a request state is an answer,
// recorded before the tool runs; the tool does not run when it is
// refused (the error).
func (s *server) guarded(ctx context.Context, r *mcp.CallToolRequest, in *handoff.Received, g *evidence.Guard) (context.Context, *pauser, error) {
	g, err := s.guards.GuardOf(ctx, in, g)
	if err != nil {
		return ctx, nil, err
	}
	a := s.cfg.Approvals
	if a != nil && r.Params.RequestState != "" {
		if g == nil {
			return ctx, nil, fmt.Errorf("handoff: no evidence guard for the hop to record the answer in")
		}
		if err := s.answer(ctx, r, in, g); err != nil {
			return ctx, nil, err
		}
	}
	if g != nil {
		ctx = evidence.ContextWithGuard(ctx, g)
	}
	if a == nil || g == nil {
		return ctx, nil, nil
	}
	p := &pauser{a: a, in: in, g: g, s: s, r: r}
	return context.WithValue(ctx, pauserKey{}, p), p, nil
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
