package agentcard_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
	"github.com/agentproto/handoff/keyset"
)

// FuzzVerify runs Verify and Sign on any octets, seeded with every
// vector's card: nothing panics; an error comes with no result and a
// result with a verified signature; what Sign makes is in JCS form and
// verifies with the signing key.
func FuzzVerify(f *testing.F) {
	vs := loadVectors(f)
	for _, v := range vs {
		card, err := base64.RawURLEncoding.DecodeString(v.v.CardB64)
		require.NoError(f, err)
		f.Add(card, v.v.Options.AllowDroppedEmpty)
	}
	trust, err := keyset.ParseTrust(vs[0].v.Trust)
	require.NoError(f, err)
	agent := handoff.AgentID(vs[0].v.Agent)
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))
	mine, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{agent: {{Public: key.Public(), Alg: handoff.EdDSA}}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, card []byte, dropped bool) {
		v, err := agentcard.Verify(card, trust, agent, agentcard.VerifyOptions{AllowDroppedEmpty: dropped})
		if err != nil {
			require.Nil(t, v)
		} else {
			require.NotNil(t, v)
			ok := false
			for _, s := range v.Signatures() {
				ok = ok || s.Err == nil
			}
			require.True(t, ok, "a result with no verified signature")
			canon, err := jcs.Transform(v.Payload())
			require.NoError(t, err)
			require.Equal(t, canon, v.Payload(), "the payload is in JCS form")
		}
		signed, err := agentcard.Sign(card, key, agentcard.SignOptions{})
		if err != nil {
			require.Nil(t, signed)
			return
		}
		canon, err := jcs.Transform(signed)
		require.NoError(t, err)
		require.Equal(t, canon, signed)
		got, err := agentcard.Verify(signed, mine, agent, agentcard.VerifyOptions{})
		require.NoError(t, err)
		last := got.Signatures()[len(got.Signatures())-1]
		require.NoError(t, last.Err, "the signature Sign appended verifies")
	})
}
