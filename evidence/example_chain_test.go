package evidence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
)

// A three-hop flow: triage hands a refund to payments, which hands the
// refund itself to a refunds bot. Payments may not give the bot more than
// it was given: its builder refuses a package that allows what triage
// denied, and the bot refuses such a package too, comparing it with the
// package of every earlier hop in the offer's chain. The bot's guard then
// answers only for its hop, and one approval of the must-ask refund
// allows one refund: the second is refused.
func Example_chain() {
	ctx := context.Background()
	const (
		triage   = handoff.AgentID("spiffe://shop.example/agent/triage")
		payments = handoff.AgentID("spiffe://shop.example/agent/payments")
		refunds  = handoff.AgentID("spiffe://shop.example/agent/refunds-bot")
	)
	now := time.Unix(1793000000, 0).UTC()
	clock := func() time.Time { return now }
	signers, trust := exampleKeys(triage, payments, refunds)
	agents := map[handoff.AgentID]*handoff.Agent{}
	for _, id := range []handoff.AgentID{triage, payments, refunds} {
		agents[id] = must(handoff.NewAgent(handoff.Config{ID: id, Signer: signers[id], Trust: trust, Now: clock,
			Store: replay.NewMemory(replay.MemoryOptions{Now: clock})}))
	}
	// The packages of earlier hops, by digest: how a delegate obtains its
	// ancestors' packages (any resolver the deployment trusts will do; the
	// digest in the signed chain is what is checked).
	sent := map[string][]byte{}
	ancestors := func(_ context.Context, r ref.Ref) (ref.Object, error) {
		if b, ok := sent[r.Dig.B64()]; ok {
			return ref.Object{Octets: b}, nil
		}
		return ref.Object{}, ref.ErrUnavailable
	}
	pkg := func(from, to string, auth evidence.Authority, next string) evidence.Package {
		return evidence.Package{
			Sender: evidence.Party{Role: from}, Receiver: evidence.Party{Role: to}, Control: evidence.SpecialistReturnsResult,
			Outcome:      evidence.Outcome{Result: "refund INV-1042 (EUR 640)", DoneWhen: "the gateway reports the refund succeeded"},
			Authority:    auth,
			State:        []evidence.StateClaim{{System: "billing-ledger", State: "INV-1042 paid, not refunded", AsOf: now}},
			Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund over EUR 500", Action: "refund.issue", Owner: "finance-lead"}},
			Next:         evidence.NextAction{Action: next, Description: "check INV-1042 against the refund policy"},
			Verification: evidence.Verification{Check: "a decision for INV-1042"},
			Timeouts:     []evidence.Timeout{{Condition: "no approval within 4 hours", Owner: from}},
			Rollback:     evidence.Rollback{Method: "void the refund before settlement"},
		}
	}
	// hand offers p from one agent to the next (passing on in), and the
	// next checks it; within, when set, is what the builder holds it to.
	hand := func(from, to handoff.AgentID, in *handoff.Received, p evidence.Package, within *evidence.Authority) (*handoff.Received, *evidence.Report, error) {
		var enc []byte
		out, err := agents[from].Offer(ctx, handoff.OfferParams{To: to, Dialog: "case-77", From: in, Prepare: func(o *handoff.Offer) error {
			built, err := evidence.NewBuilder(p).Build(evidence.BindingOf(o), evidence.BuildOptions{Within: within})
			if err != nil {
				return err
			}
			enc, sent[built.Ref.Dig.B64()] = built.Encoded, built.Encoded
			o.Refs = append(o.Refs, built.Ref)
			return nil
		}})
		if err != nil {
			return nil, nil, err
		}
		got := must(agents[to].Receive(ctx, must(out.Handoff.Encode(handoff.JSON)), handoff.Host{Dialog: "case-77"}))
		rep, err := evidence.CheckReceived(ctx, got, evidence.Delivered{Package: enc}, evidence.CheckConfig{Now: clock, Ancestors: ancestors})
		return got, rep, err
	}

	// Triage to payments: payments may read and check, must ask before a
	// refund, and may never charge a card.
	given := evidence.Authority{Allowed: []string{"ledger.read", "refund.eligibility"}, MustAsk: []string{"refund.issue"}, Denied: []string{"card.charge"}}
	atPayments, rep, _ := must3(hand(triage, payments, nil, pkg("triage", "payments", given, "refund.eligibility"), nil))
	fmt.Println("payments accepts:", rep.Acceptable())

	// Payments to the refunds bot, allowing what triage denied.
	wider := evidence.Authority{Allowed: []string{"refund.eligibility", "card.charge"}, MustAsk: []string{"refund.issue"}}
	_, _, err := hand(payments, refunds, atPayments, pkg("payments", "refunds-bot", wider, "refund.eligibility"), &given)
	var we *evidence.WidenedError
	if errors.As(err, &we) {
		fmt.Println("payments' builder refuses:", we.Widenings[0].Path, we.Widenings[0].Detail)
	}
	// Sent anyway, without the builder's check: the bot refuses it.
	_, rep, _ = must3(hand(payments, refunds, atPayments, pkg("payments", "refunds-bot", wider, "refund.eligibility"), nil))
	fmt.Println("refunds bot accepts:", rep.Acceptable(), rep.Codes())

	// Within what payments was given: accepted.
	narrow := evidence.Authority{Allowed: []string{"refund.eligibility"}, MustAsk: []string{"refund.issue"}, Denied: []string{"card.charge", "ledger.read"}}
	atBot, rep, _ := must3(hand(payments, refunds, atPayments, pkg("payments", "refunds-bot", narrow, "refund.eligibility"), &given))
	fmt.Println("refunds bot accepts:", rep.Acceptable())

	// The bot's guard, on its ledger (bbolt or Redis to survive restarts
	// and span replicas).
	guard := must(evidence.NewGuard(ctx, rep, evidence.GuardConfig{Ledger: authority.NewMemory(), Now: clock}))
	refund := func(op string) {
		err := guard.Authorize(ctx, evidence.Call{Hop: atBot.Digest(), Action: "refund.issue", OperationID: op})
		var r *evidence.Refusal
		switch {
		case errors.As(err, &r) && r.Pending != nil:
			fmt.Printf("refund %s: %v; ask %s\n", op, r.Err, r.Pending.Owner)
		case err != nil:
			fmt.Printf("refund %s: %v\n", op, r.Err)
		default:
			fmt.Printf("refund %s: allowed\n", op)
		}
	}
	refund("re-1042-1")
	_, err = guard.ApproveLocal(ctx, evidence.Grant{Action: "refund.issue", Approver: "finance-lead"}, "console:finance-lead")
	fmt.Println("approved once:", err)
	refund("re-1042-1")
	refund("re-1042-2")
	refund("re-1042-1")
	// Another hop's guard does not answer for this one.
	err = guard.Authorize(ctx, evidence.Call{Hop: atPayments.Digest(), Action: "refund.eligibility"})
	fmt.Println("asked for another hop:", errors.Is(err, evidence.ErrOtherHop))
	// Output:
	// payments accepts: true
	// payments' builder refuses: /authority/allowed/1 "card.charge" is denied by the ancestor
	// refunds bot accepts: false [authority-widened]
	// refunds bot accepts: true
	// refund re-1042-1: evidence: approval required; ask finance-lead
	// approved once: <nil>
	// refund re-1042-1: allowed
	// refund re-1042-2: evidence: approval required; ask finance-lead
	// refund re-1042-1: evidence: operation already performed
	// asked for another hop: true
}

func must3[A, B any](a A, b B, err error) (A, B, error) {
	if err != nil {
		panic(err)
	}
	return a, b, nil
}
