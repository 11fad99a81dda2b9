// Command quickstart is the smallest complete use of the handoff package: a
// planner agent offers work to a coder agent, the coder checks the offer and
// answers with signed statuses, and the planner verifies them.
//
// Run it with:
//
//	cd examples && go run ./quickstart
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"os"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
	dialog  = "ctx-7c1e" // the host protocol's dialog identifier
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	ctx := context.Background()

	// Each agent has its own signing key.
	plannerSigner, err := newSigner()
	if err != nil {
		return err
	}
	coderSigner, err := newSigner()
	if err != nil {
		return err
	}

	// Both agents share one trust configuration: each AgentID bound to its
	// public key. In a deployment the trust comes from configuration (for
	// example keyset.ParseTrust on a JWK Set document), never from keys
	// that arrive with the messages. NewAgent checks that it binds each
	// agent's own key to its ID.
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{
		planner: {plannerSigner.Key()}, coder: {coderSigner.Key()},
	})
	if err != nil {
		return err
	}

	p, err := handoff.NewAgent(handoff.Config{ID: planner, Signer: plannerSigner, Trust: trust})
	if err != nil {
		return err
	}
	c, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: coderSigner, Trust: trust})
	if err != nil {
		return err
	}

	// 1. The planner signs an offer for the coder. The encoded Handoff
	// object is what the host protocol (A2A, MCP, ...) carries.
	out, err := p.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	if err != nil {
		return err
	}
	wire, err := out.Handoff.Encode(handoff.JSON)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "1. planner offers hop %s to the coder (%d octets)\n", out.Offer.Hop, len(wire))

	// 2. The coder runs the draft's checks in order. A failed check is a
	// result with a reason code, not an error.
	in, err := c.Receive(ctx, wire, handoff.Host{Dialog: dialog, Peer: planner})
	if err != nil {
		return err // the replay store could not answer: refuse
	}
	if !in.Accepted() {
		return fmt.Errorf("coder rejected the offer: %s: %s", in.Reason(), in.Detail())
	}
	fmt.Fprintf(w, "2. coder checked the offer from %s: accepted (chain %s)\n", in.Offer().Iss, in.Chain())

	// 3. The coder takes the work and says so with a signed "accepted".
	accepted, err := c.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "3. coder replies \"accepted\"")

	// 4. The planner verifies the status against the offer it made.
	res, err := p.HandleStatus(ctx, accepted.Octets)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "4. planner verified the status: hop is %s\n", res.State)

	// 5. The work is done: the coder says "completed", which needs the
	// effect to be known in full.
	completed, err := c.Reply(ctx, in, state.Completed, handoff.ReplyOptions{Effect: state.EffectFull})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "5. coder replies \"completed\"")

	// 6. The planner verifies it; the hop is resolved.
	res, err = p.HandleStatus(ctx, completed.Octets)
	if err != nil {
		return err
	}
	info, _, _ := p.Hop(context.Background(), out.Offer.Hop)
	fmt.Fprintf(w, "6. planner verified the status: hop is %s, resolved: %v\n", res.State, info.Resolved)
	return nil
}

// newSigner makes a fresh ES256 key that signs in the JSON/JWS form.
func newSigner() (*handoff.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return handoff.NewSigner(key, handoff.JWS, nil)
}
