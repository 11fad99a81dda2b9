package handoff

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

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
		"deep nesting":         strings.Replace(validOfferJSON, `"v":1`, `"v":1,"x":`+strings.Repeat(`[`, 40)+strings.Repeat(`]`, 40), 1),
		"many members":         strings.Replace(validOfferJSON, `"v":1`, `"v":1`+manyMembers(300), 1),
		"bare string":          `"offer"`,
		"NaN":                  replaceMember("iat", `NaN`),
		"single quotes":        strings.ReplaceAll(validOfferJSON, `"`, `'`),
		"comment":              `/*x*/` + validOfferJSON,
		"BOM":                  "\ufeff" + validOfferJSON,
		"exp missing":          strings.Replace(validOfferJSON, `,"exp":1793000120`, ``, 1),
		"hop missing":          strings.Replace(validOfferJSON, `"hop":"q3Zl0v8bVfQmJm2c4bq1Ww",`, ``, 1),
		"type missing":         strings.Replace(validOfferJSON, `"type":"offer",`, ``, 1),
		"v missing":            strings.Replace(validOfferJSON, `"v":1,`, ``, 1),
		"oversize":             strings.Replace(validOfferJSON, `"v":1`, `"v":1,"pad":"`+strings.Repeat("a", DefaultMaxElementSize)+`"`, 1),
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

// HC-01: extension members are names like any other: two that differ only
// in case are distinct and both kept, and a map in any key order decodes.
// Only a case variant of a member the draft defines is refused (above).
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

// Hostile CBOR payloads: each a typed error.
func TestDecodeOffer_CBORHostile(t *testing.T) {
	valid := validOfferCBOR(t)
	mustHex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	// A map with one member more, encoded by hand in deterministic order.
	withMember := func(key string, value any) []byte {
		var m map[string]any
		require.NoError(t, cbor.Unmarshal(valid, &m))
		m[key] = value
		b, err := cborEncMode.Marshal(m)
		require.NoError(t, err)
		return b
	}
	// Non-minimal head: re-encode "v": 1 as 0x18 0x01.
	nonMinimal := append([]byte(nil), valid...)
	i := strings.Index(string(nonMinimal), "\x61v\x01")
	require.GreaterOrEqual(t, i, 0)
	nonMinimal = append(append(append([]byte(nil), nonMinimal[:i+2]...), 0x18, 0x01), nonMinimal[i+3:]...)

	// Indefinite-length map: 0xbf ... 0xff with the same members.
	indef := append([]byte{0xbf}, valid[1:]...)
	indef = append(indef, 0xff)

	// Duplicate key: bump the map count and append "v": 1 again.
	dup := append([]byte{valid[0] + 1}, valid[1:]...)
	dup = append(dup, 0x61, 'v', 0x01)

	cases := map[string][]byte{
		"empty":                {},
		"truncated":            valid[:len(valid)-3],
		"trailing byte":        append(append([]byte(nil), valid...), 0x00),
		"not a map":            mustHex("83010203"),
		"indefinite length":    indef,
		"duplicate key":        dup,
		"non-minimal head":     nonMinimal,
		"tagged map":           append([]byte{0xd8, 0x20}, valid...),
		"integer key":          withMember("x", map[any]any{1: 2}),
		"float time":           withMember("iat", 1793000000.5),
		"negative time":        withMember("exp", -5),
		"v as text":            withMember("v", "1"),
		"byte string hop":      withMember("hop", []byte("q3Zl0v8bVfQmJm2c4bq1Ww")),
		"declared length huge": mustHex("a1617a5bffffffffffffff00"),
		"invalid UTF-8":        mustHex("a16176" + "62ff00"),
		"deep nesting":         withMember("x", deep(40)),
		"huge array header":    mustHex("a1617a9bffffffffffffffff"),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := decodeOffer(in, CBOR, Limits{})
			require.Error(t, err)
			assert.Nil(t, o)
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
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
	assert.Equal(t, Accepted, st.State)
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
		assert.Equal(t, mixed, back, enc)
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
		"oversize":         {`{"offer":"` + strings.Repeat("a", DefaultMaxHandoffSize) + `"}`, ErrTooLarge},
		"oversize element": {`{"offer":"` + strings.Repeat("a", DefaultMaxElementSize) + `.a.a"}`, ErrTooLarge},
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
			var ce *ChainError
			require.ErrorAs(t, h.ChainErr(), &ce)
			assert.Equal(t, ReasonBadSignature, ce.Reason)
			assert.ErrorIs(t, h.ChainErr(), ErrMalformed)
		})
	}
}
