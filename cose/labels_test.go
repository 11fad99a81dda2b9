package cose_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/cose"
)

// labels is a header map: head, then the given pairs, then n labels 100,
// 101, ... each of {}, in a two-octet head, after the pairs.
func labels(head []byte, pairs []byte, n int) []byte {
	b := cat(head, pairs)
	for i := range n {
		b = append(b, 0x19, byte((100+i)>>8), byte(100+i), 0xa0)
	}
	return b
}

func mapHead(n int) []byte { return binary.BigEndian.AppendUint16([]byte{0xb9}, uint16(n)) }

// Headers are read in place, their labels counted before anything is
// kept (finding 2 of issue 35): 2000 labels of {} in either header open,
// in a definite or an indefinite map, as RFC 9052 section 3 allows; a
// label repeated after them, in a longer head, or in both headers, is
// still refused before the lookup; so is a label that is neither an int
// nor text. A negative label below -2^63 is an int (RFC 9052 section 3:
// "label = int / tstr") and opens.
func TestOpen_HC17_ManyLabels(t *testing.T) {
	key := newKey(t, cose.ES256)
	pub := key.Public()
	base := cat(enc(t, 1), enc(t, -7), enc(t, 3), enc(t, cose.ContentType), enc(t, 4), enc(t, []byte("k")))
	protNoKid := enc(t, map[int64]any{1: -7, 3: cose.ContentType})
	opens := map[string][]byte{
		"protected, 2000 labels":             craft(t, key, labels(mapHead(2003), base, 2000), testPayload),
		"protected, indefinite, 2000":        craft(t, key, append(labels([]byte{0xbf}, base, 2000), 0xff), testPayload),
		"unprotected, 2000 labels":           craftU(t, key, protNoKid, labels(mapHead(2000), nil, 2000), testPayload),
		"protected, a label below -2^63":     craft(t, key, cat([]byte{0xa4}, base, []byte{0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}), testPayload),
		"protected, text labels in chunks":   craft(t, key, cat([]byte{0xa5}, base, []byte{0x7f, 0x61, 'a', 0x61, 'b', 0xff, 0x00, 0x62, 'a', 'c', 0x00}), testPayload),
		"unprotected, kid after 2000 labels": craftU(t, key, protNoKid, labels(mapHead(2001), []byte{0x04, 0x41, 'k'}, 2000), testPayload),
	}
	for name, msg := range opens {
		payload, h, err := cose.Open(msg, pin(pub, cose.ES256), 1<<20)
		require.NoError(t, err, name)
		assert.Equal(t, testPayload, payload, name)
		assert.Equal(t, cose.ES256, h.Alg, name)
	}
	refused := map[string][]byte{
		"protected, label 100 again in a longer head": craft(t, key, append(labels(mapHead(2004), base, 2000), 0x1a, 0, 0, 0, 100, 0x00), testPayload),
		"protected, alg again after 2000 labels":      craft(t, key, append(labels(mapHead(2004), base, 2000), 0x01, 0x26), testPayload),
		"text label repeated across chunks":           craft(t, key, cat([]byte{0xa5}, base, []byte{0x7f, 0x61, 'a', 0x61, 'b', 0xff, 0x00, 0x62, 'a', 'b', 0x00}), testPayload),
		"label 2099 in both headers":                  craftU(t, key, labels(mapHead(2003), base, 2000), []byte{0xa1, 0x19, 0x08, 0x33, 0x00}, testPayload),
		"2000 labels in both headers":                 craftU(t, key, labels(mapHead(2002), base[:len(base)-3], 2000), labels(mapHead(2001), []byte{0x04, 0x41, 'k'}, 2000), testPayload),
		"a label that is a byte string":               craft(t, key, append(labels(mapHead(2004), base, 2000), 0x41, 0x01, 0x00), testPayload),
		"a label that is a float":                     craftU(t, key, protNoKid, labels(mapHead(2001), []byte{0xf9, 0x3c, 0x00, 0x00}, 2000), testPayload),
	}
	for name, msg := range refused {
		consulted := false
		_, _, err := cose.Open(msg, func(h cose.Header, p []byte) ([]cose.Key, error) {
			consulted = true
			return pin(pub, cose.ES256)(h, p)
		}, 1<<20)
		assert.ErrorIs(t, err, cose.ErrMalformed, name)
		assert.False(t, consulted, "%s: refused before the lookup", name)
	}
}
