// Package digest is the draft's Digest (section 3.3): the closed map
// {alg, val} that names an object by the hash of its octets. A handoff
// digest is the SHA-256 of a signed handoff's octets exactly as sent
// (HC-20); a context reference names its object the same way (section
// 2.2), and a "salted-digest" reference hashes a salt before the object
// (HC-09).
//
// The package sits below the root package, which encodes and decodes
// Digests as members of offers and statuses.
package digest

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentproto/handoff/internal/b64u"
)

// SHA256Alg is the one Digest alg the draft defines, which every
// implementation supports (HC-06).
const SHA256Alg = "sha-256"

// MinSaltSize is the shortest salt accepted for "salted-digest" (HC-09).
const MinSaltSize = 16

var (
	// ErrUnsupported: a Digest names an alg this implementation does not
	// implement. HC-08: a check that depends on it fails for prev and
	// grant, and is unverifiable for refs.
	ErrUnsupported = errors.New("digest: unsupported alg")
	// ErrMalformed: a Digest's text or salt is not what the draft allows.
	ErrMalformed = errors.New("digest: malformed")
)

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

// Salted returns a fresh salt of 32 octets from r (crypto/rand when r is
// nil) and the sha-256 Digest of salt || octets, for a reference of kind
// "salted-digest". The salt travels with the octets, never in the element
// (HC-09, HC-64).
func Salted(r io.Reader, octets []byte) (salt []byte, d Digest, err error) {
	if r == nil {
		r = rand.Reader
	}
	salt = make([]byte, 32)
	if _, err := io.ReadFull(r, salt); err != nil {
		return nil, Digest{}, err
	}
	return salt, saltedSHA256(salt, octets), nil
}

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

// Clone returns a copy of d that shares no memory with it.
func (d Digest) Clone() Digest { return Digest{Alg: d.Alg, Val: slices.Clone(d.Val)} }

// Matches reports whether d is the digest of octets. For an alg this
// implementation does not implement it returns an error wrapping
// ErrUnsupported: HC-08 makes that a failure for prev and grant and an
// unverifiable outcome for refs, so the caller decides.
func (d Digest) Matches(octets []byte) (bool, error) {
	if !d.Supported() {
		return false, fmt.Errorf("%w: %q", ErrUnsupported, d.Alg)
	}
	return d.Equal(SHA256(octets)), nil
}

// MatchesSalted reports whether d is the digest of salt || octets
// ("salted-digest", HC-09). A salt shorter than MinSaltSize never matches.
func (d Digest) MatchesSalted(salt, octets []byte) (bool, error) {
	if !d.Supported() {
		return false, fmt.Errorf("%w: %q", ErrUnsupported, d.Alg)
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
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// Parse parses the "alg:val" form of String. A bare base64url value is
// taken as sha-256. Any text is an alg, the empty text included: the
// CDDL's alg is "sha-256" / text, and an alg this implementation does not
// implement is a failed check (HC-08), never a malformed Digest.
func Parse(s string) (Digest, error) {
	alg, val := SHA256Alg, s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		alg, val = s[:i], s[i+1:]
	}
	v, err := b64u.DigestVal(alg, val)
	if err != nil {
		return Digest{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return Digest{Alg: alg, Val: v}, nil
}
