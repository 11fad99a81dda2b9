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
	// Every hop's guard records in it: give it to the host's middleware
	// (a2a1hop, a2a03hop or mcphop ServerConfig.Evidence), which checks
	// the package beside each offer and builds the hop's guard over it.
	host := &evidence.HostConfig{Guard: evidence.GuardConfig{Ledger: ledger}}
	_ = host
}
