package pgstore_test

import (
	"context"
	"database/sql"
	"log"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/replay/pgstore"
)

// Every replica of an agent opens the same tables of the service's own
// database: the delegate's memory of hops and the delegator's records.
// (Compiled, not run: it needs a server.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	hops, err := pgstore.Open(ctx, db, pgstore.Options{SweepEvery: time.Minute})
	if err != nil {
		log.Fatal(err) // fail closed: no store, no agent
	}
	defer hops.Close()
	offers, err := pgstore.OpenOffers(ctx, db, pgstore.Options{SweepEvery: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer offers.Close()

	cfg := handoff.Config{Store: hops, Offers: offers} // with the agent's ID, Signer and Trust
	_ = cfg
}
