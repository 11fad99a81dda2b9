package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const validOfferJSON = `{"v":1,"type":"offer","hop":"q3Zl0v8bVfQmJm2c4bq1Ww","dialog":"ctx-7c1e",` +
	`"iss":"spiffe://a.example/agent/planner","aud":"spiffe://b.example/agent/coder",` +
	`"iat":1793000000,"exp":1793000120}`

func TestDecodeOffer_JSONValid(t *testing.T) {
	o, err := decodeOffer([]byte(validOfferJSON), JSON, Limits{})
	require.NoError(t, err)
	assert.Equal(t, HopID("q3Zl0v8bVfQmJm2c4bq1Ww"), o.Hop)
	assert.Equal(t, Time(1793000120), o.Exp)
	assert.Nil(t, o.Extra)
}

// HC-01: unknown members are ignored but kept.
func TestDecodeOffer_HC01_UnknownMembersKept(t *testing.T) {
	in := strings.Replace(validOfferJSON, `"v":1`, `"v":1,"x-ext":{"a":[1,"b"]}`, 1)
	o, err := decodeOffer([]byte(in), JSON, Limits{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"a": []any{uint64(1), "b"}}, o.Extra["x-ext"])

	// and survive an encode/decode round trip in both encodings
	for _, enc := range []Encoding{JSON, CBOR} {
		var b []byte
		if enc == JSON {
			b, err = o.encode(JSON)
		} else {
			b, err = o.encode(CBOR)
		}
		require.NoError(t, err)
		o2, err := decodeOffer(b, enc, Limits{})
		require.NoError(t, err, enc)
		assert.Equal(t, o, o2, enc)
	}
}

func replaceMember(name, value string) string {
	i := strings.Index(validOfferJSON, `"`+name+`":`)
	if i < 0 {
		panic(name)
	}
	j := i + len(name) + 3
	k := j
	depth := 0
	for ; k < len(validOfferJSON); k++ {
		c := validOfferJSON[k]
		if c == '{' || c == '[' {
			depth++
		}
		if c == '}' || c == ']' {
			if depth == 0 {
				break
			}
			depth--
		}
		if c == ',' && depth == 0 {
			break
		}
	}
	return validOfferJSON[:j] + value + validOfferJSON[k:]
}

// HC-12 and section 2: a table of hostile and wrong JSON payloads, each a
// typed error, none a panic.
func TestDecodeOffer_JSONHostile(t *testing.T) {
	cases := map[string]string{
		"empty":                ``,
		"not an object":        `[1]`,
		"truncated":            validOfferJSON[:len(validOfferJSON)-5],
		"trailing data":        validOfferJSON + `{}`,
		"trailing garbage":     validOfferJSON + `x`,
		"duplicate member":     strings.Replace(validOfferJSON, `"v":1`, `"v":1,"v":1`, 1),
		"duplicate via escape": strings.Replace(validOfferJSON, `"v":1`, `"v":1,"\u0076":1`, 1),
		"lone high surrogate":  replaceMember("aud", `"spiffe://b.example/agent/coder\ud800"`),
		"lone low surrogate":   replaceMember("aud", `"spiffe://b.example/agent/coder\udc00"`),
		"reversed surrogates":  replaceMember("iss", `"x\udc00\ud800"`),
		"surrogate then text":  replaceMember("dialog", `"\ud83dx"`),
		"surrogate in name":    strings.Replace(validOfferJSON, `"v":1`, `"v":1,"x\ud800":1`, 1),
		"surrogate nested":     strings.Replace(validOfferJSON, `"v":1`, `"v":1,"x":{"y":["\udfff"]}`, 1),
		"surrogate nested key": strings.Replace(validOfferJSON, `"v":1`, `"v":1,"x":[{"\udbff":1}]`, 1),
		"nested duplicate":     strings.Replace(validOfferJSON, `"v":1`, `"v":1,"x":{"a":1,"\u0061":2}`, 1),
		"iat 2^64":             replaceMember("iat", `18446744073709551616`),
		"iat -0":               replaceMember("iat", `-0`),
		"iat 1e0":              replaceMember("iat", `1e0`),
		"case-variant only":    strings.Replace(validOfferJSON, `"iss"`, `"Iss"`, 1),
		"invalid UTF-8":        strings.Replace(validOfferJSON, `ctx-7c1e`, "ctx-\xff", 1),
		"v 2":                  replaceMember("v", `2`),
		"v text":               replaceMember("v", `"1"`),
		"v float":              replaceMember("v", `1.0`),
		"type status":          replaceMember("type", `"status"`),
		"hop short":            replaceMember("hop", `"abc"`),
		"hop bad char":         replaceMember("hop", `"q3Zl0v8bVfQmJm2c4bq1W+"`),
		"hop 65 chars":         replaceMember("hop", `"`+strings.Repeat("a", 65)+`"`),
		"iat float":            replaceMember("iat", `1793000000.0`),
		"iat negative":         replaceMember("iat", `-1`),
		"iat exponent":         replaceMember("iat", `1.793e9`),
		"iat exponent integer": replaceMember("iat", `1793e6`),
		"iat huge":             replaceMember("iat", `18446744073709551616`),
		"iat text":             replaceMember("iat", `"1793000000"`),
		"iss number":           replaceMember("iss", `7`),
		"iss empty":            replaceMember("iss", `""`),
		"aud null":             replaceMember("aud", `null`),
		"missing dialog":       strings.Replace(validOfferJSON, `"dialog":"ctx-7c1e",`, ``, 1),
		"digest open":          strings.Replace(validOfferJSON, `"v":1`, `"v":1,"prev":{"alg":"sha-256","val":"M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg","x":1}`, 1),
		"digest short":         strings.Replace(validOfferJSON, `"v":1`, `"v":1,"prev":{"alg":"sha-256","val":"M-OyKnHL"}`, 1),
		"digest padded":        strings.Replace(validOfferJSON, `"v":1`, `"v":1,"prev":{"alg":"sha-256","val":"M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg="}`, 1),
		"digest non-canonical": strings.Replace(validOfferJSON, `"v":1`, `"v":1,"prev":{"alg":"sha-256","val":"M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmh"}`, 1),
		"digest std alphabet":  strings.Replace(validOfferJSON, `"v":1`, `"v":1,"prev":{"alg":"sha-256","val":"M+OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg"}`, 1),
		"digest HC-07 short":   strings.Replace(validOfferJSON, `"v":1`, `"v":1,"prev":{"alg":"sha-1","val":"M-OyKnHLAGKpiZKw7sNqAsNKmtf"}`, 1),
		"refs empty":           strings.Replace(validOfferJSON, `"v":1`, `"v":1,"refs":[]`, 1),
		"ref kind HC-10":       strings.Replace(validOfferJSON, `"v":1`, `"v":1,"refs":[{"kind":"blob","dig":{"alg":"sha-256","val":"M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg"}}]`, 1),
		"obo without sub":      strings.Replace(validOfferJSON, `"v":1`, `"v":1,"obo":{"iss":"x"}`, 1),
		"bare string":          `"offer"`,
		"NaN":                  replaceMember("iat", `NaN`),
		"single quotes":        strings.ReplaceAll(validOfferJSON, `"`, `'`),
		"comment":              `/*x*/` + validOfferJSON,
		"BOM":                  "\ufeff" + validOfferJSON,
		"exp missing":          strings.Replace(validOfferJSON, `,"exp":1793000120`, ``, 1),
		"hop missing":          strings.Replace(validOfferJSON, `"hop":"q3Zl0v8bVfQmJm2c4bq1Ww",`, ``, 1),
		"type missing":         strings.Replace(validOfferJSON, `"type":"offer",`, ``, 1),
		"v missing":            strings.Replace(validOfferJSON, `"v":1,`, ``, 1),
		"oversize":             strings.Replace(validOfferJSON, `"v":1`, `"v":1,"pad":"`+strings.Repeat("a", defaultMaxElementSize)+`"`, 1),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := decodeOffer([]byte(in), JSON, Limits{})
			require.Error(t, err)
			assert.Nil(t, o)
			if name == "oversize" {
				assert.ErrorIs(t, err, ErrTooLarge)
			} else {
				assert.ErrorIs(t, err, ErrMalformed)
			}
		})
	}
}

// HC-01: a name that differs only in case from a defined member is another
// member, which a receiver MUST ignore: it is kept in Extra, never read as
// the defined one, in payloads and in the Handoff object, JSON and CBOR.
// caseVariant finds it for the strict profile.
func TestDecodeOffer_HC01_CaseVariantsIgnored(t *testing.T) {
	in := strings.Replace(validOfferJSON, `"v":1`, `"v":1,"ISS":"x","Task":"y"`, 1)
	o, err := decodeOffer([]byte(in), JSON, Limits{})
	require.NoError(t, err)
	assert.Equal(t, AgentID("spiffe://a.example/agent/planner"), o.Iss)
	assert.Empty(t, o.Task)
	assert.Equal(t, map[string]any{"ISS": "x", "Task": "y"}, o.Extra)
	_, of, found := caseVariant(o.Extra, offerMembers)
	assert.True(t, found)
	assert.Contains(t, []string{"iss", "task"}, of)
	_, _, found = caseVariant(map[string]any{"x-note": 1, "iss": "a"}, offerMembers)
	assert.False(t, found)

	c := cborWithMember(t, validOfferCBOR(t), "ISS", "x")
	o2, err := decodeOffer(c, CBOR, Limits{})
	require.NoError(t, err)
	assert.Equal(t, o.Iss, o2.Iss)
	assert.Equal(t, "x", o2.Extra["ISS"])

	offer := string(draftHandoff(t).Offer.Octets)
	h, _, err := ParseHandoff([]byte(`{"offer":"`+offer+`","Offer":"x","Chain":1}`), Limits{})
	require.NoError(t, err)
	assert.Equal(t, offer, string(h.Offer.Octets))
	assert.Empty(t, h.Chain)
	assert.Equal(t, map[string]any{"Offer": "x", "Chain": uint64(1)}, decodedExtra(t, h))
}

// decodedExtra decodes the members a Handoff object keeps undecoded.
func decodedExtra(t testing.TB, h *Handoff) map[string]any {
	t.Helper()
	if h.Extra == nil {
		return nil
	}
	m := map[string]any{}
	for k, v := range h.Extra {
		var err error
		switch raw := v.(type) {
		case json.RawMessage:
			m[k], err = decodeJSONItem(raw)
		case cbor.RawMessage:
			m[k], err = decodeCBORItem(raw)
		default:
			t.Fatalf("Extra[%q] is %T, not kept undecoded", k, v)
		}
		require.NoError(t, err, k)
	}
	return m
}

// HC-01: extension members are names like any other: two that differ only
// in case are distinct and both kept, and a map in any key order decodes.
func TestDecodeOffer_HC01_DistinctExtensionNames(t *testing.T) {
	in := strings.Replace(validOfferJSON, `"v":1`, `"v":1,"x-note":1,"X-Note":2`, 1)
	o, err := decodeOffer([]byte(in), JSON, Limits{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"x-note": uint64(1), "X-Note": uint64(2)}, o.Extra)
}

// CBOR payloads need shortest heads (preferred serialization), not sorted
// keys: the draft asks for no deterministic encoding.
func TestDecodeOffer_CBORAnyKeyOrder(t *testing.T) {
	valid := validOfferCBOR(t)
	em, err := cbor.EncOptions{Sort: cbor.SortNone}.EncMode()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, cbor.Unmarshal(valid, &m))
	// Try encodings until one is out of deterministic order.
	for i := 0; i < 50; i++ {
		b, err := em.Marshal(m)
		require.NoError(t, err)
		o, err := decodeOffer(b, CBOR, Limits{})
		require.NoError(t, err)
		assert.Equal(t, HopID("q3Zl0v8bVfQmJm2c4bq1Ww"), o.Hop)
		if !bytes.Equal(b, valid) {
			return
		}
	}
	t.Fatal("no unsorted encoding produced")
}

func manyMembers(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(`,"m` + strconv.Itoa(i) + `":0`)
	}
	return b.String()
}

func validOfferCBOR(t *testing.T) []byte {
	o, err := decodeOffer([]byte(validOfferJSON), JSON, Limits{})
	require.NoError(t, err)
	b, err := o.encode(CBOR)
	require.NoError(t, err)
	return b
}

func TestDecodeOffer_CBORRoundTrip(t *testing.T) {
	b := validOfferCBOR(t)
	o, err := decodeOffer(b, CBOR, Limits{})
	require.NoError(t, err)
	again, err := o.encode(CBOR)
	require.NoError(t, err)
	assert.Equal(t, b, again, "decode -> encode gives the same octets")
}

// Hostile CBOR payloads: each a typed error. The rows are what RFC 8949
// makes invalid or not well-formed, or what the CDDL does not allow.
func TestDecodeOffer_CBORHostile(t *testing.T) {
	valid := validOfferCBOR(t)
	mustHex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	withMember := func(key string, value any) []byte { return cborWithMember(t, valid, key, value) }

	// Duplicate key: bump the map count and append "v": 1 again.
	dup := append([]byte{valid[0] + 1}, valid[1:]...)
	dup = append(dup, 0x61, 'v', 0x01)
	// The same key twice in an indefinite-length map.
	indefDup := append(append([]byte{0xbf}, valid[1:]...), 0x61, 'v', 0x01, 0xff)

	cases := map[string][]byte{
		"empty":                   {},
		"truncated":               valid[:len(valid)-3],
		"trailing byte":           append(append([]byte(nil), valid...), 0x00),
		"not a map":               mustHex("83010203"),
		"duplicate key":           dup,
		"duplicate key indef map": indefDup,
		"nested duplicate key":    withMemberRaw(t, valid, "x", mustHex("a2010102")),
		"nested duplicate NaN":    withMemberRaw(t, valid, "x", mustHex("a2f97e0001fb7ff8000000000000")),
		"tagged map":              append([]byte{0xd8, 0x20}, valid...),
		"self-described map":      append([]byte{0xd9, 0xd9, 0xf7}, valid...),
		"top-level integer key":   append(append([]byte{valid[0] + 1}, valid[1:]...), 0x01, 0x01),
		"top-level bytes key":     append(append([]byte{valid[0] + 1}, valid[1:]...), 0x41, 'x', 0x01),
		"float time":              withMember("iat", 1793000000.5),
		"negative time":           withMember("exp", -5),
		"bignum time":             withMember("exp", cbor.Tag{Number: 2, Content: []byte{0x6a, 0xde, 0xb4, 0x78}}),
		"tagged time":             withMember("exp", cbor.Tag{Number: 1, Content: uint64(1793000120)}),
		"v as text":               withMember("v", "1"),
		"byte string hop":         withMember("hop", []byte("q3Zl0v8bVfQmJm2c4bq1Ww")),
		"declared length huge":    mustHex("a1617a5bffffffffffffff00"),
		"invalid UTF-8":           mustHex("a16176" + "62ff00"),
		"invalid UTF-8 nested":    withMemberRaw(t, valid, "x", mustHex("81a16178"+"62c328")),
		"invalid UTF-8 indef":     withMemberRaw(t, valid, "x", mustHex("7f61c361a8ff")),
		"huge array header":       mustHex("a1617a9bffffffffffffffff"),
		"reserved simple 24 < 32": withMemberRaw(t, valid, "x", mustHex("f810")),
		"reserved ai 28":          withMemberRaw(t, valid, "x", mustHex("1c")),
		"lone break":              withMemberRaw(t, valid, "x", mustHex("ff")),
		"indefinite integer":      withMemberRaw(t, valid, "x", mustHex("1f")),
		"bignum of text":          withMemberRaw(t, valid, "x", mustHex("c26178")),
		"indef text of bytes":     withMemberRaw(t, valid, "x", mustHex("7f4101ff")),
		"array key":               withMemberRaw(t, valid, "x", mustHex("a1810101")),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			for _, p := range []profile{profileExact, profileStrict} {
				_, err := decodeCBOR(in, Limits{}.withDefaults(), p)
				if err == nil { // the codec may pass it; the model must refuse
					o, err := decodeOffer(in, CBOR, Limits{})
					require.Error(t, err)
					assert.Nil(t, o)
				}
			}
			o, err := decodeOffer(in, CBOR, Limits{})
			require.Error(t, err)
			assert.Nil(t, o)
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
}

// cborWithMember returns p, a CBOR map in this package's encoding, with
// one member more, encoded by hand in deterministic order.
func cborWithMember(t *testing.T, p []byte, key string, value any) []byte {
	var m map[string]any
	require.NoError(t, cbor.Unmarshal(p, &m))
	m[key] = value
	b, err := cborEncMode.Marshal(m)
	require.NoError(t, err)
	return b
}

// withMemberRaw appends the member key: raw (CBOR octets as given) to p, a
// definite-length map of fewer than 23 members.
func withMemberRaw(t *testing.T, p []byte, key string, raw []byte) []byte {
	require.Less(t, p[0], byte(0xb7))
	out := append([]byte{p[0] + 1}, p[1:]...)
	k, err := cbor.Marshal(key)
	require.NoError(t, err)
	return append(append(out, k...), raw...)
}

// HC-01, RFC 8949: every valid CBOR value is accepted in an unknown member,
// read into the value model that codec.go documents, and kept: the
// re-encoded payload decodes to the same offer. The strict profile refuses
// each one but the plain control.
func TestDecodeOffer_HC01_CBORUnusualValuesKept(t *testing.T) {
	valid := validOfferCBOR(t)
	mustHex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	bigNeg, _ := new(big.Int).SetString("-18446744073709551616", 10)
	cases := map[string]struct {
		raw    string
		want   any
		strict bool // accepted by the strict profile too
	}{
		"control":                         {"01", uint64(1), true},
		"tag 32 URI":                      {"d8207168747470733a2f2f782e6578616d706c65", cbor.Tag{Number: 32, Content: "https://x.example"}, false},
		"tag 1 epoch time":                {"c11a6adeb478", cbor.Tag{Number: 1, Content: uint64(1792980088)}, false},
		"tag 1 beyond time.Time":          {"c11bffffffffffffffff", cbor.Tag{Number: 1, Content: uint64(math.MaxUint64)}, false},
		"tag 0 RFC 3339":                  {"c074323032362d31312d33305431323a30303a30305a", cbor.Tag{Number: 0, Content: "2026-11-30T12:00:00Z"}, false},
		"nested tag 0":                    {"d82581c074323032362d31312d33305431323a30303a30305a", cbor.Tag{Number: 37, Content: []any{cbor.Tag{Number: 0, Content: "2026-11-30T12:00:00Z"}}}, false},
		"tag 0 in a text map in an array": {"81a16161c074323032362d31312d33305431323a30303a30305a", []any{map[string]any{"a": cbor.Tag{Number: 0, Content: "2026-11-30T12:00:00Z"}}}, false},
		"tag 1 in a text map":             {"a16161c11a6adeb478", map[string]any{"a": cbor.Tag{Number: 1, Content: uint64(1792980088)}}, false},
		"tag 0 in a map":                  {"a101c074323032362d31312d33305431323a30303a30305a", map[any]any{uint64(1): cbor.Tag{Number: 0, Content: "2026-11-30T12:00:00Z"}}, false},
		"NaN":                             {"f97e00", math.NaN(), false},
		"+Inf":                            {"f97c00", math.Inf(1), false},
		"-Inf":                            {"fbfff0000000000000", math.Inf(-1), false},
		"float16":                         {"f93e00", 1.5, true},
		"float32":                         {"fa3fc00000", 1.5, false},
		"float64":                         {"fb3ff8000000000000", 1.5, false},
		"float64 exact":                   {"fb3ff199999999999a", 1.1, true},
		"integer keys":                    {"a20102206178", map[any]any{uint64(1): uint64(2), int64(-1): "x"}, false},
		"bytes key":                       {"a1420102f5", map[any]any{cbor.ByteString(""): true}, false},
		"text and integer keys":           {"a2617801 0102", map[any]any{"x": uint64(1), uint64(1): uint64(2)}, false},
		"negative beyond int64":           {"3bffffffffffffffff", bigNeg, false},
		"bignum positive":                 {"c249010000000000000000", new(big.Int).Lsh(big.NewInt(1), 64), false},
		"bignum small":                    {"c24101", big.NewInt(1), false},
		"bignum negative":                 {"c34100", big.NewInt(-1), false},
		"simple 16":                       {"f0", cbor.SimpleValue(16), false},
		"simple 255":                      {"f8ff", cbor.SimpleValue(255), false},
		"undefined":                       {"f7", nil, false},
		"null":                            {"f6", nil, true},
		"indefinite array":                {"9f0102ff", []any{uint64(1), uint64(2)}, false},
		"indefinite map":                  {"bf617801ff", map[string]any{"x": uint64(1)}, false},
		"indefinite text":                 {"7f61616162ff", "ab", false},
		"indefinite bytes":                {"5f4101420203ff", []byte{1, 2, 3}, false},
		"non-minimal integer":             {"1b0000000000000001", uint64(1), false},
		"non-minimal text":                {"7800", "", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			in := withMemberRaw(t, valid, "x-ext", mustHex(strings.ReplaceAll(c.raw, " ", "")))
			o, err := decodeOffer(in, CBOR, Limits{})
			require.NoError(t, err)
			got := o.Extra["x-ext"]
			if c.want != nil || name == "undefined" || name == "null" {
				assertSameValue(t, c.want, got)
			}
			again, err := o.encode(CBOR)
			require.NoError(t, err)
			o2, err := decodeOffer(again, CBOR, Limits{})
			require.NoError(t, err, "%x", again)
			assertSameValue(t, o, o2)
			_, err = decodeCBOR(in, Limits{}.withDefaults(), profileStrict)
			if c.strict {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrMalformed, "strict profile")
			}
			// The same value inside every kind of container decodes and
			// survives a round trip too.
			raw := mustHex(strings.ReplaceAll(c.raw, " ", ""))
			for wrap, prefix := range map[string]string{"array": "82f6", "text map": "a1616b", "integer map": "a10c",
				"tag": "d825", "indefinite array": "9f", "array in text map": "a1616b81"} {
				inner := append(mustHex(prefix), raw...)
				if wrap == "indefinite array" {
					inner = append(inner, 0xff)
				}
				o, err := decodeOffer(withMemberRaw(t, valid, "x-ext", inner), CBOR, Limits{})
				require.NoError(t, err, wrap)
				again, err := o.encode(CBOR)
				require.NoError(t, err, wrap)
				o2, err := decodeOffer(again, CBOR, Limits{})
				require.NoError(t, err, wrap)
				assertSameValue(t, o, o2)
			}
		})
	}
}

// The strict profile refuses a head longer than needed anywhere; the exact
// profile reads the same value from it (RFC 8949 section 4.1: preferred
// serialization is a choice of the protocol, and the draft makes none).
func TestDecodeCBOR_StrictProfileHeads(t *testing.T) {
	valid := validOfferCBOR(t)
	i := strings.Index(string(valid), "\x61v\x01")
	require.GreaterOrEqual(t, i, 0)
	nonMinimal := append(append(append([]byte(nil), valid[:i+2]...), 0x18, 0x01), valid[i+3:]...)
	longMap := append([]byte{0xb8, valid[0] & 0x1f}, valid[1:]...)
	indef := append(append([]byte{0xbf}, valid[1:]...), 0xff)
	want, err := decodeCBOR(valid, Limits{}.withDefaults(), profileStrict)
	require.NoError(t, err)
	for name, in := range map[string][]byte{"integer head": nonMinimal, "map head": longMap, "indefinite map": indef} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeCBOR(in, Limits{}.withDefaults(), profileExact)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			_, err = decodeCBOR(in, Limits{}.withDefaults(), profileStrict)
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
}

// HC-12, point "Time = uint": every uint64 is a Time in CBOR; in JSON every
// integer literal that parses exactly, up to 2^64-1. Past it, or written
// any other way, it is not.
func TestDecodeOffer_HC12_TimeBounds(t *testing.T) {
	for _, c := range []struct {
		json string
		want Time
	}{
		{"0", 0}, {"9007199254740991", 1<<53 - 1}, {"9007199254740992", 1 << 53},
		{"9223372036854775808", 1 << 63}, {"18446744073709551615", math.MaxUint64},
	} {
		o, err := decodeOffer([]byte(replaceMember("exp", c.json)), JSON, Limits{})
		require.NoError(t, err, c.json)
		assert.Equal(t, c.want, o.Exp)
		b, err := o.encode(CBOR)
		require.NoError(t, err)
		o2, err := decodeOffer(b, CBOR, Limits{})
		require.NoError(t, err)
		assert.Equal(t, c.want, o2.Exp, "CBOR uint")
		j, err := o.encode(JSON)
		require.NoError(t, err)
		assert.Contains(t, string(j), `"exp":`+c.json)
	}
	for _, bad := range []string{"18446744073709551616", "1e3", "10.0", "-0", "-1", "0.5", "18446744073709551615.0"} {
		_, err := decodeOffer([]byte(replaceMember("exp", bad)), JSON, Limits{})
		assert.ErrorIs(t, err, ErrMalformed, bad)
	}
	assert.Equal(t, time.Unix(1<<62, 0).UTC(), Time(math.MaxUint64).Std(), "Std saturates")
}

// Lone surrogates are refused wherever they stand, and a valid pair is
// read as its character: two distinct names never compare equal (RFC 7493
// section 2.1, RFC 8259 section 8.2).
func TestDecodeJSON_HC01_Surrogates(t *testing.T) {
	lim := Limits{}.withDefaults()
	m, err := decodeJSON([]byte(`{"a":"x\ud83d\ude00","\ud83d\ude00":1}`), lim)
	require.NoError(t, err)
	assert.Equal(t, "x\U0001F600", m["a"])
	assert.Equal(t, uint64(1), m["\U0001F600"])
	for _, in := range []string{
		`{"a":"x\udc00"}`, `{"a":"\ud800"}`, `{"\ud800":1}`, `{"a\udc00b":1}`,
		`{"a":["\udc00"]}`, `{"a":{"b":"\ud800\ud800"}}`, `{"a":"\ud800\u0041"}`,
	} {
		_, err := decodeJSON([]byte(in), lim)
		assert.ErrorIs(t, err, ErrMalformed, in)
	}
	// The bug this replaces: "x\udc00" read as "x\uFFFD" matched a name
	// that ends in U+FFFD.
	_, err = decodeOffer([]byte(replaceMember("aud", `"spiffe://b.example/agent/coder\udc00"`)), JSON, Limits{})
	assert.ErrorIs(t, err, ErrMalformed)
	o, err := decodeOffer([]byte(replaceMember("aud", `"spiffe://b.example/agent/coder\ufffd"`)), JSON, Limits{})
	require.NoError(t, err)
	assert.Equal(t, AgentID("spiffe://b.example/agent/coder\uFFFD"), o.Aud)
}

// Names are compared after unescaping (RFC 8259 section 8.3): one name
// written two ways is a duplicate, at every level; names that differ only
// in case are two names.
func TestDecodeJSON_DuplicateNames(t *testing.T) {
	lim := Limits{}.withDefaults()
	for _, in := range []string{
		`{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"x":{"ab":1,"a\u0062":2}}`,
		`{"x":[{"\/":1,"/":2}]}`, `{"é":1,"\u00e9":2}`, `{"a":1,"a":1}`,
	} {
		_, err := decodeJSON([]byte(in), lim)
		assert.ErrorIs(t, err, ErrMalformed, in)
	}
	m, err := decodeJSON([]byte(`{"a":1,"A":2,"e\u0301":3,"é":4}`), lim)
	require.NoError(t, err)
	assert.Len(t, m, 4, "case variants and other normalisation forms are distinct names")
}

// The JSON value model: integers that parse exactly are uint64 or int64,
// every other number is kept as written; bounds hold.
func TestDecodeJSON_ValueModel(t *testing.T) {
	lim := Limits{MaxDepth: 16, MaxMembers: 256}.withDefaults() // the opt-in bounds
	m, err := decodeJSON([]byte(` {"u":18446744073709551615,"i":-9223372036854775808,"f":1.50,"e":1E2,`+
		`"z":-0,"o":-9223372036854775809,"b":true,"n":null,"s":"\u00e9\n","a":[],"m":{}} `), lim)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"u": uint64(math.MaxUint64), "i": int64(math.MinInt64), "f": json.Number("1.50"), "e": json.Number("1E2"),
		"z": json.Number("-0"), "o": json.Number("-9223372036854775809"), "b": true, "n": nil,
		"s": "é\n", "a": []any{}, "m": map[string]any{},
	}, m)
	for name, in := range map[string]string{
		"depth":     strings.Repeat(`{"a":`, lim.MaxDepth+1) + "1" + strings.Repeat("}", lim.MaxDepth+1),
		"array":     `{"a":[` + strings.Repeat("0,", lim.MaxMembers) + `0]}`,
		"two":       `{}{}`,
		"open":      `{"a":1`,
		"top array": `[]`,
		"top null":  `null`,
		"lone":      `{"a"}`,
		"comma":     `{"a":1,}`,
	} {
		_, err := decodeJSON([]byte(in), lim)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	_, err = decodeJSON([]byte(strings.Repeat(`{"a":`, lim.MaxDepth-1)+"1"+strings.Repeat("}", lim.MaxDepth-1)), lim)
	assert.NoError(t, err, "depth at the bound")
}

// CBOR values that JSON cannot express are an error when encoding to JSON,
// never silently changed.
func TestToJSONValue_NoJSONForm(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), map[any]any{uint64(1): "x"}, cbor.Tag{Number: 32, Content: "x"}, cbor.SimpleValue(16)} {
		_, err := toJSONValue(map[string]any{"x": []any{v}})
		assert.ErrorIs(t, err, ErrMalformed, "%v", v)
	}
	v, err := toJSONValue(map[string]any{"b": big.NewInt(-5), "y": []byte{1}})
	require.NoError(t, err)
	b, err := marshalJSON(v)
	require.NoError(t, err)
	assert.Equal(t, `{"b":-5,"y":"AQ"}`, string(b))
}

// assertSameValue is assert.Equal where NaN equals NaN: the value model
// holds CBOR NaNs, which reflect.DeepEqual never finds equal.
func assertSameValue(t testing.TB, want, got any) {
	t.Helper()
	if !sameValue(reflect.ValueOf(want), reflect.ValueOf(got)) {
		assert.Equal(t, want, got) // reports the difference
		t.FailNow()
	}
}

func sameValue(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y || (math.IsNaN(x) && math.IsNaN(y))
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Kind() == reflect.Slice && a.IsNil() != b.IsNil() {
			return false
		}
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !sameValue(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.String:
		return a.String() == b.String()
	}
	return false
}

func deep(n int) any {
	var v any = 1
	for i := 0; i < n; i++ {
		v = []any{v}
	}
	return v
}

func TestDecodeStatus_Draft00Payload(t *testing.T) {
	st, err := decodeStatus(readDraft(t, "status-payload.json"), JSON, Limits{})
	require.NoError(t, err)
	assert.Equal(t, state.Accepted, st.State)
	assert.Equal(t, "kJIcudVNmFFwbYKTXNO3mqC3e9dQSWVXDNbamGeoP18", st.Offer.B64())
	// A status is not an offer and the reverse (type check).
	_, err = decodeOffer(readDraft(t, "status-payload.json"), JSON, Limits{})
	assert.ErrorIs(t, err, ErrMalformed)
	_, err = decodeStatus([]byte(validOfferJSON), JSON, Limits{})
	assert.ErrorIs(t, err, ErrMalformed)
}

// HC-19: the Handoff object in JSON and CBOR, with mixed chains, keeps
// element octets exactly.
func TestHandoff_HC19_MixedChainRoundTrip(t *testing.T) {
	h := draftHandoff(t)
	cose := Signed{Format: COSE, Octets: []byte{0xd2, 0x84, 0x40, 0xa0, 0x40, 0x40}}
	mixed := &Handoff{Offer: h.Offer, Chain: []Signed{cose, h.Chain[0]}, Extra: map[string]any{"note": "x"}}
	for _, enc := range []Encoding{JSON, CBOR} {
		b, err := mixed.Encode(enc)
		require.NoError(t, err)
		back, got, err := ParseHandoff(b, Limits{})
		require.NoError(t, err, enc)
		assert.Equal(t, enc, got)
		assert.Equal(t, mixed.Extra, decodedExtra(t, back), enc)
		assert.Equal(t, mixed.Chain, back.Chain, enc)
		assert.Equal(t, mixed.Offer, back.Offer, enc)
		again, err := back.Encode(enc)
		require.NoError(t, err)
		assert.Equal(t, b, again)
	}
}

func TestParseHandoff_Hostile(t *testing.T) {
	offer := string(draftHandoff(t).Offer.Octets)
	cases := map[string]struct {
		in  string
		err error
	}{
		"empty":            {``, ErrMalformed},
		"no offer":         {`{"chain":["` + offer + `"]}`, ErrMalformed},
		"offer number":     {`{"offer":1}`, ErrMalformed},
		"cose not tagged":  {`{"offer":"hEChQKBAQA"}`, ErrMalformed},
		"bad base64":       {`{"offer":"!!"}`, ErrMalformed},
		"two dots only":    {`{"offer":"a.b"}`, ErrMalformed},
		"duplicate offer":  {`{"offer":"` + offer + `","offer":"` + offer + `"}`, ErrMalformed},
		"oversize":         {`{"offer":"` + strings.Repeat("a", defaultMaxHandoffSize) + `"}`, ErrTooLarge},
		"oversize element": {`{"offer":"` + strings.Repeat("a", defaultMaxElementSize) + `.a.a"}`, ErrTooLarge},
		"trailing":         {`{"offer":"` + offer + `"} {}`, ErrMalformed},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h, _, err := ParseHandoff([]byte(c.in), Limits{})
			require.Error(t, err)
			assert.Nil(t, h)
			assert.ErrorIs(t, err, c.err)
		})
	}
}

// HC-01: a member name that differs from a defined one only in case is an
// unknown member: ignored and kept by default, refused by the strict
// profile.
func TestDecode_HC01_CaseVariantsKeptUnlessStrict(t *testing.T) {
	p := strings.Replace(validOfferJSON, `"v":1`, `"v":1,"ISS":"x"`, 1)
	o, err := decodeOffer([]byte(p), JSON, Limits{})
	require.NoError(t, err)
	assert.Equal(t, "x", o.Extra["ISS"])
	assert.NotEqual(t, AgentID("x"), o.Iss)
	_, err = decodeOffer([]byte(p), JSON, Limits{Strict: true})
	assert.ErrorIs(t, err, ErrMalformed)

	offer := string(draftHandoff(t).Offer.Octets)
	h, _, err := ParseHandoff([]byte(`{"offer":"`+offer+`","Offer":"x","Chain":[1]}`), Limits{})
	require.NoError(t, err)
	assert.Equal(t, offer, string(h.Offer.Octets))
	assert.Contains(t, h.Extra, "Chain")
	assert.Nil(t, h.Chain)
	_, _, err = ParseHandoff([]byte(`{"offer":"`+offer+`","Offer":"x"}`), Limits{Strict: true})
	assert.ErrorIs(t, err, ErrMalformed)
}

// Section 5.1 order: a chain member that is not a list of signed handoffs
// does not spoil the Handoff; it is reported at step 6.
func TestParseHandoff_ChainFormAtStep6(t *testing.T) {
	offer := string(draftHandoff(t).Offer.Octets)
	for name, in := range map[string]string{
		"empty chain":     `{"offer":"` + offer + `","chain":[]}`,
		"chain not array": `{"offer":"` + offer + `","chain":"x"}`,
		"element number":  `{"offer":"` + offer + `","chain":[1]}`,
		"element garbage": `{"offer":"` + offer + `","chain":["!!"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			h, _, err := ParseHandoff([]byte(in), Limits{})
			require.NoError(t, err)
			assert.Equal(t, offer, string(h.Offer.Octets))
			var ce *chainError
			require.ErrorAs(t, h.chainErrOf(), &ce)
			assert.Equal(t, reason.BadSignature, ce.Reason)
			assert.ErrorIs(t, h.chainErrOf(), ErrMalformed)
		})
	}
}

// HC-01 in the Handoff object: unknown members with unusual but valid CBOR
// values are kept and written back; as JSON they have no form, and saying
// so is an error, not a silent change.
func TestParseHandoff_HC01_CBORUnusualExtraKept(t *testing.T) {
	b, err := (&Handoff{Offer: draftHandoff(t).Offer}).Encode(CBOR)
	require.NoError(t, err)
	require.Equal(t, byte(0xa1), b[0])
	extra, err := hex.DecodeString("6178f97e00" + "6179d82081a10102" + "617a3bffffffffffffffff")
	require.NoError(t, err)
	in := append(append([]byte{0xa4}, b[1:]...), extra...)
	h, enc, err := ParseHandoff(in, Limits{})
	require.NoError(t, err)
	assert.Equal(t, CBOR, enc)
	x := decodedExtra(t, h)
	assert.True(t, math.IsNaN(x["x"].(float64)))
	assert.Equal(t, cbor.Tag{Number: 32, Content: []any{map[any]any{uint64(1): uint64(2)}}}, x["y"])
	assert.IsType(t, &big.Int{}, x["z"])
	assert.Equal(t, cbor.RawMessage(extra[2:5]), h.Extra["x"], "kept as the octets received")
	again, err := h.Encode(CBOR)
	require.NoError(t, err)
	h2, _, err := ParseHandoff(again, Limits{})
	require.NoError(t, err)
	assertSameValue(t, h, h2)
	_, err = h.Encode(JSON)
	assert.ErrorIs(t, err, ErrMalformed)
}

// fullOffer decodes an offer payload on the full path alone: the generic
// decoder, then the CDDL checks. The fast path must agree with it.
func fullOffer(payload []byte, enc Encoding, lim Limits) (*Offer, error) {
	m, err := decodePayload(payload, enc, lim)
	if err != nil {
		return nil, err
	}
	return offerFrom(m, lim.Strict)
}

// The fast CBOR path decides nothing: for every input it either steps
// aside or returns the offer the full path returns, so that unknown
// members are still kept (HC-01), a Digest is still closed and untruncated
// (HC-06, HC-07), and a Time is still any uint. Each case below is one
// the full path refuses or one whose CBOR form the typed decoder could
// misread (null read as absent, a tag stripped, a name folded, a key that
// is not text), and the fast path must step aside for each; the offers at
// the top, with every member the CDDL names, must take it.
func TestOfferCBORFast_StepsAsideOrAgrees(t *testing.T) {
	base := func() map[any]any {
		return map[any]any{"v": 1, "type": "offer", "hop": "q3Zl0v8bVfQmJm2c4bq1Ww", "dialog": "ctx-7c1e",
			"iss": "spiffe://a.example/agent/planner", "aud": "spiffe://b.example/agent/coder",
			"iat": 1793000000, "exp": 1793000120}
	}
	digest := map[any]any{"alg": "sha-256", "val": base64.RawURLEncoding.EncodeToString(make([]byte, 32))}
	with := func(k any, v any) []byte {
		m := base()
		m[k] = v
		b, err := cbor.Marshal(m)
		require.NoError(t, err)
		return b
	}
	without := func(k string) []byte {
		m := base()
		delete(m, k)
		b, err := cbor.Marshal(m)
		require.NoError(t, err)
		return b
	}
	plain, err := cbor.Marshal(base())
	require.NoError(t, err)
	full, err := cbor.Marshal(func() map[any]any {
		m := base()
		m["task"] = "t"
		m["obo"] = map[any]any{"sub": "user:alice", "iss": "https://idp.example", "x": []any{1.5, -2, map[any]any{1: true}}}
		m["grant"] = digest
		m["prev"] = digest
		m["refs"] = []any{map[any]any{"kind": "digest", "dig": digest, "loc": "https://x.example/", "proof": h2b("00ff")}}
		return m
	}())
	require.NoError(t, err)

	takes := map[string][]byte{
		"required members only": plain,
		"every member":          full,
		"empty dialog":          with("dialog", ""),
		"empty task":            with("task", ""),
		"iat zero":              with("iat", 0),
	}
	stepsAside := map[string][]byte{
		"unknown member":             with("x-priority", 3),
		"name in another case":       with("AUD", "spiffe://c.example/agent"),
		"integer key":                with(1, "x"),
		"dialog missing":             without("dialog"),
		"iat missing":                without("iat"),
		"task null":                  with("task", nil),
		"prev null":                  with("prev", nil),
		"obo null":                   with("obo", nil),
		"refs null":                  with("refs", nil),
		"dialog null":                with("dialog", nil),
		"task undefined":             with("task", cbor.SimpleValue(23)),
		"iss as bytes":               with("iss", []byte("spiffe://a.example/agent/planner")),
		"tagged dialog":              with("dialog", cbor.Tag{Number: 32, Content: "ctx-7c1e"}),
		"bignum iat":                 with("iat", cbor.Tag{Number: 2, Content: []byte{1}}),
		"v as a float":               with("v", 1.0),
		"v 2":                        with("v", 2),
		"negative exp":               with("exp", -1),
		"type status":                with("type", "status"),
		"prev with an extra member":  with("prev", map[any]any{"alg": "sha-256", "val": base64.RawURLEncoding.EncodeToString(make([]byte, 32)), "x": 1}),
		"prev without val":           with("prev", map[any]any{"alg": "sha-256"}),
		"prev truncated":             with("prev", map[any]any{"alg": "sha-256", "val": base64.RawURLEncoding.EncodeToString(make([]byte, 16))}),
		"refs empty":                 with("refs", []any{}),
		"obo without sub":            with("obo", map[any]any{"iss": "x"}),
		"iat 2^64-1 (the sentinel)":  with("iat", uint64(math.MaxUint64)),
		"trailing octets":            append(bytes.Clone(plain), 0x00),
		"a duplicate name":           h2b("a3" + "6176" + "01" + "6176" + "01" + "6474797065" + "656f66666572"),
		"an array, not a map":        h2b("83010203"),
		"indefinite map with a null": append(append([]byte{0xbf}, plain[1:]...), 0x65, 't', 'a', 's', 'k', '1', 0xf6, 0xff),
	}
	for name, p := range takes {
		got, ok := offerFromCBORFast(p, Limits{})
		require.True(t, ok, "%s: the fast path should take %x", name, p)
		want, err := fullOffer(p, CBOR, Limits{})
		require.NoError(t, err, name)
		assertSameValue(t, want, got)
	}
	for name, p := range stepsAside {
		_, ok := offerFromCBORFast(p, Limits{})
		assert.False(t, ok, "%s: the fast path should step aside for %x", name, p)
		o, err := decodeOffer(p, CBOR, Limits{})
		want, werr := fullOffer(p, CBOR, Limits{})
		assert.Equal(t, werr == nil, err == nil, name)
		if werr == nil {
			assertSameValue(t, want, o)
		}
	}
	// The strict profile and bounds other than the defaults always take the
	// full path.
	_, ok := offerFromCBORFast(plain, Limits{MaxMembers: 8})
	assert.False(t, ok)
}

func h2b(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// As TestOfferCBORFast_StepsAsideOrAgrees, for the JSON fast path: every
// spelling the full path reads differently from the plain one (a null,
// another number form, an escaped name, an unknown member) sends the
// offer to the full path.
func TestOfferJSONFast_StepsAsideOrAgrees(t *testing.T) {
	const head = `{"v":1,"type":"offer","hop":"q3Zl0v8bVfQmJm2c4bq1Ww","iss":"spiffe://a.example/agent/planner",` +
		`"aud":"spiffe://b.example/agent/coder","iat":1793000000,"exp":1793000120`
	dg := `{"alg":"sha-256","val":"` + base64.RawURLEncoding.EncodeToString(make([]byte, 32)) + `"}`
	takes := map[string]string{
		"required members only": head + `,"dialog":"ctx"}`,
		"every member": head + `,"dialog":"ctx","task":"t","obo":{"sub":"user:alice","iss":"https://idp.example","x":[1.5,-2,{"a":null}]},` +
			`"grant":` + dg + `,"prev":` + dg + `,"refs":[{"kind":"digest","dig":` + dg + `,"loc":"https://x.example/","proof":{"p":[1]}}]}`,
		"empty dialog":           head + `,"dialog":""}`,
		"escaped text":           head + `,"dialog":"c\u0074x\n"}`,
		"whitespace":             " \n" + head + `,"dialog" : "ctx" }` + "\t",
		"iat 0, exp 2^64-1":      strings.Replace(strings.Replace(head, "1793000000", "0", 1), "1793000120", "18446744073709551615", 1) + `,"dialog":"ctx"}`,
		"an escaped member name": head + `,"di\u0061log":"ctx"}`,
	}
	stepsAside := map[string]string{
		"unknown member":              head + `,"dialog":"ctx","x-priority":3}`,
		"name in another case":        head + `,"dialog":"ctx","AUD":"x"}`,
		"dialog missing":              head + `}`,
		"dialog null":                 head + `,"dialog":null}`,
		"task null":                   head + `,"dialog":"ctx","task":null}`,
		"prev null":                   head + `,"dialog":"ctx","prev":null}`,
		"refs null":                   head + `,"dialog":"ctx","refs":null}`,
		"obo as text":                 head + `,"dialog":"ctx","obo":"user:alice"}`,
		"v 1.0":                       strings.Replace(head, `"v":1`, `"v":1.0`, 1) + `,"dialog":"ctx"}`,
		"v 1e0":                       strings.Replace(head, `"v":1`, `"v":1e0`, 1) + `,"dialog":"ctx"}`,
		"v as text":                   strings.Replace(head, `"v":1`, `"v":"1"`, 1) + `,"dialog":"ctx"}`,
		"iat -0":                      strings.Replace(head, "1793000000", "-0", 1) + `,"dialog":"ctx"}`,
		"iat 2^64":                    strings.Replace(head, "1793000000", "18446744073709551616", 1) + `,"dialog":"ctx"}`,
		"duplicate through an escape": head + `,"dialog":"ctx","\u0064ialog":"ctx"}`,
		"lone surrogate":              head + `,"dialog":"\udc00"}`,
		"invalid UTF-8":               head + `,"dialog":"` + "\xff" + `"}`,
		"trailing data":               head + `,"dialog":"ctx"} {}`,
		"unterminated":                head + `,"dialog":"ctx"`,
		"empty refs":                  head + `,"dialog":"ctx","refs":[]}`,
		"prev truncated":              head + `,"dialog":"ctx","prev":{"alg":"sha-256","val":"AAAA"}}`,
		"an array":                    `[` + head + `}]`,
		"type status":                 strings.Replace(head, `"offer"`, `"status"`, 1) + `,"dialog":"ctx"}`,
		"hop too short":               strings.Replace(head, "q3Zl0v8bVfQmJm2c4bq1Ww", "short", 1) + `,"dialog":"ctx"}`,
	}
	for name, p := range takes {
		got, ok := offerFromJSONFast([]byte(p), Limits{})
		require.True(t, ok, "%s: the fast path should take %s", name, p)
		want, err := fullOffer([]byte(p), JSON, Limits{})
		require.NoError(t, err, name)
		assertSameValue(t, want, got)
	}
	for name, p := range stepsAside {
		_, ok := offerFromJSONFast([]byte(p), Limits{})
		assert.False(t, ok, "%s: the fast path should step aside for %s", name, p)
		o, err := decodeOffer([]byte(p), JSON, Limits{})
		want, werr := fullOffer([]byte(p), JSON, Limits{})
		assert.Equal(t, werr == nil, err == nil, name)
		if werr == nil {
			assertSameValue(t, want, o)
		}
	}
	_, ok := offerFromJSONFast([]byte(head+`,"dialog":"ctx"}`), Limits{MaxDepth: 4})
	assert.False(t, ok, "bounds other than the defaults take the full path")
}
