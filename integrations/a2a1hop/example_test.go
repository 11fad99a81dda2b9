package a2a1hop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/ref"

	"github.com/agentproto/handoff/integrations/a2a1hop"
)

const (
	exTriage   = handoff.AgentID("spiffe://shop.example/agent/triage")
	exPayments = handoff.AgentID("spiffe://shop.example/agent/payments")
	// exLedgerLoc names the ledger entry the package cites as evidence;
	// the payments agent resolves it from its own copy of the ledger.
	exLedgerLoc = "urn:shop:ledger:INV-1042"
)

var exLedger = []byte(`{"invoice":"INV-1042","status":"paid"}`)

// exPackage is the handoff package of a refund: reading the ledger is
// allowed, issuing the refund needs the finance lead's approval, charging
// the card is denied.
func exPackage() evidence.Package {
	now := time.Now()
	return evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments"},
		Control:   evidence.TransferOwnership,
		Outcome:   evidence.Outcome{Result: "INV-1042 refunded", DoneWhen: "the ledger shows the refund"},
		Authority: evidence.Authority{Allowed: []string{"ledger_read"}, MustAsk: []string{"refund_issue"}, Denied: []string{"card_charge"}},
		State:     []evidence.StateClaim{{System: "ledger", State: "INV-1042 paid", AsOf: now, Evidence: []string{"ledger"}}},
		Artifacts: []evidence.Artifact{{ID: "ledger", Proves: "INV-1042 is paid",
			Ref: evidence.RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(exLedger), Loc: exLedgerLoc})}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund", Action: "refund_issue", Owner: "finance-lead"}},
		Next:         evidence.NextAction{Action: "ledger_read", Description: "confirm INV-1042 is paid"},
		Verification: evidence.Verification{Check: "the ledger shows the refund"},
		Timeouts:     []evidence.Timeout{{Condition: "no approval before the offer expires", Owner: "triage"}},
		Rollback:     evidence.Rollback{Method: "void the refund"},
	}
}

// exPaymentsWork is the payments agent's own executor. It takes the action to
// do from the hop's offer (its task), asks the hop's guard before the
// effect, pauses for an approval the guard asks for, and returns any
// other refusal as its error, which ends the hop "failed".
type exPaymentsWork struct{}

func (exPaymentsWork) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		in, _ := a2a1hop.FromContext(ctx) // the hop's accepted offer, on a resumed message too
		action := in.Offer().Task
		err := evidence.GuardFromContext(ctx).Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: action, OperationID: action + "-INV-1042"})
		if ev, ok := a2a1hop.AskApproval(ctx, ec, err); ok {
			fmt.Println("payments:", action, "waits for its owner's approval")
			yield(ev, nil) // TASK_STATE_INPUT_REQUIRED
			return
		}
		var refused *evidence.Refusal
		if errors.As(err, &refused) {
			fmt.Println("payments:", action, "refused:", refused.Err)
			yield(nil, err) // the refusal closes the hop: "failed", no refs
			return
		}
		if err != nil {
			yield(nil, err)
			return
		}
		fmt.Println("payments:", action, "done")
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil) // signed "completed"
	}
}

func (exPaymentsWork) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// exBearer sends the triage agent's token with every call.
type exBearer struct {
	a2aclient.PassthroughInterceptor
}

func (exBearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer triage-token")
	return ctx, nil, nil
}

// exPair starts the payments agent over A2A 1.0 (JSON-RPC on loopback
// HTTP) and returns the triage agent's handoff client and A2A client.
func exPair(ctx context.Context) (*a2a1hop.Client, *a2aclient.Client, *handoff.Agent, func()) {
	tk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ts, _ := handoff.NewSigner(tk, handoff.JWS, nil)
	ps, _ := handoff.NewSigner(pk, handoff.COSE, nil)
	trust, _ := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{exTriage: {ts.Key()}, exPayments: {ps.Key()}})
	triage, _ := handoff.NewAgent(handoff.Config{ID: exTriage, Signer: ts, Trust: trust})
	payments, _ := handoff.NewAgent(handoff.Config{ID: exPayments, Signer: ps, Trust: trust})

	// The delegate: the package beside each offer is checked before the
	// executor runs, against the ledger entry it cites; the guard of each
	// hop records in the authority ledger (durable: boltauthority).
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: payments, Executor: exPaymentsWork{},
		Evidence: &evidence.HostConfig{
			Check: evidence.CheckConfig{Artifacts: ref.ByLoc(map[string]ref.Object{exLedgerLoc: {Octets: exLedger}})},
			Guard: evidence.GuardConfig{Ledger: authority.NewMemory()},
		},
		Approvals: &a2a1hop.Approvals{Key: []byte("a 32-byte key that seals pauses!")},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(r *http.Request) (handoff.AgentID, bool) {
			// Stands in for mutual TLS or OAuth: who is calling.
			return exTriage, r.Header.Get("Authorization") == "Bearer triage-token"
		}))

	// The delegator: its handoff Client among the A2A client's interceptors.
	hc, _ := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: triage})
	client, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL, a2a.TransportProtocolJSONRPC)},
		a2aclient.WithCallInterceptors(exBearer{}, hc))
	if err != nil {
		panic(err)
	}
	return hc, client, triage, func() { client.Destroy(); srv.Close() }
}

// exOffer is the offer of one action, with the refund's package beside it.
func exOffer(action string) handoff.OfferParams {
	return handoff.OfferParams{To: exPayments, Task: action, TTL: time.Minute,
		Deliver: evidence.NewBuilder(exPackage()).Deliver(evidence.BuildOptions{})}
}

func exMessage() *a2a.Message {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("refund INV-1042"))
	msg.ContextID = "case-77" // the dialog
	return msg
}

// A triage agent hands work to a payments agent over A2A 1.0 with the
// handoff package beside each offer. The payments agent checks the
// package before any work and asks the hop's guard before each effect:
// the allowed ledger read runs, and the denied card charge is refused,
// which ends its hop "failed" with reason "policy", resolved at the
// delegator.
func Example() {
	ctx := context.Background()
	hc, client, triage, stop := exPair(ctx)
	defer stop()

	for _, action := range []string{"ledger_read", "card_charge"} {
		d, err := hc.Send(ctx, client, exMessage(), exOffer(action))
		if err != nil {
			panic(err)
		}
		hop, _, _ := triage.Hop(ctx, d.Hop)
		fmt.Printf("triage: %s: task %s, hop %s (reason %q), resolved %v\n", action, d.Result.(*a2a.Task).Status.State, hop.State, hop.Reason, hop.Resolved)
	}
	// Output:
	// payments: ledger_read done
	// triage: ledger_read: task TASK_STATE_COMPLETED, hop completed (reason ""), resolved true
	// payments: card_charge refused: evidence: action denied
	// triage: card_charge: task TASK_STATE_FAILED, hop failed (reason "policy"), resolved true
}

// A must-ask action pauses the task in TASK_STATE_INPUT_REQUIRED with the
// pending approval; the owner's answer is a follow-up message on the same
// task, sent with Retransmit so that it carries the hop's identical
// Handoff and package. The executor runs again as the hop's work resumed,
// the guard allows the action once, and the hop completes.
func Example_approval() {
	ctx := context.Background()
	hc, client, _, stop := exPair(ctx)
	defer stop()

	d, err := hc.Send(ctx, client, exMessage(), exOffer("refund_issue"))
	if err != nil {
		panic(err)
	}
	task := d.Result.(*a2a.Task)
	pending, _ := a2a1hop.PendingApproval(task.Status.Message)
	fmt.Printf("triage: task %s, hop %s; %s asks %s\n", task.Status.State, d.State, pending["action"], pending["owner"])

	answer, err := a2a1hop.Answer(task, "approve", nil) // the finance lead approves
	if err != nil {
		panic(err)
	}
	res, _, err := hc.Retransmit(ctx, client, answer, d.Hop)
	if err != nil {
		panic(err)
	}
	fmt.Printf("triage: task %s\n", res.(*a2a.Task).Status.State)
	// Output:
	// payments: refund_issue waits for its owner's approval
	// triage: task TASK_STATE_INPUT_REQUIRED, hop accepted; refund_issue asks finance-lead
	// payments: refund_issue done
	// triage: task TASK_STATE_COMPLETED
}
