package handoff

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentproto/handoff/reason"
)

// Failure classes. Every error this package returns for bad input wraps one
// of these, so a program branches with errors.Is and never on the text.
var (
	// ErrMalformed: the input is not a well-formed element of the draft's
	// data model (syntax, duplicate or case-variant member names, wrong
	// types, missing members, bad HopId, non-canonical encoding...).
	ErrMalformed = errors.New("handoff: malformed input")
	// ErrTooLarge: the input exceeds a configured Limits bound. It is
	// reported before the input is parsed.
	ErrTooLarge = errors.New("handoff: input too large")
	// ErrSignature: the signed form or the signature does not verify
	// (reason "bad-signature").
	ErrSignature = errors.New("handoff: bad signature")
	// ErrUntrustedKey: no key that the trust configuration binds to the
	// element's iss matches it (reason "untrusted-key").
	ErrUntrustedKey = errors.New("handoff: untrusted key")
	// ErrRejected: an offer or status was refused by a processing rule; the
	// *Rejection it is wrapped in carries the reason code.
	ErrRejected = errors.New("handoff: rejected")
	// ErrState: a lifecycle rule forbids the requested step (HC-23..HC-25,
	// HC-42, HC-44). The error's text says the rule in words.
	ErrState = errors.New("handoff: not allowed in this state")
	// ErrStore: the replay or hop store could not answer. The offer is
	// refused, never accepted (fail closed).
	ErrStore = errors.New("handoff: store unavailable")
	// ErrArgument: a call was given an argument it cannot use (a missing
	// OfferParams.To, a Received from another agent, an unknown hop).
	ErrArgument = errors.New("handoff: invalid argument")
	// ErrConfig: a Config or trust configuration is incomplete or invalid.
	ErrConfig = errors.New("handoff: invalid configuration")
)

// Rejection is a refusal with the draft's reason code (section 5.1). It
// wraps the failure class (ErrSignature, ErrMalformed, ErrRejected...), so
// errors.Is works on it, and errors.As recovers the reason.
type Rejection struct {
	Reason reason.Code
	// Detail is for people (HC-05): no program may depend on its text.
	Detail string
	Err    error
}

// Error says the package once: a Detail made from another error of this
// package is printed without its own "handoff: ".
func (r *Rejection) Error() string {
	if r.Detail == "" {
		return fmt.Sprintf("handoff: rejected: %s", r.Reason)
	}
	if ce, ok := r.Err.(*chainError); ok && ce.Reason == r.Reason && r.Detail == ce.Error() {
		// A step 6 refusal: the reason once, then where in the chain.
		where, d := ce.parts()
		return fmt.Sprintf("handoff: rejected: %s: %s: %s", r.Reason, where, d)
	}
	return fmt.Sprintf("handoff: rejected: %s: %s", r.Reason, strings.TrimPrefix(r.Detail, pkgPrefix))
}

func (r *Rejection) Unwrap() error {
	if r.Err == nil {
		return ErrRejected
	}
	return r.Err
}

func reject(reason reason.Code, class error, format string, args ...any) *Rejection {
	return &Rejection{Reason: reason, Detail: fmt.Sprintf(format, args...), Err: class}
}

// ReasonOf returns the reason code carried by err, or "" when err carries
// none.
func ReasonOf(err error) reason.Code {
	var r *Rejection
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// pkgPrefix begins the text of every error of this package.
const pkgPrefix = "handoff: "

// bare is err's text without the package's prefix, for a message that
// says it already, so that each thing is said once ("handoff: rejected:
// bad-signature: malformed input: ...", not "... handoff: malformed
// input: ...").
func bare(err error) string { return strings.TrimPrefix(err.Error(), pkgPrefix) }

// unprefixed is err with the text of bare, for an error of this package
// that another package's error wraps in the middle of a message. errors.Is
// and errors.As see err.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return bare(u.err) }
func (u unprefixed) Unwrap() error { return u.err }

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func storeErrOrNil(err error) error {
	if err == nil {
		return nil
	}
	return storeErr(err)
}

// chainError is a failed check of section 5.3: the element it concerns
// (Index, oldest first; -1 for the chain member as a whole; the length of
// the chain for the current offer) and the draft's reason code.
type chainError struct {
	Index  int
	Reason reason.Code
	Detail string
	err    error
}

// Error says each thing once: the package and the element's place lead
// the message, and a Detail made from another error that says them again
// is printed without them.
func (e *chainError) Error() string {
	where, d := e.parts()
	return fmt.Sprintf("handoff: %s: %s: %s", where, e.Reason, d)
}

// parts returns where the failure is ("chain" or "chain[i]") and the
// detail without what the message says before it.
func (e *chainError) parts() (where, detail string) {
	where = "chain"
	if e.Index >= 0 {
		where = fmt.Sprintf("chain[%d]", e.Index)
	}
	d := strings.TrimPrefix(e.Detail, pkgPrefix)
	class := strings.TrimPrefix(ErrMalformed.Error(), pkgPrefix) + ": "
	if rest, ok := strings.CutPrefix(d, where+": "); ok {
		d = rest
	} else if rest, ok := strings.CutPrefix(d, class+where+": "); ok {
		d = class + rest
	}
	return where, d
}

// Unwrap returns the failure class: ErrRejected for checks 2 to 7, or the
// class of the element's signature failure for check 1.
func (e *chainError) Unwrap() error {
	if e.err == nil {
		return ErrRejected
	}
	return e.err
}

func chainErr(i int, reason reason.Code, format string, args ...any) *chainError {
	return &chainError{Index: i, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

func storeErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrStore, err)
}

func asRejection(err error) *Rejection {
	var r *Rejection
	if errors.As(err, &r) {
		c := *r
		return &c
	}
	return &Rejection{Reason: reason.BadSignature, Detail: err.Error(), Err: err}
}

func errClass(err error) error {
	if errors.Is(err, ErrTooLarge) {
		return ErrTooLarge
	}
	if errors.Is(err, ErrMalformed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}
