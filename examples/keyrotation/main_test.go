package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestKeyRotation(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	// Each line in order; kids are random.
	lines := []string{
		`planner: publishes key (\S+); the coder trusts it`,
		`coder: hop 1, signed with \S+: accepted`,
		`planner: publishes key \S+ beside \S+`,
		`planner: the coder fetched the new set; signing with the new key`,
		`coder: hop 2, signed with \S+: accepted`,
		`coder: hop 1 retransmitted, its identical octets signed with \S+: a retransmission, answered with the last status`,
		`planner: retires key \S+`,
		`coder: hop 1 retransmitted in the grace period: a retransmission, answered with the last status`,
		`coder: the grace period of the retired key is over`,
		`coder: hop 1 retransmitted after the grace period: refused, untrusted-key`,
		`coder: hop 3, signed with \S+: accepted`,
	}
	rest := got
	for _, l := range lines {
		loc := regexp.MustCompile(l).FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("output lacks %q after what came before:\n%s", l, got)
		}
		rest = rest[loc[1]:]
	}
	if n := strings.Count(got, ": accepted\n"); n != 3 {
		t.Errorf("%d offers accepted, want 3:\n%s", n, got)
	}
}
