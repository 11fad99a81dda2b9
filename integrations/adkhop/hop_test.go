package adkhop_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/require"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	remoteagent "google.golang.org/adk/v2/agent/remoteagent/v2"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/genai"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/adkhop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// confirmer is the coder served over A2A 1.0: an ADK agent whose must-ask
// refund asks for ADK's tool confirmation, with the guard of the hop each
// run serves, over a ledger every run shares.
type confirmer struct {
	url     string
	refunds atomic.Int32 // the refund's invocations
	execs   atomic.Int32 // the ADK executor's
}

// newConfirmer starts the coder; with guardOf nil, the hop's guard is the
// one a2a1hop builds from the package carried with the offer
// (ServerConfig.Evidence), which the plugin finds by default.
func newConfirmer(t *testing.T, p *agenttest.Party, e *agenttest.Evidence, guardOf func(ctx context.Context) (*evidence.Guard, bool)) *confirmer {
	t.Helper()
	c := &confirmer{}
	model := &script{replies: []*genai.Content{call(agenttest.MustAsk, map[string]any{"invoice": "INV-1042", "operation_id": "refund-INV-1042"})}}
	ag, err := llmagent.New(llmagent.Config{Name: "coder", Model: model, Tools: []tool.Tool{refundTool(t, &c.refunds)}})
	require.NoError(t, err)
	pl, err := adkhop.NewPlugin(adkhop.GuardConfig{Confirm: true, Guard: guardOf})
	require.NoError(t, err)
	cfg := a2a1hop.ServerConfig{Agent: p.Agent}
	if guardOf == nil {
		cfg.Evidence = e.Host()
	}
	c.url = serveADK(t, ag, pl, &c.execs, cfg)
	return c
}

// planner is the delegator's ADK runner with the coder as a remote A2A
// agent, on one session, so that the user's answer goes to the same task.
type delegator struct {
	r      *runner.Runner
	offers offered
}

func newPlanner(t *testing.T, p *agenttest.Party, url string, params handoff.OfferParams) *delegator {
	t.Helper()
	pl := &delegator{}
	before, err := adkhop.BeforeRequest(adkhop.RemoteConfig{Agent: p.Agent,
		Params:  func(agent.Context, *a2a.SendMessageRequest) (handoff.OfferParams, error) { return params, nil },
		OnOffer: func(_ agent.Context, out *handoff.Outgoing) { pl.offers.add(out) },
	})
	require.NoError(t, err)
	hc, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: p.Agent})
	require.NoError(t, err)
	remote, err := remoteagent.NewA2A(remoteagent.A2AConfig{Name: "coder", AgentCard: card(url),
		BeforeRequestCallbacks: []remoteagent.BeforeA2ARequestCallback{before},
		ClientProvider:         adkhop.ClientProvider(hc, a2aclient.WithCallInterceptors(bearer{id: p.ID}))})
	require.NoError(t, err)
	pl.r, err = runner.New(runner.Config{AppName: "planner", Agent: remote, SessionService: session.InMemoryService(), AutoCreateSession: true})
	require.NoError(t, err)
	return pl
}

func (pl *delegator) run(t *testing.T, msg *genai.Content) []*session.Event {
	t.Helper()
	return (&life{r: pl.r}).run(t, msg)
}

// An ADK tool confirmation stays on its hop (finding 4): the coder's
// must-ask refund asks for confirmation through the remote task
// (TASK_STATE_INPUT_REQUIRED), the planner's user answers, and the answer
// travels on the hop it answers (the identical Handoff, no new offer);
// the coder resumes that hop, records the approval under it, and the
// refund runs once; the hop completes and the planner's Unresolved lists
// none. A declined confirmation runs nothing and leaves no hop open
// either: the hop took no effect and ends "failed", no refs, "policy".
func TestADK_Confirm_StaysOnItsHop(t *testing.T) {
	for _, carried := range []bool{false, true} {
		for _, confirmed := range []bool{true, false} {
			ps := agenttest.New(t, agenttest.Spec{ID: "spiffe://a.example/planner", Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
			pp := ps["spiffe://a.example/planner"]
			e := agenttest.NewEvidence(t)
			var (
				mu       sync.Mutex
				guardsOf []handoff.HopID
			)
			guardOf := func(ctx context.Context) (*evidence.Guard, bool) {
				in, ok := a2a1hop.FromContext(ctx)
				if !ok {
					return nil, false
				}
				mu.Lock()
				guardsOf = append(guardsOf, in.Offer().Hop) // the hop each run serves, never nil
				mu.Unlock()
				g, err := e.Guard(ctx, in)
				return g, err == nil
			}
			params := handoff.OfferParams{To: coder, Task: "refund-INV-1042", Prepare: e.Prepare}
			if carried {
				guardOf, params.Prepare, params.Deliver = nil, nil, agenttest.Deliver
			}
			co := newConfirmer(t, ps[coder], e, guardOf)
			pl := newPlanner(t, pp, co.url, params)

			fc := asked(t, pl.run(t, genai.NewContentFromText("refund INV-1042", genai.RoleUser)))
			require.Zero(t, co.refunds.Load(), "the must-ask refund ran before its confirmation")
			require.Len(t, pl.offers.all(), 1)
			hop := pl.offers.all()[0]

			pl.run(t, answer(fc, confirmed))
			require.Len(t, pl.offers.all(), 1, "the answer made no new offer: it travels on the hop it answers")
			require.EqualValues(t, 2, co.execs.Load(), "the asking run and the resumed one")
			approvals, err := e.Ledger.Approvals(context.Background(), hop.Digest.String())
			require.NoError(t, err)
			if confirmed {
				require.EqualValues(t, 1, co.refunds.Load(), "the confirmed refund runs once")
				require.Len(t, approvals, 1, "the approval is recorded under the hop it answers")
				// Finding 5: under the caller the transport authenticated,
				// the hop's delegator, never a name made of the contextId
				// the client chose.
				require.Equal(t, string(pp.ID), string(approvals[0].Evidence), "the operator is the authenticated caller")
				require.Equal(t, authority.SourceOperator, approvals[0].Source)
			} else {
				require.Zero(t, co.refunds.Load(), "a declined refund ran")
				require.Empty(t, approvals)
			}
			mu.Lock()
			for _, h := range guardsOf {
				require.Equal(t, hop.Offer.Hop, h, "every run served the first hop")
			}
			mu.Unlock()
			info, ok, err := pp.Agent.Hop(context.Background(), hop.Offer.Hop)
			require.NoError(t, err)
			require.True(t, ok)
			if !confirmed {
				// Nothing took effect: "failed", no refs, "policy".
				agenttest.RequireClosed(t, pp.Agent, hop.Offer.Hop)
				continue
			}
			require.Equal(t, state.Completed, info.State, "the hop ends with its task")
			open, err := pp.Agent.Unresolved(context.Background())
			require.NoError(t, err)
			require.Empty(t, open, "no hop is left unresolved")
		}
	}
}

// How a hop ends (adkhop's doc): a run one of whose tool calls the guard
// refused before any effect, whose hop the authority ledger holds no
// effect of, ends "failed", no refs, "policy": the work took no effect
// (HC-25: "completed" is for work that took full effect). A run that took
// an effect, or called no tool, completes. Each counts the tools' runs.
func TestADK_RefusedRun_EndsFailed(t *testing.T) {
	for _, c := range []struct {
		name    string
		replies []*genai.Content
		late    bool // the must-ask call is confirmed once the offer expired
		want    state.State
		ran     int32
	}{
		{"Denied", []*genai.Content{call(agenttest.Denied, map[string]any{"invoice": "INV-1042"})}, false, state.Failed, 0},
		{"AlreadyPerformed", []*genai.Content{call(agenttest.Allowed, map[string]any{"invoice": "INV-1042", "operation_id": agenttest.Performed})}, false, state.Failed, 0},
		{"ConfirmedLate", []*genai.Content{call(agenttest.MustAsk, map[string]any{"invoice": "INV-1042", "operation_id": "refund-INV-1042"})}, true, state.Failed, 0},
		{"AllowedThenDenied", []*genai.Content{call(agenttest.Allowed, map[string]any{"invoice": "INV-1042"}),
			call(agenttest.Denied, map[string]any{"invoice": "INV-1042"})}, false, state.Completed, 1},
		{"NoTool", []*genai.Content{genai.NewContentFromText("INV-1042 is paid", genai.RoleModel)}, false, state.Completed, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
			e := agenttest.NewEvidence(t)
			clock := agenttest.NewClock(time.Now())
			e.Now = clock.Now
			var ran, execs atomic.Int32
			ag, err := llmagent.New(llmagent.Config{Name: "coder", Model: &script{replies: c.replies},
				Tools: []tool.Tool{counted(t, agenttest.Allowed, &ran), counted(t, agenttest.Denied, &ran), counted(t, agenttest.MustAsk, &ran)}})
			require.NoError(t, err)
			pl, err := adkhop.NewPlugin(adkhop.GuardConfig{Confirm: true})
			require.NoError(t, err)
			url := serveADK(t, ag, pl, &execs, a2a1hop.ServerConfig{Agent: ps[coder].Agent, Evidence: e.Host()})
			d := newPlanner(t, ps[planner], url, handoff.OfferParams{To: coder, Task: "refund-INV-1042", TTL: time.Minute, Deliver: agenttest.Deliver})

			evs := d.run(t, genai.NewContentFromText("refund INV-1042", genai.RoleUser))
			if c.late {
				fc := asked(t, evs)
				clock.Add(2 * time.Minute) // past the offer's exp
				d.run(t, answer(fc, true))
			}
			require.Equal(t, c.ran, ran.Load(), "the tools' runs")
			require.Len(t, d.offers.all(), 1)
			hop := d.offers.all()[0].Offer.Hop
			if c.want == state.Failed {
				agenttest.RequireClosed(t, ps[planner].Agent, hop)
				return
			}
			info, _, err := ps[planner].Agent.Hop(context.Background(), hop)
			require.NoError(t, err)
			require.Equal(t, c.want, info.State)
		})
	}
}
