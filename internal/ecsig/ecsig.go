// Package ecsig holds the signature primitives shared by the jws and cose
// packages: signing with a crypto.Signer into the raw form both formats
// carry, and verifying that raw form.
//
// ECDSA signatures are carried as r||s, each integer big-endian and padded to
// the byte length of the curve order (RFC 7518 section 3.4, RFC 9053 section
// 2.1). [Sign] always emits the low-S form (s <= n/2). [Verify] accepts both
// s and n-s, because ECDSA as specified accepts both and other signers do not
// normalise; it refuses anything that is not exactly 2*size octets, so an
// ASN.1 DER signature never verifies.
//
// [Verify] does what go-jose and go-cose do in their ECDSA verifiers (hash
// the message, check the length, split r||s, call crypto/ecdsa.Verify), and
// the jws and cose packages hand it to those libraries as their verifier, so
// the Wycheproof vectors in this package's tests exercise the exact function
// that decides every signature check.
package ecsig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"errors"
	"fmt"
	"io"
	"math/big"
)

// Algorithm names, as registered for JOSE (RFC 7518, RFC 8037). The cose
// package maps them to COSE algorithm identifiers.
const (
	ES256 = "ES256" // ECDSA P-256 with SHA-256
	ES384 = "ES384" // ECDSA P-384 with SHA-384
	EdDSA = "EdDSA" // Ed25519 (pure)
)

var (
	// ErrVerification is returned by Verify when the signature is not valid.
	ErrVerification = errors.New("ecsig: signature does not verify")
	// ErrKey is returned when a key cannot be used with an algorithm.
	ErrKey = errors.New("ecsig: key does not match algorithm")
	// ErrAlgorithm is returned for an algorithm name this package does not
	// implement.
	ErrAlgorithm = errors.New("ecsig: unsupported algorithm")
)

// params describes one ECDSA algorithm.
type params struct {
	curve elliptic.Curve
	hash  crypto.Hash
	sum   func([]byte) []byte
	size  int // octets of each of r and s
}

func ecParams(alg string) (params, bool) {
	switch alg {
	case ES256:
		return params{elliptic.P256(), crypto.SHA256, sha256Sum, 32}, true
	case ES384:
		return params{elliptic.P384(), crypto.SHA384, sha384Sum, 48}, true
	}
	return params{}, false
}

func sha256Sum(msg []byte) []byte { d := sha256.Sum256(msg); return d[:] }
func sha384Sum(msg []byte) []byte { d := sha512.Sum384(msg); return d[:] }

// Supported reports whether alg is one of ES256, ES384 and EdDSA.
func Supported(alg string) bool {
	_, ec := ecParams(alg)
	return ec || alg == EdDSA
}

// CheckKey reports whether pub is a valid public key for alg: a P-256 key
// for ES256, a P-384 key for ES384, a 32-octet Ed25519 key for EdDSA.
func CheckKey(pub crypto.PublicKey, alg string) error {
	if p, ok := ecParams(alg); ok {
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok || k == nil {
			return fmt.Errorf("%w: %s needs an ECDSA public key, have %T", ErrKey, alg, pub)
		}
		if k.Curve != p.curve {
			return fmt.Errorf("%w: %s needs curve %s", ErrKey, alg, p.curve.Params().Name)
		}
		if k.X == nil || k.Y == nil { // crypto/ecdsa would dereference them
			return fmt.Errorf("%w: %s public key without coordinates", ErrKey, alg)
		}
		if _, err := k.Bytes(); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrKey, alg, err)
		}
		return nil
	}
	if alg == EdDSA {
		k, ok := pub.(ed25519.PublicKey)
		if !ok {
			return fmt.Errorf("%w: EdDSA needs an Ed25519 public key, have %T", ErrKey, pub)
		}
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: Ed25519 public key of %d octets", ErrKey, len(k))
		}
		return nil
	}
	return fmt.Errorf("%w: %q", ErrAlgorithm, alg)
}

// Sign signs msg with key under alg and returns the raw signature: for
// ECDSA, r||s at fixed width with s normalised to s <= n/2; for EdDSA, the
// 64-octet Ed25519 signature. The message is hashed here as alg requires;
// key.Sign receives the digest (ECDSA, returning ASN.1 DER as crypto.Signer
// implementations do) or the message itself (Ed25519).
//
// rand is passed to key.Sign unchanged. For an *ecdsa.PrivateKey a nil rand
// gives deterministic RFC 6979 signatures.
func Sign(rand io.Reader, key crypto.Signer, alg string, msg []byte) ([]byte, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: nil signer", ErrKey)
	}
	if err := CheckKey(key.Public(), alg); err != nil {
		return nil, err
	}
	return SignChecked(rand, key, alg, msg)
}

// SignChecked is Sign for a key whose public half already passed CheckKey
// for alg, as the jws and cose Signers check it once when made: it does not
// ask the key for its public half or check it again. What the key returns
// is checked as Sign checks it.
func SignChecked(rand io.Reader, key crypto.Signer, alg string, msg []byte) ([]byte, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: nil signer", ErrKey)
	}
	if alg == EdDSA {
		sig, err := key.Sign(rand, msg, crypto.Hash(0))
		if err != nil {
			return nil, fmt.Errorf("ecsig: sign: %w", err)
		}
		if len(sig) != ed25519.SignatureSize {
			return nil, fmt.Errorf("ecsig: signer returned %d octets for Ed25519", len(sig))
		}
		return sig, nil
	}
	p, ok := ecParams(alg)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrAlgorithm, alg)
	}
	der, err := key.Sign(rand, p.sum(msg), p.hash)
	if err != nil {
		return nil, fmt.Errorf("ecsig: sign: %w", err)
	}
	var rs struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &rs)
	if err != nil || len(rest) != 0 {
		return nil, errors.New("ecsig: signer returned a malformed ASN.1 ECDSA signature")
	}
	n := p.curve.Params().N
	if rs.R.Sign() <= 0 || rs.S.Sign() <= 0 || rs.R.Cmp(n) >= 0 || rs.S.Cmp(n) >= 0 {
		return nil, errors.New("ecsig: signer returned an ECDSA signature out of range")
	}
	if !lowS(n, rs.S) {
		rs.S.Sub(n, rs.S)
	}
	out := make([]byte, 2*p.size)
	rs.R.FillBytes(out[:p.size])
	rs.S.FillBytes(out[p.size:])
	return out, nil
}

// Verify checks the raw signature sig over msg with pub under alg. For
// ECDSA, sig must be exactly r||s at the fixed width of the curve; msg is
// hashed with SHA-256 (ES256) or SHA-384 (ES384) and checked with
// crypto/ecdsa.Verify, which refuses r or s outside [1, n-1]. Both s and n-s
// verify. For EdDSA, crypto/ed25519.Verify decides. It is CheckKey, then
// VerifyChecked.
func Verify(pub crypto.PublicKey, alg string, msg, sig []byte) error {
	if err := CheckKey(pub, alg); err != nil {
		return err
	}
	return VerifyChecked(pub, alg, msg, sig)
}

// Tally explains why none of keys verified under alg, for the jws and cose
// packages, which try the keys first and validate them only then: pinned
// is how many keys are pinned to alg, usable how many of those CheckKey
// accepts, and refusal the last refusal.
func Tally[K any](keys []K, alg string, of func(K) (pub crypto.PublicKey, alg string)) (pinned, usable int, refusal error) {
	for _, k := range keys {
		pub, a := of(k)
		if a != alg {
			continue
		}
		pinned++
		if err := CheckKey(pub, a); err != nil {
			refusal = err
			continue
		}
		usable++
	}
	return pinned, usable, refusal
}

// VerifyChecked is Verify without CheckKey's point validation up front,
// for callers that try several keys and check a key only to explain why
// none verified (the jws and cose packages): it checks the key's type,
// curve and coordinates, and crypto/ecdsa validates the point as it
// verifies, so a key CheckKey refuses never verifies here either.
func VerifyChecked(pub crypto.PublicKey, alg string, msg, sig []byte) error {
	if alg == EdDSA {
		k, ok := pub.(ed25519.PublicKey)
		if !ok || len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: EdDSA needs an Ed25519 public key, have %T", ErrKey, pub)
		}
		if !ed25519.Verify(k, msg, sig) {
			return ErrVerification
		}
		return nil
	}
	p, ok := ecParams(alg)
	if !ok {
		return fmt.Errorf("%w: %q", ErrAlgorithm, alg)
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k == nil || k.Curve != p.curve || k.X == nil || k.Y == nil {
		return fmt.Errorf("%w: %s needs an ECDSA public key on %s", ErrKey, alg, p.curve.Params().Name)
	}
	if len(sig) != 2*p.size {
		return fmt.Errorf("%w: %d octets, want %d (raw r||s)", ErrVerification, len(sig), 2*p.size)
	}
	r := new(big.Int).SetBytes(sig[:p.size])
	s := new(big.Int).SetBytes(sig[p.size:])
	if !ecdsa.Verify(k, p.sum(msg), r, s) {
		return ErrVerification
	}
	return nil
}

func lowS(n, s *big.Int) bool {
	return s.Cmp(new(big.Int).Rsh(n, 1)) <= 0
}

// IsLowS reports whether sig, a raw r||s signature for alg, has s <= n/2.
// It reports false for EdDSA or a signature of the wrong length.
func IsLowS(alg string, sig []byte) bool {
	p, ok := ecParams(alg)
	if !ok || len(sig) != 2*p.size {
		return false
	}
	return lowS(p.curve.Params().N, new(big.Int).SetBytes(sig[p.size:]))
}

// Twin returns the other valid form (r, n-s) of the raw ECDSA signature sig
// for alg: the high-S twin of a low-S signature and the other way round.
// Tests use it to show that high-S signatures from other signers verify.
func Twin(alg string, sig []byte) ([]byte, error) {
	p, ok := ecParams(alg)
	if !ok {
		return nil, fmt.Errorf("%w: %q has no twin", ErrAlgorithm, alg)
	}
	if len(sig) != 2*p.size {
		return nil, fmt.Errorf("ecsig: signature of %d octets, want %d", len(sig), 2*p.size)
	}
	n := p.curve.Params().N
	s := new(big.Int).SetBytes(sig[p.size:])
	if s.Sign() == 0 || s.Cmp(n) >= 0 {
		return nil, errors.New("ecsig: s out of range")
	}
	out := make([]byte, len(sig))
	copy(out, sig[:p.size])
	new(big.Int).Sub(n, s).FillBytes(out[p.size:])
	return out, nil
}
