package mcphop_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
)

// The outcome of a hop its delegator canceled (HC-28): what the tool
// reports once the cancel is applied is signed and kept as the hop's last
// status, which the delegator learns by asking again (MCP answers no
// canceled call), rather than "not decided yet".
func TestMCP_Cancel_ToolReportsItsOutcome(t *testing.T) {
	for _, httpT := range []bool{false, true} {
		ctx := context.Background()
		ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
		co := newNode(t, ps[coder], planner, nil)
		started := make(chan struct{})
		co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
			close(started)
			<-ctx.Done() // the SDK cancels the handler's context
			// Stopped before its effect, after the delegator's signed
			// "canceled" was applied.
			require.Eventually(t, func() bool {
				co.mu.Lock()
				defer co.mu.Unlock()
				return len(co.canceled) == 1
			}, 5*time.Second, time.Millisecond)
			hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectNone})
			return nil, context.Cause(ctx)
		}
		pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent, Attempts: -1})
		require.NoError(t, err)
		s := connect(t, pc, co.server, httpT)
		out, errc := callInFlight(t, ps[planner].Agent, s, started)
		_, err = pc.Cancel(ctx, out.Offer.Hop)
		require.NoError(t, err)
		require.ErrorIs(t, <-errc, context.Canceled)

		var sts []*handoff.StatusResult
		require.Eventually(t, func() bool {
			_, sts, err = pc.Retransmit(ctx, s, call("x"), out.Offer.Hop)
			return err == nil && len(sts) == 1 && sts[0].State == state.Failed
		}, 5*time.Second, 10*time.Millisecond, "a retransmission of the canceled hop: %v %v", sts, err)
		require.NoError(t, sts[0].Err())
		require.Empty(t, sts[0].Status.Refs)
		info, _, err := ps[planner].Agent.Hop(ctx, out.Offer.Hop)
		require.NoError(t, err)
		require.Equal(t, state.Failed, info.State)
		require.True(t, info.Resolved)
		require.EqualValues(t, 1, co.calls.Load())
	}
}

// A hop canceled while its call is paused for an approval took no effect:
// with the authority ledger (ServerConfig.Evidence) the middleware knows
// it (no effect of the hop in the ledger, and none can be taken once the
// "canceled" is recorded) and signs "failed" with no refs, which the
// delegator learns by asking again. Without the ledger (Approvals.Guard
// only, no guard at hand when the "canceled" comes) the outcome is not
// known: the hop stays "accepted" (HC-25, HC-40).
func TestMCP_Cancel_PausedHop_LedgerKnowsNoEffect(t *testing.T) {
	for _, withLedger := range []bool{true, false} {
		t.Run(map[bool]string{true: "Evidence", false: "ApprovalsGuard"}[withLedger], func(t *testing.T) {
			ctx := context.Background()
			f := newPauseFixture(t)
			srv := newGuarded(t, f.ps[coder], f.e, f.now, withLedger)
			cs := dial(t, f.cl, srv.server, nil) // the client answers input requests itself
			p := handoff.OfferParams{To: coder, Dialog: dialog, Deliver: agenttest.Deliver}
			if !withLedger {
				p = f.offer()
			}
			d, err := f.cl.Call(ctx, cs, act(agenttest.MustAsk, "refund-INV-1042"), p)
			require.NoError(t, err)
			require.True(t, d.Result.NeedsInput(), "paused: %+v", d.Result)
			require.Equal(t, state.Accepted, d.State)

			_, err = f.cl.Cancel(ctx, d.Hop)
			require.NoError(t, err)
			want := state.Accepted
			if withLedger {
				want = state.Failed
			}
			var sts []*handoff.StatusResult
			require.Eventually(t, func() bool {
				_, sts, err = f.cl.Retransmit(ctx, cs, act(agenttest.MustAsk, "refund-INV-1042"), d.Hop)
				return err == nil && len(sts) == 1 && sts[0].State == want
			}, 5*time.Second, 10*time.Millisecond, "a retransmission of the canceled hop: %v %v", sts, err)
			info, _, err := f.ps[planner].Agent.Hop(ctx, d.Hop)
			require.NoError(t, err)
			require.Equal(t, withLedger, info.Resolved)
			if withLedger {
				require.Empty(t, sts[0].Status.Refs, "\"failed\" with no refs: the work took no effect (HC-44)")
				h, err := f.e.Ledger.Hop(ctx, d.Offer.Digest.String())
				require.NoError(t, err)
				require.Equal(t, "canceled", h.Final.State, "the ledger keeps the hop's first terminal state")
				require.False(t, h.Effects)
			}
			require.Zero(t, srv.ran.Load(), "the tool ran")
		})
	}
}

// Over a stateless streamable HTTP server every request is a session of
// its own, and a "canceled" counts only on the session of the call it
// cancels (ErrForeignCancel): the delegator's signed cancel never reaches
// the hop. The cancel of a call in flight still ends the call (with
// StreamableHTTPOptions.PropagateRequestCancellation, the tool's context);
// a tool that stops before its effect reports none, and the hop ends
// "failed", no refs, which the delegator learns by asking again. A hop
// with no call in flight cannot be canceled at all: Cancel says so
// (ErrCancelNotSent) and signs nothing, so that the delegator's table does
// not hold a "canceled" the delegate never got.
func TestMCP_Cancel_Stateless(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.COSE})
	co := newNode(t, ps[coder], planner, nil)
	pc, s := statelessSession(t, co, ps[planner].Agent)

	// A call in flight: the call ends, the "canceled" does not count.
	started := make(chan struct{})
	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectNone})
		return nil, context.Cause(ctx)
	}
	out, errc := callInFlight(t, ps[planner].Agent, s, started)
	_, err := pc.Cancel(ctx, out.Offer.Hop)
	require.NoError(t, err, "sent")
	require.ErrorIs(t, <-errc, context.Canceled)
	var sts []*handoff.StatusResult
	require.Eventually(t, func() bool {
		_, sts, err = pc.Retransmit(ctx, s, call("x"), out.Offer.Hop)
		return err == nil && len(sts) == 1 && sts[0].State == state.Failed
	}, 5*time.Second, 10*time.Millisecond, "a retransmission of the canceled call's hop: %v %v", sts, err)
	co.mu.Lock()
	require.Empty(t, co.canceled, "a \"canceled\" counted over a stateless server")
	co.mu.Unlock()
	require.EqualValues(t, 1, co.calls.Load())

	// A hop whose call returned "accepted", its work going on: nothing to
	// send a cancellation on.
	co.work = func(ctx context.Context, in *handoff.Received) (*mcp.CallToolResult, error) {
		hmcp.Report(ctx, hmcp.Outcome{Effect: state.EffectUnknown})
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	}
	d, err := pc.Call(ctx, s, call("y"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	require.Equal(t, state.Accepted, d.State)
	_, err = pc.Cancel(ctx, d.Hop)
	require.ErrorIs(t, err, hmcp.ErrCancelNotSent)
	require.ErrorIs(t, err, handoff.ErrArgument)
	info, _, err := ps[planner].Agent.Hop(ctx, d.Hop)
	require.NoError(t, err)
	require.False(t, info.Canceled, "a cancel that could not be sent is not signed")
	require.Equal(t, state.Accepted, info.State)
}

// callInFlight makes an offer of planner's to the coder and calls the tool
// with it, in the background; it returns once the tool runs (started),
// with the offer and the error the call will end with.
func callInFlight(t *testing.T, planner *handoff.Agent, s *mcp.ClientSession, started <-chan struct{}) (*handoff.Outgoing, <-chan error) {
	t.Helper()
	ctx := context.Background()
	out, err := planner.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := s.CallTool(hmcp.WithHandoff(ctx, out.Handoff), call("x"))
		errc <- err
	}()
	<-started
	return out, errc
}
