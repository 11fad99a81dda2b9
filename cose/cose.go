package cose

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"

	gocose "github.com/veraison/go-cose"

	"github.com/agentproto/handoff/internal/ecsig"
)

// ContentType is the content type (label 3) of a signed handoff in COSE
// form (HC-17).
const ContentType = "application/agent-handoff+cbor"

// Tag is the CBOR tag of a COSE_Sign1 message (HC-17).
const Tag = 18

// Algorithm names accepted in [Key.Alg] and reported in [Header.Alg]: the
// JOSE names of the COSE algorithms -7, -35 and -8.
const (
	ES256 = ecsig.ES256 // COSE -7; required by the draft
	ES384 = ecsig.ES384 // COSE -35
	EdDSA = ecsig.EdDSA // COSE -8, with Ed25519
)

// DefaultMaxSize is the size limit Open applies when given maxSize <= 0.
const DefaultMaxSize = 16 << 10

// Errors returned by Open (and Sign, for a bad algorithm or key). Each is
// wrapped with a detail for people; test for them with errors.Is.
var (
	// ErrMalformed: not a strict, canonical, tagged COSE_Sign1 with an
	// empty unprotected header and an embedded payload, or a protected
	// header that is not a strict map.
	ErrMalformed = errors.New("cose: malformed")
	// ErrTooLarge: the input is longer than the size limit.
	ErrTooLarge = errors.New("cose: too large")
	// ErrType: content type is missing or not exactly
	// "application/agent-handoff+cbor" (HC-17, HC-60).
	ErrType = errors.New("cose: wrong content type")
	// ErrCrit: the protected header has crit.
	ErrCrit = errors.New("cose: crit not allowed")
	// ErrAlg: alg is not an accepted asymmetric algorithm (HC-15), or no
	// trusted key is pinned to it (HC-22).
	ErrAlg = errors.New("cose: algorithm not accepted")
	// ErrNoKey: the lookup returned no key.
	ErrNoKey = errors.New("cose: no trusted key")
	// ErrSignature: no candidate key verifies the signature.
	ErrSignature = errors.New("cose: signature does not verify")
)

// Key is a trusted public key pinned to exactly one algorithm (HC-22).
type Key struct {
	Public crypto.PublicKey // *ecdsa.PublicKey or ed25519.PublicKey
	Alg    string           // ES256, ES384 or EdDSA
}

// Header is what the protected header of a verified message said. Alg is
// the JOSE name of the COSE algorithm; KID holds the kid octets (empty when
// the header has no kid).
type Header struct {
	Alg string
	KID string
}

// Lookup resolves the trusted keys that may have signed a message. It is
// given the protected header and the payload; the payload is NOT verified
// yet and is passed only so that the caller can read iss and return the
// keys its trust configuration binds to it (HC-21). Lookup receives its own
// copy of the payload.
type Lookup func(h Header, payload []byte) ([]Key, error)

var algIDs = map[string]gocose.Algorithm{
	ES256: gocose.AlgorithmES256,
	ES384: gocose.AlgorithmES384,
	EdDSA: gocose.AlgorithmEdDSA,
}

func algName(id int64) (string, bool) {
	for name, a := range algIDs {
		if int64(a) == id {
			return name, true
		}
	}
	return "", false
}

// Sign signs payload with key as a tagged COSE_Sign1 whose protected header
// is {1: alg, 3: "application/agent-handoff+cbor", 4: kid}, with an empty
// unprotected header and the payload embedded (HC-17, HC-18). alg is ES256,
// ES384 or EdDSA and must match key; kid must not be empty and is normally
// the RFC 7638 thumbprint of the public key (as jws.Thumbprint computes).
// ECDSA signatures are low-S and in raw r||s form. rand is passed to
// key.Sign: for an *ecdsa.PrivateKey, nil gives deterministic (RFC 6979)
// signatures.
func Sign(payload []byte, key crypto.Signer, alg, kid string, rand io.Reader) ([]byte, error) {
	if len(payload) == 0 {
		return nil, errors.New("cose: empty payload")
	}
	if kid == "" {
		return nil, errors.New("cose: empty kid")
	}
	id, ok := algIDs[alg]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrAlg, alg)
	}
	if key == nil {
		return nil, errors.New("cose: nil signing key")
	}
	if err := ecsig.CheckKey(key.Public(), alg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAlg, err)
	}
	msg := gocose.Sign1Message{
		Headers: gocose.Headers{
			Protected: gocose.ProtectedHeader{
				gocose.HeaderLabelAlgorithm:   id,
				gocose.HeaderLabelContentType: ContentType,
				gocose.HeaderLabelKeyID:       []byte(kid),
			},
			Unprotected: gocose.UnprotectedHeader{},
		},
		Payload: payload,
	}
	if err := msg.Sign(rand, nil, &signer{key: key, alg: alg, id: id}); err != nil {
		return nil, fmt.Errorf("cose: %w", err)
	}
	out, err := msg.MarshalCBOR()
	if err != nil {
		return nil, fmt.Errorf("cose: %w", err)
	}
	return out, nil
}

// signer lets go-cose build the message while ecsig makes the signature, so
// that ECDSA signatures come out low-S whatever crypto.Signer is behind.
type signer struct {
	key crypto.Signer
	alg string
	id  gocose.Algorithm
}

var _ gocose.Signer = (*signer)(nil)

func (s *signer) Algorithm() gocose.Algorithm { return s.id }

func (s *signer) Sign(rand io.Reader, content []byte) ([]byte, error) {
	return ecsig.Sign(rand, s.key, s.alg, content)
}

// verifier is the go-cose verifier for one trusted key pinned to one
// algorithm. It hands the Sig_structure and the signature to ecsig.Verify,
// the same function jws uses and the Wycheproof tests drive.
type verifier struct {
	pub crypto.PublicKey
	alg string
	id  gocose.Algorithm
}

var _ gocose.Verifier = verifier{}

func (v verifier) Algorithm() gocose.Algorithm { return v.id }

func (v verifier) Verify(content, signature []byte) error {
	return ecsig.Verify(v.pub, v.alg, content, signature)
}

// Open checks msg as a signed handoff in COSE form and returns its payload,
// the exact octets that were signed, and its header. The checks and their
// order are in the package documentation. maxSize <= 0 means
// [DefaultMaxSize]. On error, the payload is nil and the Header zero.
func Open(msg []byte, lookup Lookup, maxSize int) (payload []byte, h Header, err error) {
	s, err := parse(msg, maxSize)
	if err != nil {
		return nil, Header{}, err
	}
	h, err = parseProtected(s.protected)
	if err != nil {
		return nil, Header{}, err
	}
	if lookup == nil {
		return nil, Header{}, fmt.Errorf("%w: no key lookup", ErrNoKey)
	}
	keys, err := lookup(h, bytes.Clone(s.payload))
	if err != nil {
		return nil, Header{}, fmt.Errorf("cose: key lookup: %w", err)
	}
	if len(keys) == 0 {
		return nil, Header{}, fmt.Errorf("%w: for kid %q", ErrNoKey, h.KID)
	}
	if err := verify(s, h.Alg, keys); err != nil {
		return nil, Header{}, err
	}
	return s.payload, h, nil
}

// UnsafePayload returns the payload of msg WITHOUT verifying its signature
// or checking its protected header: only the size limit and the strict,
// canonical COSE_Sign1 structure are checked. It is for display and
// diagnosis; nothing it returns may drive a decision.
func UnsafePayload(msg []byte, maxSize int) ([]byte, error) {
	s, err := parse(msg, maxSize)
	if err != nil {
		return nil, err
	}
	return s.payload, nil
}

// verify verifies the signature of a message whose structure and protected
// header have been checked, with each key pinned to alg (HC-22), through
// go-cose.
func verify(s *sign1, alg string, keys []Key) error {
	var candidates []Key
	var keyErr error
	for _, k := range keys {
		if k.Alg != alg {
			continue
		}
		if err := ecsig.CheckKey(k.Public, k.Alg); err != nil {
			keyErr = err
			continue
		}
		candidates = append(candidates, k)
	}
	if len(candidates) == 0 {
		if keyErr != nil {
			return fmt.Errorf("%w: trusted key pinned to %s: %w", ErrAlg, alg, keyErr)
		}
		return fmt.Errorf("%w: no trusted key is pinned to %s", ErrAlg, alg)
	}
	id := algIDs[alg]
	m := gocose.Sign1Message{
		Headers: gocose.Headers{
			RawProtected: s.rawProtected,
			Protected:    gocose.ProtectedHeader{gocose.HeaderLabelAlgorithm: id},
		},
		Payload:   s.payload,
		Signature: s.signature,
	}
	for _, k := range candidates {
		if err := m.Verify(nil, verifier{pub: k.Public, alg: alg, id: id}); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: none of %d key(s) pinned to %s verifies", ErrSignature, len(candidates), alg)
}
