package evidence

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
)

func passedGuard(t *testing.T) *Guard {
	t.Helper()
	w := newWorld(t, handoff.JWS, nil)
	built, bind := w.build(refundPackage(), BuildOptions{})
	out := w.offer(built, bind)
	_, rep := w.receive(out, handoff.JSON, Delivered{Package: built.Encoded})
	require.True(t, rep.Passed())
	g, err := NewGuard(rep)
	require.NoError(t, err)
	return g
}

func TestGuard_AllowedPasses(t *testing.T) {
	g := passedGuard(t)
	require.NoError(t, g.Authorize(Call{Action: "refund.eligibility"}))
	require.NoError(t, g.Authorize(Call{Action: "ledger.read"}))
}

func TestGuard_DeniedRefused(t *testing.T) {
	g := passedGuard(t)
	err := g.Authorize(Call{Action: "card.charge"})
	require.ErrorIs(t, err, ErrDenied)
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.Equal(t, "card.charge", r.Action)
}

func TestGuard_MustAskRefusedUntilApproved(t *testing.T) {
	g := passedGuard(t)
	require.ErrorIs(t, g.Authorize(Call{Action: "refund.issue", IdempotencyKey: "refund-INV-1042"}), ErrApprovalRequired)
	// Only the owner the package names approves.
	require.ErrorIs(t, g.Approve("refund.issue", "triage"), ErrApprovalRequired)
	require.ErrorIs(t, g.Authorize(Call{Action: "refund.issue", IdempotencyKey: "refund-INV-1042"}), ErrApprovalRequired)
	// An action without a pending approval cannot be approved.
	require.ErrorIs(t, g.Approve("card.charge", "finance-lead"), ErrUnlisted)
	require.NoError(t, g.Approve("refund.issue", "finance-lead"))
	require.NoError(t, g.Authorize(Call{Action: "refund.issue", IdempotencyKey: "refund-INV-1042"}))
}

func TestGuard_UnlistedRefused(t *testing.T) {
	g := passedGuard(t)
	require.ErrorIs(t, g.Authorize(Call{Action: "customer.email"}), ErrUnlisted)
	require.ErrorIs(t, g.Authorize(Call{Action: "Ledger.Read"}), ErrUnlisted, "names compare exactly")
	require.ErrorIs(t, g.Authorize(Call{Action: ""}), ErrUnlisted)
}

func TestGuard_ReplayedOperationRefused(t *testing.T) {
	g := passedGuard(t)
	// The package's completed action holds this idempotency key.
	err := g.Authorize(Call{Action: "ledger.read", IdempotencyKey: "notify-INV-1042-1"})
	require.ErrorIs(t, err, ErrRepeated)
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.Equal(t, "notify-INV-1042-1", r.Key)
	// A call that passes reserves its operation id.
	require.NoError(t, g.Authorize(Call{Action: "ledger.read", OperationID: "op-9"}))
	require.ErrorIs(t, g.Authorize(Call{Action: "ledger.read", OperationID: "op-9"}), ErrRepeated)
	// Ids and keys are separate namespaces.
	require.NoError(t, g.Authorize(Call{Action: "ledger.read", IdempotencyKey: "op-9"}))
}

func TestGuard_StopRefusesEverything(t *testing.T) {
	g := passedGuard(t)
	g.Stop("hop canceled")
	require.ErrorIs(t, g.Authorize(Call{Action: "ledger.read"}), ErrStopped)
}

func TestGuard_OnlyFromPassedPackage(t *testing.T) {
	_, err := NewGuard(nil)
	require.ErrorIs(t, err, ErrNotPassed)
	_, err = NewGuard(&Report{unverified: &Package{}, Findings: []Finding{{Code: CodeStaleState}}})
	require.ErrorIs(t, err, ErrNotPassed)

	// A package checked on its own, without its offer, passes the check but
	// is never acceptable: no guard, no "accepted".
	w := newWorld(t, handoff.JWS, nil)
	built, bind := w.build(refundPackage(), BuildOptions{})
	rep, err := Check(context.Background(), nil, Delivered{Package: built.Encoded}, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource(), Unbound: true})
	require.NoError(t, err)
	require.True(t, rep.Passed())
	require.False(t, rep.Acceptable())
	require.Nil(t, rep.Package())
	require.NotNil(t, rep.UnverifiedPackage())
	_, err = NewGuard(rep)
	require.ErrorIs(t, err, ErrNotPassed)
	require.Equal(t, Acknowledgement{Decision: DecisionRejected, Reason: "policy", Findings: []string{"not-bound"}}, Acknowledge(rep))
	out := w.offer(built, bind)
	in, good := w.receive(out, handoff.JSON, Delivered{Package: built.Encoded})
	_, err = Reply(context.Background(), w.to, in, rep)
	require.ErrorIs(t, err, ErrNotPassed)

	// A report made against another offer does not answer this one.
	built2, bind2 := w.build(refundPackage(), BuildOptions{})
	out2 := w.offer(built2, bind2)
	in2, _ := w.receive(out2, handoff.JSON, Delivered{Package: built2.Encoded})
	_, err = Reply(context.Background(), w.to, in2, good)
	require.ErrorIs(t, err, ErrNotPassed)
	_, err = Reply(context.Background(), w.to, in, good)
	require.NoError(t, err)
}

// Concurrent calls with one idempotency key: exactly one passes; Do runs
// the tool outside the guard's lock (the tool itself consults the guard).
func TestGuard_ConcurrentReplayOnePasses(t *testing.T) {
	g := passedGuard(t)
	require.NoError(t, g.Approve("refund.issue", "finance-lead"))
	var passed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := g.Do(context.Background(), Call{Action: "refund.issue", IdempotencyKey: "refund-INV-1042"}, func(context.Context) error {
				passed.Add(1)
				// Re-entering the guard from the tool would deadlock if
				// the tool ran under the lock.
				return g.Authorize(Call{Action: "ledger.read"})
			})
			if err != nil {
				require.ErrorIs(t, err, ErrRepeated)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), passed.Load())
}

// A rejection's detail names codes and paths, never values, and stays
// bounded however many findings there are.
func TestReport_DetailBounded(t *testing.T) {
	r := &Report{}
	for i := range 40 {
		r.Findings = append(r.Findings, Finding{Code: CodeMissing, Path: "/state/" + string(rune('a'+i%26))})
	}
	r.Findings = append(r.Findings, Finding{Code: CodeUnsupported, Path: "/x", Advisory: true})
	d := r.Detail()
	require.Contains(t, d, "missing-field /state/a")
	require.Contains(t, d, "; and 24 more")
	require.NotContains(t, d, "/x")
	require.Less(t, len(d), 1024)
}
