package carriage_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
	"github.com/agentproto/handoff/ref"
)

// A status put into metadata comes back as the same octets: a JWS as its
// text, a COSE_Sign1 from its base64url text whatever the length of its
// tag's head (0xd2, or 0xd8 0x12 as RFC 8949 also allows, HC-19).
func TestStatus_RoundTrip(t *testing.T) {
	for name, s := range map[string]handoff.Signed{
		"JWS":                 {Format: handoff.JWS, Octets: []byte("eyJhbGciOiJFUzI1NiJ9.eyJ2IjoxfQ.AAAA")},
		"COSE, short tag":     {Format: handoff.COSE, Octets: []byte{0xd2, 0x84, 0x40, 0xa0, 0x41, 0x00, 0x41, 0x00}},
		"COSE, long tag head": {Format: handoff.COSE, Octets: []byte{0xd8, 0x12, 0x84, 0x40, 0xa0, 0x41, 0x00, 0x41, 0x00}},
	} {
		meta := map[string]any{}
		carriage.PutStatus(meta, "k", s)
		got, err := carriage.Status(meta, "k")
		require.NoError(t, err, name)
		assert.Equal(t, s.Octets, got, name)
	}
}

func TestStatus_BadInput(t *testing.T) {
	_, err := carriage.Status(map[string]any{}, "k")
	assert.ErrorIs(t, err, carriage.ErrAbsent)
	_, err = carriage.Status(map[string]any{"k": 3}, "k")
	assert.ErrorIs(t, err, handoff.ErrMalformed)
	// base64url text that is not a COSE_Sign1 is returned as text, for the
	// signature check to refuse.
	txt := base64.RawURLEncoding.EncodeToString([]byte{0xa1, 0x00, 0x00})
	got, err := carriage.Status(map[string]any{"k": txt}, "k")
	require.NoError(t, err)
	assert.Equal(t, []byte(txt), got)
}

// An object an offer names by digest (a package and its salt) comes back
// as the same octets after the metadata went through JSON, as an SDK
// re-serializes it: any octets, invalid UTF-8 included, travel as text.
func TestObject_RoundTripThroughJSON(t *testing.T) {
	for name, obj := range map[string]ref.Object{
		"plain":  {Octets: []byte(`{"handoff":{"id":"x"}}`)},
		"salted": {Octets: []byte{0xff, 0x00, '{', 0xc3}, Salt: bytes.Repeat([]byte{7}, 32)},
		"empty":  {Octets: []byte{}},
	} {
		meta := map[string]any{}
		carriage.PutObject(meta, "k", obj)
		b, err := json.Marshal(meta)
		require.NoError(t, err)
		var back map[string]any
		require.NoError(t, json.Unmarshal(b, &back))
		got, err := carriage.Object(back, "k")
		require.NoError(t, err, name)
		assert.Equal(t, obj.Octets, got.Octets, name)
		assert.Equal(t, obj.Salt, got.Salt, name)
	}
}

// Anything else under the key is malformed, never an object with other
// octets; nothing under it is ErrAbsent.
func TestObject_BadInput(t *testing.T) {
	_, err := carriage.Object(map[string]any{}, "k")
	assert.ErrorIs(t, err, carriage.ErrAbsent)
	for name, v := range map[string]any{
		"a string":           "eyJ9",
		"no octets":          map[string]any{"salt": "AAAA"},
		"octets not text":    map[string]any{"octets": 3},
		"padded base64url":   map[string]any{"octets": "AA=="},
		"standard base64":    map[string]any{"octets": "a+b/"},
		"salt not base64url": map[string]any{"octets": "AAAA", "salt": "!"},
	} {
		got, err := carriage.Object(map[string]any{"k": v}, "k")
		assert.ErrorIs(t, err, handoff.ErrMalformed, name)
		assert.Nil(t, got.Octets, name)
	}
}
