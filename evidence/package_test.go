package evidence

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

func TestDecode_StrictRefusals(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want error
	}{
		{"duplicate top-level name", `{"control":"transfer-ownership","control":"specialist-returns-result"}`, ErrDuplicateName},
		{"duplicate nested name", `{"outcome":{"result":"a","result":"b"}}`, ErrDuplicateName},
		{"duplicate unknown name", `{"x-ext":1,"x-ext":2}`, ErrDuplicateName},
		{"invalid UTF-8", "{\"control\":\"\xff\"}", ErrInvalidUTF8},
		{"lone high surrogate", `{"control":"\ud800"}`, ErrInvalidUTF8},
		{"lone low surrogate", `{"outcome":{"result":"\udc00x"}}`, ErrInvalidUTF8},
		{"not an object", `["handoff"]`, ErrMalformed},
		{"trailing data", `{} {}`, ErrMalformed},
		{"wrong type", `{"state":"fine"}`, ErrMalformed},
		{"bad time", `{"handoff":{"time":"yesterday"}}`, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.in), DecodeOptions{})
			require.ErrorIs(t, err, c.want)
			require.ErrorIs(t, err, ErrMalformed)
			_, err = Digest([]byte(c.in), DecodeOptions{})
			require.ErrorIs(t, err, c.want, "no digest of a package that does not decode")
		})
	}
}

func TestDecode_Oversize(t *testing.T) {
	in := []byte(`{"outcome":{"result":"` + strings.Repeat("a", 100) + `"}}`)
	_, err := Decode(in, DecodeOptions{MaxSize: len(in) - 1})
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = Decode(in, DecodeOptions{MaxSize: len(in)})
	require.NoError(t, err)
	big := append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), DefaultMaxSize)...)
	_, err = Decode(append(big, `"}`...), DecodeOptions{})
	require.ErrorIs(t, err, ErrTooLarge)
}

// Distinct names never compare equal: a case variant is an unknown member.
func TestDecode_NamesAreCaseSensitive(t *testing.T) {
	p, err := Decode([]byte(`{"Control":"transfer-ownership"}`), DecodeOptions{})
	require.NoError(t, err)
	require.Equal(t, ControlMode(""), p.Control)
	require.Contains(t, p.Extra, "Control")
}

// Unknown members are kept, at the top and nested, and the digest covers
// them.
func TestDecode_KeepsUnknownMembers(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	built, _ := w.build(refundPackage(), BuildOptions{})
	var m map[string]any
	require.NoError(t, jsonUnmarshal(built.Encoded, &m))
	m["x-ticket"] = map[string]any{"system": "desk", "id": 77.0}
	m["outcome"].(map[string]any)["x-sla"] = "P1"
	in := jsonMarshal(t, m)

	p, err := Decode(in, DecodeOptions{})
	require.NoError(t, err)
	require.JSONEq(t, `{"system":"desk","id":77}`, string(p.Extra["x-ticket"]))
	require.JSONEq(t, `"P1"`, string(p.Outcome.Extra["x-sla"]))
	out, err := p.Encode()
	require.NoError(t, err)
	require.JSONEq(t, string(in), string(out), "re-encoding keeps every member")

	d1, err := Digest(in, DecodeOptions{})
	require.NoError(t, err)
	d2, err := Digest(built.Encoded, DecodeOptions{})
	require.NoError(t, err)
	require.False(t, d1.Equal(d2), "the digest covers unknown members")
}

// The digest is SHA-256 over the JCS form: member order, whitespace and
// escapes do not change it; any value does.
func TestDigest_JCS(t *testing.T) {
	a := []byte(`{"control":"transfer-ownership","outcome":{"result":"r","done_when":"d"}}`)
	b := []byte("{ \"outcome\" : { \"done_when\":\"d\", \"result\":\"\\u0072\" },\n \"control\":\"transfer-ownership\" }")
	c := []byte(`{"control":"transfer-ownership","outcome":{"result":"R","done_when":"d"}}`)
	da, err := Digest(a, DecodeOptions{})
	require.NoError(t, err)
	db, err := Digest(b, DecodeOptions{})
	require.NoError(t, err)
	dc, err := Digest(c, DecodeOptions{})
	require.NoError(t, err)
	require.True(t, da.Equal(db))
	require.False(t, da.Equal(dc))
	canon, err := jcs.Transform(b)
	require.NoError(t, err)
	require.True(t, da.Equal(digest.SHA256(canon)))
	require.Equal(t, `{"control":"transfer-ownership","outcome":{"done_when":"d","result":"r"}}`, string(canon))
}

// HC-10: the reference kind is an absolute URI, so an offer carrying it
// signs, travels and opens in both formats.
func TestRef_HC10_KindIsAbsoluteURIAndTravels(t *testing.T) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		w := newWorld(t, f, nil)
		built, bind := w.build(refundPackage(), BuildOptions{})
		out := w.offer(built, bind)
		o, err := handoff.OpenOffer(out.Handoff.Offer, w.trust, handoff.Limits{})
		require.NoError(t, err)
		require.Len(t, o.Refs, 1)
		require.Equal(t, Kind, o.Refs[0].Kind)
		require.True(t, o.Refs[0].Dig.Equal(digest.SHA256(built.Canonical)))
	}
}

// HC-64, HC-09: a salted reference hides the digest of a guessable package;
// the salt travels with the package and never in the offer.
func TestRef_HC09_HC64_Salted(t *testing.T) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		w := newWorld(t, f, nil)
		built, bind := w.build(refundPackage(), BuildOptions{Salted: true})
		require.Equal(t, KindSalted, built.Ref.Kind)
		require.Len(t, built.Salt, 32)
		out := w.offer(built, bind)
		for _, enc := range []handoff.Encoding{handoff.JSON, handoff.CBOR} {
			data, err := out.Handoff.Encode(enc)
			require.NoError(t, err)
			require.False(t, bytes.Contains(data, built.Salt), "HC-09: salt octets in the element")
			require.NotContains(t, string(data), digest.SHA256(built.Canonical).B64(), "HC-64: plain digest in the element")
		}
		res := CheckRef(built.Ref, ref.Object{Octets: built.Encoded, Salt: built.Salt}, DecodeOptions{})
		require.Equal(t, ref.Verified, res.Outcome)
		res = CheckRef(built.Ref, ref.Object{Octets: built.Encoded}, DecodeOptions{})
		require.Equal(t, ref.Unverifiable, res.Outcome)
		salt := bytes.Clone(built.Salt)
		salt[0] ^= 1
		res = CheckRef(built.Ref, ref.Object{Octets: built.Encoded, Salt: salt}, DecodeOptions{})
		require.Equal(t, ref.Mismatch, res.Outcome)
	}
}

func TestCheckRef_Outcomes_HC11(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	built, _ := w.build(refundPackage(), BuildOptions{})
	require.Equal(t, ref.Verified, CheckRef(built.Ref, ref.Object{Octets: built.Encoded}, DecodeOptions{}).Outcome)
	other := bytes.Replace(built.Encoded, []byte("INV-1042 paid"), []byte("INV-1042 open"), 1)
	require.Equal(t, ref.Mismatch, CheckRef(built.Ref, ref.Object{Octets: other}, DecodeOptions{}).Outcome)
	require.Equal(t, ref.Unverifiable, CheckRef(built.Ref, ref.Object{Octets: []byte(`{"a":1,"a":2}`)}, DecodeOptions{}).Outcome)
	plain := built.Ref
	plain.Kind = ref.KindDigest
	require.Equal(t, ref.Unverifiable, CheckRef(plain, ref.Object{Octets: built.Encoded}, DecodeOptions{}).Outcome)

	// Source serves the package for package references only.
	src := Source(built.Encoded, nil)
	obj, err := src(context.Background(), built.Ref)
	require.NoError(t, err)
	require.Equal(t, built.Encoded, obj.Octets)
	_, err = src(context.Background(), plain)
	require.ErrorIs(t, err, ref.ErrUnavailable)
}

// The template names every member of the package, and nothing else.
func TestTemplate_CoversEveryField(t *testing.T) {
	var tmpl map[string]any
	require.NoError(t, jsonUnmarshal(Template(), &tmpl))
	p := refundPackage()
	p.Ack = &Acknowledgement{Decision: DecisionAccepted}
	enc, err := p.Encode()
	require.NoError(t, err)
	var full map[string]any
	require.NoError(t, jsonUnmarshal(enc, &full))
	delete(full, "acknowledgement")
	for k := range full {
		require.Contains(t, tmpl, k)
	}
	for k := range tmpl {
		require.Contains(t, full, k)
	}
	require.True(t, jsontext.Value(Template()).IsValid())
}

func TestRefChecker_HC11(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	built, _ := w.build(refundPackage(), BuildOptions{Salted: true})
	ctx := context.Background()
	var c RefChecker
	require.Equal(t, ref.Verified, c.CheckRef(ctx, built.Ref, Source(built.Encoded, built.Salt)).Outcome)
	require.Equal(t, ref.Unverifiable, c.CheckRef(ctx, built.Ref, Source(built.Encoded, nil)).Outcome)
	require.Equal(t, ref.Unverifiable, c.CheckRef(ctx, built.Ref, nil).Outcome)
	other := bytes.Replace(built.Encoded, []byte("INV-1042 paid"), []byte("INV-1042 open"), 1)
	require.Equal(t, ref.Mismatch, c.CheckRef(ctx, built.Ref, Source(other, built.Salt)).Outcome)
}
