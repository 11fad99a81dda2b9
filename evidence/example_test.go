package evidence_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/ref"
)

// A billing refund handed from a triage agent to a payments specialist.
// The triage agent already emailed the customer (an external action, with
// its idempotency key), the refund itself waits for a finance lead's
// approval, the card number is withheld, and the payment gateway's state
// was read two hours ago: the checker flags it, and the specialist rejects
// the package with reason "policy". The triage agent reads the gateway
// again and hands over a fresh package, which passes; the specialist's
// guard then enforces the package's authority.
func Example() {
	ctx := context.Background()
	const triage, payments = handoff.AgentID("spiffe://shop.example/agent/triage"), handoff.AgentID("spiffe://shop.example/agent/payments")
	now := time.Unix(1793000000, 0).UTC()
	clock := func() time.Time { return now }
	signers, trust := exampleKeys(triage, payments)
	specialist := must(handoff.NewAgent(handoff.Config{ID: payments, Signer: signers[payments], Trust: trust, Now: clock}))

	// The objects the package cites, which the specialist can resolve.
	objects := map[string][]byte{
		"urn:shop:ledger:INV-1042": []byte(`{"invoice":"INV-1042","status":"paid","refunded":0}`),
		"urn:shop:mail:m-77":       []byte(`{"message":"m-77","status":"queued"}`),
	}
	r := func(loc string) evidence.WireRef {
		return evidence.RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(objects[loc]), Loc: loc})
	}
	resolver := map[string]ref.Object{}
	for loc, b := range objects {
		resolver[loc] = ref.Object{Octets: b}
	}

	handOver := func(gatewayReadAt time.Time) (handoff.Signed, *handoff.Offer, ref.Ref, []byte) {
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
			State: []evidence.StateClaim{
				{System: "billing-ledger", State: "INV-1042 paid, not refunded", AsOf: now.Add(-time.Minute), Evidence: []string{"ledger"}},
				{System: "payment-gateway", State: "no refund for INV-1042", AsOf: gatewayReadAt, Evidence: []string{"ledger"}},
			},
			Completed: []evidence.CompletedAction{{Action: "customer.notify", External: true,
				IdempotencyKey: "notify-INV-1042-1", Postcondition: "acknowledgement email queued", Evidence: []string{"mail"}}},
			Artifacts: []evidence.Artifact{
				{ID: "ledger", Ref: r("urn:shop:ledger:INV-1042"), Proves: "INV-1042 is paid and not refunded"},
				{ID: "mail", Ref: r("urn:shop:mail:m-77"), Proves: "the customer was told once"},
			},
			Passed:       []evidence.ContextItem{{Name: "invoice", Value: "INV-1042"}, {Name: "amount", Value: "EUR 640.00"}},
			Attempts:     []evidence.Attempt{{Attempt: "self-service refund", Result: "declined: over the EUR 500 limit"}},
			Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund over EUR 500", Action: "gateway.refund.create", Owner: "finance-lead"}},
			Next:         evidence.NextAction{Action: "gateway.refund.status", Description: "confirm no refund exists for INV-1042"},
			Verification: evidence.Verification{Check: "gateway.refund.status answers for INV-1042"},
			Timeouts:     []evidence.Timeout{{Condition: "no approval within 4 hours", Owner: "triage", At: now.Add(4 * time.Hour)}},
			Rollback:     evidence.Rollback{Method: "cancel the refund before settlement"},
		}
		// The delegator binds the package to the offer it rides with.
		hop := must(handoff.NewHopID(nil))
		bind := evidence.Binding{Hop: hop, Iss: triage, Aud: payments, Iat: handoff.TimeOf(now), Exp: handoff.TimeOf(now) + 120}
		built := must(evidence.NewBuilder(pkg).
			Withhold("card_number", "PCI scope: the refund goes to the original payment", []byte("4111111111111111")).
			Build(bind, evidence.BuildOptions{}))
		o := &handoff.Offer{Hop: hop, Dialog: "case-77", Iss: triage, Aud: payments, Iat: bind.Iat, Exp: bind.Exp,
			Refs: []ref.Ref{built.Ref}}
		return must(signers[triage].SignOffer(o)), o, built.Ref, built.Encoded
	}

	// The specialist receives an offer and the package beside it.
	deliver := func(offer handoff.Signed, pkg []byte) (*handoff.Received, *evidence.Report) {
		wire := must((&handoff.Handoff{Offer: offer}).Encode(handoff.JSON))
		in := must(specialist.Receive(ctx, wire, handoff.Host{Dialog: "case-77"}))
		rep := must(evidence.CheckReceived(ctx, in, evidence.Delivered{Package: pkg}, evidence.CheckConfig{
			Now: clock, Artifacts: ref.ByLoc(resolver)}))
		return in, rep
	}

	// First handoff: the gateway state is two hours old.
	offer, _, _, pkg := handOver(now.Add(-2 * time.Hour))
	in, rep := deliver(offer, pkg)
	for _, f := range rep.Findings() {
		fmt.Printf("finding: %s %s advisory=%v\n", f.Code, f.Path, f.Advisory)
	}
	st := must(evidence.Reply(ctx, specialist, in, rep))
	status := must(handoff.VerifyStatus(st, offer, trust, handoff.Limits{}))
	fmt.Printf("status: %s reason=%s detail=%q\n", status.State, status.Reason, status.Detail)

	// Second handoff: the triage agent read the gateway again.
	offer, _, sent, pkg := handOver(now.Add(-30 * time.Second))
	in, rep = deliver(offer, pkg)
	st = must(evidence.Reply(ctx, specialist, in, rep))
	status = must(handoff.VerifyStatus(st, offer, trust, handoff.Limits{}))
	fmt.Printf("status: %s, acknowledges the package sent: %v\n", status.State, evidence.Refs(status.Refs)[0].Dig.Equal(sent.Dig))

	// The specialist's ledger remembers effects and approvals; share one
	// (bbolt, Redis) between restarts and replicas.
	ledger := authority.NewMemory()
	guard := must(evidence.NewGuard(ctx, rep, evidence.GuardConfig{Ledger: ledger, Now: clock}))
	try := func(c evidence.Call) {
		c.Hop = in.Digest()
		err := guard.Authorize(ctx, c)
		var r *evidence.Refusal
		if errors.As(err, &r) {
			fmt.Printf("guard: %s refused: %v\n", c.Action, r.Err)
			return
		}
		fmt.Printf("guard: %s allowed\n", c.Action)
	}
	try(evidence.Call{Action: "gateway.refund.status"})
	try(evidence.Call{Action: "card.charge"})
	try(evidence.Call{Action: "gateway.refund.create", IdempotencyKey: "refund-INV-1042"})
	_, err := guard.ApproveLocal(ctx, evidence.Grant{Action: "gateway.refund.create", Approver: "finance-lead"}, "console:finance-lead")
	fmt.Println("approve:", err)
	try(evidence.Call{Action: "gateway.refund.create", IdempotencyKey: "refund-INV-1042"})
	try(evidence.Call{Action: "gateway.refund.create", IdempotencyKey: "refund-INV-1042"})
	try(evidence.Call{Action: "ledger.read", IdempotencyKey: "notify-INV-1042-1"})
	try(evidence.Call{Action: "customer.delete"})
	// Output:
	// finding: stale-state /state/1/as_of advisory=false
	// finding: claim-unsupported /attempts/0 advisory=true
	// status: rejected reason=policy detail="evidence: stale-state /state/1/as_of"
	// status: accepted, acknowledges the package sent: true
	// guard: gateway.refund.status allowed
	// guard: card.charge refused: evidence: action denied
	// guard: gateway.refund.create refused: evidence: approval required
	// approve: <nil>
	// guard: gateway.refund.create allowed
	// guard: gateway.refund.create refused: evidence: operation already performed
	// guard: ledger.read refused: evidence: operation already performed
	// guard: customer.delete refused: evidence: action not in the package's authority
}

func exampleKeys(ids ...handoff.AgentID) (map[handoff.AgentID]*handoff.Signer, *handoff.Trust) {
	signers := map[handoff.AgentID]*handoff.Signer{}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range ids {
		k := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
		s := must(handoff.NewSigner(k, handoff.JWS, nil))
		signers[id], keys[id] = s, []handoff.TrustedKey{s.Key()}
	}
	return signers, must(handoff.NewTrust(keys))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
