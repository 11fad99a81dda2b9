package handoff

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentproto/handoff/reason"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A COSE element carried in JSON is base64url text (HC-19). Receive
// leaves that text undecoded until step 6, where an element verified
// before is found by the SHA-256 of its text and takes the octets the
// cache holds (verifiedCache.addText, lookupChain). These tests hold that
// such a receive decides and reports exactly what one that decodes every
// element does.

// textEntries counts the cache's entries keyed by base64url text.
func textEntries(c *verifiedCache) int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		for _, e := range sh.set {
			if e.text {
				n++
			}
		}
		sh.mu.RUnlock()
	}
	return n
}

// cborChainJSON returns a JSON Handoff object whose chain is elems[:n] and
// whose offer is elems[n], with element at of the chain replaced by text.
func cborChainJSON(t *testing.T, elems []Signed, at int, text string) []byte {
	t.Helper()
	c := make([]string, len(elems)-1)
	for i, e := range elems[:len(elems)-1] {
		c[i] = base64.RawURLEncoding.EncodeToString(e.Octets)
	}
	if at >= 0 {
		c[at] = text
	}
	data, err := json.Marshal(map[string]any{"offer": base64.RawURLEncoding.EncodeToString(elems[len(elems)-1].Octets), "chain": c})
	require.NoError(t, err)
	return data
}

func TestReceive_SeenCOSEFoundByText(t *testing.T) {
	ids := benchIDs(4)
	w := newWorld(t, COSE, ids...)
	elems := w.path(nil, ids...)
	ctx := context.Background()
	data := encodeHandoff(t, handoffOf(elems...), JSON)
	want, _, err := ParseHandoff(data, Limits{})
	require.NoError(t, err)

	a := w.agent(ids[5], func(c *Config) { c.Store = forgetful{} })
	cache := a.trust.Load().cache
	first, err := a.Receive(ctx, data, Host{})
	require.NoError(t, err)
	require.True(t, first.Accepted(), first.Detail())
	assert.Equal(t, 4, cache.len(), "each element held by its handoff digest")
	assert.Equal(t, 4, textEntries(cache), "and by its text")

	again, err := a.Receive(ctx, data, Host{})
	require.NoError(t, err)
	require.True(t, again.Accepted(), again.Detail())
	assert.Equal(t, want, again.Handoff())
	assert.Equal(t, first.Links(), again.Links())
	for i, l := range again.Links() {
		assert.True(t, l.Verified)
		assert.Equal(t, elems[i], l.Signed)
		assert.Equal(t, elems[i].Digest(), l.Digest)
	}
	assert.Equal(t, 4, cache.len())
	assert.Equal(t, 4, textEntries(cache))

	// The cache's octets are its own: the Handoff and the links returned
	// are copies, and changing them changes no later receive.
	again.Handoff().Chain[1].Octets[0] ^= 0xff
	again.Links()[1].Signed.Octets[0] ^= 0xff
	third, err := a.Receive(ctx, data, Host{})
	require.NoError(t, err)
	require.True(t, third.Accepted(), third.Detail())
	assert.Equal(t, want, third.Handoff())

	// A lookup by handoff digest never returns an entry by text, nor the
	// other way round.
	text := []byte(base64.RawURLEncoding.EncodeToString(elems[0].Octets))
	assert.Nil(t, cache.get(Signed{Octets: text}.Digest()))
	_, ok := cache.getText([32]byte(elems[0].Digest().Val))
	assert.False(t, ok)
}

// An element verified before as CBOR carries it (a byte string) is found
// by its handoff digest when JSON carries it, and then held by its text.
func TestReceive_SeenCOSEFromCBORThenText(t *testing.T) {
	ids := benchIDs(3)
	w := newWorld(t, COSE, ids...)
	elems := w.path(nil, ids...)
	ctx := context.Background()
	a := w.agent(ids[4], func(c *Config) { c.Store = forgetful{} })
	cache := a.trust.Load().cache
	in, err := a.Receive(ctx, encodeHandoff(t, handoffOf(elems...), CBOR), Host{})
	require.NoError(t, err)
	require.True(t, in.Accepted(), in.Detail())
	assert.Equal(t, 0, textEntries(cache))
	data := encodeHandoff(t, handoffOf(elems...), JSON)
	for range 2 {
		in, err := a.Receive(ctx, data, Host{})
		require.NoError(t, err)
		require.True(t, in.Accepted(), in.Detail())
		want, _, err := ParseHandoff(data, Limits{})
		require.NoError(t, err)
		assert.Equal(t, want, in.Handoff())
		assert.Equal(t, 3, cache.len())
		assert.Equal(t, 3, textEntries(cache))
	}
}

// TestReceive_DeferredCOSETextRefused: a chain element that is text
// without a period but no base64url COSE_Sign1, or one whose text differs
// from a verified element's by one character, is refused at step 6 as a
// receiver that never saw the chain refuses it (for a form, with the
// failure ParseHandoff names), by a receiver that verified the good
// elements before and by one without a cache; Received.Handoff is what
// ParseHandoff returns, whichever check ended the receive.
func TestReceive_DeferredCOSETextRefused(t *testing.T) {
	ids := benchIDs(3)
	w := newWorld(t, COSE, ids...)
	elems := w.path(nil, ids...)
	good := encodeHandoff(t, handoffOf(elems...), JSON)
	ctx := context.Background()
	text := base64.RawURLEncoding.EncodeToString(elems[1].Octets)
	flip := func(s string, i int) string {
		c := "A"
		if s[i] == 'A' {
			c = "B"
		}
		return s[:i] + c + s[i+1:]
	}
	bad := map[string]string{
		"not base64url":           "ab$c",
		"padded":                  text + "=",
		"empty":                   "",
		"stray bits":              text[:len(text)-1] + "_",
		"not a COSE_Sign1":        base64.RawURLEncoding.EncodeToString([]byte("not a tagged message")),
		"a byte of the signature": flip(text, len(text)-3),
		"a byte of the payload":   flip(text, len(text)/2),
		"too long":                base64.RawURLEncoding.EncodeToString(append([]byte{0xd2}, strings.Repeat("x", 70000)...)),
	}
	for _, cache := range []int{0, -1} {
		a := w.agent(ids[4], func(c *Config) { c.Store = forgetful{}; c.VerifiedCache = cache })
		in, err := a.Receive(ctx, good, Host{})
		require.NoError(t, err)
		require.True(t, in.Accepted(), in.Detail())
		for name, b := range bad {
			for _, at := range []int{0, 1, 2} {
				t.Run(fmt.Sprintf("%s/at=%d/cache=%d", name, at, cache), func(t *testing.T) {
					data := cborChainJSON(t, elems, at, b)
					parsed, _, err := ParseHandoff(data, a.lim)
					if err != nil { // over the Handoff's own size bound
						in, rerr := a.Receive(ctx, data, Host{})
						require.NoError(t, rerr)
						assert.Equal(t, CheckSignature, in.Check())
						return
					}
					// The outcome of a receiver that never saw the chain.
					fresh := w.agent(ids[4], func(c *Config) { c.Store = forgetful{}; c.VerifiedCache = -1 })
					ref, err := fresh.Receive(ctx, data, Host{})
					require.NoError(t, err)
					in, err := a.Receive(ctx, data, Host{})
					require.NoError(t, err)
					require.False(t, in.Accepted())
					assert.Equal(t, CheckChain, in.Check())
					assert.Equal(t, ref.Reason(), in.Reason())
					assert.Equal(t, ref.Detail(), in.Detail())
					if wantErr := parsed.chainErrOf(); wantErr != nil {
						assert.Equal(t, reason.BadSignature, in.Reason())
						var ce *chainError
						require.ErrorAs(t, in.Err(), &ce)
						assert.Equal(t, wantErr.Error(), ce.Error())
					}
					assert.Equal(t, parsed, in.Handoff())

					// Refused before step 6 (another audience).
					other := w.agent(ids[0], func(c *Config) { c.Store = forgetful{}; c.VerifiedCache = cache })
					in, err = other.Receive(ctx, data, Host{})
					require.NoError(t, err)
					assert.Equal(t, CheckAudience, in.Check())
					assert.Equal(t, parsed, in.Handoff())

					// The good chain is still found whole afterwards.
					in, err = a.Receive(ctx, good, Host{})
					require.NoError(t, err)
					require.True(t, in.Accepted(), in.Detail())
				})
			}
		}
	}
}
