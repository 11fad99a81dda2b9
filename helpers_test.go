package handoff

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"sync"
	"testing"
	"time"

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
