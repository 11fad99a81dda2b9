package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/mcphop"
)

// handoffMiddleware is the receiving middleware of a delegate with a fresh
// key, guarding every tool, that lets a call without a Handoff reach its
// tool (mcphop.ServerConfig.Optional): what the conformance suite sends.
func handoffMiddleware() (mcp.Middleware, error) {
	const id = handoff.AgentID("spiffe://conformance.example/server")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := handoff.NewSigner(key, handoff.JWS, nil)
	if err != nil {
		return nil, err
	}
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{id: {signer.Key()}})
	if err != nil {
		return nil, err
	}
	agent, err := handoff.NewAgent(handoff.Config{ID: id, Signer: signer, Trust: trust})
	if err != nil {
		return nil, err
	}
	return mcphop.Server(mcphop.ServerConfig{Agent: agent, Optional: true})
}
