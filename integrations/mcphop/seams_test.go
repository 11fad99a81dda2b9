package mcphop_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
)

// The seams of issue 32 over MCP: the package rides with its offer
// (finding 1), a resumed call is a hop like any other (finding 2), and
// every refusal before any effect closes its hop (finding 3).

type opArgs struct {
	Action    string `json:"action"`
	Operation string `json:"operation_id,omitempty"`
}

// guarded is a delegate whose "act" tool is the action it is called with
// (ServerConfig.Action), which the middleware runs under the hop's guard
// and pauses for a must-ask approval. It counts the tool's invocations.
type guarded struct {
	server *mcp.Server
	ran    atomic.Int32
	mu     sync.Mutex
	hops   []handoff.HopID // FromContext(ctx).Offer().Hop, per run
	guards []handoff.HopID // the Received Approvals.Guard got, per call
	found  []bool          // evidence.GuardFromContext found the guard, per run
}

func newGuarded(t *testing.T, p *agenttest.Party, e *agenttest.Evidence, now *agenttest.Clock, pkg bool) *guarded {
	t.Helper()
	g := &guarded{server: mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)}
	cfg := hmcp.ServerConfig{Agent: p.Agent, Peer: func(*mcp.CallToolRequest) handoff.AgentID { return planner },
		Approvals: &hmcp.Approvals{Key: stateKey, Now: now.Now},
		Action: func(r *mcp.CallToolRequest) string {
			var a opArgs
			_ = json.Unmarshal(r.Params.Arguments, &a)
			return a.Action
		}}
	if pkg {
		cfg.Evidence = e.Host()
	} else {
		cfg.Approvals.Guard = func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error) {
			g.mu.Lock()
			g.guards = append(g.guards, in.Offer().Hop) // the doc's accessor, on every call
			g.mu.Unlock()
			return e.Guard(ctx, in)
		}
	}
	mw, err := hmcp.Server(cfg)
	require.NoError(t, err)
	g.server.AddReceivingMiddleware(mw)
	mcp.AddTool(g.server, &mcp.Tool{Name: "act"}, func(ctx context.Context, _ *mcp.CallToolRequest, a opArgs) (*mcp.CallToolResult, any, error) {
		g.ran.Add(1)
		in, _ := hmcp.FromContext(ctx)
		g.mu.Lock()
		g.hops = append(g.hops, in.Offer().Hop) // the doc's accessor, on every run
		g.found = append(g.found, evidence.GuardFromContext(ctx) != nil)
		g.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	return g
}

func act(action, op string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "act", Arguments: opArgs{Action: action, Operation: op}}
}

// The delegator names the package once (OfferParams.Deliver): it rides in
// params._meta beside the Handoff, the delegate checks it before the tool
// runs and the tool finds the hop's guard under evidence's name. A package
// that fails, or is missing, is "rejected" with reason "policy" and the
// findings in the detail, and the tool never runs (finding 1).
func TestMCP_Package_CarriedAndChecked(t *testing.T) {
	ctx := context.Background()
	f := newPauseFixture(t)
	srv := newGuarded(t, f.ps[coder], f.e, f.now, true)
	cs := dial(t, f.cl, srv.server, &approver{decision: "approve"})
	d, err := f.cl.Call(ctx, cs, act(agenttest.Allowed, ""), handoff.OfferParams{To: coder, Dialog: dialog, Deliver: agenttest.Deliver})
	require.NoError(t, err)
	require.False(t, d.Result.IsError, "%v", d.Result.Content)
	require.Equal(t, state.Completed, d.State)
	require.EqualValues(t, 1, srv.ran.Load())
	srv.mu.Lock()
	require.Equal(t, []bool{true}, srv.found, "the tool finds the hop's guard")
	srv.mu.Unlock()
	require.Len(t, evidence.Refs(d.Offer.Offer.Refs), 1, "the offer names the package by digest")

	// The must-ask refund pauses and resumes with the package carried
	// again with the retried call, and checked again.
	d, err = f.cl.Call(ctx, cs, act(agenttest.MustAsk, "refund-INV-1042"), handoff.OfferParams{To: coder, Dialog: dialog, Deliver: agenttest.Deliver})
	require.NoError(t, err)
	require.False(t, d.Result.IsError, "%v", d.Result.Content)
	require.Equal(t, state.Completed, d.State)
	require.EqualValues(t, 2, srv.ran.Load(), "paused before the tool, then resumed")

	corrupt := func(o *handoff.Offer) (ref.Ref, ref.Object, error) {
		r, obj, err := agenttest.Deliver(o)
		obj.Octets = []byte(strings.Replace(string(obj.Octets), "INV-1042 paid", "INV-1042 open", 1))
		return r, obj, err
	}
	for name, p := range map[string]handoff.OfferParams{
		"NoPackage":       {To: coder, Dialog: dialog},
		"NamedNotCarried": {To: coder, Dialog: dialog, Prepare: f.e.Prepare},
		"NotTheNamedOne":  {To: coder, Dialog: dialog, Deliver: corrupt},
	} {
		d, err := f.cl.Call(ctx, cs, act(agenttest.Allowed, ""), p)
		require.NoError(t, err, name)
		require.True(t, d.Refused, name)
		require.Equal(t, reason.Policy, d.Reason, name)
		require.Len(t, d.Statuses, 1, name)
		require.Contains(t, d.Statuses[0].Status.Detail, "evidence", name)
	}
	require.EqualValues(t, 2, srv.ran.Load(), "the tool ran for a refused package")
}

// A tool handler and Approvals.Guard written from the docs use
// FromContext(ctx).Offer() and Received.Offer() on the retried call that
// resumes the hop, and never see nil: the hop's accepted offer is there
// (finding 2).
func TestMCP_Resumed_OfferWhereTheDocsSay(t *testing.T) {
	f := newPauseFixture(t)
	srv := newGuarded(t, f.ps[coder], f.e, f.now, false)
	cs := dial(t, f.cl, srv.server, &approver{decision: "approve"})
	d, err := f.cl.Call(context.Background(), cs, act(agenttest.MustAsk, "refund-INV-1042"), f.offer())
	require.NoError(t, err)
	require.False(t, d.Result.IsError, "%v", d.Result.Content)
	require.Equal(t, state.Completed, d.State)
	require.EqualValues(t, 1, srv.ran.Load(), "paused before the tool, then resumed")
	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.Equal(t, []handoff.HopID{d.Hop}, srv.hops)
	require.Equal(t, []handoff.HopID{d.Hop, d.Hop}, srv.guards, "the paused call and the resumed one")
}

// After a denied, a repeated and a declined call, each refused by the
// hop's guard before any effect, every hop is "failed" with no refs and
// the delegator's Unresolved lists none; the same work can be offered
// again (HC-42; finding 3).
func TestMCP_Refusals_CloseTheHop(t *testing.T) {
	ctx := context.Background()
	f := newPauseFixture(t)
	srv := newGuarded(t, f.ps[coder], f.e, f.now, false)
	cs := dial(t, f.cl, srv.server, &approver{decision: "deny"})
	for name, call := range map[string]*mcp.CallToolParams{
		"Denied":   act(agenttest.Denied, ""),
		"Repeated": act(agenttest.Allowed, agenttest.Performed),
		"Declined": act(agenttest.MustAsk, "refund-INV-1042"),
	} {
		p := f.offer()
		p.Work = "refund-INV-1042"
		d, err := f.cl.Call(ctx, cs, call, p)
		require.NoError(t, err, name)
		require.True(t, d.Result.IsError, name)
		agenttest.RequireClosed(t, f.ps[planner].Agent, d.Hop)
	}
	require.Zero(t, srv.ran.Load(), "a refused action ran")
	open, err := f.ps[planner].Agent.Unresolved(ctx)
	require.NoError(t, err)
	require.Empty(t, open)
}
