package handoff

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withKeys returns a copy of t in which id is bound to keys.
func (t *Trust) withKeys(tb testing.TB, id AgentID, keys ...TrustedKey) *Trust {
	tb.Helper()
	m := map[AgentID][]TrustedKey{}
	for _, other := range t.AgentIDs() {
		m[other] = t.Keys(other)
	}
	m[id] = keys
	n, err := NewTrust(m)
	require.NoError(tb, err)
	return n
}

// A trust swap keeps the cached elements of agents that keep every key
// (HC-21): adding a key drops nothing, and removing one drops only the
// elements of its agent, which are then checked again under the new
// configuration, so that no element counts as verified by a key that is
// no longer trusted.
func TestAgent_SetTrustKeepsOnlyElementsOfKeptKeys(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxOrigin, rxPlanner, rxCoder, rxReceiver)
		a := w.agent(rxReceiver)
		elems := w.path(nil, rxOrigin, rxPlanner, rxCoder, rxReceiver)
		in := receive(t, a, encodeHandoff(t, handoffOf(elems...), JSON), Host{})
		require.True(t, in.Accepted(), in.Detail())
		require.Equal(t, ChainFull, in.Chain())
		require.Equal(t, 2, a.trust.Load().cache.len(), "origin's and planner's elements")

		// A new key for the origin, its old one kept: nothing is dropped.
		added := w.trust.withKeys(t, rxOrigin, w.signers[rxOrigin].Key(), testSigner(t, f).Key())
		require.NoError(t, a.SetTrust(added))
		assert.Equal(t, 2, a.trust.Load().cache.len())

		// The origin's old key is retired: its element leaves the cache,
		// the planner's stays.
		rotated := w.trust.withKeys(t, rxOrigin, testSigner(t, f).Key())
		require.NoError(t, a.SetTrust(rotated))
		ts := a.trust.Load()
		assert.Equal(t, 1, ts.cache.len())
		assert.Nil(t, ts.cache.get(elems[0].Digest()), "an element of the retired key is not reported verified")
		assert.NotNil(t, ts.cache.get(elems[1].Digest()))

		// The same chain under a fresh hop: the origin's element is checked
		// again and no longer verifies.
		again := w.path(nil, rxOrigin, rxPlanner, rxCoder, rxReceiver)
		again[0], again[1] = elems[0], elems[1]
		again[2] = w.signAs(rxCoder, func() *Offer {
			o := w.draftOffer(rxCoder, rxReceiver)
			d := elems[1].Digest()
			o.Prev = &d
			return o
		}())
		in = receive(t, a, encodeHandoff(t, handoffOf(again...), JSON), Host{})
		require.True(t, in.Accepted(), in.Detail())
		assert.Equal(t, []bool{false, true}, links(t, in))
		assert.Equal(t, 1, a.trust.Load().cache.len(), "nothing verified by the retired key entered the cache")
	})
}

// Concurrent swaps and receives: whatever the interleaving, the cache of
// the final configuration holds no element of an agent whose key it
// dropped (run with -race).
func TestAgent_SetTrustConcurrent(t *testing.T) {
	w := newWorld(t, JWS, rxOrigin, rxPlanner, rxCoder, rxReceiver)
	a := w.agent(rxReceiver)
	rotated := w.trust.withKeys(t, rxOrigin, testSigner(t, JWS).Key())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			elems := w.path(nil, rxOrigin, rxPlanner, rxCoder, rxReceiver)
			in, err := a.Receive(t.Context(), encodeHandoff(t, handoffOf(elems...), JSON), Host{})
			if assert.NoError(t, err) {
				assert.True(t, in.Accepted(), in.Detail())
			}
			if i%2 == 0 {
				assert.NoError(t, a.SetTrust(w.trust))
			}
		})
	}
	wg.Wait()
	require.NoError(t, a.SetTrust(rotated))
	ts := a.trust.Load()
	for i := range ts.cache.shards {
		for _, o := range ts.cache.shards[i].set {
			assert.NotEqual(t, rxOrigin, o.offer.Iss, "an element of the dropped key survived the swap")
		}
	}
}

// Withhold refuses an agent's messages as untrusted-key with the reason
// given, and leaves the other agents' keys in place.
func TestTrust_Withhold(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder, rxReceiver)
	stale := w.trust.Withhold(map[AgentID]string{rxPlanner: "its keys are stale"})
	why, ok := stale.Withheld(rxPlanner)
	assert.True(t, ok)
	assert.Equal(t, "its keys are stale", why)
	assert.Empty(t, stale.Keys(rxPlanner))
	assert.Len(t, stale.Keys(rxCoder), 1)
	_, ok = w.trust.Withheld(rxPlanner)
	assert.False(t, ok, "the original is unchanged")

	a := w.agent(rxReceiver, func(c *Config) { c.Trust = stale })
	in := receive(t, a, encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON), Host{})
	assert.Equal(t, reason.UntrustedKey, in.Reason())
	assert.Contains(t, in.Detail(), "its keys are stale")
	in = receive(t, a, encodeHandoff(t, handoffOf(w.offer(rxCoder, rxReceiver, nil)), JSON), Host{})
	assert.True(t, in.Accepted(), in.Detail())
}

// OnUnknownKey hears of a kid that names no key of its iss and of an iss
// without keys, and of nothing else.
func TestTrust_OnUnknownKey(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxPlanner, rxReceiver)
		stranger := testSigner(t, f) // signs as rxPlanner with a key not bound to it
		var mu sync.Mutex
		var heard []string
		trust := w.trust.OnUnknownKey(func(iss AgentID, kid string) {
			mu.Lock()
			heard = append(heard, fmt.Sprintf("%s %t", iss, kid != ""))
			mu.Unlock()
		})
		a := w.agent(rxReceiver, func(c *Config) { c.Trust = trust })
		in := receive(t, a, encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON), Host{})
		require.True(t, in.Accepted(), in.Detail())
		assert.Empty(t, heard, "a known kid is not reported")

		o := w.draftOffer(rxPlanner, rxReceiver)
		forged, err := stranger.SignOffer(o)
		require.NoError(t, err)
		in = receive(t, a, encodeHandoff(t, handoffOf(forged), JSON), Host{})
		assert.Equal(t, reason.UntrustedKey, in.Reason())
		assert.Equal(t, []string{string(rxPlanner) + " true"}, heard)

		w.signers[rxOther] = stranger
		in = receive(t, a, encodeHandoff(t, handoffOf(w.offer(rxOther, rxReceiver, nil)), JSON), Host{})
		assert.Equal(t, reason.UntrustedKey, in.Reason())
		assert.Equal(t, []string{string(rxPlanner) + " true", string(rxOther) + " true"}, heard)
	})
}

// BenchmarkSetTrust measures a trust swap over a full default cache: the
// carry of every entry (an agent that kept its keys) and the drop of every
// entry (an agent that lost one), against the baseline of starting an
// empty cache, as SetTrust did before it carried entries over.
func BenchmarkSetTrust(b *testing.B) {
	w := newWorld(b, JWS, rxOrigin, rxPlanner, rxReceiver)
	rotated := w.trust.withKeys(b, rxOrigin, testSigner(b, JWS).Key())
	fill := func() *trustState {
		ts := &trustState{trust: w.trust, cache: newVerifiedCache(defaultVerifiedCache)}
		o := &Offer{Iss: rxOrigin, Aud: rxPlanner, Dialog: "d"}
		key := w.trust.keys[rxOrigin][0].ref()
		for i := range defaultVerifiedCache {
			ts.cache.add(digest.SHA256(fmt.Appendf(nil, "%d", i)), o, key)
		}
		return ts
	}
	full := fill()
	b.Run("baseline=new-cache", func(b *testing.B) {
		for b.Loop() {
			_ = &trustState{trust: w.trust, cache: newVerifiedCache(defaultVerifiedCache)}
		}
	})
	b.Run("carry-all", func(b *testing.B) {
		for b.Loop() {
			next := &trustState{trust: w.trust, cache: newVerifiedCache(defaultVerifiedCache)}
			full.cache.carry(w.trust, next.cache)
		}
	})
	b.Run("drop-all", func(b *testing.B) {
		for b.Loop() {
			next := &trustState{trust: rotated, cache: newVerifiedCache(defaultVerifiedCache)}
			full.cache.carry(rotated, next.cache)
		}
	})
}

// Each cached element records the key that verified it, so a swap drops
// exactly the elements of the keys it removes: an agent with two keys that
// retires one keeps, in the cache, the elements its other key verified
// (HC-21: no element counts as verified by a key no longer bound to iss).
func TestAgent_SetTrustDropsOnlyElementsOfRemovedKeys(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxOrigin, rxPlanner, rxReceiver)
		second := testSigner(t, f)
		both := w.trust.withKeys(t, rxOrigin, w.signers[rxOrigin].Key(), second.Key())
		a := w.agent(rxReceiver, func(c *Config) { c.Trust = both })

		// Two chains whose first element is the origin's, signed with each
		// of its keys in turn.
		var firsts []Signed
		for _, s := range []*Signer{w.signers[rxOrigin], second} {
			o := w.draftOffer(rxOrigin, rxPlanner)
			first, err := s.SignOffer(o)
			require.NoError(t, err)
			d := first.Digest()
			next := w.draftOffer(rxPlanner, rxReceiver)
			next.Prev = &d
			in := receive(t, a, encodeHandoff(t, handoffOf(first, w.signAs(rxPlanner, next)), JSON), Host{})
			require.True(t, in.Accepted(), in.Detail())
			firsts = append(firsts, first)
		}
		require.Equal(t, 2, a.trust.Load().cache.len())

		// The second key is retired, the first kept.
		require.NoError(t, a.SetTrust(w.trust.withKeys(t, rxOrigin, w.signers[rxOrigin].Key())))
		ts := a.trust.Load()
		assert.NotNil(t, ts.cache.get(firsts[0].Digest()), "verified by the key that stays")
		assert.Nil(t, ts.cache.get(firsts[1].Digest()), "verified by the key retired")
	})
}

// An agent rotates its own key while it runs (SetTrust with both keys,
// SetSigner with the new one, SetTrust without the old): what it signed
// before keeps verifying while the receiver trusts the old key, what it
// signs after carries the new one, and neither call accepts a signer that
// the trust in effect does not bind to the agent (ErrConfig).
func TestAgent_SetSignerRotatesItsOwnKey(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		ctx := context.Background()
		w := newWorld(t, f, rxPlanner, rxCoder)
		p, c := w.agent(rxPlanner), w.agent(rxCoder)
		oldKey, next := w.signers[rxPlanner], testSigner(t, f)

		before, err := p.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d"})
		require.NoError(t, err)

		// Not yet trusted: refused, and the old key still signs.
		require.ErrorIs(t, p.SetSigner(next), ErrConfig)
		require.ErrorIs(t, p.SetSigner(nil), ErrConfig)

		both := w.trust.withKeys(t, rxPlanner, oldKey.Key(), next.Key())
		require.NoError(t, p.SetTrust(both))
		require.NoError(t, c.SetTrust(both))
		require.NoError(t, p.SetSigner(next))
		after, err := p.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d"})
		require.NoError(t, err)
		for _, out := range []*Outgoing{before, after} {
			in := receive(t, c, encodeHandoff(t, out.Handoff, JSON), Host{Dialog: "d"})
			require.True(t, in.Accepted(), in.Detail())
		}
		// The new key signed the second offer: a receiver that trusts only
		// the old key refuses it.
		oldOnly := w.trust.withKeys(t, rxPlanner, oldKey.Key())
		c2 := w.agent(rxCoder, func(cfg *Config) { cfg.Trust = oldOnly })
		in := receive(t, c2, encodeHandoff(t, after.Handoff, JSON), Host{Dialog: "d"})
		require.False(t, in.Accepted())
		require.Equal(t, reason.UntrustedKey, in.Reason(), "its kid names a key the receiver does not trust")

		// The old key retired: the planner's trust must keep the key it
		// signs with, so dropping the new one is refused.
		require.ErrorIs(t, p.SetTrust(oldOnly), ErrConfig)
		newOnly := w.trust.withKeys(t, rxPlanner, next.Key())
		require.NoError(t, p.SetTrust(newOnly))
		require.ErrorIs(t, p.SetSigner(oldKey), ErrConfig, "a retired key is not taken back")
	})
}

// SetSigner while offers are signed: each offer verifies under the key
// that signed it, with no data race (run with -race).
func TestAgent_SetSignerWhileSigning(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	keys := []*Signer{w.signers[rxPlanner], testSigner(t, JWS), testSigner(t, JWS)}
	all := w.trust.withKeys(t, rxPlanner, keys[0].Key(), keys[1].Key(), keys[2].Key())
	p := w.agent(rxPlanner, func(cfg *Config) { cfg.Trust = all })
	c := w.agent(rxCoder, func(cfg *Config) { cfg.Trust = all })
	var wg sync.WaitGroup
	outs := make(chan *Outgoing, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 16; i++ {
				out, err := p.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d"})
				if !assert.NoError(t, err) {
					return
				}
				outs <- out
			}
		}()
	}
	for i := 0; i < 30; i++ {
		require.NoError(t, p.SetSigner(keys[i%3]))
	}
	wg.Wait()
	close(outs)
	n := 0
	for out := range outs {
		in := receive(t, c, encodeHandoff(t, out.Handoff, JSON), Host{Dialog: "d"})
		require.True(t, in.Accepted(), in.Detail())
		n++
	}
	require.Equal(t, 64, n)
}
