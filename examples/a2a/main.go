// Command a2a hands work from a planner to a coder over A2A, with the a2a-go
// SDK's JSON-RPC server and client running in this process (draft section
// "Carrying the Element", HC-66).
//
// The planner puts the Handoff in Message.metadata under
// handoff/a2a.ExtensionURI, lists the URI in Message.extensions and in the
// A2A-Extensions service parameter, and sends message/send with the dialog
// as the message's contextId. The coder runs the draft's checks and puts
// each signed status in the metadata of the task's status message
// (TaskStatus.message), with the A2A task state that matches the handoff
// state. A retransmission is answered with a reply Message carrying the
// identical octets of the last status (HC-39).
//
// Run it with:
//
//	cd examples && go run ./a2a
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"net/http/httptest"
	"os"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentproto/handoff"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
	dialog  = "ctx-7c1e" // the A2A contextId
	// plannerToken is the bearer token the coder's endpoint knows the
	// planner by. It stands in for whatever authenticates the caller in a
	// deployment (mutual TLS, OAuth).
	plannerToken = "planner-token"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "a2a:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	w := &syncWriter{w: out}
	ctx := context.Background()

	plannerAgent, coderAgent, err := newAgents()
	if err != nil {
		return err
	}

	// The coder: an A2A JSON-RPC endpoint whose executor checks handoffs,
	// behind a layer that authenticates the caller.
	exec := &coderExecutor{agent: coderAgent, w: w}
	handler := a2asrv.NewHandler(exec)
	srv := httptest.NewServer(authenticate(a2asrv.NewJSONRPCHandler(handler), map[string]handoff.AgentID{plannerToken: planner}))
	defer srv.Close()

	// The planner: an A2A client for that endpoint that sends its token and
	// asks for the extension on every call.
	client, err := a2aclient.NewFromEndpoints(ctx,
		[]a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: srv.URL}},
		a2aclient.WithInterceptors(callMeta{token: plannerToken}))
	if err != nil {
		return err
	}
	defer client.Destroy()

	pl := &plannerClient{agent: plannerAgent, client: client, w: w}
	return pl.play(ctx)
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
