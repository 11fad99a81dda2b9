package pgauthority_test

import (
	"context"
	"database/sql"
	"log"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority/pgauthority"
)

// A guard whose ledger is the service's own PostgreSQL database: every
// replica opens the same ledger on its own pool, and refuses what any of
// them performed, after any restart.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://payments@db.internal/payments")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ledger, err := pgauthority.Open(ctx, db, pgauthority.Options{Name: "payments_authority"})
	if err != nil {
		log.Fatal(err) // wraps authority.ErrUnavailable: serve nothing
	}
	// The guard of each hop served, for the report CheckReceived gave.
	guardFor := func(rep *evidence.Report) (*evidence.Guard, error) {
		return evidence.NewGuard(ctx, rep, evidence.GuardConfig{Ledger: ledger})
	}
	_ = guardFor
}
