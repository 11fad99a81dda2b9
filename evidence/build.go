package evidence

import (
	"errors"
	"fmt"
	"io"
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
