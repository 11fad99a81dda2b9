package adkhop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"
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
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/adkhop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

const (
	planner = handoff.AgentID("spiffe://a.example/planner")
	coder   = handoff.AgentID("spiffe://b.example/coder")
)

// script is a model.LLM that answers from a list, one reply per call: no
// network, no real model.
type script struct {
	mu      sync.Mutex
	replies []*genai.Content
	calls   atomic.Int32
}

func (s *script) Name() string { return "script" }

func (s *script) GenerateContent(_ context.Context, _ *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		s.calls.Add(1)
		s.mu.Lock()
		var c *genai.Content
		if len(s.replies) > 0 {
			c, s.replies = s.replies[0], s.replies[1:]
		} else {
			c = genai.NewContentFromText("done", genai.RoleModel)
		}
		s.mu.Unlock()
		yield(&model.LLMResponse{Content: c}, nil)
	}
}

func call(name string, args map[string]any) *genai.Content {
	return &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: name, Args: args}}}}
}

type toolArgs struct {
	Invoice        string `json:"invoice"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// counted is a tool that counts its invocations.
func counted(t *testing.T, name string, n *atomic.Int32) tool.Tool {
	t.Helper()
	tl, err := functiontool.New(functiontool.Config{Name: name, Description: name},
		func(_ agent.Context, a toolArgs) (map[string]any, error) {
			n.Add(1)
			return map[string]any{"ok": a.Invoice}, nil
		})
	require.NoError(t, err)
	return tl
}

// guardFor returns the evidence guard of a package that passed the check
// against its own offer: ledger.read allowed, refund.issue must ask,
// card.charge denied, and notify key "notify-1" already used.
func guardFor(t *testing.T) *evidence.Guard {
	t.Helper()
	const triage, payments = handoff.AgentID("spiffe://shop.example/triage"), handoff.AgentID("spiffe://shop.example/payments")
	now := time.Now().UTC()
	signers := map[handoff.AgentID]*handoff.Signer{}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range []handoff.AgentID{triage, payments} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		s, err := handoff.NewSigner(k, handoff.JWS, nil)
		require.NoError(t, err)
		signers[id], keys[id] = s, []handoff.TrustedKey{s.Key()}
	}
	trust, err := handoff.NewTrust(keys)
	require.NoError(t, err)
	specialist, err := handoff.NewAgent(handoff.Config{ID: payments, Signer: signers[payments], Trust: trust})
	require.NoError(t, err)
	ledger := []byte(`{"invoice":"INV-1042","status":"paid"}`)
	r := evidence.RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(ledger), Loc: "urn:shop:ledger:INV-1042"})
	pkg := evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments"},
		Control:   evidence.SpecialistReturnsResult,
		Outcome:   evidence.Outcome{Result: "refund INV-1042", DoneWhen: "the refund is settled"},
		Authority: evidence.Authority{Allowed: []string{"ledger_read"}, MustAsk: []string{"refund_issue"}, Denied: []string{"card_charge"}},
		State:     []evidence.StateClaim{{System: "ledger", State: "INV-1042 paid", AsOf: now.Add(-time.Minute), Evidence: []string{"ledger"}}},
		Completed: []evidence.CompletedAction{{Action: "customer_notify", External: true, IdempotencyKey: "notify-1",
			Postcondition: "email queued", Evidence: []string{"ledger"}}},
		Artifacts:    []evidence.Artifact{{ID: "ledger", Ref: r, Proves: "INV-1042 is paid"}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund", Action: "refund_issue", Owner: "finance-lead"}},
		Next:         evidence.NextAction{Action: "ledger_read", Description: "read INV-1042"},
		Verification: evidence.Verification{Check: "ledger_read answers for INV-1042"},
		Rollback:     evidence.Rollback{Method: "void the refund"},
		Timeouts:     []evidence.Timeout{{Condition: "no approval within 4 hours", Owner: "triage", At: now.Add(4 * time.Hour)}},
	}
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	bind := evidence.Binding{Hop: hop, Iss: triage, Aud: payments, Iat: handoff.TimeOf(now), Exp: handoff.TimeOf(now) + 120}
	built, err := evidence.NewBuilder(pkg).Build(bind, evidence.BuildOptions{})
	require.NoError(t, err)
	o := &handoff.Offer{Hop: hop, Dialog: "case-1", Iss: triage, Aud: payments, Iat: bind.Iat, Exp: bind.Exp, Refs: []ref.Ref{built.Ref}}
	offer, err := signers[triage].SignOffer(o)
	require.NoError(t, err)
	wire, err := (&handoff.Handoff{Offer: offer}).Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := specialist.Receive(context.Background(), wire, handoff.Host{Dialog: "case-1"})
	require.NoError(t, err)
	rep, err := evidence.CheckReceived(context.Background(), in, evidence.Delivered{Package: built.Encoded}, evidence.CheckConfig{
		Artifacts: ref.ByLoc(map[string]ref.Object{"urn:shop:ledger:INV-1042": {Octets: ledger}})})
	require.NoError(t, err)
	require.True(t, rep.Acceptable(), "%v", rep.Findings())
	g, err := evidence.NewGuard(context.Background(), rep, evidence.GuardConfig{Ledger: authority.NewMemory()})
	require.NoError(t, err)
	return g
}

// coderServer is the receiving agent: an ADK LLM agent with three tools,
// driven by the script, with the guard plugin, served over A2A 1.0 by ADK's
// A2A executor wrapped in a2a1hop's. guards gives the guard of each hop.
type coderServer struct {
	url                   string
	exec                  atomic.Int32 // ADK executor invocations
	ledger, refund, charg atomic.Int32 // tool invocations
	model                 *script
	mu                    sync.Mutex
	refused               []error
	requested             []bool // whether A2A-Extensions named the extension, per Receive
}

func newCoder(t *testing.T, p *agenttest.Party, guards func(handoff.HopID) (*evidence.Guard, bool), replies ...*genai.Content) *coderServer {
	t.Helper()
	cs := &coderServer{model: &script{replies: replies}}
	ag, err := llmagent.New(llmagent.Config{Name: "coder", Model: cs.model,
		Tools: []tool.Tool{counted(t, "ledger_read", &cs.ledger), counted(t, "refund_issue", &cs.refund), counted(t, "card_charge", &cs.charg)}})
	require.NoError(t, err)
	pl, err := adkhop.NewPlugin(adkhop.GuardConfig{
		Guard: func(ctx context.Context) (*evidence.Guard, bool) {
			in, ok := a2a1hop.FromContext(ctx) // the hop this tool call serves
			if !ok {
				return nil, false
			}
			return guards(in.Offer().Hop)
		},
		// The package of guardFor is bound to an offer of its own, since
		// the planner's offers here carry none: the calls are made under
		// that offer's hop, which DefaultCall would take from the verified
		// hop instead (TestADK_GuardOfAnotherHopRefuses).
		Call: func(ctx agent.Context, tl tool.Tool, args map[string]any) evidence.Call {
			c := adkhop.DefaultCall(ctx, tl, args)
			if in, ok := a2a1hop.FromContext(ctx); ok {
				if g, ok := guards(in.Offer().Hop); ok {
					c.Hop = g.Hop()
				}
			}
			return c
		},
		OnRefused: func(_ agent.Context, _ tool.Tool, err error) {
			cs.mu.Lock()
			cs.refused = append(cs.refused, err)
			cs.mu.Unlock()
		},
	})
	require.NoError(t, err)
	cs.url = serveADK(t, ag, pl, &cs.exec, a2a1hop.ServerConfig{Agent: p.Agent,
		OnReceive: func(ctx context.Context, _ *handoff.Received) {
			exts, ok := a2asrv.ExtensionsFrom(ctx)
			cs.mu.Lock()
			cs.requested = append(cs.requested, ok && exts.Requested(a2a1hop.Extension))
			cs.mu.Unlock()
		}})
	return cs
}

// serveADK serves ag, with the plugin pl, over A2A 1.0: ADK's A2A
// executor, counting its invocations in execs, wrapped in a2a1hop's
// configured by cfg, behind Authenticate, which names the caller by its
// bearer token. It returns the server's URL.
func serveADK(t *testing.T, ag agent.Agent, pl *plugin.Plugin, execs *atomic.Int32, cfg a2a1hop.ServerConfig) string {
	t.Helper()
	cfg.Executor = adka2a.NewExecutor(adka2a.ExecutorConfig{
		RunnerConfig: runner.Config{AppName: "coder", Agent: ag, SessionService: session.InMemoryService(),
			PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{pl}}},
		BeforeExecuteCallback: func(ctx context.Context, _ *a2asrv.ExecutorContext) (context.Context, error) {
			execs.Add(1)
			return ctx, nil
		},
	})
	exec, err := a2a1hop.NewExecutor(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(r *http.Request) (handoff.AgentID, bool) {
			id := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			return handoff.AgentID(id), id != ""
		}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type bearer struct {
	a2aclient.PassthroughInterceptor
	id handoff.AgentID
}

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+string(b.id))
	return ctx, nil, nil
}

func card(url string) *a2a.AgentCard {
	c := &a2a.AgentCard{Name: "coder", Description: "writes patches", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(url, a2a.TransportProtocolJSONRPC)}}
	a2a1hop.Declare(c, true)
	return c
}

// offered keeps the offers the remote agent made.
type offered struct {
	mu   sync.Mutex
	outs []*handoff.Outgoing
}

func (o *offered) add(out *handoff.Outgoing) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outs = append(o.outs, out)
}

func (o *offered) all() []*handoff.Outgoing {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*handoff.Outgoing(nil), o.outs...)
}

// runRemote runs the planner's ADK remote agent for the coder once.
func runRemote(t *testing.T, ps map[handoff.AgentID]*agenttest.Party, url string, offers *offered) []*session.Event {
	t.Helper()
	before, err := adkhop.BeforeRequest(adkhop.RemoteConfig{Agent: ps[planner].Agent,
		Params: func(agent.Context, *a2a.SendMessageRequest) (handoff.OfferParams, error) {
			return handoff.OfferParams{To: coder, Task: "refund-INV-1042"}, nil
		},
		OnOffer: func(_ agent.Context, out *handoff.Outgoing) { offers.add(out) },
	})
	require.NoError(t, err)
	hc, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	remote, err := remoteagent.NewA2A(remoteagent.A2AConfig{Name: "coder", AgentCard: card(url),
		BeforeRequestCallbacks: []remoteagent.BeforeA2ARequestCallback{before},
		ClientProvider:         adkhop.ClientProvider(hc, a2aclient.WithCallInterceptors(bearer{id: planner}))})
	require.NoError(t, err)
	r, err := runner.New(runner.Config{AppName: "planner", Agent: remote, SessionService: session.InMemoryService(), AutoCreateSession: true})
	require.NoError(t, err)
	var events []*session.Event
	for ev, err := range r.Run(context.Background(), "user", "s1", genai.NewContentFromText("refund INV-1042", genai.RoleUser), agent.RunConfig{}) {
		require.NoError(t, err)
		events = append(events, ev)
	}
	return events
}

// Every request of an ADK remote agent carries a signed offer (the
// before-request callback), the coder's ADK executor runs only for the
// verified offer, every tool call is checked against the hop's evidence
// guard (the before-tool callback): the allowed call runs, the denied and
// the must-ask calls never run their tools, and the delegator verifies the
// "completed" that comes back (HC-29, HC-66).
func TestADK_RemoteOffer_And_GuardedTools(t *testing.T) {
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	g := guardFor(t)
	offers := &offered{}
	guards := func(hop handoff.HopID) (*evidence.Guard, bool) {
		for _, o := range offers.all() {
			if o.Offer.Hop == hop {
				return g, true
			}
		}
		return nil, false
	}
	cs := newCoder(t, ps[coder], guards,
		call("ledger_read", map[string]any{"invoice": "INV-1042"}),
		call("card_charge", map[string]any{"invoice": "INV-1042"}),
		call("refund_issue", map[string]any{"invoice": "INV-1042", "operation_id": "refund-INV-1042"}),
		genai.NewContentFromText("checked the ledger; the refund needs approval", genai.RoleModel))
	events := runRemote(t, ps, cs.url, offers)
	require.NotEmpty(t, events)

	require.Len(t, offers.all(), 1, "one offer per remote request")
	require.EqualValues(t, 1, cs.exec.Load(), "ADK executor invocations")
	require.EqualValues(t, 1, cs.ledger.Load(), "the allowed tool runs")
	require.Zero(t, cs.charg.Load(), "a denied tool ran")
	require.Zero(t, cs.refund.Load(), "a must-ask tool ran without its approval")
	cs.mu.Lock()
	require.Equal(t, []bool{true}, cs.requested, "the remote agent's request activated the extension (A2A-Extensions)")
	require.Len(t, cs.refused, 2)
	require.ErrorIs(t, cs.refused[0], evidence.ErrDenied)
	require.ErrorIs(t, cs.refused[1], evidence.ErrApprovalRequired)
	cs.mu.Unlock()
	require.EqualValues(t, 4, cs.model.calls.Load())

	info, _, err := ps[planner].Agent.Hop(context.Background(), offers.all()[0].Offer.Hop)
	require.NoError(t, err)
	require.Equal(t, state.Completed, info.State, "the delegator verified the coder's \"completed\"")
}

// A tool call that serves no hop with a guard is refused (fail closed),
// and a forged, retransmitted or equivocating offer never reaches the ADK
// executor, its model or its tools.
func TestADK_NoGuard_And_RefusedOffers_NeverReachTheAgent(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	none := func(handoff.HopID) (*evidence.Guard, bool) { return nil, false }
	cs := newCoder(t, ps[coder], none, call("ledger_read", map[string]any{"invoice": "INV-1042"}))
	offers := &offered{}
	runRemote(t, ps, cs.url, offers)
	first := offers.all()[0]
	require.EqualValues(t, 1, cs.exec.Load())
	require.Zero(t, cs.ledger.Load(), "a tool ran with no guard")
	cs.mu.Lock()
	require.Len(t, cs.refused, 1)
	require.ErrorIs(t, cs.refused[0], adkhop.ErrNoGuard)
	cs.mu.Unlock()
	modelCalls := cs.model.calls.Load()

	pc, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(cs.url, a2a.TransportProtocolJSONRPC)},
		a2aclient.WithCallInterceptors(bearer{id: planner}, pc))
	require.NoError(t, err)
	defer cl.Destroy()
	msg := func() *a2a.Message {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))
		m.ContextID = first.Offer.Dialog
		return m
	}
	// The remote agent's own offer again: a retransmission.
	h, err := ps[planner].Agent.Retransmit(ctx, first.Offer.Hop)
	require.NoError(t, err)
	res, err := cl.SendMessage(a2a1hop.WithHandoff(ctx, h), &a2a.SendMessageRequest{Message: msg()})
	require.NoError(t, err)
	_, isMsg := res.(*a2a.Message)
	require.True(t, isMsg, "%T", res)
	// An equivocating offer under the same hop, and a forged one.
	res, err = cl.SendMessage(a2a1hop.WithHandoff(ctx, agenttest.Equivocate(t, ps[planner], first, "other-work")), &a2a.SendMessageRequest{Message: msg()})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "d-1", Task: "write-patch"})
	require.NoError(t, err)
	m := msg()
	m.ContextID = "d-1"
	res, err = cl.SendMessage(a2a1hop.WithHandoff(ctx, agenttest.Tamper(t, out.Handoff, "write-patch", "drop-table!")), &a2a.SendMessageRequest{Message: m})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateRejected, res.(*a2a.Task).Status.State)

	require.EqualValues(t, 1, cs.exec.Load(), "the ADK executor ran for a refused offer")
	require.Equal(t, modelCalls, cs.model.calls.Load(), "the model ran for a refused offer")
	require.Zero(t, cs.ledger.Load()+cs.refund.Load()+cs.charg.Load())
}

// The default view of a call names the hop a2a1hop verified for it, and a
// guard answers only for its own hop: a guard of another hop refuses even
// the action its package allows, and the tool never runs (issue 23, the
// hop-bound guard).
func TestADK_GuardOfAnotherHopRefuses(t *testing.T) {
	g := guardFor(t)
	ctx := context.Background()
	call := evidence.Call{Hop: digest.SHA256([]byte("another offer")), Action: "ledger_read"}
	require.ErrorIs(t, g.Authorize(ctx, call), evidence.ErrOtherHop)
	call.Hop = g.Hop()
	require.NoError(t, g.Authorize(ctx, call))
}
