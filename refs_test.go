package handoff

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Objects the references of these tests name, served by loc.
var (
	refPrompt  = []byte("the prompt the planner worked from")
	refResult  = []byte(`{"tests":"passed"}`)
	refSalt    = []byte("0123456789abcdef0123456789abcdef")
	refSalted  = digest.SHA256(slices.Concat(refSalt, refPrompt))
	refUnknown = digest.Digest{Alg: "sha-512", Val: make([]byte, 64)}
)

const (
	locPrompt = "https://p.example/ctx/prompt"
	locResult = "https://p.example/ctx/result"
	locAbsent = "https://p.example/ctx/absent"
)

func refSource() ref.Source {
	return ref.ByLoc(map[string]ref.Object{
		locPrompt: {Octets: refPrompt, Salt: refSalt},
		locResult: {Octets: refResult},
	})
}

// withRefs is an offer from rxPlanner carrying refs, received by an agent
// with the given reference policy and source.
func withRefs(pol ref.Policy, src ref.Source, refs ...ref.Ref) func(t *testing.T, w *world) rxInput {
	return func(t *testing.T, w *world) rxInput {
		a := w.agent(rxReceiver, func(c *Config) { c.Refs, c.RefSource = pol, src })
		return rxInput{agent: a, h: handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Refs = refs }))}
	}
}

// outcomes asserts the outcome of each reference, in order.
func outcomes(want ...ref.Outcome) func(t *testing.T, _ *world, in *Received) {
	return func(t *testing.T, _ *world, in *Received) {
		t.Helper()
		got := make([]ref.Outcome, len(in.Refs()))
		for i, r := range in.Refs() {
			got[i] = r.Outcome
		}
		assert.Equal(t, append([]ref.Outcome{}, want...), got)
	}
}

// Step 7 of section 5.1 (HC-36), with the outcomes of HC-11 and HC-08, in
// both formats and encodings.
func TestReceive_HC11_References(t *testing.T) {
	dig := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt), Loc: locPrompt}
	wrong := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("something else")), Loc: locPrompt}
	salted := ref.Ref{Kind: ref.KindSaltedDigest, Dig: refSalted, Loc: locPrompt}
	saltedWrong := ref.Ref{Kind: ref.KindSaltedDigest, Dig: digest.SHA256(slices.Concat(refSalt, refResult)), Loc: locPrompt}
	saltedUnsalted := ref.Ref{Kind: ref.KindSaltedDigest, Dig: digest.SHA256(refResult), Loc: locResult} // no salt supplied
	unknownAlg := ref.Ref{Kind: ref.KindDigest, Dig: refUnknown, Loc: locPrompt}
	scitt := ref.Ref{Kind: ref.KindSCITTReceipt, Dig: digest.SHA256(refPrompt), Loc: locPrompt, Proof: []byte{0xd2}}
	learnlog := ref.Ref{Kind: ref.KindLearnlogHead, Dig: digest.SHA256(refPrompt), Loc: locPrompt}
	uriKind := ref.Ref{Kind: "https://kinds.example/blob", Dig: digest.SHA256(refPrompt), Loc: locPrompt}
	absent := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt), Loc: locAbsent}
	noLoc := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt)}
	result := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refResult), Loc: locResult}

	runRxCases(t, []rxCase{
		// RefsNotChecked: nothing is checked, nothing is reported verified.
		{name: "not checked: every ref not checked, even a wrong one",
			build: withRefs(ref.CheckNone, refSource(), dig, wrong, unknownAlg, scitt),
			check: outcomes(ref.NotChecked, ref.NotChecked, ref.NotChecked, ref.NotChecked)},
		{name: "not checked: no source needed",
			build: withRefs(ref.CheckNone, nil, dig), check: outcomes(ref.NotChecked)},

		// RefsRequired.
		{name: "required: digest verified", build: withRefs(ref.CheckRequired, refSource(), dig, result),
			check: outcomes(ref.Verified, ref.Verified)},
		{name: "required: digest mismatch", reason: reason.RefMismatch, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), dig, wrong), check: outcomes(ref.Verified, ref.Mismatch)},
		{name: "HC09 required: salted digest verified", build: withRefs(ref.CheckRequired, refSource(), salted),
			check: outcomes(ref.Verified)},
		{name: "HC09 required: salted digest mismatch", reason: reason.RefMismatch, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), saltedWrong), check: outcomes(ref.Mismatch)},
		{name: "HC09 required: salted digest without a salt", reason: reason.UnverifiableRef, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), saltedUnsalted), check: outcomes(ref.Unverifiable)},
		{name: "HC08 required: unknown digest alg", reason: reason.UnverifiableRef, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), unknownAlg), check: outcomes(ref.Unverifiable)},
		{name: "HC68 required: scitt-receipt", reason: reason.UnverifiableRef, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), scitt), check: outcomes(ref.Unverifiable)},
		{name: "HC69 required: learnlog-head", reason: reason.UnverifiableRef, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), learnlog), check: outcomes(ref.Unverifiable)},
		{name: "HC10 required: URI kind", reason: reason.UnverifiableRef, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), uriKind), check: outcomes(ref.Unverifiable)},
		{name: "required: object unavailable", reason: reason.UnverifiableRef, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), absent), check: outcomes(ref.Unverifiable)},
		{name: "required: no loc", reason: reason.UnverifiableRef, class: ErrRejected,
			build: withRefs(ref.CheckRequired, refSource(), noLoc), check: outcomes(ref.Unverifiable)},
		{name: "required: no source", reason: reason.UnverifiableRef, class: ErrRejected,
			build: withRefs(ref.CheckRequired, nil, dig), check: outcomes(ref.Unverifiable)},
		{name: "required: the first failing ref gives the reason, unverifiable", reason: reason.UnverifiableRef,
			build: withRefs(ref.CheckRequired, refSource(), unknownAlg, wrong), check: outcomes(ref.Unverifiable, ref.Mismatch)},
		{name: "required: the first failing ref gives the reason, mismatch", reason: reason.RefMismatch,
			build: withRefs(ref.CheckRequired, refSource(), wrong, unknownAlg), check: outcomes(ref.Mismatch, ref.Unverifiable)},
		{name: "required: an offer without refs", build: withRefs(ref.CheckRequired, nil), check: outcomes()},

		// RefsCheckAvailable: a mismatch rejects, unverifiable is reported.
		{name: "available: digest verified", build: withRefs(ref.CheckAvailable, refSource(), dig),
			check: outcomes(ref.Verified)},
		{name: "available: digest mismatch", reason: reason.RefMismatch, class: ErrRejected,
			build: withRefs(ref.CheckAvailable, refSource(), wrong), check: outcomes(ref.Mismatch)},
		{name: "HC09 available: salted digest mismatch", reason: reason.RefMismatch, class: ErrRejected,
			build: withRefs(ref.CheckAvailable, refSource(), saltedWrong), check: outcomes(ref.Mismatch)},
		{name: "HC08 available: unknown digest alg is unverifiable, not rejected",
			build: withRefs(ref.CheckAvailable, refSource(), unknownAlg, dig), check: outcomes(ref.Unverifiable, ref.Verified)},
		{name: "available: unavailable, scitt-receipt and URI kind reported",
			build: withRefs(ref.CheckAvailable, refSource(), absent, scitt, uriKind, salted),
			check: outcomes(ref.Unverifiable, ref.Unverifiable, ref.Unverifiable, ref.Verified)},
		{name: "available: no source", build: withRefs(ref.CheckAvailable, nil, dig), check: outcomes(ref.Unverifiable)},

		// The host's source replaces the configured one.
		{name: "host source replaces the configured source",
			build: func(t *testing.T, w *world) rxInput {
				in := withRefs(ref.CheckRequired, ref.ByLoc(nil), dig)(t, w)
				in.host.RefSource = refSource()
				return in
			},
			check: outcomes(ref.Verified)},
		{name: "host source that mismatches", reason: reason.RefMismatch,
			build: func(t *testing.T, w *world) rxInput {
				in := withRefs(ref.CheckRequired, refSource(), dig)(t, w)
				in.host.RefSource = ref.ByLoc(map[string]ref.Object{locPrompt: {Octets: refResult}})
				return in
			},
			check: outcomes(ref.Mismatch)},

		// Before step 7, every ref is reported not checked (HC-11).
		{name: "rejected before step 7: refs not checked", reason: reason.Policy,
			build: func(t *testing.T, w *world) rxInput {
				in := withRefs(ref.CheckRequired, refSource(), dig, wrong)(t, w)
				in.host.Dialog = "ctx-2"
				return in
			},
			check: outcomes(ref.NotChecked, ref.NotChecked)},
	})
}

// HC-11: a RefSource that fails in any way makes the ref unverifiable, never
// verified; the context reaches the source.
func TestReceive_HC11_SourceErrors(t *testing.T) {
	w := newWorld(t, JWS, rxAgents...)
	type key struct{}
	var seen []any
	src := func(ctx context.Context, r ref.Ref) (ref.Object, error) {
		seen = append(seen, ctx.Value(key{}))
		return ref.Object{Octets: refPrompt}, errors.New("fetch failed")
	}
	a := w.agent(rxReceiver, func(c *Config) { c.Refs, c.RefSource = ref.CheckRequired, src })
	r := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt), Loc: locPrompt}
	data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Refs = []ref.Ref{r} })), JSON)
	ctx := context.WithValue(context.Background(), key{}, "v")
	in, err := a.Receive(ctx, data, Host{})
	require.NoError(t, err)
	assert.Equal(t, reason.UnverifiableRef, in.Reason())
	require.Len(t, in.Refs(), 1)
	assert.Equal(t, ref.Unverifiable, in.Refs()[0].Outcome, "the octets returned with an error are not used")
	assert.Equal(t, []any{"v"}, seen)
}

// CheckRef on its own: HC-08, HC-09, HC-11.
func TestCheckRef_HC08_HC09_HC11(t *testing.T) {
	short := make([]byte, digest.MinSaltSize-1)
	cases := []struct {
		name string
		ref  ref.Ref
		obj  ref.Object
		want ref.Outcome
	}{
		{"digest verified", ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt)}, ref.Object{Octets: refPrompt}, ref.Verified},
		{"digest mismatch", ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt)}, ref.Object{Octets: refResult}, ref.Mismatch},
		{"digest of nothing", ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(nil)}, ref.Object{}, ref.Verified},
		{"digest ignores a salt", ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt)}, ref.Object{Octets: refPrompt, Salt: refSalt}, ref.Verified},
		{"salted verified", ref.Ref{Kind: ref.KindSaltedDigest, Dig: refSalted}, ref.Object{Octets: refPrompt, Salt: refSalt}, ref.Verified},
		{"salted, wrong salt", ref.Ref{Kind: ref.KindSaltedDigest, Dig: refSalted}, ref.Object{Octets: refPrompt, Salt: refSalt[1:]}, ref.Mismatch},
		{"salted, wrong octets", ref.Ref{Kind: ref.KindSaltedDigest, Dig: refSalted}, ref.Object{Octets: refResult, Salt: refSalt}, ref.Mismatch},
		{"salted, unsalted digest", ref.Ref{Kind: ref.KindSaltedDigest, Dig: digest.SHA256(refPrompt)}, ref.Object{Octets: refPrompt, Salt: refSalt}, ref.Mismatch},
		{"salted, salt too short", ref.Ref{Kind: ref.KindSaltedDigest, Dig: digest.SHA256(slices.Concat(short, refPrompt))}, ref.Object{Octets: refPrompt, Salt: short}, ref.Unverifiable},
		{"salted, no salt", ref.Ref{Kind: ref.KindSaltedDigest, Dig: refSalted}, ref.Object{Octets: refPrompt}, ref.Unverifiable},
		{"unknown alg", ref.Ref{Kind: ref.KindDigest, Dig: refUnknown}, ref.Object{Octets: refPrompt}, ref.Unverifiable},
		{"unknown alg, salted", ref.Ref{Kind: ref.KindSaltedDigest, Dig: refUnknown}, ref.Object{Octets: refPrompt, Salt: refSalt}, ref.Unverifiable},
		{"scitt-receipt", ref.Ref{Kind: ref.KindSCITTReceipt, Dig: digest.SHA256(refPrompt)}, ref.Object{Octets: refPrompt}, ref.Unverifiable},
		{"learnlog-head", ref.Ref{Kind: ref.KindLearnlogHead, Dig: digest.SHA256(refPrompt)}, ref.Object{Octets: refPrompt}, ref.Unverifiable},
		{"URI kind", ref.Ref{Kind: "urn:example:kind", Dig: digest.SHA256(refPrompt)}, ref.Object{Octets: refPrompt}, ref.Unverifiable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ref.Check(c.ref, c.obj)
			assert.Equal(t, c.want, got.Outcome)
			assert.Equal(t, c.ref.Kind, got.Ref.Kind)
			if c.want != ref.Verified {
				assert.NotEmpty(t, got.Detail, "a reason for people")
			}
		})
	}
}

// HC-08 for grant: a Digest alg this implementation lacks fails the check.
func TestVerifyGrant_HC08(t *testing.T) {
	cred := []byte("Bearer abc")
	g := digest.SHA256(cred)
	assert.NoError(t, VerifyGrant(&Offer{Grant: &g}, cred))
	assert.ErrorIs(t, VerifyGrant(&Offer{Grant: &g}, []byte("Bearer abd")), ErrRejected)
	assert.ErrorIs(t, VerifyGrant(&Offer{}, cred), ErrRejected)
	assert.ErrorIs(t, VerifyGrant(&Offer{Grant: &refUnknown}, cred), digest.ErrUnsupported)
}

// RefsByLoc serves by loc only, and reports a missing object as
// ErrRefUnavailable.
func TestRefsByLoc(t *testing.T) {
	src := refSource()
	obj, err := src(context.Background(), ref.Ref{Loc: locPrompt})
	require.NoError(t, err)
	assert.Equal(t, refPrompt, obj.Octets)
	_, err = src(context.Background(), ref.Ref{Loc: locAbsent})
	assert.ErrorIs(t, err, ref.ErrUnavailable)
	_, err = ref.ByLoc(nil)(context.Background(), ref.Ref{})
	assert.ErrorIs(t, err, ref.ErrUnavailable)
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
		for _, pol := range []ref.Policy{ref.CheckNone, ref.CheckAvailable, ref.CheckRequired} {
			a := w.agent(rxReceiver, func(c *Config) { c.Refs = pol })
			r := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt), Loc: srv.URL + "/ctx"}
			s := w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Refs = []ref.Ref{r} })
			in := receive(t, a, encodeHandoff(t, handoffOf(s), fe.Encoding), Host{})
			assert.NotEqual(t, ref.Verified, in.Refs()[0].Outcome, "policy %d", pol)
		}
	})
	assert.Zero(t, hits.Load())
}

// checkerReturning is a checker that returns res, or panics with p.
func checkerReturning(res ref.Result, p any) ref.Checker {
	return ref.CheckerFunc(func(context.Context, ref.Ref, ref.Source) ref.Result {
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
	r := ref.Ref{Kind: uriKind, Dig: digest.SHA256(refPrompt), Loc: locPrompt}
	other := ref.Ref{Kind: "urn:example:other", Dig: digest.SHA256(refResult)}
	cases := []struct {
		name    string
		checker ref.Checker
		want    ref.Outcome
		detail  string
	}{
		{"registered, verified", checkerReturning(ref.Result{Outcome: ref.Verified}, nil), ref.Verified, ""},
		{"registered, mismatch", checkerReturning(ref.Result{Outcome: ref.Mismatch, Detail: "differs"}, nil), ref.Mismatch, "differs"},
		{"registered, unverifiable without a detail", checkerReturning(ref.Result{Outcome: ref.Unverifiable}, nil), ref.Unverifiable, "gave no reason"},
		{"not checked from a checker is unverifiable", checkerReturning(ref.Result{Outcome: ref.NotChecked}, nil), ref.Unverifiable, `"not checked"`},
		{"unknown outcome is unverifiable", checkerReturning(ref.Result{Outcome: "verified!"}, nil), ref.Unverifiable, `"verified!"`},
		{"zero outcome is unverifiable", checkerReturning(ref.Result{}, nil), ref.Unverifiable, `outcome ""`},
		{"a panic is unverifiable", checkerReturning(ref.Result{Outcome: ref.Verified}, "boom"), ref.Unverifiable, "boom"},
		{"the result names the ref checked, not another", checkerReturning(ref.Result{Ref: other, Outcome: ref.Verified}, nil), ref.Verified, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ref.Checkers{uriKind: c.checker}.Check(context.Background(), r, refSource())
			assert.Equal(t, c.want, got.Outcome)
			assert.Equal(t, r.Kind, got.Ref.Kind)
			assert.Equal(t, r.Dig, got.Ref.Dig)
			assert.Contains(t, got.Detail, c.detail)
		})
	}
	t.Run("unregistered kind is unverifiable", func(t *testing.T) {
		got := ref.Checkers{"urn:example:other": checkerReturning(ref.Result{Outcome: ref.Verified}, nil)}.Check(context.Background(), r, refSource())
		assert.Equal(t, ref.Unverifiable, got.Outcome)
		assert.Contains(t, got.Detail, "no checker")
	})
	t.Run("the checker gets the context and source", func(t *testing.T) {
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, "v")
		var seen any
		c := ref.CheckerFunc(func(ctx context.Context, r ref.Ref, src ref.Source) ref.Result {
			seen = ctx.Value(key{})
			obj, err := src.Object(ctx, r)
			if err != nil {
				return ref.Result{Outcome: ref.Unverifiable, Detail: err.Error()}
			}
			if ok, err := r.Dig.Matches(obj.Octets); err != nil || !ok {
				return ref.Result{Outcome: ref.Mismatch, Detail: "digest differs"}
			}
			return ref.Result{Outcome: ref.Verified}
		})
		got := ref.Checkers{uriKind: c}.Check(ctx, r, refSource())
		assert.Equal(t, ref.Verified, got.Outcome)
		assert.Equal(t, "v", seen)
		got = ref.Checkers{uriKind: c}.Check(ctx, r, nil)
		assert.Equal(t, ref.Unverifiable, got.Outcome, "a nil source has no objects")
	})
	t.Run("built-in kinds need no registration", func(t *testing.T) {
		d := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(refPrompt), Loc: locPrompt}
		s := ref.Ref{Kind: ref.KindSaltedDigest, Dig: refSalted, Loc: locPrompt}
		out := ref.Checkers(nil).CheckRefs(context.Background(), []ref.Ref{d, s, r}, refSource())
		require.Len(t, out, 3)
		assert.Equal(t, []ref.Outcome{ref.Verified, ref.Verified, ref.Unverifiable}, []ref.Outcome{out[0].Outcome, out[1].Outcome, out[2].Outcome})
	})
}

// HC-10: only the optional defined kinds and absolute-URI kinds can be
// registered; the built-in kinds cannot be replaced.
func TestRefCheckers_HC10_Validate(t *testing.T) {
	ok := checkerReturning(ref.Result{Outcome: ref.Verified}, nil)
	for _, good := range []ref.Checkers{nil, {}, {ref.KindSCITTReceipt: ok, ref.KindLearnlogHead: ok, "https://k.example/x": ok, "urn:example:k": ok}} {
		assert.NoError(t, good.Validate())
	}
	for name, bad := range map[string]ref.Checkers{
		"digest":        {ref.KindDigest: ok},
		"salted-digest": {ref.KindSaltedDigest: ok},
		"relative":      {"blob": ok},
		"empty":         {"": ok},
		"nil checker":   {"urn:example:k": nil},
	} {
		assert.ErrorIs(t, bad.Validate(), ref.ErrChecker, name)
	}
	w := newWorld(t, JWS, rxAgents...)
	cfg := w.agent(rxReceiver).cfg
	cfg.RefCheckers = ref.Checkers{"blob": ok}
	_, err := NewAgent(cfg)
	assert.ErrorIs(t, err, ref.ErrChecker)
}

// HC-10, HC-11 in the receive pipeline: a registered URI kind is checked at
// step 7 under each policy.
func TestReceive_HC10_HC11_RegisteredKind(t *testing.T) {
	const uriKind = "https://kinds.example/blob"
	r := ref.Ref{Kind: uriKind, Dig: digest.SHA256(refPrompt), Loc: locPrompt}
	with := func(pol ref.Policy, res ref.Result) func(t *testing.T, w *world) rxInput {
		return func(t *testing.T, w *world) rxInput {
			a := w.agent(rxReceiver, func(c *Config) {
				c.Refs, c.RefSource = pol, refSource()
				c.RefCheckers = ref.Checkers{uriKind: checkerReturning(res, nil)}
			})
			return rxInput{agent: a, h: handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Refs = []ref.Ref{r} }))}
		}
	}
	runRxCases(t, []rxCase{
		{name: "required: verified", build: with(ref.CheckRequired, ref.Result{Outcome: ref.Verified}), check: outcomes(ref.Verified)},
		{name: "required: mismatch", reason: reason.RefMismatch, class: ErrRejected,
			build: with(ref.CheckRequired, ref.Result{Outcome: ref.Mismatch}), check: outcomes(ref.Mismatch)},
		{name: "required: unverifiable", reason: reason.UnverifiableRef, class: ErrRejected,
			build: with(ref.CheckRequired, ref.Result{Outcome: ref.Unverifiable}), check: outcomes(ref.Unverifiable)},
		{name: "required: a checker's not checked rejects", reason: reason.UnverifiableRef, class: ErrRejected,
			build: with(ref.CheckRequired, ref.Result{Outcome: ref.NotChecked}), check: outcomes(ref.Unverifiable)},
		{name: "available: unverifiable is reported", build: with(ref.CheckAvailable, ref.Result{Outcome: ref.Unverifiable}),
			check: outcomes(ref.Unverifiable)},
		{name: "not checked: the checker is not run", build: with(ref.CheckNone, ref.Result{Outcome: ref.Verified}),
			check: outcomes(ref.NotChecked)},
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
