package evidence

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/state"
)

// Claim and Settle are Do in two steps: the same refusals before the
// effect, the same contract after it.
func TestClaim_DoInTwoSteps(t *testing.T) {
	ctx := context.Background()
	d := newDoGuard(t, authority.NewMemory())
	c := Call{Hop: d.in.Digest(), Action: "ledger.read", Tool: "ledger", Args: []byte(`{"invoice":"INV-1042"}`)}
	cl, err := d.Claim(ctx, c)
	require.NoError(t, err)
	key, err := c.Key()
	require.NoError(t, err)
	require.True(t, key.Equal(cl.Key()))
	_, err = d.Claim(ctx, c)
	require.ErrorIs(t, err, ErrInFlight, "claimed, not settled")
	require.NoError(t, cl.Settle(ctx, []byte(`{"balance":0}`), nil))
	require.NoError(t, cl.Settle(ctx, []byte(`{"balance":0}`), nil), "the same outcome again")
	require.ErrorIs(t, cl.Settle(ctx, []byte(`{"balance":1}`), nil), ErrUnsettled, "another outcome")
	_, err = d.Claim(ctx, c)
	var r *Refusal
	require.ErrorIs(t, err, ErrReplayed)
	require.True(t, errors.As(err, &r))
	require.Equal(t, `{"balance":0}`, string(r.Outcome.Result))

	// The policy is Do's: denied, unlisted and must-ask without an
	// approval are refused before anything is claimed.
	for action, want := range map[string]error{"card.charge": ErrDenied, "shell.exec": ErrUnlisted, "refund.issue": ErrApprovalRequired} {
		_, err := d.Claim(ctx, Call{Hop: d.in.Digest(), Action: action, Tool: action})
		require.ErrorIs(t, err, want, action)
	}
	// An effect that failed is settled with its error.
	failed := c
	failed.OperationID = "read-2"
	cl, err = d.Claim(ctx, failed)
	require.NoError(t, err)
	require.NoError(t, cl.Settle(ctx, nil, errors.New("ledger offline")))
	_, err = d.Do(ctx, failed, d.tool(failed))
	require.True(t, errors.As(err, &r))
	require.Equal(t, "ledger offline", r.Outcome.Error)
	require.Zero(t, d.runs.Load())
}

// Once runs a host's unit of work once per call, whatever its action:
// the execution of an A2A task for a message, the resumption of paused
// work by an answer. The same call again is replayed or in flight, the
// same name for another call a conflict; it runs nothing for another
// hop, after the hop finished or once the offer expired.
func TestOnce_UnitOfWork(t *testing.T) {
	ctx := context.Background()
	d := newDoGuard(t, authority.NewMemory())
	// Not an action of the package: Once decides nothing of it.
	unit := Call{Hop: d.in.Digest(), Action: "a2a.execute", Args: []byte(`[{"text":"refund INV-1042"}]`), IdempotencyKey: "hop-unit"}
	var runs atomic.Int32
	work := func(context.Context) ([]byte, error) { runs.Add(1); return []byte(`{"state":"completed"}`), nil }
	require.ErrorIs(t, d.Authorize(ctx, unit), ErrUnlisted, "an unlisted action for Authorize")
	res, err := d.Once(ctx, unit, work)
	require.NoError(t, err)
	require.Equal(t, `{"state":"completed"}`, string(res))
	_, err = d.Once(ctx, unit, work)
	require.ErrorIs(t, err, ErrReplayed)
	other := unit
	other.Args = []byte(`[{"text":"refund INV-9999"}]`)
	_, err = d.Once(ctx, other, work)
	require.ErrorIs(t, err, ErrIdempotencyConflict)
	require.EqualValues(t, 1, runs.Load())

	// Racing: one run, every other presentation in flight or replayed.
	race := unit
	race.IdempotencyKey = "race"
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = d.Once(ctx, race, func(context.Context) ([]byte, error) { <-release; runs.Add(1); return nil, nil })
		}()
	}
	close(release)
	wg.Wait()
	ran := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ran++
		case errors.Is(err, ErrInFlight), errors.Is(err, ErrReplayed):
		default:
			t.Fatalf("racing: %v", err)
		}
	}
	require.Equal(t, 1, ran)
	require.EqualValues(t, 2, runs.Load())

	// Another hop, a finished hop, an expired offer: nothing runs.
	foreign := unit
	foreign.Hop = digest.SHA256([]byte("another offer"))
	foreign.IdempotencyKey = "foreign"
	_, err = d.Once(ctx, foreign, work)
	require.ErrorIs(t, err, ErrOtherHop)
	require.NoError(t, d.Finish(ctx, state.Completed, "done"))
	late := unit
	late.IdempotencyKey = "after-finish"
	_, err = d.Once(ctx, late, work)
	require.ErrorIs(t, err, ErrFinished)
	require.ErrorIs(t, err, ErrStopped)
	require.EqualValues(t, 2, runs.Load())
	// A call claimed before the hop finished, presented again after it,
	// on this guard or on one built anew: the contract still answers.
	again, err := NewGuard(ctx, d.rep, GuardConfig{Ledger: d.ledger, Now: d.w.clock.Now})
	require.NoError(t, err)
	for _, g := range []*Guard{d.Guard, again} {
		_, err = g.Once(ctx, unit, work)
		require.ErrorIs(t, err, ErrReplayed)
		var r *Refusal
		require.ErrorAs(t, err, &r)
		require.Equal(t, `{"state":"completed"}`, string(r.Outcome.Result))
		_, err = g.Once(ctx, other, work)
		require.ErrorIs(t, err, ErrIdempotencyConflict)
		_, err = g.Do(ctx, Call{Hop: d.in.Digest(), Action: "ledger.read", OperationID: "never-claimed"}, work)
		require.ErrorIs(t, err, ErrFinished, "nothing of it recorded: the hop's end")
	}
	require.EqualValues(t, 2, runs.Load())

	e := newDoGuard(t, authority.NewMemory())
	e.w.clock.Add(e.exp.Sub(e.w.clock.Now()) + time.Second)
	late.Hop = e.in.Digest()
	_, err = e.Once(ctx, late, work)
	require.ErrorIs(t, err, ErrStopped)
	require.EqualValues(t, 2, runs.Load())
}
