package learnlog

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

// Errors a program can branch on with errors.Is.
var (
	// ErrHead: the proof is not a well-formed SignedHead.
	ErrHead = errors.New("learnlog: malformed signed head")
	// ErrUntrustedKey: the kid is not the JWK Thumbprint of a key the
	// caller trusts for the producer, or the alg is not that key's.
	ErrUntrustedKey = errors.New("learnlog: head not signed by a trusted producer key")
	// ErrSignature: the JWS does not verify, or its payload is not the head.
	ErrSignature = errors.New("learnlog: head signature does not verify")
)

// Key is a key the caller trusts for a record's producer, pinned to one
// JWS algorithm.
type Key struct {
	// Public is the public key.
	Public crypto.PublicKey
	// Alg is the one algorithm this key verifies. Empty means ES256.
	Alg jose.SignatureAlgorithm
}

// Thumbprint is the key's JWK Thumbprint (RFC 7638, SHA-256, base64url
// without padding): the kid a head signed with it carries.
func (k Key) Thumbprint() (string, error) {
	t, err := (&jose.JSONWebKey{Key: k.Public}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(t), nil
}

func (k Key) alg() jose.SignatureAlgorithm {
	if k.Alg == "" {
		return jose.ES256
	}
	return k.Alg
}

// Checker checks "learnlog-head" references. Register it in
// handoff.Config.RefCheckers under ref.KindLearnlogHead. The zero value
// trusts no key, so every head is unverifiable.
type Checker struct {
	// Keys are the keys the caller trusts for the producer of the records
	// whose heads it receives.
	Keys []Key
}

var _ ref.Checker = (*Checker)(nil)

// Head is a verified Learnlog head.
type Head struct {
	RecordHash string
	Seq        uint64
	EntryHash  string
	// Time is the head's time member as decoded: Learnlog defines it.
	Time any
	// KID is the JWK Thumbprint of the key that signed it.
	KID string
}

// jsonValue turns a value of the handoff data model (decoded JSON or
// CBOR) into a JSON-marshalable value, refusing what JSON cannot carry.
func jsonValue(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			a[i] = c
		}
		return a, nil
	case string, bool, nil, json.Number:
		return t, nil
	case int64:
		return json.Number(strconv.FormatInt(t, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(t, 10)), nil
	case *big.Int:
		// An integer beyond 64 bits: a JSON head's integer carried in a
		// CBOR offer as a bignum (RFC 8949 section 6.2) comes back as the
		// same integer.
		return json.Number(t.String()), nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("%w: number %v has no JSON form", ErrHead, t)
		}
		return t, nil
	}
	return nil, fmt.Errorf("%w: a %T has no JSON form", ErrHead, v)
}

// canonical is the RFC 8785 form of a data-model value.
func canonical(v any) ([]byte, error) {
	j, err := jsonValue(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHead, err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("%w: JCS: %v", ErrHead, err)
	}
	return c, nil
}

// Canonical returns the JCS (RFC 8785) form of a SignedHead as decoded
// (a ContextRef's proof): the octets dig covers.
func Canonical(signedHead any) ([]byte, error) {
	if _, ok := signedHead.(map[string]any); !ok {
		return nil, fmt.Errorf("%w: proof is %T, want an object", ErrHead, signedHead)
	}
	return canonical(signedHead)
}

// HeadDigest is dig for a SignedHead (appendix B): SHA-256 of Canonical.
func HeadDigest(signedHead any) (digest.Digest, error) {
	c, err := Canonical(signedHead)
	if err != nil {
		return digest.Digest{}, err
	}
	return digest.SHA256(c), nil
}

// parseHead splits a SignedHead into its JWS and its other members, and
// reads the four head members.
func parseHead(signedHead any) (string, map[string]any, Head, error) {
	var h Head
	m, ok := signedHead.(map[string]any)
	if !ok {
		return "", nil, h, fmt.Errorf("%w: proof is %T, want an object", ErrHead, signedHead)
	}
	token, ok := m["jws"].(string)
	if !ok {
		return "", nil, h, fmt.Errorf("%w: no jws text member", ErrHead)
	}
	members := make(map[string]any, len(m)-1)
	for k, v := range m {
		if k != "jws" {
			members[k] = v
		}
	}
	if h.RecordHash, ok = m["record_hash"].(string); !ok {
		return "", nil, h, fmt.Errorf("%w: record_hash is not text", ErrHead)
	}
	if h.EntryHash, ok = m["entry_hash"].(string); !ok {
		return "", nil, h, fmt.Errorf("%w: entry_hash is not text", ErrHead)
	}
	seq, err := uintOf(m["seq"])
	if err != nil {
		return "", nil, h, err
	}
	h.Seq = seq
	if h.Time, ok = m["time"]; !ok {
		return "", nil, h, fmt.Errorf("%w: no time", ErrHead)
	}
	return token, members, h, nil
}

func uintOf(v any) (uint64, error) {
	// JSON numbers are compared as JCS compares them: 41, 41.0 and 4.1e1
	// are one value (RFC 8785 section 3.2.2.3).
	var f float64
	switch t := v.(type) {
	case uint64:
		return t, nil
	case int64:
		f = float64(t)
	case float64:
		f = t
	case json.Number:
		if n, err := strconv.ParseUint(t.String(), 10, 64); err == nil {
			return n, nil
		}
		var err error
		if f, err = strconv.ParseFloat(t.String(), 64); err != nil {
			f = -1
		}
	default:
		f = -1
	}
	if f < 0 || f != math.Trunc(f) || f > 1<<53 {
		return 0, fmt.Errorf("%w: seq is not a non-negative integer", ErrHead)
	}
	return uint64(f), nil
}

// Verify verifies a SignedHead as decoded (a ContextRef's proof) against
// the trusted producer keys and returns the head. It does not compute dig.
// The error wraps ErrHead, ErrUntrustedKey or ErrSignature.
func (c *Checker) Verify(signedHead any) (*Head, error) {
	token, members, h, err := parseHead(signedHead)
	if err != nil {
		return nil, err
	}
	algs := []jose.SignatureAlgorithm{}
	for _, k := range c.Keys {
		algs = append(algs, k.alg())
	}
	if len(algs) == 0 {
		return nil, fmt.Errorf("%w: no producer key is trusted", ErrUntrustedKey)
	}
	sig, err := jose.ParseSignedCompact(token, algs)
	if err != nil {
		return nil, fmt.Errorf("%w: jws: %v", ErrSignature, err)
	}
	if len(sig.Signatures) != 1 {
		return nil, fmt.Errorf("%w: jws has %d signatures", ErrHead, len(sig.Signatures))
	}
	hdr := sig.Signatures[0].Protected
	if hdr.KeyID == "" {
		return nil, fmt.Errorf("%w: jws has no kid", ErrUntrustedKey)
	}
	var key *Key
	for i := range c.Keys {
		if tp, err := c.Keys[i].Thumbprint(); err == nil && tp == hdr.KeyID {
			key = &c.Keys[i]
			break
		}
	}
	if key == nil {
		return nil, fmt.Errorf("%w: kid %q is not the JWK Thumbprint of a trusted producer key", ErrUntrustedKey, hdr.KeyID)
	}
	if jose.SignatureAlgorithm(hdr.Algorithm) != key.alg() {
		return nil, fmt.Errorf("%w: alg %q, the key with kid %q is pinned to %q", ErrUntrustedKey, hdr.Algorithm, hdr.KeyID, key.alg())
	}
	payload, err := sig.Verify(key.Public)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	// The signed payload must be the head: the same JSON value as the
	// members beside the jws, compared in their JCS forms.
	want, err := canonical(members)
	if err != nil {
		return nil, err
	}
	got, err := jcs.Transform(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: signed payload is not JSON: %v", ErrSignature, err)
	}
	if !bytes.Equal(got, want) {
		return nil, fmt.Errorf("%w: signed payload is not the head's members", ErrSignature)
	}
	h.KID = hdr.KeyID
	return &h, nil
}

// CheckRef checks a "learnlog-head" reference (appendix B, HC-69): dig
// over the JCS form of proof, then the head's signature with a trusted
// producer key. src is not used: the head is the whole proof. See the
// package documentation for what a verified result shows.
func (c *Checker) CheckRef(_ context.Context, r ref.Ref, _ ref.Source) ref.Result {
	res := ref.Result{Ref: r, Outcome: ref.Unverifiable}
	if r.Kind != ref.KindLearnlogHead {
		res.Detail = fmt.Sprintf("learnlog: kind %q is not %q", r.Kind, ref.KindLearnlogHead)
		return res
	}
	if r.Proof == nil {
		res.Detail = fmt.Sprintf("%v: the reference has no proof", ErrHead)
		return res
	}
	if !r.Dig.Supported() {
		res.Detail = fmt.Sprintf("%v: %q", digest.ErrUnsupported, r.Dig.Alg) // HC-08
		return res
	}
	c14n, err := Canonical(r.Proof)
	if err != nil {
		res.Detail = err.Error()
		return res
	}
	if ok, err := r.Dig.Matches(c14n); err != nil {
		res.Detail = err.Error()
		return res
	} else if !ok {
		res.Outcome, res.Detail = ref.Mismatch, "digest of the signed head's JCS form differs"
		return res
	}
	if _, err := c.Verify(r.Proof); err != nil {
		res.Detail = err.Error()
		return res
	}
	res.Outcome, res.Detail = ref.Verified, ""
	return res
}
