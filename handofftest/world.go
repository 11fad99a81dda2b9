package handofftest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/keyset"
)

// StartUnix is the time a new World's clock shows, in seconds since 1970
// (2026-10-26T07:33:20Z): a fixed instant, so that what a test signs does
// not depend on when it runs.
const StartUnix = 1793000000

// DefaultDialog is the dialog of every offer a World signs, and of the Host
// it gives (World.Host): a host protocol's dialog identifier, such as an A2A
// contextId.
const DefaultDialog = "handofftest-dialog"

// Outsider is an agent that every World has a key for but that no World's
// trust configuration knows: what it signs is "untrusted-key", and a chain
// element it signs is unverifiable (HC-46).
const Outsider = handoff.AgentID("spiffe://outsider.handofftest.example/agent")

// The receiver's defaults that the bad inputs are built against: what a
// handoff.Config whose fields are left zero applies.
const (
	// MaxChain is the longest chain accepted: 16, as the draft recommends
	// (HC-50).
	MaxChain = 16
	// MaxLifetime bounds exp - iat: 300 s, as the draft recommends (HC-32).
	MaxLifetime = 300 * time.Second
	// TTL is the lifetime of an offer made without OfferParams.TTL.
	TTL = 2 * time.Minute
	// MaxHandoffSize bounds a whole Handoff object: 512 KiB.
	MaxHandoffSize = 512 << 10
)

// relays is the number of relay agents a World creates for chains: enough
// for a chain one longer than the default limit (HC-50) plus its offer.
const relays = MaxChain + 2

// Relay returns the AgentID of the i-th relay agent of every World (from
// 0): agents that World.Chain uses to sign the hops before the receiver.
// Every World trusts them.
func Relay(i int) handoff.AgentID {
	return handoff.AgentID(fmt.Sprintf("spiffe://relay%02d.handofftest.example/agent", i))
}

// Clock is a settable clock, safe for concurrent use. Its Now is what a
// World gives every agent it makes as Config.Now.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock showing t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the time the clock shows.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Set makes the clock show t.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// Advance moves the clock by d (which may be negative).
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// World is a set of agents that trust one another, each with an ECDSA
// P-256 key (ES256, the algorithm every implementation supports), one
// trust configuration binding every agent's key to its AgentID, and one
// settable clock. It signs in one Format, JWS unless In says otherwise;
// every World over the same keys shares its clock and trust.
//
// Besides the agents named to NewWorld, a World holds relay agents
// (Relay(0), Relay(1), ...) that Chain uses, trusted like the others, and
// the Outsider, whose key no trust configuration binds.
//
// A World is safe for concurrent use once made. It fails the test it was
// made with (t.Fatal) on a setup error, so its methods return no errors;
// in a subtest, use With(t).
type World struct {
	t      testing.TB
	clock  *Clock
	format handoff.Format
	chosen bool             // In chose format: BadInputs gives its inputs alone
	enc    handoff.Encoding // zero: the format's own (Encoding)
	keys   map[handoff.AgentID]*ecdsa.PrivateKey
	ids    []handoff.AgentID // as given to NewWorld
	trust  *handoff.Trust
}

// NewWorld returns a World of the agents ids (at least one), signing in
// JWS. Use In for COSE.
func NewWorld(t testing.TB, ids ...handoff.AgentID) *World {
	t.Helper()
	if len(ids) == 0 {
		t.Fatal("handofftest: NewWorld needs at least one AgentID")
	}
	w := &World{t: t, clock: NewClock(time.Unix(StartUnix, 0).UTC()), format: handoff.JWS, keys: map[handoff.AgentID]*ecdsa.PrivateKey{}}
	all := append([]handoff.AgentID(nil), ids...)
	for i := range relays {
		all = append(all, Relay(i))
	}
	bound := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range append(all, Outsider) {
		if _, dup := w.keys[id]; dup {
			t.Fatalf("handofftest: agent %q named twice", id)
		}
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatalf("handofftest: key for %q: %v", id, err)
		}
		w.keys[id] = k
		if id != Outsider {
			bound[id] = []handoff.TrustedKey{{Public: k.Public(), Alg: handoff.ES256}}
		}
	}
	w.ids = ids
	trust, err := handoff.NewTrust(bound)
	if err != nil {
		t.Fatalf("handofftest: trust: %v", err)
	}
	w.trust = trust
	return w
}

// In returns a World over the same agents, keys, trust and clock that signs
// in format f, and encodes Handoff objects in the encoding that goes with f
// unless Encoded chose one. Its BadInputs are in f alone.
func (w *World) In(f handoff.Format) *World {
	w.t.Helper()
	if f != handoff.JWS && f != handoff.COSE {
		w.t.Fatalf("handofftest: unknown format %v", f)
	}
	c := *w
	c.format, c.chosen = f, true
	return &c
}

// Encoded returns a World over the same agents, keys, trust and clock that
// encodes Handoff objects in enc, whatever the signed form: for a host
// protocol that carries only one, such as JSON metadata (HC-19: a COSE
// element in a JSON Handoff is base64url text).
func (w *World) Encoded(enc handoff.Encoding) *World {
	w.t.Helper()
	if enc != handoff.JSON && enc != handoff.CBOR {
		w.t.Fatalf("handofftest: unknown encoding %v", enc)
	}
	c := *w
	c.enc = enc
	return &c
}

// With returns a World over the same agents, keys, trust and clock that
// reports setup errors to t: call it in a subtest, since a test may only
// be stopped from its own goroutine.
func (w *World) With(t testing.TB) *World {
	c := *w
	c.t = t
	return &c
}

// Format returns the signed form the World produces.
func (w *World) Format() handoff.Format { return w.format }

// Encoding returns the encoding of the Handoff objects the World encodes:
// the one Encoded chose, else JSON for JWS and CBOR for COSE.
func (w *World) Encoding() handoff.Encoding {
	if w.enc != 0 {
		return w.enc
	}
	if w.format == handoff.COSE {
		return handoff.CBOR
	}
	return handoff.JSON
}

// IDs returns the agents named to NewWorld, in their order.
func (w *World) IDs() []handoff.AgentID { return slices.Clone(w.ids) }

// Clock returns the World's clock, which every agent it makes reads.
func (w *World) Clock() *Clock { return w.clock }

// Now returns the time the World's clock shows.
func (w *World) Now() time.Time { return w.clock.Now() }

// Trust returns the trust configuration binding every agent's key but the
// Outsider's.
func (w *World) Trust() *handoff.Trust { return w.trust }

// TrustDocument returns the World's trust configuration as the JSON
// document keyset.ParseTrust reads: each AgentID, the Outsider's aside,
// mapped to a JWK Set of its public key. It is for services and tools that
// read their trust from a file.
func (w *World) TrustDocument() []byte {
	w.t.Helper()
	doc := map[handoff.AgentID]map[string][]json.RawMessage{}
	for id := range w.keys {
		if id == Outsider {
			continue
		}
		jwk, err := keyset.PublicJWK(w.Signer(id).Key())
		if err != nil {
			w.t.Fatalf("handofftest: JWK of %q: %v", id, err)
		}
		doc[id] = map[string][]json.RawMessage{"keys": {jwk}}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		w.t.Fatalf("handofftest: trust document: %v", err)
	}
	return b
}

// TrustOnly returns a trust configuration binding the keys of ids only.
func (w *World) TrustOnly(ids ...handoff.AgentID) *handoff.Trust {
	w.t.Helper()
	bound := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range ids {
		bound[id] = []handoff.TrustedKey{w.Signer(id).Key()}
	}
	tr, err := handoff.NewTrust(bound)
	if err != nil {
		w.t.Fatalf("handofftest: trust: %v", err)
	}
	return tr
}

// Key returns the private key of id.
func (w *World) Key(id handoff.AgentID) *ecdsa.PrivateKey {
	w.t.Helper()
	k, ok := w.keys[id]
	if !ok {
		w.t.Fatalf("handofftest: no agent %q in this world", id)
	}
	return k
}

// Signer returns a signer over id's key in the World's format.
func (w *World) Signer(id handoff.AgentID) *handoff.Signer {
	w.t.Helper()
	s, err := handoff.NewSigner(w.Key(id), w.format, nil)
	if err != nil {
		w.t.Fatalf("handofftest: signer for %q: %v", id, err)
	}
	return s
}

// Config returns the configuration of an agent for id: its signer, the
// World's trust and clock, every other field at its default; then each mod
// in turn changes it.
func (w *World) Config(id handoff.AgentID, mods ...func(*handoff.Config)) handoff.Config {
	w.t.Helper()
	cfg := handoff.Config{ID: id, Signer: w.Signer(id), Trust: w.trust, Now: w.clock.Now}
	for _, m := range mods {
		if m != nil {
			m(&cfg)
		}
	}
	return cfg
}

// Agent returns a new agent for id made from Config(id, mods...), with
// fresh in-memory stores unless a mod sets them.
func (w *World) Agent(id handoff.AgentID, mods ...func(*handoff.Config)) *handoff.Agent {
	w.t.Helper()
	a, err := handoff.NewAgent(w.Config(id, mods...))
	if err != nil {
		w.t.Fatalf("handofftest: agent %q: %v", id, err)
	}
	return a
}

// Host returns what a host protocol tells a receiver about a message of
// this World: the dialog DefaultDialog.
func (w *World) Host() handoff.Host { return handoff.Host{Dialog: DefaultDialog} }

// Draft returns an unsigned offer from iss to aud with a fresh hop, dialog
// DefaultDialog, issued now by the World's clock and expiring in two
// minutes (TTL).
func (w *World) Draft(iss, aud handoff.AgentID) *handoff.Offer {
	w.t.Helper()
	hop, err := handoff.NewHopID(nil)
	if err != nil {
		w.t.Fatalf("handofftest: hop: %v", err)
	}
	now := handoff.TimeOf(w.clock.Now())
	return &handoff.Offer{Hop: hop, Dialog: DefaultDialog, Iss: iss, Aud: aud, Iat: now,
		Exp: now + handoff.Time(TTL/time.Second)}
}

// Sign signs o with the key of signer, whatever o.Iss names.
func (w *World) Sign(signer handoff.AgentID, o *handoff.Offer) handoff.Signed {
	w.t.Helper()
	s, err := w.Signer(signer).SignOffer(o)
	if err != nil {
		w.t.Fatalf("handofftest: sign: %v", err)
	}
	return s
}

// Offer signs a fresh offer (Draft) from iss to aud, after mod, when not
// nil, has changed it; it is signed by the key of its iss as mod left it.
func (w *World) Offer(iss, aud handoff.AgentID, mod func(*handoff.Offer)) handoff.Signed {
	w.t.Helper()
	o := w.Draft(iss, aud)
	if mod != nil {
		mod(o)
	}
	return w.Sign(o.Iss, o)
}

// Path signs the offers of a delegation path: ids[0] to ids[1], ids[1] to
// ids[2], and so on, each naming the one before it by prev. mod, when not
// nil, changes offer i after its prev is set and before the key of its
// (possibly changed) iss signs it. The last element is the current offer,
// the others its chain, oldest first: pass them to Handoff.
func (w *World) Path(mod func(i int, o *handoff.Offer), ids ...handoff.AgentID) []handoff.Signed {
	w.t.Helper()
	if len(ids) < 2 {
		w.t.Fatal("handofftest: a path needs at least two agents")
	}
	var out []handoff.Signed
	for i := 0; i+1 < len(ids); i++ {
		o := w.Draft(ids[i], ids[i+1])
		if i > 0 {
			d := out[i-1].Digest()
			o.Prev = &d
		}
		if mod != nil {
			mod(i, o)
		}
		out = append(out, w.Sign(o.Iss, o))
	}
	return out
}

// Chain signs a delegation path of n hops (n >= 1) ending at to: relay 0
// to relay 1, ..., relay n-1 to to. The last element is the offer to to,
// the n-1 others its chain, oldest first; the chain is full and every
// element verifies with the World's trust. n may be at most
// MaxChain+2, one chain element over the default limit.
func (w *World) Chain(to handoff.AgentID, n int) []handoff.Signed {
	w.t.Helper()
	if n < 1 || n > relays {
		w.t.Fatalf("handofftest: Chain of %d hops: want 1 to %d", n, relays)
	}
	ids := make([]handoff.AgentID, 0, n+1)
	for i := range n {
		ids = append(ids, Relay(i))
	}
	return w.Path(nil, append(ids, to)...)
}

// Handoff returns the Handoff object whose offer is the last of elems and
// whose chain is the others, oldest first.
func Handoff(elems ...handoff.Signed) *handoff.Handoff {
	h := &handoff.Handoff{Offer: elems[len(elems)-1]}
	if len(elems) > 1 {
		h.Chain = slices.Clone(elems[:len(elems)-1])
	}
	return h
}

// Encode returns the Handoff object of elems (see Handoff) in the World's
// encoding: what a host protocol carries.
func (w *World) Encode(elems ...handoff.Signed) []byte {
	w.t.Helper()
	b, err := Handoff(elems...).Encode(w.Encoding())
	if err != nil {
		w.t.Fatalf("handofftest: encode: %v", err)
	}
	return b
}

// Receive runs a.Receive on data with the World's Host, failing the test
// when the agent's store cannot answer.
func (w *World) Receive(a *handoff.Agent, data []byte) *handoff.Received {
	w.t.Helper()
	in, err := a.Receive(context.Background(), data, w.Host())
	if err != nil {
		w.t.Fatalf("handofftest: Receive: %v", err)
	}
	return in
}
