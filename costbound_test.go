package handoff

import (
	"context"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue of bounded cost, point 11. The CDDL's Digest alg is "sha-256" /
// text, so the empty text is an alg like any other this implementation
// does not implement: a reference that uses it is unverifiable and a prev
// that uses it fails the chain check (HC-08), but the offer itself is well
// formed and passes the checks that do not depend on it.
func TestDigest_HC08_EmptyAlgIsUnknownNotMalformed(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxPlanner, rxCoder)
		val := SHA256([]byte("context")).Val
		s := w.offer(rxPlanner, rxCoder, func(o *Offer) {
			o.Refs = []ContextRef{{Kind: KindDigest, Dig: Digest{Alg: "", Val: val}}}
		})
		in := receive(t, w.agent(rxCoder), encodeHandoff(t, handoffOf(s), fe.Encoding), Host{})
		require.True(t, in.Accepted(), "%s: %s", in.Reason(), in.Detail())
		require.Len(t, in.Offer().Refs, 1)
		assert.Equal(t, "", in.Offer().Refs[0].Dig.Alg)
		assert.False(t, in.Offer().Refs[0].Dig.Supported())

		// The same alg in prev: the link cannot be checked, so the chain
		// check fails for it (HC-08), at step 6 and not as bad-signature.
		elems := w.path(func(i int, o *Offer) {
			if i == 1 {
				o.Prev.Alg = ""
			}
		}, rxPlanner, rxCoder, rxPlanner)
		in = receive(t, w.agent(rxPlanner), encodeHandoff(t, handoffOf(elems...), fe.Encoding), Host{})
		assert.Equal(t, CheckChain, in.Check())
		assert.Equal(t, ReasonBrokenChain, in.Reason(), in.Detail())
	})
}

// Point 6: a retransmission is not processed again (HC-38), so its chain,
// which may differ from the accepted delivery's, was never checked. Offer
// refuses it as From; the accepted delivery may still be passed on.
func TestOffer_HC38_FromRetransmissionRefused(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder, rxTester)
	ctx := context.Background()
	coder := w.agent(rxCoder)
	data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxCoder, nil)), JSON)
	first := receive(t, coder, data, Host{})
	require.True(t, first.Accepted())
	again := receive(t, coder, data, Host{})
	require.True(t, again.Retransmission())

	_, err := coder.Offer(ctx, OfferParams{To: rxTester, From: again})
	require.ErrorIs(t, err, ErrArgument)
	assert.Contains(t, err.Error(), "retransmission")

	out, err := coder.Offer(ctx, OfferParams{To: rxTester, From: first})
	require.NoError(t, err)
	assert.Len(t, out.Handoff.Chain, 1)
}
