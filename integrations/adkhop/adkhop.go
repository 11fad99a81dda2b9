// Package adkhop makes the agents of ADK Go (google.golang.org/adk/v2)
// speak the draft "Signed Handoff Context for Agentic Dialogs" over A2A 1.0,
// through two callbacks of the framework:
//
//   - the delegator's side: BeforeRequest is the before-request callback of
//     a remote A2A agent (remoteagent.A2AConfig.BeforeRequestCallbacks). It
//     makes a signed offer for every request to the remote agent and puts
//     its Handoff in the message's metadata under the extension URI
//     (HC-66); ClientProvider gives the remote agent an A2A client that
//     activates the extension and hands every status that comes back to
//     Agent.HandleStatus (package a2a1hop does both). An agent that runs a
//     hop it received chains the offer to it (HC-46).
//   - the delegate's side: NewPlugin returns a runner plugin that runs
//     every tool call of the receiving agent under the evidence guard of
//     the hop it serves (evidence.Guard) and its idempotency key contract:
//     the before-tool callback decides and claims the call, the
//     after-tool callback records the tool's response; a refused call
//     never runs the tool, and the model is told why; the same call again
//     gets the recorded response, never a second run. The
//     agent is served with a2a1hop.NewExecutor around ADK's A2A executor
//     (server/adka2a/v2), which runs only for an accepted offer; with
//     a2a1hop.ServerConfig.Evidence it checks the handoff package that
//     comes with the offer (RemoteConfig.Params' OfferParams.Deliver) and
//     puts the hop's guard in the context, where the plugin finds it by
//     default (evidence.GuardFromContext).
//
// With GuardConfig.Confirm, a must-ask call pauses in ADK's own terms,
// with tool confirmation: the before-tool callback asks for it
// (agent.Context.RequestConfirmation) with the pending approval (action,
// owner, hop, operation) as its payload, and the tool does not run. When
// the user answers the "adk_request_confirmation" call and ADK runs the
// original call again with the answer (agent.Context.ToolConfirmation), a
// confirmation records the approval of exactly that call in the guard's
// authority ledger (evidence.Guard.ApproveLocal with
// evidence.ApprovalRequest.Grant, under the operator the host
// authenticated, GuardConfig.Operator; or ApproveSigned for a signed
// approval in the payload's "approval") and the guard, asked again,
// allows the call once; a refusal records nothing and the tool never
// runs. The confirmation only records an approval: the guard decides.
// ADK binds the answer to the call it confirms (the function call id, in
// the session); the guard binds the approval to its hop, the call's
// operation, its tool and the digest of its canonical arguments, which
// the payload shows the user.
//
// # Each tool call once
//
// A tool call is the unit of the idempotency key contract, as an MCP
// tools/call is in mcphop: its key is derived from the hop, the tool's
// name (the action), the operation ("operation_id" or "idempotency_key"
// among the arguments, or else the call's key itself) and the digest of
// its canonical arguments (DefaultCall), so that a tool written for ADK
// computes nothing. The reason: ADK runs a tool call between its before-
// and after-tool callbacks, and may run it again (a confirmation, a
// retried turn, a replayed answer, a replica): the plugin claims the call
// in the first (evidence.Guard.Claim) and records its response in the
// second (evidence.Claim.Settle). ADK has no read-only hint: a tool that
// must run again with the same arguments is given an operation id of its
// own by GuardConfig.Call.
//
// # The operator of a confirmation
//
// A confirmation is recorded under the operator the host authenticated,
// never under a name the client chooses: by default the caller the A2A
// transport authenticated for the message that carries it
// (a2a1hop.PeerFromContext), which on a hop's task is the hop's
// delegator, whom alone a2a1hop lets change it. ADK's A2A executor names
// an unauthenticated user after the contextId the client chose, so the
// session's user is never the default. With no authenticated caller (a
// runner of its own, or an A2A server without Authenticate, Peer or an
// authenticated user), a confirmation is not recorded (ErrNoOperator) and
// the tool does not run: set GuardConfig.Operator to name who the host
// authenticated.
//
// # How a hop ends
//
// The hop ends with the task ADK's A2A executor ends (a2a1hop): its
// terminal state carries the hop's terminal status. "completed" says the
// work took full effect (HC-25), which a run that did nothing the model
// was asked for cannot claim: a run one of whose tool calls the guard
// refused before any effect (denied, unlisted, already performed,
// approval declined, confirmed once the offer expired) ends its hop
// "failed", no refs, reason "policy", when the hop's authority ledger
// holds no effect of it (authority.HopRecord.Effects: every tool call the
// plugin let run is claimed there, on every execution of the hop), since
// its work then took none (section 4: '"failed" with no refs tells the
// delegator that the work took no effect'); the delegator resolves it and
// may offer the work again. A run whose tools all ran, or which called
// none (the model's answer is the work), completes; so does a run with a
// refused call and an effect taken, whose outcome the model's answer
// tells: a tool or callback that knows the work fell short says so with
// a2a1hop.Report (EffectPartial, with refs), which wins.
//
// # How the answer travels
//
// Over A2A, ADK's A2A executor turns the confirmation into
// TASK_STATE_INPUT_REQUIRED, and the delegator's remote agent sends the
// user's answer as a message on the same task. That message makes no new
// offer (BeforeRequest): the delegator's a2a1hop.Client attaches the
// task's hop's identical Handoff and package, the delegate resumes that
// hop's work (a2a1hop.FromContext gives its accepted offer,
// handoff.Agent.Resume), the confirmation is recorded under that hop's
// guard, and the hop ends with the task: no hop is left unresolved.
package adkhop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"google.golang.org/adk/v2/agent"
	remoteagent "google.golang.org/adk/v2/agent/remoteagent/v2"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/hopcheck"
	"github.com/agentproto/handoff/integrations/internal/pause"
)

// RemoteConfig configures the offers of a remote A2A agent.
type RemoteConfig struct {
	// Agent is the delegator. Required.
	Agent *handoff.Agent
	// Params returns the offer for one request to the remote agent; its To
	// (the remote agent's AgentID) is required. A Dialog left empty is the
	// message's contextId, and a new one when the message names none; a
	// From left nil is the hop the calling agent runs, when it runs one
	// (a2a1hop.FromContext). Its Deliver names the handoff package, which
	// travels beside the Handoff. Required.
	Params func(ctx agent.Context, req *a2a.SendMessageRequest) (handoff.OfferParams, error)
	// OnOffer, when set, is called with every offer made, for logs and for
	// the caller to follow the hop (Agent.Hop, Agent.Cancel).
	OnOffer func(ctx agent.Context, out *handoff.Outgoing)
}

// BeforeRequest returns the before-request callback that makes a signed
// offer for every request of a remote A2A agent that starts work, and
// attaches its Handoff to the request's message (HC-66), with the object
// OfferParams.Deliver made (a handoff package) beside it (a2a.PackageKey).
// An offer that cannot be made stops the request: the callback returns the
// error and nothing is sent.
//
// A request that continues a task of the remote agent (the message names
// the task: ADK's remote agent sends so the user's answer to a function
// call the remote task asked for, such as a tool confirmation in
// TASK_STATE_INPUT_REQUIRED) makes no offer: it belongs to the hop the
// task runs, and the A2A client's interceptor (ClientProvider's
// a2a1hop.Client) attaches that hop's identical Handoff and package, so
// that the answer travels on the hop it answers, the delegate resumes
// that hop's work (handoff.Agent.Resume), records the approval under it,
// and the hop ends with its task. A client without that interceptor, or
// one that no longer knows the task, sends the answer bare, and the
// delegate changes nothing of the task.
func BeforeRequest(cfg RemoteConfig) (remoteagent.BeforeA2ARequestCallback, error) {
	if cfg.Agent == nil || cfg.Params == nil {
		return nil, fmt.Errorf("%w: RemoteConfig.Agent and RemoteConfig.Params are required", handoff.ErrConfig)
	}
	return func(ctx agent.Context, req *a2a.SendMessageRequest) (*session.Event, error) {
		if req == nil || req.Message == nil {
			return nil, fmt.Errorf("%w: a request without a message", handoff.ErrArgument)
		}
		if req.Message.TaskID != "" {
			return nil, nil // the task's own hop; the interceptor attaches it
		}
		p, err := cfg.Params(ctx, req)
		if err != nil {
			return nil, err
		}
		if p.From == nil {
			if in, ok := a2a1hop.FromContext(ctx); ok {
				p.From = in
			}
		}
		if p.Dialog == "" && p.From == nil {
			p.Dialog = req.Message.ContextID
		}
		if p.Dialog == "" && p.From == nil {
			p.Dialog = a2a.NewContextID()
		}
		out, err := cfg.Agent.Offer(ctx, p)
		if err != nil {
			return nil, err
		}
		if req.Message.ContextID == "" {
			req.Message.ContextID = out.Offer.Dialog // checked against the offer (step 5)
		}
		if req.Message.Metadata == nil {
			req.Message.Metadata = map[string]any{}
		}
		exts, err := carry.AttachHandoff(req.Message.Metadata, req.Message.Extensions, out.Handoff)
		if err != nil {
			return nil, err
		}
		if out.Delivered != nil {
			carry.AttachPackage(req.Message.Metadata, *out.Delivered)
		}
		req.Message.Extensions = exts
		if cfg.OnOffer != nil {
			cfg.OnOffer(ctx, out)
		}
		return nil, nil // send the request
	}, nil
}

// ClientProvider returns the remote agent's A2A client provider: clients
// of the factory opts make, with c among their interceptors, so that the
// extension is activated (A2A-Extensions) and every status in a response
// goes to the delegator's Agent.HandleStatus.
func ClientProvider(c *a2a1hop.Client, opts ...a2aclient.FactoryOption) remoteagent.A2AClientProvider {
	opts = append(opts, a2aclient.WithCallInterceptors(c))
	return remoteagent.NewA2AClientProvider(a2aclient.NewFactory(opts...))
}

// ErrNoGuard is the refusal of a tool call that serves no hop with an
// evidence guard: without one nothing is authorized (fail closed).
var ErrNoGuard = errors.New("handoff: the tool call serves no hop with an evidence guard")

// GuardConfig configures the delegate's plugin.
type GuardConfig struct {
	// Name is the plugin's name; empty means "handoff-guard".
	Name string
	// Guard returns the evidence guard of the hop a tool call serves. Nil
	// means the guard WithGuard put in the context.
	Guard func(ctx context.Context) (*evidence.Guard, bool)
	// Call returns the guard's view of a tool call. Nil means DefaultCall:
	// the verified hop the call serves, the tool's name as the action and
	// the tool, the arguments, and the arguments "operation_id" and
	// "idempotency_key", when they are strings, as its names.
	Call func(ctx agent.Context, t tool.Tool, args map[string]any) evidence.Call
	// OnRefused, when set, is called with every refused call's error.
	OnRefused func(ctx agent.Context, t tool.Tool, err error)
	// Confirm pauses a must-ask call the guard refuses for want of its
	// approval with ADK's tool confirmation (see the package's doc); false
	// refuses it with the guard's evidence.ErrApprovalRequired.
	Confirm bool
	// Operator names the operator a confirmation is recorded under, as a
	// local approval (evidence.Guard.ApproveLocal): who the host
	// authenticated as the one who confirms. Nil means the caller the
	// A2A transport authenticated for the message that carries the
	// confirmation (a2a1hop.PeerFromContext: on the message that resumes
	// a hop's task, the hop's delegator, whom alone a2a1hop lets change
	// it). Never the session's user: over A2A, ADK names an
	// unauthenticated user after the contextId the client chose. With no
	// authenticated caller, and for an empty name, a confirmation is not
	// recorded (ErrNoOperator) and the tool does not run.
	Operator func(ctx agent.Context) string
}

// ErrApprovalDeclined is the refusal of a must-ask call whose tool
// confirmation the user declined: nothing is recorded, the tool does not
// run.
var ErrApprovalDeclined = pause.ErrDeclined

// ErrNoOperator is the refusal of a confirmation that names no operator
// the host authenticated (GuardConfig.Operator): it is not recorded, and
// the tool does not run.
var ErrNoOperator = pause.ErrNoOperator

// ConfirmationHint is the hint of the tool confirmation a must-ask call
// asks for; its payload is the pending approval: action, owner, hop (the
// offer's handoff digest), operation_id, idempotency_key, item, tool, args
// (the digest of the call's canonical arguments), arguments and key (the
// call's key, evidence.Call.Key).
const ConfirmationHint = "handoff: the owner must approve this action"

// WithGuard returns a context whose tool calls the plugin checks against g
// (evidence.ContextWithGuard): set it where the hop's run starts, for
// example in the BeforeExecuteCallback of ADK's A2A executor.
func WithGuard(ctx context.Context, g *evidence.Guard) context.Context {
	return evidence.ContextWithGuard(ctx, g)
}

// GuardFromContext returns the guard WithGuard (or
// evidence.ContextWithGuard) put in ctx.
func GuardFromContext(ctx context.Context) (*evidence.Guard, bool) {
	g := evidence.GuardFromContext(ctx)
	return g, g != nil
}

// NewPlugin returns the plugin that runs every tool call of the agent
// under the hop's evidence guard and its idempotency key contract. Its
// before-tool callback decides the call (GuardConfig.Call's view) and
// claims it under its key (evidence.Guard.Claim: the hop, the action, the
// tool, the operation and the digest of the canonical arguments); its
// after-tool callback records the tool's response as the call's outcome
// (evidence.Claim.Settle). Each tool call is the unit: the same call
// again on the hop (a retried model turn, a replayed confirmation, a
// replica sharing the ledger) never runs the tool a second time, and gets
// as its response the contract's answer, {"outcome": "replayed", "key":
// ..., "result": the response recorded the first time} (the response the
// model sees), or "in_flight" or "conflict" with an "error". A call the
// guard refuses, or any call when there is no guard, never runs the tool;
// its error (a *evidence.Refusal, or ErrNoGuard) becomes the tool's
// response, which the model sees. A call whose tool the agent's own
// before-tool callback answers is settled with that answer. A run that
// ends between the two callbacks leaves the call in flight: it never runs
// again until an operator settles it (authority.Ledger.Settle).
func NewPlugin(cfg GuardConfig) (*plugin.Plugin, error) {
	if cfg.Name == "" {
		cfg.Name = "handoff-guard"
	}
	if cfg.Guard == nil {
		cfg.Guard = GuardFromContext
	}
	if cfg.Call == nil {
		cfg.Call = DefaultCall
	}
	if cfg.Operator == nil {
		cfg.Operator = func(ctx agent.Context) string {
			id, _ := a2a1hop.PeerFromContext(ctx)
			return string(id)
		}
	}
	var claims sync.Map // invocation and function call id -> *evidence.Claim
	claimed := func(ctx agent.Context) string { return ctx.InvocationID() + "\x00" + ctx.FunctionCallID() }
	return plugin.New(plugin.Config{
		Name: cfg.Name,
		BeforeToolCallback: func(ctx agent.Context, t tool.Tool, args map[string]any) (map[string]any, error) {
			g, ok := cfg.Guard(ctx)
			if !ok {
				return refused(ctx, cfg, nil, t, fmt.Errorf("%w: %q", ErrNoGuard, t.Name()))
			}
			call := cfg.Call(ctx, t, args)
			cl, err := g.Claim(ctx, call)
			if req, ok := pause.Requested(err); ok && cfg.Confirm {
				var paused map[string]any
				if cl, paused, err = confirm(ctx, g, cfg, req, call); paused != nil {
					return paused, nil // the tool does not run; the user is asked
				}
			}
			if err != nil {
				if m, ok := hopcheck.Idempotent(err, keyOf(call)); ok {
					return m, nil // the tool does not run: the contract answers
				}
				return refused(ctx, cfg, g, t, err)
			}
			claims.Store(claimed(ctx), cl)
			return nil, nil // the tool runs
		},
		AfterToolCallback: func(ctx agent.Context, _ tool.Tool, _, result map[string]any, err error) (map[string]any, error) {
			v, ok := claims.LoadAndDelete(claimed(ctx))
			if !ok {
				return nil, nil
			}
			res, merr := json.Marshal(result)
			if merr != nil {
				res = nil
			}
			if serr := v.(*evidence.Claim).Settle(ctx, res, err); serr != nil {
				return result, errors.Join(err, serr)
			}
			return nil, nil // the tool's own response
		},
	})
}

// refused is the tool's response to a refused call: err, heard by
// OnRefused. A refusal before any effect (the guard's, a confirmation
// declined or given once the offer expired) is noted for the hop's end
// (see "How a hop ends").
func refused(ctx agent.Context, cfg GuardConfig, g *evidence.Guard, t tool.Tool, err error) (map[string]any, error) {
	if g != nil && hopcheck.Closes(err) {
		a2acore.Refused(ctx, g)
	}
	if cfg.OnRefused != nil {
		cfg.OnRefused(ctx, t, err)
	}
	return nil, err // the tool does not run
}

// keyOf is the call's key, zero for a call that has none.
func keyOf(c evidence.Call) digest.Digest {
	k, _ := c.Key()
	return k
}

// DefaultCall is the guard's view of a tool call when GuardConfig.Call is
// nil: the hop the call serves (the digest of the offer a2a1hop verified
// for it; none when it serves no verified hop, which every guard refuses),
// the tool's name as the action and the tool, the arguments as JSON (the
// guard binds the digest of their RFC 8785 form to the call's key and to
// its approval), and the string arguments "operation_id" and
// "idempotency_key". A call with neither is named by its key: the same
// tool with the same arguments on one hop is one effect (give a tool that
// must run again with the same arguments an operation id of its own).
// Arguments that do not encode as JSON make a call the guard refuses
// (evidence.ErrMalformedCall).
func DefaultCall(ctx agent.Context, t tool.Tool, args map[string]any) evidence.Call {
	c := evidence.Call{Action: t.Name(), Tool: t.Name()}
	if in, ok := a2a1hop.FromContext(ctx); ok {
		c.Hop = in.Digest() // the guard answers only for its own hop
	}
	if b, err := json.Marshal(args); err == nil {
		c.Args = b
	} else {
		c.Args = []byte{0xff} // no canonical form: refused, never unbound
	}
	if v, ok := args["operation_id"].(string); ok {
		c.OperationID = v
	}
	if v, ok := args["idempotency_key"].(string); ok {
		c.IdempotencyKey = v
	}
	return c
}

// confirm is the tool confirmation of a must-ask call the guard refused
// for want of approval: with no answer yet it asks for one and returns the
// tool's response meanwhile; with an answer it records a confirmation of
// exactly that call in the ledger (evidence.ApprovalRequest.Grant), under
// the operator the host authenticated, and claims the call again, or
// refuses a declined one.
func confirm(ctx agent.Context, g *evidence.Guard, cfg GuardConfig, req evidence.ApprovalRequest, call evidence.Call) (*evidence.Claim, map[string]any, error) {
	tc := ctx.ToolConfirmation()
	if tc == nil {
		pending := pause.Of(req).Map()
		if err := ctx.RequestConfirmation(ConfirmationHint, pending); err != nil {
			return nil, nil, err
		}
		return nil, map[string]any{"status": "awaiting approval", "approval": pending}, nil
	}
	ans := pause.Answer{Approve: tc.Confirmed}
	if p, ok := tc.Payload.(map[string]any); ok && tc.Confirmed {
		if s, ok := p["approval"].(string); ok && s != "" {
			ans.Signed = []byte(s)
		}
	}
	if err := pause.Record(ctx, g, pause.BoundOf(req, g.Hop(), time.Time{}), ans, cfg.Operator(ctx)); err != nil {
		return nil, nil, err
	}
	cl, err := g.Claim(ctx, call) // the guard decides, once
	return cl, nil, err
}
