package replicas_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/pgstore"
)

// hopPostgres is BenchmarkHop's PostgreSQL part, on the server at
// HANDOFF_POSTGRES_DSN (by default the one .ci/postgres.sh starts): the
// receive throughput against the memory store's, measured as for Redis
// over hopRounds alternating rounds (x-memory-alternating and
// x-memory-alternating-sum); the statements sent per fresh receive and per
// accepted reply, counted by a wrapper of the driver (each statement is
// one round trip); and the table's size on the server per hop, heap and
// indexes compacted by VACUUM FULL, after the receives
// (B/hop-without-status) and after the replies to half of them (B/hop).
func hopPostgres(b *testing.B, w *hopWorld, ratio func(*testing.B, time.Duration)) {
	dsn := os.Getenv("HANDOFF_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://handoff@127.0.0.1:5439/postgres?sslmode=disable"
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	var statements atomic.Int64
	db := sql.OpenDB(countingConnector{Connector: stdlib.GetConnector(*cfg), n: &statements})
	defer db.Close()
	db.SetMaxOpenConns(2 * hopReceivers)
	db.SetMaxIdleConns(2 * hopReceivers)
	ctx := context.Background()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = db.PingContext(pctx)
	cancel()
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("HANDOFF_REQUIRE_POSTGRES") == "1" {
			b.Fatalf("no PostgreSQL server at %s: %v", dsn, err)
		}
		b.Skipf("no PostgreSQL server at %s: %v; run .ci/postgres.sh", dsn, err)
	}
	open := func(table string) *pgstore.Store {
		st, err := pgstore.Open(ctx, db, pgstore.Options{Table: table})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	drop := func(table string) {
		if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS "`+table+`"`); err != nil {
			b.Fatal(err)
		}
	}
	// size is the table's size once compacted by VACUUM FULL, which drops
	// the dead row versions the replies left and the free space that
	// concurrent inserts leave in pages they extend ahead (how much varies
	// from run to run): the main fork of the heap and of each index.
	size := func(table string) int64 {
		if _, err := db.ExecContext(ctx, `VACUUM FULL "`+table+`"`); err != nil {
			b.Fatal(err)
		}
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT pg_relation_size($1::regclass, 'main') +
	coalesce((SELECT sum(pg_relation_size(indexrelid, 'main')) FROM pg_index WHERE indrelid = $1::regclass), 0)::bigint`,
			`"`+table+`"`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	var (
		d                     time.Duration
		perReceive, perReply  float64
		perHop, bare          float64
		alternating, summed   float64
		tables                []string
		rb                    [6]byte
		ins                   []*handoff.Received
		replied               int
		s0, s1, s2, s3        int64
		sizeReceived, sizeAll int64
	)
	defer func() {
		for _, t := range tables {
			drop(t)
		}
	}()
	for b.Loop() {
		_, _ = rand.Read(rb[:])
		table := "hopbench_" + hex.EncodeToString(rb[:])
		tables = append(tables, table)
		st := open(table)
		a := w.agent(b, st)
		s0 = statements.Load()
		ins, d = w.receiveAll(b, a)
		s1 = statements.Load()
		sizeReceived = size(table)
		s2 = statements.Load() // not counting the measurement's
		replied = w.replyHalf(b, a, ins)
		s3 = statements.Load()
		sizeAll = size(table)
		st.Close()
		perReceive = float64(s1-s0) / float64(len(ins))
		perReply = float64(s3-s2) / float64(replied)
		bare = float64(sizeReceived) / float64(len(ins))
		perHop = float64(sizeAll) / float64(len(ins))
		b.StopTimer()
		alternating, summed = w.alternatingRatio(b, func(round int) (replay.Store, func()) {
			t := fmt.Sprintf("%s_%d", table, round)
			tables = append(tables, t)
			st := open(t)
			return st, func() { st.Close() }
		})
		b.StartTimer()
	}
	ratio(b, d)
	b.ReportMetric(alternating, "x-memory-alternating")
	b.ReportMetric(summed, "x-memory-alternating-sum")
	b.ReportMetric(perReceive, "statements/receive")
	b.ReportMetric(perReply, "statements/reply")
	b.ReportMetric(perHop, "B/hop")
	b.ReportMetric(bare, "B/hop-without-status")
	fmt.Fprintf(os.Stderr, "postgresql: %.2f statements per fresh receive, %.2f per accepted reply; %.0f B per hop on the server (half with a status), %.0f without a status\n",
		perReceive, perReply, perHop, bare)
}

// countingConnector counts the statements sent through its connections:
// each Query or Exec is one round trip to the server.
type countingConnector struct {
	driver.Connector
	n *atomic.Int64
}

func (cc countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn.(*stdlib.Conn), n: cc.n}, nil
}

type countingConn struct {
	*stdlib.Conn
	n *atomic.Int64
}

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.n.Add(1)
	return c.Conn.QueryContext(ctx, q, args)
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.n.Add(1)
	return c.Conn.ExecContext(ctx, q, args)
}
