// Package ref is the draft's context references (section 2.2): a Ref names
// prior context by the digest of its object, and a Checker of its kind
// establishes what that digest is worth (HC-08..HC-11). "digest" and
// "salted-digest" are built in; the optional kinds "scitt-receipt" and
// "learnlog-head" are packages scitt and learnlog, and any other kind is an
// absolute URI with a Checker the caller registers.
//
// The package sits below the root package, whose Agent runs the checkers
// in step 7 of receiving an offer (section 5.1) under a Policy.
package ref

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentproto/handoff/digest"
)

// Reference kinds defined by the draft (section 2.2). Any other kind must be
// an absolute URI (HC-10).
const (
	KindDigest       = "digest"
	KindSaltedDigest = "salted-digest"
	KindSCITTReceipt = "scitt-receipt"
	KindLearnlogHead = "learnlog-head"
)

// Ref names prior context by digest (section 2.2).
type Ref struct {
	Kind  string
	Dig   digest.Digest
	Loc   string // optional URI where the object can be fetched
	Proof any    // optional kind-specific material, as decoded
	Extra map[string]any
}

// Outcome is what checking a reference established (section 2.2, HC-11).
type Outcome string

const (
	// Verified: the digest matched and any proof checked against a key
	// the receiver trusts. Never reported without the check.
	Verified Outcome = "verified"
	// Mismatch: the object was obtained and its digest differs.
	Mismatch Outcome = "mismatch"
	// Unverifiable: the object could not be obtained or checked,
	// including a Digest alg this implementation lacks (HC-08), a kind no
	// checker is registered for, and a proof that does not verify.
	Unverifiable Outcome = "unverifiable"
	// NotChecked: policy did not ask for the check.
	NotChecked Outcome = "not checked"
)

// Object is the material a reference names: the octets delivered with
// the task or fetched from loc, and for "salted-digest" the salt delivered
// with them (HC-09). For "scitt-receipt" the octets are the Signed
// Statement.
type Object struct {
	Octets []byte
	Salt   []byte
}

// ErrUnavailable is returned by a Source that cannot provide the
// object a reference names; the reference is then unverifiable.
var ErrUnavailable = errors.New("ref: referenced object unavailable")

// Source provides the object a reference names. This package never
// fetches loc itself (HC-61): a caller that fetches applies its own URL
// safeguards. Return an error wrapping ErrUnavailable when the object
// cannot be had.
type Source func(ctx context.Context, ref Ref) (Object, error)

// Object asks the source for the object ref names. A nil source has no
// objects: the error wraps ErrUnavailable. Checkers call this rather
// than the function itself.
func (s Source) Object(ctx context.Context, r Ref) (Object, error) {
	if s == nil {
		return Object{}, fmt.Errorf("%w: no source of referenced objects", ErrUnavailable)
	}
	return s(ctx, r)
}

// ByLoc returns a Source that serves objects by the ref's loc.
func ByLoc(objects map[string]Object) Source {
	return func(_ context.Context, r Ref) (Object, error) {
		obj, ok := objects[r.Loc]
		if !ok {
			return Object{}, fmt.Errorf("%w: nothing supplied for loc %q", ErrUnavailable, r.Loc)
		}
		return obj, nil
	}
}

// Policy says which references a receiver checks (step 7 of 5.1).
type Policy uint8

const (
	// CheckNone reports every reference "not checked" (the default).
	CheckNone Policy = iota
	// CheckAvailable checks every reference: a mismatch rejects
	// ("ref-mismatch"), an unverifiable one is reported but does not
	// reject.
	CheckAvailable
	// CheckRequired requires every reference to verify: a mismatch rejects
	// with "ref-mismatch", an unverifiable one with "unverifiable-ref".
	CheckRequired
)

// Result is the outcome of one reference.
type Result struct {
	Ref     Ref
	Outcome Outcome
	// Detail says why a reference is not verified, for people.
	Detail string
}

// Checker checks the references of one kind (section 2.2). CheckRef
// returns Verified only after it has checked the digest, and any proof
// the kind defines, against material and keys the caller trusts; Mismatch
// when it obtained the object and its digest differs; Unverifiable in
// every other case, with a Detail. src gives the objects delivered with the
// task or fetched from loc by the caller; a kind whose proof is
// self-contained need not call it. Call src.Object, which handles a nil
// source.
//
// A checker is called outside any lock of the Agent, from as many
// goroutines as receive at once; it must be safe for that. It must not
// fetch loc from an untrusted sender without URL safeguards (HC-61).
//
// Checkers are run through Checkers.Check, which holds them to HC-11
// whatever they return: see there.
type Checker interface {
	CheckRef(ctx context.Context, ref Ref, src Source) Result
}

// CheckerFunc adapts a function to Checker.
type CheckerFunc func(ctx context.Context, ref Ref, src Source) Result

// CheckRef calls f.
func (f CheckerFunc) CheckRef(ctx context.Context, ref Ref, src Source) Result {
	return f(ctx, ref, src)
}

// DigestChecker is the built-in checker of kind "digest": dig is the digest
// of the object's octets (section 2.2). A Digest alg other than sha-256 is
// unverifiable (HC-08).
type DigestChecker struct{}

// CheckRef checks ref against the object src provides.
func (DigestChecker) CheckRef(ctx context.Context, r Ref, src Source) Result {
	obj, err := src.Object(ctx, r)
	if err != nil {
		return Result{Ref: r, Outcome: Unverifiable, Detail: bare(err)}
	}
	ok, err := r.Dig.Matches(obj.Octets)
	return digestResult(r, ok, err)
}

// SaltedDigestChecker is the built-in checker of kind "salted-digest": dig
// is the digest of the salt delivered with the object followed by its
// octets (HC-09). A salt shorter than MinSaltSize, or none, is
// unverifiable.
type SaltedDigestChecker struct{}

// CheckRef checks ref against the object and salt src provides.
func (SaltedDigestChecker) CheckRef(ctx context.Context, r Ref, src Source) Result {
	obj, err := src.Object(ctx, r)
	if err != nil {
		return Result{Ref: r, Outcome: Unverifiable, Detail: bare(err)}
	}
	ok, err := r.Dig.MatchesSalted(obj.Salt, obj.Octets)
	return digestResult(r, ok, err)
}

func digestResult(r Ref, ok bool, err error) Result {
	switch {
	case err != nil:
		return Result{Ref: r, Outcome: Unverifiable, Detail: bare(err)}
	case ok:
		return Result{Ref: r, Outcome: Verified}
	default:
		return Result{Ref: r, Outcome: Mismatch, Detail: "digest differs"}
	}
}

var (
	_ Checker = DigestChecker{}
	_ Checker = SaltedDigestChecker{}
	_ Checker = CheckerFunc(nil)
)

// ErrChecker: a Checkers registration is invalid (a kind that is
// neither an optional defined kind nor an absolute URI, a built-in kind, or
// a nil checker).
var ErrChecker = errors.New("ref: invalid reference checker")

// Checkers maps a Ref kind to the checker of that kind. "digest"
// and "salted-digest" are built in and cannot be replaced. A caller
// registers the optional kinds "scitt-receipt" and "learnlog-head" (see the
// scitt and learnlog packages) and kinds named by an absolute URI (HC-10).
// A kind with no checker is unverifiable. The zero value checks only the
// built-in kinds.
type Checkers map[string]Checker

// Validate reports an invalid registration, wrapping ErrChecker.
func (cs Checkers) Validate() error {
	for kind, c := range cs {
		switch {
		case kind == KindDigest || kind == KindSaltedDigest:
			return fmt.Errorf("%w: kind %q is built in", ErrChecker, kind)
		case !ValidKind(kind): // HC-10
			return fmt.Errorf("%w: kind %q is neither a defined kind nor an absolute URI", ErrChecker, kind)
		case c == nil:
			return fmt.Errorf("%w: kind %q has a nil checker", ErrChecker, kind)
		}
	}
	return nil
}

// checker is the checker of kind, or nil.
func (cs Checkers) checker(kind string) Checker {
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
func (cs Checkers) Check(ctx context.Context, r Ref, src Source) (res Result) {
	c := cs.checker(r.Kind)
	if c == nil {
		return Result{Ref: r, Outcome: Unverifiable, Detail: fmt.Sprintf("no checker for kind %q", r.Kind)}
	}
	defer func() {
		if p := recover(); p != nil {
			res = Result{Ref: r, Outcome: Unverifiable, Detail: fmt.Sprintf("checker of kind %q failed: %v", r.Kind, p)}
		}
	}()
	res = c.CheckRef(ctx, r, src)
	res.Ref = r
	switch res.Outcome {
	case Verified:
	case Mismatch, Unverifiable:
		if res.Detail == "" {
			res.Detail = fmt.Sprintf("checker of kind %q gave no reason", r.Kind)
		}
	default:
		res.Detail = fmt.Sprintf("checker of kind %q returned outcome %q: %s", r.Kind, res.Outcome, res.Detail)
		res.Outcome = Unverifiable
	}
	return res
}

// CheckRefs checks every reference, in order, as step 7 does under a
// policy that checks them, without rejecting anything: the caller reads the
// outcomes.
func (cs Checkers) CheckRefs(ctx context.Context, refs []Ref, src Source) []Result {
	out := make([]Result, len(refs))
	for i, ref := range refs {
		out[i] = cs.Check(ctx, ref, src)
	}
	return out
}

// CheckRef checks one reference of a built-in kind against obj: "digest"
// and "salted-digest". Any other kind is unverifiable here; use
// Checkers.Check to reach registered checkers.
func Check(r Ref, obj Object) Result {
	src := Source(func(context.Context, Ref) (Object, error) { return obj, nil })
	return Checkers(nil).Check(context.Background(), r, src)
}

// ValidKind reports whether kind may name a reference kind (HC-10): one
// the draft defines, or an absolute URI.
func ValidKind(kind string) bool { return knownKind(kind) || absoluteURI(kind) }

func knownKind(k string) bool {
	switch k {
	case KindDigest, KindSaltedDigest, KindSCITTReceipt, KindLearnlogHead:
		return true
	}
	return false
}

// absoluteURI reports whether s is an absolute URI (RFC 3986 section 4.3):
// a scheme and no fragment.
func absoluteURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.IsAbs() && u.Fragment == "" && !strings.Contains(s, "#")
}

// bare is err's text, for a Detail, without this package's prefix or the
// root package's: the Detail is printed after one of them.
func bare(err error) string {
	return strings.TrimPrefix(strings.TrimPrefix(err.Error(), "ref: "), "handoff: ")
}
