package handoff

import (
	"context"
	"fmt"
	"slices"

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

// Point 5: every value returned as a copy is deep. Each returned value is
// changed through every mutable part it has, and neither the Received, nor
// the verified-element cache, nor a later receive of a Handoff that shares
// the chain element, nor the offer passed on, sees the change.
func TestCopies_AreDeep(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxOrigin, rxPlanner, rxCoder, rxTester)
		ctx := context.Background()
		val := SHA256([]byte("context")).Val
		decorate := func(_ int, o *Offer) {
			o.Extra = map[string]any{"https://example.com/x": map[string]any{"n": []any{uint64(1), "a"}}}
			o.Obo = &Principal{Sub: "alice", Extra: map[string]any{"k": []any{"v"}}}
			o.Refs = []ContextRef{{Kind: KindDigest, Dig: Digest{Alg: SHA256Alg, Val: slices.Clone(val)}, Proof: []any{"p"}, Extra: map[string]any{"e": []any{"f"}}}}
		}
		elems := w.path(decorate, rxOrigin, rxPlanner, rxCoder)
		coder := w.agent(rxCoder)
		data := encodeHandoff(t, handoffOf(elems...), fe.Encoding)
		in := receive(t, coder, data, Host{})
		require.True(t, in.Accepted(), "%s: %s", in.Reason(), in.Detail())
		want := in.Offer()
		wantLink := in.Links()[0].Offer()

		mutate := func(o *Offer) {
			o.Extra["https://example.com/x"].(map[string]any)["n"].([]any)[1] = "changed"
			o.Obo.Extra["k"].([]any)[0] = "changed"
			o.Refs[0].Dig.Val[0] ^= 0xff
			o.Refs[0].Proof.([]any)[0] = "changed"
			o.Refs[0].Extra["e"].([]any)[0] = "changed"
		}
		mutate(in.Offer())
		mutate(in.Unverified())
		mutate(in.Links()[0].Offer())
		mutate(in.Links()[0].Unverified())
		in.Links()[0].Signed.Octets[0] ^= 0xff
		in.Links()[0].Digest.Val[0] ^= 0xff
		h := in.Handoff()
		h.Chain[0].Octets[0] ^= 0xff
		h.Offer.Octets[0] ^= 0xff
		in.Refs()[0].Ref.Dig.Val[0] ^= 0xff

		assert.Equal(t, want, in.Offer())
		assert.Equal(t, wantLink, in.Links()[0].Offer())
		assert.Equal(t, elems[0], in.Links()[0].Signed)
		assert.Equal(t, elems[0].Digest(), in.Links()[0].Digest)
		assert.Equal(t, elems[0], in.Handoff().Chain[0])
		assert.Equal(t, val, in.Refs()[0].Ref.Dig.Val)

		// A later receive whose chain shares the first element reads it
		// from the verified-element cache: unchanged.
		other := w.path(decorate, rxOrigin, rxPlanner, rxCoder)
		other[0] = elems[0]
		d := elems[0].Digest()
		o := w.draftOffer(rxPlanner, rxCoder)
		decorate(1, o)
		o.Prev = &d
		other[1] = w.signAs(rxPlanner, o)
		in2 := receive(t, coder, encodeHandoff(t, handoffOf(other...), fe.Encoding), Host{})
		require.True(t, in2.Accepted(), "%s: %s", in2.Reason(), in2.Detail())
		assert.Equal(t, wantLink, in2.Links()[0].Offer())

		// The offer passed on carries the octets as received.
		out, err := coder.Offer(ctx, OfferParams{To: rxTester, From: in})
		require.NoError(t, err)
		assert.Equal(t, elems, out.Handoff.Chain)
	})
}

// Point 8: the draft bounds element size (HC-61) and makes a receiver
// ignore members it does not understand (HC-01), so by default no bound on
// shape refuses a value that fits the size bound: an unknown member of 300
// integers in a 1 KiB element, 300 unknown members, or nesting 200 deep
// are accepted, signed and received, in every form. The bounds on shape
// are an opt-in hardening that refuses them.
func TestReceive_HC61_ShapeBoundedBySizeAlone(t *testing.T) {
	ints := make([]any, 300)
	for i := range ints {
		ints[i] = uint64(i % 10)
	}
	many := map[string]any{}
	for i := range 300 {
		many[fmt.Sprintf("m%d", i)] = uint64(0)
	}
	for name, extra := range map[string]map[string]any{
		"array of 300": {"https://example.com/x": ints},
		"300 members":  many,
		"nesting 200":  {"https://example.com/x": nestedArray(200)},
	} {
		eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
			w := newWorld(t, fe.Format, rxPlanner, rxCoder)
			s := w.offer(rxPlanner, rxCoder, func(o *Offer) { o.Extra = extra })
			if name == "array of 300" && fe.Format == COSE {
				require.Less(t, len(s.Octets), 1<<10, "within a 1 KiB element")
			}
			data := encodeHandoff(t, handoffOf(s), fe.Encoding)
			in := receive(t, w.agent(rxCoder), data, Host{})
			require.True(t, in.Accepted(), "%s: %s: %s", name, in.Reason(), in.Detail())
			assert.Len(t, in.Offer().Extra, len(extra), name)

			bounded := w.agent(rxCoder, func(c *Config) { c.Limits = Limits{MaxDepth: 16, MaxMembers: 256} })
			in = receive(t, bounded, data, Host{})
			assert.Equal(t, ReasonBadSignature, in.Reason(), "%s under the opt-in bounds", name)
			assert.ErrorIs(t, in.Err(), ErrMalformed, name)
		})
	}
}
