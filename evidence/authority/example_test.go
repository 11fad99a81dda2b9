package authority_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
)

// The ledger is the system of record of what a receiving agent did with
// the authority its handoff packages gave it. An evidence.Guard writes
// it (GuardConfig.Ledger); an operator reads it. Here the calls a guard
// makes are made by hand: an effect performed once and refused when
// presented again, a must-ask effect that needs its approval, and the
// hop's acknowledgement and final disposition, read back with Hop and
// Audit.
func Example() {
	ctx := context.Background()
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	// The hop is named by its offer's handoff digest (Received.Digest).
	hop := digest.SHA256([]byte("the offer's octets")).String()
	// boltauthority, redisauthority or pgauthority to outlive a restart.
	ledger := authority.NewMemory()

	_ = ledger.Acknowledge(ctx, hop, authority.Ack{Decision: authority.Accepted, Package: digest.SHA256([]byte("the package's JCS form")).String(), At: at})

	read := authority.Effect{Hop: hop, Action: "ledger_read", OperationID: "read-INV-1042", At: at}
	fmt.Println("read:", ledger.Perform(ctx, read))
	fmt.Println("read again:", errors.Is(ledger.Perform(ctx, read), authority.ErrRepeated))

	refund := authority.Effect{Hop: hop, Action: "refund_issue", OperationID: "refund-INV-1042", NeedsApproval: true, At: at}
	fmt.Println("refund without approval:", errors.Is(ledger.Perform(ctx, refund), authority.ErrNoApproval))
	_ = ledger.Grant(ctx, authority.Approval{ID: "approval-1", Hop: hop, Action: "refund_issue", OperationID: "refund-INV-1042",
		Approver: "finance-lead", Issued: at, Expires: at.Add(time.Hour), Source: authority.SourceOperator, Evidence: []byte("console:alice")})
	fmt.Println("refund approved:", ledger.Perform(ctx, refund))

	_ = ledger.Finish(ctx, hop, authority.Final{State: "completed", Detail: "INV-1042 refunded", At: at.Add(time.Minute)})
	fmt.Println("after the hop ended:", errors.Is(ledger.Perform(ctx, authority.Effect{Hop: hop, Action: "ledger_read", OperationID: "read-2", At: at}), authority.ErrFinished))

	rec, _ := ledger.Hop(ctx, hop)
	fmt.Printf("hop: acknowledged %s, final %s (%s)\n", rec.Ack.Decision, rec.Final.State, rec.Final.Detail)
	trail, _ := authority.Audit(ctx, ledger, "refund-INV-1042")
	fmt.Printf("audit: %s on the hop, approved by %s\n", trail[0].Record.Action, trail[0].Approval.Approver)
	// Output:
	// read: <nil>
	// read again: true
	// refund without approval: true
	// refund approved: <nil>
	// after the hop ended: true
	// hop: acknowledged accepted, final completed (INV-1042 refunded)
	// audit: refund_issue on the hop, approved by finance-lead
}
