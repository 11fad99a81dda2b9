package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/keyset"
)

// detKey makes every signature deterministic: crypto/ecdsa signs per RFC
// 6979 when given a nil random source, and Ed25519 is deterministic by
// construction. Regenerating the vectors therefore reproduces them byte for
// byte.
type detKey struct{ crypto.Signer }

func (k detKey) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return k.Signer.Sign(nil, digest, opts)
}

// keyLabel prefixes every key derivation label.
const keyLabel = "github.com/agentproto/handoff testdata/vectors key: "

// p256Key derives a P-256 private key from label: the scalar is SHA-256 of
// the label (and a counter, in the unlikely case it is out of range).
func p256Key(label string) crypto.Signer {
	for i := 0; ; i++ {
		seed := sha256.Sum256([]byte(fmt.Sprintf("%s%s/%d", keyLabel, label, i)))
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seed[:]); err == nil {
			return k
		}
	}
}

// p384Key derives a P-384 private key from label with SHA-384.
func p384Key(label string) crypto.Signer {
	for i := 0; ; i++ {
		seed := sha512.Sum384([]byte(fmt.Sprintf("%s%s/%d", keyLabel, label, i)))
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P384(), seed[:]); err == nil {
			return k
		}
	}
}

// ed25519Key derives an Ed25519 private key whose seed is SHA-256 of label.
func ed25519Key(label string) crypto.Signer {
	seed := sha256.Sum256([]byte(keyLabel + label))
	return ed25519.NewKeyFromSeed(seed[:])
}

// agent is one signing party of the vectors: an AgentID, its one key, and a
// Signer of the library per format.
type agent struct {
	id   handoff.AgentID
	key  crypto.Signer
	alg  string
	kid  string
	jws  *handoff.Signer
	cose *handoff.Signer
}

func newAgent(id handoff.AgentID, key crypto.Signer) *agent {
	key = detKey{key}
	a := &agent{id: id, key: key}
	var err error
	if a.jws, err = handoff.NewSigner(key, handoff.JWS, nil); err != nil {
		panic(err)
	}
	if a.cose, err = handoff.NewSigner(key, handoff.COSE, nil); err != nil {
		panic(err)
	}
	a.alg, a.kid = a.jws.Key().Alg, a.jws.Key().KID
	return a
}

func (a *agent) signer(f handoff.Format) *handoff.Signer {
	if f == handoff.COSE {
		return a.cose
	}
	return a.jws
}

// jwk returns the agent's public key as a JWK with alg and kid.
func (a *agent) jwk() json.RawMessage {
	b, err := keyset.PublicJWK(a.jws.Key())
	if err != nil {
		panic(err)
	}
	return b
}

// The agents of the vectors. Every key is derived from its AgentID.
var (
	assistant  = newAgent("spiffe://a.example/agent/assistant", p256Key("assistant"))
	planner    = newAgent("spiffe://p.example/agent/planner", p256Key("planner"))
	coder      = newAgent("spiffe://r.example/agent/coder", p256Key("coder"))
	researcher = newAgent("spiffe://x.example/agent/researcher", p256Key("researcher"))
	reviewer   = newAgent("spiffe://e.example/agent/reviewer", ed25519Key("reviewer"))
	auditor    = newAgent("spiffe://q.example/agent/auditor", p384Key("auditor"))
	// mallory holds a key that no trust configuration of the vectors binds.
	mallory = newAgent("spiffe://m.example/agent/mallory", p256Key("mallory"))
)

// baseTrust lists the agents every vector's trust configuration binds.
var baseTrust = []*agent{assistant, planner, coder, researcher, reviewer, auditor}

// hopAgents returns n agents named spiffe://d.example/agent/hop-01..., for
// long chains.
func hopAgents(n int) []*agent {
	out := make([]*agent, n)
	for i := range out {
		name := fmt.Sprintf("hop-%02d", i+1)
		out[i] = newAgent(handoff.AgentID("spiffe://d.example/agent/"+name), p256Key(name))
	}
	return out
}
