package evidence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

// rawOffer binds p to a planned hop without the builder's refusals, applies
// mut, and offers it: the way a careless or hostile delegator would.
func (w *world) rawOffer(p Package, mut func(*Package, Binding), salted, noRef bool) (*handoff.Outgoing, []byte, []byte) {
	w.t.Helper()
	hop := w.hops.plan(w.t)
	now := handoff.TimeOf(w.clock.Now())
	bind := Binding{Hop: hop, Iss: triage, Aud: payments, Iat: now, Exp: now + 120}
	p.Handoff = Header{ID: string(hop), Time: bind.Iat.Std()}
	p.Sender.Agent, p.Receiver.Agent = string(triage), string(payments)
	if mut != nil {
		mut(&p, bind)
	}
	enc, err := p.Encode()
	require.NoError(w.t, err)
	c, err := Canonical(enc, DecodeOptions{})
	require.NoError(w.t, err)
	r, salt := Ref(c, ""), []byte(nil)
	if salted {
		r, salt, err = SaltedRef(nil, c, "")
		require.NoError(w.t, err)
	}
	var refs []ref.Ref
	if !noRef {
		refs = []ref.Ref{r}
	}
	out, err := w.from.Offer(context.Background(), handoff.OfferParams{To: payments, Dialog: "case-77", TTL: 120 * time.Second, Refs: refs})
	require.NoError(w.t, err)
	require.Equal(w.t, hop, out.Offer.Hop)
	return out, enc, salt
}

// Every finding of the issue, each driven by one defect in an otherwise
// clean package, with its code and the path of the field.
func TestCheck_EachFinding(t *testing.T) {
	type tc struct {
		name     string
		mut      func(*Package, Binding)
		salted   bool // salted reference
		noSalt   bool // deliver without the salt
		noRef    bool // offer names no package
		swap     bool // deliver another package than the offer names
		code     Code
		path     string
		advisory bool
	}
	cases := []tc{
		{name: "missing done condition", mut: func(p *Package, _ Binding) { p.Outcome.DoneWhen = "" }, code: CodeMissing, path: "/outcome/done_when"},
		{name: "missing state", mut: func(p *Package, _ Binding) { p.State = nil }, code: CodeMissing, path: "/state"},
		{name: "missing next action", mut: func(p *Package, _ Binding) { p.Next.Action = "" }, code: CodeMissing, path: "/next_action/action"},
		{name: "missing rollback", mut: func(p *Package, _ Binding) { p.Rollback.Method = "" }, code: CodeMissing, path: "/rollback/method"},
		{name: "pending entry without a kind", mut: func(p *Package, _ Binding) {
			p.Pending = append(p.Pending, Pending{Item: "chargeback dispute open at the bank", Owner: "triage"})
		}, code: CodeMissing, path: "/pending/1/kind"},
		{name: "artifact without a reference", mut: func(p *Package, _ Binding) { p.Artifacts[2].Ref = WireRef{} }, code: CodeMissing, path: "/artifacts/2/ref"},
		{name: "unknown control mode", mut: func(p *Package, _ Binding) { p.Control = "hand-wave" }, code: CodeInvalid, path: "/control"},
		{name: "sender acknowledges", mut: func(p *Package, _ Binding) { p.Ack = &Acknowledgement{Decision: DecisionAccepted} }, code: CodeInvalid, path: "/acknowledgement"},
		{name: "id is not the hop", mut: func(p *Package, _ Binding) { p.Handoff.ID = "AAAAAAAAAAAAAAAAAAAAAA" }, code: CodeUnbound, path: "/handoff/id"},
		{name: "sender is not iss", mut: func(p *Package, _ Binding) { p.Sender.Agent = "spiffe://shop.example/agent/other" }, code: CodeUnbound, path: "/sender/agent"},
		{name: "receiver is not aud", mut: func(p *Package, _ Binding) { p.Receiver.Agent = string(triage) }, code: CodeUnbound, path: "/receiver/agent"},
		{name: "time before iat", mut: func(p *Package, b Binding) { p.Handoff.Time = b.Iat.Std().Add(-time.Hour) }, code: CodeUnbound, path: "/handoff/time"},
		{name: "time after exp", mut: func(p *Package, b Binding) { p.Handoff.Time = b.Exp.Std().Add(time.Second) }, code: CodeUnbound, path: "/handoff/time"},
		{name: "offer names no package", noRef: true, code: CodeUnbound, path: ""},
		{name: "package swapped", swap: true, code: CodePackageMismatch, path: ""},
		{name: "salted without its salt", salted: true, noSalt: true, code: CodePackageUnverifiable, path: ""},
		{name: "artifact mismatch", mut: func(p *Package, _ Binding) {
			p.Artifacts[0].Ref.Dig.Val = digest.SHA256([]byte("another ledger")).B64()
		}, code: CodeArtifactMismatch, path: "/artifacts/0/ref"},
		{name: "artifact does not resolve", mut: func(p *Package, _ Binding) { p.Artifacts[1].Ref.Loc = "urn:example:artifact:gone" }, code: CodeArtifactUnverifiable, path: "/artifacts/1/ref"},
		{name: "artifact of an unimplemented kind", mut: func(p *Package, _ Binding) { p.Artifacts[2].Ref.Kind = "scitt-receipt" }, code: CodeArtifactUnverifiable, path: "/artifacts/2/ref"},
		{name: "credential in passed context", mut: func(p *Package, _ Binding) {
			p.Passed = append(p.Passed, ContextItem{Name: "note", Value: "use key AKIAIOSFODNN7EXAMPLE"})
		}, code: CodeRestricted, path: "/context_passed/2/value"},
		{name: "password item passed", mut: func(p *Package, _ Binding) {
			p.Passed = append(p.Passed, ContextItem{Name: "Password", Value: "hunter2"})
		}, code: CodeRestricted, path: "/context_passed/2/value"},
		{name: "password member in an unknown member", mut: func(p *Package, _ Binding) {
			p.Extra = Extra{"login": []byte(`{"user":"ops","password":"hunter2"}`)}
		}, code: CodeRestricted, path: "/login/password"},
		{name: "withheld item passed", mut: func(p *Package, _ Binding) {
			p.Withheld = []Withheld{{Item: "card_number", Reason: "PCI"}}
			p.Passed = append(p.Passed, ContextItem{Name: "card_number", Value: "on file"})
		}, code: CodeRestricted, path: "/context_passed/2"},
		{name: "next action must-ask, not allowed", mut: func(p *Package, _ Binding) { p.Next.Action = "refund.issue" }, code: CodeNextNotAllowed, path: "/next_action/action"},
		{name: "next action unlisted", mut: func(p *Package, _ Binding) { p.Next.Action = "refund.issue.now" }, code: CodeNextNotAllowed, path: "/next_action/action"},
		{name: "next action denied", mut: func(p *Package, _ Binding) { p.Next.Action = "card.charge" }, code: CodeNextDenied, path: "/next_action/action"},
		{name: "must ask without approval", mut: func(p *Package, _ Binding) { p.Pending = nil }, code: CodeMustAskNoApproval, path: "/authority/must_ask/0"},
		{name: "must ask approval without owner", mut: func(p *Package, _ Binding) { p.Pending[0].Owner = "" }, code: CodeMustAskNoApproval, path: "/authority/must_ask/0"},
		{name: "external effect without operation id or key", mut: func(p *Package, _ Binding) { p.Completed[0].IdempotencyKey = "" }, code: CodeNoIdempotency, path: "/completed/0"},
		{name: "stale state", mut: func(p *Package, b Binding) { p.State[0].AsOf = b.Iat.Std().Add(-16 * time.Minute) }, code: CodeStaleState, path: "/state/0/as_of"},
		{name: "state as of the future", mut: func(p *Package, _ Binding) {
			p.State[0].AsOf = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		}, code: CodeStaleState, path: "/state/0/as_of"},
		{name: "state as of beyond the skew", mut: func(p *Package, b Binding) { p.State[0].AsOf = b.Iat.Std().Add(61 * time.Second) }, code: CodeStaleState, path: "/state/0/as_of"},
		{name: "authority entries differing in case", mut: func(p *Package, _ Binding) {
			p.Authority.Allowed = append(p.Authority.Allowed, "Card.Charge")
		}, code: CodeAmbiguous, path: "/authority/denied/0"},
		{name: "authority entries differing in trailing space", mut: func(p *Package, _ Binding) {
			p.Authority.Allowed = append(p.Authority.Allowed, "card.charge ")
		}, code: CodeAmbiguous, path: "/authority/denied/0"},
		{name: "authority entries differing in normalisation", mut: func(p *Package, _ Binding) {
			p.Authority.Allowed = append(p.Authority.Allowed, "caf\u00e9.pay")
			p.Authority.Denied = append(p.Authority.Denied, "cafe\u0301.pay")
		}, code: CodeAmbiguous, path: "/authority/denied/2"},
		{name: "pending side effect without owner", mut: func(p *Package, _ Binding) {
			p.Pending = append(p.Pending, Pending{Kind: PendingSideEffect, Item: "chargeback dispute open at the bank"})
		}, code: CodePendingNoOwner, path: "/pending/1/owner"},
		{name: "timeout without owner", mut: func(p *Package, _ Binding) { p.Timeouts[0].Owner = "" }, code: CodeTimeoutNoOwner, path: "/timeouts/0/owner"},
		{name: "no verification step", mut: func(p *Package, _ Binding) { p.Verification.Check = "" }, code: CodeNoVerification, path: "/verification/check"},
		{name: "claim citing no evidence", mut: func(p *Package, _ Binding) { p.State[0].Evidence = nil }, code: CodeUnsupported, path: "/state/0", advisory: true},
		{name: "claim citing unverified evidence", mut: func(p *Package, _ Binding) { p.Completed[0].Evidence = []string{"no-such-artifact"} }, code: CodeUnsupported, path: "/completed/0", advisory: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, handoff.JWS, nil)
			out, enc, salt := w.rawOffer(refundPackage(), c.mut, c.salted, c.noRef)
			if c.noSalt {
				salt = nil
			}
			if c.swap {
				other := refundPackage()
				other.Outcome.Result = "refund of another invoice"
				other.Handoff, other.Sender.Agent, other.Receiver.Agent = Header{ID: string(out.Offer.Hop), Time: out.Offer.Iat.Std()}, string(triage), string(payments)
				var err error
				enc, err = other.Encode()
				require.NoError(t, err)
			}
			_, rep := w.receive(out, handoff.JSON, Delivered{Package: enc, Salt: salt})
			require.True(t, rep.Has(c.code, c.path), "want %s at %q, got %+v", c.code, c.path, rep.Findings())
			buildRefusesWhatCheckFindsAbsent(t, out.Offer, enc, rep)
			require.Equal(t, c.advisory, rep.Passed(), "findings: %+v", rep.Findings())
			for _, f := range rep.Findings() {
				if f.Code == c.code && f.Path == c.path {
					require.Equal(t, c.advisory, f.Advisory)
				}
			}
		})
	}
}

// buildRefusesWhatCheckFindsAbsent holds Build to the check: it refuses the
// package enc, as an *IncompleteError, exactly when the check reported a
// field absent, and names exactly those fields.
func buildRefusesWhatCheckFindsAbsent(t *testing.T, o *handoff.Offer, enc []byte, rep *Report) {
	t.Helper()
	var want []Finding
	for _, f := range rep.Findings() {
		if absence(f.Code) {
			want = append(want, f)
		}
	}
	p, err := Decode(enc, DecodeOptions{})
	require.NoError(t, err)
	_, err = NewBuilder(*p).Build(BindingOf(o), BuildOptions{Time: p.Handoff.Time})
	var ie *IncompleteError
	if len(want) == 0 {
		require.False(t, errors.As(err, &ie), "Build refused what the check accepts: %v", err)
		return
	}
	require.True(t, errors.As(err, &ie), "Build accepted what the check finds absent: %+v (Build: %v)", want, err)
	require.ElementsMatch(t, want, ie.Missing)
}

// An artifact that does not match makes the claims citing it unsupported:
// the claim stays a claim, never a fact.
func TestCheck_MismatchedEvidenceLeavesClaimUnsupported(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	out, enc, _ := w.rawOffer(refundPackage(), func(p *Package, _ Binding) {
		p.Artifacts[0].Ref.Dig.Val = digest.SHA256([]byte("another ledger")).B64()
	}, false, false)
	_, rep := w.receive(out, handoff.JSON, Delivered{Package: enc})
	require.True(t, rep.Has(CodeUnsupported, "/state/0"))
	require.Equal(t, ref.Mismatch, rep.Artifacts()[0].Outcome)
	require.Equal(t, ref.Verified, rep.Artifacts()[1].Outcome)
}

// Without an artifact resolver nothing is reported verified (HC-11).
func TestCheck_HC11_NoResolverNothingVerified(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	built, bind := w.build(refundPackage(), BuildOptions{})
	out := w.offer(built, bind)
	rep, err := Check(context.Background(), out.Offer, Delivered{Package: built.Encoded}, CheckConfig{Now: w.clock.Now})
	require.NoError(t, err)
	for _, a := range rep.Artifacts() {
		require.Equal(t, ref.Unverifiable, a.Outcome)
	}
	require.True(t, rep.Has(CodeArtifactUnverifiable, "/artifacts/0/ref"))
	require.False(t, rep.Passed())
}

// The state bound is the caller's.
func TestCheck_StateAgeBoundIsConfigurable(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	built, bind := w.build(refundPackage(), BuildOptions{})
	out := w.offer(built, bind)
	d := Delivered{Package: built.Encoded}
	rep, err := Check(context.Background(), out.Offer, d, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource(), MaxStateAge: 30 * time.Second})
	require.NoError(t, err)
	require.True(t, rep.Has(CodeStaleState, "/state/0/as_of"))
	rep, err = Check(context.Background(), out.Offer, d, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource(), MaxStateAge: 2 * time.Minute})
	require.NoError(t, err)
	require.True(t, rep.Passed())
}

// Without an offer the package is not shown bound, unless the caller asks
// for an unbound inspection.
func TestCheck_NoOffer(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	built, _ := w.build(refundPackage(), BuildOptions{})
	rep, err := Check(context.Background(), nil, Delivered{Package: built.Encoded}, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource()})
	require.NoError(t, err)
	require.True(t, rep.Has(CodeUnbound, ""))
	rep, err = Check(context.Background(), nil, Delivered{Package: built.Encoded}, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource(), Unbound: true})
	require.NoError(t, err)
	require.True(t, rep.Passed())
}
