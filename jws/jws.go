package jws

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentproto/handoff/internal/ecsig"
)

// Type is the typ header value of a signed handoff in JWS form (HC-14), the
// short form of the media type application/agent-handoff+jwt.
const Type = "agent-handoff+jwt"

// Algorithm names accepted in the alg header and in [Key.Alg] (HC-15).
const (
	ES256 = ecsig.ES256 // ECDSA P-256 with SHA-256; required by the draft
	ES384 = ecsig.ES384 // ECDSA P-384 with SHA-384
	EdDSA = ecsig.EdDSA // Ed25519
)

// DefaultMaxSize is the size limit Open applies when given maxSize <= 0.
const DefaultMaxSize = 16 << 10

// Errors returned by Open (and Sign, for a bad algorithm or key). Each is
// wrapped with a detail for people; test for them with errors.Is.
var (
	// ErrMalformed: not a JWS Compact Serialization in canonical
	// base64url, a header that is not one I-JSON object, a non-string alg,
	// kid or typ, or a missing kid.
	ErrMalformed = errors.New("jws: malformed")
	// ErrTooLarge: the input is longer than the size limit.
	ErrTooLarge = errors.New("jws: too large")
	// ErrType: typ is missing or does not name the media type
	// application/agent-handoff+jwt (HC-14, HC-60); in the strict profile,
	// is not exactly "agent-handoff+jwt".
	ErrType = errors.New("jws: wrong typ")
	// ErrCrit: the header has crit, which a signed handoff must not have
	// (HC-14), or b64, which RFC 7797 section 6 allows only with crit.
	ErrCrit = errors.New("jws: crit not allowed")
	// ErrEmbeddedKey: in the strict profile only, the header carries or
	// points to a key or certificate (jwk, jku, x5c, x5u, x5t, x5t#S256).
	// By default these are ignored: never parsed, never used (HC-21).
	ErrEmbeddedKey = errors.New("jws: key in header")
	// ErrAlg: alg is not an accepted asymmetric algorithm (HC-15), or no
	// trusted key is pinned to it (HC-22).
	ErrAlg = errors.New("jws: algorithm not accepted")
	// ErrNoKey: the lookup returned no key.
	ErrNoKey = errors.New("jws: no trusted key")
	// ErrSignature: no candidate key verifies the signature.
	ErrSignature = errors.New("jws: signature does not verify")
)

// Key is a trusted public key pinned to exactly one algorithm (HC-22).
type Key struct {
	Public crypto.PublicKey // *ecdsa.PublicKey or ed25519.PublicKey
	Alg    string           // ES256, ES384 or EdDSA
}

// Header is what the protected header of a message said: alg and kid, as
// given to the [Lookup] before verification and returned by Open after it.
// KID is the kid string as sent; the draft makes it the RFC 7638 thumbprint
// of the key (HC-16) but a receiver uses it only to choose which trusted
// keys to try first.
type Header struct {
	Alg string
	KID string
	// KeyIndex is, in what Open returns, the index among the keys the
	// Lookup returned of the key that verified the signature, so that a
	// caller can tell which trusted key it was. The Lookup sees 0.
	KeyIndex int
}

// Lookup resolves the trusted keys that may have signed a message. It is
// given the protected header and the payload; neither is verified yet. The
// payload is passed only so that the caller can read iss and return the keys
// its trust configuration binds to it (HC-21); the header's kid only helps
// the caller order them. Open tries the returned keys in the order given and
// stops at the first that verifies, so a caller puts the key the kid names
// first. Lookup receives its own copy of the payload.
type Lookup func(h Header, payload []byte) ([]Key, error)

// Options adjusts Open. The zero value is the default profile: exactly what
// the draft and RFC 7515 accept.
type Options struct {
	// MaxSize is the size limit in octets; <= 0 means [DefaultMaxSize].
	MaxSize int
	// Strict selects the strict profile, which adds checks the draft does
	// not make (see the package documentation): typ exactly
	// "agent-handoff+jwt", a non-empty kid, no member whose name is a case
	// variant of a registered one, no key or certificate parameter.
	Strict bool
}

func supported(alg string) bool { return ecsig.Supported(alg) }

// Sign signs payload with key as a JWS Compact Serialization whose protected
// header is exactly {"alg":alg,"kid":kid,"typ":"agent-handoff+jwt"} (HC-14).
// alg is ES256, ES384 or EdDSA and must match key; kid must not be empty and
// is normally [Thumbprint] of the public key (HC-16). ECDSA signatures are
// low-S and in raw r||s form. rand is passed to key.Sign: for an
// *ecdsa.PrivateKey, nil gives deterministic (RFC 6979) signatures.
func Sign(payload []byte, key crypto.Signer, alg, kid string, rand io.Reader) ([]byte, error) {
	return signWith(payload, key, alg, kid, ecsigSigner{rand})
}

// rawSigner makes the signature go-jose asks for.
type rawSigner interface {
	sign(s *opaqueSigner, signingInput []byte) ([]byte, error)
}

type ecsigSigner struct{ rand io.Reader }

func (e ecsigSigner) sign(s *opaqueSigner, in []byte) ([]byte, error) {
	return ecsig.Sign(e.rand, s.key, s.alg, in)
}

func signWith(payload []byte, key crypto.Signer, alg, kid string, raw rawSigner) ([]byte, error) {
	if len(payload) == 0 {
		return nil, errors.New("jws: empty payload")
	}
	if kid == "" {
		return nil, errors.New("jws: empty kid (HC-14)")
	}
	if !supported(alg) {
		return nil, fmt.Errorf("%w: %q", ErrAlg, alg)
	}
	if key == nil {
		return nil, errors.New("jws: nil signing key")
	}
	if err := ecsig.CheckKey(key.Public(), alg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAlg, err)
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: &opaqueSigner{key: key, alg: alg, kid: kid, raw: raw}},
		(&jose.SignerOptions{}).WithType(Type),
	)
	if err != nil {
		return nil, fmt.Errorf("jws: %w", err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return nil, fmt.Errorf("jws: %w", err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		return nil, fmt.Errorf("jws: %w", err)
	}
	return []byte(out), nil
}

// Signer signs payloads as [Sign] does, with one key, algorithm and kid,
// for callers that sign many messages with one key. The protected header
// is the same for every message, so go-jose writes it once, in NewSigner;
// each Sign then hashes and signs the JWS Signing Input made of that header
// and the payload (RFC 7515 section 5.1) and joins the three segments. Its
// output is octet for octet what [Sign] returns for the same signature.
// A Signer is safe for concurrent use when its key and rand are.
type Signer struct {
	key  crypto.Signer
	alg  string
	rand io.Reader
	hdr  string // BASE64URL(UTF8(JWS Protected Header)), as go-jose writes it
}

// NewSigner checks its arguments as [Sign] does and returns a Signer.
func NewSigner(key crypto.Signer, alg, kid string, rand io.Reader) (*Signer, error) {
	// go-jose builds the header around a placeholder signature: only the
	// first segment of its output is kept.
	tok, err := signWith(placeholderPayload, key, alg, kid, placeholder{})
	if err != nil {
		return nil, err
	}
	dot := bytes.IndexByte(tok, '.')
	if dot <= 0 {
		return nil, fmt.Errorf("jws: go-jose wrote no header segment")
	}
	return &Signer{key: key, alg: alg, rand: rand, hdr: string(tok[:dot])}, nil
}

var placeholderPayload = []byte{0}

// maxSignature is the longest signature of an accepted algorithm: ES384's
// 96 octets.
const maxSignature = 96

// placeholder stands for the signature while NewSigner has go-jose write
// the protected header.
type placeholder struct{}

func (placeholder) sign(*opaqueSigner, []byte) ([]byte, error) { return []byte{0}, nil }

// Sign signs payload as [Sign] does with the Signer's key, alg and kid.
func (s *Signer) Sign(payload []byte) ([]byte, error) {
	if len(payload) == 0 {
		return nil, errors.New("jws: empty payload")
	}
	enc := base64.RawURLEncoding
	pl, sl := enc.EncodedLen(len(payload)), enc.EncodedLen(maxSignature)
	out := make([]byte, len(s.hdr)+1+pl, len(s.hdr)+1+pl+1+sl)
	n := copy(out, s.hdr)
	out[n] = '.'
	enc.Encode(out[n+1:], payload)
	sig, err := ecsig.SignChecked(s.rand, s.key, s.alg, out) // NewSigner checked the key
	if err != nil {
		return nil, fmt.Errorf("jws: %w", err)
	}
	out = append(out, '.')
	return enc.AppendEncode(out, sig), nil
}

// opaqueSigner lets go-jose build the JWS while ecsig makes the signature,
// so that ECDSA signatures come out low-S whatever crypto.Signer is behind.
type opaqueSigner struct {
	key crypto.Signer
	alg string
	kid string
	raw rawSigner
}

var _ jose.OpaqueSigner = (*opaqueSigner)(nil)

func (s *opaqueSigner) Public() *jose.JSONWebKey {
	return &jose.JSONWebKey{Key: s.key.Public(), KeyID: s.kid, Algorithm: s.alg}
}

func (s *opaqueSigner) Algs() []jose.SignatureAlgorithm {
	return []jose.SignatureAlgorithm{jose.SignatureAlgorithm(s.alg)}
}

func (s *opaqueSigner) SignPayload(payload []byte, alg jose.SignatureAlgorithm) ([]byte, error) {
	if string(alg) != s.alg {
		return nil, fmt.Errorf("jws: signer for %s asked for %s", s.alg, alg)
	}
	return s.raw.sign(s, payload)
}

// Open checks token as a signed handoff in JWS form, in the default
// profile, and returns its payload, the exact octets that were signed, and
// its header. It is OpenWith with Options{MaxSize: maxSize}.
func Open(token []byte, lookup Lookup, maxSize int) (payload []byte, h Header, err error) {
	return OpenWith(token, lookup, Options{MaxSize: maxSize})
}

// OpenWith checks token as a signed handoff in JWS form under opts and
// returns its payload, the exact octets that were signed, and its header.
// The checks and their order are in the package documentation. On error,
// the payload is nil and the Header zero.
func OpenWith(token []byte, lookup Lookup, opts Options) (payload []byte, h Header, err error) {
	c, err := parse(token, opts.MaxSize)
	if err != nil {
		return nil, Header{}, err
	}
	hdr, err := parseHeader(c.header, opts.Strict)
	if err != nil {
		return nil, Header{}, err
	}
	if err := hdr.check(opts.Strict); err != nil {
		return nil, Header{}, err
	}
	h = Header{Alg: hdr.alg, KID: hdr.kid}
	if lookup == nil {
		return nil, Header{}, fmt.Errorf("%w: no key lookup", ErrNoKey)
	}
	keys, err := lookup(h, bytes.Clone(c.payload))
	if err != nil {
		return nil, Header{}, fmt.Errorf("jws: key lookup: %w", err)
	}
	if len(keys) == 0 {
		return nil, Header{}, fmt.Errorf("%w: for kid %q", ErrNoKey, h.KID)
	}
	if h.KeyIndex, err = verify(c, h.Alg, keys); err != nil {
		return nil, Header{}, err
	}
	return c.payload, h, nil
}

// UnsafePayload returns the payload of token WITHOUT verifying its signature
// or checking its header: only the size limit and the strict compact form
// are checked. It is for display and diagnosis; nothing it returns may drive
// a decision.
func UnsafePayload(token []byte, maxSize int) ([]byte, error) {
	c, err := parse(token, maxSize)
	if err != nil {
		return nil, err
	}
	return c.payload, nil
}

// compact is a JWS Compact Serialization split and decoded.
type compact struct {
	header, payload, signature []byte
	// signingInput is the JWS Signing Input, the first two segments and
	// the dot between them exactly as sent (RFC 7515 section 5.2, step 8).
	signingInput []byte
}

// parse checks the size and the strict compact form and decodes the three
// segments.
func parse(token []byte, maxSize int) (*compact, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if len(token) > maxSize {
		return nil, fmt.Errorf("%w: %d octets, limit %d", ErrTooLarge, len(token), maxSize)
	}
	if len(token) == 0 {
		return nil, malformed("empty input")
	}
	// The three segments, found without a copy, decoded into one array.
	var segs [3][]byte
	rest, n := token, 0
	for n < 2 {
		dot := bytes.IndexByte(rest, '.')
		if dot < 0 {
			break
		}
		segs[n], rest, n = rest[:dot], rest[dot+1:], n+1
	}
	if n < 2 || bytes.IndexByte(rest, '.') >= 0 {
		return nil, malformed("%d dots, want exactly 2", bytes.Count(token, []byte{'.'}))
	}
	segs[2] = rest
	size := 0
	for _, seg := range segs {
		size += base64.RawURLEncoding.DecodedLen(len(seg))
	}
	buf := make([]byte, size)
	var out [3][]byte
	for i, name := range [3]string{"header", "payload", "signature"} {
		b, err := decodeSegmentInto(buf, segs[i])
		if err != nil {
			return nil, malformed("%s segment: %v", name, err)
		}
		out[i], buf = b, buf[len(b):]
	}
	return &compact{
		header: out[0], payload: out[1], signature: out[2],
		signingInput: token[:len(segs[0])+1+len(segs[1])],
	}, nil
}

// decodeSegment decodes one segment as strict, canonical base64url without
// padding: only the 64 alphabet characters, and the decoded octets encode
// back to the same characters (no stray low bits in the last character).
func decodeSegment(seg []byte) ([]byte, error) {
	return decodeSegmentInto(make([]byte, base64.RawURLEncoding.DecodedLen(len(seg))), seg)
}

// decodeSegmentInto is decodeSegment into the start of dst, which has room
// for DecodedLen(len(seg)) octets; the decoded octets are a prefix of dst,
// with no room beyond them.
func decodeSegmentInto(dst, seg []byte) ([]byte, error) {
	if len(seg) == 0 {
		return nil, errors.New("empty")
	}
	// The decoder refuses every character outside the alphabet but CR and
	// LF, which it skips: refusing those two first leaves exactly the
	// alphabet, found at the speed of IndexByte rather than by a loop over
	// the characters.
	if i := bytes.IndexByte(seg, '\r'); i >= 0 {
		return nil, fmt.Errorf("character %q is not base64url without padding", seg[i])
	}
	if i := bytes.IndexByte(seg, '\n'); i >= 0 {
		return nil, fmt.Errorf("character %q is not base64url without padding", seg[i])
	}
	n, err := base64.RawURLEncoding.Strict().Decode(dst, seg)
	if err != nil {
		return nil, fmt.Errorf("not base64url without padding: %w", err)
	}
	// Only alphabet characters, and Strict refuses non-zero unused bits in
	// the last character and a length of 1 mod 4: the decoded octets encode
	// back to exactly seg (FuzzDecodeSegment holds this to the re-encoding).
	return dst[:n:n], nil
}

// verify verifies the signature of a token whose form and header have been
// checked, with each key pinned to alg (HC-22), in the order given. The
// signature is over the JWS Signing Input as sent (RFC 7515 section 5.2,
// step 8) and is checked by ecsig.VerifyChecked, the function ecsig.Verify
// ends in and go-jose would call through an OpaqueVerifier: go-jose's own
// parser is not used, because it interprets jwk and x5c and fails on
// numbers beyond float64, which would make valid messages with such
// parameters fail (see the package documentation). A key is validated
// (ecsig.CheckKey) only when none verified, to say why: an invalid key
// never verifies, so checking it first would change no outcome.
func verify(c *compact, alg string, keys []Key) (int, error) {
	for i, k := range keys {
		if k.Alg == alg && ecsig.VerifyChecked(k.Public, alg, c.signingInput, c.signature) == nil {
			return i, nil
		}
	}
	pinned, usable, refusal := ecsig.Tally(keys, alg, func(k Key) (crypto.PublicKey, string) { return k.Public, k.Alg })
	switch {
	case pinned == 0:
		return 0, fmt.Errorf("%w: no trusted key is pinned to %s", ErrAlg, alg)
	case usable == 0:
		return 0, fmt.Errorf("%w: trusted key pinned to %s: %w", ErrAlg, alg, refusal)
	}
	return 0, fmt.Errorf("%w: none of %d key(s) pinned to %s verifies", ErrSignature, usable, alg)
}

// Thumbprint returns the RFC 7638 JWK thumbprint of pub with SHA-256, in
// base64url without padding: the kid a signed handoff SHOULD carry (HC-16).
func Thumbprint(pub crypto.PublicKey) (string, error) {
	if pub == nil {
		return "", errors.New("jws: nil public key")
	}
	tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("jws: thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}
