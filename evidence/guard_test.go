package evidence

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/jws"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// hopGuard is a passed package's guard on ledger, with the hop's digest.
type hopGuard struct {
	*Guard
	w   *world
	in  *handoff.Received
	rep *Report
}

func (h hopGuard) call(action, op, key string) Call {
	return Call{Hop: h.in.Digest(), Action: action, OperationID: op, IdempotencyKey: key}
}

func (h hopGuard) authorize(action, op, key string) error {
	return h.Authorize(context.Background(), h.call(action, op, key))
}

func newHopGuard(t *testing.T, w *world, p Package, ledger authority.Ledger) hopGuard {
	t.Helper()
	return newHopGuardTB(t, w, p, ledger)
}

const handoffJWS = handoff.JWS

func newHopGuardTB(t testing.TB, w *world, p Package, ledger authority.Ledger) hopGuard {
	t.Helper()
	built, bind := w.build(p, BuildOptions{})
	out := w.offer(built, bind)
	in, rep := w.receive(out, handoff.JSON, Delivered{Package: built.Encoded})
	require.True(t, rep.Acceptable(), "findings: %+v", rep.Findings())
	g, err := NewGuard(context.Background(), rep, GuardConfig{Ledger: ledger, Now: w.clock.Now, Trust: w.trust})
	require.NoError(t, err)
	return hopGuard{Guard: g, w: w, in: in, rep: rep}
}

func passedGuard(t *testing.T) hopGuard {
	t.Helper()
	return newHopGuard(t, newWorld(t, handoff.JWS, nil), refundPackage(), authority.NewMemory())
}

func approveOnce(t *testing.T, g hopGuard, gr Grant) {
	t.Helper()
	if gr.Approver == "" {
		gr.Approver = "finance-lead"
	}
	_, err := g.ApproveLocal(context.Background(), gr, "console:finance-lead")
	require.NoError(t, err)
}

func TestGuard_AllowedPasses(t *testing.T) {
	g := passedGuard(t)
	require.NoError(t, g.authorize("refund.eligibility", "", ""))
	require.NoError(t, g.authorize("ledger.read", "", ""))
}

func TestGuard_DeniedRefused(t *testing.T) {
	g := passedGuard(t)
	err := g.authorize("card.charge", "", "")
	require.ErrorIs(t, err, ErrDenied)
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.Equal(t, "card.charge", r.Action)
}

func TestGuard_UnlistedRefused(t *testing.T) {
	g := passedGuard(t)
	require.ErrorIs(t, g.authorize("customer.email", "", ""), ErrUnlisted)
	require.ErrorIs(t, g.authorize("Ledger.Read", "", ""), ErrUnlisted, "names compare exactly")
	require.ErrorIs(t, g.authorize("", "", ""), ErrUnlisted)
}

// Finding: "one approval is a blank cheque". One approval is one use; a
// must-ask call names its effect; the refusal carries the approval to ask
// for.
func TestGuard_ApprovalUsedOnce(t *testing.T) {
	g := passedGuard(t)
	err := g.authorize("refund.issue", "", "refund-INV-1042")
	require.ErrorIs(t, err, ErrApprovalRequired)
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.Equal(t, &ApprovalRequest{Action: "refund.issue", Owner: "finance-lead", Hop: g.in.Digest(),
		IdempotencyKey: "refund-INV-1042", Item: "refund over EUR 500"}, r.Pending)
	approveOnce(t, g, Grant{Action: "refund.issue"})
	require.NoError(t, g.authorize("refund.issue", "", "refund-INV-1042"))
	require.ErrorIs(t, g.authorize("refund.issue", "", "refund-INV-1042"), ErrRepeated)
	require.ErrorIs(t, g.authorize("refund.issue", "", "refund-INV-1042-b"), ErrApprovalRequired, "one approval, one use")
	require.ErrorIs(t, g.authorize("refund.issue", "", ""), ErrUnnamed)
	require.ErrorIs(t, g.authorize("refund.issue", "", ""), ErrUnnamed)
}

// An approval names the owner the package names, one action, one hop, an
// operation or a count, and a time window.
func TestGuard_ApprovalBound(t *testing.T) {
	ctx := context.Background()
	p := refundPackage()
	p.Authority.MustAsk = append(p.Authority.MustAsk, "refund.void")
	p.Pending = append(p.Pending, Pending{Kind: PendingApproval, Item: "void a refund", Action: "refund.void", Owner: "finance-lead"})
	w := newWorld(t, handoff.JWS, nil)
	ledger := authority.NewMemory()
	g := newHopGuard(t, w, p, ledger)
	other := newHopGuard(t, w, p, ledger)

	_, err := g.ApproveLocal(ctx, Grant{Action: "refund.issue", Approver: "triage"}, "console:triage")
	require.ErrorIs(t, err, ErrNotApprover, "only the owner the package names")
	_, err = g.ApproveLocal(ctx, Grant{Action: "ledger.read", Approver: "finance-lead"}, "console:finance-lead")
	require.ErrorIs(t, err, ErrNotApprover, "not a must-ask action")
	_, err = g.ApproveLocal(ctx, Grant{Action: "refund.issue", Approver: "finance-lead"}, "")
	require.ErrorIs(t, err, ErrNotApprover, "a local approval names its operator")

	// Bound to an operation.
	approveOnce(t, g, Grant{Action: "refund.issue", OperationID: "op-1"})
	require.ErrorIs(t, g.authorize("refund.issue", "op-2", ""), ErrApprovalRequired)
	require.ErrorIs(t, g.authorize("refund.void", "op-1", ""), ErrApprovalRequired, "another action")
	require.ErrorIs(t, other.authorize("refund.issue", "op-1", ""), ErrApprovalRequired, "another hop")
	require.NoError(t, g.authorize("refund.issue", "op-1", ""))

	// A count.
	approveOnce(t, g, Grant{Action: "refund.void", Uses: 2})
	require.NoError(t, g.authorize("refund.void", "v-1", ""))
	require.NoError(t, g.authorize("refund.void", "v-2", ""))
	require.ErrorIs(t, g.authorize("refund.void", "v-3", ""), ErrApprovalRequired)

	// An expiry, never past the offer's.
	a, err := g.ApproveLocal(ctx, Grant{Action: "refund.void", Approver: "finance-lead", Expires: w.clock.Now().Add(30 * time.Second)}, "console:finance-lead")
	require.NoError(t, err)
	require.Equal(t, w.clock.Now().Add(30*time.Second).UTC(), a.Expires)
	b, err := g.ApproveLocal(ctx, Grant{Action: "refund.void", Approver: "finance-lead", Expires: w.clock.Now().Add(time.Hour)}, "console:finance-lead")
	require.NoError(t, err)
	require.True(t, b.Expires.Equal(g.rep.offerTime.Std()), "capped at the offer's exp")
	w.clock.Add(31 * time.Second)
	require.NoError(t, g.authorize("refund.void", "v-4", ""), "the second approval is still live")
	require.ErrorIs(t, g.authorize("refund.void", "v-5", ""), ErrApprovalRequired, "the first expired")
	require.Equal(t, authority.SourceOperator, a.Source)
	require.Equal(t, []byte("console:finance-lead"), a.Evidence)
}

// A signed approval is portable evidence: it verifies through the Trust,
// for this hop and the owner the package names, and one statement is one
// grant however often it is presented.
func TestGuard_SignedApproval(t *testing.T) {
	ctx := context.Background()
	d, key := signedWorld(t)
	g, w := d.hopGuard, d.w
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := w.clock.Now().Unix()
	st := ApprovalStatement{Hop: g.in.Digest().String(), Action: "refund.issue", OperationID: "op-1", Approver: "finance-lead", Iat: now, Exp: now + 60}
	sign := func(st ApprovalStatement, k *ecdsa.PrivateKey) []byte {
		b, err := SignApproval(st, k, jws.ES256)
		require.NoError(t, err)
		return b
	}
	_, err = g.ApproveSigned(ctx, sign(st, stranger))
	require.ErrorIs(t, err, ErrApproval, "not the approver's key")
	wrong := st
	wrong.Hop = "sha-256:AAAA"
	_, err = g.ApproveSigned(ctx, sign(wrong, key))
	require.ErrorIs(t, err, ErrApproval, "another hop")
	late := st
	late.Exp = now
	_, err = g.ApproveSigned(ctx, sign(late, key))
	require.ErrorIs(t, err, ErrApproval, "expired")
	notOwner := st
	notOwner.Approver = string(triage)
	_, err = g.ApproveSigned(ctx, sign(notOwner, w.signerKey(t, triage)))
	require.Error(t, err)

	good := sign(st, key)
	a, err := g.ApproveSigned(ctx, good)
	require.NoError(t, err)
	require.Equal(t, authority.SourceSigned, a.Source)
	require.Equal(t, good, a.Evidence)
	_, err = g.ApproveSigned(ctx, good)
	require.NoError(t, err, "presented again: the same grant")
	require.NoError(t, g.authorize("refund.issue", "op-1", ""))
	require.ErrorIs(t, g.authorize("refund.issue", "op-2", ""), ErrApprovalRequired)
	as, err := g.ledger.Approvals(ctx, g.in.Digest().String())
	require.NoError(t, err)
	require.Len(t, as, 1)
}

// signerKey returns a key to sign approvals with as id: a fresh one, not
// in the trust configuration under "finance-lead".
func (w *world) signerKey(t *testing.T, _ handoff.AgentID) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

// Finding: "the guard's memory dies with the object". A guard rebuilt on
// the same ledger (after a restart, for a retransmission) refuses what an
// earlier one allowed. A guard of a hop of another chain does not: the
// name is another effect there (issue 33, finding 1).
func TestGuard_MemoryIsTheLedgers(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	ledger := authority.NewMemory()
	g := newHopGuard(t, w, refundPackage(), ledger)
	require.NoError(t, g.authorize("ledger.read", "op-9", ""))
	again, err := NewGuard(context.Background(), g.rep, GuardConfig{Ledger: ledger, Now: w.clock.Now})
	require.NoError(t, err)
	require.ErrorIs(t, again.Authorize(context.Background(), g.call("ledger.read", "op-9", "")), ErrRepeated)
	other := newHopGuard(t, w, refundPackage(), ledger)
	require.NoError(t, other.authorize("ledger.read", "op-9", ""))
	require.ErrorIs(t, other.authorize("ledger.read", "op-9", ""), ErrRepeated)
	// The package's completed actions are recorded as performed.
	err = g.authorize("ledger.read", "", "notify-INV-1042-1")
	require.ErrorIs(t, err, ErrRepeated)
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.Equal(t, "notify-INV-1042-1", r.Key)
}

// Finding: "effects match by accident". The rule: exact comparison, and an
// operation id and an idempotency key share one namespace.
func TestGuard_EffectMatchingRule(t *testing.T) {
	g := passedGuard(t)
	require.NoError(t, g.authorize("ledger.read", "op-1", ""))
	require.ErrorIs(t, g.authorize("ledger.read", "", "op-1"), ErrRepeated, "the same value as the other kind")
	require.ErrorIs(t, g.authorize("ledger.read", "op-1", ""), ErrRepeated)
	require.NoError(t, g.authorize("ledger.read", "OP-1", ""), "another value")
	require.NoError(t, g.authorize("ledger.read", "op-1 ", ""), "another value")
	require.ErrorIs(t, g.authorize("ledger.read", "notify-INV-1042-1", ""), ErrRepeated, "a completed action's key as an id")
}

// Finding: "a guard answers for any hop". A guard answers for its own hop
// only, named by the offer's digest.
func TestGuard_AnswersOnlyForItsHop(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	ledger := authority.NewMemory()
	a := newHopGuard(t, w, refundPackage(), ledger)
	p := refundPackage()
	p.Authority.Allowed = []string{"refund.eligibility"}
	p.Authority.Denied = append(p.Authority.Denied, "ledger.read")
	b := newHopGuard(t, w, p, ledger)
	// Serving hop B with hop A's guard: refused, though A allows it.
	err := a.Authorize(context.Background(), b.call("ledger.read", "", ""))
	require.ErrorIs(t, err, ErrOtherHop)
	require.ErrorIs(t, a.Authorize(context.Background(), Call{Action: "ledger.read"}), ErrOtherHop, "a call must name its hop")
	require.ErrorIs(t, b.authorize("ledger.read", "", ""), ErrDenied)
	require.True(t, a.Hop().Equal(a.in.Digest()))
	// The middlewares carry the verified hop's guard in its context.
	ctx := ContextWithGuard(context.Background(), b.Guard)
	require.Same(t, b.Guard, GuardFromContext(ctx))
	require.Nil(t, GuardFromContext(context.Background()))
}

func TestGuard_StopRefusesEverything(t *testing.T) {
	g := passedGuard(t)
	g.Stop("hop canceled")
	g.Stop("twice")
	err := g.authorize("ledger.read", "", "")
	require.ErrorIs(t, err, ErrStopped)
	require.Contains(t, err.Error(), "hop canceled")
}

// Finish records the final disposition: every guard of the hop stops,
// including one built after it.
func TestGuard_FinishStopsTheHop(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, handoff.JWS, nil)
	ledger := authority.NewMemory()
	g := newHopGuard(t, w, refundPackage(), ledger)
	twin, err := NewGuard(ctx, g.rep, GuardConfig{Ledger: ledger, Now: w.clock.Now})
	require.NoError(t, err)
	require.NoError(t, g.Finish(ctx, state.Completed, "refund settled"))
	require.ErrorIs(t, g.authorize("ledger.read", "", ""), ErrStopped)
	require.ErrorIs(t, twin.Authorize(ctx, g.call("ledger.read", "op-7", "")), ErrStopped, "its effects are refused by the ledger")
	later, err := NewGuard(ctx, g.rep, GuardConfig{Ledger: ledger, Now: w.clock.Now})
	require.NoError(t, err)
	require.ErrorIs(t, later.Authorize(ctx, g.call("ledger.read", "", "")), ErrStopped)
	h, err := ledger.Hop(ctx, g.in.Digest().String())
	require.NoError(t, err)
	require.Equal(t, "completed", h.Final.State)
}

// No authority outlives the offer.
func TestGuard_RefusesAfterOfferExpiry(t *testing.T) {
	g := passedGuard(t)
	require.NoError(t, g.authorize("ledger.read", "", ""))
	g.w.clock.Add(121 * time.Second)
	require.ErrorIs(t, g.authorize("ledger.read", "", ""), ErrStopped)
}

// State for human approval: the pending must-ask approvals as values.
func TestGuard_PendingApprovals(t *testing.T) {
	ctx := context.Background()
	g := passedGuard(t)
	got, err := g.Pending(ctx)
	require.NoError(t, err)
	require.Equal(t, []ApprovalRequest{{Action: "refund.issue", Owner: "finance-lead", Hop: g.in.Digest(), Item: "refund over EUR 500"}}, got)
	approveOnce(t, g, Grant{Action: "refund.issue"})
	got, err = g.Pending(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, g.authorize("refund.issue", "op-1", ""))
	got, err = g.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1, "used: pending again")
}

// Finding: "a report can be forged". Reports are opaque: one built by hand
// is never acceptable and NewGuard refuses it without a panic; what the
// accessors return are copies.
func TestGuard_OnlyFromPassedPackage(t *testing.T) {
	ctx := context.Background()
	cfg := GuardConfig{Ledger: authority.NewMemory()}
	for _, rep := range []*Report{nil, {}, {binding: &ref.Result{Outcome: ref.Verified}}} {
		require.NotPanics(t, func() {
			_, err := NewGuard(ctx, rep, cfg)
			require.ErrorIs(t, err, ErrNotPassed)
		})
		require.False(t, rep.Acceptable())
		require.Nil(t, rep.Package())
	}
	w := newWorld(t, handoff.JWS, nil)
	p := refundPackage()
	p.State[0].AsOf = time.Unix(t0, 0).Add(-time.Hour)
	built, bind := w.build(p, BuildOptions{})
	in, failed := w.receive(w.offer(built, bind), handoff.JSON, Delivered{Package: built.Encoded})
	require.False(t, failed.Acceptable())
	require.NotEmpty(t, failed.Findings())
	failed.Findings()[0] = Finding{}
	require.False(t, failed.Acceptable(), "clearing a copy changes nothing")
	require.True(t, failed.Has(CodeStaleState, "/state/0/as_of"))
	_, err := NewGuard(ctx, failed, cfg)
	require.ErrorIs(t, err, ErrNotPassed)
	d := failed.Digest()
	d.Val[0] ^= 1
	require.False(t, failed.Digest().Equal(d))

	// A package checked on its own, without its offer, passes the check but
	// is never acceptable: no guard, no "accepted".
	built, bind = w.build(refundPackage(), BuildOptions{})
	rep, err := Check(ctx, nil, Delivered{Package: built.Encoded}, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource(), Unbound: true})
	require.NoError(t, err)
	require.True(t, rep.Passed())
	require.False(t, rep.Acceptable())
	require.Nil(t, rep.Package())
	require.NotNil(t, rep.UnverifiedPackage())
	_, err = NewGuard(ctx, rep, cfg)
	require.ErrorIs(t, err, ErrNotPassed)
	require.Equal(t, Acknowledgement{Decision: DecisionRejected, Reason: "policy", Findings: []string{"not-bound"}}, Acknowledge(rep))
	out := w.offer(built, bind)
	in, good := w.receive(out, handoff.JSON, Delivered{Package: built.Encoded})
	_, err = Reply(ctx, w.to, in, rep)
	require.ErrorIs(t, err, ErrNotPassed)
	// A report from Check names no offer digest: a guard needs one.
	plain, err := Check(ctx, in.Offer(), Delivered{Package: built.Encoded}, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource()})
	require.NoError(t, err)
	require.True(t, plain.Acceptable())
	_, err = NewGuard(ctx, plain, cfg)
	require.ErrorIs(t, err, ErrNotPassed)
	_, err = NewGuard(ctx, good, GuardConfig{})
	require.ErrorIs(t, err, ErrNoLedger)

	// A report made against another offer does not answer this one.
	built2, bind2 := w.build(refundPackage(), BuildOptions{})
	out2 := w.offer(built2, bind2)
	in2, _ := w.receive(out2, handoff.JSON, Delivered{Package: built2.Encoded})
	_, err = Reply(ctx, w.to, in2, good)
	require.ErrorIs(t, err, ErrNotPassed)
	_, err = Reply(ctx, w.to, in, good)
	require.NoError(t, err)
	_, err = Reply(ctx, w.to, in, &Report{})
	require.ErrorIs(t, err, ErrNotPassed)
}

// Concurrent calls with one idempotency key: exactly one passes; Do runs
// the tool outside any lock (the tool itself consults the guard).
func TestGuard_ConcurrentReplayOnePasses(t *testing.T) {
	g := passedGuard(t)
	approveOnce(t, g, Grant{Action: "refund.issue", Uses: 32})
	var passed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := g.Do(context.Background(), g.call("refund.issue", "", "refund-INV-1042"), func(context.Context) ([]byte, error) {
				passed.Add(1)
				return nil, g.authorize("ledger.read", "", "")
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
	r := &Report{checked: true}
	for i := range 40 {
		r.findings = append(r.findings, Finding{Code: CodeMissing, Path: "/state/" + string(rune('a'+i%26))})
	}
	r.findings = append(r.findings, Finding{Code: CodeUnsupported, Path: "/x", Advisory: true})
	d := r.Detail()
	require.Contains(t, d, "missing-field /state/a")
	require.Contains(t, d, "; and 24 more")
	require.NotContains(t, d, "/x")
	require.Less(t, len(d), 1024)
}

// The acknowledgement and the final disposition of a hop are kept in the
// ledger, the system of record.
func TestGuard_AcknowledgementAndDispositionRecorded(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, handoff.JWS, nil)
	ledger := authority.NewMemory()
	g := newHopGuard(t, w, refundPackage(), ledger)
	require.NoError(t, RecordAcknowledgement(ctx, ledger, g.rep, w.clock.Now()))
	require.NoError(t, RecordAcknowledgement(ctx, ledger, g.rep, w.clock.Now()))
	require.NoError(t, g.Finish(ctx, state.Completed, "refund settled"))
	h, err := ledger.Hop(ctx, g.in.Digest().String())
	require.NoError(t, err)
	require.Equal(t, authority.Accepted, h.Ack.Decision)
	require.Equal(t, g.rep.PackageRef().Dig.String(), h.Ack.Package)
	require.Equal(t, "completed", h.Final.State)

	p := refundPackage()
	p.Next.Action = "card.charge"
	built, bind := w.build(p, BuildOptions{})
	in, rep := w.receive(w.offer(built, bind), handoff.JSON, Delivered{Package: built.Encoded})
	require.NoError(t, RecordAcknowledgement(ctx, ledger, rep, w.clock.Now()))
	h, err = ledger.Hop(ctx, in.Digest().String())
	require.NoError(t, err)
	require.Equal(t, authority.Rejected, h.Ack.Decision)
	require.Equal(t, []string{"next-action-denied"}, h.Ack.Findings)
	require.ErrorIs(t, RecordAcknowledgement(ctx, ledger, &Report{}, w.clock.Now()), ErrNotPassed)
}

// An approval given once the offer expired is the guard's refusal, as any
// use of the hop's authority then is (a *Refusal wrapping ErrStopped), not
// a record the ledger refuses as invalid: a host ends the hop with it.
func TestGuard_ApprovalAfterExpiryRefused(t *testing.T) {
	ctx := context.Background()
	g := passedGuard(t)
	g.w.clock.Add(121 * time.Second)
	req := ApprovalRequest{Action: "refund.issue", Owner: "finance-lead", Hop: g.in.Digest(), OperationID: "refund-1"}
	_, err := g.ApproveLocal(ctx, req.Grant(), "console:finance-lead")
	require.ErrorIs(t, err, ErrStopped)
	require.NotErrorIs(t, err, authority.ErrInvalid)
	var r *Refusal
	require.ErrorAs(t, err, &r)
	as, err := g.ledger.Approvals(ctx, g.in.Digest().String())
	require.NoError(t, err)
	require.Empty(t, as, "nothing is recorded")

	g.Stop("hop canceled")
	_, err = g.ApproveLocal(ctx, req.Grant(), "console:finance-lead")
	require.ErrorIs(t, err, ErrStopped)
}

// What the ledger knows of the hop's outcome (Effects): the package's
// completed actions, a unit of work run with Once, a read under no name
// and a refused call are no effect; a call Authorize records, and one Do
// claims, are, whatever became of them.
func TestGuard_Effects(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, handoff.JWS, nil)
	ledger := authority.NewMemory()
	g := newHopGuard(t, w, refundPackage(), ledger)
	took := func() bool {
		t.Helper()
		ok, err := g.Effects(ctx)
		require.NoError(t, err)
		return ok
	}
	require.False(t, took(), "the package's completed action is not the hop's effect")
	_, err := g.Once(ctx, Call{Hop: g.in.Digest(), Action: "a2a.message", IdempotencyKey: "unit-1"},
		func(context.Context) ([]byte, error) { return nil, nil })
	require.NoError(t, err)
	require.NoError(t, g.authorize("ledger.read", "", ""))
	require.ErrorIs(t, g.authorize("card.charge", "charge-1", ""), ErrDenied)
	require.ErrorIs(t, g.authorize("ledger.read", "", "notify-INV-1042-1"), ErrRepeated, "the completed action's name")
	require.False(t, took(), "units, unnamed reads and refusals are no effect")

	_, err = g.Do(ctx, Call{Hop: g.in.Digest(), Action: "ledger.read", Tool: "ledger", Args: []byte(`{}`)},
		func(context.Context) ([]byte, error) { return nil, errors.New("the tool failed") })
	require.Error(t, err)
	require.True(t, took(), "a claimed call is an effect, whatever became of it")

	other := newHopGuard(t, w, refundPackage(), ledger)
	require.NoError(t, other.authorize("ledger.read", "read-1", ""))
	ok, err := other.Effects(ctx)
	require.NoError(t, err)
	require.True(t, ok)
}
