package evidence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

// Code is a stable, machine-readable finding code. Programs branch on it,
// never on Detail.
type Code string

// The finding codes. Each finding also carries the JSON Pointer (RFC 6901)
// of the field it concerns.
const (
	// CodeMissing: a required field is absent or empty.
	CodeMissing Code = "missing-field"
	// CodeInvalid: a field holds a value the package definition does not
	// allow (an unknown control mode, an action both allowed and denied, a
	// malformed artifact reference, an acknowledgement from the sender...).
	CodeInvalid Code = "invalid-value"
	// CodeUnbound: the package is not bound to this offer: its id is not
	// the hop, its sender/receiver agents are not iss/aud, its time is
	// outside [iat, exp], or the offer names no evidence package.
	CodeUnbound Code = "not-bound"
	// CodePackageMismatch: the offer's package reference does not match
	// the package delivered (HC-11 "mismatch").
	CodePackageMismatch Code = "package-mismatch"
	// CodePackageUnverifiable: the offer's package reference could not be
	// checked, e.g. a salted reference without its salt (HC-11).
	CodePackageUnverifiable Code = "package-unverifiable"
	// CodeArtifactMismatch: an artifact's object was obtained and its
	// digest differs (HC-11 "mismatch").
	CodeArtifactMismatch Code = "artifact-mismatch"
	// CodeArtifactUnverifiable: an artifact's object could not be obtained
	// or checked (HC-11 "unverifiable").
	CodeArtifactUnverifiable Code = "artifact-unverifiable"
	// CodeRestricted: restricted data is present: a credential-like string
	// (see Pattern) or an item both withheld and passed (HC-62).
	CodeRestricted Code = "restricted-data"
	// CodeNextNotAllowed: the next action is not in "allowed".
	CodeNextNotAllowed Code = "next-action-not-allowed"
	// CodeNextDenied: the next action is in "denied".
	CodeNextDenied Code = "next-action-denied"
	// CodeMustAskNoApproval: a "must ask" action has no pending approval
	// with an owner.
	CodeMustAskNoApproval Code = "must-ask-without-approval"
	// CodeNoIdempotency: a completed action with an external effect has
	// neither an operation id nor an idempotency key.
	CodeNoIdempotency Code = "effect-without-idempotency"
	// CodeStaleState: a state's "as of" time is older than the bound.
	CodeStaleState Code = "stale-state"
	// CodePendingNoOwner: a pending approval or side effect has no owner.
	CodePendingNoOwner Code = "pending-without-owner"
	// CodeTimeoutNoOwner: a timeout has no owner.
	CodeTimeoutNoOwner Code = "timeout-without-owner"
	// CodeNoVerification: the next action has no verification step.
	CodeNoVerification Code = "next-action-unverified"
	// CodeUnsupported: a claim (a state, a completed action, an attempt)
	// cites no evidence, or none that verified. It is advisory: the claim
	// stays an untrusted claim, never a fact, and does not by itself fail
	// the check.
	CodeUnsupported Code = "claim-unsupported"
	// CodeWidened: the package exceeds the authority of an earlier hop's
	// package (an action allowed that the ancestor did not allow, a
	// must-ask turned allowed, a denial dropped).
	CodeWidened Code = "authority-widened"
	// CodeAncestorUnverifiable: an earlier hop's package could not be
	// obtained or checked, so attenuation could not be shown. Advisory
	// unless CheckConfig.RequireAncestors.
	CodeAncestorUnverifiable Code = "ancestor-unverifiable"
	// CodeAncestorsNotSupplied: the chain names earlier hops' packages and
	// CheckConfig.Ancestors is nil, so the package was not compared with
	// them: a widening would pass unseen. It fails the check; supply
	// Ancestors to compare them (evidence contract: "the next action
	// cannot silently exceed scope").
	CodeAncestorsNotSupplied Code = "ancestors-not-supplied"
	// CodeAmbiguous: two authority entries differ as octets but collide
	// once trimmed, case-folded and in NFC ("Card.Charge" and
	// "card.charge"): the guard would treat them apart.
	CodeAmbiguous Code = "authority-ambiguous"
	// CodeMoreFindings: the count of the findings not listed (a report
	// lists at most 64); advisory only when all of them are.
	CodeMoreFindings Code = "more-findings"
)

// Finding is one result of the check.
type Finding struct {
	Code Code `json:"code"`
	// Path is the JSON Pointer of the field ("" for the package as a
	// whole).
	Path string `json:"path"`
	// Detail is for people only.
	Detail string `json:"detail,omitempty"`
	// Advisory findings do not fail the check.
	Advisory bool `json:"advisory,omitempty"`
}

// ArtifactResult is the outcome of one artifact reference (HC-11).
type ArtifactResult struct {
	ID      string      `json:"id"`
	Path    string      `json:"path"`
	Outcome ref.Outcome `json:"outcome"`
	Detail  string      `json:"detail,omitempty"`
}

// Report is the outcome of Check. It is opaque, as handoff.Received is:
// only Check makes one, and what it says is read through its methods,
// which return copies. A Report built by hand is never Acceptable and
// yields no Guard, and changing what a method returned changes nothing.
type Report struct {
	// unverified is the decoded package: its claims are untrusted, and it
	// is bound to the offer only when Acceptable.
	unverified *Package
	// unbound is true when the package was checked without an offer
	// (CheckConfig.Unbound): such a report is never Acceptable.
	unbound bool
	// checked is set by Check alone.
	checked bool
	// offer is the (iss, hop) of the offer checked against, and its
	// handoff digest when CheckReceived made the report.
	offerIss  handoff.AgentID
	offerHop  handoff.HopID
	offerDig  digest.Digest
	offerTime handoff.Time // the offer's exp: no authority outlives it
	digest    digest.Digest
	binding   *ref.Result
	artifacts []ArtifactResult
	findings  []Finding
	// ancestors are the packages of earlier hops the attenuation check
	// compared this one with, oldest first.
	ancestors []Authority
	// chain is the verified chain's handoff digests, outermost first
	// (CheckReceived only): the scopes of the hop's effects (scope.go).
	chain []digest.Digest
}

// Unbound reports whether the package was checked without an offer
// (CheckConfig.Unbound).
func (r *Report) Unbound() bool { return r.unbound }

// Digest is the package digest: SHA-256 over its JCS form.
func (r *Report) Digest() digest.Digest { return cloneDigest(r.digest) }

// Binding is the outcome of the offer's package reference, when an offer
// was given and named one; nil otherwise.
func (r *Report) Binding() *ref.Result {
	if r.binding == nil {
		return nil
	}
	b := *r.binding
	b.Ref.Dig = cloneDigest(b.Ref.Dig)
	return &b
}

// Artifacts returns each artifact's outcome, in package order.
func (r *Report) Artifacts() []ArtifactResult { return slices.Clone(r.artifacts) }

// Findings returns the findings, in a stable order.
func (r *Report) Findings() []Finding { return slices.Clone(r.findings) }

// OfferDigest is the handoff digest of the offer the report was made
// against, when CheckReceived made it (zero otherwise).
func (r *Report) OfferDigest() digest.Digest { return cloneDigest(r.offerDig) }

func cloneDigest(d digest.Digest) digest.Digest {
	d.Val = slices.Clone(d.Val)
	return d
}

// Passed reports whether the package passed: no finding other than
// advisory ones.
func (r *Report) Passed() bool {
	if r == nil || !r.checked {
		return false
	}
	for _, f := range r.findings {
		if !f.Advisory {
			return false
		}
	}
	return true
}

// Acceptable reports whether the receiver may accept the handoff on this
// report: the package passed and is bound to the offer it was checked
// against.
func (r *Report) Acceptable() bool {
	return r.Passed() && !r.unbound && r.binding != nil && r.binding.Outcome == ref.Verified
}

// Package returns the package when the report is Acceptable, else nil.
// Its claims remain claims: those without verified evidence are reported
// "claim-unsupported".
func (r *Report) Package() *Package {
	if r == nil || !r.Acceptable() {
		return nil
	}
	return r.unverified
}

// UnverifiedPackage returns the decoded package whatever the outcome, for
// diagnosis: it may be bound to no offer and say anything.
func (r *Report) UnverifiedPackage() *Package { return r.unverified }

// Codes returns the distinct codes of the findings that fail the check,
// sorted.
func (r *Report) Codes() []Code {
	var out []Code
	for _, f := range r.findings {
		if !f.Advisory && !slices.Contains(out, f.Code) {
			out = append(out, f.Code)
		}
	}
	slices.Sort(out)
	return out
}

// Has reports whether a finding with code c at path was reported.
func (r *Report) Has(c Code, path string) bool {
	for _, f := range r.findings {
		if f.Code == c && f.Path == path {
			return true
		}
	}
	return false
}

// DefaultMaxStateAge is the default bound on a state's age.
const DefaultMaxStateAge = 15 * time.Minute

// CheckConfig is what the delegate's check may use besides the package
// and the offer: the caller's clock and resolvers.
type CheckConfig struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxStateAge bounds now - as_of of every state. Zero means
	// DefaultMaxStateAge.
	MaxStateAge time.Duration
	// Artifacts provides the objects artifact references name. Nil makes
	// every artifact unverifiable. It never fetches on this package's
	// behalf (HC-61): the caller applies its own safeguards.
	Artifacts ref.Source
	// Decode bounds decoding.
	Decode DecodeOptions
	// Unbound skips the binding checks when no offer is at hand (a
	// package inspected on its own). The report then says nothing of the
	// binding; never use it to accept a handoff.
	Unbound bool
	// Detectors are the credential detectors of the restricted-data scan;
	// nil means DefaultDetectors.
	Detectors []Detector
	// Ancestors provides the packages that earlier hops' offers in the
	// chain reference (CheckReceived compares the package with each, see
	// Widen). It never fetches on this package's behalf (HC-61). When it is
	// nil and the chain names packages, the check fails with
	// "ancestors-not-supplied": a widening must never pass unseen, and a
	// missing resolver is a setting left out, not a package that could
	// not be found. A resolver that cannot find a package makes it
	// "ancestor-unverifiable" (see RequireAncestors).
	Ancestors ref.Source
	// RequireAncestors makes an ancestor package that cannot be obtained
	// or checked fail the check; by default it is an advisory finding.
	RequireAncestors bool
	// Skew is how far ahead of the clock a state's "as of" may be; zero
	// means 60 s, the skew the draft recommends (HC-31) and handoff.Config
	// takes by default. A state claimed as of a later time is
	// stale: it was not observed.
	Skew time.Duration
}

// Delivered is what travelled beside the offer: the package as received,
// and for a salted reference its salt.
type Delivered struct {
	Package []byte
	Salt    []byte
}

// ErrOfferNotVerified: CheckReceived was given an offer that did not pass
// the receive checks.
var ErrOfferNotVerified = errors.New("evidence: the offer did not pass the receive checks")

// CheckReceived checks a delivered package against the offer of in, which
// must have passed the receive checks (or be a retransmission of one that
// did, resumed or not): the usual way for a delegate to call Check.
func CheckReceived(ctx context.Context, in *handoff.Received, d Delivered, cfg CheckConfig) (*Report, error) {
	o := receivedOffer(in)
	if o == nil {
		return nil, ErrOfferNotVerified
	}
	ck, err := check(ctx, o, d, cfg)
	if err != nil {
		return nil, err
	}
	ck.r.offerDig, ck.r.chain = in.Digest(), verifiedChain(in)
	ck.scopes(ck.r.chain)
	if ck.bound {
		ck.attenuation(in)
	}
	ck.finish()
	return ck.r, nil
}

// Check is the delegate's check of a delivered package against the
// verified offer it rode with (from Agent.Receive or OpenOffer: never an
// offer whose signature was not checked). It uses nothing but the package, the offer
// and cfg. A package that does not decode is an error (ErrMalformed,
// ErrTooLarge); everything else is a finding.
func Check(ctx context.Context, offer *handoff.Offer, d Delivered, cfg CheckConfig) (*Report, error) {
	ck, err := check(ctx, offer, d, cfg)
	if err != nil {
		return nil, err
	}
	ck.scopes(nil)
	ck.finish()
	return ck.r, nil
}

func check(ctx context.Context, offer *handoff.Offer, d Delivered, cfg CheckConfig) (*checker, error) {
	p, tree, c, err := parse(d.Package, cfg.Decode)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	maxAge := cfg.MaxStateAge
	if maxAge <= 0 {
		maxAge = DefaultMaxStateAge
	}
	ck := &checker{ctx: ctx, p: p, cfg: cfg, now: now(), maxAge: maxAge,
		r: &Report{unverified: p, unbound: offer == nil && cfg.Unbound, digest: digest.SHA256(c), checked: true}}
	ck.required()
	// The binding comes before any scan or resolver call: a package that
	// is not the one the offer names costs no more than its decoding.
	bound := cfg.Unbound && offer == nil
	if offer != nil {
		ck.r.offerIss, ck.r.offerHop, ck.r.offerTime = offer.Iss, offer.Hop, offer.Exp
		bound = ck.binding(offer, d, c)
	} else if !cfg.Unbound {
		ck.add(CodeUnbound, at(""), "no offer given: the package is not shown bound to one")
	}
	if bound {
		ck.restricted(tree)
	}
	ck.authority()
	if bound {
		ck.artifacts()
	}
	ck.claims()
	ck.owners()
	ck.bound = bound
	return ck, nil
}

type checker struct {
	ctx      context.Context
	p        *Package
	cfg      CheckConfig
	now      time.Time
	maxAge   time.Duration
	r        *Report
	verified map[string]bool // artifact id -> verified
	bound    bool
	more     int  // findings not listed
	moreFail bool // one of them fails the check
	// absentOnly keeps only the findings of absence (see absent).
	absentOnly bool
}

// maxFindings bounds the findings a report lists one by one; any more are
// counted in one last finding (CodeMoreFindings), so that a report costs
// a bounded amount however many defects a package has.
const maxFindings = 64

// where is the JSON Pointer of a finding, made into a string only when the
// finding is kept: a prefix, an index (or -1) and a suffix.
type where struct {
	a string
	i int
	b string
}

func at(path string) where { return where{a: path, i: -1} }

func idx(prefix string, i int, suffix string) where { return where{prefix, i, suffix} }

func (w where) String() string {
	if w.i < 0 {
		return w.a
	}
	return w.a + strconv.Itoa(w.i) + w.b
}

func (c *checker) add(code Code, w where, format string, args ...any) {
	c.keep(code, w, false, format, args)
}

func (c *checker) advise(code Code, w where, format string, args ...any) {
	c.keep(code, w, true, format, args)
}

func (c *checker) keep(code Code, w where, advisory bool, format string, args []any) {
	if c.absentOnly && !absence(code) {
		return
	}
	if len(c.r.findings) >= maxFindings {
		c.more++
		c.moreFail = c.moreFail || !advisory
		return
	}
	c.r.findings = append(c.r.findings, Finding{Code: code, Path: w.String(), Detail: fmt.Sprintf(format, args...), Advisory: advisory})
}

// finish appends the count of the findings not listed.
func (c *checker) finish() {
	if c.more > 0 {
		c.r.findings = append(c.r.findings, Finding{Code: CodeMoreFindings,
			Detail: fmt.Sprintf("%d more findings not listed", c.more), Advisory: !c.moreFail})
		c.more = 0
	}
}

func (c *checker) need(ok bool, w where) {
	if !ok {
		c.add(CodeMissing, w, "required")
	}
}

// required reports the template's fields that are missing, and values the
// definition does not allow.
func (c *checker) required() {
	p := c.p
	c.need(p.Handoff.ID != "", at("/handoff/id"))
	c.need(!p.Handoff.Time.IsZero(), at("/handoff/time"))
	c.need(p.Sender.Role != "", at("/sender/role"))
	c.need(p.Sender.Agent != "", at("/sender/agent"))
	c.need(p.Receiver.Role != "", at("/receiver/role"))
	c.need(p.Receiver.Agent != "", at("/receiver/agent"))
	switch {
	case p.Control == "":
		c.add(CodeMissing, at("/control"), "required")
	case !p.Control.Valid():
		c.add(CodeInvalid, at("/control"), "control mode %q is neither %q nor %q", p.Control, TransferOwnership, SpecialistReturnsResult)
	}
	c.need(p.Outcome.Result != "", at("/outcome/result"))
	c.need(p.Outcome.DoneWhen != "", at("/outcome/done_when"))
	c.need(len(p.Authority.Allowed) > 0, at("/authority/allowed"))
	c.need(len(p.State) > 0, at("/state"))
	for i, s := range p.State {
		c.need(s.System != "", idx("/state/", i, "/system"))
		c.need(s.State != "", idx("/state/", i, "/state"))
		c.need(!s.AsOf.IsZero(), idx("/state/", i, "/as_of"))
	}
	for i, a := range p.Completed {
		c.need(a.Action != "", idx("/completed/", i, "/action"))
		c.need(a.Postcondition != "", idx("/completed/", i, "/postcondition"))
	}
	for i, w := range p.Withheld {
		c.need(w.Item != "", idx("/context_withheld/", i, "/item"))
		c.need(w.Reason != "", idx("/context_withheld/", i, "/reason"))
	}
	for i, a := range p.Assumptions {
		c.need(a.Item != "", idx("/assumptions/", i, "/item"))
		c.need(a.Validation != "", idx("/assumptions/", i, "/validation"))
	}
	for i, a := range p.Attempts {
		c.need(a.Attempt != "", idx("/attempts/", i, "/attempt"))
		c.need(a.Result != "", idx("/attempts/", i, "/result"))
	}
	for i, q := range p.Pending {
		c.need(q.Item != "", idx("/pending/", i, "/item"))
		switch {
		case q.Kind == "":
			c.add(CodeMissing, idx("/pending/", i, "/kind"), "required")
		case q.Kind != PendingApproval && q.Kind != PendingSideEffect:
			c.add(CodeInvalid, idx("/pending/", i, "/kind"), "kind %q is neither %q nor %q", q.Kind, PendingApproval, PendingSideEffect)
		}
	}
	c.need(p.Next.Action != "", at("/next_action/action"))
	if p.Verification.Check == "" {
		c.add(CodeNoVerification, at("/verification/check"), "the next action has no verification step")
	}
	c.need(len(p.Timeouts) > 0, at("/timeouts"))
	for i, t := range p.Timeouts {
		c.need(t.Condition != "", idx("/timeouts/", i, "/condition"))
	}
	c.need(p.Rollback.Method != "", at("/rollback/method"))
	if p.Ack != nil {
		c.add(CodeInvalid, at("/acknowledgement"), "the sender's package carries an acknowledgement; only the receiver acknowledges")
	}
}

// absence reports whether a finding of code c is one of absence: a field
// the package definition requires, left absent or empty. Build refuses a
// package with any of them (IncompleteError).
func absence(c Code) bool {
	switch c {
	case CodeMissing, CodeNoVerification, CodeMustAskNoApproval, CodeNoIdempotency,
		CodePendingNoOwner, CodeTimeoutNoOwner:
		return true
	}
	return false
}

// absent returns the findings of absence that Check reports for p, by
// the same rules and in the same order: p's binding to its offer and its
// artifacts' objects play no part in them.
func absent(p *Package) []Finding {
	c := &checker{ctx: context.Background(), p: p, r: &Report{}, absentOnly: true}
	c.required()
	c.authority()
	c.artifacts()
	c.claims()
	c.owners()
	c.finish()
	return c.r.findings
}

// binding checks that the package rides with this offer, and reports
// whether it does.
func (c *checker) binding(o *handoff.Offer, d Delivered, canonical []byte) bool {
	p := c.p
	ok := true
	if p.Handoff.ID != "" && p.Handoff.ID != string(o.Hop) {
		ok = false
		c.add(CodeUnbound, at("/handoff/id"), "id is not the offer's hop")
	}
	if p.Sender.Agent != "" && p.Sender.Agent != string(o.Iss) {
		ok = false
		c.add(CodeUnbound, at("/sender/agent"), "sender agent is not the offer's iss")
	}
	if p.Receiver.Agent != "" && p.Receiver.Agent != string(o.Aud) {
		ok = false
		c.add(CodeUnbound, at("/receiver/agent"), "receiver agent is not the offer's aud")
	}
	if t := p.Handoff.Time; !t.IsZero() {
		if t.Before(o.Iat.Std()) || t.After(o.Exp.Std()) {
			ok = false
			c.add(CodeUnbound, at("/handoff/time"), "time %s is outside the offer window", t.UTC().Format(time.RFC3339))
		}
	}
	refs := Refs(o.Refs)
	if len(refs) == 0 {
		c.add(CodeUnbound, at(""), "the offer names no evidence package")
		return false
	}
	var best *ref.Result
	for _, r := range refs {
		res := checkCanonical(r, canonical, d.Salt)
		if best == nil || res.Outcome == ref.Verified ||
			(res.Outcome == ref.Mismatch && best.Outcome == ref.Unverifiable) {
			r := res
			best = &r
		}
	}
	c.r.binding = best
	switch best.Outcome {
	case ref.Mismatch:
		c.add(CodePackageMismatch, at(""), "the offer's package digest does not match the package delivered")
	case ref.Unverifiable:
		c.add(CodePackageUnverifiable, at(""), "the offer's package reference could not be checked: %s", best.Detail)
	}
	return ok && best.Outcome == ref.Verified
}

// restricted reports credential-like strings, and items both withheld and
// passed.
func (c *checker) restricted(tree *canon) {
	hits := scanPackage(c.p, tree, c.cfg.Detectors, nil)
	for _, h := range hits {
		c.add(CodeRestricted, at(h.Path), "credential-like string (%s)", h.Pattern)
	}
	withheld := make(map[string]bool, len(c.p.Withheld))
	for _, w := range c.p.Withheld {
		withheld[w.Item] = true
	}
	for i, pc := range c.p.Passed {
		if pc.Name != "" && withheld[pc.Name] {
			c.add(CodeRestricted, idx("/context_passed/", i, ""), "item %q is declared withheld", pc.Name)
		}
	}
}

// authority checks the permission boundary and the next action. It sorts
// the entries once (by position, in a slice of 4-octet indexes) instead of
// building sets, so that its cost stays a small multiple of the lists.
func (c *checker) authority() {
	a := c.p.Authority
	lists := [3][]string{a.Allowed, a.MustAsk, a.Denied}
	byName := newEntries(lists)
	byName.sort(func(e entryPos) string { return byName.name(e) })
	in := func(list int, name string) bool { return byName.has(list, name) }
	for j, d := range a.Denied {
		if in(0, d) || in(1, d) {
			c.add(CodeInvalid, idx("/authority/denied/", j, ""), "action %q is denied and also allowed or must-ask", d)
		}
	}
	var approvals []string
	for _, q := range c.p.Pending {
		if q.Kind == PendingApproval && q.Owner != "" {
			approvals = append(approvals, q.Action)
		}
	}
	slices.Sort(approvals)
	for j, m := range a.MustAsk {
		if in(0, m) {
			c.add(CodeInvalid, idx("/authority/must_ask/", j, ""), "action %q is must-ask and also allowed", m)
		}
		if _, ok := slices.BinarySearch(approvals, m); !ok {
			c.add(CodeMustAskNoApproval, idx("/authority/must_ask/", j, ""), "no pending approval with an owner for %q", m)
		}
	}
	c.ambiguous(byName)
	next := c.p.Next.Action
	switch {
	case next == "":
	case in(2, next):
		c.add(CodeNextDenied, at("/next_action/action"), "the next action is denied")
	case !in(0, next):
		c.add(CodeNextNotAllowed, at("/next_action/action"), "the next action is not in allowed")
	}
}

// WireToRef converts a package reference to a ref.Ref.
func WireToRef(w WireRef) (ref.Ref, error) {
	d, err := digest.Parse(w.Dig.Alg + ":" + w.Dig.Val)
	if err != nil {
		return ref.Ref{}, err
	}
	return ref.Ref{Kind: w.Kind, Dig: d, Loc: w.Loc}, nil
}

// RefToWire converts a ref.Ref to its form in a package.
func RefToWire(r ref.Ref) WireRef {
	return WireRef{Kind: r.Kind, Dig: WireDigest{Alg: r.Dig.Alg, Val: r.Dig.B64()}, Loc: r.Loc}
}

// artifacts checks each artifact reference through the root's reference
// check, with the caller's resolver.
func (c *checker) artifacts() {
	c.verified = map[string]bool{}
	seen := map[string]bool{}
	for i, a := range c.p.Artifacts {
		path := fmt.Sprintf("/artifacts/%d", i)
		switch {
		case a.ID == "":
			c.add(CodeMissing, at(path+"/id"), "required")
		case seen[a.ID]:
			c.add(CodeInvalid, at(path+"/id"), "artifact id %q is used twice", a.ID)
		}
		seen[a.ID] = true
		if a.Proves == "" {
			c.add(CodeMissing, at(path+"/proves"), "required")
		}
		res := ArtifactResult{ID: a.ID, Path: path + "/ref"}
		r, err := WireToRef(a.Ref)
		switch {
		case a.Ref.Kind == "" && a.Ref.Dig == (WireDigest{}) && a.Ref.Loc == "":
			res.Outcome, res.Detail = ref.Unverifiable, "no reference"
			c.add(CodeMissing, at(path+"/ref"), "required")
		case err != nil:
			res.Outcome, res.Detail = ref.Unverifiable, err.Error()
			c.add(CodeInvalid, at(path+"/ref"), "malformed reference")
		case c.cfg.Artifacts == nil:
			res.Outcome, res.Detail = ref.Unverifiable, "no artifact resolver"
		default:
			obj, gerr := c.cfg.Artifacts(c.ctx, r)
			if gerr != nil {
				res.Outcome, res.Detail = ref.Unverifiable, gerr.Error()
			} else {
				rr := ref.Check(r, obj)
				res.Outcome, res.Detail = rr.Outcome, rr.Detail
			}
		}
		switch res.Outcome {
		case ref.Verified:
			c.verified[a.ID] = true
		case ref.Mismatch:
			c.add(CodeArtifactMismatch, at(path+"/ref"), "digest differs")
		default:
			c.add(CodeArtifactUnverifiable, at(path+"/ref"), "%s", res.Detail)
		}
		c.r.artifacts = append(c.r.artifacts, res)
	}
}

// claims reports stale states, completed effects without an idempotency
// handle, and every claim without verified evidence (advisory).
func (c *checker) claims() {
	skew := c.cfg.Skew
	if skew <= 0 {
		skew = 60 * time.Second // HC-31
	}
	for i, s := range c.p.State {
		if !s.AsOf.IsZero() && s.AsOf.After(c.now.Add(skew)) {
			c.add(CodeStaleState, idx("/state/", i, "/as_of"), "claimed as of %s, after the clock's %s: never observed",
				s.AsOf.UTC().Format(time.RFC3339), c.now.UTC().Format(time.RFC3339))
		}
		if !s.AsOf.IsZero() && c.now.Sub(s.AsOf) > c.maxAge {
			c.add(CodeStaleState, idx("/state/", i, "/as_of"), "observed %s ago, over the bound of %s",
				c.now.Sub(s.AsOf).Truncate(time.Second), c.maxAge)
		}
		c.cites(idx("/state/", i, ""), s.Evidence)
	}
	for i, a := range c.p.Completed {
		if a.External && a.OperationID == "" && a.IdempotencyKey == "" {
			c.add(CodeNoIdempotency, idx("/completed/", i, ""), "external effect without operation id or idempotency key")
		}
		c.cites(idx("/completed/", i, ""), a.Evidence)
	}
	for i, a := range c.p.Attempts {
		c.cites(idx("/attempts/", i, ""), a.Evidence)
	}
}

func (c *checker) cites(path where, ids []string) {
	if c.verified == nil {
		// Not bound: the artifacts were not resolved, and the package's
		// claims are not weighed at all.
		return
	}
	if len(ids) == 0 {
		c.advise(CodeUnsupported, path, "cites no evidence: an untrusted claim")
		return
	}
	var bad []string
	for _, id := range ids {
		if !c.verified[id] {
			bad = append(bad, id)
		}
	}
	if len(bad) > 0 {
		c.advise(CodeUnsupported, path, "cited evidence not verified: %s", strings.Join(bad, ", "))
	}
}

// owners reports pending items and timeouts without an owner.
func (c *checker) owners() {
	for i, q := range c.p.Pending {
		if q.Owner == "" {
			c.add(CodePendingNoOwner, idx("/pending/", i, "/owner"), "no owner")
		}
	}
	for i, t := range c.p.Timeouts {
		if t.Owner == "" {
			c.add(CodeTimeoutNoOwner, idx("/timeouts/", i, "/owner"), "no owner")
		}
	}
}

// receivedOffer is the offer of in when it passed the receive checks: the
// accepted offer, the offer of a hop's work resumed (Agent.Resume), or the
// offer of a retransmission of one (its exact octets, remembered). Nil for
// any other outcome.
func receivedOffer(in *handoff.Received) *handoff.Offer {
	switch {
	case in == nil:
		return nil
	case in.Offer() != nil:
		return in.Offer()
	case in.Retransmission():
		return in.Refused()
	}
	return nil
}
