// Command mcpapproval calls an MCP tool whose action must be approved by
// its owner, through the MCP Go SDK over streamable HTTP on loopback
// (stateless, protocol 2026-07-28) and the middleware of
// github.com/agentproto/handoff/integrations/mcphop.
//
// The triage agent calls the payments agent's refund_issue tool with a
// signed offer and the handoff package beside it. The payments agent's
// middleware checks both (ServerConfig.Evidence) and runs the tool call
// under the hop's guard: the refund must be approved by the finance lead,
// so before the tool runs the call pauses with an MCP input request
// carrying the pending approval of exactly that call (its tool, its
// arguments and their digest). The triage agent's MCP client answers it
// with its elicitation handler, which shows the approval to its owner,
// and the SDK retries the call with the answer; the middleware records
// the approval in the guard's authority ledger and runs the tool once, as
// the hop's work resumed. The tool is the refund and nothing else.
//
//   - refund INV-1042: the finance lead signs an approval statement for
//     exactly that hop, action, operation, tool and arguments
//     (evidence.SignApproval), the answer {"decision": "approve",
//     "approval": "<JWS>"}; the guard verifies it against the key it
//     trusts for the finance lead, and the refund runs once. The hop
//     completes.
//   - refund INV-2001: the finance lead declines ({"decision": "deny"}).
//     Nothing is recorded, the refund never runs, and the hop ends
//     "failed" with no refs, reason "policy": resolved, so the work may be
//     offered again.
//
// Run it with:
//
//	cd examples && go run ./mcpapproval
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"

	"github.com/agentproto/handoff/integrations/mcphop"
)

const (
	triage      = handoff.AgentID("spiffe://shop.example/agent/triage")
	payments    = handoff.AgentID("spiffe://shop.example/agent/payments")
	financeLead = handoff.AgentID("spiffe://shop.example/people/finance-lead")
	triageToken = "triage-token" // stands in for OAuth: the verified bearer token names the caller
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcpapproval:", err)
		os.Exit(1)
	}
}

// refundPackage is the handoff package of one refund: issuing it must be
// approved by the finance lead.
func refundPackage(invoice string) evidence.Package {
	return evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments"},
		Control:      evidence.TransferOwnership,
		Outcome:      evidence.Outcome{Result: invoice + " refunded", DoneWhen: "the ledger shows the refund"},
		Authority:    evidence.Authority{Allowed: []string{"ledger_read"}, MustAsk: []string{"refund_issue"}, Denied: []string{"card_charge"}},
		State:        []evidence.StateClaim{{System: "ledger", State: invoice + " paid", AsOf: time.Now().Add(-time.Minute)}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund of " + invoice, Action: "refund_issue", Owner: string(financeLead)}},
		Next:         evidence.NextAction{Action: "ledger_read", Description: "confirm " + invoice + " is paid and not refunded"},
		Verification: evidence.Verification{Check: "the ledger shows the refund"},
		Timeouts:     []evidence.Timeout{{Condition: "no approval before the offer expires", Owner: "triage"}},
		Rollback:     evidence.Rollback{Method: "void the refund"},
	}
}

type refundArgs struct {
	Invoice     string `json:"invoice"`
	OperationID string `json:"operation_id"`
}

// paymentsServer is the payments agent's MCP server; it counts the tool's
// invocations and the refunds it made.
type paymentsServer struct {
	calls, refunds atomic.Int32
}

func (p *paymentsServer) handler(w io.Writer, agent *handoff.Agent, ledger authority.Ledger, approvers *handoff.Trust) (http.Handler, error) {
	mw, err := mcphop.Server(mcphop.ServerConfig{
		Agent: agent,
		Peer: func(r *mcp.CallToolRequest) handoff.AgentID {
			if r.Extra != nil && r.Extra.Header.Get("Authorization") == "Bearer "+triageToken {
				return triage
			}
			return ""
		},
		// The package beside each offer is checked; each hop's guard
		// records in the ledger and verifies signed approvals with the
		// approvers' keys.
		Evidence:  &evidence.HostConfig{Guard: evidence.GuardConfig{Ledger: ledger, Trust: approvers}},
		Approvals: &mcphop.Approvals{Key: []byte("a 32-byte key that seals pauses!")},
	})
	if err != nil {
		return nil, err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "v1"}, nil)
	server.AddReceivingMiddleware(mw)
	mcp.AddTool(server, &mcp.Tool{Name: "refund_issue", Description: "refund an invoice"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a refundArgs) (*mcp.CallToolResult, any, error) {
			// The middleware ran the guard: the refund is approved, for
			// exactly this call, and runs once.
			p.calls.Add(1)
			in, _ := mcphop.FromContext(ctx) // the hop's accepted offer, on the resumed call too
			p.refunds.Add(1)
			fmt.Fprintf(w, "payments: refunded %s for hop %s\n", a.Invoice, in.Offer().Hop)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Invoice + " refunded"}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}), nil
}

// owner is the finance lead at the triage agent's console: it answers each
// approval its client is asked for, signing the approvals it gives.
type owner struct {
	w        io.Writer
	key      crypto.Signer
	approves map[string]bool // by invoice
	asked    atomic.Int32
}

func (o *owner) answer(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	pending, ok := mcphop.PendingApproval(r.Params)
	if !ok {
		return &mcp.ElicitResult{Action: "decline"}, nil // not an approval
	}
	o.asked.Add(1)
	op, _ := pending["operation_id"].(string)
	if !o.approves[op] {
		fmt.Fprintf(o.w, "finance lead: declines %v (operation %s)\n", pending["action"], op)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny"}}, nil
	}
	// A signed approval of exactly this call: its hop, action, operation,
	// tool and the digest of its arguments, as the pending approval shows
	// them.
	hop, _ := pending["hop"].(string)
	action, _ := pending["action"].(string)
	tool, _ := pending["tool"].(string)
	args, _ := pending["args"].(string)
	now := time.Now()
	signed, err := evidence.SignApproval(evidence.ApprovalStatement{Hop: hop, Action: action, OperationID: op, Tool: tool, Args: args,
		Approver: string(financeLead), Iat: now.Add(-time.Second).Unix(), Exp: now.Add(5 * time.Minute).Unix()}, o.key, "ES256")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.w, "finance lead: approves %s (operation %s), signed\n", action, op)
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "approval": string(signed)}}, nil
}

// withToken adds the triage agent's bearer token to every request.
type withToken struct{ next http.RoundTripper }

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+triageToken)
	return t.next.RoundTrip(r)
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
	// The finance lead's key, which the payments agent trusts for
	// approvals.
	fk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	fs, err := handoff.NewSigner(fk, handoff.JWS, nil)
	if err != nil {
		return err
	}
	approvers, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{financeLead: {fs.Key()}})
	if err != nil {
		return err
	}

	ledger := authority.NewMemory() // boltauthority to outlive a restart
	ps := &paymentsServer{}
	h, err := ps.handler(w, paymentsAgent, ledger, approvers)
	if err != nil {
		return err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The triage agent: the handoff Client's sending middleware, its
	// transport, and an elicitation handler, without which the call fails
	// with "client does not support elicitation".
	hc, err := mcphop.NewClient(mcphop.ClientConfig{Agent: triageAgent})
	if err != nil {
		return err
	}
	fin := &owner{w: w, key: fk, approves: map[string]bool{"refund-INV-1042": true}}
	client := mcp.NewClient(&mcp.Implementation{Name: "triage", Version: "v1"}, &mcp.ClientOptions{ElicitationHandler: fin.answer})
	client.AddSendingMiddleware(hc.Middleware())
	session, err := client.Connect(ctx, hc.Transport(&mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: withToken{http.DefaultTransport}}, DisableStandaloneSSE: true}), nil)
	if err != nil {
		return err
	}
	defer session.Close()
	fmt.Fprintf(w, "triage: connected to the payments agent (MCP %s)\n", session.InitializeResult().ProtocolVersion)

	for _, invoice := range []string{"INV-1042", "INV-2001"} {
		d, err := hc.Call(ctx, session, &mcp.CallToolParams{Name: "refund_issue",
			Arguments: refundArgs{Invoice: invoice, OperationID: "refund-" + invoice}},
			handoff.OfferParams{To: payments, Dialog: "case-77", Task: "refund " + invoice, TTL: time.Minute,
				Deliver: evidence.NewBuilder(refundPackage(invoice)).Deliver(evidence.BuildOptions{})})
		if err != nil {
			return err
		}
		info, _, err := triageAgent.Hop(ctx, d.Hop)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "triage: refund %s: hop %q (reason %q), resolved: %v\n", invoice, info.State, info.Reason, info.Resolved)
		if d.Refused {
			return fmt.Errorf("the payments agent refused the offer: %s", d.Statuses[len(d.Statuses)-1].Status.Detail)
		}
		approvals, err := ledger.Approvals(ctx, d.Offer.Digest.String())
		if err != nil {
			return err
		}
		for _, a := range approvals {
			fmt.Fprintf(w, "payments: the ledger holds the %s approval of %s by %s, %d uses left\n", a.Source, a.OperationID, a.Approver, a.Remaining)
		}
	}
	open, err := triageAgent.Unresolved(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "the finance lead was asked %d times; the tool ran %d times and refunded %d; unresolved hops: %d\n",
		fin.asked.Load(), ps.calls.Load(), ps.refunds.Load(), len(open))
	return nil
}

// newAgents makes the two agents, each with its own key and each trusting
// the other's public key.
func newAgents() (t, p *handoff.Agent, err error) {
	var signers []*handoff.Signer
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		s, err := handoff.NewSigner(k, f, nil)
		if err != nil {
			return nil, nil, err
		}
		signers = append(signers, s)
	}
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{triage: {signers[0].Key()}, payments: {signers[1].Key()}})
	if err != nil {
		return nil, nil, err
	}
	if t, err = handoff.NewAgent(handoff.Config{ID: triage, Signer: signers[0], Trust: trust}); err != nil {
		return nil, nil, err
	}
	if p, err = handoff.NewAgent(handoff.Config{ID: payments, Signer: signers[1], Trust: trust}); err != nil {
		return nil, nil, err
	}
	return t, p, nil
}
