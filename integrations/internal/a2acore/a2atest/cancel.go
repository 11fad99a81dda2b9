package a2atest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// hold is a body that waits until its execution is canceled.
func hold(started chan struct{}) func(context.Context, *handoff.Received, Exec) error {
	var once sync.Once
	return func(ctx context.Context, _ *handoff.Received, _ Exec) error {
		if started != nil {
			once.Do(func() { close(started) })
		}
		<-ctx.Done()
		return nil
	}
}

// A Cancel Task request carries the delegator's signed "canceled"; the
// delegate verifies it, cancels the task, and signs a "canceled" for the
// hop it passed on, which travels on down the chain (HC-28, HC-66).
func cancelPropagated(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE},
		agenttest.Spec{ID: Tester, Format: handoff.JWS})
	co, te := Serve(t, l, ps[Coder]), Serve(t, l, ps[Tester])
	started, passed := make(chan struct{}), make(chan struct{})
	te.Work.Do(hold(started))
	toTester := te.Dial(t, l, ps[Coder], Dial{Immediate: true})
	co.Work.Do(func(ctx context.Context, in *handoff.Received, _ Exec) error {
		if _, err := toTester.Send(ctx, Text("test"), handoff.OfferParams{To: Tester, From: in}); err != nil {
			return err
		}
		close(passed)
		<-ctx.Done()
		return nil
	})
	cl := co.Dial(t, l, ps[Planner], Dial{Immediate: true}) // the task comes back working
	d, err := cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder})
	require.NoError(t, err)
	require.Equal(t, a2acore.Working, d.Result.State)
	<-started
	<-passed

	task, n, err := cl.Cancel(ctx, d.Hop)
	require.NoError(t, err)
	require.Equal(t, a2acore.Canceled, task.State)
	got := co.Canceled()
	require.Len(t, got, 1)
	require.NoError(t, got[0].Err())
	require.Equal(t, state.Canceled, got[0].Status.State)
	require.Equal(t, Planner, got[0].Status.Iss)
	require.True(t, got[0].Status.Offer.Equal(d.Offer.Digest))
	require.Equal(t, n.Hop, got[0].Status.Hop)
	// HC-28: the coder signed a "canceled" for the hop it passed on.
	notices := co.noticed()
	require.Len(t, notices, 1)
	require.Equal(t, Tester, notices[0].To)

	tt, ok := toTester.TaskOf(notices[0].Hop)
	require.True(t, ok)
	_, err = CancelWith(ctx, toTester, &notices[0].Status, tt)
	require.NoError(t, err)
	require.Len(t, te.Canceled(), 1)
	require.NoError(t, te.Canceled()[0].Err())
	require.Equal(t, Coder, te.Canceled()[0].Status.Iss)
	require.EqualValues(t, 1, co.Work.Calls.Load())
	require.EqualValues(t, 1, te.Work.Calls.Load())
}

// A signed "canceled" cancels only its own hop's task (HC-28, HC-55):
// Alice's "canceled" for her finished hop, against Bob's running task, is
// refused before it is verified, the executor's Cancel never runs, no hop
// changes state, and Bob's task goes on to complete. Bob's own "canceled"
// then cancels his next task.
func cancelOwnTask(t *testing.T, l Line) {
	const (
		alice = handoff.AgentID("spiffe://a.example/alice")
		bob   = handoff.AgentID("spiffe://b.example/bob")
	)
	for _, required := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "RequireSignedCancel"}[required], func(t *testing.T) {
			ctx := context.Background()
			ps := agenttest.New(t, agenttest.Spec{ID: alice, Format: handoff.JWS}, agenttest.Spec{ID: bob, Format: handoff.COSE},
				agenttest.Spec{ID: Coder, Format: handoff.JWS})
			co := Serve(t, l, ps[Coder], func(d *Delegate) { d.RequireSignedCancel = required })
			release := make(chan struct{})
			co.Work.Do(func(ctx context.Context, in *handoff.Received, x Exec) error {
				if in.Offer().Iss == bob {
					select {
					case <-release:
					case <-ctx.Done():
						return nil
					}
				}
				return x.Write(ctx, a2acore.Completed)
			})
			toA, toB := co.Dial(t, l, ps[alice]), co.Dial(t, l, ps[bob], Dial{Immediate: true})
			da, err := toA.Send(ctx, Text("alice's"), handoff.OfferParams{To: Coder})
			require.NoError(t, err)
			require.Equal(t, state.Completed, da.State)
			db, err := toB.Send(ctx, Text("bob's"), handoff.OfferParams{To: Coder})
			require.NoError(t, err)
			bobTask, ok := toB.TaskOf(db.Hop)
			require.True(t, ok)

			n, err := ps[alice].Agent.Cancel(ctx, da.Hop)
			require.NoError(t, err)
			_, err = CancelWith(ctx, toA, &n.Status, bobTask)
			require.ErrorIs(t, err, l.InvalidParams())
			require.Zero(t, co.Work.Cancels.Load(), "the executor's Cancel ran for another hop's \"canceled\"")
			require.Empty(t, co.Canceled(), "another hop's \"canceled\" was handed to HandleStatus")
			got, err := toB.Get(ctx, bobTask)
			require.NoError(t, err)
			require.Equal(t, a2acore.Working, got.State, "Bob's task was canceled")

			close(release)
			require.Eventually(t, func() bool {
				got, err := toB.Get(ctx, bobTask)
				return err == nil && got.State == a2acore.Completed
			}, 5*time.Second, 10*time.Millisecond)
			require.Equal(t, state.Completed, hopState(t, ps[bob].Agent, db.Hop).State, "Bob learns his hop's verified \"completed\"")
			_, sts, err := toB.Retransmit(ctx, Text("bob's"), db.Hop)
			require.NoError(t, err)
			require.Len(t, sts, 1)
			require.Equal(t, state.Completed, sts[0].Status.State)

			// Bob's own "canceled" cancels Bob's next task.
			started := make(chan struct{})
			co.Work.Do(hold(started))
			db2, err := toB.Send(ctx, Text("bob's second"), handoff.OfferParams{To: Coder})
			require.NoError(t, err)
			<-started
			task, _, err := toB.Cancel(ctx, db2.Hop)
			require.NoError(t, err)
			require.Equal(t, a2acore.Canceled, task.State)
			require.Len(t, co.Canceled(), 1)
			require.NoError(t, co.Canceled()[0].Err())
			require.EqualValues(t, 1, co.Work.Cancels.Load())
			require.EqualValues(t, 3, co.Work.Calls.Load())
		})
	}
}

// A "canceled" for the task's hop signed by another agent than the hop's
// delegator is refused before it is verified and changes nothing (HC-55);
// the delegator's own goes through.
func cancelOtherSigner(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS},
		agenttest.Spec{ID: Tester, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder])
	co.Work.Do(hold(nil))
	cl := co.Dial(t, l, ps[Planner], Dial{Immediate: true})
	d, err := cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder})
	require.NoError(t, err)
	task, ok := cl.TaskOf(d.Hop)
	require.True(t, ok)

	st, err := ps[Tester].Signer.SignStatus(&handoff.Status{Hop: d.Hop, Offer: d.Offer.Digest, Iss: Tester, Aud: Coder,
		Iat: handoff.TimeOf(d.Offer.Offer.Iat.Std()), State: state.Canceled})
	require.NoError(t, err)
	_, err = CancelWith(ctx, cl, &st, task)
	require.ErrorIs(t, err, l.InvalidParams())
	require.Empty(t, co.Canceled(), "a \"canceled\" of another signer was handed to HandleStatus")
	require.Zero(t, co.Work.Cancels.Load())
	require.False(t, hopState(t, ps[Planner].Agent, d.Hop).Canceled)

	_, _, err = cl.Cancel(ctx, d.Hop)
	require.NoError(t, err)
	require.Len(t, co.Canceled(), 1)
	require.NoError(t, co.Canceled()[0].Err())
	require.EqualValues(t, 1, co.Work.Cancels.Load())
}

// With RequireSignedCancel, a Cancel Task request without a "canceled"
// is refused and the task goes on; the delegator's signed one cancels it.
func requireSignedCancel(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder], func(d *Delegate) { d.RequireSignedCancel = true })
	co.Work.Do(hold(nil))
	cl := co.Dial(t, l, ps[Planner], Dial{Immediate: true})
	d, err := cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder})
	require.NoError(t, err)
	task, _ := cl.TaskOf(d.Hop)
	_, err = CancelWith(ctx, cl, nil, task)
	require.Error(t, err, "a cancel without the delegator's signed status")
	got, err := cl.Get(ctx, task)
	require.NoError(t, err)
	require.Equal(t, a2acore.Working, got.State)
	_, _, err = cl.Cancel(ctx, d.Hop)
	require.NoError(t, err)
	got, err = cl.Get(ctx, task)
	require.NoError(t, err)
	require.Equal(t, a2acore.Canceled, got.State)
	require.EqualValues(t, 1, co.Work.Calls.Load())
}
