package adkhop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
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
	"google.golang.org/genai"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/adkhop"
)

// exScript is a model.LLM that answers from a list, one reply per call:
// it stands in for a real model, with no network.
type exScript []*genai.Content

func (s *exScript) Name() string { return "script" }

func (s *exScript) GenerateContent(context.Context, *model.LLMRequest, bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		c := genai.NewContentFromText("done", genai.RoleModel)
		if len(*s) > 0 {
			c, *s = (*s)[0], (*s)[1:]
		}
		yield(&model.LLMResponse{Content: c}, nil)
	}
}

func exCall(name string) *genai.Content {
	return &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: name, Args: map[string]any{}}}}}
}

// exTool is a tool that says when it runs.
func exTool(name string) tool.Tool {
	t, err := functiontool.New(functiontool.Config{Name: name, Description: name},
		func(agent.Context, struct{}) (map[string]any, error) {
			fmt.Println("payments: ran", name)
			return map[string]any{"ok": true}, nil
		})
	if err != nil {
		panic(err)
	}
	return t
}

type exBearer struct {
	a2aclient.PassthroughInterceptor
}

func (exBearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer triage-token")
	return ctx, nil, nil
}

// A triage agent's ADK remote agent hands work to a payments agent, an
// ADK agent served over A2A 1.0. Every request carries a signed offer with
// the handoff package beside it; the payments agent's a2a1hop executor
// checks both before ADK runs, and the guard plugin checks every tool call
// against the hop's guard: the model's call of the allowed tool runs, its
// call of the denied one never does, and the model is told why.
func Example() {
	ctx := context.Background()
	const triageID, paymentsID = handoff.AgentID("spiffe://shop.example/agent/triage"), handoff.AgentID("spiffe://shop.example/agent/payments")
	tk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ts, _ := handoff.NewSigner(tk, handoff.JWS, nil)
	ps, _ := handoff.NewSigner(pk, handoff.JWS, nil)
	trust, _ := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{triageID: {ts.Key()}, paymentsID: {ps.Key()}})
	triage, _ := handoff.NewAgent(handoff.Config{ID: triageID, Signer: ts, Trust: trust})
	payments, _ := handoff.NewAgent(handoff.Config{ID: paymentsID, Signer: ps, Trust: trust})

	// The delegate: an ADK agent whose model calls ledger_read, then
	// card_charge; the plugin finds each hop's guard in the context.
	script := exScript{exCall("ledger_read"), exCall("card_charge")}
	ag, _ := llmagent.New(llmagent.Config{Name: "payments", Model: &script,
		Tools: []tool.Tool{exTool("ledger_read"), exTool("card_charge")}})
	guard, _ := adkhop.NewPlugin(adkhop.GuardConfig{OnRefused: func(_ agent.Context, t tool.Tool, err error) {
		fmt.Println("payments: refused", t.Name()+":", err)
	}})
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: payments,
		Executor: adka2a.NewExecutor(adka2a.ExecutorConfig{RunnerConfig: runner.Config{AppName: "payments", Agent: ag,
			SessionService: session.InMemoryService(), PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{guard}}}}),
		Evidence: &evidence.HostConfig{Guard: evidence.GuardConfig{Ledger: authority.NewMemory()}}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(r *http.Request) (handoff.AgentID, bool) {
			return triageID, r.Header.Get("Authorization") == "Bearer triage-token" // stands in for mTLS or OAuth
		}))
	defer srv.Close()

	// The delegator: a remote A2A agent whose requests carry offers, with
	// the package the offer names.
	pkg := evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments"},
		Control:      evidence.SpecialistReturnsResult,
		Outcome:      evidence.Outcome{Result: "INV-1042 checked", DoneWhen: "the ledger was read"},
		Authority:    evidence.Authority{Allowed: []string{"ledger_read"}, Denied: []string{"card_charge"}},
		State:        []evidence.StateClaim{{System: "ledger", State: "INV-1042 paid", AsOf: time.Now()}},
		Next:         evidence.NextAction{Action: "ledger_read", Description: "read INV-1042"},
		Verification: evidence.Verification{Check: "ledger_read answers for INV-1042"},
		Timeouts:     []evidence.Timeout{{Condition: "no answer before the offer expires", Owner: "triage"}},
		Rollback:     evidence.Rollback{Method: "nothing to undo: reads only"},
	}
	var hop handoff.HopID
	before, _ := adkhop.BeforeRequest(adkhop.RemoteConfig{Agent: triage,
		Params: func(agent.Context, *a2a.SendMessageRequest) (handoff.OfferParams, error) {
			return handoff.OfferParams{To: paymentsID, Task: "check INV-1042",
				Deliver: evidence.NewBuilder(pkg).Deliver(evidence.BuildOptions{})}, nil
		},
		OnOffer: func(_ agent.Context, out *handoff.Outgoing) { hop = out.Offer.Hop },
	})
	hc, _ := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: triage})
	card := &a2a.AgentCard{Name: "payments", Description: "payments", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL, a2a.TransportProtocolJSONRPC)}}
	a2a1hop.Declare(card, true)
	remote, _ := remoteagent.NewA2A(remoteagent.A2AConfig{Name: "payments", AgentCard: card,
		BeforeRequestCallbacks: []remoteagent.BeforeA2ARequestCallback{before},
		ClientProvider:         adkhop.ClientProvider(hc, a2aclient.WithCallInterceptors(exBearer{}))})
	r, _ := runner.New(runner.Config{AppName: "triage", Agent: remote, SessionService: session.InMemoryService(), AutoCreateSession: true})
	for _, err := range r.Run(ctx, "user", "s1", genai.NewContentFromText("check INV-1042", genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			panic(err)
		}
	}
	info, _, _ := triage.Hop(ctx, hop)
	fmt.Println("triage: the hop is", info.State)
	// Output:
	// payments: ran ledger_read
	// payments: refused card_charge: evidence: action denied: "card_charge"
	// triage: the hop is completed
}
