package carriage_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
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
