package handoff

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/fxamacker/cbor/v2"
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
		val := digest.SHA256([]byte("context")).Val
		s := w.offer(rxPlanner, rxCoder, func(o *Offer) {
			o.Refs = []ref.Ref{{Kind: ref.KindDigest, Dig: digest.Digest{Alg: "", Val: val}}}
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
		assert.Equal(t, reason.BrokenChain, in.Reason(), in.Detail())
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
		val := digest.SHA256([]byte("context")).Val
		decorate := func(_ int, o *Offer) {
			o.Extra = map[string]any{"https://example.com/x": map[string]any{"n": []any{uint64(1), "a"}}}
			o.Obo = &Principal{Sub: "alice", Extra: map[string]any{"k": []any{"v"}}}
			o.Refs = []ref.Ref{{Kind: ref.KindDigest, Dig: digest.Digest{Alg: digest.SHA256Alg, Val: slices.Clone(val)}, Proof: []any{"p"}, Extra: map[string]any{"e": []any{"f"}}}}
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
			assert.Equal(t, reason.BadSignature, in.Reason(), "%s under the opt-in bounds", name)
			assert.ErrorIs(t, in.Err(), ErrMalformed, name)
		})
	}
}

// ---- What a stranger's octets cost (SECURITY.md, "What input costs") ----

// costCase is an input that a receiver refuses at step 1, its signature
// broken, beside a baseline of the same size whose bulk is one string.
type costCase struct {
	name             string
	hostile, control []byte
}

// breakSignature changes the last octet of an element's signature, so
// that the element keeps its form and fails at the signature check.
func breakSignature(t testing.TB, s Signed) Signed {
	t.Helper()
	b := bytes.Clone(s.Octets)
	if s.Format == JWS {
		i := len(b) - 2 // a character whose 6 bits are all used
		b[i] = map[bool]byte{true: 'B', false: 'A'}[b[i] == 'A']
	} else {
		b[len(b)-1] ^= 0x01
	}
	return Signed{Format: s.Format, Octets: b}
}

// emptyMaps is n empty maps in an array: the value that costs a generic
// decoder the most per octet.
func emptyMaps(n int) []any {
	a := make([]any, n)
	for i := range a {
		a[i] = map[string]any{}
	}
	return a
}

// costCases builds, for each place an unknown sender controls, a hostile
// input and its control of the same size (within a few octets).
func costCases(t testing.TB) []costCase {
	t.Helper()
	var out []costCase
	for _, fe := range allFormatEncodings {
		w := newWorld(t, fe.Format, rxPlanner, rxCoder)
		plain := breakSignature(t, w.offer(rxPlanner, rxCoder, nil))

		// An unknown member of the Handoff object, 450 KB.
		size := 450 << 10
		per := map[Encoding]int{JSON: 3, CBOR: 1}[fe.Encoding] // "{}," or 0xa0
		hostile := encodeHandoff(t, &Handoff{Offer: plain, Extra: map[string]any{"x": emptyMaps(size / per)}}, fe.Encoding)
		var bulk any = strings.Repeat("a", len(hostile)-len(encodeHandoff(t, &Handoff{Offer: plain, Extra: map[string]any{"x": ""}}, fe.Encoding)))
		control := encodeHandoff(t, &Handoff{Offer: plain, Extra: map[string]any{"x": bulk}}, fe.Encoding)
		out = append(out, costCase{fe.String() + "/handoff-member", hostile, control})

		// An unknown member of the offer's payload, filling the element.
		n := 3800 // an element within the 16 KiB bound, as the control
		if fe.Format == COSE {
			n = 15000
		}
		off := breakSignature(t, w.offer(rxPlanner, rxCoder, func(o *Offer) { o.Extra = map[string]any{"x": emptyMaps(n)} }))
		short := w.offer(rxPlanner, rxCoder, func(o *Offer) { o.Extra = map[string]any{"x": ""} })
		pad := (len(off.Octets) - len(short.Octets)) * 3 / 4
		if fe.Format == COSE {
			pad = len(off.Octets) - len(short.Octets) - 2
		}
		ctl := breakSignature(t, w.offer(rxPlanner, rxCoder, func(o *Offer) { o.Extra = map[string]any{"x": strings.Repeat("a", pad)} }))
		out = append(out, costCase{fe.String() + "/payload-member",
			encodeHandoff(t, handoffOf(off), fe.Encoding), encodeHandoff(t, handoffOf(ctl), fe.Encoding)})

		if fe.Format == COSE {
			// The unprotected header of the COSE element.
			hostile := withUnprotected(t, plain, bytes.Repeat([]byte{0xa0}, 15000))
			control := withUnprotected(t, plain, append([]byte{0x59, 0x3a, 0x95}, bytes.Repeat([]byte{'a'}, 15000-3)...))
			out = append(out, costCase{fe.String() + "/unprotected-header",
				encodeHandoff(t, handoffOf(hostile), fe.Encoding), encodeHandoff(t, handoffOf(control), fe.Encoding)})
		}
	}
	return out
}

// withUnprotected returns a COSE element whose unprotected header is
// {-70000: value}, value being the array of the given encoded items (or
// one byte string when it starts with 0x59).
func withUnprotected(t testing.TB, s Signed, items []byte) Signed {
	t.Helper()
	var tag cbor.RawTag
	require.NoError(t, cbor.Unmarshal(s.Octets, &tag))
	var elems []cbor.RawMessage
	require.NoError(t, cbor.Unmarshal(tag.Content, &elems))
	value := items
	if items[0] != 0x59 {
		value = append([]byte{0x99, byte(15000 >> 8), byte(15000 & 0xff)}, items...)
	}
	unpro := append([]byte{0xa1, 0x3a, 0x00, 0x01, 0x11, 0x6f}, value...) // -70000
	msg := []byte{0xd2, 0x84}
	msg = append(msg, elems[0]...)
	msg = append(msg, unpro...)
	msg = append(msg, elems[2]...)
	msg = append(msg, elems[3]...)
	return Signed{Format: COSE, Octets: msg}
}

// allocated returns the octets fn allocates, on average over runs calls.
func allocated(runs int, fn func()) float64 {
	var before, after runtime.MemStats
	fn()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// Before a signature verifies, what an input costs in memory is a small
// multiple of its size: for every input refused at step 1, whatever its
// shape, at most 4 times its size, and the hostile shape at most twice
// what the same-size string costs (an allocation bound, measured in
// octets, not a timing).
func TestCost_RefusedAtStep1IsBounded(t *testing.T) {
	for _, c := range costCases(t) {
		t.Run(c.name, func(t *testing.T) {
			require.InDelta(t, len(c.control), len(c.hostile), float64(len(c.hostile))/50, "the control is the hostile input's size")
			w := newWorld(t, JWS, rxPlanner, rxCoder)
			a := w.agent(rxCoder)
			recv := func(data []byte) func() {
				return func() {
					in, err := a.Receive(context.Background(), data, Host{})
					if err != nil || in.Check() != CheckSignature {
						t.Fatalf("want a refusal at step 1, got %v %v %s", err, in.Check(), in.Detail())
					}
				}
			}
			_ = w
			hostile, control := allocated(5, recv(c.hostile)), allocated(5, recv(c.control))
			t.Logf("%d octets: hostile allocates %.2fx its size, the control %.2fx", len(c.hostile), hostile/float64(len(c.hostile)), control/float64(len(c.control)))
			assert.LessOrEqual(t, hostile, 4*float64(len(c.hostile))+16<<10, "allocation at most 4x the input")
			assert.LessOrEqual(t, hostile, 2*control+16<<10, "at most twice the same-size string's")
		})
	}
}

// BenchmarkRefusedAtStep1 reports, for each input of costCases, the time
// of its refusal against the refusal of the same-size string (x-string),
// and its allocation as a multiple of its size (alloc-x-size).
func BenchmarkRefusedAtStep1(b *testing.B) {
	for _, c := range costCases(b) {
		b.Run(c.name, func(b *testing.B) {
			w := newWorld(b, JWS, rxPlanner, rxCoder)
			a := w.agent(rxCoder)
			recv := func(data []byte) func() {
				return func() {
					if in, err := a.Receive(context.Background(), data, Host{}); err != nil || in.Check() != CheckSignature {
						b.Fatalf("want a refusal at step 1, got %v", err)
					}
				}
			}
			h := recv(c.hostile)
			b.ReportAllocs()
			for b.Loop() {
				h()
			}
			b.StopTimer()
			m := medians(benchRounds, h, recv(c.control))
			b.ReportMetric(m[0]/m[1], "x-string")
			b.ReportMetric(allocated(5, h)/float64(len(c.hostile)), "alloc-x-size")
		})
	}
}

// FuzzReceiveCost holds Receive to the cost bound before trust: for any
// input refused at step 1, what its receive allocates is at most 4 times
// the input's size, plus a fixed 16 KiB for what every receive allocates
// whatever its input (decoders, the result, its error). The least of three
// runs is taken (receiveCost). Its committed corpus holds issue 35's
// shapes at a smaller scale; FuzzReceiveShapes searches over shapes.
func FuzzReceiveCost(f *testing.F) {
	fx := fuzzFixture(f)
	for _, b := range fx.handoffs {
		f.Add(b)
		f.Add(append(bytes.Clone(b[:len(b)-1]), b[len(b)-1]^1))
	}
	for _, c := range costCases(f) {
		if len(c.hostile) < 32<<10 {
			f.Add(c.hostile)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, check := receiveCost(t, shapeReceiver(t), data)
		if check != CheckSignature {
			return
		}
		require.LessOrEqual(t, got, costBound(len(data)),
			"an input of %d octets refused at step 1 allocated %.0f octets", len(data), got)
	})
}
