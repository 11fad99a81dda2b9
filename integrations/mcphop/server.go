// Package mcphop makes every MCP tools/call a signed, checked hop of the
// draft "Signed Handoff Context for Agentic Dialogs" (section 6, HC-67), for
// servers and clients of the MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp); the carriage helpers it
// uses are the root's package mcp.
//
// # Delegate (server)
//
// Server returns a receiving middleware. For each tools/call it reads the
// Handoff from params._meta under MetaKey and runs Agent.Receive before the
// tool handler is called:
//
//   - an offer that fails a check never reaches the handler: the result is
//     an error result carrying the "rejected" status when the draft asks for
//     one (HC-30);
//   - a retransmission never reaches the handler: it is answered with the
//     identical octets of the hop's last status, or "accepted" when the work
//     was taken and nothing was sent yet (HC-38, HC-39);
//   - an equivocating offer never reaches the handler: the second offer gets
//     no status (HC-53); what HC-54 allows for the first is attached, and a
//     call of the first that still runs is stopped (ErrEquivocated);
//   - an accepted offer whose package passed (ServerConfig.Evidence: the
//     handoff package beside the Handoff, under PackageKey, is checked
//     first; one that fails, or none, is answered "rejected", reason
//     "policy", with the findings in the detail) is taken (Agent.Take,
//     which records the hop as taken) and the handler runs with the
//     Received in its context (FromContext) and the hop's guard
//     (evidence.GuardFromContext). Its result carries "completed", or the
//     outcome the handler reported with Report, or "accepted" when the
//     outcome is not known (HC-25, HC-45). An "accepted" is signed only
//     for a reply that carries it: the call gets one reply, and
//     "completed" or "failed" imply it.
//   - a result whose error (CallToolResult.GetError: a typed handler's
//     returned error) is a refusal of the hop's guard, before any effect,
//     ends the hop with "failed", no refs, reason "policy": the work took
//     no effect (HC-44), and the delegator may offer it again. A handler
//     that took an effect before it was refused says so with Report
//     (EffectPartial, with refs), which wins.
//
// # The tool call under the hop's guard
//
// With a guard (ServerConfig.Evidence's, or Approvals.Guard's) the tool
// call is the unit of the idempotency key contract, and the middleware
// keeps it whole, so that a handler written from these docs is the effect
// and nothing else: it computes no key and asks no guard. The reason: an
// MCP tools/call is one hop and one effect, whose delegator signed one
// offer for it; retransmissions, the SDK's retries and the call that
// resumes a pause carry the same Handoff, the same tool and the same
// arguments. The middleware derives the call (evidence.Call: the hop,
// the action, ServerConfig.Action's or the tool's name, the tool, the
// arguments as they came, and as names the "operation_id" and
// "idempotency_key" arguments, or else the hop itself) and runs the
// handler with evidence.Guard.Do: the guard decides the action (allowed
// runs, denied and unlisted are refused, must-ask needs its approval),
// claims the call under its key in the authority ledger and records the
// handler's result. The same call again, on any replica sharing the
// ledger, never runs the handler: it gets an error result whose
// structured content says why (Idempotency: "replayed" with the recorded
// result, "in_flight", "conflict"). ServerConfig.ReadOnly names the reads,
// which run every time, after the guard's decision. The hop's
// acknowledgement and its final disposition are recorded in the ledger
// (the system of record) as the middleware signs them.
//
// A notifications/cancelled whose _meta carries the delegator's signed
// "canceled" is handed to Agent.HandleStatus (HC-28) when it names a hop
// the middleware accepted on the same session, signed by that hop's
// delegator, and the hop has not ended ("completed" or "failed" sent), or
// ended with the call the cancellation ended; any other "canceled" is
// refused before it is verified
// (ErrForeignCancel) and changes the state of no hop. The cancels the
// agent signs for the hops passed on go to ServerConfig.OnNotices. The SDK
// itself ends the named request's context on any notifications/cancelled,
// signed or not, before a middleware sees it: MCP cancellation is the
// transport's, and the hop's state is the handoff's.
//
// # The outcome of a canceled hop
//
// A verified "canceled" is recorded in the authority ledger as the hop's
// final disposition (with ServerConfig.Evidence), its first terminal
// state, so that no guard of the hop takes an effect after it. The
// delegate then still owes the outcome of the hop's work (section 4: a
// "canceled" does not show that the work took no effect), which MCP,
// answering no canceled call, carries in the hop's last status for the
// delegator's next retransmission (Client.Retransmit):
//
//   - a tool whose context the cancel ended reports what its work did
//     (Report): EffectNone, stopped before its effect, ends the hop
//     "failed" with no refs; its result is signed and kept whether or not
//     its caller still waits;
//   - a hop whose tool does not run (paused for an approval, or its call
//     ended "accepted") and whose authority ledger holds no effect of it
//     (authority.HopRecord.Effects: every tool call runs under the hop's
//     guard, claimed in the ledger) took none and can take none: it ends
//     "failed", no refs, as the "canceled" is applied;
//   - any other, the tool's outcome unknown, or no ledger at hand
//     (Approvals.Guard alone: no guard is built for a "canceled"), stays
//     "accepted" (HC-25), unresolved at the delegator (HC-40).
//
// The delegator's "canceled" and the tool's own "failed" or "completed"
// may cross (section 5.5): each party keeps the first terminal state it
// knew, the ledger the first one recorded. Over streamable HTTP a cancel
// counts only on a session, while the hop's call is in flight; see
// Client.Cancel for what a delegator does otherwise.
//
// With ServerConfig.Approvals, a call whose action is must-ask pauses with
// an MCP input request for its owner's approval, which shows the call and
// is sealed to it, and the retried call with the answer (and the hop's
// identical Handoff, package and arguments) resumes it, once: the handler
// runs with the hop's accepted offer in FromContext (handoff.Agent.Resume),
// and an answer that declines ends the hop with "failed"; see Approvals,
// which shows the client's set-up and the answer's shape.
//
// # Delegator (client)
//
// A Client adds a sending middleware (Client.Middleware) that attaches the
// Handoff that WithHandoff put in the call's context, with the hop's
// package beside it (OfferParams.Deliver's, kept by Call for every call
// of the hop, the retried one included, until the hop is resolved), and
// hands the status of every result to Agent.HandleStatus; Client.Call does all of it, with
// retransmissions per asking.Backoff, and tells how the call ended
// (Delivery.State, Refused, Reason). A session without the middleware is an
// error (ErrNotIntercepted), never a result. Client.Transport prepares the
// client's transport so that Client.Cancel can put the signed "canceled" in
// the _meta of notifications/cancelled, which the SDK sends without _meta.
//
// # Trace context
//
// The sending middleware puts the W3C trace context of the call's context
// in params._meta under "traceparent" and "tracestate" (MCP reserves both
// keys), beside the Handoff; the receiving middleware runs the tool in the
// hop's span, a child of that context (observe.StartHop). The trace
// context is not signed and decides nothing: the offer is checked as if
// it were absent.
package mcphop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	carry "github.com/agentproto/handoff/mcp"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/binding"
	"github.com/agentproto/handoff/integrations/internal/hopcheck"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/internal/pause"
	"github.com/agentproto/handoff/integrations/observe"
)

// MetaKey is the _meta key of the draft.
const MetaKey = carry.MetaKey

// Transport is the name recorded in spans and metrics.
const Transport = "mcp"

// Method names the middlewares act on.
const (
	methodCallTool  = "tools/call"
	methodCancelled = "notifications/cancelled"
)

// ServerConfig configures the delegate's middleware.
type ServerConfig struct {
	// Agent is the delegate. Required.
	Agent *handoff.Agent
	// Tools names the tools the middleware guards; empty means every tool.
	Tools []string
	// Optional lets a call without a Handoff reach its tool, with no offer
	// in the context. By default such a call is refused with an error
	// result and the tool is not run.
	Optional bool
	// Dialog returns the dialog identifier of a call, checked against the
	// offer's dialog (step 5 of section 5.1). MCP defines none: nil skips
	// the check.
	Dialog func(*mcp.CallToolRequest) string
	// Peer returns the AgentID the transport authenticated the caller as.
	// The last status of a retransmitted hop goes back only to its
	// delegator (HC-39). Nil means the bearer token's UserID, when the
	// transport verified one.
	Peer func(*mcp.CallToolRequest) handoff.AgentID
	// OnNotices receives the "canceled" statuses the agent signed for the
	// hops it passed on when a hop it received was canceled (HC-28). It is
	// called after the cancellation was applied, outside any lock.
	OnNotices func(context.Context, []handoff.Notice)
	// OnCancel, when set, is called with the outcome of every "canceled"
	// that arrived in a notifications/cancelled and was handed to
	// Agent.HandleStatus, verified or refused.
	OnCancel func(context.Context, *handoff.StatusResult)
	// OnForeignCancel, when set, is called with the error (wrapping
	// ErrForeignCancel, or handoff.ErrMalformed) of every "canceled" refused
	// before verification because it names no hop accepted on the session
	// it came on.
	OnForeignCancel func(context.Context, error)
	// OnReceive, when set, is called with the outcome of every Receive,
	// before the offer is answered: for logs and audit.
	OnReceive func(context.Context, *handoff.Received)
	// Observe records spans and counters; nil records nothing.
	Observe *observe.Recorder
	// Logger, when set, hears of each delivery and each "canceled" handled: the outcome as the Agent decided
	// it (a slog.LogValuer), with the transport. Nil is silent. Give the
	// Agent a logger too (handoff.Config.Logger) for its own decisions.
	Logger *slog.Logger
	// Approvals, when set, pauses a tool call whose action is must-ask
	// for its owner's approval with an MCP input request (Approvals); nil
	// refuses it (evidence.ErrApprovalRequired), which ends the hop with
	// "failed".
	Approvals *Approvals
	// Evidence, when set, checks the handoff package that comes beside
	// each offer (under PackageKey in params._meta) right after the offer
	// passed the receive checks, before the tool runs: a package that
	// fails, or none, is answered with an error result carrying
	// "rejected", reason "policy", with the findings in the status
	// detail; one that passes gives the hop's guard, under which the tool
	// call runs, and which the tool finds in its context
	// (evidence.GuardFromContext). The hop's acknowledgement and its
	// final disposition are recorded in the guard's authority ledger, the
	// system of record. A retried call that resumes the hop carries the
	// package again, and it is checked again against the same offer. Nil
	// checks no package: the guard, if any, is Approvals.Guard's.
	Evidence *evidence.HostConfig
	// Action names the action of the hop's package a tool call is, by
	// which the guard decides it. Nil means the tool's name: a package
	// then lists the tools it allows, must ask for, and denies.
	Action func(*mcp.CallToolRequest) string
	// ReadOnly reports the tool calls that only read (the readOnlyHint the
	// server declares for its tool, mcp.ToolAnnotations; the SDK does not
	// let a middleware read a tool's annotations): the guard decides each
	// (evidence.Guard.Authorize: allowed, denied, unlisted) and records
	// nothing, and the tool runs every time it is called while its hop is
	// open, as a read must see the state as it is now. A read whose action
	// is "must ask" runs once per approval, as every other call. Nil means
	// none: every call runs once under its key.
	ReadOnly func(*mcp.CallToolRequest) bool
}

// PackageKey is the params._meta key of the handoff package beside the
// Handoff: this project's convention (see the root's package mcp).
const PackageKey = carry.PackageKey

type ctxKey int

const (
	keyReceived ctxKey = iota
	keyOutcome
	keyHandoff
)

// FromContext returns the Received of the hop the call a tool handler
// serves, whose Offer is the verified, accepted offer: on the call that
// carried it first, and on a retried call that resumes the hop's work
// after a pause (handoff.Agent.Resume), never nil in a handler the
// middleware runs.
func FromContext(ctx context.Context) (*handoff.Received, bool) {
	in, ok := ctx.Value(keyReceived).(*handoff.Received)
	return in, ok
}

// Outcome is what a tool handler knows of its work's effect
// ("Knowing the Outcome" in the draft).
type Outcome struct {
	// Effect decides the status: EffectFull "completed"; EffectNone and
	// EffectPartial "failed"; EffectUnknown no terminal status, the hop
	// stays "accepted" (HC-25, HC-45).
	Effect state.Effect
	Reason reason.Code
	// Refs: for "completed" the result; for "failed" every part of the work
	// that took effect (HC-44).
	Refs []ref.Ref
}

// ErrEquivocated is the cause of a tool handler's context when its
// delegator signed another offer under the same hop (HC-54): the handler
// should stop if it can and Report its outcome; "failed" then carries the
// reason "equivocation".
var ErrEquivocated = hopwork.ErrEquivocated

// ErrForeignCancel is the error of a "canceled" that names no hop the
// middleware accepted on the session it came on: a "canceled" captured
// from one call and replayed on another (HC-28, HC-55). No hop's state
// changes.
var ErrForeignCancel = binding.ErrForeign

// Report tells the middleware what the work of the current call achieved.
// Without it, a result that is not an error counts as EffectFull and an
// error result as EffectUnknown. It reports false outside a guarded call.
func Report(ctx context.Context, o Outcome) bool {
	b, ok := ctx.Value(keyOutcome).(*hopwork.Box)
	if ok {
		b.Report(hopwork.Outcome(o))
	}
	return ok
}

// Server returns the receiving middleware of a delegate, for
// mcp.Server.AddReceivingMiddleware.
func Server(cfg ServerConfig) (mcp.Middleware, error) {
	if cfg.Agent == nil {
		return nil, fmt.Errorf("%w: ServerConfig.Agent is required", handoff.ErrConfig)
	}
	if err := cfg.Approvals.validate(); err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, tools: map[string]bool{}, guards: hopcheck.Config{Evidence: cfg.Evidence}}
	if cfg.Approvals != nil {
		s.guards.Guard = cfg.Approvals.Guard
	}
	if err := s.guards.Validate(cfg.Approvals != nil); err != nil {
		return nil, err
	}
	for _, t := range cfg.Tools {
		s.tools[t] = true
	}
	return s.middleware, nil
}

type server struct {
	cfg    ServerConfig
	tools  map[string]bool
	guards hopcheck.Config // where a hop's guard comes from

	running hopwork.Running                   // accepted hops whose tool runs
	served  binding.Table[*mcp.ServerSession] // the hops accepted on each session
}

func (s *server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case methodCallTool:
			if r, ok := req.(*mcp.CallToolRequest); ok && (len(s.tools) == 0 || s.tools[r.Params.Name]) {
				return s.callTool(ctx, r, next)
			}
		case methodCancelled:
			if p, ok := req.GetParams().(*mcp.CancelledParams); ok {
				ss, _ := req.GetSession().(*mcp.ServerSession)
				s.cancelled(ctx, ss, p)
			}
		}
		return next(ctx, method, req)
	}
}

func (s *server) peer(r *mcp.CallToolRequest) handoff.AgentID {
	if s.cfg.Peer != nil {
		return s.cfg.Peer(r)
	}
	if r.Extra != nil && r.Extra.TokenInfo != nil {
		return handoff.AgentID(r.Extra.TokenInfo.UserID)
	}
	return ""
}

func (s *server) callTool(ctx context.Context, r *mcp.CallToolRequest, next mcp.MethodHandler) (mcp.Result, error) {
	octets, err := carry.Handoff(r.Params.Meta)
	if err != nil {
		if errors.Is(err, carry.ErrAbsent) && s.cfg.Optional {
			return next(observe.Extract(ctx, r.Params.Meta), methodCallTool, r)
		}
		_, end := s.cfg.Observe.StartReceive(ctx, Transport)
		end(nil, nil)
		return errorResult("handoff required: "+err.Error(), nil), nil
	}
	host := handoff.Host{Peer: s.peer(r)}
	if s.cfg.Dialog != nil {
		host.Dialog = s.cfg.Dialog(r)
	}
	// The hop's span, a child of the delegator's trace context in _meta
	// when there is one; the tool runs in it. The trace context decides
	// nothing: the offer is checked as if it were absent.
	ctx, span := s.cfg.Observe.StartHop(ctx, Transport, r.Params.Meta)
	defer span.End()
	rctx, end := s.cfg.Observe.StartReceive(ctx, Transport)
	in, err := s.cfg.Agent.Receive(rctx, octets, host)
	end(in, err)
	hopwork.LogReceived(ctx, s.cfg.Logger, Transport, in, err)
	span.Received(in, err)
	if err == nil && s.cfg.OnReceive != nil {
		s.cfg.OnReceive(ctx, in)
	}
	if err != nil {
		// The store could not answer: refuse, never accept (fail closed).
		return nil, fmt.Errorf("handoff: offer refused: %w", err)
	}
	hop := handoff.HopID("")
	if o := hopwork.Verified(in); o != nil {
		hop = o.Hop
	}

	switch {
	case in.Retransmission():
		// The answer to a pause of the hop's work resumes it, with the
		// hop's accepted offer (Agent.Resume) and its package checked
		// again (Approvals).
		if accepted, ok := s.resumable(r, in); ok {
			if rin, err := s.cfg.Agent.Resume(ctx, in); err == nil {
				chk, err := s.check(ctx, r, rin)
				switch {
				case err != nil:
					return textResult("handoff: the hop's work does not resume: "+err.Error(), true), nil
				case chk.Refused:
					return textResult("handoff: the hop's work does not resume: "+chk.Detail, true), nil
				}
				return s.run(ctx, r, rin, accepted, chk.Guard, next)
			}
		}
		// Never processed again (HC-38): answer with what was sent before,
		// to the offer's iss alone, since it tells the hop's state (HC-39).
		if o := in.Refused(); o == nil || host.Peer != o.Iss {
			return textResult(withheld(host.Peer), false), nil
		}
		if last, ok := in.LastStatus(); ok {
			s.sent(ctx, hop, last)
			return statusResult(last, "retransmission: last status resent", false), nil
		}
		if in.OwesAccepted() {
			st, err := s.cfg.Agent.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
			if err != nil {
				return nil, err
			}
			s.sent(ctx, hop, st)
			return statusResult(st, "retransmission: work taken", false), nil
		}
		return textResult("retransmission: not decided yet", false), nil

	case in.Equivocation() != "":
		// The second offer gets no status (HC-53); the first may (HC-54).
		res := errorResult("rejected: equivocation", nil)
		if in.Equivocation() == state.AnswerFinishFirst {
			s.running.Stop(in.Refused().Iss, hop) // stop the first offer's work if it runs
		}
		if in.Equivocation() == state.AnswerRejectFirst {
			st, err := s.cfg.Agent.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: reason.Equivocation})
			if err != nil {
				return nil, err
			}
			s.sent(ctx, hop, st)
			carry.AttachStatus(res.Meta, st)
		}
		return res, nil

	case !in.Accepted():
		// A failed check: the reason code goes back, the detail stays here
		// (HC-05, HC-65).
		var st *handoff.Signed
		if in.StatusDue() {
			signed, err := s.cfg.Agent.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
			if err != nil {
				return nil, err
			}
			s.sent(ctx, hop, signed)
			st = &signed
		}
		return errorResult("rejected: "+string(in.Reason()), st), nil
	}

	// The handoff package beside the offer, checked before any work
	// (ServerConfig.Evidence): one that fails is the offer's refusal.
	chk, err := s.check(ctx, r, in)
	if err != nil {
		return nil, fmt.Errorf("handoff: offer not decided: %w", err) // fail closed
	}
	if err := s.guards.Acknowledge(ctx, chk); err != nil {
		return nil, fmt.Errorf("handoff: offer not decided: %w", err) // fail closed
	}
	if chk.Refused {
		st, err := s.cfg.Agent.Reply(ctx, in, state.Rejected, chk.Rejected())
		if err != nil {
			return nil, err
		}
		s.sent(ctx, hop, st)
		return errorResult("rejected: "+string(reason.Policy)+": the handoff package did not pass", &st), nil
	}

	// Accepted: take the work first, which records the hop as taken, so
	// that a retransmission while the tool runs is told so and answered
	// "accepted" (HC-39); then run the tool. The call gets one reply: it
	// carries "completed" or "failed" once the outcome is known, which
	// implies "accepted" (section 4), so that an "accepted" is signed only
	// for a reply that carries it.
	if err := s.cfg.Agent.Take(ctx, in); err != nil {
		return nil, err
	}
	if b, ok := binding.Of(in); ok && r.Session != nil {
		if s.served.Bind(r.Session, b) {
			go func(ss *mcp.ServerSession) { // forget a session once it ends
				_ = ss.Wait()
				s.served.Unbind(ss)
			}(r.Session)
		}
	}
	return s.run(ctx, r, in, handoff.Signed{}, chk.Guard, next)
}

// check checks the handoff package the call carries beside the offer of
// in (hopcheck.Config.Check).
func (s *server) check(ctx context.Context, r *mcp.CallToolRequest, in *handoff.Received) (hopcheck.Checked, error) {
	obj, err := carry.Package(r.Params.Meta)
	return s.guards.Check(ctx, in, obj, err)
}

// run runs the tool of an accepted hop, taken, or answered with accepted
// when its octets are set, with g, the guard its package gave, or the
// application's, and answers with the status its outcome asks for. Once
// that status ends the hop, the hop is no longer bound to the session: a
// hop that ended is not canceled. A call whose context ended (the SDK
// ends it on notifications/cancelled, before the middleware sees the
// notification) keeps its hop bound, so that the "canceled" that ended it
// is heard whichever comes first, its handling or the tool's outcome.
func (s *server) run(ctx context.Context, r *mcp.CallToolRequest, in *handoff.Received, accepted handoff.Signed, g *evidence.Guard, next mcp.MethodHandler) (mcp.Result, error) {
	res, final, err := s.runTool(ctx, r, in, accepted, g, next)
	if b, ok := binding.Of(in); ok && final && r.Session != nil && ctx.Err() == nil {
		s.served.Forget(r.Session, b)
	}
	return res, err
}

// toolCall is one tools/call of a hop the middleware runs: the call as
// the guard sees it, and what the tool did.
type toolCall struct {
	s    *server
	r    *mcp.CallToolRequest
	in   *handoff.Received
	next mcp.MethodHandler
	g    *evidence.Guard
	call evidence.Call

	ran  bool                // the tool ran
	res  *mcp.CallToolResult // what it returned
	herr error               // the protocol error it ended with
	box  *hopwork.Box        // the outcome it reported
}

// Call returns the guard's view of a tools/call of the hop in: the hop,
// the action (ServerConfig.Action's, else the tool's name), the tool,
// the arguments as they came (the guard binds the digest of their RFC 8785
// form), and the names of the effect: the arguments "operation_id" and
// "idempotency_key" when they are strings, else, as idempotency key, the
// hop itself (its offer's handoff digest): one tools/call is one hop, so
// that the same hop with other arguments is a conflict.
func (s *server) callOf(r *mcp.CallToolRequest, in *handoff.Received) evidence.Call {
	c := evidence.Call{Hop: in.Digest(), Action: r.Params.Name, Tool: r.Params.Name, Args: r.Params.Arguments}
	if s.cfg.Action != nil {
		c.Action = s.cfg.Action(r)
	}
	var names struct {
		OperationID    any `json:"operation_id"`
		IdempotencyKey any `json:"idempotency_key"`
	}
	if json.Unmarshal(r.Params.Arguments, &names) == nil {
		c.OperationID, _ = names.OperationID.(string)
		c.IdempotencyKey, _ = names.IdempotencyKey.(string)
	}
	if c.OperationID == "" && c.IdempotencyKey == "" {
		c.IdempotencyKey = in.Digest().String()
	}
	return c
}

// exec runs the tool once; the JSON of its result is the call's outcome.
func (t *toolCall) exec(ctx context.Context) ([]byte, error) {
	hctx, box, done := t.s.running.Start(context.WithValue(ctx, keyReceived, t.in), t.in)
	res, herr := t.next(context.WithValue(hctx, keyOutcome, box), methodCallTool, t.r)
	done()
	t.ran, t.box, t.herr = true, box, herr
	t.res, _ = res.(*mcp.CallToolResult)
	switch {
	case herr != nil:
		return nil, herr
	case t.res == nil:
		return nil, nil
	}
	b, err := json.Marshal(t.res)
	if err != nil {
		return nil, fmt.Errorf("mcphop: the tool's result does not encode: %w", err)
	}
	return b, nil
}

// effect runs the tool under the hop's guard: once, under the call's key
// (evidence.Guard.Do); a read (ServerConfig.ReadOnly) is decided with
// Authorize, which records nothing, and runs every time, unless its
// action is "must ask", whose approval is for one call.
func (t *toolCall) effect(ctx context.Context) ([]byte, error) {
	if ro := t.s.cfg.ReadOnly; ro != nil && ro(t.r) {
		read := t.call
		read.OperationID, read.IdempotencyKey = "", ""
		err := t.g.Authorize(ctx, read)
		if err == nil {
			return t.exec(ctx)
		}
		if !errors.Is(err, evidence.ErrUnnamed) {
			return nil, err
		}
	}
	return t.g.Do(ctx, t.call, t.exec)
}

// resume runs the retried call that answers a pause (Approvals): its
// request state must open for the hop and name this very call, and the
// pause is taken once (pause.Take) before the tool runs under the guard.
// mismatch reports a state this call does not answer.
func (t *toolCall) resume(ctx context.Context) (mismatch bool, err error) {
	a := t.s.cfg.Approvals
	b, err := pause.Open(a.Key, t.r.Params.RequestState, t.in.Digest(), a.config().Time())
	if err != nil {
		return true, err
	}
	if err := b.Matches(t.call); err != nil {
		return true, err
	}
	_, err = pause.Take(ctx, t.g, b, answerOf(t.r), t.s.operator(t.r), t.effect)
	return false, err
}

// runTool is run; final reports that the answer ended the hop.
//
// With a guard (the package's, or Approvals.Guard's), every tool call runs
// under it: the middleware derives the call (callOf) and runs the tool
// with evidence.Guard.Do, which decides the call's action, claims it under
// its key, runs the tool once and records its result; a call the guard
// refuses never reaches the tool. A must-ask call with Approvals pauses
// for its owner's approval (Approvals), and the retried call that answers
// resumes it.
//
// A refusal before any effect ends the hop with "failed", no refs and
// reason "policy" (hopcheck.Closes; section 4: "failed" with no refs says
// the work took no effect, HC-44): a call the guard refuses (denied,
// unlisted, already performed, approval required without Approvals), an
// answer that declines the approval, or comes once the offer expired; a
// result whose error (CallToolResult.GetError, which the SDK sets from a
// typed handler's error) is a refusal of the hop's guard, unless the tool
// reported another outcome (Report), which wins. The idempotency key
// contract's answers (replayed, in flight, conflict: Idempotency) end
// nothing: the hop's work ran, or runs, under that key.
func (s *server) runTool(ctx context.Context, r *mcp.CallToolRequest, in *handoff.Received, accepted handoff.Signed, g *evidence.Guard, next mcp.MethodHandler) (_ mcp.Result, final bool, _ error) {
	t := &toolCall{s: s, r: r, in: in, next: next}
	g, err := s.guards.GuardOf(ctx, in, g)
	switch {
	case err != nil:
		return s.refused(ctx, t, accepted, err)
	case g == nil:
		_, err = t.exec(ctx) // no guard: the tool runs with the offer alone
	default:
		t.g, t.call = g, s.callOf(r, in)
		ctx = evidence.ContextWithGuard(ctx, g)
		mismatch := false
		if s.cfg.Approvals != nil && r.Params.RequestState != "" {
			mismatch, err = t.resume(ctx)
		} else {
			_, err = t.effect(ctx)
		}
		// Asked for an approval: a client that retries gets the input
		// request; an older one is asked inside the call, and the call is
		// tried again once its answer is recorded.
		for asks := 0; err != nil && !t.ran && !mismatch && s.cfg.Approvals != nil && asks < maxAsks; asks++ {
			if _, ok := pause.Requested(err); !ok {
				break
			}
			paused, again, aerr := s.ask(ctx, r, in, g, err)
			switch {
			case aerr != nil:
				err = aerr
			case !again:
				// The work paused for input: the hop stays "accepted"
				// until the retried call resumes it.
				st, serr := s.accepted(ctx, in, accepted)
				if serr != nil {
					return nil, false, serr
				}
				if st != nil {
					carry.AttachStatus(paused.Meta, *st)
				}
				res, err := inputRequired(paused)
				return res, false, err
			default:
				_, err = t.effect(ctx)
			}
		}
	}
	// The call's answer is signed and recorded whether or not its caller
	// still waits for it: a call canceled (MCP's notifications/cancelled,
	// which ends the request's context first) gets no reply, and its
	// delegator learns the hop's last status by asking again.
	ctx = context.WithoutCancel(ctx)
	if !t.ran {
		return s.refused(ctx, t, accepted, err)
	}
	if t.herr != nil {
		// A protocol error: the outcome is unknown, the hop stays
		// "accepted" and a retransmission is told so (HC-39).
		return t.res, false, t.herr
	}
	switch {
	case errors.Is(err, evidence.ErrUnsettled):
		// The tool ran; its outcome is not in the ledger, where the call
		// stays in flight, never run again until an operator settles it.
		if s.cfg.Logger != nil {
			s.cfg.Logger.WarnContext(ctx, "handoff: the tool call's outcome is not in the authority ledger",
				slog.String("hop", string(in.Offer().Hop)), slog.Any("error", err))
		}
	case err != nil:
		return nil, false, err
	}
	ctr := t.res
	otherwise := hopwork.Outcome{Effect: state.EffectFull}
	if ctr != nil && ctr.IsError {
		otherwise.Effect = state.EffectUnknown
		if hopcheck.Closes(ctr.GetError()) {
			otherwise = hopcheck.Closed
		}
	}
	st, err := s.final(ctx, in, g, t.box, otherwise)
	if err != nil {
		return nil, false, err
	}
	ended := st != nil
	if st == nil {
		if st, err = s.accepted(ctx, in, accepted); err != nil {
			return nil, false, err // outcome unknown: the hop stays "accepted" (HC-45)
		}
	}
	if ctr == nil {
		ctr = &mcp.CallToolResult{}
	}
	if ctr.Meta == nil {
		ctr.Meta = mcp.Meta{}
	}
	if st != nil {
		carry.AttachStatus(ctr.Meta, *st)
	}
	return ctr, ended, nil
}

// refused answers a call whose tool did not run, for err: the idempotency
// key contract's answer (Idempotency), the hop still "accepted"; the hop's
// end, recorded in the ledger (by a replica), with no status; a refusal
// before any effect (hopcheck.Closes), which ends the hop with
// "failed" and no refs; any other, which leaves the hop "accepted" (a
// pause waits for a usable answer).
func (s *server) refused(ctx context.Context, t *toolCall, accepted handoff.Signed, err error) (mcp.Result, bool, error) {
	if m, ok := hopcheck.Idempotent(err, t.key()); ok {
		st, serr := s.accepted(ctx, t.in, accepted)
		if serr != nil {
			return nil, false, serr
		}
		return idempotentResult(m, st), false, nil
	}
	if hopcheck.Ended(err) {
		// Ended, here or on a replica: nothing to sign.
		return errorResult("handoff: the hop ended: "+err.Error(), nil), false, nil
	}
	if hopcheck.Closes(err) {
		st, serr := s.final(ctx, t.in, t.g, &hopwork.Box{}, hopcheck.Closed)
		if serr != nil {
			return nil, false, serr
		}
		return refusedAnswer(err, st), st != nil, nil
	}
	st, serr := s.accepted(ctx, t.in, accepted)
	if serr != nil {
		return nil, false, serr
	}
	return refusedAnswer(err, st), false, nil
}

// key is the call's key, zero without a guard or for a call without one.
func (t *toolCall) key() digest.Digest {
	if t.g == nil {
		return digest.Digest{}
	}
	k, _ := t.call.Key()
	return k
}

// maxAsks bounds the approvals asked for in one call: an answer recorded
// that does not unlock the call (a signed approval of another call) is
// followed by another question, at most this many times.
const maxAsks = 8

// final signs the terminal status the outcome the work reported in box
// asks for, otherwise when it reported none, and records it as the hop's
// final disposition in the authority ledger (hopcheck.Config.Finish,
// through g): nil for an unknown outcome (HC-45), and when the hop moved
// on meanwhile (canceled, or ended by another call).
func (s *server) final(ctx context.Context, in *handoff.Received, g *evidence.Guard, box *hopwork.Box, otherwise hopwork.Outcome) (*handoff.Signed, error) {
	want, o := box.Final(otherwise)
	if want == "" {
		return nil, nil
	}
	st, err := s.cfg.Agent.Reply(ctx, in, want, handoff.ReplyOptions{Effect: o.Effect, Reason: o.Reason, Refs: o.Refs})
	switch {
	case errors.Is(err, handoff.ErrState):
		return nil, nil
	case err != nil:
		return nil, err
	}
	s.sent(ctx, in.Offer().Hop, st)
	if err := s.guards.Finish(ctx, g, in.Digest(), want, string(o.Reason)); err != nil && s.cfg.Logger != nil {
		s.cfg.Logger.WarnContext(ctx, "handoff: the hop's final disposition is not in the authority ledger",
			slog.String("hop", string(in.Offer().Hop)), slog.Any("error", err))
	}
	return &st, nil
}

// accepted returns the "accepted" of a taken hop for a reply that carries
// it: signed already, or signed now (Agent.Reply records it as the hop's
// last status, so that a retransmission gets the same octets). It returns
// nil, and the reply carries no status, when the hop moved on while the
// tool ran: a retransmission was answered "accepted" (HC-39), or the
// delegator canceled the hop.
func (s *server) accepted(ctx context.Context, in *handoff.Received, signed handoff.Signed) (*handoff.Signed, error) {
	if signed.Octets != nil {
		return &signed, nil
	}
	st, err := s.cfg.Agent.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
	switch {
	case errors.Is(err, handoff.ErrState):
		return nil, nil
	case err != nil:
		return nil, err
	}
	s.sent(ctx, in.Offer().Hop, st)
	return &st, nil
}

// cancelled hands a "canceled" carried by notifications/cancelled to the
// agent (HC-28, HC-67) when it names a hop accepted on the session ss.
func (s *server) cancelled(ctx context.Context, ss *mcp.ServerSession, p *mcp.CancelledParams) {
	octets, err := carry.Status(p.Meta)
	if err != nil {
		return
	}
	var hops []binding.Hop
	if ss != nil {
		hops = s.served.Hops(ss)
	}
	own, err := binding.Check(octets, hops)
	if err != nil {
		if s.cfg.OnForeignCancel != nil {
			s.cfg.OnForeignCancel(ctx, err)
		}
		return
	}
	res, err := s.cfg.Agent.HandleStatus(ctx, octets)
	s.cfg.Observe.StatusReceived(ctx, Transport, res, err)
	hopwork.LogStatus(ctx, s.cfg.Logger, Transport, res, err)
	if err != nil {
		return
	}
	if s.cfg.OnCancel != nil {
		s.cfg.OnCancel(ctx, res)
	}
	if binding.Confirm(res, own) != nil {
		return
	}
	// The revocation first: once it is recorded no guard of the hop takes
	// an effect, so that a ledger that holds none knows the outcome.
	if err := s.guards.Finish(ctx, nil, own.Offer, state.Canceled, "canceled by the delegator"); err != nil {
		if s.cfg.Logger != nil {
			s.cfg.Logger.WarnContext(ctx, "handoff: the hop's final disposition is not in the authority ledger",
				slog.String("hop", string(own.Hop)), slog.Any("error", err))
		}
	} else if !s.running.Runs(own.Iss, own.Hop) && s.guards.NoEffect(ctx, nil, own.Offer) {
		// No tool of the hop runs (it paused, or its call ended with an
		// unknown outcome) and the ledger holds no effect of it: its work
		// took none, and can take none now.
		st, err := s.cfg.Agent.ReplyHop(ctx, own.Iss, own.Hop, state.Failed, handoff.ReplyOptions{Effect: state.EffectNone})
		if err == nil {
			s.sent(ctx, own.Hop, st)
		}
	}
	if n := res.Notices; len(n) > 0 && s.cfg.OnNotices != nil {
		s.cfg.OnNotices(ctx, n)
	}
}

func (s *server) sent(ctx context.Context, hop handoff.HopID, st handoff.Signed) {
	if s.cfg.Observe == nil {
		return
	}
	state, reason := state.State(""), reason.Code("")
	if _, sts, err := handoff.InspectUnverified(st, handoff.Limits{}); err == nil && sts != nil {
		state, reason = sts.State, sts.Reason
	}
	s.cfg.Observe.StatusSent(ctx, Transport, hop, state, reason)
}

// withheld is the answer to a retransmission from a caller not
// authenticated as the offer's iss: whatever the hop's state, it is not
// told (HC-39).
func withheld(peer handoff.AgentID) string {
	if peer == "" {
		return "retransmission: status withheld: the caller is not authenticated (ServerConfig.Peer, or a verified " +
			"bearer token, names it), and a hop's status goes only to the offer's iss (HC-39)"
	}
	return fmt.Sprintf("retransmission: status withheld: the caller is authenticated as %q, not as the offer's iss, "+
		"to whom alone a hop's status goes (HC-39)", peer)
}

func textResult(text string, isErr bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: mcp.Meta{}, IsError: isErr, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func statusResult(st handoff.Signed, text string, isErr bool) *mcp.CallToolResult {
	res := textResult(text, isErr)
	carry.AttachStatus(res.Meta, st)
	return res
}

func errorResult(text string, st *handoff.Signed) *mcp.CallToolResult {
	res := textResult(text, true)
	if st != nil {
		carry.AttachStatus(res.Meta, *st)
	}
	return res
}
