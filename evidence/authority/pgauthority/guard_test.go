package pgauthority_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/pgauthority"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// received is a payments specialist's passed package for one refund: the
// received offer and its report.
func received(t *testing.T, now time.Time) (*handoff.Received, *evidence.Report) {
	t.Helper()
	ctx := context.Background()
	const triage, payments = handoff.AgentID("spiffe://shop.example/agent/triage"), handoff.AgentID("spiffe://shop.example/agent/payments")
	clock := func() time.Time { return now }
	signers := map[handoff.AgentID]*handoff.Signer{}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range []handoff.AgentID{triage, payments} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		s, err := handoff.NewSigner(k, handoff.JWS, nil)
		require.NoError(t, err)
		signers[id], keys[id] = s, []handoff.TrustedKey{s.Key()}
	}
	trust, err := handoff.NewTrust(keys)
	require.NoError(t, err)
	specialist, err := handoff.NewAgent(handoff.Config{ID: payments, Signer: signers[payments], Trust: trust, Now: clock})
	require.NoError(t, err)

	invoice := []byte(`{"invoice":"INV-1042","status":"paid","refunded":0}`)
	const loc = "urn:shop:ledger:INV-1042"
	pkg := evidence.Package{
		Sender:   evidence.Party{Role: "triage"},
		Receiver: evidence.Party{Role: "payments-specialist"},
		Control:  evidence.SpecialistReturnsResult,
		Outcome:  evidence.Outcome{Result: "refund INV-1042 (EUR 640)", DoneWhen: "the gateway reports the refund succeeded"},
		Authority: evidence.Authority{
			Allowed: []string{"ledger.read", "gateway.refund.status"},
			MustAsk: []string{"gateway.refund.create"},
			Denied:  []string{"card.charge"},
		},
		State: []evidence.StateClaim{{System: "billing-ledger", State: "INV-1042 paid, not refunded", AsOf: now.Add(-time.Minute), Evidence: []string{"ledger"}}},
		Artifacts: []evidence.Artifact{{ID: "ledger", Proves: "INV-1042 is paid and not refunded",
			Ref: evidence.RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(invoice), Loc: loc})}},
		Passed:       []evidence.ContextItem{{Name: "invoice", Value: "INV-1042"}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund over EUR 500", Action: "gateway.refund.create", Owner: "finance-lead"}},
		Next:         evidence.NextAction{Action: "gateway.refund.status", Description: "confirm no refund exists for INV-1042"},
		Verification: evidence.Verification{Check: "gateway.refund.status answers for INV-1042"},
		Timeouts:     []evidence.Timeout{{Condition: "no approval within 4 hours", Owner: "triage", At: now.Add(4 * time.Hour)}},
		Rollback:     evidence.Rollback{Method: "cancel the refund before settlement"},
	}
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	bind := evidence.Binding{Hop: hop, Iss: triage, Aud: payments, Iat: handoff.TimeOf(now), Exp: handoff.TimeOf(now) + 120}
	built, err := evidence.NewBuilder(pkg).Build(bind, evidence.BuildOptions{})
	require.NoError(t, err)
	offer, err := signers[triage].SignOffer(&handoff.Offer{Hop: hop, Dialog: "case-77", Iss: triage, Aud: payments,
		Iat: bind.Iat, Exp: bind.Exp, Refs: []ref.Ref{built.Ref}})
	require.NoError(t, err)
	wire, err := (&handoff.Handoff{Offer: offer}).Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := specialist.Receive(ctx, wire, handoff.Host{Dialog: "case-77"})
	require.NoError(t, err)
	rep, err := evidence.CheckReceived(ctx, in, evidence.Delivered{Package: built.Encoded}, evidence.CheckConfig{
		Now: clock, Artifacts: ref.ByLoc(map[string]ref.Object{loc: {Octets: invoice}})})
	require.NoError(t, err)
	require.True(t, rep.Acceptable(), "findings: %+v", rep.Findings())
	return in, rep
}

// Two replicas of the specialist, each with its own pool and its own guard
// for the one hop, on one PostgreSQL ledger: one refund is allowed once
// across both, its approval used once, and the acknowledgement and the
// final disposition sit in the database, where a third pool, after both
// are gone, reads them and a guard rebuilt for the hop is stopped.
func TestGuardReplicasOnPostgres(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1793000000, 0).UTC()
	clock := func() time.Time { return now }
	in, rep := received(t, now)
	db1 := testDB(t, nil)
	name := testName(t, db1)
	var guards []*evidence.Guard
	var ledgers []authority.Ledger
	for _, db := range []*sql.DB{db1, testDB(t, nil)} {
		l := mustOpen(t, db, name)
		g, err := evidence.NewGuard(ctx, rep, evidence.GuardConfig{Ledger: l, Now: clock})
		require.NoError(t, err)
		guards, ledgers = append(guards, g), append(ledgers, l)
	}
	require.NoError(t, evidence.RecordAcknowledgement(ctx, ledgers[0], rep, now))
	require.NoError(t, evidence.RecordAcknowledgement(ctx, ledgers[1], rep, now), "the same acknowledgement again")

	refund := evidence.Call{Hop: in.Digest(), Action: "gateway.refund.create", IdempotencyKey: "refund-INV-1042"}
	require.Error(t, guards[1].Authorize(ctx, refund), "must ask: no approval yet")
	_, err := guards[0].ApproveLocal(ctx, evidence.Grant{Action: "gateway.refund.create", Approver: "finance-lead"}, "console:finance-lead")
	require.NoError(t, err)

	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if guards[i%2].Authorize(ctx, refund) == nil {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), allowed.Load(), "one refund across both replicas")
	other := refund
	other.IdempotencyKey = "refund-INV-1042-again"
	require.Error(t, guards[0].Authorize(ctx, other), "the approval's one use is spent")
	require.NoError(t, guards[1].Finish(ctx, state.Completed, "refund settled"))

	// Another process, after both replicas are gone.
	l := mustOpen(t, testDB(t, nil), name)
	h, err := l.Hop(ctx, in.Digest().String())
	require.NoError(t, err)
	require.NotNil(t, h.Ack)
	require.Equal(t, authority.Accepted, h.Ack.Decision)
	require.Equal(t, rep.PackageRef().Dig.String(), h.Ack.Package)
	require.NotNil(t, h.Final)
	require.Equal(t, authority.Final{State: "completed", Detail: "refund settled", At: now}, *h.Final)
	rec := lookupOne(t, l, "refund-INV-1042")
	require.Equal(t, "gateway.refund.create", rec.Action)
	require.NotEmpty(t, rec.Approval)
	g, err := evidence.NewGuard(ctx, rep, evidence.GuardConfig{Ledger: l, Now: clock})
	require.NoError(t, err)
	require.Error(t, g.Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: "gateway.refund.status"}), "the hop is finished")
}

var _ authority.Ledger = (*pgauthority.Ledger)(nil)
