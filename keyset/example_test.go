package keyset_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/keyset"
)

// A planner publishes its key as a JWK Set; a coder follows it and
// accepts the planner's offers. The planner then rotates its own key
// while it runs, without a gap: it publishes the new key beside the old
// one, signs with the new key once the coder has fetched it, and retires
// the old key, which the coder honours for its grace period, then drops.
func Example() {
	ctx := context.Background()
	const planner, coder = handoff.AgentID("spiffe://a.example/planner"), handoff.AgentID("spiffe://b.example/coder")
	now := time.Unix(1793000000, 0)
	clock := func() time.Time { return now }
	newSigner := func() *handoff.Signer {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		s, _ := handoff.NewSigner(k, handoff.JWS, nil)
		return s
	}
	oldKey, newKey, coderKey := newSigner(), newSigner(), newSigner()

	// The planner serves its public keys, fresh for a minute.
	pub, _ := keyset.NewPublisher(keyset.PublisherConfig{MaxAge: time.Minute}, oldKey.Key())
	srv := httptest.NewServer(pub)
	defer srv.Close()
	own := func(keys ...handoff.TrustedKey) *handoff.Trust {
		t, _ := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{planner: keys, coder: {coderKey.Key()}})
		return t
	}
	plannerAgent, _ := handoff.NewAgent(handoff.Config{ID: planner, Signer: oldKey, Trust: own(oldKey.Key()), Now: clock})

	// The coder fetches the planner's keys from that URL only, and swaps
	// each change into its running agent.
	src, _ := keyset.New(keyset.Config{Agents: map[handoff.AgentID]keyset.Endpoint{planner: {URL: srv.URL}},
		Grace: time.Hour, Now: clock})
	defer src.Close()
	if err := src.Update(ctx); err != nil {
		panic(err)
	}
	coderAgent, _ := handoff.NewAgent(handoff.Config{ID: coder, Signer: coderKey, Trust: src.Trust(), Now: clock,
		TrustLacksSigner: true}) // src lists the peers' keys, not the coder's own
	if err := src.Follow(coderAgent.SetTrust); err != nil {
		panic(err)
	}
	send := func(from *handoff.Agent, what string) {
		out, err := from.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "ctx-1", Task: what})
		if err != nil {
			panic(err)
		}
		wire, _ := out.Handoff.Encode(handoff.JSON)
		in, _ := coderAgent.Receive(ctx, wire, handoff.Host{Dialog: "ctx-1"})
		if in.Accepted() {
			fmt.Printf("coder: %s: accepted\n", what)
		} else {
			fmt.Printf("coder: %s: refused, %s\n", what, in.Reason())
		}
	}
	send(plannerAgent, "signed with the old key")

	// 1. Publish the new key beside the old one; the coder refreshes once
	// the set it holds is due.
	_ = pub.Set(oldKey.Key(), newKey.Key())
	_ = plannerAgent.SetTrust(own(oldKey.Key(), newKey.Key()))
	now = now.Add(2 * time.Minute)
	_ = src.Update(ctx)
	// 2. The coder has it: sign with the new key.
	if err := plannerAgent.SetSigner(newKey); err != nil {
		panic(err)
	}
	send(plannerAgent, "signed with the new key")

	// 3. Retire the old key. The coder honours it for its grace period,
	// then drops it: whoever still holds it is refused.
	_ = pub.Set(newKey.Key())
	_ = plannerAgent.SetTrust(own(newKey.Key()))
	now = now.Add(2 * time.Minute)
	_ = src.Update(ctx)
	holder, _ := handoff.NewAgent(handoff.Config{ID: planner, Signer: oldKey, Trust: own(oldKey.Key()), Now: clock})
	send(holder, "signed with the retired key, in its grace period")
	now = now.Add(2 * time.Hour)
	_ = src.Update(ctx)
	send(holder, "signed with the retired key, after its grace period")
	send(plannerAgent, "signed with the new key, after the rotation")
	// Output:
	// coder: signed with the old key: accepted
	// coder: signed with the new key: accepted
	// coder: signed with the retired key, in its grace period: accepted
	// coder: signed with the retired key, after its grace period: refused, untrusted-key
	// coder: signed with the new key, after the rotation: accepted
}
