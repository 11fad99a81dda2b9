package a2atest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// The outcome of a hop its delegator canceled (HC-28): the executor's
// Cancel reports it (Report), or the authority ledger knows it, and the
// wrapper signs it on the canceled task, which the Cancel Task request
// returns; a retransmission gets the same octets. Otherwise the hop stays
// "accepted", unresolved (HC-25, HC-40).

// canceledHop pauses a hop in TASK_STATE_INPUT_REQUIRED, after effect, and
// cancels it; it returns the canceled task and the hop. The executor
// returns linger after it set the state: a Cancel Task request that
// arrives meanwhile is dropped by the SDK and sent again by the client
// (a2acore.CancelInterrupted), so the executor's Cancel may run more than
// once, always with the same outcome.
func canceledHop(t *testing.T, l Line, co *Node, cl Delegator, effect func(context.Context) error, linger time.Duration) (*Result, handoff.HopID) {
	t.Helper()
	ctx := context.Background()
	co.Work.Do(func(ctx context.Context, _ *handoff.Received, x Exec) error {
		if effect != nil {
			if err := effect(ctx); err != nil {
				return err
			}
		}
		err := x.Write(ctx, a2acore.InputRequired) // waits for an answer
		time.Sleep(linger)
		return err
	})
	p := handoff.OfferParams{To: Coder}
	if co.Evidence != nil {
		p.Deliver = agenttest.Deliver
	}
	d, err := cl.Send(ctx, Text("x"), p)
	require.NoError(t, err)
	require.Equal(t, a2acore.InputRequired, d.Result.State)
	task, _, err := cl.Cancel(ctx, d.Hop)
	require.NoError(t, err)
	require.Equal(t, a2acore.Canceled, task.State)
	require.EqualValues(t, 1, co.Work.Calls.Load())
	if linger == 0 {
		require.GreaterOrEqual(t, co.Work.Cancels.Load(), int32(1))
	} else {
		require.GreaterOrEqual(t, co.Work.Cancels.Load(), int32(2), "the first Cancel Task request came while the execution ended")
	}
	return task, d.Hop
}

// requireCanceledFailed checks that the canceled task carries "failed"
// with no refs, that the delegator holds it, resolved, and that asking
// again gets the same octets.
func requireCanceledFailed(t *testing.T, cl Delegator, planner *handoff.Agent, task *Result, hop handoff.HopID) {
	t.Helper()
	octets := StatusOf(t, task)
	signed, err := handoff.ParseSigned(octets, handoff.Limits{})
	require.NoError(t, err)
	_, st, err := handoff.InspectUnverified(signed, handoff.Limits{})
	require.NoError(t, err)
	require.Equal(t, state.Failed, st.State)
	require.Empty(t, st.Refs, "\"failed\" with no refs: the work took no effect (HC-44)")
	info := hopState(t, planner, hop)
	require.Equal(t, state.Failed, info.State)
	require.True(t, info.Resolved)
	again, sts, err := cl.Retransmit(context.Background(), Text("x"), hop)
	require.NoError(t, err)
	require.Len(t, sts, 1)
	require.Equal(t, state.Failed, sts[0].State)
	require.Equal(t, octets, StatusOf(t, again), "the identical octets (HC-39)")
}

// The executor's Cancel reports that the canceled work took no effect:
// "failed", no refs, on the canceled task (no ledger is needed). Also when
// the first Cancel Task request comes while the execution ends, and the
// SDK drops it: the client sends it again, and the task it gets carries
// the outcome signed the first time, the same octets.
func cancelReportsOutcome(t *testing.T, l Line) {
	for _, linger := range []time.Duration{0, 250 * time.Millisecond} {
		t.Run(fmt.Sprintf("Linger%v", linger), func(t *testing.T) {
			ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE})
			co := Serve(t, l, ps[Coder])
			co.Work.OnCancel(func(ctx context.Context, x Exec) error {
				if !x.Report(ctx, Outcome{Effect: state.EffectNone}) {
					return errors.New("Report does not work in the executor's Cancel")
				}
				return x.Write(ctx, a2acore.Canceled)
			})
			cl := co.Dial(t, l, ps[Planner])
			task, hop := canceledHop(t, l, co, cl, nil, linger)
			requireCanceledFailed(t, cl, ps[Planner].Agent, task, hop)
		})
	}
}

// With the authority ledger (ServerConfig.Evidence): a hop that took no
// effect through its guard, canceled, ends "failed" with no refs whatever
// the executor's Cancel reports; one that took an effect, and whose
// executor reports nothing, stays "accepted" and unresolved, as does any
// hop without a ledger whose executor reports nothing.
func cancelLedgerKnows(t *testing.T, l Line) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		ledger bool
		effect bool
		known  bool
		linger time.Duration
	}{
		{"NoEffect", true, false, true, 0},
		{"NoEffectCanceledWhileEnding", true, false, true, 250 * time.Millisecond},
		{"EffectTaken", true, true, false, 0},
		{"NoLedger", false, false, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
			e := agenttest.NewEvidence(t)
			co := Serve(t, l, ps[Coder], func(d *Delegate) {
				if c.ledger {
					d.Evidence = e.Host()
				}
			})
			var took func(context.Context) error
			if c.effect {
				took = func(ctx context.Context) error {
					in, _ := a2acore.FromContext(ctx)
					return evidence.GuardFromContext(ctx).Authorize(ctx,
						evidence.Call{Hop: in.Digest(), Action: agenttest.Allowed, OperationID: "read-1"})
				}
			}
			cl := co.Dial(t, l, ps[Planner])
			task, hop := canceledHop(t, l, co, cl, took, c.linger)
			if c.known {
				requireCanceledFailed(t, cl, ps[Planner].Agent, task, hop)
				return
			}
			NoStatus(t, task, "the outcome is not known: no terminal status (HC-25)")
			info := hopState(t, ps[Planner].Agent, hop)
			require.True(t, info.Canceled)
			require.False(t, info.Resolved, "a canceled hop of unknown outcome stays unresolved (HC-41)")
			_, sts, err := cl.Retransmit(ctx, Text("x"), hop)
			require.NoError(t, err)
			require.Len(t, sts, 1)
			require.Equal(t, state.Accepted, sts[0].State)
		})
	}
}
