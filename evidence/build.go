package evidence

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/ref"
)

// Binding is what a package is bound to: the offer it rides with.
type Binding struct {
	Hop handoff.HopID
	Iss handoff.AgentID
	Aud handoff.AgentID
	Iat handoff.Time
	Exp handoff.Time
}

// BindingOf returns the binding of an offer.
func BindingOf(o *handoff.Offer) Binding {
	return Binding{Hop: o.Hop, Iss: o.Iss, Aud: o.Aud, Iat: o.Iat, Exp: o.Exp}
}

// ErrRestricted: the package carries a credential-like string or the value
// of a withheld item (HC-62). The error is a *RestrictedError.
var ErrRestricted = errors.New("evidence: restricted data in package")

// ErrUnbound: the package cannot be bound to the offer (hop, iss, aud, or a
// time outside the offer's window).
var ErrUnbound = errors.New("evidence: package not bound to the offer")

// RestrictedError lists where restricted data was found, never the data.
type RestrictedError struct{ Hits []Hit }

func (e *RestrictedError) Error() string {
	var b strings.Builder
	b.WriteString("evidence: restricted data in package:")
	for _, h := range e.Hits {
		fmt.Fprintf(&b, " %s at %q;", h.Pattern, h.Path)
	}
	return strings.TrimSuffix(b.String(), ";")
}

func (e *RestrictedError) Unwrap() error { return ErrRestricted }

// IncompleteError is Build's refusal of a package that leaves out a field
// the check requires: Missing holds each such field as Check would report
// it to the receiver (its code and JSON Pointer), and the message names
// the Go field to set. It wraps ErrMalformed and handoff.ErrArgument.
type IncompleteError struct{ Missing []Finding }

func (e *IncompleteError) Error() string {
	var b strings.Builder
	b.WriteString("evidence: package incomplete: set")
	for i, f := range e.Missing {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte(' ')
		b.WriteString(fieldToSet(f))
	}
	return b.String()
}

func (e *IncompleteError) Unwrap() []error { return []error{ErrMalformed, handoff.ErrArgument} }

// fieldToSet says, in the Package's Go field names, what to set to clear
// the finding f of absence.
func fieldToSet(f Finding) string {
	name, list := goField(f.Path)
	switch f.Code {
	case CodeNoIdempotency:
		return name + ".OperationID or " + name + ".IdempotencyKey (the action had an external effect)"
	case CodeMustAskNoApproval:
		return "Pending: an approval with an Owner and, as Action, the must-ask action " + name
	case CodeMoreFindings:
		return "and more (" + f.Detail + ")"
	}
	if list {
		return name + " (at least one entry)"
	}
	return name
}

// goField turns a finding's JSON Pointer into the Go selector of the
// Package field it names ("/state/0/as_of" is "Package.State[0].AsOf"),
// and reports whether that field is a list.
func goField(path string) (string, bool) {
	var b strings.Builder
	b.WriteString("Package")
	t := reflect.TypeFor[Package]()
	for seg := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		switch t.Kind() {
		case reflect.Slice:
			b.WriteString("[" + seg + "]")
			t = t.Elem()
			continue
		case reflect.Struct:
			f, ok := fieldByTag(t, seg)
			if !ok {
				return "Package (at " + path + ")", false
			}
			b.WriteString("." + f.Name)
			t = f.Type
		default:
			return "Package (at " + path + ")", false
		}
	}
	return b.String(), t.Kind() == reflect.Slice
}

// fieldByTag is the field of struct type t that JSON names name.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// Builder builds the delegator's package for one offer.
type Builder struct {
	pkg      Package
	withheld [][]byte
	err      error
}

// NewBuilder starts a package from p (copied; its Handoff, Sender.Agent and
// Receiver.Agent are set by Build from the binding).
func NewBuilder(p Package) *Builder { return &Builder{pkg: p} }

// Withhold declares an item withheld, with its reason, and the value left
// out: the value never enters the package, and Build refuses a package in
// which it appears anywhere (HC-62). Values shorter than 4 octets are
// refused, since they would be found by chance.
func (b *Builder) Withhold(item, reason string, value []byte) *Builder {
	if len(value) < minWithheld {
		b.err = errors.Join(b.err, fmt.Errorf("%w: withheld value of %q is shorter than %d octets and cannot be checked", ErrMalformed, item, minWithheld))
		return b
	}
	b.pkg.Withheld = append(b.pkg.Withheld, Withheld{Item: item, Reason: reason})
	b.withheld = append(b.withheld, append([]byte(nil), value...))
	return b
}

// Built is a package ready to travel: its encoding, JCS form, and the
// reference the offer carries.
type Built struct {
	Package   *Package
	Encoded   []byte // the package as it travels beside the offer
	Canonical []byte // its JCS form, which the digest covers
	Ref       ref.Ref
	Salt      []byte // for a salted reference; travels with the package
}

// BuildOptions choose the time and the kind of reference.
type BuildOptions struct {
	// Time is the package time; it must fall in [Iat, Exp]. Zero means the
	// offer's iat.
	Time time.Time
	// Salted makes a KindSalted reference with a fresh salt from Rand
	// (crypto/rand when nil).
	Salted bool
	Rand   io.Reader
	// Loc is the optional loc of the reference.
	Loc string
	// Detectors are the credential detectors Build refuses on; nil means
	// DefaultDetectors.
	Detectors []Detector
	// Within is the authority the delegator itself received (the
	// authority of its own accepted package, Report.Package): Build
	// refuses a package that widens it (ErrWidened, see Widen). Nil for a
	// delegator that starts the chain.
	Within *Authority
}

// Build binds the package to the offer (id = hop, sender and receiver
// agents = iss and aud, time inside [iat, exp]), refuses it if it carries
// a credential-like string or a withheld value, and returns it with the
// reference to put in the offer's refs.
//
// Build also refuses, with an *IncompleteError naming each field, a
// package that leaves out what Check requires, which the receiver would
// refuse. Required are Sender.Role, Receiver.Role, Control, Outcome.Result,
// Outcome.DoneWhen, at least one entry in Authority.Allowed, State and
// Timeouts, Next.Action, Verification.Check and Rollback.Method; in each
// entry of State: System, State and AsOf; of Completed: Action and
// Postcondition, and OperationID or IdempotencyKey when External; of
// Artifacts: ID, Ref and Proves; of Withheld: Item and Reason; of
// Assumptions: Item and Validation; of Attempts: Attempt and Result; of
// Pending: Kind, Item and Owner; of Timeouts: Condition and Owner; and
// for each Authority.MustAsk action, a Pending approval with an Owner and
// that action. Build sets Handoff, Sender.Agent and Receiver.Agent itself.
func (b *Builder) Build(bind Binding, opt BuildOptions) (*Built, error) {
	if b.err != nil {
		return nil, b.err
	}
	if opt.Within != nil {
		if ws := Widen(b.pkg.Authority, *opt.Within); len(ws) > 0 {
			return nil, &WidenedError{Widenings: ws}
		}
	}
	if !bind.Hop.Valid() || bind.Iss == "" || bind.Aud == "" || bind.Exp <= bind.Iat {
		return nil, fmt.Errorf("%w: binding needs a valid hop, iss, aud and iat < exp", ErrUnbound)
	}
	p := b.pkg
	p.Ack = nil
	p.Handoff.ID = string(bind.Hop)
	p.Sender.Agent, p.Receiver.Agent = string(bind.Iss), string(bind.Aud)
	t := opt.Time
	if t.IsZero() {
		t = bind.Iat.Std()
	}
	t = t.UTC().Truncate(time.Second)
	if handoff.TimeOf(t) < bind.Iat || handoff.TimeOf(t) > bind.Exp {
		return nil, fmt.Errorf("%w: time %s outside the offer window [%d, %d]", ErrUnbound, t.Format(time.RFC3339), bind.Iat, bind.Exp)
	}
	p.Handoff.Time = t
	if missing := absent(&p); len(missing) > 0 {
		return nil, &IncompleteError{Missing: missing}
	}
	enc, err := p.Encode()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	tree, c, err := canonicalize(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if hits := scanPackage(&p, tree, opt.Detectors, b.withheld); len(hits) > 0 {
		return nil, &RestrictedError{Hits: hits}
	}
	out := &Built{Package: &p, Encoded: enc, Canonical: c}
	if opt.Salted {
		out.Ref, out.Salt, err = SaltedRef(opt.Rand, c, opt.Loc)
		if err != nil {
			return nil, err
		}
	} else {
		out.Ref = Ref(c, opt.Loc)
	}
	return out, nil
}

// Deliver returns the OfferParams.Deliver of an offer that carries this
// package: it builds the package bound to the offer being made (Build,
// with BindingOf and opt) and returns its reference, which Agent.Offer
// appends to the offer's refs, and the object that travels beside the
// Handoff: the package as built (Built.Encoded), and for a salted
// reference its salt (HC-09), which never goes in the offer. A host's
// middleware (mcphop, a2a1hop, a2a03hop, adkhop) carries that object
// with the first send of the hop and with every retransmission, so that
// a delegator names the package once, where it makes the offer.
func (b *Builder) Deliver(opt BuildOptions) func(*handoff.Offer) (ref.Ref, ref.Object, error) {
	return func(o *handoff.Offer) (ref.Ref, ref.Object, error) {
		built, err := b.Build(BindingOf(o), opt)
		if err != nil {
			return ref.Ref{}, ref.Object{}, err
		}
		return built.Ref, ref.Object{Octets: built.Encoded, Salt: built.Salt}, nil
	}
}

// scanPackage scans the encoded package for credential-like strings and
// withheld values, and the passed context for items named like a
// credential that carry a value.
func scanPackage(p *Package, tree *canon, dets []Detector, withheld [][]byte) []Hit {
	hits := scanTree(tree, dets, withheld)
	for i, c := range p.Passed {
		if credentialName(c.Name) && c.Value != "" {
			hits = append(hits, Hit{PatternPasswordField, fmt.Sprintf("/context_passed/%d/value", i)})
		}
	}
	return hits
}
