package learnlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/learnlog"
	"github.com/agentproto/handoff/ref"
)

// Any JSON text as a head: no panic, and verified only when the head's
// signature verifies and dig is over its JCS form.
func FuzzCheckRef(f *testing.F) {
	var checker *learnlog.Checker
	for _, v := range loadVectors(f) {
		b, _ := json.Marshal(v.ref.Proof)
		f.Add(b)
		if v.name == "valid" {
			checker = v.checker
		}
	}
	if checker == nil {
		f.Fatal("no valid vector")
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		var p any
		if dec.Decode(&p) != nil {
			return
		}
		d, err := learnlog.HeadDigest(p)
		if err != nil {
			d = digest.SHA256(text)
		}
		r := ref.Ref{Kind: ref.KindLearnlogHead, Dig: d, Proof: p}
		res := ref.Checkers{ref.KindLearnlogHead: checker}.Check(context.Background(), r, nil)
		if res.Outcome == ref.Verified {
			if _, err := checker.Verify(p); err != nil {
				t.Fatalf("verified, but Verify says %v", err)
			}
		}
	})
}
