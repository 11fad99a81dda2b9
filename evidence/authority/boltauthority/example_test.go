package boltauthority_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/boltauthority"
)

// The authority ledger of a delegate that runs as one process, in one
// bbolt file: give it to every hop's guard (evidence.HostConfig's
// Guard.Ledger, or evidence.GuardConfig.Ledger). What the guards recorded
// before a restart (a crash included: every call is synced before it
// returns) is refused after it, and an operator reads the hops' records
// from the file.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "authority")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "authority.db")
	hop := digest.SHA256([]byte("the offer's octets")).String() // Received.Digest
	refund := authority.Effect{Hop: hop, Action: "refund_issue", OperationID: "refund-INV-1042", At: time.Now()}

	ledger, err := boltauthority.Open(path, boltauthority.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("refund:", ledger.Perform(ctx, refund))
	ledger.Close() // the process stops

	ledger, err = boltauthority.Open(path, boltauthority.Options{}) // and starts again on its file
	if err != nil {
		panic(err)
	}
	defer ledger.Close()
	fmt.Println("refund after the restart, refused:", errors.Is(ledger.Perform(ctx, refund), authority.ErrRepeated))
	_ = ledger.Finish(ctx, hop, authority.Final{State: "completed", Detail: "INV-1042 refunded", At: time.Now()})
	rec, _ := ledger.Hop(ctx, hop)
	fmt.Println("the hop's final disposition:", rec.Final.State, "-", rec.Final.Detail)
	// Output:
	// refund: <nil>
	// refund after the restart, refused: true
	// the hop's final disposition: completed - INV-1042 refunded
}
