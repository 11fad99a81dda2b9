package handoff

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Objects the references of these tests name, served by loc.
var (
	refPrompt  = []byte("the prompt the planner worked from")
	refResult  = []byte(`{"tests":"passed"}`)
	refSalt    = []byte("0123456789abcdef0123456789abcdef")
	refSalted  = saltedSHA256(refSalt, refPrompt)
	refUnknown = Digest{Alg: "sha-512", Val: make([]byte, 64)}
)

const (
	locPrompt = "https://p.example/ctx/prompt"
	locResult = "https://p.example/ctx/result"
	locAbsent = "https://p.example/ctx/absent"
)

func refSource() RefSource {
	return RefsByLoc(map[string]RefObject{
		locPrompt: {Octets: refPrompt, Salt: refSalt},
		locResult: {Octets: refResult},
	})
}

// withRefs is an offer from rxPlanner carrying refs, received by an agent
// with the given reference policy and source.
func withRefs(pol RefPolicy, src RefSource, refs ...ContextRef) func(t *testing.T, w *world) rxInput {
	return func(t *testing.T, w *world) rxInput {
		a := w.agent(rxReceiver, func(c *Config) { c.Refs, c.RefSource = pol, src })
		return rxInput{agent: a, h: handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Refs = refs }))}
	}
}

// outcomes asserts the outcome of each reference, in order.
func outcomes(want ...RefOutcome) func(t *testing.T, _ *world, in *Received) {
	return func(t *testing.T, _ *world, in *Received) {
		t.Helper()
		got := make([]RefOutcome, len(in.Refs()))
		for i, r := range in.Refs() {
			got[i] = r.Outcome
		}
		assert.Equal(t, append([]RefOutcome{}, want...), got)
	}
}

// Step 7 of section 5.1 (HC-36), with the outcomes of HC-11 and HC-08, in
// both formats and encodings.
func TestReceive_HC11_References(t *testing.T) {
	digest := ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt), Loc: locPrompt}
	wrong := ContextRef{Kind: KindDigest, Dig: SHA256([]byte("something else")), Loc: locPrompt}
	salted := ContextRef{Kind: KindSaltedDigest, Dig: refSalted, Loc: locPrompt}
	saltedWrong := ContextRef{Kind: KindSaltedDigest, Dig: saltedSHA256(refSalt, refResult), Loc: locPrompt}
	saltedUnsalted := ContextRef{Kind: KindSaltedDigest, Dig: SHA256(refResult), Loc: locResult} // no salt supplied
	unknownAlg := ContextRef{Kind: KindDigest, Dig: refUnknown, Loc: locPrompt}
	scitt := ContextRef{Kind: KindSCITTReceipt, Dig: SHA256(refPrompt), Loc: locPrompt, Proof: []byte{0xd2}}
	learnlog := ContextRef{Kind: KindLearnlogHead, Dig: SHA256(refPrompt), Loc: locPrompt}
	uriKind := ContextRef{Kind: "https://kinds.example/blob", Dig: SHA256(refPrompt), Loc: locPrompt}
	absent := ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt), Loc: locAbsent}
	noLoc := ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt)}
	result := ContextRef{Kind: KindDigest, Dig: SHA256(refResult), Loc: locResult}

	runRxCases(t, []rxCase{
		// RefsNotChecked: nothing is checked, nothing is reported verified.
		{name: "not checked: every ref not checked, even a wrong one",
			build: withRefs(RefsNotChecked, refSource(), digest, wrong, unknownAlg, scitt),
			check: outcomes(RefNotChecked, RefNotChecked, RefNotChecked, RefNotChecked)},
		{name: "not checked: no source needed",
			build: withRefs(RefsNotChecked, nil, digest), check: outcomes(RefNotChecked)},

		// RefsRequired.
		{name: "required: digest verified", build: withRefs(RefsRequired, refSource(), digest, result),
			check: outcomes(RefVerified, RefVerified)},
		{name: "required: digest mismatch", reason: ReasonRefMismatch, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), digest, wrong), check: outcomes(RefVerified, RefMismatch)},
		{name: "HC09 required: salted digest verified", build: withRefs(RefsRequired, refSource(), salted),
			check: outcomes(RefVerified)},
		{name: "HC09 required: salted digest mismatch", reason: ReasonRefMismatch, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), saltedWrong), check: outcomes(RefMismatch)},
		{name: "HC09 required: salted digest without a salt", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), saltedUnsalted), check: outcomes(RefUnverifiable)},
		{name: "HC08 required: unknown digest alg", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), unknownAlg), check: outcomes(RefUnverifiable)},
		{name: "HC68 required: scitt-receipt", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), scitt), check: outcomes(RefUnverifiable)},
		{name: "HC69 required: learnlog-head", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), learnlog), check: outcomes(RefUnverifiable)},
		{name: "HC10 required: URI kind", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), uriKind), check: outcomes(RefUnverifiable)},
		{name: "required: object unavailable", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), absent), check: outcomes(RefUnverifiable)},
		{name: "required: no loc", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: withRefs(RefsRequired, refSource(), noLoc), check: outcomes(RefUnverifiable)},
		{name: "required: no source", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: withRefs(RefsRequired, nil, digest), check: outcomes(RefUnverifiable)},
		{name: "required: the first failing ref gives the reason, unverifiable", reason: ReasonUnverifiableRef,
			build: withRefs(RefsRequired, refSource(), unknownAlg, wrong), check: outcomes(RefUnverifiable, RefMismatch)},
		{name: "required: the first failing ref gives the reason, mismatch", reason: ReasonRefMismatch,
			build: withRefs(RefsRequired, refSource(), wrong, unknownAlg), check: outcomes(RefMismatch, RefUnverifiable)},
		{name: "required: an offer without refs", build: withRefs(RefsRequired, nil), check: outcomes()},

		// RefsCheckAvailable: a mismatch rejects, unverifiable is reported.
		{name: "available: digest verified", build: withRefs(RefsCheckAvailable, refSource(), digest),
			check: outcomes(RefVerified)},
		{name: "available: digest mismatch", reason: ReasonRefMismatch, class: ErrRejected,
			build: withRefs(RefsCheckAvailable, refSource(), wrong), check: outcomes(RefMismatch)},
		{name: "HC09 available: salted digest mismatch", reason: ReasonRefMismatch, class: ErrRejected,
			build: withRefs(RefsCheckAvailable, refSource(), saltedWrong), check: outcomes(RefMismatch)},
		{name: "HC08 available: unknown digest alg is unverifiable, not rejected",
			build: withRefs(RefsCheckAvailable, refSource(), unknownAlg, digest), check: outcomes(RefUnverifiable, RefVerified)},
		{name: "available: unavailable, scitt-receipt and URI kind reported",
			build: withRefs(RefsCheckAvailable, refSource(), absent, scitt, uriKind, salted),
			check: outcomes(RefUnverifiable, RefUnverifiable, RefUnverifiable, RefVerified)},
		{name: "available: no source", build: withRefs(RefsCheckAvailable, nil, digest), check: outcomes(RefUnverifiable)},

		// The host's source replaces the configured one.
		{name: "host source replaces the configured source",
			build: func(t *testing.T, w *world) rxInput {
				in := withRefs(RefsRequired, RefsByLoc(nil), digest)(t, w)
				in.host.RefSource = refSource()
				return in
			},
			check: outcomes(RefVerified)},
		{name: "host source that mismatches", reason: ReasonRefMismatch,
			build: func(t *testing.T, w *world) rxInput {
				in := withRefs(RefsRequired, refSource(), digest)(t, w)
				in.host.RefSource = RefsByLoc(map[string]RefObject{locPrompt: {Octets: refResult}})
				return in
			},
			check: outcomes(RefMismatch)},

		// Before step 7, every ref is reported not checked (HC-11).
		{name: "rejected before step 7: refs not checked", reason: ReasonPolicy,
			build: func(t *testing.T, w *world) rxInput {
				in := withRefs(RefsRequired, refSource(), digest, wrong)(t, w)
				in.host.Dialog = "ctx-2"
				return in
			},
			check: outcomes(RefNotChecked, RefNotChecked)},
	})
}

// HC-11: a RefSource that fails in any way makes the ref unverifiable, never
// verified; the context reaches the source.
func TestReceive_HC11_SourceErrors(t *testing.T) {
	w := newWorld(t, JWS, rxAgents...)
	type key struct{}
	var seen []any
	src := func(ctx context.Context, ref ContextRef) (RefObject, error) {
		seen = append(seen, ctx.Value(key{}))
		return RefObject{Octets: refPrompt}, errors.New("fetch failed")
	}
	a := w.agent(rxReceiver, func(c *Config) { c.Refs, c.RefSource = RefsRequired, src })
	ref := ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt), Loc: locPrompt}
	data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Refs = []ContextRef{ref} })), JSON)
	ctx := context.WithValue(context.Background(), key{}, "v")
	in, err := a.Receive(ctx, data, Host{})
	require.NoError(t, err)
	assert.Equal(t, ReasonUnverifiableRef, in.Reason())
	require.Len(t, in.Refs(), 1)
	assert.Equal(t, RefUnverifiable, in.Refs()[0].Outcome, "the octets returned with an error are not used")
	assert.Equal(t, []any{"v"}, seen)
}

// CheckRef on its own: HC-08, HC-09, HC-11.
func TestCheckRef_HC08_HC09_HC11(t *testing.T) {
	short := make([]byte, MinSaltSize-1)
	cases := []struct {
		name string
		ref  ContextRef
		obj  RefObject
		want RefOutcome
	}{
		{"digest verified", ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt)}, RefObject{Octets: refPrompt}, RefVerified},
		{"digest mismatch", ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt)}, RefObject{Octets: refResult}, RefMismatch},
		{"digest of nothing", ContextRef{Kind: KindDigest, Dig: SHA256(nil)}, RefObject{}, RefVerified},
		{"digest ignores a salt", ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt)}, RefObject{Octets: refPrompt, Salt: refSalt}, RefVerified},
		{"salted verified", ContextRef{Kind: KindSaltedDigest, Dig: refSalted}, RefObject{Octets: refPrompt, Salt: refSalt}, RefVerified},
		{"salted, wrong salt", ContextRef{Kind: KindSaltedDigest, Dig: refSalted}, RefObject{Octets: refPrompt, Salt: refSalt[1:]}, RefMismatch},
		{"salted, wrong octets", ContextRef{Kind: KindSaltedDigest, Dig: refSalted}, RefObject{Octets: refResult, Salt: refSalt}, RefMismatch},
		{"salted, unsalted digest", ContextRef{Kind: KindSaltedDigest, Dig: SHA256(refPrompt)}, RefObject{Octets: refPrompt, Salt: refSalt}, RefMismatch},
		{"salted, salt too short", ContextRef{Kind: KindSaltedDigest, Dig: saltedSHA256(short, refPrompt)}, RefObject{Octets: refPrompt, Salt: short}, RefUnverifiable},
		{"salted, no salt", ContextRef{Kind: KindSaltedDigest, Dig: refSalted}, RefObject{Octets: refPrompt}, RefUnverifiable},
		{"unknown alg", ContextRef{Kind: KindDigest, Dig: refUnknown}, RefObject{Octets: refPrompt}, RefUnverifiable},
		{"unknown alg, salted", ContextRef{Kind: KindSaltedDigest, Dig: refUnknown}, RefObject{Octets: refPrompt, Salt: refSalt}, RefUnverifiable},
		{"scitt-receipt", ContextRef{Kind: KindSCITTReceipt, Dig: SHA256(refPrompt)}, RefObject{Octets: refPrompt}, RefUnverifiable},
		{"learnlog-head", ContextRef{Kind: KindLearnlogHead, Dig: SHA256(refPrompt)}, RefObject{Octets: refPrompt}, RefUnverifiable},
		{"URI kind", ContextRef{Kind: "urn:example:kind", Dig: SHA256(refPrompt)}, RefObject{Octets: refPrompt}, RefUnverifiable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CheckRef(c.ref, c.obj)
			assert.Equal(t, c.want, got.Outcome)
			assert.Equal(t, c.ref.Kind, got.Ref.Kind)
			if c.want != RefVerified {
				assert.NotEmpty(t, got.Detail, "a reason for people")
			}
		})
	}
}

// HC-08 for grant: a Digest alg this implementation lacks fails the check.
func TestVerifyGrant_HC08(t *testing.T) {
	cred := []byte("Bearer abc")
	g := SHA256(cred)
	assert.NoError(t, VerifyGrant(&Offer{Grant: &g}, cred))
	assert.ErrorIs(t, VerifyGrant(&Offer{Grant: &g}, []byte("Bearer abd")), ErrRejected)
	assert.ErrorIs(t, VerifyGrant(&Offer{}, cred), ErrRejected)
	assert.ErrorIs(t, VerifyGrant(&Offer{Grant: &refUnknown}, cred), ErrUnsupportedDigest)
}

// RefsByLoc serves by loc only, and reports a missing object as
// ErrRefUnavailable.
func TestRefsByLoc(t *testing.T) {
	src := refSource()
	obj, err := src(context.Background(), ContextRef{Loc: locPrompt})
	require.NoError(t, err)
	assert.Equal(t, refPrompt, obj.Octets)
	_, err = src(context.Background(), ContextRef{Loc: locAbsent})
	assert.ErrorIs(t, err, ErrRefUnavailable)
	_, err = RefsByLoc(nil)(context.Background(), ContextRef{})
	assert.ErrorIs(t, err, ErrRefUnavailable)
}

// HC-61: the receiver never fetches loc itself; without a RefSource a ref
// is unverifiable, and the URL it names is never contacted.
func TestReceive_HC61_NoFetchOfLoc(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write(refPrompt)
	}))
	defer srv.Close()
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		for _, pol := range []RefPolicy{RefsNotChecked, RefsCheckAvailable, RefsRequired} {
			a := w.agent(rxReceiver, func(c *Config) { c.Refs = pol })
			ref := ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt), Loc: srv.URL + "/ctx"}
			s := w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Refs = []ContextRef{ref} })
			in := receive(t, a, encodeHandoff(t, handoffOf(s), fe.Encoding), Host{})
			assert.NotEqual(t, RefVerified, in.Refs()[0].Outcome, "policy %d", pol)
		}
	})
	assert.Zero(t, hits.Load())
}

// checkerReturning is a checker that returns res, or panics with p.
func checkerReturning(res RefResult, p any) RefChecker {
	return RefCheckerFunc(func(context.Context, ContextRef, RefSource) RefResult {
		if p != nil {
			panic(p)
		}
		return res
	})
}

// HC-10, HC-11: the dispatcher reaches registered kinds and never lets a
// result read verified without a check.
func TestRefCheckers_HC10_HC11_Dispatch(t *testing.T) {
	const uriKind = "https://kinds.example/blob"
	ref := ContextRef{Kind: uriKind, Dig: SHA256(refPrompt), Loc: locPrompt}
	other := ContextRef{Kind: "urn:example:other", Dig: SHA256(refResult)}
	cases := []struct {
		name    string
		checker RefChecker
		want    RefOutcome
		detail  string
	}{
		{"registered, verified", checkerReturning(RefResult{Outcome: RefVerified}, nil), RefVerified, ""},
		{"registered, mismatch", checkerReturning(RefResult{Outcome: RefMismatch, Detail: "differs"}, nil), RefMismatch, "differs"},
		{"registered, unverifiable without a detail", checkerReturning(RefResult{Outcome: RefUnverifiable}, nil), RefUnverifiable, "gave no reason"},
		{"not checked from a checker is unverifiable", checkerReturning(RefResult{Outcome: RefNotChecked}, nil), RefUnverifiable, `"not checked"`},
		{"unknown outcome is unverifiable", checkerReturning(RefResult{Outcome: "verified!"}, nil), RefUnverifiable, `"verified!"`},
		{"zero outcome is unverifiable", checkerReturning(RefResult{}, nil), RefUnverifiable, `outcome ""`},
		{"a panic is unverifiable", checkerReturning(RefResult{Outcome: RefVerified}, "boom"), RefUnverifiable, "boom"},
		{"the result names the ref checked, not another", checkerReturning(RefResult{Ref: other, Outcome: RefVerified}, nil), RefVerified, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := RefCheckers{uriKind: c.checker}.Check(context.Background(), ref, refSource())
			assert.Equal(t, c.want, got.Outcome)
			assert.Equal(t, ref.Kind, got.Ref.Kind)
			assert.Equal(t, ref.Dig, got.Ref.Dig)
			assert.Contains(t, got.Detail, c.detail)
		})
	}
	t.Run("unregistered kind is unverifiable", func(t *testing.T) {
		got := RefCheckers{"urn:example:other": checkerReturning(RefResult{Outcome: RefVerified}, nil)}.Check(context.Background(), ref, refSource())
		assert.Equal(t, RefUnverifiable, got.Outcome)
		assert.Contains(t, got.Detail, "no checker")
	})
	t.Run("the checker gets the context and source", func(t *testing.T) {
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, "v")
		var seen any
		c := RefCheckerFunc(func(ctx context.Context, r ContextRef, src RefSource) RefResult {
			seen = ctx.Value(key{})
			obj, err := src.Object(ctx, r)
			if err != nil {
				return RefResult{Outcome: RefUnverifiable, Detail: err.Error()}
			}
			ok, err := r.Dig.Matches(obj.Octets)
			return digestResult(r, ok, err)
		})
		got := RefCheckers{uriKind: c}.Check(ctx, ref, refSource())
		assert.Equal(t, RefVerified, got.Outcome)
		assert.Equal(t, "v", seen)
		got = RefCheckers{uriKind: c}.Check(ctx, ref, nil)
		assert.Equal(t, RefUnverifiable, got.Outcome, "a nil source has no objects")
	})
	t.Run("built-in kinds need no registration", func(t *testing.T) {
		d := ContextRef{Kind: KindDigest, Dig: SHA256(refPrompt), Loc: locPrompt}
		s := ContextRef{Kind: KindSaltedDigest, Dig: refSalted, Loc: locPrompt}
		out := RefCheckers(nil).CheckRefs(context.Background(), []ContextRef{d, s, ref}, refSource())
		require.Len(t, out, 3)
		assert.Equal(t, []RefOutcome{RefVerified, RefVerified, RefUnverifiable}, []RefOutcome{out[0].Outcome, out[1].Outcome, out[2].Outcome})
	})
}

// HC-10: only the optional defined kinds and absolute-URI kinds can be
// registered; the built-in kinds cannot be replaced.
func TestRefCheckers_HC10_Validate(t *testing.T) {
	ok := checkerReturning(RefResult{Outcome: RefVerified}, nil)
	for _, good := range []RefCheckers{nil, {}, {KindSCITTReceipt: ok, KindLearnlogHead: ok, "https://k.example/x": ok, "urn:example:k": ok}} {
		assert.NoError(t, good.Validate())
	}
	for name, bad := range map[string]RefCheckers{
		"digest":        {KindDigest: ok},
		"salted-digest": {KindSaltedDigest: ok},
		"relative":      {"blob": ok},
		"empty":         {"": ok},
		"nil checker":   {"urn:example:k": nil},
	} {
		assert.ErrorIs(t, bad.Validate(), ErrRefChecker, name)
	}
	w := newWorld(t, JWS, rxAgents...)
	cfg := w.agent(rxReceiver).cfg
	cfg.RefCheckers = RefCheckers{"blob": ok}
	_, err := NewAgent(cfg)
	assert.ErrorIs(t, err, ErrRefChecker)
}

// HC-10, HC-11 in the receive pipeline: a registered URI kind is checked at
// step 7 under each policy.
func TestReceive_HC10_HC11_RegisteredKind(t *testing.T) {
	const uriKind = "https://kinds.example/blob"
	ref := ContextRef{Kind: uriKind, Dig: SHA256(refPrompt), Loc: locPrompt}
	with := func(pol RefPolicy, res RefResult) func(t *testing.T, w *world) rxInput {
		return func(t *testing.T, w *world) rxInput {
			a := w.agent(rxReceiver, func(c *Config) {
				c.Refs, c.RefSource = pol, refSource()
				c.RefCheckers = RefCheckers{uriKind: checkerReturning(res, nil)}
			})
			return rxInput{agent: a, h: handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Refs = []ContextRef{ref} }))}
		}
	}
	runRxCases(t, []rxCase{
		{name: "required: verified", build: with(RefsRequired, RefResult{Outcome: RefVerified}), check: outcomes(RefVerified)},
		{name: "required: mismatch", reason: ReasonRefMismatch, class: ErrRejected,
			build: with(RefsRequired, RefResult{Outcome: RefMismatch}), check: outcomes(RefMismatch)},
		{name: "required: unverifiable", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: with(RefsRequired, RefResult{Outcome: RefUnverifiable}), check: outcomes(RefUnverifiable)},
		{name: "required: a checker's not checked rejects", reason: ReasonUnverifiableRef, class: ErrRejected,
			build: with(RefsRequired, RefResult{Outcome: RefNotChecked}), check: outcomes(RefUnverifiable)},
		{name: "available: unverifiable is reported", build: with(RefsCheckAvailable, RefResult{Outcome: RefUnverifiable}),
			check: outcomes(RefUnverifiable)},
		{name: "not checked: the checker is not run", build: with(RefsNotChecked, RefResult{Outcome: RefVerified}),
			check: outcomes(RefNotChecked)},
	})
}

// The optional kinds live in their own packages: importing handoff links
// neither the Merkle tree library nor the JCS library, nor those packages.
func TestRootDoesNotLinkRefKinds(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the test suite, so it is on PATH")
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/veraison/go-cose", "the listing is of the root package's dependencies")
	for _, dep := range deps {
		for _, banned := range []string{"github.com/transparency-dev/merkle", "github.com/gowebpki/jcs",
			"github.com/agentproto/handoff/scitt", "github.com/agentproto/handoff/learnlog"} {
			assert.False(t, strings.HasPrefix(dep, banned), "root package links %s", dep)
		}
	}
}
