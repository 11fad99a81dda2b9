package ledger_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"

	_ "modernc.org/sqlite"

	"github.com/agentproto/handoff/ledger"
)

// A delegate does the work of a hop in its own database, together with the
// record of the hop (HC-43), and later asks what the record shows.
func ExampleSQL_Do() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database

	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (op_id TEXT NOT NULL, item TEXT NOT NULL)`); err != nil {
		panic(err)
	}
	l, err := ledger.NewSQL(db, "handoff_ledger")
	if err != nil {
		panic(err)
	}
	if err := l.Init(ctx); err != nil {
		panic(err)
	}

	iss, hop := "https://travel.example/agent", "01J9ZK3M"
	digest := sha256.Sum256([]byte("the offer's octets"))
	placeOrder := func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO orders (op_id, item) VALUES (?, ?)`,
			ledger.OperationID(iss, hop), "one ticket")
		return err
	}

	fmt.Println("do:", l.Do(ctx, iss, hop, digest[:], placeOrder))

	// A retransmission of the offer: the work is not done twice (HC-38).
	err = l.Do(ctx, iss, hop, digest[:], placeOrder)
	fmt.Println("again:", errors.Is(err, ledger.ErrRecorded))

	var orders int
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders`).Scan(&orders)
	fmt.Println("orders:", orders)

	o, _ := l.Outcome(ctx, iss, hop, digest[:], false)
	fmt.Println("outcome:", o)

	// A hop never recorded: absence proves nothing unless the caller knows
	// that no step for it can still complete (HC-43, HC-45).
	o, _ = l.Outcome(ctx, iss, "other-hop", digest[:], false)
	fmt.Println("unsettled:", o)
	o, _ = l.Outcome(ctx, iss, "other-hop", digest[:], true)
	fmt.Println("settled:", o)
	// Output:
	// do: <nil>
	// again: true
	// orders: 1
	// outcome: took-effect
	// unsettled: unknown
	// settled: no-effect
}

// The identifier is handed to an external system as an idempotency key, so
// that the other system's record of the attempt can be found later.
func ExampleOperationID() {
	id := ledger.OperationID("https://travel.example/agent", "01J9ZK3M")
	fmt.Println(id == ledger.OperationID("https://travel.example/agent", "01J9ZK3M"))
	fmt.Println(len(id))
	fmt.Println(ledger.OperationID("a", "bc") == ledger.OperationID("ab", "c"))
	fmt.Println(ledger.OperationID("a", "bc"))
	// Output:
	// true
	// 47
	// false
	// hop-jSl9FVv1P59sOfzMPPvWQ1x0ilNXZUFfUIpvoMUJs9s
}
