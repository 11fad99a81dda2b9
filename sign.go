package handoff

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"

	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/jws"
)

// Signer signs offers and statuses for one agent, in one format (section
// 3). ECDSA signatures it makes are low-S, so what it signs has one form.
type Signer struct {
	key    crypto.Signer
	alg    string
	kid    string
	format Format
	rand   io.Reader
	// env signs payloads in the Signer's format: a jws.Signer or a
	// cose.Signer, which write the constant protected header once.
	env interface {
		Sign(payload []byte) ([]byte, error)
	}
}

// NewSigner returns a Signer for key in the given format. The algorithm
// follows from the key (P-256: ES256, P-384: ES384, Ed25519: EdDSA) and the
// kid is the key's RFC 7638 thumbprint (HC-16). rand may be nil for
// crypto/rand.
func NewSigner(key crypto.Signer, format Format, rnd io.Reader) (*Signer, error) {
	if key == nil {
		return nil, fmt.Errorf("handoff: nil signing key")
	}
	if format != JWS && format != COSE {
		return nil, fmt.Errorf("handoff: unknown format %d", format)
	}
	alg, err := algFor(key.Public())
	if err != nil {
		return nil, err
	}
	kid, err := jws.Thumbprint(key.Public())
	if err != nil {
		return nil, err
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	s := &Signer{key: key, alg: alg, kid: kid, format: format, rand: rnd}
	if format == JWS {
		s.env, err = jws.NewSigner(key, alg, kid, rnd)
	} else {
		s.env, err = cose.NewSigner(key, alg, kid, rnd)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Format returns the signed form s produces.
func (s *Signer) Format() Format { return s.format }

// Key returns the public half of s's key, pinned to its alg, as a trust
// configuration would hold it.
func (s *Signer) Key() TrustedKey {
	return TrustedKey{Public: s.key.Public(), Alg: s.alg, KID: s.kid}
}

// SignOffer signs o: the JSON payload in a JWS, or the CBOR payload in a
// COSE_Sign1. The payload is checked against the CDDL first, decoded as a
// receiver decodes it, so that nothing is signed that a receiver must
// refuse.
func (s *Signer) SignOffer(o *Offer) (Signed, error) {
	p, err := o.encode(s.encoding())
	if err != nil {
		return Signed{}, err
	}
	if _, err := decodeOffer(p, s.encoding(), Limits{}); err != nil {
		return Signed{}, err
	}
	return s.sign(p)
}

// SignStatus signs st as SignOffer signs an offer.
func (s *Signer) SignStatus(st *Status) (Signed, error) {
	p, err := st.encode(s.encoding())
	if err != nil {
		return Signed{}, err
	}
	if _, err := decodeStatus(p, s.encoding(), Limits{}); err != nil {
		return Signed{}, err
	}
	return s.sign(p)
}

// encoding is the payload encoding of s's format.
func (s *Signer) encoding() Encoding {
	if s.format == JWS {
		return JSON
	}
	return CBOR
}

func (s *Signer) sign(payload []byte) (Signed, error) {
	b, err := s.env.Sign(payload)
	if err != nil {
		return Signed{}, err
	}
	return Signed{Format: s.format, Octets: b}, nil
}

// algFor returns the alg a signing key implies.
func algFor(pub crypto.PublicKey) (string, error) {
	switch pk := pub.(type) {
	case *ecdsa.PublicKey:
		switch pk.Curve {
		case elliptic.P256():
			return ES256, nil
		case elliptic.P384():
			return ES384, nil
		}
	case ed25519.PublicKey:
		return EdDSA, nil
	}
	return "", fmt.Errorf("%w: unsupported key type %T", ErrMalformed, pub)
}
