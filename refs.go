package handoff

import (
	"context"
	"errors"
	"fmt"
)

// RefOutcome is what checking a reference established (section 2.2, HC-11).
type RefOutcome string

const (
	// RefVerified: the digest matched. Never reported without the check.
	RefVerified RefOutcome = "verified"
	// RefMismatch: the object was obtained and its digest differs.
	RefMismatch RefOutcome = "mismatch"
	// RefUnverifiable: the object could not be obtained or checked,
	// including a Digest alg this implementation lacks (HC-08) and the
	// optional kinds it does not implement.
	RefUnverifiable RefOutcome = "unverifiable"
	// RefNotChecked: policy did not ask for the check.
	RefNotChecked RefOutcome = "not checked"
)

// RefObject is the material a reference names: the octets delivered with
// the task or fetched from loc, and for "salted-digest" the salt delivered
// with them (HC-09).
type RefObject struct {
	Octets []byte
	Salt   []byte
}

// ErrRefUnavailable is returned by a RefSource that cannot provide the
// object a reference names; the reference is then unverifiable.
var ErrRefUnavailable = errors.New("handoff: referenced object unavailable")

// RefSource provides the object a reference names. This package never
// fetches loc itself (HC-61): a caller that fetches applies its own URL
// safeguards. Return an error wrapping ErrRefUnavailable when the object
// cannot be had.
type RefSource func(ctx context.Context, ref ContextRef) (RefObject, error)

// RefsByLoc returns a RefSource that serves objects by the ref's loc.
func RefsByLoc(objects map[string]RefObject) RefSource {
	return func(_ context.Context, ref ContextRef) (RefObject, error) {
		obj, ok := objects[ref.Loc]
		if !ok {
			return RefObject{}, fmt.Errorf("%w: nothing supplied for loc %q", ErrRefUnavailable, ref.Loc)
		}
		return obj, nil
	}
}

// RefPolicy says which references a receiver checks (step 7 of 5.1).
type RefPolicy uint8

const (
	// RefsNotChecked reports every reference "not checked" (the default).
	RefsNotChecked RefPolicy = iota
	// RefsCheckAvailable checks every reference whose object the source
	// provides: a mismatch rejects ("ref-mismatch"), an unverifiable one is
	// reported but does not reject.
	RefsCheckAvailable
	// RefsRequired requires every reference to verify: a mismatch rejects
	// with "ref-mismatch", an unverifiable one with "unverifiable-ref".
	RefsRequired
)

// RefResult is the outcome of one reference.
type RefResult struct {
	Ref     ContextRef
	Outcome RefOutcome
	Detail  string
}

// CheckRef checks one reference against obj: "digest" and "salted-digest"
// are computed here; the optional kinds "scitt-receipt", "learnlog-head" and
// URI kinds are not implemented and come out unverifiable, as does a Digest
// alg other than sha-256 (HC-08).
func CheckRef(ref ContextRef, obj RefObject) RefResult {
	res := RefResult{Ref: ref}
	var ok bool
	var err error
	switch ref.Kind {
	case KindDigest:
		ok, err = ref.Dig.Matches(obj.Octets)
	case KindSaltedDigest:
		ok, err = ref.Dig.MatchesSalted(obj.Salt, obj.Octets)
	default:
		res.Outcome, res.Detail = RefUnverifiable, fmt.Sprintf("kind %q is not implemented", ref.Kind)
		return res
	}
	switch {
	case err != nil:
		res.Outcome, res.Detail = RefUnverifiable, err.Error()
	case ok:
		res.Outcome = RefVerified
	default:
		res.Outcome, res.Detail = RefMismatch, "digest differs"
	}
	return res
}

// checkRefs runs step 7 of section 5.1 under pol.
func checkRefs(ctx context.Context, refs []ContextRef, pol RefPolicy, src RefSource) ([]RefResult, *Rejection) {
	out := make([]RefResult, len(refs))
	for i, ref := range refs {
		out[i] = RefResult{Ref: ref, Outcome: RefNotChecked}
		if pol == RefsNotChecked {
			continue
		}
		if src == nil {
			out[i].Outcome, out[i].Detail = RefUnverifiable, "no source of referenced objects"
		} else if obj, err := src(ctx, ref); err != nil {
			out[i].Outcome, out[i].Detail = RefUnverifiable, err.Error()
		} else {
			out[i] = CheckRef(ref, obj)
		}
	}
	for i, r := range out {
		switch {
		case r.Outcome == RefMismatch:
			return out, reject(ReasonRefMismatch, ErrRejected, "refs[%d]: %s", i, r.Detail)
		case r.Outcome == RefUnverifiable && pol == RefsRequired:
			return out, reject(ReasonUnverifiableRef, ErrRejected, "refs[%d]: %s", i, r.Detail)
		}
	}
	return out, nil
}

// VerifyGrant checks a credential presented with a hop against the offer's
// grant (HC-57, HC-03): nil when grant is the digest of exactly these
// octets. A missing grant, a mismatch, and a grant Digest alg this
// implementation lacks (HC-08: a failure for grant) are errors.
func VerifyGrant(o *Offer, credential []byte) error {
	if o.Grant == nil {
		return fmt.Errorf("%w: the offer carries no grant", ErrRejected)
	}
	ok, err := o.Grant.Matches(credential)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: credential does not match grant", ErrRejected)
	}
	return nil
}
