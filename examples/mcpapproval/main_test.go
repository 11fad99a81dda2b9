package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMCPApproval(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"triage: connected to the payments agent (MCP 2026-07-28)",
		"finance lead: approves refund_issue (operation refund-INV-1042), signed",
		"payments: refunded INV-1042 for hop ",
		`triage: refund INV-1042: hop "completed" (reason ""), resolved: true`,
		"payments: the ledger holds the signed approval of refund-INV-1042 by spiffe://shop.example/people/finance-lead, 0 uses left",
		"finance lead: declines refund_issue (operation refund-INV-2001)",
		`triage: refund INV-2001: hop "failed" (reason "policy"), resolved: true`,
		// One question per approval; the tool ran only for the approved
		// call's resumption, and refunded once.
		"the finance lead was asked 2 times; the tool ran 1 times and refunded 1; unresolved hops: 0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "refunded INV-2001") {
		t.Errorf("the declined refund ran:\n%s", got)
	}
}
