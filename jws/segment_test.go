package jws

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// decodeSegment accepts exactly the segments of base64url characters that
// decode and encode back to themselves, as its earlier form checked by
// encoding again.
func FuzzDecodeSegment(f *testing.F) {
	for _, s := range []string{"", "A", "AA", "AB", "AAA", "AAB", "AAAA", "AQ", "AR", "AA==", "A\nA", "AA\r", "\nAAAA", "+/", "-_", "eyJhIjoxfQ"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, seg []byte) {
		got, err := decodeSegment(seg)
		want, werr := base64.RawURLEncoding.Strict().DecodeString(string(seg))
		ok := len(seg) > 0 && werr == nil && base64.RawURLEncoding.EncodeToString(want) == string(seg)
		if (err == nil) != ok || (ok && !bytes.Equal(got, want)) {
			t.Fatalf("%q: decodeSegment %x, %v; reference %x, canonical %v", seg, got, err, want, ok)
		}
	})
}
