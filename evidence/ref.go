package evidence

import (
	"context"
	"fmt"
	"io"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

// Reference kinds naming this package definition (HC-10: a kind other than
// the draft's four is an absolute URI). Kind is checked as "digest" over
// the package's JCS form, KindSalted as "salted-digest" over it (HC-64,
// HC-09: the salt travels with the package, never in the offer).
const (
	Kind       = "https://github.com/agentproto/handoff/evidence/package-v1"
	KindSalted = "https://github.com/agentproto/handoff/evidence/salted-package-v1"
)

// IsRef reports whether ref names an evidence package.
func IsRef(ref ref.Ref) bool { return ref.Kind == Kind || ref.Kind == KindSalted }

// Refs returns the references among refs that name an evidence package.
func Refs(refs []ref.Ref) []ref.Ref {
	var out []ref.Ref
	for _, r := range refs {
		if IsRef(r) {
			out = append(out, r)
		}
	}
	return out
}

// Canonical decodes data strictly (Decode) and returns its RFC 8785 (JCS)
// form, computed by github.com/gowebpki/jcs. The digest of a package is
// SHA-256 over these octets, so two encodings of one package (member order,
// whitespace, escapes) have one digest.
func Canonical(data []byte, opt DecodeOptions) ([]byte, error) {
	_, _, c, err := parse(data, opt)
	return c, err
}

// Canonical returns p's RFC 8785 (JCS) form.
func (p *Package) Canonical() ([]byte, error) {
	enc, err := p.Encode()
	if err != nil {
		return nil, err
	}
	_, c, err := canonicalize(enc)
	return c, err
}

// Digest returns the package digest of an encoded package: SHA-256 over
// its JCS form.
func Digest(data []byte, opt DecodeOptions) (digest.Digest, error) {
	c, err := Canonical(data, opt)
	if err != nil {
		return digest.Digest{}, err
	}
	return digest.SHA256(c), nil
}

// Ref returns the reference an offer carries for the package whose JCS
// form is canonical, with a plain digest (kind Kind). loc is optional.
func Ref(canonical []byte, loc string) ref.Ref {
	return ref.Ref{Kind: Kind, Dig: digest.SHA256(canonical), Loc: loc}
}

// SaltedRef returns a reference with a salted digest (kind KindSalted) and
// the fresh salt (32 octets from r, crypto/rand when nil) to deliver with
// the package; the salt never goes in the offer (HC-09). Use it when the
// package is sensitive and the offer may be seen by parties who could
// guess it (HC-64).
func SaltedRef(r io.Reader, canonical []byte, loc string) (ref.Ref, []byte, error) {
	salt, d, err := digest.Salted(r, canonical)
	if err != nil {
		return ref.Ref{}, nil, err
	}
	return ref.Ref{Kind: KindSalted, Dig: d, Loc: loc}, salt, nil
}

// CheckRef checks a package reference against the package delivered with
// the offer (obj.Octets, any JSON encoding of it; obj.Salt for KindSalted)
// through the root's reference check: the package's JCS form is checked as
// a "digest" or "salted-digest" reference. The outcome is verified,
// mismatch or unverifiable as in HC-11; a package that does not decode
// strictly is unverifiable. The returned ref.Result names ref as given.
func CheckRef(r ref.Ref, obj ref.Object, opt DecodeOptions) ref.Result {
	if !IsRef(r) {
		return checkCanonical(r, nil, nil)
	}
	c, err := Canonical(obj.Octets, opt)
	if err != nil {
		return ref.Result{Ref: r, Outcome: ref.Unverifiable, Detail: err.Error()}
	}
	return checkCanonical(r, c, obj.Salt)
}

// checkCanonical checks a package reference against a package's JCS form.
func checkCanonical(r ref.Ref, canonical, salt []byte) ref.Result {
	as := r
	switch r.Kind {
	case Kind:
		as.Kind = ref.KindDigest
	case KindSalted:
		as.Kind = ref.KindSaltedDigest
	default:
		return ref.Result{Ref: r, Outcome: ref.Unverifiable,
			Detail: fmt.Sprintf("kind %q does not name an evidence package", r.Kind)}
	}
	res := ref.Check(as, ref.Object{Octets: canonical, Salt: salt})
	res.Ref = r
	return res
}

// Source returns a ref.Source that serves the package delivered beside the
// offer (and its salt, for KindSalted) for every package reference, and
// reports every other reference unavailable. Combine it with the caller's
// own source for other references.
func Source(pkg, salt []byte) ref.Source {
	return func(_ context.Context, r ref.Ref) (ref.Object, error) {
		if !IsRef(r) {
			return ref.Object{}, fmt.Errorf("%w: not an evidence package reference", ref.ErrUnavailable)
		}
		return ref.Object{Octets: pkg, Salt: salt}, nil
	}
}

// RefChecker checks package references given a source of objects: verified,
// mismatch or unverifiable (HC-11), never "not checked". Its method has the
// shape of a pluggable reference checker, so that a receiver's reference
// step can verify the package kinds (register it for Kind and KindSalted).
type RefChecker struct {
	Decode DecodeOptions
}

// CheckRef obtains the package ref names from src and checks it (see the
// function CheckRef).
func (c RefChecker) CheckRef(ctx context.Context, r ref.Ref, src ref.Source) ref.Result {
	if src == nil {
		return ref.Result{Ref: r, Outcome: ref.Unverifiable, Detail: "no source of referenced objects"}
	}
	obj, err := src(ctx, r)
	if err != nil {
		return ref.Result{Ref: r, Outcome: ref.Unverifiable, Detail: err.Error()}
	}
	return CheckRef(r, obj, c.Decode)
}
