package cose

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/fxamacker/cbor/v2"
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
	// ErrMalformed: not valid CBOR, not a tagged COSE_Sign1 with an
	// embedded payload, a header that is not a map with int or text
	// labels, a label in both headers, a kid that is not a bstr; in the
	// strict profile, also not in preferred serialization or a non-empty
	// unprotected header.
	ErrMalformed = errors.New("cose: malformed")
	// ErrTooLarge: the input is longer than the size limit.
	ErrTooLarge = errors.New("cose: too large")
	// ErrType: the protected content type is missing or does not name the
	// media type application/agent-handoff+cbor (HC-17, HC-60); in the
	// strict profile, is not exactly that string.
	ErrType = errors.New("cose: wrong content type")
	// ErrCrit: a header has crit.
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

// Header is what the headers of a message said. Alg is the JOSE name of
// the protected COSE algorithm. A kid is reported as raw octets (held in a
// string, which may be any octets): the draft fixes no kid encoding, so it
// may be the RFC 7638 thumbprint's base64url text, as [Sign] writes it, its
// 32 raw octets, or anything else.
//
// KID is the kid of the protected header, covered by the signature.
// UnprotectedKID is a kid from the unprotected header, which the signature
// does not cover: anyone on the path can set or change it, so it is only a
// hint of which trusted key to try first and decides nothing else. At most
// one of the two is set (RFC 9052 section 3: a label is never in both
// buckets); both are empty when the message has no kid (HC-18 makes it a
// SHOULD).
type Header struct {
	Alg            string
	KID            string
	UnprotectedKID string
	// KeyIndex is, in what Open returns, the index among the keys the
	// Lookup returned of the key that verified the signature, so that a
	// caller can tell which trusted key it was. The Lookup sees 0.
	KeyIndex int
}

// KeyHint returns the kid to choose keys by, and whether it is covered by
// the signature: KID when the protected header has one, else
// UnprotectedKID. Either way it only orders the keys the trust
// configuration binds to iss; it never makes a key trusted.
func (h Header) KeyHint() (kid string, protected bool) {
	if h.KID != "" {
		return h.KID, true
	}
	return h.UnprotectedKID, false
}

// Lookup resolves the trusted keys that may have signed a message. It is
// given the headers and the payload; none of them is verified yet. The
// payload is passed only so that the caller can read iss and return the
// keys its trust configuration binds to it (HC-21); the kid, from either
// header, only helps the caller order them. Open tries the returned keys in
// the order given and stops at the first that verifies, so a caller puts
// the key the kid names first. Lookup receives its own copy of the payload.
type Lookup func(h Header, payload []byte) ([]Key, error)

// Options adjusts Open. The zero value is the default profile: exactly what
// the draft, RFC 9052 and RFC 8949 accept.
type Options struct {
	// MaxSize is the size limit in octets; <= 0 means [DefaultMaxSize].
	MaxSize int
	// Strict selects the strict profile, which adds checks the draft does
	// not make (see the package documentation): preferred serialization
	// (shortest heads, definite lengths) of the message and of the
	// protected header, no tag but the outer one, an empty unprotected
	// header, and content type exactly "application/agent-handoff+cbor".
	Strict bool
}

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
	return signWith(payload, key, alg, kid, rand, nil)
}

// signWith is Sign; raw, when not nil, stands in for the signature.
func signWith(payload []byte, key crypto.Signer, alg, kid string, rand io.Reader, raw func([]byte) ([]byte, error)) ([]byte, error) {
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
	if err := msg.Sign(rand, nil, &signer{key: key, alg: alg, id: id, raw: raw}); err != nil {
		return nil, fmt.Errorf("cose: %w", err)
	}
	out, err := msg.MarshalCBOR()
	if err != nil {
		return nil, fmt.Errorf("cose: %w", err)
	}
	return out, nil
}

// Signer signs payloads as [Sign] does, with one key, algorithm and kid,
// for callers that sign many messages with one key. The protected header
// is the same for every message, so go-cose writes it once, in NewSigner;
// each Sign then encodes the Sig_structure and the message around it with
// fxamacker/cbor in core deterministic encoding, as go-cose does. Its
// output is octet for octet what [Sign] returns for the same signature.
// A Signer is safe for concurrent use when its key and rand are.
type Signer struct {
	key       crypto.Signer
	alg       string
	rand      io.Reader
	protected []byte // the protected header's encoded map, as go-cose wrote it
}

// NewSigner checks its arguments as [Sign] does and returns a Signer.
func NewSigner(key crypto.Signer, alg, kid string, rand io.Reader) (*Signer, error) {
	// go-cose builds the message around a placeholder signature: only the
	// protected header of its output is kept.
	out, err := signWith([]byte{0}, key, alg, kid, nil, func([]byte) ([]byte, error) { return []byte{0}, nil })
	if err != nil {
		return nil, err
	}
	var m signedMessage
	if err := cbor.Unmarshal(out[1:], &m); err != nil || out[0] != 0xd2 {
		return nil, fmt.Errorf("cose: go-cose wrote no COSE_Sign1: %v", err)
	}
	return &Signer{key: key, alg: alg, rand: rand, protected: m.Protected}, nil
}

// signedMessage is the array of a COSE_Sign1 message (RFC 9052 section 4.2), as
// Signer writes it.
type signedMessage struct {
	_           struct{} `cbor:",toarray"`
	Protected   []byte
	Unprotected map[any]any
	Payload     []byte
	Signature   []byte
}

// sigStructure is the Sig_structure of a COSE_Sign1 (RFC 9052 section 4.4).
type sigStructure struct {
	_           struct{} `cbor:",toarray"`
	Context     string
	Protected   []byte
	ExternalAAD []byte
	Payload     []byte
}

// Sign signs payload as [Sign] does with the Signer's key, alg and kid.
func (s *Signer) Sign(payload []byte) ([]byte, error) {
	if len(payload) == 0 {
		return nil, errors.New("cose: empty payload")
	}
	tbs, err := sigEncMode.Marshal(sigStructure{Context: "Signature1", Protected: s.protected, ExternalAAD: []byte{}, Payload: payload})
	if err != nil {
		return nil, fmt.Errorf("cose: %w", err)
	}
	sig, err := ecsig.SignChecked(s.rand, s.key, s.alg, tbs) // NewSigner checked the key
	if err != nil {
		return nil, fmt.Errorf("cose: %w", err)
	}
	out, err := sigEncMode.Marshal(cbor.Tag{Number: Tag, Content: signedMessage{Protected: s.protected, Unprotected: map[any]any{}, Payload: payload, Signature: sig}})
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
	raw func([]byte) ([]byte, error) // when not nil, in place of ecsig
}

var _ gocose.Signer = (*signer)(nil)

func (s *signer) Algorithm() gocose.Algorithm { return s.id }

func (s *signer) Sign(rand io.Reader, content []byte) ([]byte, error) {
	if s.raw != nil {
		return s.raw(content)
	}
	return ecsig.Sign(rand, s.key, s.alg, content)
}

// sigEncMode encodes the protected bstr for the Sig_structure with a
// definite, shortest head, as RFC 9052 section 9 requires there.
var sigEncMode = func() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err) // constant options: a programmer error
	}
	return em
}()

// verifier is the go-cose verifier for one trusted key pinned to one
// algorithm. It hands the Sig_structure and the signature to
// ecsig.VerifyChecked, the function ecsig.Verify ends in, which jws uses
// too and the Wycheproof tests drive.
type verifier struct {
	pub crypto.PublicKey
	alg string
	id  gocose.Algorithm
}

var _ gocose.Verifier = verifier{}

func (v verifier) Algorithm() gocose.Algorithm { return v.id }

func (v verifier) Verify(content, signature []byte) error {
	return ecsig.VerifyChecked(v.pub, v.alg, content, signature)
}

// Open checks msg as a signed handoff in COSE form, in the default profile,
// and returns its payload, the exact octets that were signed, and its
// header. It is OpenWith with Options{MaxSize: maxSize}.
func Open(msg []byte, lookup Lookup, maxSize int) (payload []byte, h Header, err error) {
	return OpenWith(msg, lookup, Options{MaxSize: maxSize})
}

// OpenWith checks msg as a signed handoff in COSE form under opts and
// returns its payload, the exact octets that were signed, and its header.
// The checks and their order are in the package documentation. On error,
// the payload is nil and the Header zero.
func OpenWith(msg []byte, lookup Lookup, opts Options) (payload []byte, h Header, err error) {
	s, err := parse(msg, opts.MaxSize, opts.Strict)
	if err != nil {
		return nil, Header{}, err
	}
	h, err = s.checkHeaders(opts.Strict)
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
		kid, _ := h.KeyHint()
		return nil, Header{}, fmt.Errorf("%w: for kid %q", ErrNoKey, kid)
	}
	if h.KeyIndex, err = verify(s, h.Alg, keys); err != nil {
		return nil, Header{}, err
	}
	if err := s.validate(s.dec); err != nil {
		return nil, Header{}, err
	}
	return bytes.Clone(s.payload), h, nil // the caller's own, not a view of msg
}

// UnsafePayload returns the payload of msg WITHOUT verifying its signature
// or checking its headers' values: only the size limit and the COSE_Sign1
// structure of the default profile are checked. It is for display and
// diagnosis; nothing it returns may drive a decision.
func UnsafePayload(msg []byte, maxSize int) ([]byte, error) {
	s, err := parse(msg, maxSize, false)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(s.payload), nil
}

// verify verifies the signature of a message whose structure and protected
// header have been checked, with each key pinned to alg (HC-22), through
// go-cose. A key is validated (ecsig.CheckKey) only when none verified, to
// say why: an invalid key never verifies (see ecsig.VerifyChecked), so
// checking it first would change no outcome.
func verify(s *sign1, alg string, keys []Key) (int, error) {
	if !slices.ContainsFunc(keys, func(k Key) bool { return k.Alg == alg }) {
		return 0, fmt.Errorf("%w: no trusted key is pinned to %s", ErrAlg, alg)
	}
	id := algIDs[alg]
	// The Sig_structure holds the protected header's octets as sent, in a
	// bstr with a definite, shortest head (RFC 9052 sections 4.4 and 9),
	// however the message encoded that bstr.
	rawProtected := s.wrapped // as sent, when its head is already that one
	if rawProtected == nil {
		var err error
		if rawProtected, err = sigEncMode.Marshal(s.protected); err != nil {
			return 0, malformed("%v", err)
		}
	}
	m := gocose.Sign1Message{
		Headers: gocose.Headers{
			RawProtected: rawProtected,
			Protected:    gocose.ProtectedHeader{gocose.HeaderLabelAlgorithm: id},
		},
		Payload:   s.payload,
		Signature: s.signature,
	}
	for i, k := range keys {
		if k.Alg == alg && m.Verify(nil, verifier{pub: k.Public, alg: alg, id: id}) == nil {
			return i, nil
		}
	}
	_, usable, refusal := ecsig.Tally(keys, alg, func(k Key) (crypto.PublicKey, string) { return k.Public, k.Alg })
	if usable == 0 {
		return 0, fmt.Errorf("%w: trusted key pinned to %s: %w", ErrAlg, alg, refusal)
	}
	return 0, fmt.Errorf("%w: none of %d key(s) pinned to %s verifies", ErrSignature, usable, alg)
}
