package handoff

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
)

func testSigner(t testing.TB, f Format) *Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	s, err := NewSigner(k, f, nil)
	require.NoError(t, err)
	return s
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(unix int64) *clock { return &clock{t: time.Unix(unix, 0)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// world is a set of agents that trust one another, sharing a clock.
type world struct {
	t       testing.TB
	clock   *clock
	signers map[AgentID]*Signer
	trust   *Trust
}

func newWorld(t testing.TB, f Format, ids ...AgentID) *world {
	t.Helper()
	w := &world{t: t, clock: newClock(1793000000), signers: map[AgentID]*Signer{}}
	keys := map[AgentID][]TrustedKey{}
	for _, id := range ids {
		s := testSigner(t, f)
		w.signers[id] = s
		keys[id] = []TrustedKey{s.Key()}
	}
	var err error
	w.trust, err = NewTrust(keys)
	require.NoError(t, err)
	return w
}

func (w *world) agent(id AgentID, mod ...func(*Config)) *Agent {
	w.t.Helper()
	cfg := Config{ID: id, Signer: w.signers[id], Trust: w.trust, Now: w.clock.Now}
	for _, m := range mod {
		m(&cfg)
	}
	a, err := NewAgent(cfg)
	require.NoError(w.t, err)
	return a
}

// offer signs an offer from iss to aud with the world's clock, applying
// mod to it before signing.
func (w *world) offer(iss, aud AgentID, mod func(*Offer)) Signed {
	w.t.Helper()
	hop, err := NewHopID(nil)
	require.NoError(w.t, err)
	now := TimeOf(w.clock.Now())
	o := &Offer{Hop: hop, Dialog: "ctx-1", Iss: iss, Aud: aud, Iat: now, Exp: now + 120}
	if mod != nil {
		mod(o)
	}
	s, err := w.signers[iss].SignOffer(o)
	require.NoError(w.t, err)
	return s
}

func encodeHandoff(t testing.TB, h *Handoff, enc Encoding) []byte {
	t.Helper()
	b, err := h.Encode(enc)
	require.NoError(t, err)
	return b
}

func receive(t testing.TB, a *Agent, data []byte, host Host) *Received {
	t.Helper()
	in, err := a.Receive(context.Background(), data, host)
	require.NoError(t, err)
	return in
}

// formatEncoding is one cell of the matrix that receive tests run in: the
// signed form of every element, and the encoding of the Handoff object.
type formatEncoding struct {
	Format   Format
	Encoding Encoding
}

func (fe formatEncoding) String() string { return fe.Format.String() + "-in-" + fe.Encoding.String() }

var allFormatEncodings = []formatEncoding{{JWS, JSON}, {JWS, CBOR}, {COSE, JSON}, {COSE, CBOR}}

// eachFormatEncoding runs fn as a subtest in every cell of the matrix.
func eachFormatEncoding(t *testing.T, fn func(t *testing.T, fe formatEncoding)) {
	t.Helper()
	for _, fe := range allFormatEncodings {
		t.Run(fe.String(), func(t *testing.T) { fn(t, fe) })
	}
}

// newMixedWorld is newWorld with a signed form chosen per agent, for
// chains whose elements come in both forms.
func newMixedWorld(t testing.TB, formats map[AgentID]Format) *world {
	t.Helper()
	w := &world{t: t, clock: newClock(1793000000), signers: map[AgentID]*Signer{}}
	keys := map[AgentID][]TrustedKey{}
	for id, f := range formats {
		s := testSigner(t, f)
		w.signers[id] = s
		keys[id] = []TrustedKey{s.Key()}
	}
	var err error
	w.trust, err = NewTrust(keys)
	require.NoError(t, err)
	return w
}

// trustOnly returns a trust configuration that binds the keys of ids only.
func (w *world) trustOnly(ids ...AgentID) *Trust {
	w.t.Helper()
	keys := map[AgentID][]TrustedKey{}
	for _, id := range ids {
		keys[id] = []TrustedKey{w.signers[id].Key()}
	}
	tr, err := NewTrust(keys)
	require.NoError(w.t, err)
	return tr
}

// draftOffer returns the unsigned offer that w.offer would sign.
func (w *world) draftOffer(iss, aud AgentID) *Offer {
	w.t.Helper()
	hop, err := NewHopID(nil)
	require.NoError(w.t, err)
	now := TimeOf(w.clock.Now())
	return &Offer{Hop: hop, Dialog: "ctx-1", Iss: iss, Aud: aud, Iat: now, Exp: now + 120}
}

// signAs signs o with the key of signer, whatever o.Iss names. Signing one
// offer twice gives two different octets (equivocation, HC-53).
func (w *world) signAs(signer AgentID, o *Offer) Signed {
	w.t.Helper()
	s, err := w.signers[signer].SignOffer(o)
	require.NoError(w.t, err)
	return s
}

// path signs the offers of a delegation path: ids[0] to ids[1], ids[1] to
// ids[2], and so on, each naming the one before it by prev. mod, when not
// nil, changes offer i after prev is set and before it is signed by the
// key of its (possibly changed) iss. The last element is the current
// offer, the others its chain, oldest first.
func (w *world) path(mod func(i int, o *Offer), ids ...AgentID) []Signed {
	w.t.Helper()
	require.GreaterOrEqual(w.t, len(ids), 2)
	var out []Signed
	for i := 0; i+1 < len(ids); i++ {
		o := w.draftOffer(ids[i], ids[i+1])
		if i > 0 {
			d := out[i-1].Digest()
			o.Prev = &d
		}
		if mod != nil {
			mod(i, o)
		}
		out = append(out, w.signAs(o.Iss, o))
	}
	return out
}

// handoffOf makes a Handoff whose offer is the last element and whose
// chain is the others, oldest first.
func handoffOf(elems ...Signed) *Handoff {
	h := &Handoff{Offer: elems[len(elems)-1]}
	if len(elems) > 1 {
		h.Chain = append([]Signed(nil), elems[:len(elems)-1]...)
	}
	return h
}

// unresolvedOf lists a's unresolved hops, failing on a store error.
func unresolvedOf(a *Agent) []HopInfo {
	hops, err := a.Unresolved(context.Background())
	if err != nil {
		panic(err)
	}
	return hops
}

// statusErr turns a refused status into an error, as the tests written
// before StatusResult carried rejections expect.
func statusErr(res *StatusResult, err error) (*StatusResult, error) {
	if err != nil {
		return nil, err
	}
	if err := res.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// eachFormat runs fn once per signed form.
func eachFormat(t *testing.T, fn func(t *testing.T, f Format)) {
	for _, f := range []Format{JWS, COSE} {
		t.Run(f.String(), func(t *testing.T) { fn(t, f) })
	}
}

// parseTrustDoc reads a trust document of the draft's examples and of the
// vectors (AgentID -> JWK Set) for the tests of this package, which cannot
// import package keyset (it imports this one). keyset.ParseTrust is the
// library's reader, tested there; this one only needs to read good
// documents.
func parseTrustDoc(doc []byte) (*Trust, error) {
	var m map[string]jose.JSONWebKeySet
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	keys := map[AgentID][]TrustedKey{}
	for id, set := range m {
		for _, k := range set.Keys {
			keys[AgentID(id)] = append(keys[AgentID(id)], trustedKeyOf(k))
		}
	}
	return NewTrust(keys)
}

// parseJWKDoc reads one public JWK, as parseTrustDoc reads its keys.
func parseJWKDoc(raw []byte) (TrustedKey, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil {
		return TrustedKey{}, err
	}
	return trustedKeyOf(k), nil
}

func trustedKeyOf(k jose.JSONWebKey) TrustedKey {
	alg := k.Algorithm
	if alg == "" {
		alg = ES256 // the draft's example keys are P-256
	}
	return TrustedKey{Public: k.Key, Alg: alg, KID: k.KeyID}
}

// publicJWKDoc writes k as a public JWK with its alg and kid.
func publicJWKDoc(k TrustedKey) ([]byte, error) {
	return jose.JSONWebKey{Key: k.Public, Algorithm: k.Alg, KeyID: k.KID, Use: "sig"}.MarshalJSON()
}
