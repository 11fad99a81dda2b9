package handoff

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// Fuzz targets for the root package, one per parser of untrusted input and
// one for the whole receive pipeline. Every target is seeded in code from a
// fixture of fixed keys, deterministic signatures and the draft-00 worked
// example, and from the corpus committed under testdata/fuzz/FuzzXxx. Set
// HANDOFF_WRITE_FUZZ_CORPUS=1 and run TestWriteFuzzCorpus to regenerate that
// corpus from the fixture; see FUZZING.md.

// The fuzz fixture's fixed clock: the draft's coder receives at 1793000003.
const fzNow = 1793000003

const (
	fzCoder = AgentID("spiffe://b.example/agent/coder")    // the receiver, as in the draft
	fzAlpha = AgentID("spiffe://fuzz.example/agent/alpha") // ES256, JWS
	fzBeta  = AgentID("spiffe://fuzz.example/agent/beta")  // ES256, COSE
	fzGamma = AgentID("spiffe://fuzz.example/agent/gamma") // EdDSA, both forms
)

// fzDeterministic signs with a nil random source, so that ECDSA signatures
// are RFC 6979 deterministic and the committed corpus stays valid.
type fzDeterministic struct{ crypto.Signer }

func (d fzDeterministic) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return d.Signer.Sign(nil, digest, opts)
}

// fzP256 returns the P-256 key whose scalar is SHA-256 of label.
func fzP256(label string) *ecdsa.PrivateKey {
	d := sha256.Sum256([]byte(label))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		panic(err)
	}
	return k
}

func fzEd25519(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(label))
	return ed25519.NewKeyFromSeed(seed[:])
}

// fzFixture is the fuzz targets' world: a trust configuration binding the
// draft's two keys and three fixed keys of ours, valid signed offers from
// them to the coder, the Handoff objects that carry them, and statuses.
type fzFixture struct {
	trust   *Trust
	signers map[string]*Signer // alpha, beta, gamma-jws, gamma-cose

	elements map[string]Signed // every signed offer, by name
	handoffs map[string][]byte // every valid Handoff object, by name
	statuses map[string]*Status
	// known holds the octets of every element that may verify: the
	// elements themselves and the high-S twins of the ECDSA ones (which
	// verify too; HC-53 turns them into equivocation).
	known map[string]bool
}

var (
	fzOnce sync.Once
	fzFix  *fzFixture
	fzErr  error
)

func fuzzFixture(tb testing.TB) *fzFixture {
	tb.Helper()
	fzOnce.Do(func() { fzFix, fzErr = buildFuzzFixture() })
	require.NoError(tb, fzErr)
	return fzFix
}

func buildFuzzFixture() (*fzFixture, error) {
	fx := &fzFixture{signers: map[string]*Signer{}, elements: map[string]Signed{},
		handoffs: map[string][]byte{}, statuses: map[string]*Status{}, known: map[string]bool{}}

	for name, spec := range map[string]struct {
		key crypto.Signer
		f   Format
	}{
		"alpha":      {fzP256("handoff fuzz alpha"), JWS},
		"beta":       {fzP256("handoff fuzz beta"), COSE},
		"gamma-jws":  {fzEd25519("handoff fuzz gamma"), JWS},
		"gamma-cose": {fzEd25519("handoff fuzz gamma"), COSE},
	} {
		s, err := NewSigner(fzDeterministic{spec.key}, spec.f, nil)
		if err != nil {
			return nil, err
		}
		fx.signers[name] = s
	}

	draft, err := os.ReadFile(filepath.Join("testdata", "draft-00", "trust.json"))
	if err != nil {
		return nil, err
	}
	dt, err := parseTrustDoc(draft)
	if err != nil {
		return nil, err
	}
	keys := map[AgentID][]TrustedKey{
		fzAlpha: {fx.signers["alpha"].Key()},
		fzBeta:  {fx.signers["beta"].Key()},
		fzGamma: {fx.signers["gamma-jws"].Key()},
	}
	for _, id := range dt.AgentIDs() {
		keys[id] = dt.Keys(id)
	}
	if fx.trust, err = NewTrust(keys); err != nil {
		return nil, err
	}

	sign := func(name, signer string, o *Offer) (Signed, error) {
		s, err := fx.signers[signer].SignOffer(o)
		if err != nil {
			return Signed{}, fmt.Errorf("%s: %w", name, err)
		}
		fx.elements[name] = s
		return s, nil
	}
	obo := &Principal{Sub: "u-8f2a", Iss: "https://idp.u.example"}
	grant := digest.SHA256([]byte("credential"))
	refs := []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("context")), Loc: "https://a.example/ctx/9"}}

	direct, err := sign("alpha-direct", "alpha", &Offer{Hop: "fzhop-alpha-direct-00001", Dialog: "ctx-fuzz", Task: "t-1",
		Iss: fzAlpha, Aud: fzCoder, Iat: 1793000000, Exp: 1793000120})
	if err != nil {
		return nil, err
	}
	betaToAlpha, err := sign("beta-to-alpha", "beta", &Offer{Hop: "fzhop-beta-to-alpha-00001", Dialog: "ctx-fuzz",
		Iss: fzBeta, Aud: fzAlpha, Iat: 1792999990, Exp: 1793000110, Obo: obo, Grant: &grant, Refs: refs,
		Extra: map[string]any{"x-note": "first hop", "x-count": uint64(7)}})
	if err != nil {
		return nil, err
	}
	prev := betaToAlpha.Digest()
	alphaFromBeta, err := sign("alpha-from-beta", "alpha", &Offer{Hop: "fzhop-alpha-from-beta-0001", Dialog: "ctx-fuzz",
		Iss: fzAlpha, Aud: fzCoder, Iat: 1793000000, Exp: 1793000120, Obo: obo, Prev: &prev})
	if err != nil {
		return nil, err
	}
	extra := map[string]any{"x-bytes": []byte{0, 1, 2, 0xff}, "x-neg": int64(-42), "x-float": 1.5,
		"x-nested": map[string]any{"a": []any{uint64(1), "b", true, nil}}}
	gammaCOSE, err := sign("gamma-cose", "gamma-cose", &Offer{Hop: "fzhop-gamma-cose-000001", Dialog: "ctx-fuzz",
		Iss: fzGamma, Aud: fzCoder, Iat: 1793000000, Exp: 1793000120, Refs: refs, Extra: extra})
	if err != nil {
		return nil, err
	}
	gammaJWS, err := sign("gamma-jws", "gamma-jws", &Offer{Hop: "fzhop-gamma-jws-0000001", Dialog: "ctx-fuzz",
		Iss: fzGamma, Aud: fzCoder, Iat: 1793000000, Exp: 1793000120,
		Extra: map[string]any{"x-float": 1.5, "x-text": "<&>\u2028"}})
	if err != nil {
		return nil, err
	}
	alphaToBeta, err := sign("alpha-to-beta", "alpha", &Offer{Hop: "fzhop-alpha-to-beta-00001", Dialog: "ctx-fuzz",
		Iss: fzAlpha, Aud: fzBeta, Iat: 1792999995, Exp: 1793000100})
	if err != nil {
		return nil, err
	}
	prev2 := alphaToBeta.Digest()
	betaFromAlpha, err := sign("beta-from-alpha", "beta", &Offer{Hop: "fzhop-beta-from-alpha-0001", Dialog: "ctx-fuzz",
		Iss: fzBeta, Aud: fzCoder, Iat: 1793000000, Exp: 1793000120, Prev: &prev2})
	if err != nil {
		return nil, err
	}

	raw, err := os.ReadFile(filepath.Join("testdata", "draft-00", "handoff.json"))
	if err != nil {
		return nil, err
	}
	dh, _, err := ParseHandoff(raw, Limits{})
	if err != nil {
		return nil, err
	}
	fx.elements["draft-offer"], fx.elements["draft-chain0"] = dh.Offer, dh.Chain[0]
	fx.handoffs["draft-00.json"] = raw // as the draft prints it

	for name, h := range map[string]*Handoff{
		"direct":      {Offer: direct},
		"direct-ext":  {Offer: direct, Extra: map[string]any{"x-carrier": "a2a"}},
		"mixed-chain": {Offer: alphaFromBeta, Chain: []Signed{betaToAlpha}},
		"gamma-cose":  {Offer: gammaCOSE},
		"gamma-jws":   {Offer: gammaJWS},
		"jws-in-cbor": {Offer: betaFromAlpha, Chain: []Signed{alphaToBeta}},
		"draft":       dh,
	} {
		for _, enc := range []Encoding{JSON, CBOR} {
			b, err := h.Encode(enc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			fx.handoffs[name+"."+enc.String()] = b
		}
	}

	for _, s := range fx.elements {
		fx.known[string(s.Octets)] = true
		if twin, ok := fzTwin(s); ok {
			fx.known[string(twin.Octets)] = true
		}
	}

	fx.statuses["accepted"] = &Status{Hop: fzHop(direct), Offer: direct.Digest(), Iss: fzCoder, Aud: fzAlpha,
		Iat: 1793000003, State: state.Accepted}
	fx.statuses["rejected"] = &Status{Hop: fzHop(direct), Offer: direct.Digest(), Iss: fzCoder, Aud: fzAlpha,
		Iat: 1793000004, State: state.Rejected, Reason: reason.Policy, Detail: "not today"}
	fx.statuses["failed"] = &Status{Hop: fzHop(direct), Offer: direct.Digest(), Iss: fzCoder, Aud: fzAlpha,
		Iat: 1793000050, State: state.Failed, Reason: reason.Equivocation, Refs: refs, Extra: map[string]any{"x-n": int64(-1)}}
	fx.statuses["canceled"] = &Status{Hop: fzHop(direct), Offer: direct.Digest(), Iss: fzAlpha, Aud: fzCoder,
		Iat: 1793000010, State: state.Canceled}
	return fx, nil
}

// fzHop returns the hop of a signed offer of the fixture.
func fzHop(s Signed) HopID {
	o, _, err := InspectUnverified(s, Limits{})
	if err != nil || o == nil {
		panic(fmt.Sprintf("fixture element: %v", err))
	}
	return o.Hop
}

var errFzStop = errors.New("header read")

// fzAlg returns the alg named by the protected header of s.
func fzAlg(s Signed) string {
	var alg string
	switch s.Format {
	case JWS:
		_, _, _ = jws.Open(s.Octets, func(h jws.Header, _ []byte) ([]jws.Key, error) { alg = h.Alg; return nil, errFzStop }, 0)
	case COSE:
		_, _, _ = cose.Open(s.Octets, func(h cose.Header, _ []byte) ([]cose.Key, error) { alg = h.Alg; return nil, errFzStop }, 0)
	}
	return alg
}

// fzTwin returns s with its ECDSA signature replaced by the high-S twin
// (r, n-s): different octets that verify under the same key. EdDSA
// signatures have no twin.
func fzTwin(s Signed) (Signed, bool) {
	if fzAlg(s) != ES256 {
		return Signed{}, false
	}
	switch s.Format {
	case JWS:
		i := strings.LastIndexByte(string(s.Octets), '.')
		sig, err := base64.RawURLEncoding.DecodeString(string(s.Octets[i+1:]))
		if err != nil {
			return Signed{}, false
		}
		tw, err := ecsig.Twin(ecsig.ES256, sig)
		if err != nil {
			return Signed{}, false
		}
		return Signed{Format: JWS, Octets: []byte(string(s.Octets[:i+1]) + base64.RawURLEncoding.EncodeToString(tw))}, true
	case COSE:
		// The message ends with the 64 signature octets.
		tw, err := ecsig.Twin(ecsig.ES256, s.Octets[len(s.Octets)-64:])
		if err != nil {
			return Signed{}, false
		}
		return Signed{Format: COSE, Octets: append(append([]byte(nil), s.Octets[:len(s.Octets)-64]...), tw...)}, true
	}
	return Signed{}, false
}

// fzPayloads returns every payload of the fixture, named, with its
// encoding: offers and statuses, each in JSON and CBOR, and the draft's.
func fzPayloads(tb testing.TB, status bool) map[string][]byte {
	tb.Helper()
	fx := fuzzFixture(tb)
	out := map[string][]byte{}
	if status {
		for name, st := range fx.statuses {
			j, err := st.encode(JSON)
			require.NoError(tb, err)
			c, err := st.encode(CBOR)
			require.NoError(tb, err)
			out[name+".json"], out[name+".cbor"] = j, c
		}
		p, err := os.ReadFile(filepath.Join("testdata", "draft-00", "status-payload.json"))
		require.NoError(tb, err)
		out["draft-status.json"] = p
		return out
	}
	for name, s := range fx.elements {
		var p []byte
		var err error
		if s.Format == JWS {
			p, err = jws.UnsafePayload(s.Octets, 0)
		} else {
			p, err = cose.UnsafePayload(s.Octets, 0)
		}
		require.NoError(tb, err)
		o, _, err := InspectUnverified(s, Limits{})
		require.NoError(tb, err)
		if s.Format == JWS {
			out[name+".json"] = p
			if c, err := o.encode(CBOR); err == nil {
				out[name+".cbor"] = c
			}
		} else {
			out[name+".cbor"] = p
			j, err := o.encode(JSON)
			require.NoError(tb, err)
			out[name+".json"] = j
		}
	}
	return out
}

// fzAddPayloads seeds a payload target with (payload, isCBOR) pairs.
func fzAddPayloads(f *testing.F, status bool) {
	for name, p := range fzPayloads(f, status) {
		f.Add(p, strings.HasSuffix(name, ".cbor"))
	}
	f.Add([]byte(`{}`), false)
	f.Add([]byte{0xa0}, true)
}

func fzEncoding(isCBOR bool) Encoding {
	if isCBOR {
		return CBOR
	}
	return JSON
}

// requireTyped checks that err is one of the package's failure classes.
func requireTyped(t *testing.T, err error) {
	t.Helper()
	for _, class := range []error{ErrMalformed, ErrTooLarge, ErrSignature, ErrUntrustedKey, digest.ErrUnsupported, ErrRejected} {
		if errors.Is(err, class) {
			return
		}
	}
	t.Fatalf("error of no failure class: %v", err)
}

// FuzzDecodeOffer: DecodeOffer never panics; an error is typed and comes
// with a nil offer. A CBOR payload that decodes re-encodes (EncodeCBOR) to
// its own value in core deterministic encoding, of the same length (every
// head shortest), and to the same octets when it was in that encoding; the
// re-encoding decodes to an equal offer. A JSON payload that decodes is
// valid JSON and re-encodes to JSON that decodes to an equal offer, and
// encoding that again gives the same octets.
func FuzzDecodeOffer(f *testing.F) {
	fzAddPayloads(f, false)
	f.Fuzz(func(t *testing.T, payload []byte, isCBOR bool) {
		enc := fzEncoding(isCBOR)
		o, err := decodeOffer(payload, enc, Limits{})
		// The fast paths decide nothing: each steps aside or returns what
		// the full path returns.
		want, werr := fullOffer(payload, enc, Limits{})
		require.Equal(t, werr == nil, err == nil, "decodeOffer %v, full path %v", err, werr)
		fast := offerFromCBORFast
		if enc == JSON {
			fast = offerFromJSONFast
		}
		if got, ok := fast(payload, Limits{}); ok {
			require.NoError(t, werr, "the fast path took %q", payload)
			assertSameValue(t, want, got)
		}
		if err == nil {
			assertSameValue(t, want, o)
		}
		if err != nil {
			require.Nil(t, o)
			requireTyped(t, err)
			return
		}
		require.NotNil(t, o)
		require.NoError(t, fzCheckOffer(o))
		if enc == CBOR {
			again, err := o.encode(CBOR)
			require.NoError(t, err)
			fzCheckCBOR(t, payload, again, Limits{})
			o2, err := decodeOffer(again, CBOR, Limits{})
			require.NoError(t, err, "re-encoded %x", again)
			assertSameValue(t, o, o2)
			third, err := o2.encode(CBOR)
			require.NoError(t, err)
			require.Equal(t, again, third)
			return
		}
		require.True(t, json.Valid(payload), "accepted invalid JSON %q", payload)
		again, err := o.encode(JSON)
		require.NoError(t, err)
		o2, err := decodeOffer(again, JSON, Limits{})
		require.NoError(t, err, "re-encoded %q", again)
		require.Equal(t, o, o2)
		third, err := o2.encode(JSON)
		require.NoError(t, err)
		require.Equal(t, again, third)
	})
}

// fzCheckCBOR checks a CBOR payload or Handoff that decoded against its
// re-encoding by this package. Any valid serialization decodes (the exact
// profile), so the re-encoding may be shorter than the input; when the
// input is one the strict profile accepts (every head shortest), the
// re-encoding has the input's length, it is the input's own value in core
// deterministic encoding, so decoding lost nothing, and an input already
// in that encoding comes back octet for octet.
func fzCheckCBOR(t *testing.T, input, again []byte, lim Limits) {
	t.Helper()
	if _, err := decodeCBOR(input, lim.withDefaults(), profileStrict); err != nil {
		return
	}
	require.Len(t, again, len(input), "a head of %x is longer than needed", input)
	var raw any
	require.NoError(t, cbor.Unmarshal(input, &raw))
	det, err := cborEncMode.Marshal(raw)
	require.NoError(t, err)
	require.Equal(t, det, again, "the model changed the value of %x", input)
}

// fzCheckOffer checks what every decoded offer must satisfy.
func fzCheckOffer(o *Offer) error {
	if !o.Hop.Valid() || o.Iss == "" || o.Aud == "" || o.Dialog != o.Dialog {
		return fmt.Errorf("decoded offer breaks the CDDL: %+v", o)
	}
	return nil
}

// FuzzDecodeStatus: as FuzzDecodeOffer, for statuses.
func FuzzDecodeStatus(f *testing.F) {
	fzAddPayloads(f, true)
	f.Fuzz(func(t *testing.T, payload []byte, isCBOR bool) {
		enc := fzEncoding(isCBOR)
		st, err := decodeStatus(payload, enc, Limits{})
		if err != nil {
			require.Nil(t, st)
			requireTyped(t, err)
			return
		}
		require.NotNil(t, st)
		require.True(t, st.State.Wire() && st.Hop.Valid() && st.Iss != "" && st.Aud != "")
		if enc == CBOR {
			again, err := st.encode(CBOR)
			require.NoError(t, err)
			fzCheckCBOR(t, payload, again, Limits{})
			st2, err := decodeStatus(again, CBOR, Limits{})
			require.NoError(t, err, "re-encoded %x", again)
			assertSameValue(t, st, st2)
			return
		}
		require.True(t, json.Valid(payload), "accepted invalid JSON %q", payload)
		again, err := st.encode(JSON)
		require.NoError(t, err)
		st2, err := decodeStatus(again, JSON, Limits{})
		require.NoError(t, err, "re-encoded %q", again)
		require.Equal(t, st, st2)
		third, err := st2.encode(JSON)
		require.NoError(t, err)
		require.Equal(t, again, third)
	})
}

// FuzzParseHandoff: ParseHandoff never panics; an error is typed and comes
// with a nil Handoff. A Handoff that parses encodes, in the encoding it was
// read in, to an object that parses to an equal Handoff (a CBOR one as
// fzCheckCBOR describes); and element octets are kept exactly (HC-19,
// HC-20).
func FuzzParseHandoff(f *testing.F) {
	fx := fuzzFixture(f)
	for _, b := range fx.handoffs {
		f.Add(b)
	}
	f.Add([]byte(`{"offer":"a.b.c"}`))
	f.Add([]byte(`{"offer":"0oRAoEBA"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, enc, err := ParseHandoff(data, Limits{})
		if err != nil {
			require.Nil(t, h)
			requireTyped(t, err)
			return
		}
		require.NotNil(t, h)
		require.True(t, enc == JSON || enc == CBOR)
		elems := append([]Signed{h.Offer}, h.Chain...)
		if err := h.chainErrOf(); err != nil {
			// A chain that is not a list of signed handoffs is kept for
			// step 6 of section 5.1: a typed check-1 failure, the offer
			// itself well formed.
			var ce *chainError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, reason.BadSignature, ce.Reason)
			requireTyped(t, err)
			elems = elems[:1]
		}
		for _, e := range elems {
			require.NotEmpty(t, e.Octets)
			require.True(t, e.Format == JWS || e.Format == COSE)
			if e.Format == COSE {
				_, ok := coseTagLen(e.Octets)
				require.True(t, ok, "a COSE element starts with tag 18")
			}
		}
		if h.chainErrOf() != nil {
			return
		}
		again, err := h.Encode(enc)
		require.NoError(t, err)
		if enc == CBOR {
			fzCheckCBOR(t, data, again, Limits{}.withDefaults())
		}
		h2, enc2, err := ParseHandoff(again, Limits{})
		require.NoError(t, err, "re-encoded %q", again)
		require.Equal(t, enc, enc2)
		require.Equal(t, h.Offer, h2.Offer)
		require.Equal(t, h.Chain, h2.Chain)
		assertSameValue(t, decodedExtra(t, h), decodedExtra(t, h2))
	})
}

// FuzzReceive runs the whole receive pipeline (section 5.1) on arbitrary
// octets, at a fixed time, for a receiver with a small trust
// configuration. It never panics; it returns a result or an error wrapping
// ErrStore; a rejection carries a defined reason code; and an offer is
// accepted only when its element and every chain element are octets the
// fixture signed (or their high-S twins): a Handoff the fixture made, or a
// re-encoding of the same elements. The same octets received again are
// never accepted twice (HC-35, HC-38).
func FuzzReceive(f *testing.F) {
	fx := fuzzFixture(f)
	for _, b := range fx.handoffs {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fx := fuzzFixture(t)
		a, err := NewAgent(Config{ID: fzCoder, Signer: fx.signers["alpha"], Trust: fx.trust, TrustLacksSigner: true,
			Now: func() time.Time { return time.Unix(fzNow, 0) }})
		require.NoError(t, err)
		ctx := context.Background()
		in, err := a.Receive(ctx, data, Host{})
		if err != nil {
			require.Nil(t, in)
			require.ErrorIs(t, err, ErrStore)
			return
		}
		require.NotNil(t, in)
		require.False(t, in.Retransmission(), "fresh store")
		require.Empty(t, in.Equivocation(), "fresh store")
		if !in.Accepted() {
			require.True(t, in.Reason().Defined(), "reason %q", in.Reason())
			var rj *Rejection
			require.ErrorAs(t, in.Err(), &rj)
			require.Equal(t, in.Reason(), ReasonOf(in.Err()))
		} else {
			require.Empty(t, in.Reason())
			require.NoError(t, in.Err())
			require.NotNil(t, in.Handoff())
			require.NotNil(t, in.Offer())
			require.Equal(t, fzCoder, in.Offer().Aud)
			require.True(t, in.Digest().Equal(digest.SHA256(in.Handoff().Offer.Octets)))
			require.True(t, fx.known[string(in.Handoff().Offer.Octets)], "accepted an offer the fixture never signed: %q", in.Handoff().Offer.Octets)
			for i, e := range in.Handoff().Chain {
				require.True(t, fx.known[string(e.Octets)], "accepted a chain element the fixture never signed: chain[%d] %q", i, e.Octets)
			}
		}

		again, err := a.Receive(ctx, data, Host{})
		require.NoError(t, err)
		require.False(t, again.Accepted(), "the same octets accepted twice")
		if in.Accepted() {
			require.True(t, again.Retransmission())
			require.True(t, again.First().Equal(in.Digest()))
		}
	})
}

// TestWriteFuzzCorpus writes the fixture's seeds as the committed corpus
// of the root package's fuzz targets. It runs only when
// HANDOFF_WRITE_FUZZ_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("HANDOFF_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set HANDOFF_WRITE_FUZZ_CORPUS=1 to regenerate testdata/fuzz")
	}
	fx := fuzzFixture(t)
	for _, target := range []string{"FuzzDecodeOffer", "FuzzDecodeStatus"} {
		for name, p := range fzPayloads(t, target == "FuzzDecodeStatus") {
			writeCorpusFile(t, filepath.Join("testdata", "fuzz", target), name, p, strings.HasSuffix(name, ".cbor"))
		}
	}
	for _, target := range []string{"FuzzParseHandoff", "FuzzReceive"} {
		for name, b := range fx.handoffs {
			writeCorpusFile(t, filepath.Join("testdata", "fuzz", target), name, b)
		}
	}
	writeShapeCorpus(t)
}

// writeCorpusFile writes one file in the "go test fuzz v1" format.
func writeCorpusFile(t *testing.T, dir, name string, args ...any) {
	t.Helper()
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", v)
		default:
			t.Fatalf("corpus value of type %T", a)
		}
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(b.String()), 0o644))
}

// The fixture is what the fuzz properties rest on: every Handoff it made is
// accepted at the fixed time, and every ECDSA element's high-S twin
// verifies (and is a different octet string).
func TestFuzzFixture_Valid(t *testing.T) {
	fx := fuzzFixture(t)
	require.Equal(t, 15, len(fx.handoffs))
	for name, b := range fx.handoffs {
		a, err := NewAgent(Config{ID: fzCoder, Signer: fx.signers["alpha"], Trust: fx.trust, TrustLacksSigner: true,
			Now: func() time.Time { return time.Unix(fzNow, 0) }})
		require.NoError(t, err)
		in := receive(t, a, b, Host{})
		require.True(t, in.Accepted(), "%s: %s: %s", name, in.Reason(), in.Detail())
	}
	twins := 0
	for name, s := range fx.elements {
		tw, ok := fzTwin(s)
		if !ok {
			require.Equal(t, EdDSA, fzAlg(s), name)
			continue
		}
		twins++
		require.NotEqual(t, s.Octets, tw.Octets)
		_, err := OpenOffer(tw, fx.trust, Limits{})
		require.NoError(t, err, name)
	}
	require.Equal(t, 7, twins)
}
