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
)

// A tool run under the idempotency key contract, as a host's middleware
// runs it: the refund pauses for its owner's approval, which binds the
// call's arguments; a resumption for another amount is refused; the call
// itself runs once, and every later presentation of it, a retry or a
// retransmission, gets the recorded outcome.
func ExampleGuard_Do() {
	ctx := context.Background()
	const triage, payments = handoff.AgentID("spiffe://shop.example/agent/triage"), handoff.AgentID("spiffe://shop.example/agent/payments")
	now := time.Unix(1793000000, 0).UTC()
	clock := func() time.Time { return now }
	signers, trust := exampleKeys(triage, payments)
	specialist := must(handoff.NewAgent(handoff.Config{ID: payments, Signer: signers[payments], Trust: trust, Now: clock}))
	pkg := evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments-specialist"},
		Control:      evidence.SpecialistReturnsResult,
		Outcome:      evidence.Outcome{Result: "refund INV-1042", DoneWhen: "the gateway reports the refund succeeded"},
		Authority:    evidence.Authority{Allowed: []string{"ledger.read"}, MustAsk: []string{"gateway.refund.create"}},
		State:        []evidence.StateClaim{{System: "billing-ledger", State: "INV-1042 paid", AsOf: now}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "any refund", Action: "gateway.refund.create", Owner: "finance-lead"}},
		Next:         evidence.NextAction{Action: "ledger.read"},
		Verification: evidence.Verification{Check: "the ledger answers"},
		Timeouts:     []evidence.Timeout{{Condition: "no approval within 4 hours", Owner: "triage"}},
		Rollback:     evidence.Rollback{Method: "cancel the refund before settlement"},
	}
	hop := must(handoff.NewHopID(nil))
	bind := evidence.Binding{Hop: hop, Iss: triage, Aud: payments, Iat: handoff.TimeOf(now), Exp: handoff.TimeOf(now) + 120}
	built := must(evidence.NewBuilder(pkg).Build(bind, evidence.BuildOptions{}))
	offer := must(signers[triage].SignOffer(&handoff.Offer{Hop: hop, Dialog: "case-77", Iss: triage, Aud: payments,
		Iat: bind.Iat, Exp: bind.Exp, Refs: []ref.Ref{built.Ref}}))
	in := must(specialist.Receive(ctx, must((&handoff.Handoff{Offer: offer}).Encode(handoff.JSON)), handoff.Host{Dialog: "case-77"}))
	rep := must(evidence.CheckReceived(ctx, in, evidence.Delivered{Package: built.Encoded}, evidence.CheckConfig{Now: clock}))
	guard := must(evidence.NewGuard(ctx, rep, evidence.GuardConfig{Ledger: authority.NewMemory(), Now: clock}))

	// The tool: the effect, run only through Do.
	refund := func(c evidence.Call) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) {
			fmt.Printf("  the gateway refunds %s\n", c.Args)
			return []byte(`{"refund":"re_77"}`), nil
		}
	}
	call := func(args string) evidence.Call {
		return evidence.Call{Hop: in.Digest(), Action: "gateway.refund.create", Tool: "refund",
			Args: []byte(args), IdempotencyKey: "refund-INV-1042"}
	}
	try := func(c evidence.Call) *evidence.Refusal {
		res, err := guard.Do(ctx, c, refund(c))
		var r *evidence.Refusal
		switch {
		case errors.Is(err, evidence.ErrReplayed) && errors.As(err, &r):
			fmt.Printf("replayed: %s\n", r.Outcome.Result)
		case errors.As(err, &r):
			fmt.Printf("refused: %v\n", r.Err)
		default:
			fmt.Printf("ran: %s\n", res)
		}
		return r
	}

	ten := call(`{"invoice": "INV-1042", "amount": 10}`)
	r := try(ten)
	fmt.Printf("ask %s, arguments %s\n", r.Pending.Owner, r.Pending.Arguments)
	_ = must(guard.ApproveLocal(ctx, r.Pending.Grant(), "console:finance-lead"))
	try(call(`{"invoice":"INV-1042","amount":1000000}`))
	try(ten)
	try(call(`{"amount":10,"invoice":"INV-1042"}`)) // the same arguments, encoded otherwise
	// Output:
	// refused: evidence: approval required
	// ask finance-lead, arguments {"invoice": "INV-1042", "amount": 10}
	// refused: evidence: the approval is for another call
	//   the gateway refunds {"invoice": "INV-1042", "amount": 10}
	// ran: {"refund":"re_77"}
	// replayed: {"refund":"re_77"}
}
