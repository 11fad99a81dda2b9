package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestADK(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"payments: ledger_read ran for INV-1042",
		`payments: card_charge refused: evidence: action denied: "card_charge"`,
		"triage: the payments agent asks alice to confirm refund_issue for finance-lead (operation refund-INV-1042)",
		"payments: refund_issue ran for INV-1042",
		`triage: 1 offer; the hop is "completed", resolved: true; unresolved hops: 0`,
		"payments: approvals recorded under the hop: 1, by finance-lead",
		// The asking run and the resumed one; each allowed or approved
		// tool once, the denied one never.
		"payments: executor runs 2; tool runs: ledger_read 1, card_charge 0, refund_issue 1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if i, j := strings.Index(got, "asks alice to confirm"), strings.Index(got, "refund_issue ran"); i < 0 || j < i {
		t.Errorf("the refund ran before its confirmation:\n%s", got)
	}
}
