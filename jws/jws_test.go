package jws_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
)

var b64 = base64.RawURLEncoding

const testPayload = `{"v":1,"type":"offer","iss":"spiffe://a.example/agent/planner"}`

func pin(pub crypto.PublicKey, alg string) jws.Lookup {
	return func(jws.Header, []byte) ([]jws.Key, error) {
		return []jws.Key{{Public: pub, Alg: alg}}, nil
	}
}

func newKey(t *testing.T, alg string) crypto.Signer {
	t.Helper()
	var k crypto.Signer
	var err error
	switch alg {
	case jws.ES256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jws.ES384:
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case jws.EdDSA:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	}
	require.NoError(t, err)
	return k
}

func segments(t *testing.T, token []byte) [3]string {
	t.Helper()
	parts := strings.Split(string(token), ".")
	require.Len(t, parts, 3)
	return [3]string{parts[0], parts[1], parts[2]}
}

func TestSignOpen_RoundTrip(t *testing.T) {
	for _, alg := range []string{jws.ES256, jws.ES384, jws.EdDSA} {
		t.Run(alg, func(t *testing.T) {
			key := newKey(t, alg)
			kid, err := jws.Thumbprint(key.Public())
			require.NoError(t, err)
			token, err := jws.Sign([]byte(testPayload), key, alg, kid, rand.Reader)
			require.NoError(t, err)

			// HC-14: the protected header is exactly alg, kid, typ.
			seg := segments(t, token)
			hdr, err := b64.DecodeString(seg[0])
			require.NoError(t, err)
			assert.Equal(t, `{"alg":"`+alg+`","kid":"`+kid+`","typ":"agent-handoff+jwt"}`, string(hdr))
			sig, err := b64.DecodeString(seg[2])
			require.NoError(t, err)
			assert.Len(t, sig, map[string]int{jws.ES256: 64, jws.ES384: 96, jws.EdDSA: 64}[alg])

			var gotHeader jws.Header
			var gotPayload []byte
			payload, h, err := jws.Open(token, func(h jws.Header, p []byte) ([]jws.Key, error) {
				gotHeader, gotPayload = h, p
				return []jws.Key{{Public: key.Public(), Alg: alg}}, nil
			}, 0)
			require.NoError(t, err)
			assert.Equal(t, testPayload, string(payload))
			assert.Equal(t, jws.Header{Alg: alg, KID: kid}, h)
			assert.Equal(t, h, gotHeader)
			assert.Equal(t, testPayload, string(gotPayload))
		})
	}
}

// The lookup gets its own copy of the unverified payload: what it does to it
// cannot change what Open returns as verified.
func TestOpen_LookupGetsCopy(t *testing.T) {
	key := newKey(t, jws.ES256)
	token, err := jws.Sign([]byte(testPayload), key, jws.ES256, "k", nil)
	require.NoError(t, err)
	payload, _, err := jws.Open(token, func(_ jws.Header, p []byte) ([]jws.Key, error) {
		for i := range p {
			p[i] = 'x'
		}
		return []jws.Key{{Public: key.Public(), Alg: jws.ES256}}, nil
	}, 0)
	require.NoError(t, err)
	assert.Equal(t, testPayload, string(payload))
}

func TestSign_LowSAlways(t *testing.T) {
	for _, alg := range []string{jws.ES256, jws.ES384} {
		key := newKey(t, alg)
		for range 200 {
			token, err := jws.Sign([]byte(testPayload), key, alg, "k", rand.Reader)
			require.NoError(t, err)
			sig, err := b64.DecodeString(segments(t, token)[2])
			require.NoError(t, err)
			require.True(t, ecsig.IsLowS(alg, sig), "%s signature is high-S", alg)
		}
	}
}

func TestSign_Refuses(t *testing.T) {
	p256 := newKey(t, jws.ES256)
	ed := newKey(t, jws.EdDSA)
	for name, tc := range map[string]struct {
		payload []byte
		key     crypto.Signer
		alg     string
		kid     string
		want    error
	}{
		"HS256":            {[]byte("x"), p256, "HS256", "k", jws.ErrAlg},
		"none":             {[]byte("x"), p256, "none", "k", jws.ErrAlg},
		"ES512":            {[]byte("x"), p256, "ES512", "k", jws.ErrAlg},
		"P-256 as ES384":   {[]byte("x"), p256, jws.ES384, "k", jws.ErrAlg},
		"Ed25519 as ES256": {[]byte("x"), ed, jws.ES256, "k", jws.ErrAlg},
		"empty kid":        {[]byte("x"), p256, jws.ES256, "", nil},
		"empty payload":    {nil, p256, jws.ES256, "k", nil},
		"nil key":          {[]byte("x"), nil, jws.ES256, "k", nil},
	} {
		out, err := jws.Sign(tc.payload, tc.key, tc.alg, tc.kid, nil)
		assert.Error(t, err, name)
		assert.Nil(t, out, name)
		if tc.want != nil {
			assert.ErrorIs(t, err, tc.want, name)
		}
	}
}

// Other signers produce high-S signatures, and Wycheproof marks them valid:
// the twin (r, n-s) of a valid signature verifies too.
func TestOpen_HighSTwinVerifies(t *testing.T) {
	for _, alg := range []string{jws.ES256, jws.ES384} {
		key := newKey(t, alg)
		token, err := jws.Sign([]byte(testPayload), key, alg, "k", rand.Reader)
		require.NoError(t, err)
		seg := segments(t, token)
		sig, err := b64.DecodeString(seg[2])
		require.NoError(t, err)
		twin, err := ecsig.Twin(alg, sig)
		require.NoError(t, err)
		require.False(t, ecsig.IsLowS(alg, twin))
		twinToken := []byte(seg[0] + "." + seg[1] + "." + b64.EncodeToString(twin))
		require.NotEqual(t, token, twinToken)

		payload, h, err := jws.Open(twinToken, pin(key.Public(), alg), 0)
		require.NoError(t, err, alg)
		assert.Equal(t, testPayload, string(payload))
		assert.Equal(t, alg, h.Alg)
	}
}

// craft builds a token with any protected header, validly signed with key
// under ES256, so that only the header rule under test can fail.
func craft(t *testing.T, key crypto.Signer, header string, payload string) []byte {
	t.Helper()
	input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(payload))
	sig, err := ecsig.Sign(nil, key, jws.ES256, []byte(input))
	require.NoError(t, err)
	return []byte(input + "." + b64.EncodeToString(sig))
}

// craftUnencoded is craft for RFC 7797 "b64":false: the signature covers the
// payload octets themselves, not their base64url form, which is how go-jose
// verifies such a header even in a compact token.
func craftUnencoded(t *testing.T, key crypto.Signer, header string, payload string) []byte {
	t.Helper()
	h := b64.EncodeToString([]byte(header))
	sig, err := ecsig.Sign(nil, key, jws.ES256, []byte(h+"."+payload))
	require.NoError(t, err)
	return []byte(h + "." + b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(sig))
}

func withSig(t *testing.T, token []byte, sig []byte) []byte {
	seg := segments(t, token)
	return []byte(seg[0] + "." + seg[1] + "." + b64.EncodeToString(sig))
}

// flipUnusedBit sets the lowest of the unused bits in the last character of
// a base64url segment: the decoded octets stay the same, the text changes.
func flipUnusedBit(seg string) (string, bool) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(seg)%4 == 0 {
		return "", false
	}
	v := strings.IndexByte(alphabet, seg[len(seg)-1])
	return seg[:len(seg)-1] + string(alphabet[v^1]), true
}

var lookupErr = errors.New("trust store unavailable")

// TestOpen_Hostile is the tamper table over one valid token (HC-14, HC-15,
// HC-21, HC-22, HC-60, and the malleability rules). Each row asserts the
// exact sentinel, a nil payload, a zero header, and whether the lookup was
// consulted: it never is for a message whose form or header is refused.
func TestOpen_Hostile(t *testing.T) {
	key := newKey(t, jws.ES256)
	pub := key.Public().(*ecdsa.PublicKey)
	kid, err := jws.Thumbprint(pub)
	require.NoError(t, err)
	good, err := jws.Sign([]byte(testPayload), key, jws.ES256, kid, nil)
	require.NoError(t, err)
	seg := segments(t, good)
	sig, err := b64.DecodeString(seg[2])
	require.NoError(t, err)

	hdr := func(members string) string {
		return `{"alg":"ES256","kid":"` + kid + `","typ":"agent-handoff+jwt"` + members + `}`
	}
	n := elliptic.P256().Params().N
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	der, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
	require.NoError(t, err)
	setR := func(v *big.Int) []byte { out := bytes.Clone(sig); v.FillBytes(out[:32]); return out }
	setS := func(v *big.Int) []byte { out := bytes.Clone(sig); v.FillBytes(out[32:]); return out }

	// alg confusion: HS256 keyed with the bytes of the trusted public key.
	pubBytes, err := pub.Bytes()
	require.NoError(t, err)
	hsInput := b64.EncodeToString([]byte(`{"alg":"HS256","kid":"`+kid+`","typ":"agent-handoff+jwt"}`)) + "." + seg[1]
	mac := hmac.New(sha256.New, pubBytes)
	mac.Write([]byte(hsInput))
	hs256 := []byte(hsInput + "." + b64.EncodeToString(mac.Sum(nil)))

	jwk, err := json.Marshal(jose.JSONWebKey{Key: pub})
	require.NoError(t, err)

	p384 := newKey(t, jws.ES384)
	other := newKey(t, jws.ES256)

	type row struct {
		name     string
		token    []byte
		lookup   jws.Lookup
		maxSize  int
		want     error
		consult  bool // the lookup is called
		noLookup bool // Open gets a nil lookup
		// goJoseAccepts marks tokens that go-jose on its own parses and
		// verifies: the checks that refuse them are this package's.
		goJoseAccepts bool
		// want is the error under the strict profile, and by default
		// unless defaultOK or defaultWant says otherwise. defaultOK marks
		// an input the draft and its RFCs allow: the default profile
		// opens it, only the strict profile refuses it.
		defaultOK   bool
		defaultWant error
	}
	rows := []row{
		// HC-15: alg.
		{name: "HC15 alg none, no signature", token: []byte(b64.EncodeToString([]byte(`{"alg":"none","kid":"`+kid+`","typ":"agent-handoff+jwt"}`)) + "." + seg[1] + "."), want: jws.ErrMalformed},
		{name: "HC15 alg none", token: craft(t, key, `{"alg":"none","kid":"`+kid+`","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrAlg},
		{name: "HC15 HS256 keyed with the public key", token: hs256, want: jws.ErrAlg},
		{name: "HC15 HS512", token: craft(t, key, `{"alg":"HS512","kid":"k","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrAlg},
		{name: "HC15 RS256", token: craft(t, key, `{"alg":"RS256","kid":"k","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrAlg},
		{name: "HC15 ES512", token: craft(t, key, `{"alg":"ES512","kid":"k","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrAlg},
		{name: "HC15 alg lower case", token: craft(t, key, `{"alg":"es256","kid":"k","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrAlg},
		{name: "HC15 alg missing", token: craft(t, key, `{"kid":"k","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrAlg},
		{name: "HC15 alg not a string", token: craft(t, key, `{"alg":1,"kid":"k","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		// HC-14: crit, including RFC 7797 unencoded payloads.
		{name: "HC14 crit", token: craft(t, key, hdr(`,"crit":["exp"],"exp":1`), testPayload), want: jws.ErrCrit},
		{name: "HC14 crit b64 false", token: craftUnencoded(t, key, hdr(`,"b64":false,"crit":["b64"]`), testPayload), goJoseAccepts: true, want: jws.ErrCrit},
		{name: "HC14 b64 without crit", token: craftUnencoded(t, key, hdr(`,"b64":false`), testPayload), goJoseAccepts: true, want: jws.ErrCrit},
		{name: "HC14 crit empty", token: craft(t, key, hdr(`,"crit":[]`), testPayload), want: jws.ErrCrit},
		// HC-21: keys in the message are never trusted.
		{name: "HC21 jwk", token: craft(t, key, hdr(`,"jwk":`+string(jwk)), testPayload), goJoseAccepts: true, want: jws.ErrEmbeddedKey, defaultOK: true},
		{name: "HC21 jku", token: craft(t, key, hdr(`,"jku":"https://attacker.example/jwks"`), testPayload), want: jws.ErrEmbeddedKey, defaultOK: true},
		{name: "HC21 x5c", token: craft(t, key, hdr(`,"x5c":["MIIB"]`), testPayload), want: jws.ErrEmbeddedKey, defaultOK: true},
		{name: "HC21 x5u", token: craft(t, key, hdr(`,"x5u":"https://attacker.example/cert"`), testPayload), goJoseAccepts: true, want: jws.ErrEmbeddedKey, defaultOK: true},
		{name: "HC21 x5t", token: craft(t, key, hdr(`,"x5t":"AAAA"`), testPayload), want: jws.ErrEmbeddedKey, defaultOK: true},
		{name: "HC21 x5t#S256", token: craft(t, key, hdr(`,"x5t#S256":"AAAA"`), testPayload), want: jws.ErrEmbeddedKey, defaultOK: true},
		// HC-14, HC-60: typ.
		{name: "HC14 HC60 typ absent", token: craft(t, key, `{"alg":"ES256","kid":"k"}`, testPayload), goJoseAccepts: true, want: jws.ErrType},
		{name: "HC14 HC60 typ JWT", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"JWT"}`, testPayload), goJoseAccepts: true, want: jws.ErrType},
		{name: "HC14 HC60 typ other case", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"Agent-Handoff+JWT"}`, testPayload), want: jws.ErrType, defaultOK: true},
		{name: "HC14 HC60 typ with parameter", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"agent-handoff+jwt; v=1"}`, testPayload), want: jws.ErrType},
		{name: "HC14 HC60 typ long form", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"application/agent-handoff+jwt"}`, testPayload), want: jws.ErrType, defaultOK: true},
		{name: "HC14 HC60 typ long form other case", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"APPLICATION/Agent-Handoff+Jwt"}`, testPayload), want: jws.ErrType, defaultOK: true},
		{name: "HC14 HC60 typ other type", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"text/agent-handoff+jwt"}`, testPayload), want: jws.ErrType},
		{name: "HC14 HC60 typ two slashes", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"application/application/agent-handoff+jwt"}`, testPayload), want: jws.ErrType},
		{name: "HC14 HC60 typ trailing space", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"agent-handoff+jwt "}`, testPayload), want: jws.ErrType},
		{name: "HC14 HC60 typ empty", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":""}`, testPayload), want: jws.ErrType},
		{name: "HC14 HC60 typ not a string", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":["agent-handoff+jwt"]}`, testPayload), want: jws.ErrMalformed},
		// HC-14: kid.
		{name: "HC14 kid absent", token: craft(t, key, `{"alg":"ES256","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 kid empty", token: craft(t, key, `{"alg":"ES256","kid":"","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed, defaultOK: true},
		{name: "HC14 kid not a string", token: craft(t, key, `{"alg":"ES256","kid":7,"typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 kid lone surrogate", token: craft(t, key, `{"alg":"ES256","kid":"k\udc00","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 kid lone high surrogate", token: craft(t, key, `{"alg":"ES256","kid":"k\ud800x","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 kid reversed pair", token: craft(t, key, `{"alg":"ES256","kid":"\udc00\ud800","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 member name lone surrogate", token: craft(t, key, hdr(`,"\ud800":1`), testPayload), want: jws.ErrMalformed},
		{name: "HC14 unknown value lone surrogate", token: craft(t, key, hdr(`,"x":["\uDFFF"]`), testPayload), want: jws.ErrMalformed},
		{name: "HC14 kid null", token: craft(t, key, `{"alg":"ES256","kid":null,"typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		// Strict header JSON.
		{name: "HC14 duplicate alg", token: craft(t, key, `{"alg":"none","alg":"ES256","kid":"k","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 duplicate typ", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"JWT","typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 duplicate by escape", token: craft(t, key, `{"alg":"ES256","kid":"k","typ":"agent-handoff+jwt","\u0074yp":"JWT"}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 duplicate nested", token: craft(t, key, hdr(`,"ext":{"a":1,"a":2}`), testPayload), want: jws.ErrMalformed},
		{name: "HC14 case variant ALG", token: craft(t, key, hdr(`,"ALG":"none"`), testPayload), goJoseAccepts: true, want: jws.ErrMalformed, defaultOK: true},
		{name: "HC14 case variant Typ", token: craft(t, key, `{"alg":"ES256","kid":"k","Typ":"agent-handoff+jwt"}`, testPayload), want: jws.ErrMalformed, defaultWant: jws.ErrType},
		{name: "HC14 case variant Crit", token: craft(t, key, hdr(`,"Crit":["exp"]`), testPayload), want: jws.ErrMalformed, defaultOK: true},
		{name: "HC14 case variant JWK", token: craft(t, key, hdr(`,"JWK":{}`), testPayload), want: jws.ErrMalformed, defaultOK: true},
		{name: "HC14 header array", token: craft(t, key, `[`+hdr("")+`]`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 header trailing data", token: craft(t, key, hdr("")+`{}`, testPayload), want: jws.ErrMalformed},
		{name: "HC14 header invalid UTF-8", token: craft(t, key, hdr(`,"x":"`+"\xff"+`"`), testPayload), want: jws.ErrMalformed},
		{name: "HC14 header not JSON", token: craft(t, key, `alg=ES256`, testPayload), want: jws.ErrMalformed},
		// Signature form: raw r||s only.
		{name: "HC13 DER signature", token: withSig(t, good, der), want: jws.ErrSignature, consult: true},
		{name: "HC13 r=0", token: withSig(t, good, setR(big.NewInt(0))), want: jws.ErrSignature, consult: true},
		{name: "HC13 s=0", token: withSig(t, good, setS(big.NewInt(0))), want: jws.ErrSignature, consult: true},
		{name: "HC13 r=n", token: withSig(t, good, setR(n)), want: jws.ErrSignature, consult: true},
		{name: "HC13 r=2^256-1", token: withSig(t, good, setR(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))), want: jws.ErrSignature, consult: true},
		{name: "HC13 s=n", token: withSig(t, good, setS(n)), want: jws.ErrSignature, consult: true},
		{name: "HC13 signature short", token: withSig(t, good, sig[:63]), want: jws.ErrSignature, consult: true},
		{name: "HC13 modified payload", token: []byte(seg[0] + "." + b64.EncodeToString([]byte(strings.Replace(testPayload, "planner", "plannes", 1))) + "." + seg[2]), want: jws.ErrSignature, consult: true},
		// Compact form.
		{name: "HC20 empty", token: []byte{}, want: jws.ErrMalformed},
		{name: "HC20 truncated", token: good[:len(good)/2], want: jws.ErrMalformed},
		{name: "HC20 truncated signature char", token: good[:len(good)-1], want: jws.ErrMalformed},
		{name: "HC20 no signature segment", token: []byte(seg[0] + "." + seg[1]), want: jws.ErrMalformed},
		{name: "HC20 empty signature segment", token: []byte(seg[0] + "." + seg[1] + "."), want: jws.ErrMalformed},
		{name: "HC20 empty payload segment", token: []byte(seg[0] + ".." + seg[2]), want: jws.ErrMalformed},
		{name: "HC20 three dots", token: append(bytes.Clone(good), '.'), want: jws.ErrMalformed},
		{name: "HC20 four segments", token: []byte(string(good) + "." + seg[2]), want: jws.ErrMalformed},
		{name: "HC20 leading space", token: append([]byte(" "), good...), want: jws.ErrMalformed},
		{name: "HC20 trailing newline", token: append(bytes.Clone(good), '\n'), goJoseAccepts: true, want: jws.ErrMalformed},
		{name: "HC20 CRLF inside signature", token: []byte(seg[0] + "." + seg[1] + "." + seg[2][:10] + "\r\n" + seg[2][10:]), goJoseAccepts: true, want: jws.ErrMalformed},
		{name: "HC20 space after dot", token: []byte(seg[0] + ". " + seg[1] + "." + seg[2]), want: jws.ErrMalformed},
		{name: "HC20 tab in header", token: []byte(seg[0][:5] + "\t" + seg[0][5:] + "." + seg[1] + "." + seg[2]), want: jws.ErrMalformed},
		{name: "HC20 padding", token: []byte(seg[0] + "." + seg[1] + "." + seg[2] + "=="), want: jws.ErrMalformed},
		{name: "HC20 standard base64 alphabet", token: []byte(seg[0] + "." + seg[1] + "." + strings.NewReplacer("-", "+", "_", "/").Replace(seg[2]) + "+/"), want: jws.ErrMalformed},
		// Size limit, checked first.
		{name: "HC61 oversize", token: good, maxSize: len(good) - 1, want: jws.ErrTooLarge},
		{name: "HC61 oversize garbage", token: bytes.Repeat([]byte{0xff}, 1<<20), want: jws.ErrTooLarge},
		// HC-22 and the lookup.
		{name: "HC22 key pinned to ES384", token: good, lookup: pin(p384.Public(), jws.ES384), want: jws.ErrAlg, consult: true},
		{name: "HC22 ES256 P-256 key pinned to ES384", token: good, lookup: pin(pub, jws.ES384), want: jws.ErrAlg, consult: true},
		{name: "HC22 P-384 key pinned to ES256", token: good, lookup: pin(p384.Public(), jws.ES256), want: jws.ErrAlg, consult: true},
		{name: "HC21 no keys", token: good, lookup: func(jws.Header, []byte) ([]jws.Key, error) { return nil, nil }, want: jws.ErrNoKey, consult: true},
		{name: "HC21 nil lookup", token: good, noLookup: true, want: jws.ErrNoKey},
		{name: "HC21 lookup error", token: good, lookup: func(jws.Header, []byte) ([]jws.Key, error) { return nil, lookupErr }, want: lookupErr, consult: true},
		{name: "HC21 other trusted key", token: good, lookup: pin(other.Public(), jws.ES256), want: jws.ErrSignature, consult: true},
	}
	// Non-canonical base64url: flip an unused low bit in the last character
	// of each segment that has unused bits, over two tokens whose segment
	// lengths differ, so that every segment is covered.
	flipped := map[string]bool{}
	for _, tok := range [][]byte{good, craft(t, key, hdr(`,"x":12`), testPayload+" ")} {
		sg := segments(t, tok)
		for i, name := range [3]string{"header", "payload", "signature"} {
			if f, ok := flipUnusedBit(sg[i]); ok {
				s := sg
				s[i] = f
				rows = append(rows, row{name: fmt.Sprintf("HC20 non-canonical base64 in %s of %d chars", name, len(f)), token: []byte(s[0] + "." + s[1] + "." + s[2]), want: jws.ErrMalformed, goJoseAccepts: true})
				flipped[name] = true
			}
		}
	}
	require.Len(t, flipped, 3, "every segment is tested with unused bits set")

	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			lookup := pin(pub, jws.ES256)
			if tc.lookup != nil || tc.noLookup {
				lookup = tc.lookup
			}
			consulted := false
			var counting jws.Lookup
			if lookup != nil {
				counting = func(h jws.Header, p []byte) ([]jws.Key, error) {
					consulted = true
					return lookup(h, p)
				}
			}
			maxSize := tc.maxSize
			if maxSize == 0 {
				maxSize = 4096
			}
			for _, strict := range []bool{true, false} {
				consulted = false
				payload, h, err := jws.OpenWith(tc.token, counting, jws.Options{MaxSize: maxSize, Strict: strict})
				if !strict && tc.defaultOK {
					require.NoError(t, err, "the default profile opens it")
					assert.Equal(t, testPayload, string(payload))
					assert.Equal(t, jws.ES256, h.Alg)
					continue
				}
				want := tc.want
				if !strict && tc.defaultWant != nil {
					want = tc.defaultWant
				}
				require.Error(t, err, "strict %v", strict)
				assert.ErrorIs(t, err, want, "strict %v: got %v", strict, err)
				assert.Nil(t, payload)
				assert.Equal(t, jws.Header{}, h)
				assert.Equal(t, tc.consult, consulted, "strict %v: lookup consulted", strict)
			}

			if tc.goJoseAccepts {
				obj, err := jose.ParseSignedCompact(string(tc.token), []jose.SignatureAlgorithm{jose.ES256})
				require.NoError(t, err, "go-jose parses it")
				_, err = obj.Verify(pub)
				assert.NoError(t, err, "go-jose verifies it")
			}
		})
	}

	// The untouched token opens: the rows fail for the reason they name.
	payload, _, err := jws.Open(good, pin(pub, jws.ES256), 4096)
	require.NoError(t, err)
	assert.Equal(t, testPayload, string(payload))
	payload, _, err = jws.Open(craft(t, key, hdr(`,"ext":{"a":[1,{"b":2}]}`), testPayload), pin(pub, jws.ES256), 4096)
	require.NoError(t, err, "unknown header members are allowed")
	assert.Equal(t, testPayload, string(payload))
}

// Among several candidate keys, those pinned to another alg are skipped and
// any one that verifies is enough.
func TestOpen_HC22_CandidateSelection(t *testing.T) {
	key := newKey(t, jws.ES256)
	token, err := jws.Sign([]byte(testPayload), key, jws.ES256, "k", nil)
	require.NoError(t, err)
	keys := []jws.Key{
		{Public: key.Public(), Alg: jws.ES384},                  // right key, wrong pin: never used
		{Public: newKey(t, jws.ES256).Public(), Alg: jws.ES256}, // wrong key
		{Public: key.Public(), Alg: jws.ES256},                  // the one
	}
	payload, _, err := jws.Open(token, func(jws.Header, []byte) ([]jws.Key, error) { return keys, nil }, 0)
	require.NoError(t, err)
	assert.Equal(t, testPayload, string(payload))

	_, _, err = jws.Open(token, func(jws.Header, []byte) ([]jws.Key, error) { return keys[:2], nil }, 0)
	assert.ErrorIs(t, err, jws.ErrSignature)

	// Keys that cannot verify are checked only once none verified; they
	// never verify, and say why when they are all there is.
	pub := key.Public().(*ecdsa.PublicKey)
	offCurve := jws.Key{Public: &ecdsa.PublicKey{Curve: pub.Curve, X: pub.X, Y: new(big.Int).Add(pub.Y, big.NewInt(1))}, Alg: jws.ES256}
	noPoint := jws.Key{Public: &ecdsa.PublicKey{Curve: pub.Curve}, Alg: jws.ES256}
	for name, tc := range map[string]struct {
		keys []jws.Key
		want error
	}{
		"invalid keys before the one": {[]jws.Key{offCurve, noPoint, keys[2]}, nil},
		"only invalid keys":           {[]jws.Key{offCurve, noPoint}, jws.ErrAlg},
		"invalid and a wrong key":     {[]jws.Key{noPoint, keys[1], offCurve}, jws.ErrSignature},
	} {
		_, _, err := jws.Open(token, func(jws.Header, []byte) ([]jws.Key, error) { return tc.keys, nil }, 0)
		if tc.want == nil {
			assert.NoError(t, err, name)
			continue
		}
		assert.ErrorIs(t, err, tc.want, name)
	}
}

func TestOpen_DefaultMaxSize(t *testing.T) {
	big := bytes.Repeat([]byte{'A'}, jws.DefaultMaxSize+1)
	_, _, err := jws.Open(big, nil, 0)
	assert.ErrorIs(t, err, jws.ErrTooLarge)
	_, _, err = jws.Open(big, nil, -1)
	assert.ErrorIs(t, err, jws.ErrTooLarge)
}

func TestUnsafePayload(t *testing.T) {
	key := newKey(t, jws.ES256)
	token := craft(t, key, `{"alg":"none"}`, testPayload)
	p, err := jws.UnsafePayload(token, 0)
	require.NoError(t, err)
	assert.Equal(t, testPayload, string(p))

	p, err = jws.UnsafePayload(append(bytes.Clone(token), '.'), 0)
	assert.ErrorIs(t, err, jws.ErrMalformed)
	assert.Nil(t, p)
	_, err = jws.UnsafePayload(token, 10)
	assert.ErrorIs(t, err, jws.ErrTooLarge)
}

func TestThumbprint_RFC7638(t *testing.T) {
	// RFC 7638 section 3.1.
	var k jose.JSONWebKey
	require.NoError(t, json.Unmarshal([]byte(`{"kty":"RSA","e":"AQAB","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}`), &k))
	tp, err := jws.Thumbprint(k.Key)
	require.NoError(t, err)
	assert.Equal(t, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs", tp)

	_, err = jws.Thumbprint(nil)
	assert.Error(t, err)
	_, err = jws.Thumbprint("not a key")
	assert.Error(t, err)
}

// The worked example of draft-handoff-00 section 2.3, copied verbatim with
// its RFC 8792 single-backslash folding.
const draftHandoff = `{
  "offer": "eyJhbGciOiJFUzI1NiIsImtpZCI6ImxXR0ZBQzhDcGM5Zm5lcVhaM2I0\
  YUNqdGJiN3ZCb1Q4UmJ2SnhYNjEta1EiLCJ0eXAiOiJhZ2VudC1oYW5kb2ZmK2p3dC\
  J9.eyJ2IjoxLCJ0eXBlIjoib2ZmZXIiLCJob3AiOiJxM1psMHY4YlZmUW1KbTJjNGJ\
  xMVd3IiwiZGlhbG9nIjoiY3R4LTdjMWUiLCJ0YXNrIjoidGFzay00MiIsImlzcyI6I\
  nNwaWZmZTovL2EuZXhhbXBsZS9hZ2VudC9wbGFubmVyIiwiYXVkIjoic3BpZmZlOi8\
  vYi5leGFtcGxlL2FnZW50L2NvZGVyIiwiaWF0IjoxNzkzMDAwMDAwLCJleHAiOjE3O\
  TMwMDAxMjAsIm9ibyI6eyJzdWIiOiJ1LThmMmEiLCJpc3MiOiJodHRwczovL2lkcC5\
  1LmV4YW1wbGUifSwiZ3JhbnQiOnsiYWxnIjoic2hhLTI1NiIsInZhbCI6IlNLTGpzZ\
  kVUNXh0Wm9PNWh6SWlaRmlnejJKb1laTG1XOENnOEd1WWg0bzQifSwicHJldiI6eyJ\
  hbGciOiJzaGEtMjU2IiwidmFsIjoiTS1PeUtuSExBR0twaVpLdzdzTnFBc05LbXRmU\
  lE3RFVGaHRLQUwzU2xtZyJ9LCJyZWZzIjpbeyJraW5kIjoiZGlnZXN0IiwiZGlnIjp\
  7ImFsZyI6InNoYS0yNTYiLCJ2YWwiOiJWX1dQTThGOXp0ZzZXeEJ4ajFaSUduelJiT\
  TFYeXA1R1ZkcEVZbXdidnVRIn0sImxvYyI6Imh0dHBzOi8vYS5leGFtcGxlL2N0eC8\
  5In1dfQ.aHq9TQ3_SI_kM1xDVzxVluQRhWctEMDt0ATd0Tmf8KjWj6IscdZnav9rhZ\
  zBNNTrvrD1chtHaSsv0y6uRAuVSA",
  "chain": [
    "eyJhbGciOiJFUzI1NiIsImtpZCI6IktLT2JfVVJsZFBNRThYWFhiV3ZYODhFWHB\
  JNlRPaEtINHJ3dEhwcXRJYjgiLCJ0eXAiOiJhZ2VudC1oYW5kb2ZmK2p3dCJ9.eyJ2\
  IjoxLCJ0eXBlIjoib2ZmZXIiLCJob3AiOiJWYjNrUXg5WnRSMm1OOHBMNHdZYzFBIi\
  wiZGlhbG9nIjoiY3R4LTdjMWUiLCJpc3MiOiJzcGlmZmU6Ly91LmV4YW1wbGUvYWdl\
  bnQvYXNzaXN0YW50IiwiYXVkIjoic3BpZmZlOi8vYS5leGFtcGxlL2FnZW50L3BsYW\
  5uZXIiLCJpYXQiOjE3OTI5OTk5OTAsImV4cCI6MTc5MzAwMDExMCwib2JvIjp7InN1\
  YiI6InUtOGYyYSIsImlzcyI6Imh0dHBzOi8vaWRwLnUuZXhhbXBsZSJ9fQ.3BHyncw\
  224yirlOxWsl3gELq1MWlwBKVvkrVVV12qycHGyaByn019Beegv-lms_OFqseMOgf5\
  Xs_kJHaynMcwg"
  ]
}`

// The two public keys of section 2.3: the first signed the chain element
// (iss spiffe://u.example/...), the second, the planner's, signed the offer.
const (
	originJWK = `{"crv":"P-256","kty":"EC",
 "x":"G6ZXm5RqUggIPXdM3WR_kg2acGXtkaYFhoM51p-2_iA",
 "y":"8Gv0K14KLtbFeBUSjRTW0CYXr-t_WTYrtbHOFasEL6s"}`
	plannerJWK = `{"crv":"P-256","kty":"EC",
 "x":"WnRSpcn3Krie0WFNKoxLb14dgx8uBHCiO0bf7S36cx8",
 "y":"9t5Dm2PQpoSAckALLAGKhvYc4HccNnkPhGEBz3v2HUg"}`
)

// unfold undoes RFC 8792 single-backslash folding: a backslash at the end of
// a line, the line break and the next line's leading whitespace go.
func unfold(s string) string {
	return regexp.MustCompile(`\\\n[ \t]*`).ReplaceAllString(s, "")
}

func digest(b []byte) string {
	d := sha256.Sum256(b)
	return b64.EncodeToString(d[:])
}

// TestOpen_DraftExample verifies the draft's worked example (HC-13..HC-16):
// both JWS strings open with the key named by their kid, and fail with the
// other key.
func TestOpen_DraftExample(t *testing.T) {
	var ho struct {
		Offer string   `json:"offer"`
		Chain []string `json:"chain"`
	}
	require.NoError(t, json.Unmarshal([]byte(unfold(draftHandoff)), &ho))
	require.Len(t, ho.Chain, 1)
	offer, chain := []byte(ho.Offer), []byte(ho.Chain[0])

	// The octet counts and handoff digests the draft states.
	assert.Len(t, offer, 942)
	assert.Len(t, chain, 538)
	assert.Equal(t, "M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg", digest(chain), "offer.prev")
	assert.Equal(t, "kJIcudVNmFFwbYKTXNO3mqC3e9dQSWVXDNbamGeoP18", digest(offer), "status.offer")

	var origin, planner jose.JSONWebKey
	require.NoError(t, json.Unmarshal([]byte(originJWK), &origin))
	require.NoError(t, json.Unmarshal([]byte(plannerJWK), &planner))

	// HC-16: kid is the RFC 7638 thumbprint.
	tpO, err := jws.Thumbprint(origin.Key)
	require.NoError(t, err)
	tpP, err := jws.Thumbprint(planner.Key)
	require.NoError(t, err)
	assert.Equal(t, "KKOb_URldPME8XXXbWvX88EXpI6TOhKH4rwtHpqtIb8", tpO)
	assert.Equal(t, "lWGFAC8Cpc9fneqXZ3b4aCjtbb7vBoT8RbvJxX61-kQ", tpP)

	payload, h, err := jws.Open(chain, pin(origin.Key, jws.ES256), 0)
	require.NoError(t, err)
	assert.Equal(t, jws.Header{Alg: jws.ES256, KID: tpO}, h)
	assert.Equal(t, `{"v":1,"type":"offer","hop":"Vb3kQx9ZtR2mN8pL4wYc1A",`+
		`"dialog":"ctx-7c1e","iss":"spiffe://u.example/agent/assistant",`+
		`"aud":"spiffe://a.example/agent/planner","iat":1792999990,`+
		`"exp":1793000110,`+
		`"obo":{"sub":"u-8f2a","iss":"https://idp.u.example"}}`, string(payload))

	payload, h, err = jws.Open(offer, pin(planner.Key, jws.ES256), 0)
	require.NoError(t, err)
	assert.Equal(t, jws.Header{Alg: jws.ES256, KID: tpP}, h)
	var o map[string]any
	require.NoError(t, json.Unmarshal(payload, &o))
	assert.Equal(t, "spiffe://a.example/agent/planner", o["iss"])
	assert.Equal(t, map[string]any{"alg": "sha-256", "val": digest(chain)}, o["prev"])

	// Swapped keys fail.
	payload, _, err = jws.Open(chain, pin(planner.Key, jws.ES256), 0)
	assert.ErrorIs(t, err, jws.ErrSignature)
	assert.Nil(t, payload)
	payload, _, err = jws.Open(offer, pin(origin.Key, jws.ES256), 0)
	assert.ErrorIs(t, err, jws.ErrSignature)
	assert.Nil(t, payload)

	// The folded text itself, with its line breaks, is not a JWS.
	folded := draftHandoff[strings.Index(draftHandoff, `"eyJ`)+1 : strings.Index(draftHandoff, `",`)]
	_, _, err = jws.Open([]byte(folded), pin(planner.Key, jws.ES256), 0)
	assert.ErrorIs(t, err, jws.ErrMalformed)
}

// TestOpen_HC21_IgnoredParameters: header parameters the draft does not
// forbid are ignored, never used (RFC 7515 section 4: parameters not
// understood MUST be ignored; the draft forbids only crit, HC-14). Keys and
// certificates in the header decide nothing (HC-21): a message signed by
// the key its own jwk names fails against the trusted key. go-jose's parser
// refuses several of these valid messages, which is why Open does not use
// it; the strict profile refuses them all.
func TestOpen_HC21_IgnoredParameters(t *testing.T) {
	trusted := newKey(t, jws.ES256)
	attacker := newKey(t, jws.ES256)
	attackerJWK, err := json.Marshal(jose.JSONWebKey{Key: attacker.Public()})
	require.NoError(t, err)
	hdr := func(members string) string {
		return `{"alg":"ES256","kid":"k","typ":"agent-handoff+jwt"` + members + `}`
	}
	for _, tc := range []struct {
		name          string
		members       string
		goJoseRefuses bool
		strictWant    error
	}{
		{"x5c not a certificate", `,"x5c":["MIIB"]`, true, jws.ErrEmbeddedKey},
		{"x5c not base64", `,"x5c":["%%%"]`, true, jws.ErrEmbeddedKey},
		{"x5c not an array", `,"x5c":{"a":1}`, true, jws.ErrEmbeddedKey},
		{"jwk of another key", `,"jwk":` + string(attackerJWK), false, jws.ErrEmbeddedKey},
		{"jwk not a key", `,"jwk":{"kty":"nope"}`, true, jws.ErrEmbeddedKey},
		{"jwk private", `,"jwk":{"kty":"oct","k":"AAAA"}`, true, jws.ErrEmbeddedKey},
		{"jku", `,"jku":"https://attacker.example/jwks"`, false, jws.ErrEmbeddedKey},
		{"x5u", `,"x5u":"https://attacker.example/cert"`, false, jws.ErrEmbeddedKey},
		{"x5t", `,"x5t":7`, false, jws.ErrEmbeddedKey},
		{"x5t#S256", `,"x5t#S256":null`, false, jws.ErrEmbeddedKey},
		{"huge number", `,"n":1e400`, true, nil},
		{"huge negative number", `,"n":-1e999999`, true, nil},
		{"long integer", `,"n":123456789012345678901234567890123456789`, false, nil},
		{"every JSON type", `,"o":{"a":[1,2.5,true,false,null,"s",{"b":{}}]},"e":[]`, false, nil},
		{"noncharacter", `,"x":"\uFFFF\uFDD0"`, false, nil},
		{"surrogate pair", `,"x":"\ud83d\ude00"`, false, nil},
		{"case variant", `,"ALG":"none","Kid":7,"CRIT":["x"]`, false, jws.ErrMalformed},
		{"nonce and cty", `,"nonce":"n","cty":"JWT"`, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := craft(t, trusted, hdr(tc.members), testPayload)
			var seen jws.Header
			payload, h, err := jws.Open(token, func(h jws.Header, _ []byte) ([]jws.Key, error) {
				seen = h
				return []jws.Key{{Public: trusted.Public(), Alg: jws.ES256}}, nil
			}, 0)
			require.NoError(t, err)
			assert.Equal(t, testPayload, string(payload))
			assert.Equal(t, jws.Header{Alg: jws.ES256, KID: "k"}, h)
			assert.Equal(t, h, seen)

			// The same header on a message the attacker signed: nothing in
			// it makes the attacker's key count.
			forged := craft(t, attacker, hdr(tc.members), testPayload)
			_, _, err = jws.Open(forged, pin(trusted.Public(), jws.ES256), 0)
			assert.ErrorIs(t, err, jws.ErrSignature)

			_, _, err = jws.OpenWith(token, pin(trusted.Public(), jws.ES256), jws.Options{Strict: true})
			if tc.strictWant != nil {
				assert.ErrorIs(t, err, tc.strictWant, "strict profile")
			} else {
				assert.NoError(t, err, "strict profile")
			}

			_, err = jose.ParseSignedCompact(string(token), []jose.SignatureAlgorithm{jose.ES256})
			if tc.goJoseRefuses {
				assert.Error(t, err, "go-jose refuses this valid message")
			}
		})
	}
}

// TestOpen_HC14_HC60_TypeComparison: RFC 7515 section 4.1.9 compares typ as
// a media type, case-insensitively and with "application/" optional; the
// strict profile wants the exact string the draft writes.
func TestOpen_HC14_HC60_TypeComparison(t *testing.T) {
	key := newKey(t, jws.ES256)
	for typ, defaultOK := range map[string]bool{
		"agent-handoff+jwt":              true,
		"AGENT-HANDOFF+JWT":              true,
		"application/agent-handoff+jwt":  true,
		"Application/Agent-Handoff+JWT":  true,
		"agent-handoff+jwt;v=1":          false,
		"application/agent-handoff+json": false,
		"agent-handoff+jws":              false,
		"JWT":                            false,
		"application/jwt":                false,
		" agent-handoff+jwt":             false,
		"application/ agent-handoff+jwt": false,
		"x/agent-handoff+jwt":            false,
	} {
		token := craft(t, key, `{"alg":"ES256","kid":"k","typ":"`+typ+`"}`, testPayload)
		_, _, err := jws.Open(token, pin(key.Public(), jws.ES256), 0)
		if defaultOK {
			assert.NoError(t, err, typ)
		} else {
			assert.ErrorIs(t, err, jws.ErrType, typ)
		}
		_, _, err = jws.OpenWith(token, pin(key.Public(), jws.ES256), jws.Options{Strict: true})
		if typ == jws.Type {
			assert.NoError(t, err, "strict %s", typ)
		} else {
			assert.ErrorIs(t, err, jws.ErrType, "strict %s", typ)
		}
	}
}

// TestOpen_LookupSeesKid: the lookup sees the kid, so that it can put the
// key it names first; the keys it returns decide, whatever the kid says
// (HC-21, HC-22).
func TestOpen_LookupSeesKid(t *testing.T) {
	key := newKey(t, jws.ES256)
	token, err := jws.Sign([]byte(testPayload), key, jws.ES256, "named", nil)
	require.NoError(t, err)
	var tried []string
	keys := []jws.Key{
		{Public: newKey(t, jws.ES256).Public(), Alg: jws.ES256},
		{Public: key.Public(), Alg: jws.ES256},
		{Public: newKey(t, jws.ES256).Public(), Alg: jws.ES256},
	}
	_, h, err := jws.Open(token, func(h jws.Header, _ []byte) ([]jws.Key, error) {
		tried = append(tried, h.KID)
		return keys, nil
	}, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"named"}, tried)
	assert.Equal(t, "named", h.KID)
	// A kid that names none of the keys: the lookup still decides.
	other, err := jws.Sign([]byte(testPayload), key, jws.ES256, "unknown-kid", nil)
	require.NoError(t, err)
	_, _, err = jws.Open(other, func(jws.Header, []byte) ([]jws.Key, error) { return keys, nil }, 0)
	assert.NoError(t, err)
}
