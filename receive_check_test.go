package handoff

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// HC-30: Received.Check names the check of section 5.1 that decided.
func TestReceive_HC30_CheckNumber(t *testing.T) {
	const a, b, c = AgentID("spiffe://x/a"), AgentID("spiffe://x/b"), AgentID("spiffe://x/c")
	w := newWorld(t, JWS, a, b, c)
	ag := w.agent(b)
	h := func(s Signed, chain ...Signed) []byte {
		return encodeHandoff(t, &Handoff{Offer: s, Chain: chain}, JSON)
	}

	good := w.offer(a, b, nil)
	in := receive(t, ag, h(good), Host{})
	assert.True(t, in.Accepted())
	assert.Equal(t, 0, in.Check)
	assert.Equal(t, 4, receive(t, ag, h(good), Host{}).Check, "retransmission")

	tampered := append([]byte(nil), good.Octets...)
	tampered[len(tampered)-2] ^= 1
	cases := map[string]struct {
		data  []byte
		host  Host
		check int
	}{
		"signature": {h(Signed{Format: JWS, Octets: tampered}), Host{}, 1},
		"audience":  {h(w.offer(a, c, nil)), Host{}, 2},
		"freshness": {h(w.offer(a, b, func(o *Offer) { o.Exp = o.Iat })), Host{}, 3},
		"dialog":    {h(w.offer(a, b, nil)), Host{Dialog: "other"}, 5},
		"chain":     {h(w.offer(a, b, func(o *Offer) { d := SHA256(nil); o.Prev = &d }), good), Host{}, 6},
		"references": {h(w.offer(a, b, func(o *Offer) {
			o.Refs = []ContextRef{{Kind: KindDigest, Dig: SHA256([]byte("x"))}}
		})), Host{}, 7},
	}
	strict := w.agent(b, func(c *Config) { c.Refs = RefsRequired })
	for name, k := range cases {
		in := receive(t, strict, k.data, k.host)
		assert.False(t, in.Accepted(), name)
		assert.Equal(t, k.check, in.Check, "%s: %s", name, in.Reason())
	}
}
