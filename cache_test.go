package handoff

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/replay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerifiedCache_Bounded(t *testing.T) {
	c := newVerifiedCache(3)
	o := &Offer{Hop: "AAAAAAAAAAAAAAAAAAAAAA"}
	for _, s := range []string{"a", "b", "c"} {
		c.add(digest.SHA256([]byte(s)), o, keyRef{})
	}
	assert.NotNil(t, c.get(digest.SHA256([]byte("a"))))
	c.add(digest.SHA256([]byte("a")), o, keyRef{}) // already held: no change
	c.add(digest.SHA256([]byte("d")), o, keyRef{}) // evicts the oldest, "a"
	assert.Nil(t, c.get(digest.SHA256([]byte("a"))))
	for _, s := range []string{"b", "c", "d"} {
		assert.NotNil(t, c.get(digest.SHA256([]byte(s))), s)
	}
	assert.Equal(t, 3, c.len())
	var off *verifiedCache = newVerifiedCache(-1)
	off.add(digest.SHA256([]byte("x")), o, keyRef{})
	assert.Nil(t, off.get(digest.SHA256([]byte("x"))))
	// The cache holds its own copy: changing the offer added changes
	// nothing cached.
	c.add(digest.SHA256([]byte("e")), o, keyRef{})
	o.Hop = "BBBBBBBBBBBBBBBBBBBBBB"
	assert.Equal(t, HopID("AAAAAAAAAAAAAAAAAAAAAA"), c.get(digest.SHA256([]byte("e"))).Hop)
}

// chainFixture builds a chain of n hops a0 -> a1 -> ... -> an, the last
// offer addressed to the receiver, and returns the receiver's Handoff
// octets. fanout more offers from the same received hop share the chain.
func chainFixture(t testing.TB, f Format, n, fanout int) (*world, AgentID, [][]byte) {
	ids := make([]AgentID, n+2)
	for i := range ids {
		ids[i] = AgentID("spiffe://chain.example/agent/" + strconv.Itoa(i))
	}
	w := newWorld(t, f, ids...)
	ctx := context.Background()
	var in *Received
	for i := 0; i < n; i++ {
		a := w.agent(ids[i])
		p := OfferParams{To: ids[i+1], Dialog: "d", TTL: time.Minute}
		if in != nil {
			p.From, p.Dialog = in, ""
		}
		out, err := a.Offer(ctx, p)
		require.NoError(t, err)
		in = receive(t, w.agent(ids[i+1]), encodeHandoff(t, out.Handoff, JSON), Host{})
		require.True(t, in.Accepted(), in.Detail())
		w.clock.Add(time.Second)
	}
	last := w.agent(ids[n])
	var msgs [][]byte
	for k := 0; k < fanout; k++ {
		out, err := last.Offer(ctx, OfferParams{To: ids[n+1], From: in})
		require.NoError(t, err)
		msgs = append(msgs, encodeHandoff(t, out.Handoff, JSON))
	}
	return w, ids[n+1], msgs
}

// A chain prefix seen before is not verified twice, and the results are
// the same with the cache off.
func TestReceive_VerifiedCacheSameOutcome(t *testing.T) {
	for _, size := range []int{0, -1} {
		w, self, msgs := chainFixture(t, JWS, 4, 3)
		a := w.agent(self, func(c *Config) { c.VerifiedCache = size })
		for _, m := range msgs {
			in := receive(t, a, m, Host{})
			require.True(t, in.Accepted(), in.Detail())
			assert.Equal(t, ChainFull, in.Chain())
			require.Len(t, in.Links(), 4)
			for _, l := range in.Links() {
				assert.True(t, l.Verified)
				assert.NotNil(t, l.Offer())
			}
		}
		if size == 0 {
			assert.Equal(t, 4, a.trust.Load().cache.len(), "each chain element verified once")
		} else {
			assert.Nil(t, a.trust.Load().cache)
		}
	}
}

// An element that did not verify never enters the cache, so a tampered
// copy of a cached element is still refused.
func TestReceive_VerifiedCacheNeverAdmitsTampered(t *testing.T) {
	w, self, msgs := chainFixture(t, JWS, 2, 2)
	a := w.agent(self)
	require.True(t, receive(t, a, msgs[0], Host{}).Accepted())
	h, _, err := ParseHandoff(msgs[1], Limits{})
	require.NoError(t, err)
	bad := append([]byte(nil), h.Chain[0].Octets...)
	bad[len(bad)-3] ^= 0x01
	h.Chain[0] = Signed{Format: JWS, Octets: bad}
	in := receive(t, a, encodeHandoff(t, h, JSON), Host{})
	assert.False(t, in.Accepted())
	assert.Equal(t, reason.BadSignature, in.Reason())
}

// forgetful is a store that remembers nothing, so that a benchmark can
// receive one offer again and again through every check.
type forgetful struct{}

func (forgetful) Remember(_ context.Context, _ replay.Key, rec replay.Record) (replay.Record, bool, error) {
	return rec, true, nil
}
func (forgetful) Get(context.Context, replay.Key) (replay.Record, bool, error) {
	return replay.Record{}, false, nil
}
func (forgetful) Update(context.Context, replay.Key, replay.Record) error      { return nil }
func (forgetful) Close() error                                                 { return nil }
func (forgetful) Untaken(context.Context, time.Time) ([]replay.Untaken, error) { return nil, nil }
func (forgetful) Release(context.Context, replay.Key, []byte) error            { return replay.ErrNotFound }

// BenchmarkReceiveChainCache measures an offer with an 8-element chain
// whose elements were seen before (fan-out, or a long chain through one
// agent), with the cache off (the baseline) and on, in the same run. The
// "x-off" metric is the time as a fraction of the baseline's.
func BenchmarkReceiveChainCache(b *testing.B) {
	var base float64
	for _, c := range []struct {
		name string
		size int
	}{{"off", -1}, {"on", 0}} {
		b.Run(c.name, func(b *testing.B) {
			w, self, msgs := chainFixture(b, COSE, 8, 1)
			a := w.agent(self, func(cfg *Config) { cfg.VerifiedCache = c.size; cfg.Store = forgetful{} })
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				in, err := a.Receive(context.Background(), msgs[0], Host{})
				if err != nil || !in.Accepted() {
					b.Fatal(err, in.Detail())
				}
			}
			per := float64(b.Elapsed()) / float64(b.N)
			if c.size < 0 {
				base = per
			} else if base > 0 {
				b.ReportMetric(per/base, "x-off")
			}
		})
	}
}
