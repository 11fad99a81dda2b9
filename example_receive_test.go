package handoff_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"
)

// exampleMust ends the example on an error it does not expect.
func exampleMust[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// exampleAgents makes one agent per AgentID, each with its own ES256 key
// in the given form, all trusting one another's public keys.
func exampleAgents(f handoff.Format, ids ...handoff.AgentID) (map[handoff.AgentID]*handoff.Signer, *handoff.Trust) {
	signers := map[handoff.AgentID]*handoff.Signer{}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range ids {
		k := exampleMust(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
		signers[id] = exampleMust(handoff.NewSigner(k, f, nil))
		keys[id] = []handoff.TrustedKey{signers[id].Key()}
	}
	return signers, exampleMust(handoff.NewTrust(keys))
}

// A delegate receives an offer, decides, and answers; a retransmission of
// the same octets gets the same answer; offers that fail a check are
// rejected with the draft's reason code.
func ExampleAgent_Receive() {
	ctx := context.Background()
	clock := time.Unix(1793000000, 0)
	now := func() time.Time { return clock }
	planner := handoff.AgentID("spiffe://a.example/agent/planner")
	coder := handoff.AgentID("spiffe://b.example/agent/coder")
	signers, trust := exampleAgents(handoff.JWS, planner, coder)

	delegator := exampleMust(handoff.NewAgent(handoff.Config{ID: planner, Signer: signers[planner], Trust: trust, Now: now}))
	delegate := exampleMust(handoff.NewAgent(handoff.Config{ID: coder, Signer: signers[coder], Trust: trust, Now: now}))

	// The planner offers work in its A2A dialog; the Handoff object travels
	// in the message metadata.
	out := exampleMust(delegator.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "ctx-7c1e", Task: "write-patch"}))
	msg := exampleMust(out.Handoff.Encode(handoff.JSON))

	// The coder runs the checks of section 5.1, in order.
	host := handoff.Host{Dialog: "ctx-7c1e", Peer: planner}
	in := exampleMust(delegate.Receive(ctx, msg, host))
	fmt.Println("accepted:", in.Accepted(), "chain:", in.Chain())

	// It takes the work and says so; the planner verifies the status.
	accepted := exampleMust(delegate.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{}))
	res := exampleMust(delegator.HandleStatus(ctx, accepted.Octets))
	fmt.Println("planner sees:", res.State)

	// The planner heard nothing and sends the identical octets again: the
	// coder does not process them again and resends its status unchanged.
	again := exampleMust(delegate.Receive(ctx, msg, host))
	last, ok := again.LastStatus()
	fmt.Println("retransmission:", again.Retransmission(), "same status:", ok && bytes.Equal(last.Octets, accepted.Octets))

	// An offer for another dialog is rejected, and a "rejected" is due.
	other := exampleMust(delegator.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "ctx-0000"}))
	in = exampleMust(delegate.Receive(ctx, exampleMust(other.Handoff.Encode(handoff.CBOR)), host))
	fmt.Printf("accepted: %v reason: %s status due: %v\n", in.Accepted(), in.Reason(), in.StatusDue())

	// An offer that arrives after its exp is stale.
	late := exampleMust(delegator.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "ctx-7c1e", TTL: time.Minute}))
	clock = clock.Add(2 * time.Minute)
	in = exampleMust(delegate.Receive(ctx, exampleMust(late.Handoff.Encode(handoff.JSON)), host))
	fmt.Printf("accepted: %v reason: %s\n", in.Accepted(), in.Reason())

	// Output:
	// accepted: true chain: full
	// planner sees: accepted
	// retransmission: true same status: true
	// accepted: false reason: policy status due: true
	// accepted: false reason: stale
}

// A delegate that must know where the work started requires a full chain
// from a trusted origin (HC-58). The chain's elements may come in both
// signed forms.
func ExampleAgent_Receive_chain() {
	ctx := context.Background()
	now := func() time.Time { return time.Unix(1793000000, 0) }
	assistant := handoff.AgentID("spiffe://u.example/agent/assistant")
	planner := handoff.AgentID("spiffe://a.example/agent/planner")
	coder := handoff.AgentID("spiffe://b.example/agent/coder")
	signers, trust := exampleAgents(handoff.COSE, assistant, planner, coder)

	agent := func(id handoff.AgentID, pol handoff.ChainPolicy) *handoff.Agent {
		return exampleMust(handoff.NewAgent(handoff.Config{ID: id, Signer: signers[id], Trust: trust, Now: now, Chain: pol}))
	}
	strict := handoff.ChainPolicy{RequireFull: true, TrustedOrigins: []handoff.AgentID{assistant}}
	a, p, c := agent(assistant, strict), agent(planner, strict), agent(coder, strict)

	// The assistant hands a task to the planner, who passes part of it on
	// to the coder with the chain that led to it.
	first := exampleMust(a.Offer(ctx, handoff.OfferParams{To: planner, Dialog: "ctx-7c1e"}))
	atPlanner := exampleMust(p.Receive(ctx, exampleMust(first.Handoff.Encode(handoff.CBOR)), handoff.Host{}))
	second := exampleMust(p.Offer(ctx, handoff.OfferParams{To: coder, From: atPlanner}))
	atCoder := exampleMust(c.Receive(ctx, exampleMust(second.Handoff.Encode(handoff.CBOR)), handoff.Host{Dialog: "ctx-7c1e"}))
	fmt.Println("accepted:", atCoder.Accepted(), "chain:", atCoder.Chain(), "links:", len(atCoder.Links()))
	for i, l := range atCoder.Links() {
		fmt.Printf("link %d: %s -> %s verified: %v\n", i, l.Offer().Iss, l.Offer().Aud, l.Verified)
	}

	// Without the chain, the coder cannot see the origin: its policy refuses.
	bare := exampleMust(p.Offer(ctx, handoff.OfferParams{To: coder, From: atPlanner, OmitChain: true}))
	in := exampleMust(c.Receive(ctx, exampleMust(bare.Handoff.Encode(handoff.CBOR)), handoff.Host{}))
	fmt.Println("accepted:", in.Accepted(), "chain:", in.Chain(), "reason:", in.Reason())

	// Output:
	// accepted: true chain: full links: 1
	// link 0: spiffe://u.example/agent/assistant -> spiffe://a.example/agent/planner verified: true
	// accepted: false chain: absent reason: policy
}
