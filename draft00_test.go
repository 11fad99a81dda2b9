package handoff

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The draft-00 worked example (section 2.3), from testdata/draft-00. These
// tests fail if any byte of the vectors changes.

const (
	draftAssistant = AgentID("spiffe://u.example/agent/assistant")
	draftPlanner   = AgentID("spiffe://a.example/agent/planner")
	draftCoder     = AgentID("spiffe://b.example/agent/coder")
	draftNow       = 1793000003
)

func readDraft(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "draft-00", name))
	require.NoError(t, err)
	return b
}

func draftHandoff(t *testing.T) *Handoff {
	t.Helper()
	h, enc, err := ParseHandoff(readDraft(t, "handoff.json"), Limits{})
	require.NoError(t, err)
	require.Equal(t, JSON, enc)
	require.Len(t, h.Chain, 1)
	return h
}

func draftTrust(t *testing.T) *Trust {
	t.Helper()
	tr, err := parseTrustDoc(readDraft(t, "trust.json"))
	require.NoError(t, err)
	return tr
}

// HC-20: the handoff digest is SHA-256 over the octets exactly as sent.
func TestDraft00_HC20_Digests(t *testing.T) {
	h := draftHandoff(t)
	assert.Len(t, h.Offer.Octets, 942)
	assert.Len(t, h.Chain[0].Octets, 538)
	assert.Equal(t, "M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg", h.Chain[0].Digest().B64(), "prev")
	assert.Equal(t, "kJIcudVNmFFwbYKTXNO3mqC3e9dQSWVXDNbamGeoP18", h.Offer.Digest().B64(), "status offer")

	o, err := OpenOffer(h.Offer, draftTrust(t), Limits{})
	require.NoError(t, err)
	require.NotNil(t, o.Prev)
	assert.True(t, o.Prev.Equal(h.Chain[0].Digest()))

	var st map[string]any
	require.NoError(t, json.Unmarshal(readDraft(t, "status-payload.json"), &st))
	assert.Equal(t, h.Offer.Digest().B64(), st["offer"].(map[string]any)["val"])
}

// HC-03: grant is the digest of the credential's exact octets.
func TestDraft00_HC03_Grant(t *testing.T) {
	cred := readDraft(t, "credential.txt")
	require.Len(t, cred, 61)
	g := digest.SHA256(cred)
	assert.Equal(t, "SKLjsfET5xtZoO5hzIiZFigz2JoYZLmW8Cg8GuYh4o4", g.B64())

	o, err := OpenOffer(draftHandoff(t).Offer, draftTrust(t), Limits{})
	require.NoError(t, err)
	assert.NoError(t, VerifyGrant(o, cred), "HC-57")
	assert.ErrorIs(t, VerifyGrant(o, append(cred, '!')), ErrRejected)
}

// HC-11: the reference verifies against the draft's 65 octets, and only
// after the check.
func TestDraft00_HC11_Reference(t *testing.T) {
	obj := readDraft(t, "ref-object.json")
	require.Len(t, obj, 65)
	o, err := OpenOffer(draftHandoff(t).Offer, draftTrust(t), Limits{})
	require.NoError(t, err)
	require.Len(t, o.Refs, 1)
	r := o.Refs[0]
	assert.Equal(t, "V_WPM8F9ztg6WxBxj1ZIGnzRbM1Xyp5GVdpEYmwbvuQ", r.Dig.B64())
	assert.Equal(t, "https://a.example/ctx/9", r.Loc)
	assert.Equal(t, ref.Verified, ref.Check(r, ref.Object{Octets: obj}).Outcome)
	assert.Equal(t, ref.Mismatch, ref.Check(r, ref.Object{Octets: obj[1:]}).Outcome)
}

// HC-16: each kid is the RFC 7638 thumbprint of the signing key.
func TestDraft00_HC16_Thumbprints(t *testing.T) {
	for name, kid := range map[string]string{
		"assistant.jwk": "KKOb_URldPME8XXXbWvX88EXpI6TOhKH4rwtHpqtIb8",
		"planner.jwk":   "lWGFAC8Cpc9fneqXZ3b4aCjtbb7vBoT8RbvJxX61-kQ",
	} {
		k, err := parseJWKDoc(readDraft(t, name))
		require.NoError(t, err)
		assert.Equal(t, ES256, k.Alg, "a P-256 key without alg means ES256")
		tr, err := NewTrust(map[AgentID][]TrustedKey{"x": {k}})
		require.NoError(t, err)
		assert.Equal(t, kid, tr.Keys("x")[0].KID, name)
	}
}

// HC-21: each signature verifies with its signer's key and fails with the
// other's.
func TestDraft00_HC21_SignaturesAndSwappedKeys(t *testing.T) {
	h := draftHandoff(t)
	assistant, err := parseJWKDoc(readDraft(t, "assistant.jwk"))
	require.NoError(t, err)
	planner, err := parseJWKDoc(readDraft(t, "planner.jwk"))
	require.NoError(t, err)

	right, err := NewTrust(map[AgentID][]TrustedKey{draftAssistant: {assistant}, draftPlanner: {planner}})
	require.NoError(t, err)
	c0, err := OpenOffer(h.Chain[0], right, Limits{})
	require.NoError(t, err)
	assert.Equal(t, draftAssistant, c0.Iss)
	assert.Equal(t, draftPlanner, c0.Aud)
	_, err = OpenOffer(h.Offer, right, Limits{})
	require.NoError(t, err)

	// Swapped keys, named by the kids the messages carry, so that the
	// signature check itself is what fails.
	assistant.KID, planner.KID = "lWGFAC8Cpc9fneqXZ3b4aCjtbb7vBoT8RbvJxX61-kQ", "KKOb_URldPME8XXXbWvX88EXpI6TOhKH4rwtHpqtIb8"
	swapped, err := NewTrust(map[AgentID][]TrustedKey{draftAssistant: {planner}, draftPlanner: {assistant}})
	require.NoError(t, err)
	for i, s := range []Signed{h.Chain[0], h.Offer} {
		_, err := OpenOffer(s, swapped, Limits{})
		require.Error(t, err, i)
		assert.ErrorIs(t, err, ErrSignature)
		assert.Equal(t, reason.BadSignature, ReasonOf(err))
	}
}

func draftAgent(t *testing.T, id AgentID, at int64, pol ChainPolicy) *Agent {
	t.Helper()
	a, err := NewAgent(Config{
		ID: id, Trust: draftTrust(t), Signer: testSigner(t, JWS), Chain: pol,
		TrustLacksSigner: true, // the draft's keys are public only: it receives
		Now:              func() time.Time { return time.Unix(at, 0) },
	})
	require.NoError(t, err)
	return a
}

// The coder accepts the draft's Handoff at 1793000003 with a full chain.
func TestDraft00_ReceiveAccepted(t *testing.T) {
	a := draftAgent(t, draftCoder, draftNow, ChainPolicy{RequireFull: true, TrustedOrigins: []AgentID{draftAssistant}})
	in, err := a.Receive(context.Background(), readDraft(t, "handoff.json"), Host{Dialog: "ctx-7c1e"})
	require.NoError(t, err)
	require.True(t, in.Accepted(), "%s: %s", in.Reason(), in.Detail())
	assert.Equal(t, ChainFull, in.Chain())
	require.Len(t, in.Links(), 1)
	assert.True(t, in.Links()[0].Verified)
	assert.Equal(t, "kJIcudVNmFFwbYKTXNO3mqC3e9dQSWVXDNbamGeoP18", in.Digest().B64())
	assert.Equal(t, ref.NotChecked, in.Refs()[0].Outcome, "HC-11: not checked unless policy asks")
}

func TestDraft00_ReceiveRejected(t *testing.T) {
	raw := readDraft(t, "handoff.json")
	h := draftHandoff(t)
	encode := func(h *Handoff) []byte {
		b, err := h.Encode(JSON)
		require.NoError(t, err)
		return b
	}
	cases := []struct {
		name   string
		self   AgentID
		at     int64
		pol    ChainPolicy
		data   []byte
		reason reason.Code
	}{
		{"another audience", draftPlanner, draftNow, ChainPolicy{}, raw, reason.WrongAudience},
		{"later time", draftCoder, 1793000120, ChainPolicy{}, raw, reason.Stale},
		{"chain reordered", draftCoder, draftNow, ChainPolicy{},
			encode(&Handoff{Offer: h.Offer, Chain: []Signed{h.Offer, h.Chain[0]}}), reason.BrokenChain},
		{"chain element removed, full chain required", draftCoder, draftNow, ChainPolicy{RequireFull: true},
			encode(&Handoff{Offer: h.Offer}), reason.Policy},
		{"chain element replaced by the offer", draftCoder, draftNow, ChainPolicy{},
			encode(&Handoff{Offer: h.Offer, Chain: []Signed{h.Offer}}), reason.BrokenChain},
		{"wrong dialog", draftCoder, draftNow, ChainPolicy{}, raw, reason.Policy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := draftAgent(t, c.self, c.at, c.pol)
			host := Host{Dialog: "ctx-7c1e"}
			if c.name == "wrong dialog" {
				host.Dialog = "ctx-other"
			}
			in, err := a.Receive(context.Background(), c.data, host)
			require.NoError(t, err)
			assert.False(t, in.Accepted())
			assert.Equal(t, c.reason, in.Reason(), in.Detail())
		})
	}
	// Without a policy, a removed chain is simply absent (section 2.1).
	a := draftAgent(t, draftCoder, draftNow, ChainPolicy{})
	in, err := a.Receive(context.Background(), encode(&Handoff{Offer: h.Offer}), Host{})
	require.NoError(t, err)
	assert.True(t, in.Accepted())
	assert.Equal(t, ChainAbsent, in.Chain())
}
