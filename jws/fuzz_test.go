package jws_test

import (
	"bytes"
	"testing"

	"github.com/agentproto/handoff/jws"
)

// FuzzOpen: Open never panics; an error means a nil payload and a zero
// header; whatever opens was signed by the trusted key, so it is the seed
// token itself (a one-octet change to a signed token never verifies); and
// UnsafePayload agrees with Open on what the payload is.
func FuzzOpen(f *testing.F) {
	key := exampleKey()
	good, err := jws.Sign([]byte(`{"v":1,"type":"offer"}`), key, jws.ES256, "k", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("e30.e30.AAAA"))
	f.Add([]byte(""))
	lookup := func(jws.Header, []byte) ([]jws.Key, error) {
		return []jws.Key{{Public: key.Public(), Alg: jws.ES256}}, nil
	}
	f.Fuzz(func(t *testing.T, token []byte) {
		payload, h, err := jws.Open(token, lookup, 4096)
		if err != nil {
			if payload != nil || h != (jws.Header{}) {
				t.Fatalf("error %v with payload %q, header %v", err, payload, h)
			}
			return
		}
		// Low-S and high-S forms of the one signature both verify.
		if !bytes.Equal(token[:bytes.LastIndexByte(token, '.')], good[:bytes.LastIndexByte(good, '.')]) {
			t.Fatalf("opened a token that was not signed: %q", token)
		}
		unsafe, err := jws.UnsafePayload(token, 4096)
		if err != nil || !bytes.Equal(unsafe, payload) {
			t.Fatalf("UnsafePayload = %q, %v; Open = %q", unsafe, err, payload)
		}
	})
}
