package cose_test

import (
	"testing"

	"github.com/agentproto/handoff/cose"
)

// BenchmarkOpen: one signed handoff in COSE form, opened with its key.
func BenchmarkOpen(b *testing.B) {
	key := newKey(b, cose.ES256)
	msg, err := cose.Sign(testPayload, key, cose.ES256, "k", nil)
	if err != nil {
		b.Fatal(err)
	}
	keys := []cose.Key{{Public: key.Public(), Alg: cose.ES256}}
	lookup := func(cose.Header, []byte) ([]cose.Key, error) { return keys, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := cose.Open(msg, lookup, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse: the structure alone (UnsafePayload), no signature.
func BenchmarkParse(b *testing.B) {
	key := newKey(b, cose.ES256)
	msg, err := cose.Sign(testPayload, key, cose.ES256, "k", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cose.UnsafePayload(msg, 0); err != nil {
			b.Fatal(err)
		}
	}
}
