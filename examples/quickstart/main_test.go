package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"1. planner offers hop",
		"2. coder checked the offer from spiffe://a.example/agent/planner: accepted (chain full)",
		"4. planner verified the status: hop is accepted",
		"6. planner verified the status: hop is completed, resolved: true",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
