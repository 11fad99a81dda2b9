package evidence

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"
)

// formats runs fn for the signed forms of the draft: JWS carried in JSON,
// COSE carried in CBOR.
func formats(t *testing.T, fn func(t *testing.T, f handoff.Format, enc handoff.Encoding)) {
	t.Run("JWS", func(t *testing.T) { fn(t, handoff.JWS, handoff.JSON) })
	t.Run("COSE", func(t *testing.T) { fn(t, handoff.COSE, handoff.CBOR) })
}

// openStore returns the delegate's store. The restart below builds a new
// Agent on the same store: what the hop's record keeps is all the new one
// knows. That a durable store keeps its records across a real process
// restart is replay/boltstore's own test, and the multi-process test of
// replay/replicas; this package's module links no backend.
func openStore(c *clock) replay.Store {
	return replay.NewMemory(replay.MemoryOptions{Now: c.Now})
}

// Acceptance: the package passes, the delegate answers "accepted" with the
// package digest in refs, the delegator sees it, and the delegate's
// durable store still holds the acknowledged digest after a restart.
func TestContract_Acceptance_SurvivesRestart(t *testing.T) {
	formats(t, func(t *testing.T, f handoff.Format, enc handoff.Encoding) {
		ctx := context.Background()
		c := &clock{t: time.Unix(t0, 0)}
		store := openStore(c)
		w := newWorld(t, f, store)
		w.clock = c
		w.from, w.to = w.rebuild()

		built, bind := w.build(refundPackage(), BuildOptions{})
		out := w.offer(built, bind)
		in, rep := w.receive(out, enc, Delivered{Package: built.Encoded})
		require.True(t, rep.Passed())
		require.Equal(t, Acknowledgement{Decision: DecisionAccepted}, Acknowledge(rep))
		st, err := Reply(ctx, w.to, in, rep)
		require.NoError(t, err)

		res, err := w.from.HandleStatus(ctx, st.Octets)
		require.NoError(t, err)
		require.Equal(t, state.Accepted, res.State)
		require.Len(t, Refs(res.Status.Refs), 1)
		require.True(t, Refs(res.Status.Refs)[0].Dig.Equal(built.Ref.Dig), "the acknowledged package is the one sent")

		// Restart: a new Agent on the store that survived, the package
		// digest with it.
		c.Add(time.Minute)
		w.to = w.delegate(store)
		d, ok, err := Recorded(ctx, store, triage, bind.Hop, w.trust, handoff.Limits{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, state.Accepted, d.State)
		require.False(t, d.Final())
		require.NotNil(t, d.Package)
		require.True(t, d.Package.Dig.Equal(built.Ref.Dig))

		// A retransmission after the restart is answered with the same
		// signed acknowledgement (HC-39).
		data, err := out.Handoff.Encode(enc)
		require.NoError(t, err)
		again, err := w.to.Receive(ctx, data, handoff.Host{Peer: triage})
		require.NoError(t, err)
		require.True(t, again.Retransmission())
		last, ok := again.LastStatus()
		require.True(t, ok)
		require.Equal(t, st.Octets, last.Octets)
	})
}

// rebuild makes both agents again on the world's clock.
func (w *world) rebuild() (*handoff.Agent, *handoff.Agent) {
	from, err := handoff.NewAgent(handoff.Config{ID: triage, Signer: w.signers[triage], Trust: w.trust, Now: w.clock.Now, Rand: w.hops})
	require.NoError(w.t, err)
	return from, w.delegate(w.store)
}

// Rejection: a stale package is rejected with reason "policy" and a detail
// naming the finding; the rejection is the hop's final disposition and
// resolves it for the delegator.
func TestContract_Rejection(t *testing.T) {
	formats(t, func(t *testing.T, f handoff.Format, enc handoff.Encoding) {
		ctx := context.Background()
		w := newWorld(t, f, nil)
		out, pkg, _ := w.rawOffer(refundPackage(), func(p *Package, b Binding) {
			p.State[0].AsOf = b.Iat.Std().Add(-2 * time.Hour)
		}, false, false)
		in, rep := w.receive(out, enc, Delivered{Package: pkg})
		require.False(t, rep.Passed())
		ack := Acknowledge(rep)
		require.Equal(t, Acknowledgement{Decision: DecisionRejected, Reason: "policy", Findings: []string{"stale-state"}}, ack)
		st, err := Reply(ctx, w.to, in, rep)
		require.NoError(t, err)

		res, err := w.from.HandleStatus(ctx, st.Octets)
		require.NoError(t, err)
		require.Equal(t, state.Rejected, res.State)
		require.Equal(t, reason.Policy, res.Status.Reason)
		require.Contains(t, res.Status.Detail, "stale-state /state/0/as_of")
		info, _, _ := w.from.Hop(context.Background(), out.Offer.Hop)
		require.True(t, info.Resolved)

		d, ok, err := Recorded(ctx, w.store0(), triage, out.Offer.Hop, w.trust, handoff.Limits{})
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, d.Final())
		require.Equal(t, state.Rejected, d.State)
		require.NotNil(t, d.Package)

		// A rejected package yields no guard.
		_, err = NewGuard(ctx, rep, GuardConfig{Ledger: authority.NewMemory(), Now: w.clock.Now})
		require.ErrorIs(t, err, ErrNotPassed)
	})
}

// Timeout: the delegate never answers. The delegator's hop expires
// (local and provisional, HC-27) and stays unresolved; once the package's
// timeout comes due its owner escalates.
func TestContract_Timeout(t *testing.T) {
	formats(t, func(t *testing.T, f handoff.Format, enc handoff.Encoding) {
		w := newWorld(t, f, nil)
		built, bind := w.build(refundPackage(), BuildOptions{})
		out := w.offer(built, bind)
		in, rep := w.receive(out, enc, Delivered{Package: built.Encoded})
		require.True(t, rep.Passed())
		require.Empty(t, rep.Package().Overdue(w.clock.Now()))

		w.clock.Add(121 * time.Second)
		info, ok, _ := w.from.Hop(context.Background(), bind.Hop)
		require.True(t, ok)
		require.Equal(t, state.Expired, info.State)
		require.False(t, info.Resolved)

		// A late verified "accepted" replaces the local expiry (HC-27).
		st, err := Reply(context.Background(), w.to, in, rep)
		require.NoError(t, err)
		res, err := w.from.HandleStatus(context.Background(), st.Octets)
		require.NoError(t, err)
		require.Equal(t, state.Accepted, res.State)

		// Then nothing more comes. When the package's timeout is due, its
		// owner escalates; the hop is still unresolved for the delegator,
		// and the delegate's store keeps the accepted hop and its package
		// until it is resolved (HC-34).
		w.clock.Add(4 * time.Hour)
		due := built.Package.Overdue(w.clock.Now())
		require.Len(t, due, 1)
		require.Equal(t, "triage", due[0].Owner)
		info, _, _ = w.from.Hop(context.Background(), bind.Hop)
		require.False(t, info.Resolved, "the delegate may be doing the work")
		d, ok, err := Recorded(context.Background(), w.store, triage, bind.Hop, w.trust, handoff.Limits{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, state.Accepted, d.State)
		require.True(t, d.Package.Dig.Equal(built.Ref.Dig))
	})
}

// Cancellation: the delegator cancels an accepted hop; the delegate's hop
// becomes canceled, its guard stops, and the store keeps the acknowledged
// package with the canceled state.
func TestContract_Cancellation(t *testing.T) {
	formats(t, func(t *testing.T, f handoff.Format, enc handoff.Encoding) {
		ctx := context.Background()
		w := newWorld(t, f, nil)
		built, bind := w.build(refundPackage(), BuildOptions{})
		out := w.offer(built, bind)
		in, rep := w.receive(out, enc, Delivered{Package: built.Encoded})
		st, err := Reply(ctx, w.to, in, rep)
		require.NoError(t, err)
		_, err = w.from.HandleStatus(ctx, st.Octets)
		require.NoError(t, err)
		g, err := NewGuard(ctx, rep, GuardConfig{Ledger: authority.NewMemory(), Now: w.clock.Now})
		require.NoError(t, err)
		require.NoError(t, g.Authorize(ctx, Call{Hop: in.Digest(), Action: "refund.eligibility"}))

		cancel, err := w.from.Cancel(ctx, bind.Hop)
		require.NoError(t, err)
		res, err := w.to.HandleStatus(ctx, cancel.Status.Octets)
		require.NoError(t, err)
		require.True(t, res.Changed)
		require.Equal(t, state.Canceled, res.State)
		g.Stop("hop canceled by its delegator")
		require.ErrorIs(t, g.Authorize(ctx, Call{Hop: in.Digest(), Action: "refund.eligibility"}), ErrStopped)

		d, ok, err := Recorded(ctx, w.store0(), triage, bind.Hop, w.trust, handoff.Limits{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, state.Canceled, d.State)
		require.True(t, d.Final())
		require.True(t, d.Package.Dig.Equal(built.Ref.Dig))
	})
}

// Return to sender: the specialist gets the approval, issues the refund
// once, and returns the result as "completed" whose refs name the result
// by digest; the delegator checks it, and refuses a result that does not
// match.
func TestContract_ReturnToSender(t *testing.T) {
	formats(t, func(t *testing.T, f handoff.Format, enc handoff.Encoding) {
		ctx := context.Background()
		w := newWorld(t, f, nil)
		built, bind := w.build(refundPackage(), BuildOptions{Salted: true})
		out := w.offer(built, bind)
		in, rep := w.receive(out, enc, Delivered{Package: built.Encoded, Salt: built.Salt})
		require.True(t, rep.Passed())
		acc, err := Reply(ctx, w.to, in, rep)
		require.NoError(t, err)
		_, err = w.from.HandleStatus(ctx, acc.Octets)
		require.NoError(t, err)

		g, err := NewGuard(ctx, rep, GuardConfig{Ledger: authority.NewMemory(), Now: w.clock.Now})
		require.NoError(t, err)
		call := Call{Hop: in.Digest(), Action: "refund.issue", IdempotencyKey: "refund-INV-1042"}
		require.ErrorIs(t, g.Authorize(ctx, call), ErrApprovalRequired)
		_, err = g.ApproveLocal(ctx, Grant{Action: "refund.issue", Approver: "finance-lead"}, "operator:finance-lead@console")
		require.NoError(t, err)
		require.NoError(t, g.Authorize(ctx, call))
		require.ErrorIs(t, g.Authorize(ctx, call), ErrRepeated)

		result := []byte(`{"refund":"re_1","invoice":"INV-1042","status":"succeeded"}`)
		resRef := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(result), Loc: "urn:example:refund:re_1"}
		done, err := ReturnResult(ctx, w.to, in, rep, []ref.Ref{resRef})
		require.NoError(t, err)
		g.Stop("completed")

		res, err := w.from.HandleStatus(ctx, done.Octets)
		require.NoError(t, err)
		require.Equal(t, state.Completed, res.State)
		got, err := CheckResult(ctx, res.Status, built.Ref, ref.ByLoc(map[string]ref.Object{
			"urn:example:refund:re_1": {Octets: result}}))
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, ref.Verified, got[0].Outcome)

		// A tampered result, a missing one, and another package are refused.
		_, err = CheckResult(ctx, res.Status, built.Ref, ref.ByLoc(map[string]ref.Object{
			"urn:example:refund:re_1": {Octets: []byte(`{"refund":"re_1","status":"failed"}`)}}))
		require.ErrorIs(t, err, ErrResult)
		_, err = CheckResult(ctx, res.Status, built.Ref, nil)
		require.ErrorIs(t, err, ErrResult)
		other := built.Ref
		other.Dig = digest.SHA256([]byte("another package"))
		_, err = CheckResult(ctx, res.Status, other, nil)
		require.ErrorIs(t, err, ErrResult)

		d, ok, err := Recorded(ctx, w.store0(), triage, bind.Hop, w.trust, handoff.Limits{})
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, d.Final())
		require.Equal(t, state.Completed, d.State)
		require.True(t, d.Package.Dig.Equal(built.Ref.Dig), "the final record still names the package")
	})
}

// Under "transfer ownership" there is no result to return.
func TestContract_ReturnResultNeedsSpecialistMode(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, handoff.JWS, nil)
	p := refundPackage()
	p.Control = TransferOwnership
	built, bind := w.build(p, BuildOptions{})
	out := w.offer(built, bind)
	in, rep := w.receive(out, handoff.JSON, Delivered{Package: built.Encoded})
	_, err := ReturnResult(ctx, w.to, in, rep, []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("r"))}})
	require.ErrorIs(t, err, ErrNotReturn)
}

// Timeout without any answer: the delegator's hop expires and stays
// unresolved, and once the delegate has forgotten the hop it can no longer
// acknowledge the package.
func TestContract_TimeoutNeverAnswered(t *testing.T) {
	formats(t, func(t *testing.T, f handoff.Format, enc handoff.Encoding) {
		w := newWorld(t, f, nil)
		built, bind := w.build(refundPackage(), BuildOptions{})
		out := w.offer(built, bind)
		in, rep := w.receive(out, enc, Delivered{Package: built.Encoded})
		require.True(t, rep.Acceptable())
		w.clock.Add(time.Hour)
		info, _, _ := w.from.Hop(context.Background(), bind.Hop)
		require.Equal(t, state.Expired, info.State)
		require.False(t, info.Resolved)
		_, err := Reply(context.Background(), w.to, in, rep)
		require.ErrorIs(t, err, handoff.ErrState)
		_, ok, err := Recorded(context.Background(), w.store, triage, bind.Hop, w.trust, handoff.Limits{})
		require.NoError(t, err)
		require.False(t, ok)
	})
}
