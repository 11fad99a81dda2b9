package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
)

// Decoder benchmarks: the single-pass jsontext decoder against the
// encoding/json Token walk it replaced (kept below as the baseline, in
// this file only), on a realistic offer payload and on a JSON Handoff
// object with 16 chain elements plus the 17 payloads inside it. Each
// benchmark times both decoders on the same input in the same loop and
// reports new-ns/op, old-ns/op, the ratio new/old, and the allocations
// per decode of each.
//
//	go test -run '^$' -bench 'BenchmarkDecode' -count 5 .

// benchOfferJSON is an offer as a delegator with context sends it: obo,
// prev, two refs and an extension member.
func benchOfferJSON(tb testing.TB, i int) []byte {
	tb.Helper()
	d := digest.SHA256([]byte("prev" + strconv.Itoa(i)))
	o := &Offer{
		Hop: HopID("q3Zl0v8bVfQmJm2c4bq1W" + strconv.Itoa(i%10)), Dialog: "ctx-7c1e-4a0b-9d55-2f1c8e3b6a71",
		Task: "Refactor the billing module and open a pull request",
		Iss:  "spiffe://a.example/agent/planner", Aud: "spiffe://b.example/agent/coder",
		Iat: 1793000000, Exp: 1793000120,
		Obo:  &Principal{Sub: "user:alice@example.com", Iss: "https://idp.example"},
		Prev: &d,
		Refs: []ref.Ref{
			{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("spec")), Loc: "https://store.example/ctx/spec.md"},
			{Kind: ref.KindSCITTReceipt, Dig: digest.SHA256([]byte("receipt"))},
		},
		Extra: map[string]any{"x-priority": uint64(3)},
	}
	b, err := o.encode(JSON)
	require.NoError(tb, err)
	return b
}

// benchHandoff16 is a JSON Handoff object with 16 chain elements and the
// payloads of its 17 elements. The elements are JWS compact forms of real
// payloads; their signatures are random octets, which decoding never looks
// at.
func benchHandoff16(tb testing.TB) ([]byte, [][]byte) {
	tb.Helper()
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs","typ":"agent-handoff+jwt"}`))
	sig := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, 64))
	var payloads [][]byte
	var elems []string
	for i := range 17 {
		p := benchOfferJSON(tb, i)
		payloads = append(payloads, p)
		elems = append(elems, hdr+"."+base64.RawURLEncoding.EncodeToString(p)+"."+sig)
	}
	h := map[string]any{"offer": elems[16], "chain": elems[:16]}
	b, err := json.Marshal(h)
	require.NoError(tb, err)
	return b, payloads
}

func BenchmarkDecodeJSON_Offer(b *testing.B) {
	p := benchOfferJSON(b, 0)
	lim := Limits{}.withDefaults()
	benchPair(b,
		func() error { _, err := decodeJSON(p, lim); return err },
		func() error { _, err := legacyDecodeJSON(p, lim); return err })
}

// The decoding a receive of a 16-element chain does: the Handoff object,
// then the payload of each of its 17 elements.
func BenchmarkDecodeJSON_Handoff16(b *testing.B) {
	h, payloads := benchHandoff16(b)
	lim := Limits{}.withDefaults()
	plim := lim
	run := func(dec func([]byte, Limits) (map[string]any, error)) func() error {
		return func() error {
			if _, err := dec(h, plim); err != nil {
				return err
			}
			for _, p := range payloads {
				if _, err := dec(p, lim); err != nil {
					return err
				}
			}
			return nil
		}
	}
	benchPair(b, run(decodeJSON), run(legacyDecodeJSON))
}

// CBOR: the exact profile, and the strict one, against the former
// decoder (a copy below), on the same offer.
func BenchmarkDecodeCBOR_Offer(b *testing.B) {
	o, err := decodeOffer(benchOfferJSON(b, 0), JSON, Limits{})
	require.NoError(b, err)
	p, err := o.encode(CBOR)
	require.NoError(b, err)
	lim := Limits{}.withDefaults()
	for _, prof := range []profile{profileExact, profileStrict} {
		b.Run([]string{"exact", "strict"}[prof], func(b *testing.B) {
			benchPair(b,
				func() error { _, err := decodeCBOR(p, lim, prof); return err },
				func() error { _, err := legacyDecodeCBOR(p, lim); return err })
		})
	}
}

// The former CBOR decoder, the baseline of BenchmarkDecodeCBOR_Offer
// only: strict options, a decoder mode built on every call, a
// conversion pass and the re-encoding length check.

func legacyAddMember(seen map[string]bool, k string, n int, lim Limits) error {
	if n >= lim.MaxMembers {
		return malformed("map of more than %d members", lim.MaxMembers)
	}
	if seen[k] {
		return malformed("duplicate member %q", k)
	}
	seen[k] = true
	return nil
}
func legacyCBORDecMode(lim Limits) (cbor.DecMode, error) {
	return cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		UTF8:             cbor.UTF8RejectInvalid,
		MaxNestedLevels:  max(lim.MaxDepth, 4),
		MaxArrayElements: max(lim.MaxMembers, 16),
		MaxMapPairs:      max(lim.MaxMembers, 16),
		IntDec:           cbor.IntDecConvertNone,
		SimpleValues:     cborSimple,
		NaN:              cbor.NaNDecodeForbidden,
		Inf:              cbor.InfDecodeForbidden,
	}.DecMode()
}
func legacyDecodeCBOR(data []byte, lim Limits) (map[string]any, error) {
	dm, err := legacyCBORDecMode(lim)
	if err != nil {
		return nil, fmt.Errorf("handoff: CBOR options: %w", err)
	}
	var raw any
	rest, err := dm.UnmarshalFirst(data, &raw)
	if err != nil {
		return nil, malformed("CBOR: %v", err)
	}
	if len(rest) != 0 {
		return nil, malformed("trailing data after CBOR value")
	}
	v, err := legacyFromCBOR(raw, lim)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("CBOR value is not a map")
	}
	again, err := cborPreferredMode.Marshal(raw)
	if err != nil || len(again) != len(data) {
		return nil, malformed("CBOR head longer than needed (RFC 8949 section 4.2.1 preferred serialization)")
	}
	return m, nil
}
func legacyFromCBOR(v any, lim Limits) (any, error) {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		seen := map[string]bool{}
		for k, e := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, malformed("CBOR map key %v is not a text string", k)
			}
			if err := legacyAddMember(seen, ks, len(m), lim); err != nil {
				return nil, err
			}
			c, err := legacyFromCBOR(e, lim)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			c, err := legacyFromCBOR(e, lim)
			if err != nil {
				return nil, err
			}
			a[i] = c
		}
		return a, nil
	case uint64, int64, string, []byte, bool, nil:
		return t, nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, malformed("CBOR float %v", t)
		}
		return t, nil
	case float32:
		return float64(t), nil
	}
	return nil, malformed("CBOR value of unsupported type %T", v)
}

// benchPair times fresh and base on the same input, interleaved in one
// loop, and reports each one's time and allocations per decode and the
// ratio of the times.
func benchPair(b *testing.B, fresh, base func() error) {
	b.Helper()
	require.NoError(b, fresh())
	require.NoError(b, base())
	allocNew := testing.AllocsPerRun(50, func() { _ = fresh() })
	allocOld := testing.AllocsPerRun(50, func() { _ = base() })
	b.ResetTimer()
	var tNew, tOld time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			s := time.Now()
			_ = base()
			tOld += time.Since(s)
			s = time.Now()
			_ = fresh()
			tNew += time.Since(s)
		} else {
			s := time.Now()
			_ = fresh()
			tNew += time.Since(s)
			s = time.Now()
			_ = base()
			tOld += time.Since(s)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tNew.Nanoseconds())/n, "new-ns/op")
	b.ReportMetric(float64(tOld.Nanoseconds())/n, "old-ns/op")
	b.ReportMetric(float64(tNew)/float64(tOld), "new/old")
	b.ReportMetric(allocNew, "new-allocs/op")
	b.ReportMetric(allocOld, "old-allocs/op")
}

// legacyDecodeJSON is the decoder this package used before jsontext: an
// encoding/json Token walk with its own duplicate check. It is the
// benchmarks' baseline only. (It reads a lone surrogate as U+FFFD, the
// bug the new decoder fixes.)
func legacyDecodeJSON(data []byte, lim Limits) (map[string]any, error) {
	if !utf8.Valid(data) {
		return nil, malformed("JSON is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := legacyValue(dec, lim, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("trailing data after JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("JSON value is not an object")
	}
	return m, nil
}

func legacyValue(dec *json.Decoder, lim Limits, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed("JSON syntax: %v", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= lim.MaxDepth {
			return nil, malformed("nesting deeper than %d", lim.MaxDepth)
		}
		switch t {
		case '{':
			m := map[string]any{}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, malformed("JSON syntax: %v", err)
				}
				k, _ := kt.(string)
				if len(m) >= lim.MaxMembers {
					return nil, malformed("map of more than %d members", lim.MaxMembers)
				}
				if seen[k] {
					return nil, malformed("duplicate member %q", k)
				}
				seen[k] = true
				v, err := legacyValue(dec, lim, depth+1)
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, malformed("JSON syntax: %v", err)
			}
			return m, nil
		case '[':
			a := []any{}
			for dec.More() {
				if len(a) >= lim.MaxMembers {
					return nil, malformed("array of more than %d elements", lim.MaxMembers)
				}
				v, err := legacyValue(dec, lim, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, malformed("JSON syntax: %v", err)
			}
			return a, nil
		}
		return nil, malformed("JSON syntax: unexpected %v", t)
	case json.Number:
		return jsonNumber([]byte(t)), nil
	case string, bool, nil:
		return t, nil
	}
	return nil, malformed("JSON syntax: unexpected token")
}

// The baseline is what it claims to be: it reads the benchmark inputs to
// the same values as the new decoder.
func TestLegacyDecodeJSON_SameValues(t *testing.T) {
	h, payloads := benchHandoff16(t)
	lim := Limits{}.withDefaults()
	for _, in := range append(payloads, h) {
		a, err := decodeJSON(in, lim)
		require.NoError(t, err)
		b, err := legacyDecodeJSON(in, lim)
		require.NoError(t, err)
		require.Equal(t, b, a)
	}
	require.True(t, strings.Contains(string(payloads[0]), `"refs":[`))
}
