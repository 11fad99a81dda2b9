package agentcard_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
)

// The agent signs the card it serves with its handoff key; a peer whose
// trust configuration binds that key to the agent verifies the card it
// fetched for that agent.
func Example() {
	// A fixed Ed25519 key so that the example prints the same card every
	// time. Never use a key printed in documentation.
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	card := []byte(`{
  "name": "coder",
  "description": "Fixes bugs.",
  "version": "1.0.0",
  "supportedInterfaces": [{"url": "https://b.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
}`)
	signed, err := agentcard.Sign(card, key, agentcard.SignOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", signed)

	// The peer's trust configuration, the one it checks the agent's
	// handoffs with.
	const coder handoff.AgentID = "spiffe://b.example/agent/coder"
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{
		coder: {{Public: key.Public(), Alg: handoff.EdDSA}},
	})
	if err != nil {
		panic(err)
	}
	v, err := agentcard.Verify(signed, trust, coder, agentcard.VerifyOptions{})
	if err != nil {
		panic(err)
	}
	for _, s := range v.Signatures() {
		fmt.Printf("signature %d: %s by %s, verified: %v\n", s.Index, s.Alg, s.Key.KID, s.Err == nil)
	}

	// A card altered after signing verifies no more.
	altered := bytes.Replace(signed, []byte("Fixes bugs."), []byte("Deletes files."), 1)
	_, err = agentcard.Verify(altered, trust, coder, agentcard.VerifyOptions{})
	fmt.Println("altered:", errors.Is(err, handoff.ErrSignature))

	// Nor does it for another agent, whose keys the Trust does not bind.
	_, err = agentcard.Verify(signed, trust, "spiffe://c.example/agent/other", agentcard.VerifyOptions{})
	fmt.Println("another agent:", errors.Is(err, handoff.ErrUntrustedKey))
	// Output:
	// {"description":"Fixes bugs.","name":"coder","signatures":[{"protected":"eyJhbGciOiJFZERTQSIsImtpZCI6Ii0tNklNNWwwT29zTGo5eVdza0lTWWhVQTNuXzNDVVJRa21yWU1TaGFfY2siLCJ0eXAiOiJKT1NFIn0","signature":"GB-e5S05t97r_fizL_2ObmXwxz-uePPVWX5I9CFplIlJ6X1WwXOWIspZ9l1QfXQe5tQTL5X_h3V9h9telgtWDg"}],"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"https://b.example/a2a"}],"version":"1.0.0"}
	// signature 0: EdDSA by --6IM5l0OosLj9yWskISYhUA3n_3CURQkmrYMSha_ck, verified: true
	// altered: true
	// another agent: true
}
