// Command adk runs two ADK Go agents (google.golang.org/adk/v2) that hand
// work to each other over A2A 1.0 with the handoff extension, through the
// callbacks of github.com/agentproto/handoff/integrations/adkhop:
//
//   - the triage agent is an ADK runner whose agent is a remote A2A agent
//     for the payments agent. Its before-request callback
//     (adkhop.BeforeRequest) signs an offer for the request and names the
//     handoff package, which travels beside the Handoff; its A2A client
//     (adkhop.ClientProvider, with an a2a1hop.Client) verifies the
//     statuses that come back.
//   - the payments agent is an ADK LLM agent with three tools, served by
//     ADK's A2A executor wrapped in a2a1hop's, which checks the offer and
//     the package before ADK runs (a2a1hop.ServerConfig.Evidence). The
//     guard plugin (adkhop.NewPlugin) checks every tool call against the
//     hop's guard: ledger_read is allowed and runs; card_charge is denied
//     and never runs, the model is told why; refund_issue must be approved
//     by the finance lead, so it asks for ADK's tool confirmation, which
//     reaches the triage agent's user as TASK_STATE_INPUT_REQUIRED.
//
// The user confirms. The answer travels on the hop it answers (no new
// offer); the payments agent records the approval under that hop's guard
// and runs the refund once; the hop completes and the triage agent holds
// no unresolved hop. The payments agent's model is a script, so the
// program needs no network and no model.
//
// Run it with:
//
//	cd examples && go run ./adk
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
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

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/adkhop"
)

const (
	triage      = handoff.AgentID("spiffe://shop.example/agent/triage")
	payments    = handoff.AgentID("spiffe://shop.example/agent/payments")
	triageToken = "triage-token" // stands in for mutual TLS or OAuth
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "adk:", err)
		os.Exit(1)
	}
}

// script is the payments agent's model: it answers from a list, one reply
// per call, and says "done" when the list is spent.
type script struct {
	mu      sync.Mutex
	replies []*genai.Content
}

func (s *script) Name() string { return "script" }

func (s *script) GenerateContent(context.Context, *model.LLMRequest, bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		s.mu.Lock()
		c := genai.NewContentFromText("done: INV-1042 refunded; the card was not charged", genai.RoleModel)
		if len(s.replies) > 0 {
			c, s.replies = s.replies[0], s.replies[1:]
		}
		s.mu.Unlock()
		yield(&model.LLMResponse{Content: c}, nil)
	}
}

func call(name string, args map[string]any) *genai.Content {
	return &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: name, Args: args}}}}
}

type invoiceArgs struct {
	Invoice     string `json:"invoice"`
	OperationID string `json:"operation_id,omitempty"`
}

// counters count the invocations of the payments agent's executor and of
// each of its tools.
type counters struct {
	executions              atomic.Int32
	reads, charges, refunds atomic.Int32
}

// counted is a tool that counts its invocations in n.
func counted(w io.Writer, name string, n *atomic.Int32) (tool.Tool, error) {
	return functiontool.New(functiontool.Config{Name: name, Description: name + " for an invoice"},
		func(_ agent.Context, a invoiceArgs) (map[string]any, error) {
			n.Add(1)
			fmt.Fprintf(w, "payments: %s ran for %s\n", name, a.Invoice)
			return map[string]any{"ok": a.Invoice}, nil
		})
}

// refundPackage is the handoff package of the refund.
func refundPackage() evidence.Package {
	return evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments"},
		Control: evidence.SpecialistReturnsResult,
		Outcome: evidence.Outcome{Result: "INV-1042 refunded", DoneWhen: "the ledger shows the refund"},
		Authority: evidence.Authority{Allowed: []string{"ledger_read"}, MustAsk: []string{"refund_issue"},
			Denied: []string{"card_charge"}},
		State:        []evidence.StateClaim{{System: "ledger", State: "INV-1042 paid", AsOf: time.Now().Add(-time.Minute)}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund", Action: "refund_issue", Owner: "finance-lead"}},
		Next:         evidence.NextAction{Action: "ledger_read", Description: "confirm INV-1042 is paid"},
		Verification: evidence.Verification{Check: "the ledger shows the refund"},
		Timeouts:     []evidence.Timeout{{Condition: "no approval before the offer expires", Owner: "triage"}},
		Rollback:     evidence.Rollback{Method: "void the refund"},
	}
}

// servePayments serves the payments agent over A2A 1.0 and returns its URL.
func servePayments(w io.Writer, agentP *handoff.Agent, ledger authority.Ledger, n *counters) (*httptest.Server, error) {
	model := &script{replies: []*genai.Content{
		call("ledger_read", map[string]any{"invoice": "INV-1042"}),
		call("card_charge", map[string]any{"invoice": "INV-1042"}),
		call("refund_issue", map[string]any{"invoice": "INV-1042", "operation_id": "refund-INV-1042"}),
	}}
	var tools []tool.Tool
	for name, count := range map[string]*atomic.Int32{"ledger_read": &n.reads, "card_charge": &n.charges, "refund_issue": &n.refunds} {
		t, err := counted(w, name, count)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	ag, err := llmagent.New(llmagent.Config{Name: "payments", Description: "refunds", Model: model, Tools: tools})
	if err != nil {
		return nil, err
	}
	// Every tool call is checked against the guard of the hop it serves,
	// which a2a1hop put in the context; a must-ask call asks for ADK's
	// tool confirmation.
	guard, err := adkhop.NewPlugin(adkhop.GuardConfig{Confirm: true,
		OnRefused: func(_ agent.Context, t tool.Tool, err error) {
			fmt.Fprintf(w, "payments: %s refused: %v\n", t.Name(), err)
		}})
	if err != nil {
		return nil, err
	}
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{
		Agent: agentP,
		Executor: adka2a.NewExecutor(adka2a.ExecutorConfig{
			RunnerConfig: runner.Config{AppName: "payments", Agent: ag, SessionService: session.InMemoryService(),
				PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{guard}}},
			BeforeExecuteCallback: func(ctx context.Context, _ *a2asrv.ExecutorContext) (context.Context, error) {
				n.executions.Add(1)
				return ctx, nil
			},
		}),
		Evidence: &evidence.HostConfig{Guard: evidence.GuardConfig{Ledger: ledger}},
	})
	if err != nil {
		return nil, err
	}
	return httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(r *http.Request) (handoff.AgentID, bool) {
			return triage, r.Header.Get("Authorization") == "Bearer "+triageToken
		})), nil
}

type bearer struct {
	a2aclient.PassthroughInterceptor
}

func (bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+triageToken)
	return ctx, nil, nil
}

// syncWriter serializes the writes of both agents.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func run(out io.Writer) error {
	w := &syncWriter{w: out}
	ctx := context.Background()
	triageAgent, paymentsAgent, err := newAgents()
	if err != nil {
		return err
	}
	ledger := authority.NewMemory() // the payments agent's authority ledger
	n := &counters{}
	srv, err := servePayments(w, paymentsAgent, ledger, n)
	if err != nil {
		return err
	}
	defer srv.Close()

	// The triage agent: a remote A2A agent whose every request that
	// starts work carries a signed offer and the refund's package.
	var (
		mu   sync.Mutex
		hops []*handoff.Outgoing
	)
	before, err := adkhop.BeforeRequest(adkhop.RemoteConfig{Agent: triageAgent,
		Params: func(agent.Context, *a2a.SendMessageRequest) (handoff.OfferParams, error) {
			return handoff.OfferParams{To: payments, Task: "refund INV-1042", TTL: time.Minute,
				Deliver: evidence.NewBuilder(refundPackage()).Deliver(evidence.BuildOptions{})}, nil
		},
		OnOffer: func(_ agent.Context, out *handoff.Outgoing) {
			mu.Lock()
			hops = append(hops, out)
			mu.Unlock()
		},
	})
	if err != nil {
		return err
	}
	hc, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: triageAgent})
	if err != nil {
		return err
	}
	card := &a2a.AgentCard{Name: "payments", Description: "refunds", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL, a2a.TransportProtocolJSONRPC)}}
	a2a1hop.Declare(card, true)
	remote, err := remoteagent.NewA2A(remoteagent.A2AConfig{Name: "payments", AgentCard: card,
		BeforeRequestCallbacks: []remoteagent.BeforeA2ARequestCallback{before},
		ClientProvider:         adkhop.ClientProvider(hc, a2aclient.WithCallInterceptors(bearer{}))})
	if err != nil {
		return err
	}
	r, err := runner.New(runner.Config{AppName: "triage", Agent: remote, SessionService: session.InMemoryService(), AutoCreateSession: true})
	if err != nil {
		return err
	}
	runOnce := func(msg *genai.Content) (*genai.FunctionCall, error) {
		var confirm *genai.FunctionCall
		for ev, err := range r.Run(ctx, "alice", "case-77", msg, agent.RunConfig{}) {
			if err != nil {
				return nil, err
			}
			if ev.Content == nil {
				continue
			}
			for _, p := range ev.Content.Parts {
				if p.FunctionCall != nil && p.FunctionCall.Name == toolconfirmation.FunctionCallName {
					confirm = p.FunctionCall
				}
				if p.Text != "" {
					fmt.Fprintf(w, "triage: the payments agent says %q\n", p.Text)
				}
			}
		}
		return confirm, nil
	}

	confirm, err := runOnce(genai.NewContentFromText("refund INV-1042", genai.RoleUser))
	if err != nil {
		return err
	}
	if confirm == nil {
		return fmt.Errorf("the refund asked for no confirmation")
	}
	// The confirmation's payload is the pending approval.
	tc, _ := confirm.Args["toolConfirmation"].(map[string]any)
	payload, _ := tc["payload"].(map[string]any)
	fmt.Fprintf(w, "triage: the payments agent asks alice to confirm %v for %v (operation %v)\n", payload["action"], payload["owner"], payload["operation_id"])
	// Alice confirms: the answer is a function response on the same
	// session, which the remote agent sends on the same task.
	if _, err := runOnce(&genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{
		ID: confirm.ID, Name: toolconfirmation.FunctionCallName, Response: map[string]any{"confirmed": true}}}}}); err != nil {
		return err
	}

	mu.Lock()
	defer mu.Unlock()
	if len(hops) != 1 {
		return fmt.Errorf("%d offers for one piece of work", len(hops))
	}
	info, _, err := triageAgent.Hop(ctx, hops[0].Offer.Hop)
	if err != nil {
		return err
	}
	approvals, err := ledger.Approvals(ctx, hops[0].Digest.String())
	if err != nil {
		return err
	}
	open, err := triageAgent.Unresolved(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "triage: %d offer; the hop is %q, resolved: %v; unresolved hops: %d\n", len(hops), info.State, info.Resolved, len(open))
	fmt.Fprintf(w, "payments: approvals recorded under the hop: %d, by %s\n", len(approvals), approvals[0].Approver)
	fmt.Fprintf(w, "payments: executor runs %d; tool runs: ledger_read %d, card_charge %d, refund_issue %d\n",
		n.executions.Load(), n.reads.Load(), n.charges.Load(), n.refunds.Load())
	return nil
}

// newAgents makes the two agents, each with its own key and each trusting
// the other's public key.
func newAgents() (t, p *handoff.Agent, err error) {
	var signers []*handoff.Signer
	for range 2 {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		s, err := handoff.NewSigner(k, handoff.JWS, nil)
		if err != nil {
			return nil, nil, err
		}
		signers = append(signers, s)
	}
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{triage: {signers[0].Key()}, payments: {signers[1].Key()}})
	if err != nil {
		return nil, nil, err
	}
	if t, err = handoff.NewAgent(handoff.Config{ID: triage, Signer: signers[0], Trust: trust}); err != nil {
		return nil, nil, err
	}
	if p, err = handoff.NewAgent(handoff.Config{ID: payments, Signer: signers[1], Trust: trust}); err != nil {
		return nil, nil, err
	}
	return t, p, nil
}
