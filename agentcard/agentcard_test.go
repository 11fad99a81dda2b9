package agentcard_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
	"github.com/agentproto/handoff/internal/ecsig"
)

const coder handoff.AgentID = "spiffe://b.example/agent/coder"

const testCard = `{
  "name": "Go coder",
  "description": "Fixes bugs.",
  "version": "1.0.0",
  "supportedInterfaces": [{"url": "https://b.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
  "capabilities": {"streaming": true, "extensions": [{"uri": "https://quantumlearningmachines.com/a2a/ext/agent-handoff/v1", "required": true}]},
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "fix", "name": "Fix", "description": "Fixes a bug.", "tags": ["go"]}]
}`

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

// trustFor binds each key, with the alg it implies, to coder.
func trustFor(t testing.TB, keys ...crypto.Signer) *handoff.Trust {
	t.Helper()
	var tks []handoff.TrustedKey
	for _, k := range keys {
		s, err := handoff.NewSigner(k, handoff.JWS, nil)
		require.NoError(t, err)
		tks = append(tks, s.Key())
	}
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{coder: tks})
	require.NoError(t, err)
	return trust
}

func mustSign(t testing.TB, card string, key crypto.Signer, opts agentcard.SignOptions) []byte {
	t.Helper()
	b, err := agentcard.Sign([]byte(card), key, opts)
	require.NoError(t, err)
	return b
}

// element returns signature i of a signed card and its decoded protected
// header.
func element(t testing.TB, card []byte, i int) (map[string]any, map[string]any) {
	t.Helper()
	var c struct{ Signatures []map[string]any }
	require.NoError(t, json.Unmarshal(card, &c))
	el := c.Signatures[i]
	hb, err := base64.RawURLEncoding.DecodeString(el["protected"].(string))
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.Unmarshal(hb, &h))
	return el, h
}

func TestSignWritesJCSThatVerifies(t *testing.T) {
	for name, key := range map[string]crypto.Signer{
		"ES256": newKey(t),
		"ES384": func() crypto.Signer { k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader); return k }(),
		"EdDSA": func() crypto.Signer { _, k, _ := ed25519.GenerateKey(rand.Reader); return k }(),
	} {
		t.Run(name, func(t *testing.T) {
			signed := mustSign(t, testCard, key, agentcard.SignOptions{})
			canon, err := jcs.Transform(signed)
			require.NoError(t, err)
			assert.Equal(t, string(canon), string(signed), "Sign writes the card in its JCS form")
			_, h := element(t, signed, 0)
			s, err := handoff.NewSigner(key, handoff.JWS, nil)
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"alg": name, "kid": s.Key().KID, "typ": "JOSE"}, h)
			v, err := agentcard.Verify(signed, trustFor(t, key), coder, agentcard.VerifyOptions{})
			require.NoError(t, err)
			require.Len(t, v.Signatures(), 1)
			assert.Equal(t, s.Key().KID, v.Signatures()[0].Key.KID)
			// the payload is the card without signatures, in JCS form
			want, err := jcs.Transform([]byte(testCard))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(v.Payload()))
		})
	}
}

func TestSignOptions(t *testing.T) {
	key := newKey(t)
	signed := mustSign(t, testCard, key, agentcard.SignOptions{KID: "coder-1", JKU: "https://b.example/jwks.json"})
	_, h := element(t, signed, 0)
	assert.Equal(t, "coder-1", h["kid"])
	assert.Equal(t, "https://b.example/jwks.json", h["jku"])
	_, err := agentcard.Verify(signed, trustFor(t, key), coder, agentcard.VerifyOptions{})
	require.NoError(t, err, "a kid that names no trusted key only orders the keys")

	// ECDSA signatures are low-S whatever the key returns.
	for range 20 {
		el, _ := element(t, mustSign(t, testCard, key, agentcard.SignOptions{}), 0)
		sig, err := base64.RawURLEncoding.DecodeString(el["signature"].(string))
		require.NoError(t, err)
		require.True(t, ecsig.IsLowS(handoff.ES256, sig))
	}
}

// Sign appends: the card's earlier signatures stay, in order, and verify.
func TestSignAppends(t *testing.T) {
	a, b := newKey(t), newKey(t)
	once := mustSign(t, testCard, a, agentcard.SignOptions{})
	twice := mustSign(t, string(once), b, agentcard.SignOptions{})
	first, _ := element(t, once, 0)
	kept, _ := element(t, twice, 0)
	assert.Equal(t, first, kept)
	v, err := agentcard.Verify(twice, trustFor(t, a, b), coder, agentcard.VerifyOptions{})
	require.NoError(t, err)
	require.Len(t, v.Signatures(), 2)
	for _, s := range v.Signatures() {
		assert.NoError(t, s.Err)
	}
}

func TestSignRefuses(t *testing.T) {
	key := newKey(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	big := `{"name":"` + strings.Repeat("x", agentcard.DefaultMaxSize) + `"}`
	for _, tc := range []struct {
		name  string
		card  string
		key   crypto.Signer
		opts  agentcard.SignOptions
		class error
	}{
		{"nil key", testCard, nil, agentcard.SignOptions{}, handoff.ErrArgument},
		{"RSA key", testCard, rsaKey, agentcard.SignOptions{}, handoff.ErrArgument},
		{"not an object", `[1]`, key, agentcard.SignOptions{}, handoff.ErrMalformed},
		{"null", `null`, key, agentcard.SignOptions{}, handoff.ErrMalformed},
		{"duplicate name", `{"name":"a","name":"b"}`, key, agentcard.SignOptions{}, handoff.ErrMalformed},
		{"signatures not an array", `{"name":"a","signatures":{}}`, key, agentcard.SignOptions{}, handoff.ErrMalformed},
		{"no JCS form", `{"n":1e400}`, key, agentcard.SignOptions{}, handoff.ErrMalformed},
		{"too large", big, key, agentcard.SignOptions{}, handoff.ErrTooLarge},
		{"too large once signed", big[:agentcard.DefaultMaxSize-20] + `"}`, key, agentcard.SignOptions{}, handoff.ErrTooLarge},
		{"empty members an earlier signature covers", string(mustSign(t, `{"name":"a","iconUrl":""}`, key, agentcard.SignOptions{})),
			key, agentcard.SignOptions{DropEmpty: true}, handoff.ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := agentcard.Sign([]byte(tc.card), tc.key, tc.opts)
			assert.ErrorIs(t, err, tc.class)
			assert.Nil(t, out)
			assert.True(t, strings.HasPrefix(err.Error(), "agentcard: "), err.Error())
			assert.NotContains(t, err.Error(), "handoff: ", "the root's prefix is not repeated")
		})
	}
}

func TestSignDropEmpty(t *testing.T) {
	key := newKey(t)
	withEmpty := `{"name":"a","iconUrl":"","skills":[{"id":"s","tags":[],"examples":[""]}],"capabilities":{},"x":[null,{}],"n":0,"f":false}`
	signed := mustSign(t, withEmpty, key, agentcard.SignOptions{DropEmpty: true})
	var m map[string]any
	require.NoError(t, json.Unmarshal(signed, &m))
	delete(m, "signatures")
	assert.Equal(t, map[string]any{"name": "a", "skills": []any{map[string]any{"id": "s"}}, "n": 0.0, "f": false}, m,
		"null, \"\", [] and {} go, innermost first; 0 and false stay")
	_, err := agentcard.Verify(signed, trustFor(t, key), coder, agentcard.VerifyOptions{})
	require.NoError(t, err)

	// A card with nothing but empty members signs as {}.
	signed = mustSign(t, `{"a":"","b":[]}`, key, agentcard.SignOptions{DropEmpty: true})
	v, err := agentcard.Verify(signed, trustFor(t, key), coder, agentcard.VerifyOptions{})
	require.NoError(t, err)
	assert.Equal(t, "{}", string(v.Payload()))

	// A signed card without empty members is signed again as it is.
	once := mustSign(t, testCard, key, agentcard.SignOptions{})
	_, err = agentcard.Sign(once, key, agentcard.SignOptions{DropEmpty: true})
	require.NoError(t, err)
}

// AllowDroppedEmpty loosens the check, as its documentation says: an empty
// member added to a signed card goes unnoticed under it, and not by
// default.
func TestAllowDroppedEmptyLoosens(t *testing.T) {
	key := newKey(t)
	signed := mustSign(t, testCard, key, agentcard.SignOptions{})
	added := bytes.Replace(signed, []byte(`{"capabilities"`), []byte(`{"iconUrl":"","capabilities"`), 1)
	require.NotEqual(t, signed, added)
	_, err := agentcard.Verify(added, trustFor(t, key), coder, agentcard.VerifyOptions{})
	require.ErrorIs(t, err, handoff.ErrSignature)
	v, err := agentcard.Verify(added, trustFor(t, key), coder, agentcard.VerifyOptions{AllowDroppedEmpty: true})
	require.NoError(t, err)
	assert.True(t, v.Signatures()[0].DroppedEmpty)
	// A signature that verifies over the card as served does not use it.
	v, err = agentcard.Verify(signed, trustFor(t, key), coder, agentcard.VerifyOptions{AllowDroppedEmpty: true})
	require.NoError(t, err)
	assert.False(t, v.Signatures()[0].DroppedEmpty)
}

// Every one-octet change to a signed card makes it fail to verify, for
// two different changes at each position (principle 12).
func TestTamperEveryOctet(t *testing.T) {
	key := newKey(t)
	trust := trustFor(t, key)
	signed := mustSign(t, testCard, key, agentcard.SignOptions{})
	for i := range signed {
		for _, c := range []byte{signed[i] ^ 0x01, 'x'} {
			if c == signed[i] {
				continue
			}
			tampered := bytes.Clone(signed)
			tampered[i] = c
			v, err := agentcard.Verify(tampered, trust, coder, agentcard.VerifyOptions{})
			require.Error(t, err, "octet %d changed to %q verifies: %s", i, c, tampered)
			require.Nil(t, v)
		}
	}
}

func TestVerifyArguments(t *testing.T) {
	key := newKey(t)
	signed := mustSign(t, testCard, key, agentcard.SignOptions{})
	_, err := agentcard.Verify(signed, nil, coder, agentcard.VerifyOptions{})
	assert.ErrorIs(t, err, handoff.ErrArgument)
	_, err = agentcard.Verify(signed, trustFor(t, key), "", agentcard.VerifyOptions{})
	assert.ErrorIs(t, err, handoff.ErrArgument)
}

// An agent whose keys the Trust withholds is untrusted, with the reason.
func TestVerifyWithheld(t *testing.T) {
	key := newKey(t)
	signed := mustSign(t, testCard, key, agentcard.SignOptions{})
	trust := trustFor(t, key).Withhold(map[handoff.AgentID]string{coder: "keys stale since noon"})
	_, err := agentcard.Verify(signed, trust, coder, agentcard.VerifyOptions{})
	require.ErrorIs(t, err, handoff.ErrUntrustedKey)
	assert.Contains(t, err.Error(), "keys stale since noon")
}

func TestUnverifiedError(t *testing.T) {
	key, other := newKey(t), newKey(t)
	card := testCard
	for range 6 {
		card = string(mustSign(t, card, other, agentcard.SignOptions{}))
	}
	_, err := agentcard.Verify([]byte(card), trustFor(t, key), coder, agentcard.VerifyOptions{})
	var ue *agentcard.UnverifiedError
	require.ErrorAs(t, err, &ue)
	assert.Len(t, ue.Signatures, 6)
	assert.ErrorIs(t, err, handoff.ErrUntrustedKey)
	assert.NotErrorIs(t, err, handoff.ErrSignature)
	assert.Contains(t, err.Error(), "signature 3: ")
	assert.NotContains(t, err.Error(), "signature 4: ")
	assert.Contains(t, err.Error(), "and 2 more")
	assert.Equal(t, 1, strings.Count(err.Error(), "agentcard: "), err.Error())
}

// What Verified returns is a copy: the caller cannot change the result.
func TestVerifiedCopies(t *testing.T) {
	key := newKey(t)
	v, err := agentcard.Verify(mustSign(t, testCard, key, agentcard.SignOptions{}), trustFor(t, key), coder, agentcard.VerifyOptions{})
	require.NoError(t, err)
	p := v.Payload()
	p[0] = 'X'
	s := v.Signatures()
	s[0].Err = errors.New("changed")
	assert.Equal(t, byte('{'), v.Payload()[0])
	assert.NoError(t, v.Signatures()[0].Err)
}

// A kid names a key by its KID in the trust configuration as well as by
// its thumbprint; the key it names is tried first, and the others still
// are.
func TestKidOrdersKeys(t *testing.T) {
	a, b := newKey(t), newKey(t)
	sa, err := handoff.NewSigner(a, handoff.JWS, nil)
	require.NoError(t, err)
	sb, err := handoff.NewSigner(b, handoff.JWS, nil)
	require.NoError(t, err)
	ka, kb := sa.Key(), sb.Key()
	ka.KID = "key-a"
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{coder: {kb, ka}})
	require.NoError(t, err)
	for _, kid := range []string{"key-a", sa.Key().KID, "no-such-key", sb.Key().KID} {
		signed := mustSign(t, testCard, a, agentcard.SignOptions{KID: kid})
		v, err := agentcard.Verify(signed, trust, coder, agentcard.VerifyOptions{})
		require.NoError(t, err, kid)
		assert.Equal(t, "key-a", v.Signatures()[0].Key.KID, kid)
	}
	// Another key's signature under the kid of a is forged (bad-signature);
	// under its own kid it is another signer's (untrusted-key).
	mallory := newKey(t)
	_, err = agentcard.Verify(mustSign(t, testCard, mallory, agentcard.SignOptions{KID: "key-a"}), trust, coder, agentcard.VerifyOptions{})
	assert.ErrorIs(t, err, handoff.ErrSignature)
	_, err = agentcard.Verify(mustSign(t, testCard, mallory, agentcard.SignOptions{}), trust, coder, agentcard.VerifyOptions{})
	assert.ErrorIs(t, err, handoff.ErrUntrustedKey)
}

func ExampleVerify_unverified() {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	signed, err := agentcard.Sign([]byte(`{"name":"coder"}`), other, agentcard.SignOptions{KID: "other-1"})
	if err != nil {
		panic(err)
	}
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{coder: {{Public: key.Public(), Alg: handoff.EdDSA}}})
	if err != nil {
		panic(err)
	}
	_, err = agentcard.Verify(signed, trust, coder, agentcard.VerifyOptions{})
	var ue *agentcard.UnverifiedError
	if errors.As(err, &ue) {
		for _, s := range ue.Signatures {
			fmt.Printf("signature %d (kid %s): untrusted key: %v\n", s.Index, s.KID, errors.Is(s.Err, handoff.ErrUntrustedKey))
		}
	}
	// Output:
	// signature 0 (kid other-1): untrusted key: true
}

// Each trusted key is tried at most once for a kid that names it and once
// for a kid that names no key of the agent: a signature under another
// party's key before the agent's leaves the agent's to verify, a second
// signature naming a key already tried is reported unchecked, and past
// the point where every key was tried both ways nothing is checked.
func TestEachKeyTriedOncePerWay(t *testing.T) {
	key, other := newKey(t), newKey(t)
	trust := trustFor(t, key)

	// A third party's signature first (its kid names no key of the agent):
	// the agent's own still verifies.
	card := mustSign(t, string(mustSign(t, testCard, other, agentcard.SignOptions{})), key, agentcard.SignOptions{})
	v, err := agentcard.Verify(card, trust, coder, agentcard.VerifyOptions{})
	require.NoError(t, err)
	require.Len(t, v.Signatures(), 2)
	assert.ErrorIs(t, v.Signatures()[0].Err, handoff.ErrUntrustedKey)
	assert.NoError(t, v.Signatures()[1].Err)

	// The agent's key signs twice: the second is not checked again.
	twice := mustSign(t, string(mustSign(t, testCard, key, agentcard.SignOptions{})), key, agentcard.SignOptions{})
	v, err = agentcard.Verify(twice, trust, coder, agentcard.VerifyOptions{})
	require.NoError(t, err)
	assert.NoError(t, v.Signatures()[0].Err)
	assert.ErrorIs(t, v.Signatures()[1].Err, handoff.ErrSignature)
	assert.Contains(t, v.Signatures()[1].Err.Error(), "was tried")

	// Many foreign signatures: after the agent's key was tried both ways,
	// the rest are reported unchecked.
	many := testCard
	for range 5 {
		many = string(mustSign(t, many, other, agentcard.SignOptions{}))
	}
	many = string(mustSign(t, many, key, agentcard.SignOptions{}))
	for range 5 {
		many = string(mustSign(t, many, other, agentcard.SignOptions{}))
	}
	v, err = agentcard.Verify([]byte(many), trust, coder, agentcard.VerifyOptions{})
	require.NoError(t, err, "the agent's signature, named by its kid, is checked after five foreign ones")
	sigs := v.Signatures()
	require.Len(t, sigs, 11)
	assert.NoError(t, sigs[5].Err)
	for _, s := range sigs[6:] {
		assert.Contains(t, s.Err.Error(), "not checked", "signature %d", s.Index)
	}
}
