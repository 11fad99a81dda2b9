package cose_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff/cose"
)

// exampleKey is a fixed P-256 key so that the examples print the same
// output every time. Never use a key printed in documentation.
func exampleKey() *ecdsa.PrivateKey {
	d := make([]byte, 32)
	d[31] = 42
	key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
	if err != nil {
		panic(err)
	}
	return key
}

func ExampleSign() {
	key := exampleKey()
	em, _ := cbor.CoreDetEncOptions().EncMode() // one key order, so one output
	payload, _ := em.Marshal(map[string]any{"v": 1, "type": "offer"})
	msg, err := cose.Sign(payload, key, cose.ES256, "planner-1", nil)
	if err != nil {
		panic(err)
	}
	// Show the message without its 64 signature octets.
	var m struct {
		_           struct{} `cbor:",toarray"`
		Protected   []byte
		Unprotected map[int]any
		Payload     []byte
		Signature   []byte
	}
	var tag cbor.RawTag
	if err := cbor.Unmarshal(msg, &tag); err != nil {
		panic(err)
	}
	if err := cbor.Unmarshal(tag.Content, &m); err != nil {
		panic(err)
	}
	protected, _ := cbor.Diagnose(m.Protected)
	payloadDiag, _ := cbor.Diagnose(m.Payload)
	fmt.Println("tag:", tag.Number)
	fmt.Println("protected:", protected)
	fmt.Println("unprotected:", m.Unprotected)
	fmt.Println("payload:", payloadDiag)
	fmt.Println("signature octets:", len(m.Signature))
	// Output:
	// tag: 18
	// protected: {1: -7, 3: "application/agent-handoff+cbor", 4: h'706c616e6e65722d31'}
	// unprotected: map[]
	// payload: {"v": 1, "type": "offer"}
	// signature octets: 64
}

func ExampleOpen() {
	key := exampleKey()
	payload, _ := cbor.Marshal(map[string]any{"iss": "spiffe://a.example/agent/planner"})
	msg, err := cose.Sign(payload, key, cose.ES256, "planner-1", nil)
	if err != nil {
		panic(err)
	}

	// The trust configuration: which keys speak for which iss, each pinned
	// to one algorithm (HC-21, HC-22).
	trusted := map[string][]cose.Key{
		"spiffe://a.example/agent/planner": {{Public: key.Public(), Alg: cose.ES256}},
	}
	lookup := func(h cose.Header, payload []byte) ([]cose.Key, error) {
		// payload is not verified yet: read iss only to pick the keys.
		var p struct {
			Iss string `cbor:"iss"`
		}
		if err := cbor.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		return trusted[p.Iss], nil
	}

	got, h, err := cose.Open(msg, lookup, cose.DefaultMaxSize)
	if err != nil {
		panic(err)
	}
	diag, _ := cbor.Diagnose(got)
	fmt.Println(h.Alg, h.KID)
	fmt.Println(diag)

	// A value added to the unprotected header after signing is refused.
	// It sits before the payload (a two-octet head here) and the signature
	// (a two-octet head and 64 octets).
	i := len(msg) - 66 - (2 + len(payload)) - 1
	if msg[i] != 0xa0 {
		panic("unexpected layout")
	}
	tampered := append(append(append([]byte(nil), msg[:i]...), 0xa1, 0x04, 0x40), msg[i+1:]...) // {4: h''}
	_, _, err = cose.Open(tampered, lookup, cose.DefaultMaxSize)
	fmt.Println(errors.Is(err, cose.ErrMalformed))
	// Output:
	// ES256 planner-1
	// {"iss": "spiffe://a.example/agent/planner"}
	// true
}
