package handoff

import (
	"context"
	"errors"
	"fmt"
)

// RefOutcome is what checking a reference established (section 2.2, HC-11).
type RefOutcome string

const (
	// RefVerified: the digest matched and any proof checked against a key
	// the receiver trusts. Never reported without the check.
	RefVerified RefOutcome = "verified"
	// RefMismatch: the object was obtained and its digest differs.
	RefMismatch RefOutcome = "mismatch"
	// RefUnverifiable: the object could not be obtained or checked,
	// including a Digest alg this implementation lacks (HC-08), a kind no
	// checker is registered for, and a proof that does not verify.
	RefUnverifiable RefOutcome = "unverifiable"
	// RefNotChecked: policy did not ask for the check.
	RefNotChecked RefOutcome = "not checked"
)

// RefObject is the material a reference names: the octets delivered with
// the task or fetched from loc, and for "salted-digest" the salt delivered
// with them (HC-09). For "scitt-receipt" the octets are the Signed
// Statement.
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

// Object asks the source for the object ref names. A nil source has no
// objects: the error wraps ErrRefUnavailable. Checkers call this rather
// than the function itself.
func (s RefSource) Object(ctx context.Context, ref ContextRef) (RefObject, error) {
	if s == nil {
		return RefObject{}, fmt.Errorf("%w: no source of referenced objects", ErrRefUnavailable)
	}
	return s(ctx, ref)
}

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
	// RefsCheckAvailable checks every reference: a mismatch rejects
	// ("ref-mismatch"), an unverifiable one is reported but does not
	// reject.
	RefsCheckAvailable
	// RefsRequired requires every reference to verify: a mismatch rejects
	// with "ref-mismatch", an unverifiable one with "unverifiable-ref".
	RefsRequired
)

// RefResult is the outcome of one reference.
type RefResult struct {
	Ref     ContextRef
	Outcome RefOutcome
	// Detail says why a reference is not verified, for people.
	Detail string
}

// RefChecker checks the references of one kind (section 2.2). CheckRef
// returns RefVerified only after it has checked the digest, and any proof
// the kind defines, against material and keys the caller trusts; RefMismatch
// when it obtained the object and its digest differs; RefUnverifiable in
// every other case, with a Detail. src gives the objects delivered with the
// task or fetched from loc by the caller; a kind whose proof is
// self-contained need not call it. Call src.Object, which handles a nil
// source.
//
// A checker is called outside any lock of the Agent, from as many
// goroutines as receive at once; it must be safe for that. It must not
// fetch loc from an untrusted sender without URL safeguards (HC-61).
//
// Checkers are run through RefCheckers.Check, which holds them to HC-11
// whatever they return: see there.
type RefChecker interface {
	CheckRef(ctx context.Context, ref ContextRef, src RefSource) RefResult
}

// RefCheckerFunc adapts a function to RefChecker.
type RefCheckerFunc func(ctx context.Context, ref ContextRef, src RefSource) RefResult

// CheckRef calls f.
func (f RefCheckerFunc) CheckRef(ctx context.Context, ref ContextRef, src RefSource) RefResult {
	return f(ctx, ref, src)
}

// DigestChecker is the built-in checker of kind "digest": dig is the digest
// of the object's octets (section 2.2). A Digest alg other than sha-256 is
// unverifiable (HC-08).
type DigestChecker struct{}

// CheckRef checks ref against the object src provides.
func (DigestChecker) CheckRef(ctx context.Context, ref ContextRef, src RefSource) RefResult {
	obj, err := src.Object(ctx, ref)
	if err != nil {
		return RefResult{Ref: ref, Outcome: RefUnverifiable, Detail: bare(err)}
	}
	ok, err := ref.Dig.Matches(obj.Octets)
	return digestResult(ref, ok, err)
}

// SaltedDigestChecker is the built-in checker of kind "salted-digest": dig
// is the digest of the salt delivered with the object followed by its
// octets (HC-09). A salt shorter than MinSaltSize, or none, is
// unverifiable.
type SaltedDigestChecker struct{}

// CheckRef checks ref against the object and salt src provides.
func (SaltedDigestChecker) CheckRef(ctx context.Context, ref ContextRef, src RefSource) RefResult {
	obj, err := src.Object(ctx, ref)
	if err != nil {
		return RefResult{Ref: ref, Outcome: RefUnverifiable, Detail: bare(err)}
	}
	ok, err := ref.Dig.MatchesSalted(obj.Salt, obj.Octets)
	return digestResult(ref, ok, err)
}

func digestResult(ref ContextRef, ok bool, err error) RefResult {
	switch {
	case err != nil:
		return RefResult{Ref: ref, Outcome: RefUnverifiable, Detail: bare(err)}
	case ok:
		return RefResult{Ref: ref, Outcome: RefVerified}
	default:
		return RefResult{Ref: ref, Outcome: RefMismatch, Detail: "digest differs"}
	}
}

var (
	_ RefChecker = DigestChecker{}
	_ RefChecker = SaltedDigestChecker{}
	_ RefChecker = RefCheckerFunc(nil)
)

// ErrRefChecker: a RefCheckers registration is invalid (a kind that is
// neither an optional defined kind nor an absolute URI, a built-in kind, or
// a nil checker).
var ErrRefChecker = errors.New("handoff: invalid reference checker")

// RefCheckers maps a ContextRef kind to the checker of that kind. "digest"
// and "salted-digest" are built in and cannot be replaced. A caller
// registers the optional kinds "scitt-receipt" and "learnlog-head" (see the
// scitt and learnlog packages) and kinds named by an absolute URI (HC-10).
// A kind with no checker is unverifiable. The zero value checks only the
// built-in kinds.
type RefCheckers map[string]RefChecker

// Validate reports an invalid registration, wrapping ErrRefChecker.
func (cs RefCheckers) Validate() error {
	for kind, c := range cs {
		switch {
		case kind == KindDigest || kind == KindSaltedDigest:
			return fmt.Errorf("%w: kind %q is built in", ErrRefChecker, kind)
		case !knownKind(kind) && !absoluteURI(kind): // HC-10
			return fmt.Errorf("%w: kind %q is neither a defined kind nor an absolute URI", ErrRefChecker, kind)
		case c == nil:
			return fmt.Errorf("%w: kind %q has a nil checker", ErrRefChecker, kind)
		}
	}
	return nil
}

// checker is the checker of kind, or nil.
func (cs RefCheckers) checker(kind string) RefChecker {
	switch kind {
	case KindDigest:
		return DigestChecker{}
	case KindSaltedDigest:
		return SaltedDigestChecker{}
	}
	return cs[kind]
}

// Check checks one reference with the checker of its kind and holds the
// result to HC-11: the result names ref; a kind with no checker, a checker
// that panics, and a checker whose outcome is anything other than
// verified, mismatch or unverifiable (including "not checked": the policy
// asked for the check) come out unverifiable; a result that is not
// verified always carries a Detail.
func (cs RefCheckers) Check(ctx context.Context, ref ContextRef, src RefSource) (res RefResult) {
	c := cs.checker(ref.Kind)
	if c == nil {
		return RefResult{Ref: ref, Outcome: RefUnverifiable, Detail: fmt.Sprintf("no checker for kind %q", ref.Kind)}
	}
	defer func() {
		if p := recover(); p != nil {
			res = RefResult{Ref: ref, Outcome: RefUnverifiable, Detail: fmt.Sprintf("checker of kind %q failed: %v", ref.Kind, p)}
		}
	}()
	res = c.CheckRef(ctx, ref, src)
	res.Ref = ref
	switch res.Outcome {
	case RefVerified:
	case RefMismatch, RefUnverifiable:
		if res.Detail == "" {
			res.Detail = fmt.Sprintf("checker of kind %q gave no reason", ref.Kind)
		}
	default:
		res.Detail = fmt.Sprintf("checker of kind %q returned outcome %q: %s", ref.Kind, res.Outcome, res.Detail)
		res.Outcome = RefUnverifiable
	}
	return res
}

// CheckRefs checks every reference, in order, as step 7 does under a
// policy that checks them, without rejecting anything: the caller reads the
// outcomes.
func (cs RefCheckers) CheckRefs(ctx context.Context, refs []ContextRef, src RefSource) []RefResult {
	out := make([]RefResult, len(refs))
	for i, ref := range refs {
		out[i] = cs.Check(ctx, ref, src)
	}
	return out
}

// CheckRef checks one reference of a built-in kind against obj: "digest"
// and "salted-digest". Any other kind is unverifiable here; use
// RefCheckers.Check to reach registered checkers.
func CheckRef(ref ContextRef, obj RefObject) RefResult {
	src := RefSource(func(context.Context, ContextRef) (RefObject, error) { return obj, nil })
	return RefCheckers(nil).Check(context.Background(), ref, src)
}

// checkRefs runs step 7 of section 5.1 under pol.
func checkRefs(ctx context.Context, refs []ContextRef, pol RefPolicy, cs RefCheckers, src RefSource) ([]RefResult, *Rejection) {
	if pol == RefsNotChecked {
		return notChecked(refs), nil
	}
	out := cs.CheckRefs(ctx, refs, src)
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
