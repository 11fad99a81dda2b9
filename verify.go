package handoff

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/jws"
	"github.com/agentproto/handoff/reason"
)

// Section 3 of the draft and step 1 of section 5.1: the signed form, the
// signature, and the trust lookup. Nothing here returns a decoded element
// as verified unless its signature verified with a key the trust
// configuration binds to its iss; InspectUnverified is the one way to read
// an element without that, and its name says so.

// OpenOffer checks a signed offer's form and signature (step 1 of section
// 5.1): the JWS typ or COSE content type, v 1 and type "offer", then the
// signature with a key the trust configuration binds to the payload's iss
// (HC-13..HC-18, HC-21, HC-22, HC-60). It returns the decoded offer only
// when all of that holds. A failure is a *Rejection with reason
// "bad-signature" (wrapping ErrSignature, ErrMalformed or ErrTooLarge) or
// "untrusted-key" (wrapping ErrUntrustedKey).
//
// Before the signature verifies, the payload is read only as far as
// step 1 needs: it is checked to be a well-formed map, and v, type and iss
// are decoded; the rest is decoded after (see SECURITY.md), on the typed
// fast path when the offer holds only the members the CDDL names.
func OpenOffer(s Signed, trust *Trust, lim Limits) (*Offer, error) {
	o, _, err := openOffer(s, trust, lim)
	return o, err
}

// openOffer is OpenOffer, and names the key that verified the offer.
func openOffer(s Signed, trust *Trust, lim Limits) (*Offer, keyRef, error) {
	// Not the fast path before the signature: it builds obo and refs in
	// the generic model, and a stranger's refs of a few thousand empty
	// maps would cost 10 to 85 times their size.
	payload, enc, key, err := open(s, trust, lim, func(payload []byte, enc Encoding) (AgentID, error) {
		return peekIss(payload, enc, lim, "offer")
	})
	if err != nil {
		return nil, keyRef{}, err
	}
	o, err := decodeOffer(payload, enc, lim)
	if err != nil {
		return nil, keyRef{}, signedMalformed(err)
	}
	return o, key, nil
}

// OpenStatus checks a signed status's form and signature as OpenOffer does
// for an offer, with type "status" (HC-55, first part). VerifyStatus also
// relates the status to its offer.
func OpenStatus(s Signed, trust *Trust, lim Limits) (*Status, error) {
	payload, enc, _, err := open(s, trust, lim, func(payload []byte, enc Encoding) (AgentID, error) {
		return peekIss(payload, enc, lim, "status")
	})
	if err != nil {
		return nil, err
	}
	st, err := decodeStatus(payload, enc, lim)
	if err != nil {
		return nil, signedMalformed(err)
	}
	return st, nil
}

// signedMalformed is the rejection of a payload whose signature verified
// but that the CDDL refuses: bad-signature, as before the signature.
func signedMalformed(err error) error {
	return &Rejection{Reason: reason.BadSignature, Detail: err.Error(), Err: errClass(err)}
}

// errNoTrustedKey is returned by the key lookups so that open can tell an
// untrusted key from a bad signature.
type errNoTrustedKey struct {
	iss AgentID
	why string // why the keys of iss are withheld (Trust.Withhold), if they are
}

func (e errNoTrustedKey) Error() string {
	if e.why != "" {
		return fmt.Sprintf("the trust configuration binds no key to %q: %s", e.iss, e.why)
	}
	return fmt.Sprintf("the trust configuration binds no key to %q", e.iss)
}

// open verifies s and returns its payload and the payload's encoding.
// decode reads the payload (not yet verified) and returns its iss, whose
// keys the trust configuration gives, the key the kid names first (HC-16,
// HC-18, HC-21).
func open(s Signed, trust *Trust, lim Limits, decode func([]byte, Encoding) (AgentID, error)) ([]byte, Encoding, keyRef, error) {
	lim = lim.withDefaults()
	if trust == nil {
		return nil, 0, keyRef{}, reject(reason.UntrustedKey, ErrUntrustedKey, "no trust configuration")
	}
	// foreignKID: the message names a key by kid, none of iss's keys has
	// that name, and (below) none of them verifies: the signer is a key the
	// receiver does not trust for iss (untrusted-key), not iss's key over
	// altered octets (bad-signature).
	var foreignKID bool
	var why keyMismatch // what the trust configuration holds for iss, for the message
	var iss AgentID
	var payload []byte
	var enc Encoding
	var bound []boundKey // the keys tried, in the order tried
	var used int         // the index among them of the key that verified
	var err error
	switch s.Format {
	case JWS:
		enc = JSON
		var h jws.Header
		payload, h, err = jws.OpenWith(s.Octets, func(h jws.Header, p []byte) ([]jws.Key, error) {
			var err error
			if iss, err = decode(p, JSON); err != nil {
				return nil, err
			}
			var named bool
			bound, named = trust.candidates(iss, h.KID)
			foreignKID = h.KID != "" && !named
			var keys []jws.Key
			for _, k := range bound {
				keys = append(keys, jws.Key{Public: k.Public, Alg: k.Alg})
			}
			why = keyMismatch{alg: h.Alg, kid: h.KID}
			for _, k := range keys {
				why.pinned = append(why.pinned, k.Alg)
			}
			if len(keys) == 0 {
				return nil, trust.noKey(iss)
			}
			return keys, nil
		}, jws.Options{MaxSize: lim.MaxElementSize, Strict: lim.Strict})
		used = h.KeyIndex
	case COSE:
		enc = CBOR
		var h cose.Header
		payload, h, err = cose.OpenWith(s.Octets, func(h cose.Header, p []byte) ([]cose.Key, error) {
			var err error
			if iss, err = decode(p, CBOR); err != nil {
				return nil, err
			}
			// The kid may sit in either header (HC-18): an unprotected one
			// only orders the keys bound to iss, which are all tried.
			kid, _ := h.KeyHint()
			var named bool
			bound, named = trust.candidates(iss, kid)
			foreignKID = kid != "" && !named
			var keys []cose.Key
			for _, k := range bound {
				keys = append(keys, cose.Key{Public: k.Public, Alg: k.Alg})
			}
			why = keyMismatch{alg: h.Alg, kid: kid}
			for _, k := range keys {
				why.pinned = append(why.pinned, k.Alg)
			}
			if len(keys) == 0 {
				return nil, trust.noKey(iss)
			}
			return keys, nil
		}, cose.Options{MaxSize: lim.MaxElementSize, Strict: lim.Strict})
		used = h.KeyIndex
	default:
		return nil, 0, keyRef{}, reject(reason.BadSignature, ErrMalformed, "unknown signed form %d", s.Format)
	}
	if err == nil {
		return payload, enc, bound[used].ref(), nil
	}
	return nil, 0, keyRef{}, openErr(err, iss, foreignKID, why)
}

// keyMismatch is what open saw of a message's header and of the keys the
// trust configuration binds to its iss, so that a refusal names the
// cause: a key that is not bound to iss, or keys pinned to another alg.
type keyMismatch struct {
	alg, kid string   // the header's
	pinned   []string // the alg of each key bound to iss
}

// otherAlg reports whether no key bound to iss is pinned to the header's
// alg, and the algs they are pinned to.
func (m keyMismatch) otherAlg() (bool, []string) {
	var algs []string
	for _, a := range m.pinned {
		if a == m.alg {
			return false, nil
		}
		if !slices.Contains(algs, a) {
			algs = append(algs, a)
		}
	}
	return len(algs) > 0, algs
}

// algDetail says why an element signed under an alg no key of iss is
// pinned to does not verify (HC-22), and, when its kid names none of
// those keys, that the signing key is likely not one bound to iss (HC-21).
func algDetail(iss AgentID, m keyMismatch, foreignKID bool) string {
	_, algs := m.otherAlg()
	d := fmt.Sprintf("the trust configuration pins the key(s) of %q to %s, but the element is signed with %s (HC-22)",
		iss, strings.Join(algs, ", "), m.alg)
	if foreignKID {
		d += fmt.Sprintf("; its kid %q names none of those keys: the signing key is not one bound to %q (HC-21)", m.kid, iss)
	}
	return d
}

// openErr classifies why open failed. The reason codes are the draft's
// and the vectors' (choices where the draft is silent, 4); the detail
// names the cause a user can act on: a signing key not bound to iss, or
// keys of iss pinned to another alg.
func openErr(err error, iss AgentID, foreignKID bool, why keyMismatch) error {
	var nk errNoTrustedKey
	otherAlg, _ := why.otherAlg()
	switch {
	case errors.As(err, &nk):
		return reject(reason.UntrustedKey, ErrUntrustedKey, "%v", nk)
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrTooLarge):
		return &Rejection{Reason: reason.BadSignature, Detail: err.Error(), Err: errClass(err)}
	case errors.Is(err, jws.ErrTooLarge), errors.Is(err, cose.ErrTooLarge):
		return &Rejection{Reason: reason.BadSignature, Detail: err.Error(), Err: ErrTooLarge}
	case (errors.Is(err, jws.ErrAlg) || errors.Is(err, cose.ErrAlg)) && otherAlg:
		// HC-22: vector #040 is bad-signature, whatever the kid names.
		return &Rejection{Reason: reason.BadSignature, Detail: algDetail(iss, why, foreignKID), Err: fmt.Errorf("%w: %w", ErrSignature, err)}
	case (errors.Is(err, jws.ErrSignature) || errors.Is(err, cose.ErrSignature)) && foreignKID:
		return reject(reason.UntrustedKey, ErrUntrustedKey,
			"the signing key is not one the trust configuration binds to %q: the kid %q names none of the %d key(s) bound to it, and none of them verifies the signature (HC-21)",
			iss, why.kid, len(why.pinned))
	case errors.Is(err, jws.ErrSignature), errors.Is(err, cose.ErrSignature):
		return &Rejection{Reason: reason.BadSignature, Detail: err.Error(), Err: ErrSignature}
	default:
		// Form errors of the envelope: typ, crit, alg...
		return &Rejection{Reason: reason.BadSignature, Detail: err.Error(), Err: fmt.Errorf("%w: %w", ErrSignature, err)}
	}
}

// InspectUnverified decodes a signed handoff's payload WITHOUT verifying its
// signature or trusting anything in it. It is for display and diagnosis
// only: nothing it returns may drive a decision. Exactly one of the returned
// offer and status is non-nil.
func InspectUnverified(s Signed, lim Limits) (*Offer, *Status, error) {
	lim = lim.withDefaults()
	p, enc, err := unsafePayload(s, lim)
	if err != nil {
		return nil, nil, err
	}
	m, err := decodePayload(p, enc, lim)
	if err != nil {
		return nil, nil, err
	}
	if t, _ := m["type"].(string); t == "status" {
		st, err := statusFrom(m, lim.Strict)
		if err != nil {
			return nil, nil, err
		}
		return nil, st, nil
	}
	o, err := offerFrom(m, lim.Strict)
	if err != nil {
		return nil, nil, err
	}
	return o, nil, nil
}

// inspectOffer decodes a signed offer's payload without verifying it, as
// InspectUnverified does, for the rules that look at an element before its
// signature (ChainPolicy.StructureFirst) and at an element whose iss has no
// trusted key. Nothing it returns counts as verified.
func inspectOffer(s Signed, lim Limits) (*Offer, error) {
	lim = lim.withDefaults()
	p, enc, err := unsafePayload(s, lim)
	if err != nil {
		return nil, err
	}
	return decodeOffer(p, enc, lim)
}

// unsafePayload returns the payload of a signed handoff, unverified, with
// the encoding its form implies.
func unsafePayload(s Signed, lim Limits) ([]byte, Encoding, error) {
	var p []byte
	var enc Encoding
	var err error
	switch s.Format {
	case JWS:
		p, err = jws.UnsafePayload(s.Octets, lim.MaxElementSize)
		enc = JSON
	case COSE:
		p, err = cose.UnsafePayload(s.Octets, lim.MaxElementSize)
		enc = CBOR
	default:
		return nil, 0, malformed("unknown signed form %d", s.Format)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return p, enc, nil
}

// openDecoded is OpenOffer for an element whose payload was decoded before
// from the same octets (inspectOffer): the form and signature are checked
// as OpenOffer checks them, the keys chosen by o's iss, and the payload is
// not decoded again. o is the element's offer once this returns nil.
func openDecoded(s Signed, trust *Trust, lim Limits, o *Offer) (keyRef, error) {
	_, _, key, err := open(s, trust, lim, func([]byte, Encoding) (AgentID, error) { return o.Iss, nil })
	return key, err
}

// VerifyStatus checks a signed status against the offer it answers, as
// section 5.4 says (HC-55): its signed form with type "status", its
// signature with a key the trust configuration binds to status.iss, then
// status.iss is offer.aud (offer.iss for "canceled"), status.aud is the
// other party of the hop, status.hop is the offer's hop and status.offer is
// the handoff digest of the offer. offer is the signed offer itself, so that
// the digest is computed here over its octets; it is decoded, not verified:
// the status is checked against it, not it against the status.
//
// A failure is a *Rejection; the status must then be discarded.
func VerifyStatus(status, offer Signed, trust *Trust, lim Limits) (*Status, error) {
	o, _, err := InspectUnverified(offer, lim)
	if err != nil {
		return nil, reject(reason.Policy, ErrMalformed, "the offer does not decode: %s", bare(err))
	}
	if o == nil {
		return nil, reject(reason.Policy, ErrMalformed, "the element given as the offer is a status")
	}
	st, err := OpenStatus(status, trust, lim)
	if err != nil {
		return nil, err
	}
	if err := statusAnswers(st, o, offer.Digest()); err != nil {
		return nil, err
	}
	return st, nil
}
