package jws_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/agentproto/handoff/jws"
)

// exampleKey is a fixed P-256 key so that the examples print the same kid
// every time. Never use a key printed in documentation.
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
	kid, err := jws.Thumbprint(key.Public()) // HC-16: kid is the JWK thumbprint
	if err != nil {
		panic(err)
	}
	token, err := jws.Sign([]byte(`{"v":1,"type":"offer"}`), key, jws.ES256, kid, nil)
	if err != nil {
		panic(err)
	}
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(string(token), ".")[0])
	fmt.Println(string(header))
	// Output:
	// {"alg":"ES256","kid":"rCjGoIdkcqqu6nQFjV9FBzadfUucU4_4o63a3pFzIW0","typ":"agent-handoff+jwt"}
}

func ExampleOpen() {
	key := exampleKey()
	token, err := jws.Sign([]byte(`{"v":1,"type":"offer","iss":"spiffe://a.example/agent/planner"}`), key, jws.ES256, "planner-1", nil)
	if err != nil {
		panic(err)
	}

	// The trust configuration: which keys speak for which iss, each pinned
	// to one algorithm (HC-21, HC-22).
	trusted := map[string][]jws.Key{
		"spiffe://a.example/agent/planner": {{Public: key.Public(), Alg: jws.ES256}},
	}
	lookup := func(h jws.Header, payload []byte) ([]jws.Key, error) {
		// payload is not verified yet: read iss only to pick the keys.
		var iss string
		if _, rest, ok := strings.Cut(string(payload), `"iss":"`); ok {
			iss, _, _ = strings.Cut(rest, `"`)
		}
		return trusted[iss], nil
	}

	payload, h, err := jws.Open(token, lookup, jws.DefaultMaxSize)
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Alg, h.KID)
	fmt.Println(string(payload))

	// One changed character of the signature is refused, with an error a
	// program can branch on.
	i := len(token) - 10
	if token[i] == 'A' {
		token[i] = 'B'
	} else {
		token[i] = 'A'
	}
	_, _, err = jws.Open(token, lookup, jws.DefaultMaxSize)
	fmt.Println(errors.Is(err, jws.ErrSignature))
	// Output:
	// ES256 planner-1
	// {"v":1,"type":"offer","iss":"spiffe://a.example/agent/planner"}
	// true
}
