package handoff

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

// SHA256Alg is the one Digest alg the draft defines, which every
// implementation supports (HC-06).
const SHA256Alg = "sha-256"

// Digest is the draft's closed map {alg, val} (HC-06). Val holds the hash
// output; on the wire it is base64url without padding.
type Digest struct {
	Alg string
	Val []byte
}

// SHA256 returns the sha-256 Digest of octets. Over a signed handoff's
// octets exactly as sent, it is the handoff digest (HC-20).
func SHA256(octets []byte) Digest {
	sum := sha256.Sum256(octets)
	return Digest{Alg: SHA256Alg, Val: sum[:]}
}

// SaltedDigest returns a fresh salt of 32 octets from r (crypto/rand when r
// is nil) and the sha-256 Digest of salt || octets, for a ContextRef of kind
// "salted-digest". The salt travels with the octets, never in the element
// (HC-09, HC-64).
func SaltedDigest(r io.Reader, octets []byte) (salt []byte, d Digest, err error) {
	if r == nil {
		r = rand.Reader
	}
	salt = make([]byte, 32)
	if _, err := io.ReadFull(r, salt); err != nil {
		return nil, Digest{}, err
	}
	return salt, saltedSHA256(salt, octets), nil
}

// MinSaltSize is the shortest salt accepted for "salted-digest" (HC-09).
const MinSaltSize = 16

func saltedSHA256(salt, octets []byte) Digest {
	h := sha256.New()
	h.Write(salt)
	h.Write(octets)
	return Digest{Alg: SHA256Alg, Val: h.Sum(nil)}
}

// IsZero reports whether d is the zero Digest.
func (d Digest) IsZero() bool { return d.Alg == "" && len(d.Val) == 0 }

// Supported reports whether this implementation computes d's alg.
func (d Digest) Supported() bool { return d.Alg == SHA256Alg }

// Equal reports whether d and o have the same alg and value.
func (d Digest) Equal(o Digest) bool {
	return d.Alg == o.Alg && len(d.Val) == len(o.Val) &&
		subtle.ConstantTimeCompare(d.Val, o.Val) == 1
}

// Matches reports whether d is the digest of octets. For an alg this
// implementation does not implement it returns an error wrapping
// ErrUnsupportedDigest: HC-08 makes that a failure for prev and grant and an
// unverifiable outcome for refs, so the caller decides.
func (d Digest) Matches(octets []byte) (bool, error) {
	if !d.Supported() {
		return false, fmt.Errorf("%w: %q", ErrUnsupportedDigest, d.Alg)
	}
	return d.Equal(SHA256(octets)), nil
}

// MatchesSalted reports whether d is the digest of salt || octets
// ("salted-digest", HC-09). A salt shorter than MinSaltSize never matches.
func (d Digest) MatchesSalted(salt, octets []byte) (bool, error) {
	if !d.Supported() {
		return false, fmt.Errorf("%w: %q", ErrUnsupportedDigest, d.Alg)
	}
	if len(salt) < MinSaltSize {
		return false, fmt.Errorf("%w: salt of %d octets, at least %d required", ErrMalformed, len(salt), MinSaltSize)
	}
	return d.Equal(saltedSHA256(salt, octets)), nil
}

// String returns "alg:val" with val in base64url without padding.
func (d Digest) String() string {
	return d.Alg + ":" + base64.RawURLEncoding.EncodeToString(d.Val)
}

// B64 returns val as it appears on the wire: base64url without padding.
func (d Digest) B64() string { return base64.RawURLEncoding.EncodeToString(d.Val) }

// MarshalText encodes d as String does.
func (d Digest) MarshalText() ([]byte, error) {
	if d.IsZero() {
		return nil, fmt.Errorf("%w: zero digest", ErrMalformed)
	}
	return []byte(d.String()), nil
}

// UnmarshalText parses the String form.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// ParseDigest parses the "alg:val" form of String. A bare base64url value
// is taken as sha-256.
func ParseDigest(s string) (Digest, error) {
	alg, val := SHA256Alg, s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		alg, val = s[:i], s[i+1:]
	}
	return newDigest(alg, val)
}

// newDigest validates the wire members of a Digest (HC-06, HC-07). Any
// text is an alg, the empty text included: the CDDL's alg is
// "sha-256" / text, and the draft makes an alg the receiver does not
// implement a failed check for prev and grant and an unverifiable
// reference (HC-08), never a malformed offer. "" is such an alg.
func newDigest(alg, val string) (Digest, error) {
	v, err := decodeB64u(val)
	if err != nil {
		return Digest{}, malformed("digest val: %v", err)
	}
	if alg == SHA256Alg && len(v) != sha256.Size {
		return Digest{}, malformed("sha-256 digest val has %d octets, want %d", len(v), sha256.Size)
	}
	if len(v) < sha256.Size { // HC-07: no hash shorter than 256 bits
		return Digest{}, malformed("digest val of %d octets is shorter than 256 bits", len(v))
	}
	return Digest{Alg: alg, Val: v}, nil
}

// decodeB64u decodes strict, canonical base64url without padding: the B64u
// rule of the CDDL. Any other spelling of the same octets is refused, so one
// value has one text form.
func decodeB64u(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("empty base64url")
	}
	// The decoder skips CR and LF; every other character outside the
	// alphabet, a length of 1 mod 4 and (Strict) non-zero unused bits are
	// errors. Without CR and LF, what decodes encodes back to exactly s
	// (FuzzDecodeB64u holds this to the re-encoding).
	if strings.IndexByte(s, '\r') >= 0 || strings.IndexByte(s, '\n') >= 0 {
		return nil, fmt.Errorf("not canonical base64url without padding")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not canonical base64url without padding")
	}
	return b, nil
}

// digestFrom reads a decoded Digest map (HC-06: closed, alg and val only).
func digestFrom(v any, path string) (Digest, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Digest{}, malformed("%s: Digest must be a map, got %s", path, typeName(v))
	}
	for k := range m { // HC-06: Digest is closed
		if k != "alg" && k != "val" {
			return Digest{}, malformed("%s: Digest is closed, unexpected member %q", path, k)
		}
	}
	f := fields{m: m, path: path + "."}
	alg, err := f.text("alg", true)
	if err != nil {
		return Digest{}, err
	}
	val, err := f.text("val", true)
	if err != nil {
		return Digest{}, err
	}
	d, err := newDigest(alg, val)
	if err != nil {
		return Digest{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}
