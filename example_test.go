package handoff_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"
)

// The draft's worked example: the handoff digest of each element is SHA-256
// over its octets exactly as sent, and each offer's prev names the one
// before it.
func ExampleParseHandoff() {
	data := exampleMust(os.ReadFile("testdata/draft-00/handoff.json"))
	h, enc, err := handoff.ParseHandoff(data, handoff.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("encoding:", enc)
	fmt.Println("chain[0]:", h.Chain[0].Format, len(h.Chain[0].Octets), "octets,", h.Chain[0].Digest())
	fmt.Println("offer:   ", h.Offer.Format, len(h.Offer.Octets), "octets,", h.Offer.Digest())
	// Output:
	// encoding: json
	// chain[0]: jws 538 octets, sha-256:M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg
	// offer:    jws 942 octets, sha-256:kJIcudVNmFFwbYKTXNO3mqC3e9dQSWVXDNbamGeoP18
}

// A delegator offers work, the delegate accepts and completes it, and the
// delegator holds the hop resolved.
func ExampleAgent_Offer() {
	ctx := context.Background()
	const planner, coder = handoff.AgentID("spiffe://a.example/planner"), handoff.AgentID("spiffe://b.example/coder")
	signers, trust := exampleAgents(handoff.COSE, planner, coder)
	now := func() time.Time { return time.Unix(1793000000, 0) }
	p := exampleMust(handoff.NewAgent(handoff.Config{ID: planner, Signer: signers[planner], Trust: trust, Now: now}))
	c := exampleMust(handoff.NewAgent(handoff.Config{ID: coder, Signer: signers[coder], Trust: trust, Now: now}))

	out := exampleMust(p.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "ctx-1", TTL: time.Minute, Work: "patch-9"}))
	wire := exampleMust(out.Handoff.Encode(handoff.CBOR))

	in := exampleMust(c.Receive(ctx, wire, handoff.Host{Dialog: "ctx-1"}))
	fmt.Println("coder: accepted:", in.Accepted())
	for _, st := range []state.State{state.Accepted, state.Completed} {
		s := exampleMust(c.Reply(ctx, in, st, handoff.ReplyOptions{Effect: state.EffectFull}))
		res := exampleMust(p.HandleStatus(ctx, s.Octets))
		fmt.Println("planner: hop", res.State)
	}
	hop, _, _ := p.Hop(ctx, out.Offer.Hop)
	open := exampleMust(p.Unresolved(ctx))
	fmt.Println("planner: resolved:", hop.Resolved, "unresolved hops:", len(open))
	// Output:
	// coder: accepted: true
	// planner: hop accepted
	// planner: hop completed
	// planner: resolved: true unresolved hops: 0
}
