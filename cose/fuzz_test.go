package cose_test

import (
	"bytes"
	"testing"

	"github.com/agentproto/handoff/cose"
)

// FuzzOpen: Open never panics; an error means a nil payload and a zero
// header; whatever opens was signed by the trusted key, so it is the seed
// message up to its signature (whose high-S twin also verifies); and
// UnsafePayload agrees with Open on what the payload is.
func FuzzOpen(f *testing.F) {
	key := exampleKey()
	good, err := cose.Sign([]byte{0xa1, 0x61, 0x76, 0x01}, key, cose.ES256, "k", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[1:])
	f.Add([]byte{0xd2, 0x84, 0x40, 0xa0, 0x40, 0x40})
	lookup := func(cose.Header, []byte) ([]cose.Key, error) {
		return []cose.Key{{Public: key.Public(), Alg: cose.ES256}}, nil
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		payload, h, err := cose.Open(msg, lookup, 4096)
		if err != nil {
			if payload != nil || h != (cose.Header{}) {
				t.Fatalf("error %v with payload %x, header %v", err, payload, h)
			}
			return
		}
		if len(msg) != len(good) || !bytes.Equal(msg[:len(msg)-64], good[:len(good)-64]) {
			t.Fatalf("opened a message that was not signed: %x", msg)
		}
		unsafe, err := cose.UnsafePayload(msg, 4096)
		if err != nil || !bytes.Equal(unsafe, payload) {
			t.Fatalf("UnsafePayload = %x, %v; Open = %x", unsafe, err, payload)
		}
	})
}
