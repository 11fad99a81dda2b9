package handoff

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The draft has no CBOR/COSE vector. testdata/draft-00/cose/ holds the
// counterpart of its two-hop example made by this library: the same two
// offers, member for member, as COSE_Sign1 elements in a CBOR Handoff. Only
// the keys (fixed scalars, below) and prev (a digest over other octets)
// differ. Regenerate with HANDOFF_WRITE_DRAFT_COSE=1.

// draftCOSESigner derives a fixed P-256 key from a label, so that the
// committed trust file stays valid across regenerations.
func draftCOSESigner(t *testing.T, label string) *Signer {
	t.Helper()
	d := sha256.Sum256([]byte("handoff draft-00 cose counterpart " + label))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	require.NoError(t, err)
	s, err := NewSigner(k, COSE, nil)
	require.NoError(t, err)
	return s
}

// draftCOSEOffers re-signs the draft's two offers in COSE form.
func draftCOSEOffers(t *testing.T) (chain0, offer Signed, trust *Trust) {
	t.Helper()
	h := draftHandoff(t)
	jtrust := draftTrust(t)
	c0, err := OpenOffer(h.Chain[0], jtrust, Limits{})
	require.NoError(t, err)
	o, err := OpenOffer(h.Offer, jtrust, Limits{})
	require.NoError(t, err)

	assistant, planner := draftCOSESigner(t, "assistant"), draftCOSESigner(t, "planner")
	chain0, err = assistant.SignOffer(c0)
	require.NoError(t, err)
	d := chain0.Digest()
	o.Prev = &d
	offer, err = planner.SignOffer(o)
	require.NoError(t, err)
	trust, err = NewTrust(map[AgentID][]TrustedKey{draftAssistant: {assistant.Key()}, draftPlanner: {planner.Key()}})
	require.NoError(t, err)
	return chain0, offer, trust
}

func TestDraft00_COSECounterpart_RoundTrip(t *testing.T) {
	chain0, offer, trust := draftCOSEOffers(t)
	h := &Handoff{Offer: offer, Chain: []Signed{chain0}}
	b, err := h.Encode(CBOR)
	require.NoError(t, err)
	back, enc, err := ParseHandoff(b, Limits{})
	require.NoError(t, err)
	assert.Equal(t, CBOR, enc)
	assert.Equal(t, h, back, "element octets survive exactly")

	// Member for member the draft's offers, but prev.
	jh := draftHandoff(t)
	for i, pair := range [][2]Signed{{jh.Chain[0], chain0}, {jh.Offer, offer}} {
		want, err := OpenOffer(pair[0], draftTrust(t), Limits{})
		require.NoError(t, err)
		got, err := OpenOffer(pair[1], trust, Limits{})
		require.NoError(t, err)
		if i == 1 {
			assert.True(t, got.Prev.Equal(chain0.Digest()))
			want.Prev, got.Prev = nil, nil
		}
		assert.Equal(t, want, got)
	}

	// And the coder accepts it as it accepts the JWS example.
	a, err := NewAgent(Config{ID: draftCoder, Trust: trust, Signer: testSigner(t, COSE), TrustLacksSigner: true,
		Now: func() time.Time { return time.Unix(draftNow, 0) }, Chain: ChainPolicy{TrustedOrigins: []AgentID{draftAssistant}}})
	require.NoError(t, err)
	in, err := a.Receive(context.Background(), b, Host{Dialog: "ctx-7c1e"})
	require.NoError(t, err)
	require.True(t, in.Accepted(), in.Detail())
	assert.Equal(t, ChainFull, in.Chain())
}

func TestDraft00_COSECounterpart_CommittedFiles(t *testing.T) {
	dir := filepath.Join("testdata", "draft-00", "cose")
	if os.Getenv("HANDOFF_WRITE_DRAFT_COSE") == "1" {
		chain0, offer, trust := draftCOSEOffers(t)
		b, err := (&Handoff{Offer: offer, Chain: []Signed{chain0}}).Encode(CBOR)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "handoff.cbor"), b, 0o644))
		doc := "{\n"
		for i, id := range []AgentID{draftAssistant, draftPlanner} {
			jwk, err := publicJWKDoc(trust.Keys(id)[0])
			require.NoError(t, err)
			sep := ","
			if i == 1 {
				sep = ""
			}
			doc += `  "` + string(id) + `": {"keys": [` + string(jwk) + "]}" + sep + "\n"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "trust.json"), []byte(doc+"}\n"), 0o644))
	}
	b, err := os.ReadFile(filepath.Join(dir, "handoff.cbor"))
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(dir, "trust.json"))
	require.NoError(t, err)
	trust, err := parseTrustDoc(doc)
	require.NoError(t, err)
	a, err := NewAgent(Config{ID: draftCoder, Trust: trust, Signer: testSigner(t, COSE), TrustLacksSigner: true,
		Now: func() time.Time { return time.Unix(draftNow, 0) }})
	require.NoError(t, err)
	in, err := a.Receive(context.Background(), b, Host{Dialog: "ctx-7c1e"})
	require.NoError(t, err)
	require.True(t, in.Accepted(), in.Detail())
	assert.Equal(t, ChainFull, in.Chain())
	require.Len(t, in.Links(), 1)
	assert.Equal(t, COSE, in.Links()[0].Signed.Format)
	assert.Equal(t, HopID("q3Zl0v8bVfQmJm2c4bq1Ww"), in.Offer().Hop)
	assert.Equal(t, "SKLjsfET5xtZoO5hzIiZFigz2JoYZLmW8Cg8GuYh4o4", in.Offer().Grant.B64(), "the draft's grant")
}
