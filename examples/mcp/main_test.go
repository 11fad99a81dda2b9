package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMCPRoundTrip(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"coder: hop ",
		`planner: verified status "completed" signed by spiffe://b.example/agent/coder`,
		"is completed, resolved: true",
		"is a retransmission, not processed again",
		"planner: the retransmission got back the identical status octets",
		"coder: rejected: bad-signature",
		"planner: the tool refused it: rejected: bad-signature",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// The tool ran once: the retransmission and the forgery never reached it.
	if n := strings.Count(got, `: writing "`); n != 1 {
		t.Errorf("the tool ran %d times:\n%s", n, got)
	}
}
