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
//   - the delegate's side: NewPlugin returns a runner plugin whose
//     before-tool callback checks every tool call of the receiving agent
//     against the evidence guard of the hop it serves (evidence.Guard): a
//     refused call never runs the tool, and the model is told why. The
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
// confirmation records the approval in the guard's authority ledger
// (evidence.Guard.ApproveLocal under GuardConfig.Operator, or
// ApproveSigned for a signed approval in the payload's "approval") and the
// guard, asked again, allows the call once; a refusal records nothing and
// the tool never runs. The confirmation only records an approval: the
// guard decides. ADK binds the answer to the call it confirms (the
// function call id, in the session); the guard binds the approval to its
// hop and the call's operation.
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
	"errors"
	"fmt"
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
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/a2a1hop"
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
	// the verified hop the call serves, the tool's name as the action, and
	// the arguments "operation_id" and "idempotency_key", when they are
	// strings, as its identifiers.
	Call func(ctx agent.Context, t tool.Tool, args map[string]any) evidence.Call
	// OnRefused, when set, is called with every refused call's error.
	OnRefused func(ctx agent.Context, t tool.Tool, err error)
	// Confirm pauses a must-ask call the guard refuses for want of its
	// approval with ADK's tool confirmation (see the package's doc); false
	// refuses it with the guard's evidence.ErrApprovalRequired.
	Confirm bool
	// Operator names the operator a confirmation is recorded under, as a
	// local approval (evidence.Guard.ApproveLocal): who the host
	// authenticated as the session's user. Nil means "adk-user:" and the
	// session's UserID; an empty name records nothing.
	Operator func(ctx agent.Context) string
}

// ErrApprovalDeclined is the refusal of a must-ask call whose tool
// confirmation the user declined: nothing is recorded, the tool does not
// run.
var ErrApprovalDeclined = pause.ErrDeclined

// ConfirmationHint is the hint of the tool confirmation a must-ask call
// asks for; its payload is the pending approval: action, owner, hop (the
// offer's handoff digest), operation_id, idempotency_key, item.
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

// NewPlugin returns the plugin whose before-tool callback authorizes every
// tool call with the hop's evidence guard (evidence.Guard.Authorize): a
// call the guard refuses, or any call when there is no guard, never runs
// the tool; its error (a *evidence.Refusal, or ErrNoGuard) becomes the
// tool's response, which the model sees.
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
		cfg.Operator = func(ctx agent.Context) string { return "adk-user:" + ctx.UserID() }
	}
	return plugin.New(plugin.Config{
		Name: cfg.Name,
		BeforeToolCallback: func(ctx agent.Context, t tool.Tool, args map[string]any) (map[string]any, error) {
			g, ok := cfg.Guard(ctx)
			var err error
			if !ok {
				err = fmt.Errorf("%w: %q", ErrNoGuard, t.Name())
			} else {
				call := cfg.Call(ctx, t, args)
				err = g.Authorize(ctx, call)
				if req, ok := pause.Requested(err); ok && cfg.Confirm {
					var paused map[string]any
					if paused, err = confirm(ctx, g, cfg, req, call); paused != nil {
						return paused, nil // the tool does not run; the user is asked
					}
				}
			}
			if err != nil {
				if cfg.OnRefused != nil {
					cfg.OnRefused(ctx, t, err)
				}
				return nil, err // the tool does not run
			}
			return nil, nil
		},
	})
}

// DefaultCall is the guard's view of a tool call when GuardConfig.Call is
// nil: the hop the call serves (the digest of the offer a2a1hop verified
// for it; none when it serves no verified hop, which every guard refuses),
// the tool's name, and the string arguments "operation_id" and
// "idempotency_key".
func DefaultCall(ctx agent.Context, t tool.Tool, args map[string]any) evidence.Call {
	c := evidence.Call{Action: t.Name()}
	if in, ok := a2a1hop.FromContext(ctx); ok {
		c.Hop = in.Digest() // the guard answers only for its own hop
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
// tool's response meanwhile; with an answer it records a confirmation in
// the ledger and asks the guard again, or refuses a declined one.
func confirm(ctx agent.Context, g *evidence.Guard, cfg GuardConfig, req evidence.ApprovalRequest, call evidence.Call) (map[string]any, error) {
	tc := ctx.ToolConfirmation()
	if tc == nil {
		pending := pause.Of(req).Map()
		if err := ctx.RequestConfirmation(ConfirmationHint, pending); err != nil {
			return nil, err
		}
		return map[string]any{"status": "awaiting approval", "approval": pending}, nil
	}
	ans := pause.Answer{Approve: tc.Confirmed}
	if p, ok := tc.Payload.(map[string]any); ok && tc.Confirmed {
		if s, ok := p["approval"].(string); ok && s != "" {
			ans.Signed = []byte(s)
		}
	}
	if err := pause.Record(ctx, g, pause.BoundOf(req, g.Hop(), time.Time{}), ans, cfg.Operator(ctx)); err != nil {
		return nil, err
	}
	return nil, g.Authorize(ctx, call) // the guard decides, once
}
