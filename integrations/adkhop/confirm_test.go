package adkhop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/adkhop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// confirming is the delegate's side: the hop it received, with an evidence
// package bound to its offer, and the sessions that outlive a restart.
type confirming struct {
	e        *agenttest.Evidence
	in       *handoff.Received
	sessions session.Service
	now      *agenttest.Clock
}

func newConfirming(t *testing.T) *confirming {
	t.Helper()
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	c := &confirming{e: agenttest.NewEvidence(t), sessions: session.InMemoryService(), now: agenttest.NewClock(time.Now())}
	c.e.Now = c.now.Now
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "case-1", TTL: time.Minute, Prepare: c.e.Prepare})
	require.NoError(t, err)
	wire, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	c.in, err = ps[coder].Agent.Receive(ctx, wire, handoff.Host{Dialog: "case-1"})
	require.NoError(t, err)
	require.True(t, c.in.Accepted())
	return c
}

// life is one process of the delegate: a runner whose agent calls the
// must-ask refund, with the guard plugin asking for tool confirmation, and
// a guard built anew over the shared ledger.
type life struct {
	r       *runner.Runner
	refunds atomic.Int32
}

type refundArgs struct {
	Invoice     string `json:"invoice"`
	OperationID string `json:"operation_id"`
}

// refundTool is the must-ask refund; it counts its invocations.
func refundTool(t *testing.T, n *atomic.Int32) tool.Tool {
	t.Helper()
	tl, err := functiontool.New(functiontool.Config{Name: agenttest.MustAsk, Description: "refund an invoice"},
		func(_ agent.Context, a refundArgs) (map[string]any, error) {
			n.Add(1)
			return map[string]any{"refunded": a.Invoice}, nil
		})
	require.NoError(t, err)
	return tl
}

func (c *confirming) start(t *testing.T) *life {
	t.Helper()
	return c.startAs(t, func(agent.Context) string { return "console:alice" })
}

// startAs starts a life whose confirmations are recorded under the
// operator op names: who the host authenticated at its console; nil
// leaves GuardConfig.Operator to its default.
func (c *confirming) startAs(t *testing.T, op func(agent.Context) string) *life {
	t.Helper()
	l := &life{}
	model := &script{replies: []*genai.Content{call(agenttest.MustAsk, map[string]any{"invoice": "INV-1042", "operation_id": "refund-INV-1042"})}}
	ag, err := llmagent.New(llmagent.Config{Name: "coder", Model: model, Tools: []tool.Tool{refundTool(t, &l.refunds)}})
	require.NoError(t, err)
	g, err := c.e.Guard(context.Background(), c.in)
	require.NoError(t, err)
	pl, err := adkhop.NewPlugin(adkhop.GuardConfig{Confirm: true, Operator: op,
		Guard: func(context.Context) (*evidence.Guard, bool) { return g, true },
		Call: func(ctx agent.Context, tl tool.Tool, args map[string]any) evidence.Call {
			cl := adkhop.DefaultCall(ctx, tl, args)
			cl.Hop = c.in.Digest()
			return cl
		}})
	require.NoError(t, err)
	l.r, err = runner.New(runner.Config{AppName: "coder", Agent: ag, SessionService: c.sessions, AutoCreateSession: true,
		PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{pl}}})
	require.NoError(t, err)
	return l
}

func (l *life) run(t *testing.T, msg *genai.Content) []*session.Event {
	t.Helper()
	var evs []*session.Event
	for ev, err := range l.r.Run(context.Background(), "alice", "s1", msg, agent.RunConfig{}) {
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	return evs
}

// asked returns the "adk_request_confirmation" call of the events.
func asked(t *testing.T, evs []*session.Event) *genai.FunctionCall {
	t.Helper()
	for _, ev := range evs {
		if ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			if p.FunctionCall != nil && p.FunctionCall.Name == toolconfirmation.FunctionCallName {
				return p.FunctionCall
			}
		}
	}
	t.Fatal("no tool confirmation was asked for")
	return nil
}

// answer is the scripted approver's reply to the confirmation fc.
func answer(fc *genai.FunctionCall, confirmed bool) *genai.Content {
	return &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{
		ID: fc.ID, Name: toolconfirmation.FunctionCallName, Response: map[string]any{"confirmed": confirmed}}}}}
}

func (c *confirming) approvals(t *testing.T) int {
	t.Helper()
	as, err := c.e.Ledger.Approvals(context.Background(), c.in.Digest().String())
	require.NoError(t, err)
	return len(as)
}

// The must-ask refund asks for ADK's tool confirmation with the pending
// approval as its payload, and does not run; the scripted approver
// confirms, the approval is recorded in the ledger and the refund runs
// once.
func TestADK_Confirm_Approve(t *testing.T) {
	c := newConfirming(t)
	l := c.start(t)
	fc := asked(t, l.run(t, genai.NewContentFromText("refund INV-1042", genai.RoleUser)))
	require.Zero(t, l.refunds.Load(), "the must-ask refund ran before its approval")
	tc, ok := fc.Args["toolConfirmation"].(map[string]any)
	if !ok { // the SDK may keep the typed value
		v, _ := fc.Args["toolConfirmation"].(toolconfirmation.ToolConfirmation)
		tc = map[string]any{"payload": v.Payload}
	}
	p, _ := tc["payload"].(map[string]any)
	require.Equal(t, agenttest.MustAsk, p["action"])
	require.Equal(t, agenttest.Owner, p["owner"])
	require.Equal(t, c.in.Digest().String(), p["hop"])
	require.Equal(t, "refund-INV-1042", p["operation_id"])
	// The owner is shown the call: its tool, its arguments and their
	// digest, and its key.
	args := map[string]any{"invoice": "INV-1042", "operation_id": "refund-INV-1042"}
	require.Equal(t, agenttest.MustAsk, p["tool"])
	require.Equal(t, args, p["arguments"])
	enc, err := json.Marshal(args)
	require.NoError(t, err)
	d, err := evidence.ArgsDigest(enc)
	require.NoError(t, err)
	require.Equal(t, d.String(), p["args"])
	k, err := evidence.Call{Hop: c.in.Digest(), Action: agenttest.MustAsk, Tool: agenttest.MustAsk, Args: enc, OperationID: "refund-INV-1042"}.Key()
	require.NoError(t, err)
	require.Equal(t, k.String(), p["key"])

	l.run(t, answer(fc, true))
	require.EqualValues(t, 1, l.refunds.Load(), "the confirmed refund runs once")
	require.Equal(t, 1, c.approvals(t), "the approval is in the ledger")
	l.run(t, answer(fc, true)) // the same answer again
	require.EqualValues(t, 1, l.refunds.Load(), "once")
	require.Equal(t, 1, c.approvals(t), "the same answer again records nothing: the call is replayed first")
	rs, err := c.e.Ledger.Lookup(context.Background(), "refund-INV-1042")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.False(t, rs[0].InFlight, "settled with the tool's response")
	require.JSONEq(t, `{"refunded":"INV-1042"}`, string(rs[0].Outcome.Result))
}

// Finding 5: the operator a confirmation is recorded under is never taken
// from a value the client chooses. With no operator the host
// authenticated (GuardConfig.Operator left to its default, and no A2A
// caller authenticated: a runner of its own), the confirmation is not
// recorded and the tool never runs; before, it was recorded under
// "adk-user:" and the session's user, which ADK's A2A executor names
// after the client's contextId when no user is authenticated.
func TestADK_Confirm_NoAuthenticatedOperator(t *testing.T) {
	c := newConfirming(t)
	var refused []error
	l := c.startAs(t, nil)
	fc := asked(t, l.run(t, genai.NewContentFromText("refund INV-1042", genai.RoleUser)))
	evs := l.run(t, answer(fc, true))
	require.Zero(t, l.refunds.Load(), "a confirmation without an authenticated operator ran the refund")
	require.Zero(t, c.approvals(t), "nor was it recorded")
	for _, ev := range evs {
		if ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			if r := p.FunctionResponse; r != nil && r.Name == agenttest.MustAsk {
				refused = append(refused, errors.New(fmt.Sprint(r.Response["error"])))
			}
		}
	}
	require.Len(t, refused, 1)
	require.Contains(t, refused[0].Error(), adkhop.ErrNoOperator.Error())
}

// A declined confirmation records nothing and never runs the refund.
func TestADK_Confirm_Deny(t *testing.T) {
	c := newConfirming(t)
	l := c.start(t)
	fc := asked(t, l.run(t, genai.NewContentFromText("refund INV-1042", genai.RoleUser)))
	l.run(t, answer(fc, false))
	require.Zero(t, l.refunds.Load(), "a declined refund ran")
	require.Zero(t, c.approvals(t))
}

// No answer until the hop's timeout: the guard's authority ends with the
// offer, and the late confirmation runs nothing.
func TestADK_Confirm_NoAnswerUntilTimeout(t *testing.T) {
	c := newConfirming(t)
	l := c.start(t)
	fc := asked(t, l.run(t, genai.NewContentFromText("refund INV-1042", genai.RoleUser)))
	c.now.Add(2 * time.Minute) // past the offer's exp
	l.run(t, answer(fc, true))
	require.Zero(t, l.refunds.Load(), "an unanswered refund ran")
}

// The delegate restarts between the pause and the answer (the sessions and
// the ledger outlive it): the confirmation after the restart runs the
// refund once; an approval recorded before a restart is honoured after it,
// once.
func TestADK_Confirm_RestartInBetween(t *testing.T) {
	c := newConfirming(t)
	before := c.start(t)
	fc := asked(t, before.run(t, genai.NewContentFromText("refund INV-1042", genai.RoleUser)))
	after := c.start(t)
	after.run(t, answer(fc, true))
	require.EqualValues(t, 1, after.refunds.Load())
	require.Zero(t, before.refunds.Load())

	c2 := newConfirming(t)
	before = c2.start(t)
	fc = asked(t, before.run(t, genai.NewContentFromText("refund INV-1042", genai.RoleUser)))
	g, err := c2.e.Guard(context.Background(), c2.in)
	require.NoError(t, err)
	_, err = g.ApproveLocal(context.Background(), evidence.Grant{Action: agenttest.MustAsk, OperationID: "refund-INV-1042", Approver: agenttest.Owner}, "console:alice")
	require.NoError(t, err)
	after = c2.start(t)
	after.run(t, answer(fc, true))
	require.EqualValues(t, 1, after.refunds.Load(), "the approval recorded before the restart, used once")
}
