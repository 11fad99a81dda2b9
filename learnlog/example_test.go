package learnlog_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentproto/handoff/learnlog"
	"github.com/agentproto/handoff/ref"
)

// A receiver registers a learnlog.Checker with the keys it trusts for the
// record's producer. The head is the whole proof: no RefSource is needed.
// Here the keys and references come from testdata/vectors.
func ExampleChecker() {
	vs := map[string]*vector{}
	for _, v := range loadVectors(&exampleTB{}) {
		vs[v.name] = v
	}
	checkers := ref.Checkers{ref.KindLearnlogHead: &learnlog.Checker{Keys: vs["valid"].checker.Keys}}
	for _, name := range []string{"valid", "valid-received-not-jcs", "wrong-digest", "non-thumbprint-kid"} {
		res := checkers.Check(context.Background(), vs[name].ref, nil)
		fmt.Println(name+":", res.Outcome)
	}
	// Output:
	// valid: verified
	// valid-received-not-jcs: verified
	// wrong-digest: mismatch
	// non-thumbprint-kid: unverifiable
}

// exampleTB lets an example load the vectors; a failure panics.
type exampleTB struct{ testing.TB }

func (exampleTB) Helper()                   {}
func (exampleTB) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (exampleTB) FailNow()                  { panic("vectors") }
