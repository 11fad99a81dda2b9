package scitt_test

import (
	"context"
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/scitt"
)

// Any statement and receipt octets: no panic; a statement that normalizes
// normalizes to a tagged message that normalizes to itself; a receipt is
// verified only if the vector's valid receipt is what was given.
func FuzzCheckRef(f *testing.F) {
	vs := loadVectors(f)
	var checker *scitt.Checker
	for _, v := range vs {
		rc, _ := scitt.ReceiptFromProof(v.ref.Proof)
		f.Add(v.statement, rc)
		if v.name == "valid" {
			checker = v.checker
		}
	}
	if checker == nil {
		f.Fatal("no valid vector")
	}
	f.Fuzz(func(t *testing.T, stmt, receipt []byte) {
		if n, err := scitt.NormalizeStatement(stmt); err == nil {
			again, err := scitt.NormalizeStatement(n)
			if err != nil || string(again) != string(n) {
				t.Fatalf("normalizing is not idempotent: %v", err)
			}
		}
		d, err := scitt.StatementDigest(stmt)
		if err != nil {
			d = digest.SHA256(stmt)
		}
		r := ref.Ref{Kind: ref.KindSCITTReceipt, Dig: d, Loc: "l", Proof: receipt}
		src := ref.ByLoc(map[string]ref.Object{"l": {Octets: stmt}})
		res := ref.Checkers{ref.KindSCITTReceipt: checker}.Check(context.Background(), r, src)
		if res.Outcome == ref.Verified && checker.VerifyReceipt(stmt, receipt) != nil {
			t.Fatal("verified without a verifying receipt")
		}
	})
}
