package scitt_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/scitt"
)

// A receiver registers a scitt.Checker with the transparency-service keys
// it trusts; its RefSource delivers the Signed Statement by loc. Here the
// keys, statement and references come from testdata/vectors.
func ExampleChecker() {
	vs := map[string]*vector{}
	for _, v := range loadVectors(&exampleTB{}) {
		vs[v.name] = v
	}
	valid := vs["valid"]
	checkers := ref.Checkers{ref.KindSCITTReceipt: &scitt.Checker{Keys: valid.checker.Keys}}
	// Passed as handoff.Config{RefCheckers: checkers, RefSource: src, Refs: handoff.RefsRequired}.
	for _, name := range []string{"valid", "wrong-digest", "sibling-flipped"} {
		v := vs[name]
		res := checkers.Check(context.Background(), v.ref, v.source())
		fmt.Println(name+":", res.Outcome)
	}
	// Output:
	// valid: verified
	// wrong-digest: mismatch
	// sibling-flipped: unverifiable
}

// exampleTB lets an example load the vectors; a failure panics.
type exampleTB struct{ testing.TB }

func (exampleTB) Helper()                   {}
func (exampleTB) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (exampleTB) FailNow()                  { panic("vectors") }
