package codec

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
)

func sample() []replay.Record {
	d := sha256.Sum256([]byte("offer"))
	return []replay.Record{
		{Digest: d[:]},
		{Digest: d[:], Expires: time.Unix(1893456000, 123456789), State: "accepted", Status: []byte{0, 1, 0xff}},
		{Digest: d[:], Expires: time.Unix(-1, 0), State: "completed"},
		{Digest: d[:], Expires: time.Date(9999, 1, 1, 0, 0, 0, 1, time.UTC), Status: bytes.Repeat([]byte{7}, 300)},
		{Digest: d[:], Token: bytes.Repeat([]byte{9}, 16), Created: time.Unix(1893456000, 5), State: "accepted"},
		{Digest: d[:], Token: make([]byte, 16), Created: time.Unix(-3, 999999999)},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, rec := range sample() {
		b := Encode(rec)
		got, err := Decode(b)
		require.NoError(t, err)
		assert.True(t, rec.Equal(got), "%+v != %+v", rec, got)
		assert.Equal(t, rec.Digest, b[DigestOffset:DigestOffset+DigestSize])
		assert.Equal(t, b, Encode(got))
	}
}

func TestKnownEncoding(t *testing.T) {
	d := bytes.Repeat([]byte{0xdd}, 32)
	b := Encode(replay.Record{Digest: d, Expires: time.Unix(0x0102030405, 6), State: "ok", Status: []byte{0xaa}})
	want := append([]byte{2}, d...)
	want = append(want, 0)
	want = append(want, make([]byte, 12+16)...)
	want = append(want, 1, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0, 6, 2, 'o', 'k', 1, 0xaa)
	assert.Equal(t, want, b)
	assert.Equal(t, byte(2), b[StateOffset])

	tok := bytes.Repeat([]byte{0x77}, 16)
	b = Encode(replay.Record{Digest: d, Token: tok, Created: time.Unix(0x0a0b, 0x0c)})
	want = append([]byte{2}, d...)
	want = append(want, 3, 0, 0, 0, 0, 0, 0, 0x0a, 0x0b, 0, 0, 0, 0x0c)
	want = append(want, tok...)
	want = append(want, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	assert.Equal(t, want, b)
}

// A record written before tokens still decodes, with no token and no
// creation time.
func TestVersion1(t *testing.T) {
	d := bytes.Repeat([]byte{0xdd}, 32)
	v1 := append([]byte{1}, d...)
	v1 = append(v1, 1, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0, 6, 2, 'o', 'k', 1, 0xaa)
	got, err := Decode(v1)
	require.NoError(t, err)
	assert.True(t, replay.Record{Digest: d, Expires: time.Unix(0x0102030405, 6), State: "ok", Status: []byte{0xaa}}.Equal(got))
	assert.Equal(t, byte(2), v1[StateOffset1])
}

func TestMalformed(t *testing.T) {
	good := Encode(sample()[1])
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	zeroExpiry := Encode(sample()[0])
	for name, b := range map[string][]byte{
		"empty":                nil,
		"short header":         good[:headerSize-1],
		"version":              mutate(func(b []byte) []byte { b[0] = 3; return b }),
		"flags":                mutate(func(b []byte) []byte { b[IdentitySize] = 3; return b }),
		"idflags":              mutate(func(b []byte) []byte { b[1+DigestSize] = 4; return b }),
		"nanos":                mutate(func(b []byte) []byte { b[IdentitySize+9] = 0xff; return b }),
		"token without flag":   mutate(func(b []byte) []byte { b[IdentitySize-1] = 1; return b }),
		"created without flag": mutate(func(b []byte) []byte { b[2+DigestSize] = 1; return b }),
		"time without flag": func() []byte {
			b := bytes.Clone(zeroExpiry)
			b[IdentitySize+8] = 1
			return b
		}(),
		"no state length":  good[:headerSize],
		"state past end":   mutate(func(b []byte) []byte { b[headerSize] = 100; return b }),
		"truncated status": good[:len(good)-1],
		"trailing":         append(bytes.Clone(good), 0),
		"non-minimal":      append(append(bytes.Clone(zeroExpiry[:headerSize]), 0x80, 0x00), 0),
		"huge length":      append(bytes.Clone(zeroExpiry[:headerSize]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	} {
		rec, err := Decode(b)
		assert.ErrorIs(t, err, ErrMalformed, name)
		assert.Nil(t, rec.Digest, name)
	}
}

func TestCheck(t *testing.T) {
	d := make([]byte, 32)
	assert.NoError(t, Check(replay.Key{Iss: "i", Hop: "h"}, &replay.Record{Digest: d}))
	assert.NoError(t, Check(replay.Key{Iss: "i", Hop: "h"}, nil))
	assert.ErrorIs(t, Check(replay.Key{Hop: "h"}, nil), replay.ErrInvalid)
	assert.ErrorIs(t, Check(replay.Key{Iss: "i"}, nil), replay.ErrInvalid)
	assert.ErrorIs(t, Check(replay.Key{Iss: "i", Hop: "h"}, &replay.Record{Digest: d[:31]}), replay.ErrInvalid)
	assert.ErrorIs(t, Check(replay.Key{Iss: "i", Hop: "h"}, &replay.Record{Digest: d, Token: d[:15]}), replay.ErrInvalid)
}

func FuzzDecode(f *testing.F) {
	for _, rec := range sample() {
		f.Add(Encode(rec))
	}
	d := sha256.Sum256([]byte("offer"))
	for _, status := range [][]byte{jwsStatus(statusKey, d[:]), []byte("e30.e30.AA"), {1, 2}} {
		f.Add(EncodeKeyed(statusKey, replay.Record{Digest: d[:], State: "accepted", Status: status}))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		keyed, kerr := DecodeKeyed(statusKey, b)
		if len(b) > 0 && b[0] == Version3 {
			// Version 3 decodes with its key only, and is not the only
			// encoding of its record (a status may be kept in either
			// form): a record that decodes encodes to one that decodes
			// to the same record.
			if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("version 3 decoded without its key: %v", err)
			}
			if kerr != nil {
				if !errors.Is(kerr, ErrMalformed) {
					t.Fatalf("error %v does not wrap ErrMalformed", kerr)
				}
				return
			}
			back, err := DecodeKeyed(statusKey, EncodeKeyed(statusKey, keyed))
			if err != nil || !back.Equal(keyed) {
				t.Fatalf("version 3 %x: %+v came back as %+v (%v)", b, keyed, back, err)
			}
			return
		}
		rec, err := Decode(b)
		if (err == nil) != (kerr == nil) || (err == nil && !rec.Equal(keyed)) {
			t.Fatalf("DecodeKeyed differs from Decode on version %x: %v, %v", b[:1], err, kerr)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if rec.Digest != nil || rec.Status != nil || rec.State != "" || !rec.Expires.IsZero() {
				t.Fatalf("error with a non-empty record %+v", rec)
			}
			return
		}
		// Decoding is strict: a value that decodes is the only encoding of
		// its record, in its version.
		again := Encode(rec)
		if b[0] == Version1 {
			// Re-encoded as version 2: the same record, and the same
			// octets from the flags on.
			back, err := Decode(again)
			if err != nil || !back.Equal(rec) || !bytes.Equal(again[IdentitySize:], b[1+DigestSize:]) {
				t.Fatalf("version 1 %x re-encoded as %x (%v)", b, again, err)
			}
			return
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode/encode changed %x to %x", b, again)
		}
	})
}

func TestOfferRoundTrip(t *testing.T) {
	d := sha256.Sum256([]byte("offer"))
	for _, rec := range []replay.OfferRecord{
		{Hop: "h", To: "t", Digest: d[:]},
		{Hop: "h\x00é", To: "t", Digest: d[:], Prev: d[:], Work: "w", Open: true, Handoff: []byte{0, 1},
			State: "accepted", Reason: "r", Status: []byte{0xff}, Canceled: true, Observed: true,
			Created: time.Unix(-5, 999999999), Version: 1 << 60},
		{Hop: "h", To: "t", Digest: d[:], Expires: time.Date(9999, 1, 1, 0, 0, 0, 1, time.UTC)},
	} {
		got, err := DecodeOffer(EncodeOffer(rec))
		require.NoError(t, err)
		assert.True(t, rec.Equal(got), "%+v != %+v", rec, got)
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"not a map": {0x01},
		"no digest": EncodeOffer(replay.OfferRecord{Hop: "h", To: "t"}),
		"format":    {0xa1, 0x00, 0x02},
		"unknown":   {0xa1, 0x18, 0x63, 0x01},
		"trailing":  append(EncodeOffer(replay.OfferRecord{Hop: "h", To: "t", Digest: d[:]}), 0),
	} {
		_, err := DecodeOffer(b)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
}
