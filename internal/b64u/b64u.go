// Package b64u is the B64u rule of the draft's CDDL, shared by the root
// package and digest: strict, canonical base64url without padding.
package b64u

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Decode decodes strict, canonical base64url without padding. Any other
// spelling of the same octets is refused, so one value has one text form.
func Decode(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty base64url")
	}
	// The decoder skips CR and LF; every other character outside the
	// alphabet, a length of 1 mod 4 and (Strict) non-zero unused bits are
	// errors. Without CR and LF, what decodes encodes back to exactly s
	// (FuzzDecodeB64u holds this to the re-encoding).
	if strings.IndexByte(s, '\r') >= 0 || strings.IndexByte(s, '\n') >= 0 {
		return nil, errors.New("not canonical base64url without padding")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, errors.New("not canonical base64url without padding")
	}
	return b, nil
}

// DigestVal decodes and checks a Digest's val for its alg (HC-06, HC-07):
// 32 octets for sha-256, and never fewer than 256 bits for any alg.
func DigestVal(alg, val string) ([]byte, error) {
	v, err := Decode(val)
	if err != nil {
		return nil, fmt.Errorf("digest val: %v", err)
	}
	if alg == "sha-256" && len(v) != sha256.Size {
		return nil, fmt.Errorf("sha-256 digest val has %d octets, want %d", len(v), sha256.Size)
	}
	if len(v) < sha256.Size { // HC-07: no hash shorter than 256 bits
		return nil, fmt.Errorf("digest val of %d octets is shorter than 256 bits", len(v))
	}
	return v, nil
}
