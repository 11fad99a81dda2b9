package contract

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	remoteagent "google.golang.org/adk/v2/agent/remoteagent/v2"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	adka2a "google.golang.org/adk/v2/server/adka2a/v2"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/adkhop"
)

// follower is the delegate's model: it keeps nothing between calls. Asked
// "call <tool>", it calls that tool with the names the package gives its
// effect; given a tool's response, it says it is done.
type follower struct{}

func (follower) Name() string { return "follower" }

func (follower) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		reply := genai.NewContentFromText("nothing to do", genai.RoleModel)
		if n := len(req.Contents); n > 0 {
			last := req.Contents[n-1]
			for _, p := range last.Parts {
				if p.FunctionResponse != nil {
					reply = genai.NewContentFromText("done", genai.RoleModel)
				}
				if action, ok := strings.CutPrefix(p.Text, "call "); ok {
					args := map[string]any{"invoice": "INV-1042"}
					if n := names[action]; n.op != "" {
						args["operation_id"] = n.op
					} else if n.key != "" {
						args["idempotency_key"] = n.key
					}
					reply = &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: action, Args: args}}}}
				}
			}
		}
		yield(&model.LLMResponse{Content: reply}, nil)
	}
}

type adkArgs struct {
	Invoice        string `json:"invoice"`
	OperationID    string `json:"operation_id,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// adkHandler serves an ADK agent with one tool per action over A2A 1.0:
// ADK's A2A executor, wrapped by a2a1hop's, which checks the package beside
// each offer; the guard plugin checks every tool call against the hop's
// guard, and asks for ADK's tool confirmation for a must-ask one. The
// specialist's result is returned with the hop's "completed"
// (a2a1hop.Report). A run whose tool call the guard refused, with no
// effect of the hop in the ledger, ends "failed", no refs, "policy"; a
// canceled hop that took no effect ends "failed", no refs: the wrapper
// knows both from the ledger.
func (e *env) adkHandler() (http.Handler, error) {
	var tools []tool.Tool
	for action := range names {
		t, err := functiontool.New(functiontool.Config{Name: action, Description: action + " for an invoice"},
			func(ctx agent.Context, _ adkArgs) (map[string]any, error) {
				in, _ := a2a1hop.FromContext(ctx)
				refs, err := e.effect(in, action)
				if err != nil {
					return nil, err
				}
				if refs != nil && !a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectFull, Refs: refs}) {
					return nil, fmt.Errorf("the result could not be reported")
				}
				return map[string]any{"done": action}, nil
			})
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	ag, err := llmagent.New(llmagent.Config{Name: "payments", Description: "refunds", Model: follower{}, Tools: tools})
	if err != nil {
		return nil, err
	}
	guard, err := adkhop.NewPlugin(adkhop.GuardConfig{Confirm: true})
	if err != nil {
		return nil, err
	}
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{
		Agent: e.agent,
		Executor: adka2a.NewExecutor(adka2a.ExecutorConfig{
			RunnerConfig: runner.Config{AppName: "payments", Agent: ag, SessionService: session.InMemoryService(),
				PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{guard}}},
			BeforeExecuteCallback: func(ctx context.Context, _ *a2asrv.ExecutorContext) (context.Context, error) {
				e.count("handler")
				return ctx, nil
			},
		}),
		Evidence: e.evidence(),
		OnCancel: func(_ context.Context, res *handoff.StatusResult) {
			if res.Err() == nil {
				e.count("cancel")
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)), bearerPeer), nil
}

// adkDelegator is the delegator's ADK runner, whose agent is a remote A2A
// agent for the delegate, and an A2A client with the same handoff Client
// for its cancels.
type adkDelegator struct {
	t      *testing.T
	w      *world
	r      *runner.Runner
	hc     *a2a1hop.Client
	cl     *a2aclient.Client
	params handoff.OfferParams
	out    *handoff.Outgoing
	n      int // sessions: one per hop
	offers int // offers the remote agent made
}

func dialADK(t *testing.T, w *world, url string) *adkDelegator {
	t.Helper()
	c := &adkDelegator{t: t, w: w}
	before, err := adkhop.BeforeRequest(adkhop.RemoteConfig{Agent: w.agent,
		Params:  func(agent.Context, *a2a.SendMessageRequest) (handoff.OfferParams, error) { return c.params, nil },
		OnOffer: func(_ agent.Context, out *handoff.Outgoing) { c.out, c.offers = out, c.offers+1 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.hc, err = a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: w.agent}); err != nil {
		t.Fatal(err)
	}
	card := &a2a.AgentCard{Name: "payments", Description: "refunds", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(url, a2a.TransportProtocolJSONRPC)}}
	a2a1hop.Declare(card, true)
	remote, err := remoteagent.NewA2A(remoteagent.A2AConfig{Name: "payments", AgentCard: card,
		BeforeRequestCallbacks: []remoteagent.BeforeA2ARequestCallback{before},
		ClientProvider:         adkhop.ClientProvider(c.hc, a2aclient.WithCallInterceptors(bearer{}))})
	if err != nil {
		t.Fatal(err)
	}
	if c.r, err = runner.New(runner.Config{AppName: "triage", Agent: remote, SessionService: session.InMemoryService(), AutoCreateSession: true}); err != nil {
		t.Fatal(err)
	}
	if c.cl, err = a2aclient.NewFromEndpoints(context.Background(), card.SupportedInterfaces, a2aclient.WithCallInterceptors(bearer{}, c.hc)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cl.Destroy() })
	return c
}

// run sends msg on the session of the current hop and returns the tool
// confirmation the delegate asks for, if any.
func (c *adkDelegator) run(msg *genai.Content) *genai.FunctionCall {
	c.t.Helper()
	var confirm *genai.FunctionCall
	for ev, err := range c.r.Run(context.Background(), "alice", fmt.Sprintf("case-%d", c.n), msg, agent.RunConfig{}) {
		if err != nil {
			c.t.Fatal(err)
		}
		if ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			if p.FunctionCall != nil && p.FunctionCall.Name == toolconfirmation.FunctionCallName {
				confirm = p.FunctionCall
			}
		}
	}
	return confirm
}

// ask starts a hop on a session of its own (the delegate's ADK session is
// the hop's, no other) that asks the delegate to call one tool.
func (c *adkDelegator) ask(p handoff.OfferParams) (*handoff.Outgoing, *genai.FunctionCall) {
	c.t.Helper()
	c.n++
	c.params, c.out = p, nil
	confirm := c.run(genai.NewContentFromText("call "+p.Task, genai.RoleUser))
	if c.out == nil {
		c.t.Fatalf("%s: no offer was made", p.Task)
	}
	return c.out, confirm
}

// askConfirm starts the hop of the must-ask refund, which asks for its
// confirmation.
func (c *adkDelegator) askConfirm() (*handoff.Outgoing, *genai.FunctionCall) {
	c.t.Helper()
	out, fc := c.ask(offer(actRefund, ledgerEntry, evidence.TransferOwnership))
	if fc == nil {
		c.t.Fatal("the must-ask refund asked for no confirmation")
	}
	return out, fc
}

// confirm answers the confirmation on the hop's session.
func (c *adkDelegator) confirm(fc *genai.FunctionCall, confirmed bool) {
	c.t.Helper()
	c.run(&genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{
		ID: fc.ID, Name: toolconfirmation.FunctionCallName, Response: map[string]any{"confirmed": confirmed}}}}})
}

func (c *adkDelegator) hopState(out *handoff.Outgoing) handoff.HopInfo {
	c.t.Helper()
	info, ok, err := c.w.agent.Hop(context.Background(), out.Offer.Hop)
	if err != nil || !ok {
		c.t.Fatalf("hop %s: %v %v", out.Offer.Hop, ok, err)
	}
	return info
}

// TestContract_ADK is the contract's test over ADK Go, through A2A 1.0.
func TestContract_ADK(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)

	// The main run.
	d := w.startDelegate("adk")
	c := dialADK(t, w, d.url)

	out, _ := c.ask(offer(actRead, ledgerEntry, evidence.TransferOwnership))
	requireState(t, "allowed", c.hopState(out).State, state.Completed)
	w.record("allowed", out, state.Completed, "", authority.Accepted).took()

	// A refused tool call never runs the tool; the model is told why, and
	// the agent's run ends; the hop, which took no effect, ends "failed",
	// no refs, "policy" (adkhop: how a hop ends).
	for _, refused := range []struct{ name, action string }{
		{"denied", actCharge}, {"unlisted", actUnknown}, {"already performed", actNotify},
	} {
		out, _ := c.ask(offer(refused.action, ledgerEntry, evidence.TransferOwnership))
		requireState(t, refused.name, c.hopState(out).State, state.Failed)
		w.record(refused.name, out, state.Failed, reason.Policy, authority.Accepted)
	}

	out, fc := c.askConfirm()
	requireState(t, "must ask, paused", c.hopState(out).State, state.Accepted)
	offers := c.offers
	c.confirm(fc, true)
	requireState(t, "must ask, confirmed", c.hopState(out).State, state.Completed)
	if c.offers != offers {
		t.Errorf("the confirmation made an offer of its own: it must travel on the hop it answers")
	}
	w.record("must ask", out, state.Completed, "", authority.Accepted).took().approvals = 1

	out, _ = c.ask(offer(actRead, staleEntry, evidence.TransferOwnership))
	requireState(t, "stale", c.hopState(out).State, state.Rejected)
	w.record("stale state", out, state.Rejected, reason.Policy, authority.Rejected, string(evidence.CodeArtifactMismatch))
	out, _ = c.ask(restricted(actRead))
	requireState(t, "restricted", c.hopState(out).State, state.Rejected)
	w.record("restricted data", out, state.Rejected, reason.Policy, authority.Rejected, string(evidence.CodeRestricted))

	// The paused run and its resumption make two executions.
	requireCounts(t, d.counts(), map[string]int{"handler": 6, actRead: 1, actRefund: 1, actCharge: 0, actUnknown: 0, actNotify: 0})
	d.kill()

	// Timeout: the confirmation comes once the offer expired.
	d = w.startDelegate("adk")
	c = dialADK(t, w, d.url)
	out, fc = c.askConfirm()
	requireOverdue(t, out)
	d.advance(31 * time.Second)
	c.confirm(fc, true)
	requireState(t, "timeout, confirmed late", c.hopState(out).State, state.Failed)
	w.record("timeout", out, state.Failed, reason.Policy, authority.Accepted)
	requireCounts(t, d.counts(), map[string]int{"handler": 2, actRefund: 0})
	d.kill()

	// Cancellation of the paused hop.
	d = w.startDelegate("adk")
	c = dialADK(t, w, d.url)
	out, fc = c.askConfirm()
	task, _, err := c.hc.Cancel(ctx, c.cl, out.Offer.Hop)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("the canceled task is %s", task.Status.State)
	}
	requireResolved(t, w, out.Offer.Hop, state.Failed)
	requireState(t, "canceled, asked again", lastStatus(t, c.hc, c.cl, out.Offer.Hop), state.Failed)
	w.record("canceled", out, state.Failed, "", authority.Accepted).canceled(false)
	requireCounts(t, d.counts(), map[string]int{"handler": 1, "cancel": 1, actRefund: 0})
	d.kill()

	// Return to sender.
	d = w.startDelegate("adk")
	c = dialADK(t, w, d.url)
	out, _ = c.ask(offer(actReport, ledgerEntry, evidence.SpecialistReturnsResult))
	info := c.hopState(out)
	requireState(t, "return", info.State, state.Completed)
	st, err := handoff.OpenStatus(info.Status, w.trust, handoff.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	requireResult(t, w, st, out)
	w.record("return to sender", out, state.Completed, "", authority.Accepted).took()
	requireCounts(t, d.counts(), map[string]int{"handler": 1, actReport: 1})
	d.kill()

	w.readBack()
}
