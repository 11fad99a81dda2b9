// Command a2a1 hands a refund from a triage agent to a payments agent over
// A2A 1.0 (a2a-go/v2, JSON-RPC on loopback HTTP), with the handoff package
// of the evidence contract beside each offer and an action that must wait
// for its owner's approval. It uses the middleware of
// github.com/agentproto/handoff/integrations/a2a1hop on both sides.
//
// The triage agent names the package once, where it makes the offer
// (OfferParams.Deliver); the middleware carries it beside the Handoff. The
// payments agent's executor wrapper checks the offer, then the package
// (ServerConfig.Evidence), before the executor runs, and puts the hop's
// guard in the executor's context. The executor asks the guard before
// each effect:
//
//   - hop 1, "refund INV-1042": reading the ledger is allowed; issuing the
//     refund must be approved by the finance lead, so the task pauses in
//     TASK_STATE_INPUT_REQUIRED with the pending approval. The triage agent
//     answers on the same task (a2a1hop.Answer, Client.Retransmit); the
//     executor runs again as the hop's work resumed, skips the read it
//     already did, and issues the refund once.
//   - hop 2, "charge the card": denied by the package. The executor returns
//     the guard's refusal as its error, which ends the hop "failed" (no
//     refs, reason "policy"): the triage agent's hop is resolved.
//   - hop 3, a package that cites a ledger entry the payments agent's
//     ledger no longer holds: the package fails the check, the task is
//     rejected ("rejected", reason "policy") and the executor never runs.
//
// Run it with:
//
//	cd examples && go run ./a2a1
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
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
	triage   = handoff.AgentID("spiffe://shop.example/agent/triage")
	payments = handoff.AgentID("spiffe://shop.example/agent/payments")
	// triageToken is the bearer token the payments endpoint knows the
	// triage agent by: it stands in for mutual TLS or OAuth.
	triageToken = "triage-token"
	ledgerLoc   = "urn:shop:ledger:INV-1042"
	owner       = "finance-lead"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "a2a1:", err)
		os.Exit(1)
	}
}

// ledger is the payments agent's system of record: the entry the package
// cites as evidence resolves against it (CheckConfig.Artifacts).
var ledger = map[string][]byte{ledgerLoc: []byte(`{"invoice":"INV-1042","status":"paid","amount":"EUR 640.00"}`)}

// refundPackage is the handoff package of the refund, citing the ledger
// entry the triage agent read (entry): reading the ledger is allowed,
// issuing the refund must ask the finance lead, charging the card is
// denied.
func refundPackage(entry []byte) evidence.Package {
	return evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments"},
		Control: evidence.TransferOwnership,
		Outcome: evidence.Outcome{Result: "INV-1042 refunded (EUR 640.00)", DoneWhen: "the ledger shows the refund"},
		Authority: evidence.Authority{Allowed: []string{"ledger_read"}, MustAsk: []string{"refund_issue"},
			Denied: []string{"card_charge"}},
		State: []evidence.StateClaim{{System: "ledger", State: "INV-1042 paid", AsOf: time.Now().Add(-time.Minute),
			Evidence: []string{"ledger"}}},
		Artifacts: []evidence.Artifact{{ID: "ledger", Proves: "INV-1042 is paid",
			Ref: evidence.RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(entry), Loc: ledgerLoc})}},
		Passed:       []evidence.ContextItem{{Name: "invoice", Value: "INV-1042"}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund over EUR 500", Action: "refund_issue", Owner: owner}},
		Next:         evidence.NextAction{Action: "ledger_read", Description: "confirm INV-1042 is paid and not refunded"},
		Verification: evidence.Verification{Check: "the ledger shows the refund"},
		Timeouts:     []evidence.Timeout{{Condition: "no approval before the offer expires", Owner: "triage"}},
		Rollback:     evidence.Rollback{Method: "void the refund before settlement"},
	}
}

// work is the payments agent's own executor. It counts its invocations and
// each effect it performs.
type work struct {
	w                          io.Writer
	mu                         sync.Mutex
	executions, reads, refunds int
}

// step performs one effect of the hop's work after asking the hop's guard:
// an operation the guard already recorded on this hop (ErrRepeated) was
// done before the pause, and is not done again.
func (x *work) step(ctx context.Context, in *handoff.Received, action, op string, effect func()) error {
	err := evidence.GuardFromContext(ctx).Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: action, OperationID: op})
	switch {
	case errors.Is(err, evidence.ErrRepeated):
		fmt.Fprintf(x.w, "payments: %s already done on this hop; not again\n", action)
		return nil
	case err != nil:
		return err
	}
	effect()
	return nil
}

func (x *work) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		x.mu.Lock()
		x.executions++
		x.mu.Unlock()
		// The hop's accepted offer: on the message that carried it and on
		// the follow-up that resumes it.
		in, _ := a2a1hop.FromContext(ctx)
		var err error
		switch in.Offer().Task {
		case "refund INV-1042":
			err = x.step(ctx, in, "ledger_read", "read-INV-1042", func() {
				x.mu.Lock()
				x.reads++
				x.mu.Unlock()
				fmt.Fprintln(x.w, "payments: read INV-1042 from the ledger: paid")
			})
			if err == nil {
				err = x.step(ctx, in, "refund_issue", "refund-INV-1042", func() {
					x.mu.Lock()
					x.refunds++
					x.mu.Unlock()
					fmt.Fprintln(x.w, "payments: refunded INV-1042")
				})
			}
		case "charge the card":
			err = x.step(ctx, in, "card_charge", "charge-INV-1042", func() { fmt.Fprintln(x.w, "payments: charged the card") })
		default:
			err = fmt.Errorf("unknown task %q", in.Offer().Task)
		}
		if ev, ok := a2a1hop.AskApproval(ctx, ec, err); ok {
			fmt.Fprintln(x.w, "payments: the refund waits for the finance lead's approval")
			yield(ev, nil) // TASK_STATE_INPUT_REQUIRED
			return
		}
		if err != nil {
			fmt.Fprintf(x.w, "payments: refused: %v\n", err)
			yield(nil, err) // a refusal of the guard ends the hop "failed", no refs
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil) // the wrapper signs "completed"
	}
}

func (x *work) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// bearer adds the triage agent's credentials to every call.
type bearer struct {
	a2aclient.PassthroughInterceptor
}

func (bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+triageToken)
	return ctx, nil, nil
}

// syncWriter serializes the writes of both agents.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func run(out io.Writer) error {
	w := &syncWriter{w: out}
	ctx := context.Background()
	triageAgent, paymentsAgent, err := newAgents()
	if err != nil {
		return err
	}

	// The payments agent: its executor wrapped, the package beside each
	// offer checked against its own ledger, each hop's guard recording in
	// the authority ledger (use boltauthority or another durable ledger
	// for the guard's memory to outlive a restart), and pauses for
	// approvals sealed with a key of its own.
	x := &work{w: w}
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{
		Agent:    paymentsAgent,
		Executor: x,
		Evidence: &evidence.HostConfig{
			Check: evidence.CheckConfig{Artifacts: ref.ByLoc(map[string]ref.Object{ledgerLoc: {Octets: ledger[ledgerLoc]}})},
			Guard: evidence.GuardConfig{Ledger: authority.NewMemory()},
		},
		Approvals: &a2a1hop.Approvals{Key: []byte("a 32-byte key that seals pauses!")},
	})
	if err != nil {
		return err
	}
	card := &a2a.AgentCard{Name: "payments", Description: "refunds and charges", Version: "1"}
	a2a1hop.Declare(card, true) // a message without a Handoff is refused
	srv := httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(r *http.Request) (handoff.AgentID, bool) {
			return triage, r.Header.Get("Authorization") == "Bearer "+triageToken
		}))
	defer srv.Close()

	// The triage agent: its handoff Client among the A2A client's
	// interceptors.
	hc, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: triageAgent})
	if err != nil {
		return err
	}
	client, err := a2aclient.NewFromEndpoints(ctx,
		[]*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL, a2a.TransportProtocolJSONRPC)},
		a2aclient.WithCallInterceptors(bearer{}, hc))
	if err != nil {
		return err
	}
	defer client.Destroy()
	send := func(what string, entry []byte) (*a2a1hop.Delivery, *a2a.Task, error) {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(what))
		msg.ContextID = "case-77" // the dialog
		d, err := hc.Send(ctx, client, msg, handoff.OfferParams{To: payments, Task: what, TTL: time.Minute,
			Deliver: evidence.NewBuilder(refundPackage(entry)).Deliver(evidence.BuildOptions{})})
		if err != nil {
			return nil, nil, err
		}
		task, ok := d.Result.(*a2a.Task)
		if !ok {
			return nil, nil, fmt.Errorf("the payments agent answered %T, not a task", d.Result)
		}
		return d, task, nil
	}
	report := func(what string, d *a2a1hop.Delivery, task *a2a.Task) error {
		info, _, err := triageAgent.Hop(ctx, d.Hop)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "triage: %s: task %s, hop %q (reason %q), resolved: %v\n", what, task.Status.State, info.State, info.Reason, info.Resolved)
		return nil
	}

	// Hop 1: the refund, paused for the finance lead's approval.
	d, task, err := send("refund INV-1042", ledger[ledgerLoc])
	if err != nil {
		return err
	}
	pending, ok := a2a1hop.PendingApproval(task.Status.Message)
	if !ok {
		return fmt.Errorf("the refund did not pause for an approval: task %s", task.Status.State)
	}
	fmt.Fprintf(w, "triage: task %s, hop %q: %s waits for %s (operation %s)\n", task.Status.State, d.State,
		pending["action"], pending["owner"], pending["operation_id"])
	answer, err := a2a1hop.Answer(task, "approve", nil) // the finance lead approves
	if err != nil {
		return err
	}
	res, _, err := hc.Retransmit(ctx, client, answer, d.Hop) // the hop's identical Handoff and package
	if err != nil {
		return err
	}
	resumed, ok := res.(*a2a.Task)
	if !ok {
		return fmt.Errorf("the answer got %T, not the task", res)
	}
	if err := report("refund INV-1042 after the approval", d, resumed); err != nil {
		return err
	}

	// Hop 2: the card charge, denied by the package.
	d, task, err = send("charge the card", ledger[ledgerLoc])
	if err != nil {
		return err
	}
	if err := report("charge the card", d, task); err != nil {
		return err
	}

	// Hop 3: a package citing a ledger entry read before INV-1042 was
	// paid: it does not resolve against the payments agent's ledger.
	d, task, err = send("refund INV-1042", []byte(`{"invoice":"INV-1042","status":"open","amount":"EUR 640.00"}`))
	if err != nil {
		return err
	}
	if err := report("refund INV-1042 with an outdated package", d, task); err != nil {
		return err
	}
	fmt.Fprintf(w, "triage: the payments agent said %q\n", d.Statuses[len(d.Statuses)-1].Status.Detail)

	open, err := triageAgent.Unresolved(ctx)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	fmt.Fprintf(w, "payments: the executor ran %d times: %d ledger read, %d refund; unresolved hops at triage: %d\n",
		x.executions, x.reads, x.refunds, len(open))
	return nil
}

// newAgents makes the two agents, each with its own key and each trusting
// the other's public key.
func newAgents() (t, p *handoff.Agent, err error) {
	tk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ts, err := handoff.NewSigner(tk, handoff.JWS, nil)
	if err != nil {
		return nil, nil, err
	}
	ps, err := handoff.NewSigner(pk, handoff.COSE, nil)
	if err != nil {
		return nil, nil, err
	}
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{triage: {ts.Key()}, payments: {ps.Key()}})
	if err != nil {
		return nil, nil, err
	}
	if t, err = handoff.NewAgent(handoff.Config{ID: triage, Signer: ts, Trust: trust}); err != nil {
		return nil, nil, err
	}
	if p, err = handoff.NewAgent(handoff.Config{ID: payments, Signer: ps, Trust: trust}); err != nil {
		return nil, nil, err
	}
	return t, p, nil
}
