// Package agenttest makes agents that trust one another, and forged
// handoffs, for the tests of this module.
package agenttest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff"
)

// Party is one agent with its signer.
type Party struct {
	ID     handoff.AgentID
	Signer *handoff.Signer
	Agent  *handoff.Agent
	// Trust trusts every party of the same New.
	Trust *handoff.Trust
}

// Spec names an agent and the signed form it uses.
type Spec struct {
	ID     handoff.AgentID
	Format handoff.Format
	// Chain is the agent's chain policy; the zero value is the default.
	Chain handoff.ChainPolicy
}

// New makes one agent per spec, each trusting every agent's key.
func New(tb testing.TB, specs ...Spec) map[handoff.AgentID]*Party {
	tb.Helper()
	out := map[handoff.AgentID]*Party{}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, s := range specs {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		sg, err := handoff.NewSigner(key, s.Format, nil)
		if err != nil {
			tb.Fatal(err)
		}
		out[s.ID] = &Party{ID: s.ID, Signer: sg}
		keys[s.ID] = []handoff.TrustedKey{sg.Key()}
	}
	trust, err := handoff.NewTrust(keys)
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range specs {
		p := out[s.ID]
		p.Trust = trust
		if p.Agent, err = handoff.NewAgent(handoff.Config{ID: p.ID, Signer: p.Signer, Trust: trust, Chain: s.Chain}); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// Tamper returns h with from replaced by to in its offer's payload, keeping
// the signature: a forgery that fails check 1.
func Tamper(tb testing.TB, h *handoff.Handoff, from, to string) *handoff.Handoff {
	tb.Helper()
	cp := *h
	switch h.Offer.Format {
	case handoff.JWS:
		parts := strings.Split(string(h.Offer.Octets), ".")
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			tb.Fatal(err)
		}
		parts[1] = base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(from), []byte(to), 1))
		cp.Offer = handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(parts, "."))}
	default:
		var msg cbor.RawTag
		if err := cbor.Unmarshal(h.Offer.Octets, &msg); err != nil {
			tb.Fatal(err)
		}
		var arr []cbor.RawMessage
		if err := cbor.Unmarshal(msg.Content, &arr); err != nil || len(arr) != 4 {
			tb.Fatalf("not a COSE_Sign1: %v", err)
		}
		var payload []byte
		if err := cbor.Unmarshal(arr[2], &payload); err != nil {
			tb.Fatal(err)
		}
		if len(from) != len(to) {
			tb.Fatal("COSE tamper needs strings of one length")
		}
		payload = bytes.Replace(payload, []byte(from), []byte(to), 1)
		enc, _ := cbor.Marshal(payload)
		arr[2] = enc
		content, _ := cbor.Marshal(arr)
		out, _ := cbor.Marshal(cbor.RawTag{Number: msg.Number, Content: content})
		cp.Offer = handoff.Signed{Format: handoff.COSE, Octets: out}
	}
	return &cp
}

// Equivocate signs, with the delegator's own key, a second offer under the
// hop of out with another task: the same (iss, hop), other octets (HC-53).
func Equivocate(tb testing.TB, from *Party, out *handoff.Outgoing, task string) *handoff.Handoff {
	tb.Helper()
	o := *out.Offer
	o.Task = task
	s, err := from.Signer.SignOffer(&o)
	if err != nil {
		tb.Fatal(err)
	}
	return &handoff.Handoff{Offer: s, Chain: out.Handoff.Chain}
}
