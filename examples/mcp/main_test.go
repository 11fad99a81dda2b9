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
		`planner: verified status "accepted" signed by spiffe://b.example/agent/coder`,
		"coder: hop ",
		"is a retransmission, not processed again",
		"planner: the retransmission got back the identical status octets",
		`planner: verified status "completed"`,
		"is completed, resolved: true",
		"coder: rejected: bad-signature",
		"planner: the tool refused it: rejected: bad-signature",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
