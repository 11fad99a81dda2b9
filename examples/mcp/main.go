// Command mcp hands work from a planner to a coder over MCP, with the
// official Go SDK and its in-memory transport (draft section "Carrying the
// Element", HC-67).
//
// The coder is an MCP server with one tool, write_patch. The planner calls
// it with the Handoff object under handoff/mcp.MetaKey in the tools/call
// params._meta; the coder runs the draft's checks and returns its signed
// status under the same key in the CallToolResult's _meta. A tool call gets
// one reply, so the planner learns later statuses by retransmitting the
// identical Handoff, and the coder answers a retransmission with the
// identical octets of its last status (HC-39).
//
// Run it with:
//
//	cd examples && go run ./mcp
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
	dialog  = "ctx-7c1e"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcp:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	w := &syncWriter{w: out}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	plannerAgent, coderAgent, err := newAgents()
	if err != nil {
		return err
	}

	// The coder's MCP server, connected to the planner's client through the
	// SDK's in-memory transport. That transport authenticates nobody; it
	// connects exactly the one client made below, so the server takes the
	// planner as its authenticated peer. Over HTTP with OAuth the peer
	// would come from the verified token instead (see coderServer.peer).
	cs := newCoderServer(coderAgent, planner, w)
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := cs.server.Connect(ctx, serverT, nil)
	if err != nil {
		return err
	}
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1.0.0"}, nil)
	session, err := client.Connect(ctx, clientT, nil)
	if err != nil {
		return err
	}
	defer session.Close()

	pl := &plannerClient{agent: plannerAgent, session: session, w: w}
	return pl.play(ctx, cs)
}

// newAgents makes the two agents, each with its own ES256 key and each
// trusting the other's public key.
func newAgents() (p, c *handoff.Agent, err error) {
	ps, err := newSigner()
	if err != nil {
		return nil, nil, err
	}
	csg, err := newSigner()
	if err != nil {
		return nil, nil, err
	}
	pt, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{coder: {csg.Key()}})
	if err != nil {
		return nil, nil, err
	}
	ct, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{planner: {ps.Key()}})
	if err != nil {
		return nil, nil, err
	}
	if p, err = handoff.NewAgent(handoff.Config{ID: planner, Signer: ps, Trust: pt}); err != nil {
		return nil, nil, err
	}
	if c, err = handoff.NewAgent(handoff.Config{ID: coder, Signer: csg, Trust: ct}); err != nil {
		return nil, nil, err
	}
	return p, c, nil
}

func newSigner() (*handoff.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return handoff.NewSigner(key, handoff.JWS, nil)
}
