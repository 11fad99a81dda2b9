package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestA2A1(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		`triage: task TASK_STATE_INPUT_REQUIRED, hop "accepted": refund_issue waits for finance-lead (operation refund-INV-1042)`,
		"payments: ledger_read already done on this hop; not again",
		`triage: refund INV-1042 after the approval: task TASK_STATE_COMPLETED, hop "completed" (reason ""), resolved: true`,
		`payments: refused: evidence: action denied: "card_charge"`,
		`triage: charge the card: task TASK_STATE_FAILED, hop "failed" (reason "policy"), resolved: true`,
		`triage: refund INV-1042 with an outdated package: task TASK_STATE_REJECTED, hop "rejected" (reason "policy"), resolved: true`,
		`triage: the payments agent said "evidence: artifact-mismatch /artifacts/0/ref"`,
		// The paused execution and the resumed one for hop 1, one for hop
		// 2, none for hop 3; each effect once.
		"payments: the executor ran 3 times: 1 ledger read, 1 refund; unresolved hops at triage: 0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, once := range []string{"payments: refunded INV-1042", "payments: read INV-1042 from the ledger"} {
		if n := strings.Count(got, once); n != 1 {
			t.Errorf("%q %d times:\n%s", once, n, got)
		}
	}
	if strings.Contains(got, "charged the card") {
		t.Errorf("the denied charge ran:\n%s", got)
	}
}
