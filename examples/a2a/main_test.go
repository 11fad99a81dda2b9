package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestA2ARoundTrip(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		`A2A-Extensions asks for the handoff extension: true`,
		`planner: verified status "accepted" signed by spiffe://b.example/agent/coder`,
		`planner: verified status "completed" signed by spiffe://b.example/agent/coder`,
		"is completed, resolved: true",
		"is a retransmission, not processed again",
		"planner: the retransmission got back the identical status octets",
		"coder: working on hop ",
		"coder: rejected: bad-signature",
		"planner: the coder refused it (task rejected), with no status",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// The executor ran once: the retransmission and the forgery never
	// reached it.
	if n := strings.Count(got, "coder: working on hop "); n != 1 {
		t.Errorf("the executor ran %d times:\n%s", n, got)
	}
}
