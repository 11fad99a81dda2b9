package handoff

import (
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
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
	assert.Equal(t, CheckNone, in.Check())
	assert.Equal(t, CheckMemory, receive(t, ag, h(good), Host{}).Check(), "retransmission")

	tampered := append([]byte(nil), good.Octets...)
	tampered[len(tampered)-2] ^= 1
	cases := map[string]struct {
		data  []byte
		host  Host
		check Check
	}{
		"signature": {h(Signed{Format: JWS, Octets: tampered}), Host{}, CheckSignature},
		"audience":  {h(w.offer(a, c, nil)), Host{}, CheckAudience},
		"freshness": {h(w.offer(a, b, func(o *Offer) { o.Exp = o.Iat })), Host{}, CheckFreshness},
		"dialog":    {h(w.offer(a, b, nil)), Host{Dialog: "other"}, CheckDialog},
		"chain":     {h(w.offer(a, b, func(o *Offer) { d := digest.SHA256(nil); o.Prev = &d }), good), Host{}, CheckChain},
		"references": {h(w.offer(a, b, func(o *Offer) {
			o.Refs = []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("x"))}}
		})), Host{}, CheckRefs},
	}
	strict := w.agent(b, func(c *Config) { c.Refs = ref.CheckRequired })
	for name, k := range cases {
		in := receive(t, strict, k.data, k.host)
		assert.False(t, in.Accepted(), name)
		assert.Equal(t, k.check, in.Check(), "%s: %s", name, in.Reason())
	}
}

// Check names the checks as the draft numbers them, and says which by name.
func TestCheck_String(t *testing.T) {
	want := []string{"none", "signature", "audience", "freshness", "memory", "dialog", "chain", "references"}
	for i, w := range want {
		assert.Equal(t, w, Check(i).String())
	}
	assert.Equal(t, "Check(9)", Check(9).String())
	assert.Equal(t, 6, int(CheckChain), "step 6 of section 5.1")
}
