package keyset

import (
	"net/http"
	"testing"
	"time"

	"github.com/agentproto/handoff"
)

// FuzzDocument: a fetched document and its caching headers never panic;
// a document is refused or yields keys that each read back, from the
// public JWK a Publisher would serve, as the same key pinned to the same
// alg; a lifetime is never negative and never outside the floor and the
// ceiling.
func FuzzDocument(f *testing.F) {
	p, _ := handoff.NewSigner(mustKey(f), handoff.JWS, nil)
	jwk, _ := PublicJWK(p.Key())
	f.Add([]byte(`{"keys":[`+string(jwk)+`]}`), "max-age=60", "", false)
	f.Add([]byte(`{"keys":[]}`), "no-store, max-age=5", "Tue, 01 Dec 2026 20:00:00 GMT", true)
	f.Add([]byte(`{"spiffe://a":{"keys":[`+string(jwk)+`]}}`), "public, max-age=\"9\"", "junk", true)
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: "https://k.example/a"}}, Document: "https://k.example/doc",
		MinRefresh: time.Second, MaxRefresh: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, cc, expires string, doc bool) {
		ep := src.byID[alice]
		if doc {
			ep = src.doc
		}
		keys, err := src.parse(ep, body)
		if err != nil && keys != nil {
			t.Fatal("keys with an error")
		}
		for _, ks := range keys {
			for _, k := range ks {
				b, err := PublicJWK(k)
				if err != nil {
					t.Fatal(err)
				}
				back, err := ParseJWK(b)
				if err != nil || back.Alg != k.Alg || keyID(back) != keyID(k) {
					t.Fatalf("a key read from a document does not read back: %v", err)
				}
			}
		}
		h := http.Header{"Cache-Control": {cc}, "Expires": {expires}, "Age": {cc}}
		if d := src.lifetime(h, time.Unix(1793000000, 0)); d < time.Second || d > time.Hour {
			t.Fatalf("lifetime %s outside [1s, 1h]", d)
		}
		if d, _ := freshness(h, time.Unix(1793000000, 0)); d < 0 {
			t.Fatalf("negative freshness %s", d)
		}
	})
}
