package codec

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
)

// jwsStatus is a status as the library signs it (JWS compact, ES256),
// for the hop and offer digest of k and d.
func jwsStatus(k replay.Key, d []byte) []byte {
	enc := base64.RawURLEncoding
	h := `{"alg":"ES256","kid":"NVHfCESQL4okopBPVP_qYNIkcFRe0AMcQJ4it8koMyY","typ":"agent-handoff+jwt"}`
	p := `{"v":1,"type":"status","hop":"` + k.Hop + `","offer":{"alg":"sha-256","val":"` + enc.EncodeToString(d) +
		`"},"iss":"spiffe://b.example/agent/coder","aud":"` + k.Iss + `","iat":1796164754,"state":"accepted"}`
	sig := sha256.Sum256([]byte(p))
	sig2 := sha256.Sum256(sig[:])
	return []byte(enc.EncodeToString([]byte(h)) + "." + enc.EncodeToString([]byte(p)) + "." +
		enc.EncodeToString(append(sig[:], sig2[:]...)))
}

var statusKey = replay.Key{Iss: "spiffe://a.example/agent/planner", Hop: "7v6A2yG2tcNW7fxOG6jPDA"}

// HC-39: a status comes back as the octets that were signed, whatever
// form the record keeps it in; a JWS status is kept in fewer octets.
func TestKeyedStatusRoundTrip(t *testing.T) {
	d := sha256.Sum256([]byte("offer"))
	jws := jwsStatus(statusKey, d[:])
	enc := base64.RawURLEncoding
	for name, tc := range map[string]struct {
		status  []byte
		compact bool
	}{
		"jws":                    {jws, true},
		"jws, other key":         {jwsStatus(replay.Key{Iss: "x", Hop: "y"}, d[:]), true},
		"none":                   {nil, false},
		"raw octets":             {[]byte{0, 1, 0xff}, false},
		"padded part":            {append(append([]byte{}, jws...), '='), false},
		"non-canonical bits":     {[]byte(enc.EncodeToString([]byte("ab")) + "." + "YQ" + "." + "Yr"), false},
		"two parts":              {bytes.Join(bytes.Split(jws, []byte("."))[:2], []byte(".")), false},
		"four parts":             {append(append([]byte{}, jws...), []byte(".AA")...), false},
		"standard alphabet":      {bytes.ReplaceAll(jws, []byte("_"), []byte("/")), false},
		"empty parts, no saving": {[]byte(".."), false},
		"cose-like":              {bytes.Repeat([]byte{0xd2, 0x84, 0x43}, 100), false},
	} {
		t.Run(name, func(t *testing.T) {
			rec := replay.Record{Digest: d[:], Token: bytes.Repeat([]byte{9}, 16), Created: time.Unix(1893456000, 5),
				Expires: time.Unix(1893457000, 0), State: "accepted", Status: tc.status}
			b := EncodeKeyed(statusKey, rec)
			assert.Equal(t, byte(Version3), b[0])
			assert.Equal(t, Encode(rec)[1:StateOffset], b[1:StateOffset], "the layout of version 2 up to the status")
			got, err := DecodeKeyed(statusKey, b)
			require.NoError(t, err)
			assert.True(t, rec.Equal(got), "%q != %q", rec.Status, got.Status)
			assert.Equal(t, b, EncodeKeyed(statusKey, got), "one encoding for one record")
			v2 := Encode(rec)
			if tc.compact {
				assert.Less(t, len(b), len(v2)-len(tc.status)/3, "a JWS status is kept in fewer octets")
			} else {
				assert.LessOrEqual(t, len(b), len(v2)+1)
			}
			_, err = Decode(b)
			assert.ErrorIs(t, err, ErrMalformed, "version 3 without its key")
		})
	}
	// The library's status for the hop shrinks to a third of its octets.
	b := EncodeKeyed(statusKey, replay.Record{Digest: d[:], Status: jws})
	assert.Less(t, len(b)-StateOffset, len(jws)*2/5, "%d octets for a status of %d", len(b)-StateOffset, len(jws))
}

// A version 3 value that does not decode is refused, never read as
// another status.
func TestKeyedStatusMalformed(t *testing.T) {
	d := sha256.Sum256([]byte("offer"))
	good := EncodeKeyed(statusKey, replay.Record{Digest: d[:], Status: jwsStatus(statusKey, d[:])})
	field := StateOffset + 1 // state "" then the status length
	n := len(good) - field
	require.Greater(t, n, 2)
	head := good[:field]
	for name, f := range map[string][]byte{
		"unknown form":       {0x02, 0},
		"literal past end":   {formJWS, 0, 4, 0x03, 'a'},
		"copy out of range":  {formJWS, 0, 3, 0x80, 0xff, 0x7f},
		"ends in payload":    {formJWS, 1, 1, 0x00, '{'},
		"header too long":    {formJWS, 0xff, 0xff, 0xff, 0x7f, 0},
		"more than ops give": {formJWS, 0xe8, 0x07, 0, 0x00, 'a'},
		"copy past its want": {formJWS, 0, 2, 0x80, 0},
	} {
		b := append(append([]byte{}, head...), byte(len(f)))
		b = append(b, f...)
		_, err := DecodeKeyed(statusKey, b)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	for i := field; i < len(good); i++ {
		_, _ = DecodeKeyed(statusKey, good[:i]) // no panic on any prefix
	}
}

// Any status octets come back exactly.
func FuzzKeyedStatus(f *testing.F) {
	d := sha256.Sum256([]byte("offer"))
	f.Add(jwsStatus(statusKey, d[:]), "spiffe://a.example/agent/planner", "hop")
	f.Add([]byte("e30.e30.AA"), "i", "h")
	f.Add([]byte{}, "i", "h")
	f.Fuzz(func(t *testing.T, status []byte, iss, hop string) {
		k := replay.Key{Iss: iss, Hop: hop}
		rec := replay.Record{Digest: d[:], State: "accepted", Status: status}
		got, err := DecodeKeyed(k, EncodeKeyed(k, rec))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Status, status) && !(len(status) == 0 && got.Status == nil) {
			t.Fatalf("status %q came back as %q", status, got.Status)
		}
	})
}

// The search for copies is bounded: a status whose hop and iss are one
// repeated character, as long as a delegator may make them, is encoded
// in time linear in its length, and comes back.
func TestKeyedStatusRepetitive(t *testing.T) {
	d := sha256.Sum256([]byte("offer"))
	k := replay.Key{Iss: string(bytes.Repeat([]byte{'a'}, 4096)), Hop: string(bytes.Repeat([]byte{'a'}, 4096))}
	status := jwsStatus(k, d[:])
	start := time.Now()
	b := EncodeKeyed(k, replay.Record{Digest: d[:], Status: status})
	t.Logf("%d octets in %d, in %s", len(status), len(b), time.Since(start))
	got, err := DecodeKeyed(k, b)
	require.NoError(t, err)
	assert.Equal(t, status, got.Status)
	assert.Less(t, len(b), len(status)/4)
}
