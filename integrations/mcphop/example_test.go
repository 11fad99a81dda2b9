package mcphop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"

	hmcp "github.com/agentproto/handoff/integrations/mcphop"
)

// A planner calls a coder's tool with a signed offer. One middleware on
// each side does the draft's work: the coder's tool runs only for an offer
// that passed every check, and the planner gets back the signed status.
func Example() {
	ctx := context.Background()
	plannerID, coderID := handoff.AgentID("spiffe://a.example/planner"), handoff.AgentID("spiffe://b.example/coder")

	// Keys and trust: each agent signs with its own key and trusts the
	// other's public key.
	pk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ck, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ps, _ := handoff.NewSigner(pk, handoff.JWS, nil)
	cs, _ := handoff.NewSigner(ck, handoff.COSE, nil)
	trust, _ := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{plannerID: {ps.Key()}, coderID: {cs.Key()}})
	plannerAgent, _ := handoff.NewAgent(handoff.Config{ID: plannerID, Signer: ps, Trust: trust})
	coderAgent, _ := handoff.NewAgent(handoff.Config{ID: coderID, Signer: cs, Trust: trust})

	// The delegate: an MCP server with the receiving middleware.
	server := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
	mw, err := hmcp.Server(hmcp.ServerConfig{
		Agent: coderAgent,
		// The in-memory transport authenticates nobody; a deployment
		// returns the caller its transport authenticated.
		Peer: func(*mcp.CallToolRequest) handoff.AgentID { return plannerID },
	})
	if err != nil {
		panic(err)
	}
	server.AddReceivingMiddleware(mw)
	mcp.AddTool(server, &mcp.Tool{Name: "write_patch"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		in, _ := hmcp.FromContext(ctx)
		fmt.Println("coder: working on hop from", in.Offer().Iss, "chain", in.Chain())
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "patched"}}}, nil, nil
	})

	// The delegator: an MCP client with the sending middleware.
	pc, _ := hmcp.NewClient(hmcp.ClientConfig{Agent: plannerAgent})
	client := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil)
	client.AddSendingMiddleware(pc.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	defer ss.Close()
	session, _ := client.Connect(ctx, pc.Transport(ct), nil)
	defer session.Close()

	d, err := pc.Call(ctx, session, &mcp.CallToolParams{Name: "write_patch"},
		handoff.OfferParams{To: coderID, Dialog: "ctx-7c1e", Task: "fix-pager"})
	if err != nil {
		panic(err)
	}
	fmt.Println("planner: status", d.Statuses[0].State, "signed by", d.Statuses[0].Status.Iss)
	// Output:
	// coder: working on hop from spiffe://a.example/planner chain full
	// planner: status completed signed by spiffe://b.example/coder
}
