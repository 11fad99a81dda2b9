package handoff

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/jws"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

// The attack suite: one test per class of hostile input, each asserting the
// exact rejection (the draft's reason code, through Received.Reason and
// ReasonOf, and the failure class, through errors.Is). Tokens are made by
// hand (base64url of a header written here, a payload written here, and a
// signature computed with crypto/ecdsa or crypto/hmac), so that the
// library's own signer is bypassed and the receiver alone decides.

const (
	atkPlanner = AgentID("spiffe://a.example/agent/planner")
	atkCoder   = AgentID("spiffe://b.example/agent/coder")
	atkOther   = AgentID("spiffe://c.example/agent/other")
	atkNow     = 1793000003
	atkIat     = 1793000000
	atkExp     = 1793000120
)

// atkEnv is a receiver (the coder) that trusts the planner's key and
// another agent's key, plus an attacker key trusted for nobody.
type atkEnv struct {
	t                    *testing.T
	planner, other, evil *ecdsa.PrivateKey
	plannerKID, otherKID string
	evilKID              string
	trust                *Trust
	jwsSigner            *Signer // the library's signers over the planner's key
	coseSigner           *Signer
	conflicts            []Conflict
}

func newAtkEnv(t *testing.T) *atkEnv {
	t.Helper()
	e := &atkEnv{t: t}
	gen := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	e.planner, e.other, e.evil = gen(), gen(), gen()
	var err error
	for _, kk := range []struct {
		key *ecdsa.PrivateKey
		kid *string
	}{{e.planner, &e.plannerKID}, {e.other, &e.otherKID}, {e.evil, &e.evilKID}} {
		*kk.kid, err = jws.Thumbprint(kk.key.Public())
		require.NoError(t, err)
	}
	e.trust, err = NewTrust(map[AgentID][]TrustedKey{
		atkPlanner: {{Public: e.planner.Public(), Alg: ES256}},
		atkOther:   {{Public: e.other.Public(), Alg: ES256}},
	})
	require.NoError(t, err)
	e.jwsSigner, err = NewSigner(e.planner, JWS, nil)
	require.NoError(t, err)
	e.coseSigner, err = NewSigner(e.planner, COSE, nil)
	require.NoError(t, err)
	return e
}

// agent returns a fresh receiver with an empty memory and a fixed clock.
func (e *atkEnv) agent(lim Limits) *Agent {
	e.t.Helper()
	a, err := NewAgent(Config{ID: atkCoder, Signer: e.jwsSigner, Trust: e.trust, Limits: lim, TrustLacksSigner: true,
		Now:        func() time.Time { return time.Unix(atkNow, 0) },
		OnConflict: func(c Conflict) { e.conflicts = append(e.conflicts, c) }})
	require.NoError(e.t, err)
	return a
}

// receive runs a fresh receiver on data.
func (e *atkEnv) receive(data []byte) *Received {
	e.t.Helper()
	return receive(e.t, e.agent(Limits{}), data, Host{})
}

// atkHop returns a fresh HopId.
func atkHop(t *testing.T) HopID {
	h, err := NewHopID(nil)
	require.NoError(t, err)
	return h
}

// atkPayload is an offer payload in JSON, written by hand, from iss to the
// coder; extra is spliced in before the closing brace.
func atkPayload(t *testing.T, iss AgentID, extra string) string {
	return fmt.Sprintf(`{"v":1,"type":"offer","hop":"%s","dialog":"ctx-atk","iss":"%s","aud":"%s","iat":%d,"exp":%d%s}`,
		atkHop(t), iss, atkCoder, atkIat, atkExp, extra)
}

// atkCBORPayload is an offer payload in CBOR core deterministic encoding.
func atkCBORPayload(t *testing.T, iss AgentID) []byte {
	o := &Offer{Hop: atkHop(t), Dialog: "ctx-atk", Iss: iss, Aud: atkCoder, Iat: atkIat, Exp: atkExp}
	b, err := o.encode(CBOR)
	require.NoError(t, err)
	return b
}

func atkB64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func atkHeader(kid string) string {
	return `{"alg":"ES256","kid":"` + kid + `","typ":"agent-handoff+jwt"}`
}

// atkRS signs msg with ECDSA P-256 SHA-256 by crypto/ecdsa alone and
// returns r and s.
func atkRS(t *testing.T, key *ecdsa.PrivateKey, msg []byte) (r, s *big.Int) {
	h := sha256.Sum256(msg)
	der, err := ecdsa.SignASN1(rand.Reader, key, h[:])
	require.NoError(t, err)
	var rs struct{ R, S *big.Int }
	_, err = asn1.Unmarshal(der, &rs)
	require.NoError(t, err)
	return rs.R, rs.S
}

// atkRaw is the fixed-width r||s form of r and s.
func atkRaw(r, s *big.Int) []byte {
	out := make([]byte, 64)
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out
}

// atkJWSInput is the JWS signing input of a header and payload.
func atkJWSInput(header, payload string) string {
	return atkB64([]byte(header)) + "." + atkB64([]byte(payload))
}

// atkJWS is a JWS compact serialization of header and payload signed by
// key with ES256, made by hand.
func atkJWS(t *testing.T, key *ecdsa.PrivateKey, header, payload string) string {
	in := atkJWSInput(header, payload)
	return in + "." + atkB64(atkRaw(atkRS(t, key, []byte(in))))
}

func atkCBOR(t *testing.T, v any) []byte {
	b, err := cborEncMode.Marshal(v)
	require.NoError(t, err)
	return b
}

// atkProtected is the COSE protected header {1: -7, 3: content type, 4:
// kid}.
func atkProtected(t *testing.T, kid string) []byte {
	return atkCBOR(t, map[int64]any{1: -7, 3: cose.ContentType, 4: []byte(kid)})
}

// atkCOSE is a tagged COSE_Sign1 over payload with the given protected
// header octets, signed by key with ES256, made by hand.
func atkCOSE(t *testing.T, key *ecdsa.PrivateKey, protected, payload []byte) []byte {
	tbs := atkCBOR(t, []any{"Signature1", protected, []byte{}, payload})
	sig := atkRaw(atkRS(t, key, tbs))
	return atkCBOR(t, cbor.Tag{Number: cose.Tag, Content: []any{protected, map[any]any{}, payload, sig}})
}

// atkJSONHandoff is a Handoff object in JSON carrying offer (and chain) as
// the given strings.
func atkJSONHandoff(t *testing.T, offer string, chain ...string) []byte {
	m := map[string]any{"offer": offer}
	if len(chain) > 0 {
		m["chain"] = chain
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// atkCOSEHandoff is a Handoff object in CBOR carrying a COSE offer as a
// byte string.
func atkCOSEHandoff(t *testing.T, msg []byte) []byte {
	return atkCBOR(t, map[string]any{"offer": msg})
}

// atkRefused asserts a rejection with reason and every one of classes.
func atkRefused(t *testing.T, in *Received, reason reason.Code, classes ...error) {
	t.Helper()
	require.False(t, in.Accepted(), "accepted")
	assert.Equal(t, reason, in.Reason(), in.Detail())
	err := in.Err()
	require.Error(t, err)
	assert.Equal(t, reason, ReasonOf(err))
	for _, c := range classes {
		assert.ErrorIs(t, err, c)
	}
}

// atkAccepted asserts that every check passed.
func atkAccepted(t *testing.T, in *Received) {
	t.Helper()
	require.True(t, in.Accepted(), "%s: %s", in.Reason(), in.Detail())
}

// The hand-made tokens are right when nothing is wrong with them: every
// rejection below is the rule under test, not the tooling (HC-13, HC-14,
// HC-17).
func TestAttack_HC13_HandMadeTokensAccepted(t *testing.T) {
	e := newAtkEnv(t)
	tok := atkJWS(t, e.planner, atkHeader(e.plannerKID), atkPayload(t, atkPlanner, ""))
	atkAccepted(t, e.receive(atkJSONHandoff(t, tok)))

	msg := atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), atkCBORPayload(t, atkPlanner))
	atkAccepted(t, e.receive(atkCOSEHandoff(t, msg)))
	// HC-19: in a JSON Handoff a COSE element is base64url text.
	msg = atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), atkCBORPayload(t, atkPlanner))
	atkAccepted(t, e.receive(atkJSONHandoff(t, atkB64(msg))))
}

// HC-15: "none" is refused, with or without a signature segment.
func TestAttack_HC15_AlgNone(t *testing.T) {
	e := newAtkEnv(t)
	payload := atkPayload(t, atkPlanner, "")
	for _, alg := range []string{"none", "None", "NONE"} {
		hdr := `{"alg":"` + alg + `","kid":"` + e.plannerKID + `","typ":"agent-handoff+jwt"}`
		t.Run(alg+" with empty signature", func(t *testing.T) {
			// The compact form needs three non-empty segments: the Handoff
			// itself does not parse.
			in := e.receive(atkJSONHandoff(t, atkJWSInput(hdr, payload)+"."))
			atkRefused(t, in, reason.BadSignature, ErrMalformed)
		})
		t.Run(alg+" with a valid ES256 signature", func(t *testing.T) {
			in := e.receive(atkJSONHandoff(t, atkJWS(t, e.planner, hdr, payload)))
			atkRefused(t, in, reason.BadSignature, ErrSignature, jws.ErrAlg)
		})
	}
}

// HC-15, HC-22: HS256 keyed with the trusted public key (alg confusion) is
// refused in each of the forms an HMAC key could take from it.
func TestAttack_HC15_HS256KeyedWithPublicKey(t *testing.T) {
	e := newAtkEnv(t)
	pub := &e.planner.PublicKey
	point, err := pub.Bytes()
	require.NoError(t, err)
	pkix, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	jwk, err := jose.JSONWebKey{Key: pub}.MarshalJSON()
	require.NoError(t, err)
	keys := map[string][]byte{
		"uncompressed point": point,
		"PKIX DER":           pkix,
		"PEM":                pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix}),
		"JWK":                jwk,
		"kid":                []byte(e.plannerKID),
	}
	for name, key := range keys {
		for _, alg := range []string{"HS256", "HS384", "HS512"} {
			t.Run(alg+" "+name, func(t *testing.T) {
				in := atkJWSInput(`{"alg":"`+alg+`","kid":"`+e.plannerKID+`","typ":"agent-handoff+jwt"}`, atkPayload(t, atkPlanner, ""))
				mac := hmac.New(sha256.New, key)
				mac.Write([]byte(in))
				got := e.receive(atkJSONHandoff(t, in+"."+atkB64(mac.Sum(nil))))
				atkRefused(t, got, reason.BadSignature, ErrSignature, jws.ErrAlg)
			})
		}
	}
}

// HC-14: crit is refused, including RFC 7797's b64:false.
func TestAttack_HC14_Crit(t *testing.T) {
	e := newAtkEnv(t)
	hdr := func(members string) string {
		return `{"alg":"ES256","kid":"` + e.plannerKID + `","typ":"agent-handoff+jwt"` + members + `}`
	}
	for name, members := range map[string]string{
		"crit exp":           `,"crit":["exp"],"exp":1793000120`,
		"crit empty":         `,"crit":[]`,
		"crit b64 false":     `,"b64":false,"crit":["b64"]`,
		"b64 false alone":    `,"b64":false`,
		"crit unknown param": `,"crit":["urn:x"],"urn:x":true`,
	} {
		t.Run(name, func(t *testing.T) {
			in := e.receive(atkJSONHandoff(t, atkJWS(t, e.planner, hdr(members), atkPayload(t, atkPlanner, ""))))
			atkRefused(t, in, reason.BadSignature, ErrSignature, jws.ErrCrit)
		})
	}
	t.Run("RFC 7797 unencoded payload", func(t *testing.T) {
		// Signed as RFC 7797 says: the payload is not base64url-encoded.
		h := hdr(`,"b64":false,"crit":["b64"]`)
		payload := atkPayload(t, atkPlanner, "")
		input := atkB64([]byte(h)) + "." + payload
		tok := input + "." + atkB64(atkRaw(atkRS(t, e.planner, []byte(input))))
		in := e.receive(atkJSONHandoff(t, tok))
		atkRefused(t, in, reason.BadSignature, ErrMalformed)
	})
	t.Run("COSE crit", func(t *testing.T) {
		prot := atkCBOR(t, map[int64]any{1: -7, 2: []any{int64(4)}, 3: cose.ContentType, 4: []byte(e.plannerKID)})
		in := e.receive(atkCOSEHandoff(t, atkCOSE(t, e.planner, prot, atkCBORPayload(t, atkPlanner))))
		atkRefused(t, in, reason.BadSignature, ErrSignature, cose.ErrCrit)
	})
}

// HC-21: a key carried in, or pointed to by, the message proves nothing.
// The attacker signs with its own key and names it in the header.
func TestAttack_HC21_EmbeddedKeys(t *testing.T) {
	e := newAtkEnv(t)
	jwk, err := jose.JSONWebKey{Key: &e.evil.PublicKey}.MarshalJSON()
	require.NoError(t, err)
	cert := atkB64([]byte("a certificate for the attacker's key"))
	for name, members := range map[string]string{
		"jwk":      `,"jwk":` + string(jwk),
		"jku":      `,"jku":"https://attacker.example/jwks.json"`,
		"x5c":      `,"x5c":["` + cert + `"]`,
		"x5u":      `,"x5u":"https://attacker.example/cert.pem"`,
		"x5t":      `,"x5t":"` + atkB64(make([]byte, 20)) + `"`,
		"x5t#S256": `,"x5t#S256":"` + atkB64(make([]byte, 32)) + `"`,
	} {
		for _, kid := range []string{e.evilKID, e.plannerKID} {
			t.Run(name+" kid "+kid[:6], func(t *testing.T) {
				h := `{"alg":"ES256","kid":"` + kid + `","typ":"agent-handoff+jwt"` + members + `}`
				data := atkJSONHandoff(t, atkJWS(t, e.evil, h, atkPayload(t, atkPlanner, "")))
				// The key in the message is never used (HC-21): the
				// attacker's signature fails under the planner's key.
				want, class := reason.BadSignature, ErrSignature
				if kid == e.evilKID {
					want, class = reason.UntrustedKey, ErrUntrustedKey
				}
				atkRefused(t, e.receive(data), want, class)
				atkRefused(t, receive(t, e.agent(Limits{Strict: true}), data, Host{}), reason.BadSignature, ErrSignature, jws.ErrEmbeddedKey)
			})
		}
		// The draft forbids only crit: the same parameter beside the
		// planner's own signature is ignored, and the offer accepted.
		t.Run(name+" ignored beside the right key", func(t *testing.T) {
			h := `{"alg":"ES256","kid":"` + e.plannerKID + `","typ":"agent-handoff+jwt"` + members + `}`
			data := atkJSONHandoff(t, atkJWS(t, e.planner, h, atkPayload(t, atkPlanner, "")))
			atkAccepted(t, e.receive(data))
			atkRefused(t, receive(t, e.agent(Limits{Strict: true}), data, Host{}), reason.BadSignature, ErrSignature, jws.ErrEmbeddedKey)
		})
	}
	// COSE has no such rule in the envelope: a key in the header is simply
	// never consulted, so the attacker's signature fails under the key the
	// trust configuration binds to iss.
	t.Run("COSE x5chain and COSE_Key", func(t *testing.T) {
		pt, err := e.evil.PublicKey.Bytes()
		require.NoError(t, err)
		prot := atkCBOR(t, map[int64]any{1: -7, 3: cose.ContentType, 4: []byte(e.plannerKID),
			33: []byte("a certificate for the attacker's key"), -65537: pt})
		in := e.receive(atkCOSEHandoff(t, atkCOSE(t, e.evil, prot, atkCBORPayload(t, atkPlanner))))
		atkRefused(t, in, reason.BadSignature, ErrSignature)
	})
}

// HC-21: a kid selects only among the keys bound to iss; it is a hint, and
// when it names none of them, iss's keys are tried in turn. A kid naming a
// key bound to another agent, when no key of iss verifies, is
// untrusted-key; the kid of iss's key over another signature, or no kid,
// is bad-signature.
func TestAttack_HC21_KidOfAnotherAgent(t *testing.T) {
	e := newAtkEnv(t)
	t.Run("JWS, signed by the other agent", func(t *testing.T) {
		in := e.receive(atkJSONHandoff(t, atkJWS(t, e.other, atkHeader(e.otherKID), atkPayload(t, atkPlanner, ""))))
		atkRefused(t, in, reason.UntrustedKey, ErrUntrustedKey)
	})
	t.Run("JWS, attacker's kid", func(t *testing.T) {
		in := e.receive(atkJSONHandoff(t, atkJWS(t, e.evil, atkHeader(e.evilKID), atkPayload(t, atkPlanner, ""))))
		atkRefused(t, in, reason.UntrustedKey, ErrUntrustedKey)
	})
	t.Run("JWS, iss with no keys at all", func(t *testing.T) {
		in := e.receive(atkJSONHandoff(t, atkJWS(t, e.evil, atkHeader(e.evilKID), atkPayload(t, "spiffe://evil.example/x", ""))))
		atkRefused(t, in, reason.UntrustedKey, ErrUntrustedKey)
	})
	t.Run("JWS, planner's kid, other agent's signature", func(t *testing.T) {
		in := e.receive(atkJSONHandoff(t, atkJWS(t, e.other, atkHeader(e.plannerKID), atkPayload(t, atkPlanner, ""))))
		atkRefused(t, in, reason.BadSignature, ErrSignature)
	})
	t.Run("COSE, signed by the other agent", func(t *testing.T) {
		msg := atkCOSE(t, e.other, atkProtected(t, e.otherKID), atkCBORPayload(t, atkPlanner))
		atkRefused(t, e.receive(atkCOSEHandoff(t, msg)), reason.UntrustedKey, ErrUntrustedKey)
	})
	t.Run("COSE without kid, other agent's signature", func(t *testing.T) {
		prot := atkCBOR(t, map[int64]any{1: -7, 3: cose.ContentType})
		msg := atkCOSE(t, e.other, prot, atkCBORPayload(t, atkPlanner))
		atkRefused(t, e.receive(atkCOSEHandoff(t, msg)), reason.BadSignature, ErrSignature)
	})
}

// HC-14, HC-60: typ names "agent-handoff+jwt" and the COSE content type
// "application/agent-handoff+cbor". Media types compare without regard to
// case, and a typ without "/" has "application/" before it (RFC 7515
// section 4.1.9); the strict profile wants them exactly as the draft
// writes them.
func TestAttack_HC60_TypAndContentType(t *testing.T) {
	e := newAtkEnv(t)
	kid := `"kid":"` + e.plannerKID + `"`
	for name, h := range map[string]string{
		"typ absent":         `{"alg":"ES256",` + kid + `}`,
		"typ JWT":            `{"alg":"ES256",` + kid + `,"typ":"JWT"}`,
		"typ with parameter": `{"alg":"ES256",` + kid + `,"typ":"agent-handoff+jwt; v=1"}`,
		"typ of COSE form":   `{"alg":"ES256",` + kid + `,"typ":"application/agent-handoff+cbor"}`,
		"typ empty":          `{"alg":"ES256",` + kid + `,"typ":""}`,
	} {
		t.Run(name, func(t *testing.T) {
			in := e.receive(atkJSONHandoff(t, atkJWS(t, e.planner, h, atkPayload(t, atkPlanner, ""))))
			atkRefused(t, in, reason.BadSignature, ErrSignature, jws.ErrType)
		})
	}
	for name, ct := range map[string]any{
		"content type absent":         nil,
		"content type cbor":           "application/cbor",
		"content type with parameter": "application/agent-handoff+cbor; v=1",
		"content type of JWS form":    "agent-handoff+jwt",
		"content type as integer":     int64(60),
	} {
		t.Run(name, func(t *testing.T) {
			m := map[int64]any{1: -7, 4: []byte(e.plannerKID)}
			if ct != nil {
				m[3] = ct
			}
			msg := atkCOSE(t, e.planner, atkCBOR(t, m), atkCBORPayload(t, atkPlanner))
			atkRefused(t, e.receive(atkCOSEHandoff(t, msg)), reason.BadSignature, ErrSignature, cose.ErrType)
		})
	}
	for name, h := range map[string]string{
		"typ wrong case": `{"alg":"ES256",` + kid + `,"typ":"Agent-Handoff+JWT"}`,
		"typ upper case": `{"alg":"ES256",` + kid + `,"typ":"AGENT-HANDOFF+JWT"}`,
		"typ long form":  `{"alg":"ES256",` + kid + `,"typ":"application/agent-handoff+jwt"}`,
	} {
		t.Run(name, func(t *testing.T) {
			data := atkJSONHandoff(t, atkJWS(t, e.planner, h, atkPayload(t, atkPlanner, "")))
			atkAccepted(t, e.receive(data))
			atkRefused(t, receive(t, e.agent(Limits{Strict: true}), data, Host{}), reason.BadSignature, ErrSignature, jws.ErrType)
		})
	}
	t.Run("content type wrong case", func(t *testing.T) {
		m := map[int64]any{1: -7, 4: []byte(e.plannerKID), 3: "Application/Agent-Handoff+CBOR"}
		data := atkCOSEHandoff(t, atkCOSE(t, e.planner, atkCBOR(t, m), atkCBORPayload(t, atkPlanner)))
		atkAccepted(t, e.receive(data))
		atkRefused(t, receive(t, e.agent(Limits{Strict: true}), data, Host{}), reason.BadSignature, ErrSignature, cose.ErrType)
	})
}

// HC-15: the signature is raw r||s at 32 octets each, with r and s in
// [1, n-1]. DER, zero and out-of-range values never verify.
func TestAttack_HC15_SignatureEncodings(t *testing.T) {
	e := newAtkEnv(t)
	n := elliptic.P256().Params().N
	max256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	variants := func(r, s *big.Int) map[string][]byte {
		der, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
		require.NoError(t, err)
		zero := big.NewInt(0)
		return map[string][]byte{
			"DER":         der,
			"r zero":      atkRaw(zero, s),
			"s zero":      atkRaw(r, zero),
			"r and s 0":   make([]byte, 64),
			"r = n":       atkRaw(n, s),
			"s = n":       atkRaw(r, n),
			"r = n + 1":   atkRaw(new(big.Int).Add(n, big.NewInt(1)), s),
			"s = 2^256-1": atkRaw(r, max256),
			"r = 2^256-1": atkRaw(max256, s),
			"63 octets":   atkRaw(r, s)[:63],
			"65 octets":   append(atkRaw(r, s), 0),
			"s only":      atkRaw(r, s)[32:],
		}
	}
	t.Run("JWS", func(t *testing.T) {
		in := atkJWSInput(atkHeader(e.plannerKID), atkPayload(t, atkPlanner, ""))
		r, s := atkRS(t, e.planner, []byte(in))
		atkAccepted(t, e.receive(atkJSONHandoff(t, in+"."+atkB64(atkRaw(r, s)))))
		for name, sig := range variants(r, s) {
			t.Run(name, func(t *testing.T) {
				got := e.receive(atkJSONHandoff(t, in+"."+atkB64(sig)))
				atkRefused(t, got, reason.BadSignature, ErrSignature)
			})
		}
	})
	t.Run("COSE", func(t *testing.T) {
		prot, payload := atkProtected(t, e.plannerKID), atkCBORPayload(t, atkPlanner)
		r, s := atkRS(t, e.planner, atkCBOR(t, []any{"Signature1", prot, []byte{}, payload}))
		msg := func(sig []byte) []byte {
			return atkCBOR(t, cbor.Tag{Number: cose.Tag, Content: []any{prot, map[any]any{}, payload, sig}})
		}
		atkAccepted(t, e.receive(atkCOSEHandoff(t, msg(atkRaw(r, s)))))
		for name, sig := range variants(r, s) {
			t.Run(name, func(t *testing.T) {
				atkRefused(t, e.receive(atkCOSEHandoff(t, msg(sig))), reason.BadSignature, ErrSignature)
			})
		}
	})
}

// atkTwin returns s with its ES256 signature replaced by the high-S twin.
func atkTwin(t *testing.T, s Signed) Signed {
	t.Helper()
	tw, ok := fzTwin(s)
	require.True(t, ok)
	require.NotEqual(t, s.Octets, tw.Octets)
	return tw
}

// HC-52, HC-53: the high-S twin (r, n-s) of a valid signature verifies
// (Wycheproof marks such signatures valid, and other signers make them),
// so one signed offer has two octet strings. The replay memory is keyed on
// (iss, hop): whichever arrives second is equivocation, never a fresh
// acceptance and never a retransmission, and the Detail says that a
// difference in the signature alone counts.
func TestAttack_HC53_HighSTwinIsEquivocation(t *testing.T) {
	for _, f := range []Format{JWS, COSE} {
		t.Run(f.String(), func(t *testing.T) {
			e := newAtkEnv(t)
			signer := map[Format]*Signer{JWS: e.jwsSigner, COSE: e.coseSigner}[f]
			orig, err := signer.SignOffer(&Offer{Hop: atkHop(t), Dialog: "ctx-atk", Iss: atkPlanner, Aud: atkCoder, Iat: atkIat, Exp: atkExp})
			require.NoError(t, err)
			twin := atkTwin(t, orig)
			require.False(t, orig.Digest().Equal(twin.Digest()))

			// It verifies.
			o, err := OpenOffer(twin, e.trust, Limits{})
			require.NoError(t, err)
			assert.Equal(t, atkPlanner, o.Iss)

			for _, order := range [][2]Signed{{orig, twin}, {twin, orig}} {
				e.conflicts = nil
				a := e.agent(Limits{})
				first := receive(t, a, encodeHandoff(t, &Handoff{Offer: order[0]}, JSON), Host{})
				atkAccepted(t, first)
				second := receive(t, a, encodeHandoff(t, &Handoff{Offer: order[1]}, CBOR), Host{})
				assert.False(t, second.Accepted())
				assert.False(t, second.Retransmission())
				assert.Equal(t, reason.Equivocation, second.Reason())
				assert.Equal(t, reason.Equivocation, ReasonOf(second.Err()))
				assert.ErrorIs(t, second.Err(), ErrRejected)
				assert.Equal(t, state.AnswerRejectFirst, second.Equivocation())
				assert.False(t, second.StatusDue(), "HC-53: no status for the second")
				assert.Contains(t, second.Detail(), "signature")
				assert.True(t, second.First().Equal(order[0].Digest()))
				assert.True(t, second.Digest().Equal(order[1].Digest()))
				require.Len(t, e.conflicts, 1)
				assert.Equal(t, ConflictEquivocation, e.conflicts[0].Kind)
				assert.True(t, e.conflicts[0].First.Equal(order[0].Digest()))
				assert.True(t, e.conflicts[0].Second.Equal(order[1].Digest()))

				// The first, sent again, is still a retransmission.
				again := receive(t, a, encodeHandoff(t, &Handoff{Offer: order[0]}, JSON), Host{})
				assert.True(t, again.Retransmission())
			}
		})
	}
}

// HC-01, HC-14: duplicate member names are refused in a payload signed by
// a trusted key: a decoder that lets a later duplicate win would read
// another iss than this one does. Names that differ only in case from a
// member the draft defines are other members, ignored and kept.
func TestAttack_HC01_DuplicateAndCaseVariantMembers(t *testing.T) {
	e := newAtkEnv(t)
	hop := atkHop(t)
	base := fmt.Sprintf(`"v":1,"type":"offer","hop":"%s","dialog":"ctx-atk","aud":"%s","iat":%d,"exp":%d`, hop, atkCoder, atkIat, atkExp)
	for name, p := range map[string]string{
		"duplicate iss":             `{` + base + `,"iss":"` + string(atkPlanner) + `","iss":"` + string(atkOther) + `"}`,
		"duplicate iss, same value": `{` + base + `,"iss":"` + string(atkPlanner) + `","iss":"` + string(atkPlanner) + `"}`,
		"duplicate by escape":       `{` + base + `,"iss":"` + string(atkPlanner) + `","\u0069ss":"` + string(atkOther) + `"}`,
		"duplicate aud":             `{` + base + `,"iss":"` + string(atkPlanner) + `","aud":"spiffe://x"}`,
		"duplicate v":               `{"v":1,` + base + `,"iss":"` + string(atkPlanner) + `"}`,
		"duplicate nested":          `{` + base + `,"iss":"` + string(atkPlanner) + `","obo":{"sub":"a","sub":"b"}}`,
		"case variant only":         `{` + base + `,"Iss":"` + string(atkPlanner) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			in := e.receive(atkJSONHandoff(t, atkJWS(t, e.planner, atkHeader(e.plannerKID), p)))
			atkRefused(t, in, reason.BadSignature, ErrMalformed)
			assert.NotErrorIs(t, in.Err(), ErrSignature, "the payload decoder refuses, not the signature check")
		})
	}
	// A name that differs from a member's only in case is another member,
	// unknown: "a receiver MUST ignore members it does not understand"
	// (HC-01). It is kept, never taken for the member; the strict profile
	// refuses it.
	for name, c := range map[string]struct{ payload, variant string }{
		"case variant ISS":       {`{` + base + `,"iss":"` + string(atkPlanner) + `","ISS":"` + string(atkOther) + `"}`, "ISS"},
		"case variant Aud":       {`{` + base + `,"iss":"` + string(atkPlanner) + `","Aud":"spiffe://x"}`, "Aud"},
		"long s folds to s":      {`{` + base + `,"iss":"` + string(atkPlanner) + `","iſs":"` + string(atkOther) + `"}`, "iſs"},
		"dotless i folds to I":   {`{` + base + `,"iss":"` + string(atkPlanner) + `","ıss":"` + string(atkOther) + `"}`, "ıss"},
		"Kelvin sign folds to K": {`{` + base + `,"iss":"` + string(atkPlanner) + `","task":"a","tas\u212a":"b"}`, "tas\u212a"},
	} {
		t.Run(name, func(t *testing.T) {
			data := atkJSONHandoff(t, atkJWS(t, e.planner, atkHeader(e.plannerKID), c.payload))
			in := e.receive(data)
			require.True(t, in.Accepted(), in.Detail())
			o := in.Offer()
			assert.Equal(t, atkPlanner, o.Iss, "the member is the one spelled exactly")
			assert.Equal(t, atkCoder, o.Aud)
			assert.Contains(t, o.Extra, c.variant, "the variant is kept as an unknown member")
			strict := receive(t, e.agent(Limits{Strict: true}), data, Host{})
			atkRefused(t, strict, reason.BadSignature, ErrMalformed)
		})
	}
	t.Run("CBOR duplicate iss", func(t *testing.T) {
		p := atkCBORPayload(t, atkPlanner)
		p = append([]byte{p[0] + 1}, p[1:]...)
		p = append(p, atkCBOR(t, "iss")...)
		p = append(p, atkCBOR(t, string(atkOther))...)
		msg := atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), p)
		atkRefused(t, e.receive(atkCOSEHandoff(t, msg)), reason.BadSignature, ErrMalformed)
	})
	// "A receiver MUST ignore members it does not understand": a name that
	// differs from a defined one only in case, or folds to it, is such a
	// member. It is kept in Extra and never read as the defined member;
	// only the strict profile refuses it (caseVariant).
	for name, c := range map[string]struct{ p, variant string }{
		"case variant ISS":       {`{` + base + `,"iss":"` + string(atkPlanner) + `","ISS":"` + string(atkOther) + `"}`, "ISS"},
		"case variant Aud":       {`{` + base + `,"iss":"` + string(atkPlanner) + `","Aud":"spiffe://x"}`, "Aud"},
		"long s folds to s":      {`{` + base + `,"iss":"` + string(atkPlanner) + `","iſs":"` + string(atkOther) + `"}`, "iſs"},
		"dotless i folds to I":   {`{` + base + `,"iss":"` + string(atkPlanner) + `","ıss":"` + string(atkOther) + `"}`, "ıss"},
		"Kelvin sign folds to K": {`{` + base + `,"iss":"` + string(atkPlanner) + `","task":"a","tas\u212a":"b"}`, "tas\u212a"},
	} {
		t.Run("ignored "+name, func(t *testing.T) {
			in := e.receive(atkJSONHandoff(t, atkJWS(t, e.planner, atkHeader(e.plannerKID), c.p)))
			atkAccepted(t, in)
			assert.Equal(t, atkPlanner, in.Offer().Iss)
			assert.Equal(t, atkCoder, in.Offer().Aud)
			assert.Contains(t, in.Offer().Extra, c.variant)
			got, _, found := caseVariant(in.Offer().Extra, offerMembers)
			assert.True(t, found)
			assert.Equal(t, c.variant, got)
		})
	}
	t.Run("CBOR case variant ignored", func(t *testing.T) {
		var m map[string]any
		require.NoError(t, cbor.Unmarshal(atkCBORPayload(t, atkPlanner), &m))
		m["ISS"] = string(atkOther)
		msg := atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), atkCBOR(t, m))
		in := e.receive(atkCOSEHandoff(t, msg))
		require.True(t, in.Accepted(), in.Detail())
		assert.Equal(t, atkPlanner, in.Offer().Iss)
		assert.Equal(t, string(atkOther), in.Offer().Extra["ISS"])
		atkRefused(t, receive(t, e.agent(Limits{Strict: true}), atkCOSEHandoff(t, msg), Host{}), reason.BadSignature, ErrMalformed)
	})
}

// HC-12: Time and v are unsigned integers ("Time = uint"). Floats,
// exponents, negatives and integers beyond 2^64-1 are refused; an unknown member may hold any
// number and is kept as written (HC-01).
func TestAttack_HC12_Numbers(t *testing.T) {
	e := newAtkEnv(t)
	for name, c := range map[string]struct{ member, value string }{
		"iat float":            {"iat", "1793000000.0"},
		"iat exponent":         {"iat", "1.793e9"},
		"iat exponent integer": {"iat", "1793000000e0"},
		"iat upper exponent":   {"iat", "17930000000E-1"},
		"iat negative":         {"iat", "-1"},
		"iat minus zero":       {"iat", "-0"},
		"iat 2^64":             {"iat", "18446744073709551616"},
		"iat huge":             {"iat", "1" + strings.Repeat("0", 400)},
		"iat 1e400":            {"iat", "1e400"},
		"iat text":             {"iat", `"1793000000"`},
		"iat leading zero":     {"iat", "01793000000"},
		"iat plus":             {"iat", "+1793000000"},
		"exp negative":         {"exp", "-120"},
		"exp float":            {"exp", "1793000120.5"},
		"v float":              {"v", "1.0"},
		"v exponent":           {"v", "1e0"},
		"v negative":           {"v", "-1"},
		"v two":                {"v", "2"},
	} {
		t.Run(name, func(t *testing.T) {
			p := atkPayload(t, atkPlanner, "")
			i := strings.Index(p, `"`+c.member+`":`) + len(c.member) + 3
			j := i + strings.IndexAny(p[i:], ",}")
			p = p[:i] + c.value + p[j:]
			in := e.receive(atkJSONHandoff(t, atkJWS(t, e.planner, atkHeader(e.plannerKID), p)))
			atkRefused(t, in, reason.BadSignature, ErrMalformed)
			assert.NotErrorIs(t, in.Err(), ErrSignature)
		})
	}
	// Time = uint: an integer literal up to 2^64-1 is a Time; one this far
	// in the future is refused by the freshness check, not the decoder.
	for _, big := range []string{"9007199254740992", "18446744073709551615"} {
		t.Run("iat "+big+" decodes", func(t *testing.T) {
			p := atkPayload(t, atkPlanner, "")
			i := strings.Index(p, `"iat":`) + 6
			j := i + strings.IndexAny(p[i:], ",}")
			p = p[:i] + big + p[j:]
			in := e.receive(atkJSONHandoff(t, atkJWS(t, e.planner, atkHeader(e.plannerKID), p)))
			atkRefused(t, in, reason.Stale, ErrRejected)
			assert.NotErrorIs(t, in.Err(), ErrMalformed)
		})
	}
	t.Run("unknown members keep their numbers", func(t *testing.T) {
		big := "1" + strings.Repeat("0", 40)
		p := atkPayload(t, atkPlanner, `,"x-big":`+big+`,"x-f":1.5e300,"x-neg":-7,"x-mz":-0`)
		in := e.receive(atkJSONHandoff(t, atkJWS(t, e.planner, atkHeader(e.plannerKID), p)))
		atkAccepted(t, in)
		assert.Equal(t, json.Number(big), in.Offer().Extra["x-big"])
		assert.Equal(t, json.Number("1.5e300"), in.Offer().Extra["x-f"])
		assert.Equal(t, int64(-7), in.Offer().Extra["x-neg"])
		assert.Equal(t, json.Number("-0"), in.Offer().Extra["x-mz"], "-0 is not a negative integer")
	})
}

// atkCBORMember returns the offset of the value of member name in a CBOR
// payload the package encoded (a text key of fewer than 24 octets).
func atkCBORMember(t *testing.T, p []byte, name string) int {
	key := append([]byte{0x60 | byte(len(name))}, name...)
	i := bytes.Index(p, key)
	require.GreaterOrEqual(t, i, 0, name)
	return i + len(key)
}

func atkSplice(p []byte, at, drop int, insert ...byte) []byte {
	out := append([]byte(nil), p[:at]...)
	out = append(out, insert...)
	return append(out, p[at+drop:]...)
}

// HC-17: the CBOR payload of a COSE element signed by a trusted key is
// decoded strictly: shortest heads (preferred serialization), no indefinite
// lengths, no duplicate keys, no tags, bounded nesting, lengths within the
// input. The payload decoder is what refuses (ErrMalformed, not
// ErrSignature).
func TestAttack_HC17_CBORPayload(t *testing.T) {
	e := newAtkEnv(t)
	p := atkCBORPayload(t, atkPlanner)
	require.Equal(t, byte(0xa8), p[0], "a map of 8 members")
	v := atkCBORMember(t, p, "v")
	iat := atkCBORMember(t, p, "iat")
	require.Equal(t, byte(0x1a), p[iat])
	typ := atkCBORMember(t, p, "type")
	bumped := append([]byte{p[0] + 1}, p[1:]...)
	withMember := func(key string, raw ...byte) []byte {
		return append(append(bytes.Clone(bumped), atkCBOR(t, key)...), raw...)
	}
	var deep []byte
	for range 40 {
		deep = append(deep, 0x81)
	}
	deep = append(deep, 0x01)
	iatF := make([]byte, 9)
	iatF[0] = 0xfb
	binary.BigEndian.PutUint64(iatF[1:], math.Float64bits(atkIat))
	require.Less(t, len(p), 256)

	cases := map[string][]byte{
		"duplicate key":                withMember("v", 0x01),
		"tag 1 on iat":                 atkSplice(p, iat, 0, 0xc1),
		"self-described CBOR tag":      append([]byte{0xd9, 0xd9, 0xf7}, p...),
		"tag 24 wrapping the payload":  append([]byte{0xd8, 0x18, 0x58, byte(len(p))}, p...),
		"text length beyond input":     withMember("x", 0x7b, 0, 0, 0x01, 0, 0, 0, 0, 0),
		"bytes length beyond input":    withMember("x", 0x5a, 0xff, 0xff, 0xff, 0xff),
		"array length beyond input":    withMember("x", 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"map length beyond input":      withMember("x", 0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"float iat":                    atkSplice(p, iat, 5, iatF...),
		"negative exp":                 atkSplice(p, atkCBORMember(t, p, "exp"), 5, 0x38, 0x77),
		"trailing octet":               append(bytes.Clone(p), 0x00),
		"truncated":                    p[:len(p)-1],
		"not a map":                    atkCBOR(t, []any{"offer"}),
		"invalid UTF-8 in a text":      withMember("x", 0x62, 0xff, 0xfe),
		"reserved additional info 28":  withMember("x", 0x1c),
		"break outside indefinite":     withMember("x", 0xff),
		"half-precision iat":           atkSplice(p, iat, 5, 0xf9, 0x3c, 0x00),
		"v as byte string":             atkSplice(p, v, 1, 0x41, 0x01),
		"text iss key as bytes string": bytes.Replace(p, []byte("\x63iss"), []byte("\x43iss"), 1),
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			msg := atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), payload)
			in := e.receive(atkCOSEHandoff(t, msg))
			atkRefused(t, in, reason.BadSignature, ErrMalformed)
			assert.NotErrorIs(t, in.Err(), ErrSignature, "the payload decoder refuses, not the signature check")
		})
	}
	// Control: the unmodified payload in the same envelope is accepted.
	atkAccepted(t, e.receive(atkCOSEHandoff(t, atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), p))))

	// Valid CBOR the draft does not forbid (RFC 8949 sections 3.2.2, 3.3,
	// 3.4.3, 4.1; the draft asks for no preferred or deterministic
	// encoding and "* text => any" takes any value): accepted by default,
	// refused by the strict profile's decoder.
	allowed := map[string][]byte{
		"indefinite-length map":      append(append([]byte{0xbf}, p[1:]...), 0xff),
		"indefinite-length text":     atkSplice(p, typ, 6, 0x7f, 0x65, 'o', 'f', 'f', 'e', 'r', 0xff),
		"bignum tag in an extension": withMember("x", 0xc2, 0x41, 0x01),
		"non-minimal integer":        atkSplice(p, v, 1, 0x18, 0x01),
		"non-minimal map head":       atkSplice(p, 0, 1, 0xb8, 0x08),
		"non-minimal text head":      atkSplice(p, typ, 1, 0x78, 0x05),
		"non-minimal iat":            atkSplice(p, iat, 1, 0x1b, 0, 0, 0, 0),
		"undefined value":            withMember("x", 0xf7),
		"simple value":               withMember("x", 0xf0),
		"NaN":                        withMember("x", 0xf9, 0x7e, 0x00),
		"negative beyond int64":      withMember("x", 0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
	}
	for name, payload := range allowed {
		t.Run("accepted "+name, func(t *testing.T) {
			msg := atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), payload)
			atkAccepted(t, e.receive(atkCOSEHandoff(t, msg)))
			_, err := decodeCBOR(payload, Limits{}.withDefaults(), profileStrict)
			assert.ErrorIs(t, err, ErrMalformed, "the strict profile refuses it")
		})
	}
}

func atkRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// atkOctetArray is a JSON Handoff whose offer is msg as an array of numbers.
func atkOctetArray(t *testing.T, msg []byte) []byte {
	ints := make([]int, len(msg))
	for i, b := range msg {
		ints[i] = int(b)
	}
	b, err := json.Marshal(map[string]any{"offer": ints})
	require.NoError(t, err)
	return b
}

// HC-61: a 10 MB input is refused before it is parsed, let alone verified:
// the size check comes first, so garbage that would not parse is reported
// as too large, not as malformed.
func TestAttack_HC61_TenMegabytes(t *testing.T) {
	e := newAtkEnv(t)
	const tenMB = 10 << 20
	valid := atkJWS(t, e.planner, atkHeader(e.plannerKID), atkPayload(t, atkPlanner, ""))
	cases := map[string][]byte{
		"JSON, invalid UTF-8 after the brace": append([]byte("{"), bytes.Repeat([]byte{0xff}, tenMB)...),
		"JSON, one huge offer string":         atkJSONHandoff(t, valid+strings.Repeat("A", tenMB)),
		"JSON, valid offer and 10 MB chain":   atkJSONHandoff(t, valid, atkRepeat(valid, tenMB/len(valid)+1)...),
		"CBOR, huge byte string":              atkCBOR(t, map[string]any{"offer": append([]byte{0xd2}, make([]byte, tenMB)...)}),
		"CBOR, garbage":                       append([]byte{0xa1}, bytes.Repeat([]byte{0xff}, tenMB)...),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			require.Greater(t, len(data), tenMB-len(valid))
			in := e.receive(data)
			atkRefused(t, in, reason.BadSignature, ErrTooLarge)
			assert.NotErrorIs(t, in.Err(), ErrMalformed, "refused before parsing")
			assert.Nil(t, in.Handoff())
		})
	}
	t.Run("element over the element limit", func(t *testing.T) {
		in := e.receive(atkJSONHandoff(t, valid+strings.Repeat("A", defaultMaxElementSize)))
		atkRefused(t, in, reason.BadSignature, ErrTooLarge)
	})
	t.Run("OpenOffer and HandleStatus", func(t *testing.T) {
		_, err := OpenOffer(Signed{Format: JWS, Octets: bytes.Repeat([]byte{'A'}, tenMB)}, e.trust, Limits{})
		assert.ErrorIs(t, err, ErrTooLarge)
		assert.Equal(t, reason.BadSignature, ReasonOf(err))
		_, err = OpenOffer(Signed{Format: COSE, Octets: append([]byte{0xd2}, make([]byte, tenMB)...)}, e.trust, Limits{})
		assert.ErrorIs(t, err, ErrTooLarge)
		_, err = statusErr(e.agent(Limits{}).HandleStatus(context.Background(), bytes.Repeat([]byte{'A'}, tenMB)))
		assert.ErrorIs(t, err, ErrTooLarge)
		assert.Equal(t, reason.BadSignature, ReasonOf(err))
	})
}

// HC-50: a chain of 10,000 elements is refused as too-deep before any chain
// signature is verified. Every element would fail verification (its
// signature is tampered with), so a too-deep answer proves that none was
// verified: a verified element would have ended processing with
// bad-signature first.
func TestAttack_HC50_TenThousandElementChain(t *testing.T) {
	e := newAtkEnv(t)
	const n = 10000
	otherSigner, err := NewSigner(e.other, JWS, nil)
	require.NoError(t, err)
	element, err := otherSigner.SignOffer(&Offer{Hop: atkHop(t), Dialog: "ctx-atk", Iss: atkOther, Aud: atkPlanner, Iat: atkIat - 5, Exp: atkExp})
	require.NoError(t, err)
	_, err = OpenOffer(element, e.trust, Limits{})
	require.NoError(t, err, "the untouched element verifies")
	bad := bytes.Clone(element.Octets)
	// A signature character replaced by another of the alphabet: still
	// well formed, no longer valid.
	if bad[len(bad)-10] == 'A' {
		bad[len(bad)-10] = 'B'
	} else {
		bad[len(bad)-10] = 'A'
	}
	badSigned := Signed{Format: JWS, Octets: bad}
	_, err = OpenOffer(badSigned, e.trust, Limits{})
	require.ErrorIs(t, err, ErrSignature, "the element must not verify")

	offer := func(prev digest.Digest) Signed {
		s, err := e.jwsSigner.SignOffer(&Offer{Hop: atkHop(t), Dialog: "ctx-atk", Iss: atkPlanner, Aud: atkCoder, Iat: atkIat, Exp: atkExp, Prev: &prev})
		require.NoError(t, err)
		return s
	}
	t.Run("tampered elements, limits raised to carry them", func(t *testing.T) {
		chain := make([]Signed, n)
		for i := range chain {
			chain[i] = badSigned
		}
		lim := Limits{MaxHandoffSize: 64 << 20}
		for _, enc := range []Encoding{JSON, CBOR} {
			data := encodeHandoff(t, &Handoff{Offer: offer(badSigned.Digest()), Chain: chain}, enc)
			require.Greater(t, len(data), defaultMaxHandoffSize)
			in := receive(t, e.agent(lim), data, Host{})
			atkRefused(t, in, reason.TooDeep, ErrRejected)
			assert.Empty(t, in.Links())
			assert.Empty(t, in.Chain())
		}
	})
	t.Run("small elements, default limits", func(t *testing.T) {
		tiny := Signed{Format: JWS, Octets: []byte("e30.e30.AAAA")}
		chain := make([]Signed, n)
		for i := range chain {
			chain[i] = tiny
		}
		for _, enc := range []Encoding{JSON, CBOR} {
			data := encodeHandoff(t, &Handoff{Offer: offer(tiny.Digest()), Chain: chain}, enc)
			require.Less(t, len(data), defaultMaxHandoffSize)
			in := e.receive(data)
			atkRefused(t, in, reason.TooDeep, ErrRejected)
		}
	})
	t.Run("one over the limit", func(t *testing.T) {
		chain := make([]Signed, defaultMaxChain+1)
		for i := range chain {
			chain[i] = badSigned
		}
		in := e.receive(encodeHandoff(t, &Handoff{Offer: offer(badSigned.Digest()), Chain: chain}, JSON))
		atkRefused(t, in, reason.TooDeep, ErrRejected)
		// At the limit, the elements are verified, and the first fails.
		in = e.receive(encodeHandoff(t, &Handoff{Offer: offer(badSigned.Digest()), Chain: chain[1:]}, JSON))
		atkRefused(t, in, reason.BadSignature, ErrSignature)
	})
}

// HC-19, HC-60: a COSE element where a JWS is expected and the reverse.
func TestAttack_HC19_FormatConfusion(t *testing.T) {
	e := newAtkEnv(t)
	tok := atkJWS(t, e.planner, atkHeader(e.plannerKID), atkPayload(t, atkPlanner, ""))
	msg := atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), atkCBORPayload(t, atkPlanner))

	cases := map[string]struct {
		data    []byte
		classes []error
	}{
		// JSON: a JWS is its compact text, a COSE element base64url text.
		"JSON, base64url of a JWS":              {atkJSONHandoff(t, atkB64([]byte(tok))), []error{ErrMalformed}},
		"JSON, COSE in standard base64":         {atkJSONHandoff(t, base64.StdEncoding.EncodeToString(msg)), []error{ErrMalformed}},
		"JSON, COSE in base64url with padding":  {atkJSONHandoff(t, base64.URLEncoding.EncodeToString(msg)+"="), []error{ErrMalformed}},
		"JSON, untagged COSE":                   {atkJSONHandoff(t, atkB64(msg[1:])), []error{ErrMalformed}},
		"JSON, COSE as an array of octets":      {atkOctetArray(t, msg), []error{ErrMalformed}},
		"CBOR, JWS as a byte string":            {atkCBOR(t, map[string]any{"offer": []byte(tok)}), []error{ErrMalformed}},
		"CBOR, COSE as base64url text":          {atkCBOR(t, map[string]any{"offer": atkB64(msg)}), []error{ErrMalformed}},
		"CBOR, COSE embedded as a CBOR item":    {append(append([]byte{0xa1}, atkCBOR(t, "offer")...), msg...), []error{ErrMalformed}},
		"CBOR, JWS octets wrapped in tag 18":    {atkCBOR(t, map[string]any{"offer": append([]byte{0xd2}, tok...)}), []error{ErrSignature, cose.ErrMalformed}},
		"JWS carrying the CBOR payload":         {atkJSONHandoff(t, atkJWS(t, e.planner, atkHeader(e.plannerKID), string(atkCBORPayload(t, atkPlanner)))), []error{ErrMalformed}},
		"COSE carrying the JSON payload":        {atkCOSEHandoff(t, atkCOSE(t, e.planner, atkProtected(t, e.plannerKID), []byte(atkPayload(t, atkPlanner, "")))), []error{ErrMalformed}},
		"JWS typed as the COSE content type":    {atkJSONHandoff(t, atkJWS(t, e.planner, `{"alg":"ES256","kid":"`+e.plannerKID+`","typ":"`+cose.ContentType+`"}`, atkPayload(t, atkPlanner, ""))), []error{ErrSignature, jws.ErrType}},
		"COSE with alg as the JOSE name":        {atkCOSEHandoff(t, atkCOSE(t, e.planner, atkCBOR(t, map[int64]any{1: "ES256", 3: cose.ContentType, 4: []byte(e.plannerKID)}), atkCBORPayload(t, atkPlanner))), []error{ErrSignature, cose.ErrAlg}},
		"JWS with the COSE alg number":          {atkJSONHandoff(t, atkJWS(t, e.planner, `{"alg":-7,"kid":"`+e.plannerKID+`","typ":"agent-handoff+jwt"}`, atkPayload(t, atkPlanner, ""))), []error{ErrSignature, jws.ErrMalformed}},
		"JSON Handoff with a CBOR Handoff item": {atkJSONHandoff(t, string(atkCOSEHandoff(t, msg))), []error{ErrMalformed}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			atkRefused(t, e.receive(c.data), reason.BadSignature, c.classes...)
		})
	}
	t.Run("Signed with the other Format", func(t *testing.T) {
		_, err := OpenOffer(Signed{Format: JWS, Octets: msg}, e.trust, Limits{})
		assert.ErrorIs(t, err, jws.ErrMalformed)
		assert.Equal(t, reason.BadSignature, ReasonOf(err))
		_, err = OpenOffer(Signed{Format: COSE, Octets: []byte(tok)}, e.trust, Limits{})
		assert.ErrorIs(t, err, cose.ErrMalformed)
		assert.Equal(t, reason.BadSignature, ReasonOf(err))
		_, err = OpenOffer(Signed{Format: 7, Octets: []byte(tok)}, e.trust, Limits{})
		assert.ErrorIs(t, err, ErrMalformed)
		assert.Equal(t, reason.BadSignature, ReasonOf(err))
	})
	t.Run("controls", func(t *testing.T) {
		atkAccepted(t, e.receive(atkJSONHandoff(t, tok)))
		atkAccepted(t, e.receive(atkCBOR(t, map[string]any{"offer": tok})))
		atkAccepted(t, e.receive(atkJSONHandoff(t, atkB64(msg))))
		atkAccepted(t, e.receive(atkCOSEHandoff(t, msg)))
	})
}

// HC-55: a status in the offer's place is refused (type is "status"), and
// Agent.HandleStatus refuses an offer; in both forms.
func TestAttack_HC55_StatusAsOfferAndReverse(t *testing.T) {
	for _, f := range []Format{JWS, COSE} {
		t.Run(f.String(), func(t *testing.T) {
			e := newAtkEnv(t)
			signer := map[Format]*Signer{JWS: e.jwsSigner, COSE: e.coseSigner}[f]
			status, err := signer.SignStatus(&Status{Hop: atkHop(t), Offer: digest.SHA256([]byte("an offer")), Iss: atkPlanner, Aud: atkCoder,
				Iat: atkIat, State: state.Canceled})
			require.NoError(t, err)
			prev := status.Digest()
			offer, err := signer.SignOffer(&Offer{Hop: atkHop(t), Dialog: "ctx-atk", Iss: atkPlanner, Aud: atkCoder, Iat: atkIat, Exp: atkExp, Prev: &prev})
			require.NoError(t, err)

			for _, enc := range []Encoding{JSON, CBOR} {
				in := e.receive(encodeHandoff(t, &Handoff{Offer: status}, enc))
				atkRefused(t, in, reason.BadSignature, ErrMalformed)
				assert.Nil(t, in.Offer())
				// A status as a chain element is refused too.
				in = e.receive(encodeHandoff(t, &Handoff{Offer: offer, Chain: []Signed{status}}, enc))
				atkRefused(t, in, reason.BadSignature, ErrMalformed)
			}

			a := e.agent(Limits{})
			for name, data := range map[string][]byte{
				"signed offer":     offer.Octets,
				"Handoff object":   encodeHandoff(t, &Handoff{Offer: offer}, JSON),
				"Handoff in CBOR":  encodeHandoff(t, &Handoff{Offer: offer}, CBOR),
				"status in a JSON": atkJSONHandoff(t, string(status.Octets)),
			} {
				res, err := statusErr(a.HandleStatus(context.Background(), data))
				assert.Nil(t, res, name)
				assert.ErrorIs(t, err, ErrMalformed, name)
				assert.Equal(t, reason.BadSignature, ReasonOf(err), name)
			}
			// Control: the status itself verifies (it names no hop of this
			// agent, so it is a policy rejection, after verification).
			_, err = statusErr(a.HandleStatus(context.Background(), status.Octets))
			assert.Equal(t, reason.Policy, ReasonOf(err))
		})
	}
}

// HC-20: one signed offer in JWS form, and every way of writing "the same"
// token differently: each is refused, and the high-S twin, which verifies,
// is equivocation (the replay memory is keyed on (iss, hop)).
func TestMalleability_HC20_JWS(t *testing.T) {
	e := newAtkEnv(t)
	orig, err := e.jwsSigner.SignOffer(&Offer{Hop: atkHop(t), Dialog: "ctx-atk", Iss: atkPlanner, Aud: atkCoder, Iat: atkIat, Exp: atkExp})
	require.NoError(t, err)
	tok := string(orig.Octets)
	seg := strings.Split(tok, ".")
	require.Len(t, seg, 3)
	join := func(s []string) string { return strings.Join(s, ".") }

	variants := map[string]string{}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	unusedBits := map[int]int{2: 4, 3: 2} // len % 4 -> unused low bits of the last character
	for i, name := range []string{"header", "payload", "signature"} {
		if bits, ok := unusedBits[len(seg[i])%4]; ok {
			last := strings.IndexByte(alphabet, seg[i][len(seg[i])-1])
			for x := 1; x < 1<<bits; x++ {
				s := append([]string(nil), seg...)
				s[i] = s[i][:len(s[i])-1] + string(alphabet[last^x])
				variants[fmt.Sprintf("%s: unused low bits %b set", name, x)] = join(s)
			}
		}
		for _, pad := range []string{"=", "==", "==="} {
			s := append([]string(nil), seg...)
			s[i] += pad
			variants[name+": padding "+pad] = join(s)
		}
		for _, ws := range []string{" ", "\n", "\r\n", "\t"} {
			s := append([]string(nil), seg...)
			s[i] = s[i][:len(s[i])/2] + ws + s[i][len(s[i])/2:]
			variants[fmt.Sprintf("%s: %q inside", name, ws)] = join(s)
		}
		s := append([]string(nil), seg...)
		s[i] = strings.NewReplacer("-", "+", "_", "/").Replace(s[i]) + "+"
		variants[name+": standard alphabet"] = join(s)
	}
	_, ok := unusedBits[len(seg[2])%4]
	require.True(t, ok, "a 64-octet signature has unused bits")
	for _, ws := range []string{" ", "\n", "\r\n", "\t"} {
		variants[fmt.Sprintf("%q before", ws)] = ws + tok
		variants[fmt.Sprintf("%q after", ws)] = tok + ws
		variants[fmt.Sprintf("%q after the first dot", ws)] = seg[0] + "." + ws + seg[1] + "." + seg[2]
	}
	variants["trailing dot"] = tok + "."
	variants["JWS JSON serialization"] = `{"protected":"` + seg[0] + `","payload":"` + seg[1] + `","signature":"` + seg[2] + `"}`

	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, tok, v)
			// Text that is not three base64url segments does not even
			// parse as a Handoff element; stray low bits are caught by the
			// envelope's canonical decoding.
			class := []error{ErrMalformed}
			if strings.Contains(name, "unused low bits") {
				class = []error{ErrSignature, jws.ErrMalformed}
			}
			atkRefused(t, e.receive(atkJSONHandoff(t, v)), reason.BadSignature, class...)
			_, err := OpenOffer(Signed{Format: JWS, Octets: []byte(v)}, e.trust, Limits{})
			assert.ErrorIs(t, err, ErrSignature)
			assert.ErrorIs(t, err, jws.ErrMalformed)
			assert.Equal(t, reason.BadSignature, ReasonOf(err))
		})
	}
	t.Run("high-S twin is equivocation", func(t *testing.T) {
		atkTwinEquivocates(t, e, orig)
	})
	atkAccepted(t, e.receive(atkJSONHandoff(t, tok)))
}

// atkTwinEquivocates receives orig, then its high-S twin, on one receiver.
func atkTwinEquivocates(t *testing.T, e *atkEnv, orig Signed) {
	twin := atkTwin(t, orig)
	a := e.agent(Limits{})
	atkAccepted(t, receive(t, a, encodeHandoff(t, &Handoff{Offer: orig}, CBOR), Host{}))
	in := receive(t, a, encodeHandoff(t, &Handoff{Offer: twin}, CBOR), Host{})
	assert.False(t, in.Accepted())
	assert.False(t, in.Retransmission())
	assert.Equal(t, reason.Equivocation, in.Reason())
	assert.True(t, in.First().Equal(orig.Digest()))
}

// atkBstrHead is a byte string head for n octets in the given width (0:
// the shortest, else 1, 2, 4 or 8 octets of length).
func atkBstrHead(n, width int) []byte {
	switch width {
	case 1:
		return []byte{0x58, byte(n)}
	case 2:
		return []byte{0x59, byte(n >> 8), byte(n)}
	case 4:
		return []byte{0x5a, 0, 0, byte(n >> 8), byte(n)}
	case 8:
		return []byte{0x5b, 0, 0, 0, 0, 0, 0, byte(n >> 8), byte(n)}
	}
	switch {
	case n < 24:
		return []byte{0x40 | byte(n)}
	case n < 256:
		return atkBstrHead(n, 1)
	}
	return atkBstrHead(n, 2)
}

// HC-20: one signed offer in COSE form, and every way of writing "the same"
// message differently. Those the RFCs make valid verify and are
// equivocation after the original; the others are refused; the strict
// profile refuses all; the high-S twin, which verifies, is equivocation.
func TestMalleability_HC20_COSE(t *testing.T) {
	e := newAtkEnv(t)
	orig, err := e.coseSigner.SignOffer(&Offer{Hop: atkHop(t), Dialog: "ctx-atk", Iss: atkPlanner, Aud: atkCoder, Iat: atkIat, Exp: atkExp})
	require.NoError(t, err)
	var parts struct {
		_           struct{} `cbor:",toarray"`
		Protected   []byte
		Unprotected map[any]any
		Payload     []byte
		Signature   []byte
	}
	var tag cbor.RawTag
	require.NoError(t, cbor.Unmarshal(orig.Octets, &tag))
	require.NoError(t, cbor.Unmarshal(tag.Content, &parts))
	prot, payload, sig := parts.Protected, parts.Payload, parts.Signature

	build := func(tagHead, arrayHead []byte, pw, uw, sw int, unprotected []byte) []byte {
		var b []byte
		b = append(b, tagHead...)
		b = append(b, arrayHead...)
		b = append(append(b, atkBstrHead(len(prot), pw)...), prot...)
		b = append(b, unprotected...)
		b = append(append(b, atkBstrHead(len(payload), uw)...), payload...)
		return append(append(b, atkBstrHead(len(sig), sw)...), sig...)
	}
	tag18, arr4, empty := []byte{0xd2}, []byte{0x84}, []byte{0xa0}
	require.Equal(t, orig.Octets, build(tag18, arr4, 0, 0, 0, empty), "the layout is understood")

	variants := map[string][]byte{
		"tag head 0xd8 0x12":         build([]byte{0xd8, 0x12}, arr4, 0, 0, 0, empty),
		"tag head 0xd9 0x00 0x12":    build([]byte{0xd9, 0, 0x12}, arr4, 0, 0, 0, empty),
		"array head 0x98 0x04":       build(tag18, []byte{0x98, 4}, 0, 0, 0, empty),
		"protected head 2 octets":    build(tag18, arr4, 2, 0, 0, empty),
		"payload head 2 octets":      build(tag18, arr4, 0, 2, 0, empty),
		"payload head 4 octets":      build(tag18, arr4, 0, 4, 0, empty),
		"payload head 8 octets":      build(tag18, arr4, 0, 8, 0, empty),
		"signature head 2 octets":    build(tag18, arr4, 0, 0, 2, empty),
		"signature head 8 octets":    build(tag18, arr4, 0, 0, 8, empty),
		"unprotected map head wide":  build(tag18, arr4, 0, 0, 0, []byte{0xb8, 0x00}),
		"unprotected kid":            build(tag18, arr4, 0, 0, 0, append([]byte{0xa1, 0x04}, append(atkBstrHead(len(e.plannerKID), 0), e.plannerKID...)...)),
		"unprotected alg":            build(tag18, arr4, 0, 0, 0, []byte{0xa1, 0x01, 0x26}),
		"unprotected content type":   build(tag18, arr4, 0, 0, 0, append([]byte{0xa1, 0x03}, atkCBOR(t, cose.ContentType)...)),
		"unprotected text label":     build(tag18, arr4, 0, 0, 0, []byte{0xa1, 0x61, 'x', 0x01}),
		"unprotected x5chain":        build(tag18, arr4, 0, 0, 0, []byte{0xa1, 0x18, 0x21, 0x41, 0x00}),
		"unprotected counter sig":    build(tag18, arr4, 0, 0, 0, []byte{0xa1, 0x0b, 0x40}),
		"unprotected empty array":    build(tag18, arr4, 0, 0, 0, []byte{0x80}),
		"unprotected null":           build(tag18, arr4, 0, 0, 0, []byte{0xf6}),
		"unprotected indefinite map": build(tag18, arr4, 0, 0, 0, []byte{0xbf, 0xff}),
		"indefinite array":           append(build(tag18, []byte{0x9f}, 0, 0, 0, empty), 0xff),
		"untagged":                   build(nil, arr4, 0, 0, 0, empty),
		"tag 98 COSE_Sign":           build([]byte{0xd8, 0x62}, arr4, 0, 0, 0, empty),
		"tag 18 twice":               build([]byte{0xd2, 0xd2}, arr4, 0, 0, 0, empty),
		"trailing octet":             append(bytes.Clone(orig.Octets), 0x00),
		"trailing break":             append(bytes.Clone(orig.Octets), 0xff),
		"five elements":              append(build(tag18, []byte{0x85}, 0, 0, 0, empty), 0x40),
	}
	// The payload as an indefinite-length byte string of one chunk.
	indef := append([]byte{0xd2, 0x84}, append(atkBstrHead(len(prot), 0), prot...)...)
	indef = append(indef, 0xa0, 0x5f)
	indef = append(append(indef, atkBstrHead(len(payload), 0)...), payload...)
	indef = append(indef, 0xff)
	variants["payload indefinite length"] = append(append(indef, atkBstrHead(len(sig), 0)...), sig...)

	// Valid CBOR that is not in preferred serialization, and unprotected
	// parameters that decide nothing, are valid COSE_Sign1 messages: RFC
	// 8949 makes longer heads and indefinite lengths valid, RFC 9052
	// section 3 leaves the unprotected bucket to the sender, and the draft
	// asks for alg and content type in the protected header only. They
	// verify, and each is a different element (HC-20): after the original,
	// it is equivocation, never a second acceptance. The strict profile
	// refuses them.
	valid := map[string]bool{
		"tag head 0xd8 0x12": true, "tag head 0xd9 0x00 0x12": true, "array head 0x98 0x04": true,
		"protected head 2 octets": true, "payload head 2 octets": true, "payload head 4 octets": true,
		"payload head 8 octets": true, "signature head 2 octets": true, "signature head 8 octets": true,
		"unprotected map head wide": true, "unprotected text label": true, "unprotected x5chain": true,
		"unprotected counter sig": true, "unprotected indefinite map": true, "indefinite array": true,
		"payload indefinite length": true,
	}
	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, orig.Octets, v)
			_, err := OpenOffer(Signed{Format: COSE, Octets: v}, e.trust, Limits{Strict: true})
			assert.ErrorIs(t, err, ErrSignature, "strict profile")
			assert.Equal(t, reason.BadSignature, ReasonOf(err))
			if valid[name] {
				_, err := OpenOffer(Signed{Format: COSE, Octets: v}, e.trust, Limits{})
				require.NoError(t, err, "valid COSE_Sign1")
				a := e.agent(Limits{})
				atkAccepted(t, receive(t, a, atkCOSEHandoff(t, orig.Octets), Host{}))
				twin := receive(t, a, atkCOSEHandoff(t, v), Host{})
				assert.False(t, twin.Accepted())
				assert.Equal(t, reason.Equivocation, twin.Reason(), "the same (iss, hop), other octets")
				assert.Equal(t, reason.Equivocation, receive(t, a, atkJSONHandoff(t, atkB64(v)), Host{}).Reason())
				return
			}
			// An element that does not start with tag 18 is not taken for
			// a COSE_Sign1 by the Handoff parser; the others reach the
			// envelope, which refuses them.
			class := []error{ErrSignature, cose.ErrMalformed}
			if _, ok := coseTagLen(v); !ok {
				class = []error{ErrMalformed}
			}
			atkRefused(t, e.receive(atkCOSEHandoff(t, v)), reason.BadSignature, class...)
			atkRefused(t, e.receive(atkJSONHandoff(t, atkB64(v))), reason.BadSignature, class...)
			_, err = OpenOffer(Signed{Format: COSE, Octets: v}, e.trust, Limits{})
			assert.ErrorIs(t, err, ErrSignature)
			assert.ErrorIs(t, err, cose.ErrMalformed)
			assert.Equal(t, reason.BadSignature, ReasonOf(err))
		})
	}
	t.Run("base64url with unused low bits set", func(t *testing.T) {
		text := atkB64(orig.Octets)
		require.NotZero(t, len(text)%4, "this message length leaves unused bits")
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, text[len(text)-1])
		bits := map[int]int{2: 4, 3: 2}[len(text)%4]
		for x := 1; x < 1<<bits; x++ {
			v := text[:len(text)-1] + string(alphabet[last^x])
			atkRefused(t, e.receive(atkJSONHandoff(t, v)), reason.BadSignature, ErrMalformed)
		}
	})
	t.Run("high-S twin is equivocation", func(t *testing.T) {
		atkTwinEquivocates(t, e, orig)
	})
	atkAccepted(t, e.receive(atkCOSEHandoff(t, orig.Octets)))
}
