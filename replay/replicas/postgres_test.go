package replicas_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the driver "pgx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/pgstore"
)

// postgresDB opens a pool of the PostgreSQL server at HANDOFF_POSTGRES_DSN
// (by default the one .ci/postgres.sh starts), or skips the test, or fails
// it when CI or HANDOFF_REQUIRE_POSTGRES=1 is set.
func postgresDB(t *testing.T) *sql.DB {
	dsn := os.Getenv("HANDOFF_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://handoff@127.0.0.1:5439/postgres?sslmode=disable"
	}
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	db.SetMaxOpenConns(32)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		msg := fmt.Sprintf("no PostgreSQL server at %s: %v", dsn, err)
		if os.Getenv("CI") != "" || os.Getenv("HANDOFF_REQUIRE_POSTGRES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; run .ci/postgres.sh")
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Three replicas, each with its own connection pool and store, on one
// table of one PostgreSQL database: 32 concurrent deliveries of one offer
// to each, exactly one acceptance.
func TestReplicas_SharedPostgres(t *testing.T) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "replicas_" + hex.EncodeToString(b[:])
	var stores []replay.Store
	for range 3 {
		db := postgresDB(t)
		st, err := pgstore.Open(context.Background(), db, pgstore.Options{Table: table, SweepEvery: time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		stores = append(stores, st)
	}
	t.Cleanup(func() {
		db := postgresDB(t)
		_, err := db.Exec(`DROP TABLE IF EXISTS "` + table + `"`)
		assert.NoError(t, err)
	})
	replicaScenario(t, stores)
}

// A replica whose database cannot answer refuses: it never accepts (fail
// closed).
func TestReplicas_PostgresDownRefuses(t *testing.T) {
	db := postgresDB(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "replicas_down_" + hex.EncodeToString(b[:])
	st, err := pgstore.Open(context.Background(), db, pgstore.Options{Table: table})
	require.NoError(t, err)
	_, err = db.Exec(`DROP TABLE "` + table + `"`) // the store's table is gone
	require.NoError(t, err)
	rs := newReplicaSet(t, []replay.Store{st})
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	in, err := rs.replicas[0].Receive(context.Background(), rs.offer(t, hop, "x"), handoff.Host{})
	require.Error(t, err)
	assert.ErrorIs(t, err, handoff.ErrStore)
	assert.ErrorIs(t, err, replay.ErrUnavailable)
	assert.Nil(t, in)
}
