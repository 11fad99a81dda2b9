package cose_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"math/big"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gocose "github.com/veraison/go-cose"

	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/internal/ecsig"
)

var testPayload = []byte("\xa3\x61v\x01\x64type\x65offer\x63iss\x78\x20spiffe://a.example/agent/planner")

var encMode = func() cbor.EncMode {
	em, err := cbor.EncOptions{Sort: cbor.SortCoreDeterministic}.EncMode()
	if err != nil {
		panic(err)
	}
	return em
}()

func enc(t *testing.T, v any) []byte {
	t.Helper()
	b, err := encMode.Marshal(v)
	require.NoError(t, err)
	return b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// bstr encodes b as a byte string with the shortest head; bstr16 with a
// two-octet length, longer than needed for short strings.
func bstr(b []byte) []byte {
	switch {
	case len(b) < 24:
		return cat([]byte{0x40 | byte(len(b))}, b)
	case len(b) < 256:
		return cat([]byte{0x58, byte(len(b))}, b)
	}
	return cat([]byte{0x59, byte(len(b) >> 8), byte(len(b))}, b)
}

func bstr16(b []byte) []byte {
	head := []byte{0x59, 0, 0}
	binary.BigEndian.PutUint16(head[1:], uint16(len(b)))
	return cat(head, b)
}

func pin(pub crypto.PublicKey, alg string) cose.Lookup {
	return func(cose.Header, []byte) ([]cose.Key, error) {
		return []cose.Key{{Public: pub, Alg: alg}}, nil
	}
}

func newKey(t testing.TB, alg string) crypto.Signer {
	t.Helper()
	var k crypto.Signer
	var err error
	switch alg {
	case cose.ES256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case cose.ES384:
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case cose.EdDSA:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	}
	require.NoError(t, err)
	return k
}

// protectedFor is the protected header Sign writes.
func protectedFor(t *testing.T, alg int64, kid string) []byte {
	return enc(t, map[int64]any{1: alg, 3: cose.ContentType, 4: []byte(kid)})
}

// toBeSigned is the Sig_structure of RFC 9052 section 4.4 with empty
// external AAD.
func toBeSigned(t *testing.T, protected, payload []byte) []byte {
	return enc(t, []any{"Signature1", protected, []byte{}, payload})
}

// craft builds a message around any protected header, validly signed with
// key under ES256, so that only the rule under test can fail.
func craft(t *testing.T, key crypto.Signer, protected, payload []byte) []byte {
	t.Helper()
	sig, err := ecsig.Sign(nil, key, cose.ES256, toBeSigned(t, protected, payload))
	require.NoError(t, err)
	return cat([]byte{0xd2, 0x84}, bstr(protected), []byte{0xa0}, bstr(payload), bstr(sig))
}

// craftU is craft with an unprotected header.
func craftU(t *testing.T, key crypto.Signer, protected, unprotected, payload []byte) []byte {
	t.Helper()
	sig, err := ecsig.Sign(nil, key, cose.ES256, toBeSigned(t, protected, payload))
	require.NoError(t, err)
	return cat([]byte{0xd2, 0x84}, bstr(protected), unprotected, bstr(payload), bstr(sig))
}

// sigOf returns the raw signature at the end of a message Sign made.
func sigOf(msg []byte, alg string) []byte {
	n := map[string]int{cose.ES256: 64, cose.ES384: 96, cose.EdDSA: 64}[alg]
	return msg[len(msg)-n:]
}

func TestSignOpen_RoundTrip(t *testing.T) {
	for alg, id := range map[string]int64{cose.ES256: -7, cose.ES384: -35, cose.EdDSA: -8} {
		t.Run(alg, func(t *testing.T) {
			key := newKey(t, alg)
			msg, err := cose.Sign(testPayload, key, alg, "kid-1", rand.Reader)
			require.NoError(t, err)

			// HC-17, HC-18: tag 18, {1: alg, 3: content type, 4: kid},
			// empty unprotected header, embedded payload.
			sig := sigOf(msg, alg)
			want := cat([]byte{0xd2, 0x84}, bstr(protectedFor(t, id, "kid-1")), []byte{0xa0}, bstr(testPayload), bstr(sig))
			assert.Equal(t, want, msg)

			var gotHeader cose.Header
			payload, h, err := cose.Open(msg, func(h cose.Header, p []byte) ([]cose.Key, error) {
				gotHeader = h
				assert.Equal(t, testPayload, p)
				return []cose.Key{{Public: key.Public(), Alg: alg}}, nil
			}, 0)
			require.NoError(t, err)
			assert.Equal(t, testPayload, payload)
			assert.Equal(t, cose.Header{Alg: alg, KID: "kid-1"}, h)
			assert.Equal(t, h, gotHeader)

			// go-cose reads it the same way.
			var m gocose.Sign1Message
			require.NoError(t, m.UnmarshalCBOR(msg))
			v, err := gocose.NewVerifier(gocose.Algorithm(id), key.Public())
			require.NoError(t, err)
			assert.NoError(t, m.Verify(nil, v))
		})
	}
}

func TestOpen_LookupGetsCopy(t *testing.T) {
	key := newKey(t, cose.ES256)
	msg, err := cose.Sign(testPayload, key, cose.ES256, "k", nil)
	require.NoError(t, err)
	payload, _, err := cose.Open(msg, func(_ cose.Header, p []byte) ([]cose.Key, error) {
		for i := range p {
			p[i] = 0
		}
		return []cose.Key{{Public: key.Public(), Alg: cose.ES256}}, nil
	}, 0)
	require.NoError(t, err)
	assert.Equal(t, testPayload, payload)
}

// HC-18: kid is a SHOULD, so a message without one opens.
func TestOpen_HC18_NoKid(t *testing.T) {
	key := newKey(t, cose.ES256)
	msg := craft(t, key, enc(t, map[int64]any{1: -7, 3: cose.ContentType}), testPayload)
	payload, h, err := cose.Open(msg, pin(key.Public(), cose.ES256), 0)
	require.NoError(t, err)
	assert.Equal(t, testPayload, payload)
	assert.Equal(t, cose.Header{Alg: cose.ES256}, h)
}

func TestSign_LowSAlways(t *testing.T) {
	for _, alg := range []string{cose.ES256, cose.ES384} {
		key := newKey(t, alg)
		for range 200 {
			msg, err := cose.Sign(testPayload, key, alg, "k", rand.Reader)
			require.NoError(t, err)
			require.True(t, ecsig.IsLowS(alg, sigOf(msg, alg)), "%s signature is high-S", alg)
		}
	}
}

func TestSign_Refuses(t *testing.T) {
	p256 := newKey(t, cose.ES256)
	ed := newKey(t, cose.EdDSA)
	for name, tc := range map[string]struct {
		payload []byte
		key     crypto.Signer
		alg     string
		kid     string
		want    error
	}{
		"HS256":            {[]byte("x"), p256, "HS256", "k", cose.ErrAlg},
		"ES512":            {[]byte("x"), p256, "ES512", "k", cose.ErrAlg},
		"P-256 as ES384":   {[]byte("x"), p256, cose.ES384, "k", cose.ErrAlg},
		"Ed25519 as ES256": {[]byte("x"), ed, cose.ES256, "k", cose.ErrAlg},
		"empty kid":        {[]byte("x"), p256, cose.ES256, "", nil},
		"empty payload":    {nil, p256, cose.ES256, "k", nil},
		"nil key":          {[]byte("x"), nil, cose.ES256, "k", nil},
	} {
		out, err := cose.Sign(tc.payload, tc.key, tc.alg, tc.kid, nil)
		assert.Error(t, err, name)
		assert.Nil(t, out, name)
		if tc.want != nil {
			assert.ErrorIs(t, err, tc.want, name)
		}
	}
}

// Other signers produce high-S signatures, and Wycheproof marks them valid:
// the twin (r, n-s) of a valid signature verifies too.
func TestOpen_HighSTwinVerifies(t *testing.T) {
	for _, alg := range []string{cose.ES256, cose.ES384} {
		key := newKey(t, alg)
		msg, err := cose.Sign(testPayload, key, alg, "k", rand.Reader)
		require.NoError(t, err)
		sig := sigOf(msg, alg)
		twin, err := ecsig.Twin(alg, sig)
		require.NoError(t, err)
		require.False(t, ecsig.IsLowS(alg, twin))
		twinMsg := cat(msg[:len(msg)-len(sig)], twin)

		payload, h, err := cose.Open(twinMsg, pin(key.Public(), alg), 0)
		require.NoError(t, err, alg)
		assert.Equal(t, testPayload, payload)
		assert.Equal(t, alg, h.Alg)
	}
}

var lookupErr = errors.New("trust store unavailable")

// TestOpen_Hostile is the tamper table over one valid message (HC-15,
// HC-17, HC-18, HC-21, HC-22, HC-60, and the canonical-form and empty
// unprotected header rules). Each row asserts the exact sentinel, a nil
// payload, a zero header, and whether the lookup was consulted: it never is
// for a message whose structure or protected header is refused. Rows marked
// goCoseAccepts are messages go-cose on its own would parse and verify: the
// checks that refuse them are ours.
func TestOpen_Hostile(t *testing.T) {
	key := newKey(t, cose.ES256)
	pub := key.Public().(*ecdsa.PublicKey)
	const kid = "planner-1"
	prot := protectedFor(t, -7, kid)
	good := craft(t, key, prot, testPayload)
	// craft and Sign agree: one canonical form.
	require.Equal(t, good[:len(good)-64], func() []byte {
		m, err := cose.Sign(testPayload, key, cose.ES256, kid, nil)
		require.NoError(t, err)
		return m[:len(m)-64]
	}())
	sig := good[len(good)-64:]
	body := good[:len(good)-66] // everything before the signature bstr

	withSig := func(s []byte) []byte { return cat(body, bstr(s)) }
	n := elliptic.P256().Params().N
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	der, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
	require.NoError(t, err)
	setR := func(v *big.Int) []byte { out := bytes.Clone(sig); v.FillBytes(out[:32]); return out }
	setS := func(v *big.Int) []byte { out := bytes.Clone(sig); v.FillBytes(out[32:]); return out }

	withProt := func(m map[int64]any) []byte { return craft(t, key, enc(t, m), testPayload) }
	ct := cose.ContentType
	kidB := []byte(kid)

	// A protected header with a duplicate alg label, signed.
	dupProt := cat([]byte{0xa4, 0x01, 0x26, 0x01, 0x05}, enc(t, 3), enc(t, ct), enc(t, 4), enc(t, kidB))
	// The same message with the unprotected header filled in after signing.
	unprot := enc(t, map[int64]any{4: kidB})
	// Messages with a longer head than needed somewhere; each verifies
	// under go-cose.
	longPayload := cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0xa0}, bstr16(testPayload), bstr(sig))
	longSig := cat(body, bstr16(sig))
	longProt := cat([]byte{0xd2, 0x84}, bstr16(prot), []byte{0xa0}, bstr(testPayload), bstr(sig))
	longArray := cat([]byte{0xd2, 0x98, 0x04}, good[2:])
	longTag := cat([]byte{0xd8, 0x12}, good[1:])
	longMap := cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0xb8, 0x00}, bstr(testPayload), bstr(sig))
	withUnprot := cat([]byte{0xd2, 0x84}, bstr(prot), unprot, bstr(testPayload), bstr(sig))

	p384 := newKey(t, cose.ES384)
	other := newKey(t, cose.ES256)

	type row struct {
		name    string
		msg     []byte
		lookup  cose.Lookup
		maxSize int
		want    error
		consult bool
		// checkedAfter: the fault is in a header value decoded only after
		// the signature verifies, by default.
		checkedAfter  bool
		noLookup      bool
		goCoseAccepts bool
		// want is the error under the strict profile, and by default
		// unless defaultOK: an input the draft and its RFCs allow, which
		// the default profile opens and only the strict profile refuses.
		defaultOK bool
		// strictWant, when set, is the error under the strict profile,
		// whose earlier structural checks refuse the input first.
		strictWant error
	}
	// Unprotected headers, added to a message whose protected header has
	// no kid, so that kid may come from the unprotected one.
	protNoKid := enc(t, map[int64]any{1: -7, 3: ct})
	noKidSig, err := ecsig.Sign(nil, key, cose.ES256, toBeSigned(t, protNoKid, testPayload))
	require.NoError(t, err)
	withUnprotected := func(unprotected []byte) []byte {
		return cat([]byte{0xd2, 0x84}, bstr(protNoKid), unprotected, bstr(testPayload), bstr(noKidSig))
	}
	rows := []row{
		// RFC 9052 section 3: the unprotected bucket may hold parameters;
		// only the protected alg and content type count (HC-17), kid is a
		// hint, unknown labels are ignored. The strict profile wants it
		// empty.
		{name: "HC18 unprotected kid", msg: withUnprotected(enc(t, map[int64]any{4: kidB})), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC18 unprotected kid of 32 raw octets", msg: withUnprotected(enc(t, map[int64]any{4: bytes.Repeat([]byte{0xfe}, 32)})), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 unprotected unknown labels", msg: withUnprotected(enc(t, map[any]any{33: []byte("not a certificate"), 394: []any{[]byte{1}}, "x": map[any]any{-1: "y", "n": nil}, -65537: 1.5})), want: cose.ErrMalformed, defaultOK: true, goCoseAccepts: true},
		{name: "HC17 unprotected IV and counter signature", msg: withUnprotected(enc(t, map[int64]any{5: []byte{1}, 7: []any{}})), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 unprotected tagged value", msg: withUnprotected(cat([]byte{0xa1, 0x18, 0x20, 0xd9, 0xff, 0xff, 0x00})), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 unprotected indefinite map", msg: withUnprotected(cat([]byte{0xbf, 0x04}, bstr(kidB), []byte{0xff})), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 unprotected long heads", msg: withUnprotected(cat([]byte{0xb8, 0x01, 0x18, 0x04, 0x58, byte(len(kidB))}, kidB)), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 unprotected big labels", msg: withUnprotected(cat([]byte{0xa2, 0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x3a, 0x7f, 0xff, 0xff, 0xff, 0x00})), want: cose.ErrMalformed, defaultOK: true},
		// What RFC 9052 and RFC 8949 make invalid stays refused.
		{name: "HC17 label in both headers: kid", msg: withUnprot, want: cose.ErrMalformed, goCoseAccepts: true},
		{name: "HC17 label in both headers: alg", msg: withUnprotected(enc(t, map[int64]any{1: -7})), want: cose.ErrMalformed},
		{name: "HC17 label in both headers: unknown", msg: craftU(t, key, enc(t, map[any]any{1: -7, 3: ct, "x": 1}), enc(t, map[any]any{"x": 2}), testPayload), want: cose.ErrMalformed},
		{name: "HC17 label in both headers, long head", msg: withUnprotected(cat([]byte{0xa1, 0x18, 0x01, 0x26})), want: cose.ErrMalformed},
		{name: "HC15 alg only unprotected", msg: craftU(t, key, enc(t, map[int64]any{3: ct}), enc(t, map[int64]any{1: -7}), testPayload), want: cose.ErrAlg, strictWant: cose.ErrMalformed},
		{name: "HC60 content type only unprotected", msg: craftU(t, key, enc(t, map[int64]any{1: -7}), enc(t, map[int64]any{3: ct}), testPayload), want: cose.ErrType, strictWant: cose.ErrMalformed},
		{name: "HC14 crit unprotected", msg: withUnprotected(enc(t, map[int64]any{2: []any{int64(4)}})), want: cose.ErrCrit, strictWant: cose.ErrMalformed},
		{name: "HC18 unprotected kid as text", msg: withUnprotected(enc(t, map[int64]any{4: kid})), want: cose.ErrMalformed},
		{name: "HC17 unprotected duplicate label", msg: withUnprotected(cat([]byte{0xa2, 0x18, 0x20, 0x01, 0x18, 0x20, 0x02})), want: cose.ErrMalformed},
		{name: "HC17 unprotected duplicate label, other encodings", msg: withUnprotected(cat([]byte{0xa2, 0x18, 0x20, 0x01, 0x19, 0x00, 0x20, 0x02})), want: cose.ErrMalformed},
		{name: "HC17 unprotected nested duplicate key", msg: withUnprotected(cat([]byte{0xa1, 0x18, 0x20, 0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02})), want: cose.ErrMalformed, checkedAfter: true},
		{name: "HC17 unprotected label bytes", msg: withUnprotected(cat([]byte{0xa1, 0x41, 0x04, 0x01})), want: cose.ErrMalformed},
		{name: "HC17 unprotected label float", msg: withUnprotected(cat([]byte{0xa1, 0xf9, 0x3c, 0x00, 0x01})), want: cose.ErrMalformed},
		{name: "HC17 unprotected invalid UTF-8", msg: withUnprotected(cat([]byte{0xa1, 0x18, 0x20, 0x61, 0xff})), want: cose.ErrMalformed, checkedAfter: true},
		{name: "HC17 unprotected invalid tag content", msg: withUnprotected(cat([]byte{0xa1, 0x18, 0x20, 0xc1, 0x61, 0x61})), want: cose.ErrMalformed, checkedAfter: true},
		{name: "HC17 unprotected indefinite map unterminated", msg: withUnprotected(cat([]byte{0xbf, 0x04}, bstr(kidB))), want: cose.ErrMalformed},
		// Valid CBOR not in preferred serialization, inside the signed
		// protected header (RFC 8949 section 4.1 makes preferred
		// serialization a SHOULD of encoders; the draft asks for none).
		{name: "HC17 protected long alg head", msg: craft(t, key, cat([]byte{0xa3, 0x01, 0x38, 0x06}, prot[3:]), testPayload), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 protected long map head", msg: craft(t, key, cat([]byte{0xb8, 0x03}, prot[1:]), testPayload), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 protected indefinite bstr", msg: cat([]byte{0xd2, 0x84, 0x5f}, bstr(prot[:4]), bstr(prot[4:]), []byte{0xff, 0xa0}, bstr(testPayload), bstr(sig)), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 tag 18 four-octet head", msg: cat([]byte{0xda, 0, 0, 0, 0x12}, good[1:]), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 HC60 content type upper case", msg: withProt(map[int64]any{1: -7, 3: "APPLICATION/AGENT-HANDOFF+CBOR", 4: kidB}), want: cose.ErrType, defaultOK: true},
		{name: "HC17 HC60 content type without application/", msg: withProt(map[int64]any{1: -7, 3: "agent-handoff+cbor", 4: kidB}), want: cose.ErrType},
		{name: "HC17 HC60 content type trailing space", msg: withProt(map[int64]any{1: -7, 3: ct + " ", 4: kidB}), want: cose.ErrType},
		{name: "HC15 alg tagged", msg: craft(t, key, cat([]byte{0xa3, 0x01, 0xd9, 0xff, 0xff, 0x26}, prot[3:]), testPayload), want: cose.ErrAlg, strictWant: cose.ErrMalformed},
		{name: "HC15 alg as uint", msg: withProt(map[int64]any{1: 7, 3: ct, 4: kidB}), want: cose.ErrAlg},
		// HC-17: the tag.
		{name: "HC17 untagged", msg: good[1:], want: cose.ErrMalformed},
		{name: "HC17 tag 17", msg: cat([]byte{0xd1}, good[1:]), want: cose.ErrMalformed},
		{name: "HC17 tag 98", msg: cat([]byte{0xd8, 0x62}, good[1:]), want: cose.ErrMalformed},
		{name: "HC17 tag 18 twice", msg: cat([]byte{0xd2}, good), want: cose.ErrMalformed},
		{name: "HC17 tag 18 long head", msg: longTag, want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 tag inside", msg: cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0xa0, 0xd8, 0x18}, bstr(testPayload), bstr(sig)), want: cose.ErrMalformed},
		// HC-17, HC-60: content type.
		{name: "HC17 HC60 content type json", msg: withProt(map[int64]any{1: -7, 3: "application/agent-handoff+json", 4: kidB}), want: cose.ErrType},
		{name: "HC17 HC60 content type cbor", msg: withProt(map[int64]any{1: -7, 3: "application/cbor", 4: kidB}), want: cose.ErrType},
		{name: "HC17 HC60 content type other case", msg: withProt(map[int64]any{1: -7, 3: "Application/Agent-Handoff+CBOR", 4: kidB}), want: cose.ErrType, defaultOK: true},
		{name: "HC17 HC60 content type with parameter", msg: withProt(map[int64]any{1: -7, 3: ct + "; v=1", 4: kidB}), want: cose.ErrType},
		{name: "HC17 HC60 content type as uint", msg: withProt(map[int64]any{1: -7, 3: 60, 4: kidB}), want: cose.ErrType},
		{name: "HC17 HC60 content type as bytes", msg: withProt(map[int64]any{1: -7, 3: []byte(ct), 4: kidB}), want: cose.ErrType},
		{name: "HC17 HC60 content type missing", msg: withProt(map[int64]any{1: -7, 4: kidB}), want: cose.ErrType},
		{name: "HC17 HC60 typ instead of content type", msg: withProt(map[int64]any{1: -7, 16: ct, 4: kidB}), want: cose.ErrType},
		{name: "HC17 HC60 empty protected header", msg: craft(t, key, nil, testPayload), want: cose.ErrType},
		// HC-14 analogue: crit.
		{name: "profile crit", msg: withProt(map[int64]any{1: -7, 2: []any{int64(4)}, 3: ct, 4: kidB}), want: cose.ErrCrit},
		// HC-15: alg.
		{name: "HC15 alg as text", msg: withProt(map[int64]any{1: "ES256", 3: ct, 4: kidB}), want: cose.ErrAlg},
		{name: "HC15 alg HMAC 256/256", msg: withProt(map[int64]any{1: 5, 3: ct, 4: kidB}), want: cose.ErrAlg},
		{name: "HC15 alg ES512", msg: withProt(map[int64]any{1: -36, 3: ct, 4: kidB}), want: cose.ErrAlg},
		{name: "HC15 alg PS256", msg: withProt(map[int64]any{1: -37, 3: ct, 4: kidB}), want: cose.ErrAlg},
		{name: "HC15 alg missing", msg: withProt(map[int64]any{3: ct, 4: kidB}), want: cose.ErrAlg},
		// Strict protected header.
		{name: "HC18 kid as text", msg: withProt(map[int64]any{1: -7, 3: ct, 4: kid}), want: cose.ErrMalformed},
		{name: "HC18 duplicate protected label", msg: craft(t, key, dupProt, testPayload), want: cose.ErrMalformed},
		{name: "HC18 protected not a map", msg: craft(t, key, enc(t, []any{1, -7}), testPayload), want: cose.ErrMalformed},
		{name: "HC18 protected trailing data", msg: craft(t, key, cat(prot, []byte{0x00}), testPayload), want: cose.ErrMalformed},
		{name: "HC18 protected label bytes", msg: craft(t, key, cat([]byte{0xa4, 0x41, 0x01, 0x00}, prot[1:]), testPayload), want: cose.ErrMalformed},
		{name: "HC18 protected tag", msg: craft(t, key, cat([]byte{0xa4, 0x18, 0x20, 0xc1, 0x00}, prot[1:]), testPayload), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC18 protected invalid UTF-8", msg: craft(t, key, cat([]byte{0xa4, 0x18, 0x20, 0x61, 0xff}, prot[1:]), testPayload), want: cose.ErrMalformed, checkedAfter: true},
		{name: "HC18 protected indefinite map", msg: craft(t, key, cat([]byte{0xbf}, prot[1:], []byte{0xff}), testPayload), want: cose.ErrMalformed, defaultOK: true},
		// Canonical outer form.
		{name: "HC20 long payload head", msg: longPayload, want: cose.ErrMalformed, goCoseAccepts: true, defaultOK: true},
		{name: "HC20 long signature head", msg: longSig, want: cose.ErrMalformed, goCoseAccepts: true, defaultOK: true},
		{name: "HC20 long protected head", msg: longProt, want: cose.ErrMalformed, goCoseAccepts: true, defaultOK: true},
		{name: "HC20 long array head", msg: longArray, want: cose.ErrMalformed, defaultOK: true},
		{name: "HC20 long empty map head", msg: longMap, want: cose.ErrMalformed, defaultOK: true},
		// The unprotected header is empty.
		{name: "HC20 unprotected value added after signing", msg: withUnprot, want: cose.ErrMalformed, goCoseAccepts: true},
		{name: "HC20 unprotected not a map", msg: cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0x80}, bstr(testPayload), bstr(sig)), want: cose.ErrMalformed},
		// Structure.
		{name: "HC17 indefinite-length array", msg: cat([]byte{0xd2, 0x9f}, good[2:], []byte{0xff}), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 indefinite-length payload", msg: cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0xa0, 0x5f}, bstr(testPayload), []byte{0xff}, bstr(sig)), want: cose.ErrMalformed, defaultOK: true},
		{name: "HC17 trailing byte", msg: cat(good, []byte{0x00}), want: cose.ErrMalformed},
		{name: "HC17 trailing item", msg: cat(good, good), want: cose.ErrMalformed},
		{name: "HC17 detached payload", msg: cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0xa0, 0xf6}, bstr(sig)), want: cose.ErrMalformed},
		{name: "HC17 empty payload", msg: craft(t, key, prot, nil), want: cose.ErrMalformed},
		{name: "HC17 payload as text", msg: cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0xa0, 0x63}, []byte("abc"), bstr(sig)), want: cose.ErrMalformed},
		{name: "HC17 three elements", msg: cat([]byte{0xd2, 0x83}, bstr(prot), []byte{0xa0}, bstr(testPayload)), want: cose.ErrMalformed},
		{name: "HC17 five elements", msg: cat([]byte{0xd2, 0x85}, good[2:], []byte{0x40}), want: cose.ErrMalformed},
		{name: "HC17 empty signature", msg: withSig(nil), want: cose.ErrMalformed},
		{name: "HC17 empty", msg: []byte{}, want: cose.ErrMalformed},
		{name: "HC17 truncated by one", msg: good[:len(good)-1], want: cose.ErrMalformed},
		{name: "HC17 truncated in half", msg: good[:len(good)/2], want: cose.ErrMalformed},
		{name: "HC17 not CBOR", msg: []byte("eyJhbGciOiJFUzI1NiJ9.e30.AAAA"), want: cose.ErrMalformed},
		// Signature form: raw r||s only.
		{name: "HC13 DER signature", msg: withSig(der), want: cose.ErrSignature, consult: true},
		{name: "HC13 r=0", msg: withSig(setR(big.NewInt(0))), want: cose.ErrSignature, consult: true},
		{name: "HC13 s=0", msg: withSig(setS(big.NewInt(0))), want: cose.ErrSignature, consult: true},
		{name: "HC13 r=n", msg: withSig(setR(n)), want: cose.ErrSignature, consult: true},
		{name: "HC13 r=2^256-1", msg: withSig(setR(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))), want: cose.ErrSignature, consult: true},
		{name: "HC13 s=n", msg: withSig(setS(n)), want: cose.ErrSignature, consult: true},
		{name: "HC13 modified payload", msg: cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0xa0}, bstr(bytes.ToUpper(testPayload)), bstr(sig)), want: cose.ErrSignature, consult: true},
		{name: "HC13 signed with external AAD", msg: func() []byte {
			sg, err := ecsig.Sign(nil, key, cose.ES256, enc(t, []any{"Signature1", prot, []byte("aad"), testPayload}))
			require.NoError(t, err)
			return withSig(sg)
		}(), want: cose.ErrSignature, consult: true},
		// Size limit, checked first.
		{name: "HC61 oversize", msg: good, maxSize: len(good) - 1, want: cose.ErrTooLarge},
		{name: "HC61 oversize garbage", msg: bytes.Repeat([]byte{0xff}, 1<<20), want: cose.ErrTooLarge},
		// HC-22 and the lookup.
		{name: "HC22 key pinned to ES384", msg: good, lookup: pin(p384.Public(), cose.ES384), want: cose.ErrAlg, consult: true},
		{name: "HC22 P-256 key pinned to ES384", msg: good, lookup: pin(pub, cose.ES384), want: cose.ErrAlg, consult: true},
		{name: "HC22 P-384 key pinned to ES256", msg: good, lookup: pin(p384.Public(), cose.ES256), want: cose.ErrAlg, consult: true},
		{name: "HC22 header ES384, key ES256", msg: withProt(map[int64]any{1: -35, 3: ct, 4: kidB}), want: cose.ErrAlg, consult: true},
		{name: "HC21 no keys", msg: good, lookup: func(cose.Header, []byte) ([]cose.Key, error) { return nil, nil }, want: cose.ErrNoKey, consult: true},
		{name: "HC21 nil lookup", msg: good, noLookup: true, want: cose.ErrNoKey},
		{name: "HC21 lookup error", msg: good, lookup: func(cose.Header, []byte) ([]cose.Key, error) { return nil, lookupErr }, want: lookupErr, consult: true},
		{name: "HC21 other trusted key", msg: good, lookup: pin(other.Public(), cose.ES256), want: cose.ErrSignature, consult: true},
	}

	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			lookup := pin(pub, cose.ES256)
			if tc.lookup != nil || tc.noLookup {
				lookup = tc.lookup
			}
			consulted := false
			var counting cose.Lookup
			if lookup != nil {
				counting = func(h cose.Header, p []byte) ([]cose.Key, error) {
					consulted = true
					return lookup(h, p)
				}
			}
			maxSize := tc.maxSize
			if maxSize == 0 {
				maxSize = 4096
			}
			for _, strict := range []bool{true, false} {
				consulted = false
				payload, h, err := cose.OpenWith(tc.msg, counting, cose.Options{MaxSize: maxSize, Strict: strict})
				if !strict && tc.defaultOK {
					require.NoError(t, err, "the default profile opens it")
					assert.Equal(t, testPayload, payload)
					assert.Equal(t, cose.ES256, h.Alg)
					continue
				}
				want := tc.want
				if strict && tc.strictWant != nil {
					want = tc.strictWant
				}
				require.Error(t, err, "strict %v", strict)
				assert.ErrorIs(t, err, want, "strict %v: got %v", strict, err)
				assert.Nil(t, payload)
				assert.Equal(t, cose.Header{}, h)
				// A header value that is not a scalar the checks read is
				// decoded only once the signature verifies, so the lookup
				// is consulted first (the strict profile reads the whole
				// message to measure its heads, and refuses it before).
				assert.Equal(t, tc.consult || (tc.checkedAfter && !strict), consulted, "strict %v: lookup consulted", strict)
			}

			if tc.goCoseAccepts {
				var m gocose.Sign1Message
				require.NoError(t, m.UnmarshalCBOR(tc.msg), "go-cose parses it")
				v, err := gocose.NewVerifier(gocose.AlgorithmES256, pub)
				require.NoError(t, err)
				assert.NoError(t, m.Verify(nil, v), "go-cose verifies it")
			}
		})
	}

	// The untouched message opens: the rows fail for the reason they name.
	payload, _, err := cose.Open(good, pin(pub, cose.ES256), 4096)
	require.NoError(t, err)
	assert.Equal(t, testPayload, payload)
	payload, _, err = cose.Open(withProt(map[int64]any{1: -7, 3: ct, 4: kidB, 16: "application/example", -65537: []any{1, map[string]any{"a": 1}}}), pin(pub, cose.ES256), 4096)
	require.NoError(t, err, "unknown protected labels are allowed")
	assert.Equal(t, testPayload, payload)
}

// Among several candidate keys, those pinned to another alg are skipped and
// any one that verifies is enough (HC-22).
func TestOpen_HC22_CandidateSelection(t *testing.T) {
	key := newKey(t, cose.ES256)
	msg, err := cose.Sign(testPayload, key, cose.ES256, "k", nil)
	require.NoError(t, err)
	keys := []cose.Key{
		{Public: key.Public(), Alg: cose.ES384},
		{Public: newKey(t, cose.ES256).Public(), Alg: cose.ES256},
		{Public: key.Public(), Alg: cose.ES256},
	}
	payload, _, err := cose.Open(msg, func(cose.Header, []byte) ([]cose.Key, error) { return keys, nil }, 0)
	require.NoError(t, err)
	assert.Equal(t, testPayload, payload)

	_, _, err = cose.Open(msg, func(cose.Header, []byte) ([]cose.Key, error) { return keys[:2], nil }, 0)
	assert.ErrorIs(t, err, cose.ErrSignature)

	// Keys that cannot verify are checked only once none verified; they
	// never verify, and say why when they are all there is.
	pub := key.Public().(*ecdsa.PublicKey)
	offCurve := cose.Key{Public: &ecdsa.PublicKey{Curve: pub.Curve, X: pub.X, Y: new(big.Int).Add(pub.Y, big.NewInt(1))}, Alg: cose.ES256}
	noPoint := cose.Key{Public: &ecdsa.PublicKey{Curve: pub.Curve}, Alg: cose.ES256}
	for name, tc := range map[string]struct {
		keys []cose.Key
		want error
	}{
		"invalid keys before the one": {[]cose.Key{offCurve, noPoint, keys[2]}, nil},
		"only invalid keys":           {[]cose.Key{offCurve, noPoint}, cose.ErrAlg},
		"invalid and a wrong key":     {[]cose.Key{noPoint, keys[1], offCurve}, cose.ErrSignature},
	} {
		_, _, err := cose.Open(msg, func(cose.Header, []byte) ([]cose.Key, error) { return tc.keys, nil }, 0)
		if tc.want == nil {
			assert.NoError(t, err, name)
			continue
		}
		assert.ErrorIs(t, err, tc.want, name)
	}
}

func TestOpen_DefaultMaxSize(t *testing.T) {
	big := bytes.Repeat([]byte{0x40}, cose.DefaultMaxSize+1)
	_, _, err := cose.Open(big, nil, 0)
	assert.ErrorIs(t, err, cose.ErrTooLarge)
}

func TestUnsafePayload(t *testing.T) {
	key := newKey(t, cose.ES256)
	msg := craft(t, key, enc(t, map[int64]any{1: 5}), testPayload)
	p, err := cose.UnsafePayload(msg, 0)
	require.NoError(t, err)
	assert.Equal(t, testPayload, p)

	p, err = cose.UnsafePayload(cat(msg, []byte{0}), 0)
	assert.ErrorIs(t, err, cose.ErrMalformed)
	assert.Nil(t, p)
	_, err = cose.UnsafePayload(msg, 10)
	assert.ErrorIs(t, err, cose.ErrTooLarge)
}

// TestOpen_HC20_UnprotectedTwins: the unprotected header is not signed, so
// one signed message can be sent with different unprotected headers. Each
// verifies (RFC 9052 section 3 allows the bucket) and each is other octets,
// so its handoff digest differs (HC-20): to the root package a twin is a
// second element with the same (iss, hop), equivocation, not a second
// acceptance of the same element. The strict profile opens only the one
// with the empty unprotected header.
func TestOpen_HC20_UnprotectedTwins(t *testing.T) {
	key := newKey(t, cose.ES256)
	msg, err := cose.Sign(testPayload, key, cose.ES256, "planner-1", nil)
	require.NoError(t, err)
	var parts []cbor.RawMessage
	var tag cbor.RawTag
	require.NoError(t, cbor.Unmarshal(msg, &tag))
	require.NoError(t, cbor.Unmarshal(tag.Content, &parts))
	require.Equal(t, []byte{0xa0}, []byte(parts[1]))
	twin := func(unprotected []byte) []byte {
		return cat([]byte{0xd2, 0x84}, parts[0], unprotected, parts[2], parts[3])
	}
	twins := [][]byte{
		msg,
		twin(enc(t, map[int64]any{33: []byte("x")})),
		twin(enc(t, map[int64]any{394: []any{[]byte("receipt")}})),
		twin(enc(t, map[string]any{"note": "added on the path"})),
		twin([]byte{0xbf, 0xff}), // the empty map, indefinite length
	}
	digests := map[[32]byte]bool{}
	for i, m := range twins {
		payload, h, err := cose.Open(m, pin(key.Public(), cose.ES256), 0)
		require.NoError(t, err, "twin %d", i)
		assert.Equal(t, testPayload, payload)
		assert.Equal(t, cose.Header{Alg: cose.ES256, KID: "planner-1"}, h)
		digests[sha256.Sum256(m)] = true

		_, _, err = cose.OpenWith(m, pin(key.Public(), cose.ES256), cose.Options{Strict: true})
		if i == 0 {
			assert.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, cose.ErrMalformed, "strict, twin %d", i)
		}
	}
	assert.Len(t, digests, len(twins), "every twin is other octets")
}

// TestOpen_HC18_KidSources: a kid may be in either header. The Header says
// where it came from and holds its raw octets, whatever they are: the draft
// fixes no encoding (base64url text as Sign writes, or the thumbprint's 32
// raw octets as pycose users write). The lookup sees it; an unprotected kid
// decides nothing but the order the caller tries keys in.
func TestOpen_HC18_KidSources(t *testing.T) {
	key := newKey(t, cose.ES256)
	raw := bytes.Repeat([]byte{0x00, 0xff, 0x80}, 11)[:32] // not UTF-8
	for _, tc := range []struct {
		name       string
		prot       map[int64]any
		unprot     []byte
		want       cose.Header
		hint       string
		hintSigned bool
	}{
		{"protected text", map[int64]any{1: -7, 3: cose.ContentType, 4: []byte("kid-1")}, []byte{0xa0},
			cose.Header{Alg: cose.ES256, KID: "kid-1"}, "kid-1", true},
		{"protected raw octets", map[int64]any{1: -7, 3: cose.ContentType, 4: raw}, []byte{0xa0},
			cose.Header{Alg: cose.ES256, KID: string(raw)}, string(raw), true},
		{"unprotected raw octets", map[int64]any{1: -7, 3: cose.ContentType}, enc(t, map[int64]any{4: raw}),
			cose.Header{Alg: cose.ES256, UnprotectedKID: string(raw)}, string(raw), false},
		{"none", map[int64]any{1: -7, 3: cose.ContentType}, []byte{0xa0},
			cose.Header{Alg: cose.ES256}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := craftU(t, key, enc(t, tc.prot), tc.unprot, testPayload)
			var seen cose.Header
			_, h, err := cose.Open(msg, func(h cose.Header, _ []byte) ([]cose.Key, error) {
				seen = h
				return []cose.Key{{Public: key.Public(), Alg: cose.ES256}}, nil
			}, 0)
			require.NoError(t, err)
			assert.Equal(t, tc.want, h)
			assert.Equal(t, h, seen)
			hint, signed := h.KeyHint()
			assert.Equal(t, tc.hint, hint)
			assert.Equal(t, tc.hintSigned, signed)
		})
	}

	// An unprotected kid cannot make an untrusted key count: the attacker
	// signs, names the trusted key's kid, and the trusted key does not
	// verify.
	attacker := newKey(t, cose.ES256)
	forged := craftU(t, attacker, enc(t, map[int64]any{1: -7, 3: cose.ContentType}), enc(t, map[int64]any{4: []byte("kid-1")}), testPayload)
	_, _, err := cose.Open(forged, pin(key.Public(), cose.ES256), 0)
	assert.ErrorIs(t, err, cose.ErrSignature)
}

// TestOpen_HC17_HC60_ContentTypeComparison: media type names are
// case-insensitive (RFC 6838 section 4.2); the strict profile wants the
// exact string. A CoAP Content-Format number names no registered type for
// the draft's payload, so it is refused.
func TestOpen_HC17_HC60_ContentTypeComparison(t *testing.T) {
	key := newKey(t, cose.ES256)
	for _, tc := range []struct {
		ct        any
		defaultOK bool
	}{
		{cose.ContentType, true},
		{"Application/Agent-Handoff+CBOR", true},
		{"application/AGENT-HANDOFF+cbor", true},
		{"agent-handoff+cbor", false},
		{"application/agent-handoff+cbor;v=1", false},
		{"application/agent-handoff+json", false},
		{"application/cose; cose-type=\"cose-sign1\"", false},
		{uint64(60), false},
	} {
		msg := craft(t, key, enc(t, map[int64]any{1: -7, 3: tc.ct}), testPayload)
		_, _, err := cose.Open(msg, pin(key.Public(), cose.ES256), 0)
		if tc.defaultOK {
			assert.NoError(t, err, "%v", tc.ct)
		} else {
			assert.ErrorIs(t, err, cose.ErrType, "%v", tc.ct)
		}
		_, _, err = cose.OpenWith(msg, pin(key.Public(), cose.ES256), cose.Options{Strict: true})
		if tc.ct == cose.ContentType {
			assert.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, cose.ErrType, "strict %v", tc.ct)
		}
	}
}
