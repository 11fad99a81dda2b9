package mcphop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"

	hmcp "github.com/agentproto/handoff/integrations/mcphop"
)

// exPlanner and exCoder are the two agents of the examples.
const (
	exPlanner = handoff.AgentID("spiffe://a.example/planner")
	exCoder   = handoff.AgentID("spiffe://b.example/coder")
)

// exPackage is the handoff package of the work: writing the patch is
// allowed, merging it needs the reviewer's approval, pushing to main is
// denied.
func exPackage() evidence.Package {
	return evidence.Package{
		Sender: evidence.Party{Role: "planner"}, Receiver: evidence.Party{Role: "coder"},
		Control:      evidence.TransferOwnership,
		Outcome:      evidence.Outcome{Result: "the off-by-one in pager.go fixed", DoneWhen: "the pager tests pass on main"},
		Authority:    evidence.Authority{Allowed: []string{"write_patch"}, MustAsk: []string{"merge_patch"}, Denied: []string{"push_main"}},
		State:        []evidence.StateClaim{{System: "git", State: "main at 4f2c9e1, tests failing", AsOf: time.Now()}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "merge", Action: "merge_patch", Owner: "reviewer"}},
		Next:         evidence.NextAction{Action: "write_patch", Description: "fix the loop bound in pager.go"},
		Verification: evidence.Verification{Check: "go test ./pager passes"},
		Timeouts:     []evidence.Timeout{{Condition: "no review before the offer expires", Owner: "planner"}},
		Rollback:     evidence.Rollback{Method: "revert the merge"},
	}
}

// exCoderServer is the delegate: an MCP server whose every tool runs only
// for an offer that passed every check and whose package passed. The
// middleware runs each tool call under the hop's guard, keyed by the call
// (the tool, its arguments, the hop): the tool is the effect and nothing
// else. A denied call never reaches its tool and ends the hop "failed"; a
// must-ask call pauses for its owner's approval before its tool runs.
func exCoderServer(agent *handoff.Agent) *mcp.Server {
	mw, err := hmcp.Server(hmcp.ServerConfig{
		Agent: agent,
		// The in-memory transport authenticates nobody; a deployment
		// returns the caller its transport authenticated.
		Peer:      func(*mcp.CallToolRequest) handoff.AgentID { return exPlanner },
		Evidence:  &evidence.HostConfig{Guard: evidence.GuardConfig{Ledger: authority.NewMemory()}},
		Approvals: &hmcp.Approvals{Key: []byte("a 32-byte key that seals pauses!")},
	})
	if err != nil {
		panic(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
	server.AddReceivingMiddleware(mw)
	for _, name := range []string{"write_patch", "merge_patch", "push_main"} {
		mcp.AddTool(server, &mcp.Tool{Name: name}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			in, _ := hmcp.FromContext(ctx) // the hop's accepted offer, on a resumed call too
			fmt.Println("coder:", name, "done for hop from", in.Offer().Iss, "chain", in.Chain())
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	}
	return server
}

// exAgents makes the two agents, each trusting the other's key.
func exAgents() (planner, coder *handoff.Agent) {
	pk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ck, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ps, _ := handoff.NewSigner(pk, handoff.JWS, nil)
	cs, _ := handoff.NewSigner(ck, handoff.COSE, nil)
	trust, _ := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{exPlanner: {ps.Key()}, exCoder: {cs.Key()}})
	planner, _ = handoff.NewAgent(handoff.Config{ID: exPlanner, Signer: ps, Trust: trust})
	coder, _ = handoff.NewAgent(handoff.Config{ID: exCoder, Signer: cs, Trust: trust})
	return planner, coder
}

// exCall calls one tool with an offer that carries the package.
func exCall(ctx context.Context, pc *hmcp.Client, session *mcp.ClientSession, tool string) *hmcp.Delivery {
	d, err := pc.Call(ctx, session, &mcp.CallToolParams{Name: tool}, handoff.OfferParams{To: exCoder, Dialog: "ctx-7c1e", Task: tool,
		Deliver: evidence.NewBuilder(exPackage()).Deliver(evidence.BuildOptions{})})
	if err != nil {
		panic(err)
	}
	return d
}

// A planner calls a coder's tools with signed offers, each with the handoff
// package beside it. One middleware on each side does the draft's work and
// carries and checks the package, and the delegate's runs each tool call
// under the hop's guard. The allowed patch completes; the denied push
// never reaches its tool, and its hop ends "failed" (reason "policy"), no
// refs, resolved at the planner.
func Example() {
	ctx := context.Background()
	plannerAgent, coderAgent := exAgents()
	server := exCoderServer(coderAgent)

	// The delegator: an MCP client with the sending middleware.
	pc, _ := hmcp.NewClient(hmcp.ClientConfig{Agent: plannerAgent})
	client := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil)
	client.AddSendingMiddleware(pc.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	defer ss.Close()
	session, _ := client.Connect(ctx, pc.Transport(ct), nil)
	defer session.Close()

	for _, tool := range []string{"write_patch", "push_main"} {
		d := exCall(ctx, pc, session, tool)
		hop, _, _ := plannerAgent.Hop(ctx, d.Hop)
		fmt.Printf("planner: %s: %q (reason %q) signed by %s, resolved %v: %s\n", tool, d.State, hop.Reason,
			d.Statuses[0].Status.Iss, hop.Resolved, d.Result.Content[0].(*mcp.TextContent).Text)
	}
	// Output:
	// coder: write_patch done for hop from spiffe://a.example/planner chain full
	// planner: write_patch: "completed" (reason "") signed by spiffe://b.example/coder, resolved true: ok
	// planner: push_main: "failed" (reason "policy") signed by spiffe://b.example/coder, resolved true: refused: evidence: action denied: "push_main"
}

// A must-ask action pauses the call, before its tool runs, with an MCP
// input request carrying the pending approval. The MCP Go SDK answers it
// with the client's elicitation handler and retries the call itself, with
// the hop's identical Handoff and package; the middleware records the
// approval of exactly that call and runs the tool once, as the hop's work
// resumed. The owner is asked once.
func Example_approval() {
	ctx := context.Background()
	plannerAgent, coderAgent := exAgents()
	server := exCoderServer(coderAgent)

	pc, _ := hmcp.NewClient(hmcp.ClientConfig{Agent: plannerAgent})
	client := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, &mcp.ClientOptions{
		// Without an elicitation handler the call fails with "client does
		// not support elicitation".
		ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			pending, ok := hmcp.PendingApproval(r.Params)
			if !ok {
				return &mcp.ElicitResult{Action: "decline"}, nil // not an approval
			}
			fmt.Println("reviewer: approves", pending["action"], "asked of", pending["owner"], "for the tool", pending["tool"])
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
		},
	})
	client.AddSendingMiddleware(pc.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	defer ss.Close()
	session, _ := client.Connect(ctx, pc.Transport(ct), nil)
	defer session.Close()

	d := exCall(ctx, pc, session, "merge_patch")
	fmt.Printf("planner: merge_patch: %q\n", d.State)
	// Output:
	// reviewer: approves merge_patch asked of reviewer for the tool merge_patch
	// coder: merge_patch done for hop from spiffe://a.example/planner chain full
	// planner: merge_patch: "completed"
}
