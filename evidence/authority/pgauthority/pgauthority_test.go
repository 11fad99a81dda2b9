package pgauthority_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/authoritytest"
	"github.com/agentproto/handoff/evidence/authority/pgauthority"
)

// The tests use the PostgreSQL server at HANDOFF_POSTGRES_DSN (by default
// the one .ci/postgres.sh starts). When none answers they are skipped,
// unless CI is set or HANDOFF_REQUIRE_POSTGRES=1, when they fail. Each
// ledger gets a name of its own, whose tables and function are dropped
// when the test ends.

const defaultDSN = "postgres://handoff@127.0.0.1:5439/postgres?sslmode=disable"

func dsn() string {
	if v := os.Getenv("HANDOFF_POSTGRES_DSN"); v != "" {
		return v
	}
	return defaultDSN
}

// counter counts the statements sent to the server, each one round trip.
type counter struct{ n atomic.Int64 }

type countingConnector struct {
	driver.Connector
	c *counter
}

func (cc countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn.(*stdlib.Conn), c: cc.c}, nil
}

type countingConn struct {
	*stdlib.Conn
	c *counter
}

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.c.n.Add(1)
	return c.Conn.QueryContext(ctx, q, args)
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.c.n.Add(1)
	return c.Conn.ExecContext(ctx, q, args)
}

// testDB returns a new pool of the test server (one replica's, or one
// process's) whose statements c counts (c may be nil), or skips or fails t
// when the server does not answer.
func testDB(t testing.TB, c *counter) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn())
	require.NoError(t, err)
	if c == nil {
		c = &counter{}
	}
	db := sql.OpenDB(countingConnector{Connector: stdlib.GetConnector(*cfg), c: c})
	db.SetMaxOpenConns(24)
	db.SetMaxIdleConns(24)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		msg := fmt.Sprintf("no PostgreSQL server answers at %s: %v", dsn(), err)
		if os.Getenv("CI") != "" || os.Getenv("HANDOFF_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("%s (required: CI or HANDOFF_REQUIRE_POSTGRES=1 is set)", msg)
		}
		t.Skipf("%s; run .ci/postgres.sh or set HANDOFF_POSTGRES_DSN (CI=1 or HANDOFF_REQUIRE_POSTGRES=1 turns this skip into a failure)", msg)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// testName returns a ledger name no other test uses, and drops the
// ledger's tables and function when the test ends.
func testName(t testing.TB, db *sql.DB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "pga_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { drop(t, db, name) })
	return name
}

func drop(t testing.TB, db *sql.DB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []string{`DROP FUNCTION IF EXISTS "` + name + `_perform"`, `DROP TABLE IF EXISTS "` + name + `_effects"`,
		`DROP TABLE IF EXISTS "` + name + `_approvals"`, `DROP TABLE IF EXISTS "` + name + `_hops"`} {
		_, err := db.ExecContext(ctx, s)
		assert.NoError(t, err)
	}
}

func mustOpen(t testing.TB, db *sql.DB, name string) *pgauthority.Ledger {
	t.Helper()
	l, err := pgauthority.Open(context.Background(), db, pgauthority.Options{Name: name})
	require.NoError(t, err)
	return l
}

// TestLedger runs the conformance suite. A replica and a restart each get
// a pool of their own: what one process recorded, another refuses.
func TestLedger(t *testing.T) {
	authoritytest.Run(t, func(t *testing.T) authority.Ledger {
		db := testDB(t, nil)
		return mustOpen(t, db, testName(t, db))
	}, authoritytest.Options{
		Replica: func(t *testing.T, l authority.Ledger) authority.Ledger {
			return mustOpen(t, testDB(t, nil), l.(*pgauthority.Ledger).Name())
		},
		Reopen: func(t *testing.T, l authority.Ledger) authority.Ledger {
			return mustOpen(t, testDB(t, nil), l.(*pgauthority.Ledger).Name())
		},
		// A client process killed between a claim and its outcome.
		Where: func(l authority.Ledger) string { return l.(*pgauthority.Ledger).Name() },
	})
}

func TestMain(m *testing.M) {
	authoritytest.ChildMain(func(name string) (authority.Ledger, error) {
		db, err := sql.Open("pgx", dsn())
		if err != nil {
			return nil, err
		}
		return pgauthority.Open(context.Background(), db, pgauthority.Options{Name: name})
	})
	os.Exit(m.Run())
}

// lookupOne returns the one record of name, requiring there is one.
func lookupOne(t *testing.T, l authority.Ledger, name string) authority.Record {
	t.Helper()
	rs, err := l.Lookup(context.Background(), name)
	require.NoError(t, err)
	require.Len(t, rs, 1, name)
	return rs[0]
}

// The tables of an earlier version, which kept effects by name alone, are
// refused: reading them would forget the effects they record.
func TestEarlierSchemaRefused(t *testing.T) {
	db := testDB(t, nil)
	name := testName(t, db)
	_, err := db.ExecContext(context.Background(), `CREATE TABLE "`+name+`_effects" (k BYTEA PRIMARY KEY, name BYTEA NOT NULL,
	hop BYTEA NOT NULL, action BYTEA NOT NULL, at_s BIGINT NOT NULL, at_ns INTEGER NOT NULL, approval BYTEA)`)
	require.NoError(t, err)
	_, err = pgauthority.Open(context.Background(), db, pgauthority.Options{Name: name})
	require.ErrorIs(t, err, pgauthority.ErrSchema)
}

var t0 = time.Unix(1793000000, 123456789).UTC()

const hop = "sha-256:hopA"

func effect(op, key string) authority.Effect {
	return authority.Effect{Hop: hop, Action: "refund.issue", OperationID: op, IdempotencyKey: key, At: t0}
}

// Two replicas (two pools) and 32 concurrent presentations of one
// operation id each: exactly one is allowed, every other is refused as
// repeated, and the record names the action once.
func TestReplicasOneOperation(t *testing.T) {
	db1 := testDB(t, nil)
	name := testName(t, db1)
	replicas := []*pgauthority.Ledger{mustOpen(t, db1, name), mustOpen(t, testDB(t, nil), name)}
	const each = 32
	var allowed atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	start := make(chan struct{})
	for _, l := range replicas {
		for range each {
			wg.Go(func() {
				<-start
				err := l.Perform(context.Background(), effect("op-storm", ""))
				if err == nil {
					allowed.Add(1)
					return
				}
				errs <- err
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	require.Equal(t, int32(1), allowed.Load())
	n := 0
	for err := range errs {
		require.ErrorIs(t, err, authority.ErrRepeated)
		n++
	}
	require.Equal(t, 2*each-1, n)
}

// Two effects whose two names are each other's, presented at once from two
// replicas many times over: exactly one of each pair is recorded, the
// other refused as repeated, never a deadlock or another error; and the
// loser recorded neither name.
func TestCrossedNamesNoDeadlock(t *testing.T) {
	db1 := testDB(t, nil)
	name := testName(t, db1)
	a, b := mustOpen(t, db1, name), mustOpen(t, testDB(t, nil), name)
	for i := range 40 {
		x, y := fmt.Sprintf("x-%d", i), fmt.Sprintf("y-%d", i)
		var ea, eb error
		var wg sync.WaitGroup
		wg.Go(func() { ea = a.Perform(context.Background(), effect(x, y)) })
		wg.Go(func() { eb = b.Perform(context.Background(), effect(y, x)) })
		wg.Wait()
		require.True(t, (ea == nil) != (eb == nil), "exactly one of %v, %v", ea, eb)
		loser := ea
		if loser == nil {
			loser = eb
		}
		require.ErrorIs(t, loser, authority.ErrRepeated)
		require.Equal(t, lookupOne(t, a, x), authority.Record{Name: x, Hop: hop, Action: "refund.issue", At: t0})
		require.Equal(t, lookupOne(t, a, y), authority.Record{Name: y, Hop: hop, Action: "refund.issue", At: t0})
	}
}

// Finish racing effects of its hop: every effect is either recorded before
// the disposition or refused as finished, and once Finish has returned
// every effect is refused.
func TestFinishWaitsForEffectsInFlight(t *testing.T) {
	db1 := testDB(t, nil)
	name := testName(t, db1)
	a, b := mustOpen(t, db1, name), mustOpen(t, testDB(t, nil), name)
	ctx := context.Background()
	const n = 24
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = a.Perform(ctx, effect(fmt.Sprintf("op-%d", i), ""))
		})
	}
	wg.Go(func() {
		<-start
		assert.NoError(t, b.Finish(ctx, hop, authority.Final{State: "completed", At: t0}))
	})
	close(start)
	wg.Wait()
	for i, err := range errs {
		rs, lerr := b.Lookup(ctx, fmt.Sprintf("op-%d", i))
		require.NoError(t, lerr)
		recorded := len(rs) == 1
		if err == nil {
			require.True(t, recorded)
			continue
		}
		require.ErrorIs(t, err, authority.ErrFinished)
		require.False(t, recorded)
	}
	require.ErrorIs(t, a.Perform(ctx, effect("op-late", "")), authority.ErrFinished)
}

// An effect in flight holds Finish back: while a Perform of the hop is
// stopped inside its statement (at the insert of a name another
// transaction holds uncommitted), a Finish of that hop waits for it rather
// than record a disposition that the effect's record would then follow.
func TestFinishWaitsForPerform(t *testing.T) {
	db := testDB(t, nil)
	name := testName(t, db)
	l := mustOpen(t, db, name)
	ctx := context.Background()
	// The hop's row exists (a Perform creating it would hold Finish back
	// by its insert alone).
	require.NoError(t, l.Acknowledge(ctx, hop, authority.Ack{Decision: authority.Accepted, At: t0}))
	// A transaction that holds the name op-x uncommitted.
	blocker, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback() }()
	k := sha256.Sum256(authority.EffectKey("op-x", hop))
	_, err = blocker.ExecContext(ctx, `INSERT INTO "`+name+`_effects" (k, nk, name, hop, action, tool, key, args, at_s, at_ns, in_flight)
VALUES ($1, sha256('op-x'::bytea), 'op-x'::bytea, 'h'::bytea, 'a'::bytea, '', '', '', 0, 0, false)`, k[:])
	require.NoError(t, err)

	performed := make(chan error, 1)
	go func() { performed <- l.Perform(ctx, effect("op-x", "")) }()
	waiting(t, db, `%`+name+`_perform%`, performed)
	finished := make(chan error, 1)
	go func() { finished <- l.Finish(ctx, hop, authority.Final{State: "completed", At: t0}) }()
	waiting(t, db, `%INSERT INTO "`+name+`_hops"%final_state%`, finished)

	require.NoError(t, blocker.Rollback())
	require.NoError(t, <-performed, "the effect in flight is recorded")
	require.NoError(t, <-finished)
	lookupOne(t, l, "op-x")
	require.ErrorIs(t, l.Perform(ctx, effect("op-y", "")), authority.ErrFinished)
}

// waiting returns once a backend running a statement like pattern waits
// for a lock; it fails t if done reports first (the statement did not
// wait) or after a generous deadline.
func waiting(t *testing.T, db *sql.DB, pattern string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the statement %s returned (%v) instead of waiting", pattern, err)
		default:
		}
		var n int
		require.NoError(t, db.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE $1 AND pid <> pg_backend_pid()`, pattern).Scan(&n))
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no statement %s waits for a lock", pattern)
}

// Perform is one round trip, whatever its outcome; Lookup, Approvals and
// Hop are one query; Grant and Finish one statement when first recorded.
func TestRoundTrips(t *testing.T) {
	c := &counter{}
	db := testDB(t, c)
	l := mustOpen(t, db, testName(t, db))
	ctx := context.Background()
	count := func(f func()) int64 {
		before := c.n.Load()
		f()
		return c.n.Load() - before
	}
	require.Equal(t, int64(1), count(func() { require.NoError(t, l.Perform(ctx, effect("op-1", "key-1"))) }))
	require.Equal(t, int64(1), count(func() { require.ErrorIs(t, l.Perform(ctx, effect("op-1", "")), authority.ErrRepeated) }))
	need := effect("op-2", "")
	need.NeedsApproval = true
	require.Equal(t, int64(1), count(func() { require.ErrorIs(t, l.Perform(ctx, need), authority.ErrNoApproval) }))
	ap := authority.Approval{ID: "ap-1", Hop: hop, Action: "refund.issue", Approver: "finance-lead",
		Issued: t0.Add(-time.Minute), Expires: t0.Add(time.Hour), Source: authority.SourceOperator}
	require.Equal(t, int64(1), count(func() { require.NoError(t, l.Grant(ctx, ap)) }))
	require.Equal(t, int64(1), count(func() { require.NoError(t, l.Perform(ctx, need)) }))
	require.Equal(t, int64(1), count(func() { lookupOne(t, l, "key-1") }))
	require.Equal(t, int64(1), count(func() {
		_, err := l.Approvals(ctx, hop)
		require.NoError(t, err)
	}))
	require.Equal(t, int64(1), count(func() {
		require.NoError(t, l.Finish(ctx, hop, authority.Final{State: "completed", At: t0}))
	}))
	require.Equal(t, int64(1), count(func() {
		_, err := l.Hop(ctx, hop)
		require.NoError(t, err)
	}))
}

// Names, hops and texts are octets: NUL octets, invalid UTF-8 and long
// values are held and compared exactly, and the times to the nanosecond.
func TestOctetsExact(t *testing.T) {
	db := testDB(t, nil)
	l := mustOpen(t, db, testName(t, db))
	ctx := context.Background()
	long := strings.Repeat("n", 64<<10)
	odd := []string{"op\x00nul", "op\xff\xfe", long, long + "x"}
	for _, n := range odd {
		e := effect(n, "")
		e.Hop = "hop\x00" + n
		e.Action = "act\xff"
		require.NoError(t, l.Perform(ctx, e))
		require.Equal(t, authority.Record{Name: n, Hop: e.Hop, Action: e.Action, At: t0}, lookupOne(t, l, n))
		require.ErrorIs(t, l.Perform(ctx, e), authority.ErrRepeated)
	}
	rs, err := l.Lookup(ctx, "op")
	require.NoError(t, err)
	require.Empty(t, rs)
	ack := authority.Ack{Decision: authority.Rejected, Reason: "r\x00\xff", Findings: []string{"a", "", "b\x00"}, Package: "p", At: t0}
	require.NoError(t, l.Acknowledge(ctx, "hop\xff", ack))
	require.NoError(t, l.Acknowledge(ctx, "hop\xff", ack), "the same acknowledgement again")
	other := ack
	other.Findings = []string{"a", "b\x00"}
	require.ErrorIs(t, l.Acknowledge(ctx, "hop\xff", other), authority.ErrConflict)
	h, err := l.Hop(ctx, "hop\xff")
	require.NoError(t, err)
	require.Equal(t, &ack, h.Ack)
	require.Nil(t, h.Final)
	h, err = l.Hop(ctx, "hop")
	require.NoError(t, err)
	require.Equal(t, authority.HopRecord{}, h)
}

// What was recorded is in the database, not in the value: a ledger opened
// by another pool after the first is closed sees the effects, the uses
// spent, the acknowledgement and the disposition.
func TestRestartSeesRecords(t *testing.T) {
	db1 := testDB(t, nil)
	name := testName(t, testDB(t, nil))
	l := mustOpen(t, db1, name)
	ctx := context.Background()
	ap := authority.Approval{ID: "ap-1", Hop: hop, Action: "refund.issue", Approver: "finance-lead",
		Issued: t0.Add(-time.Minute), Expires: t0.Add(time.Hour), Source: authority.SourceSigned, Evidence: []byte("jws")}
	require.NoError(t, l.Grant(ctx, ap))
	need := effect("op-1", "key-1")
	need.NeedsApproval = true
	require.NoError(t, l.Perform(ctx, need))
	ack := authority.Ack{Decision: authority.Accepted, Package: "sha-256:pkg", At: t0}
	require.NoError(t, l.Acknowledge(ctx, hop, ack))
	fin := authority.Final{State: "completed", Detail: "refund settled", At: t0.Add(time.Second)}
	require.NoError(t, l.Finish(ctx, hop, fin))
	require.NoError(t, db1.Close())

	r := mustOpen(t, testDB(t, nil), name)
	require.Equal(t, authority.Record{Name: "key-1", Hop: hop, Action: "refund.issue", At: t0, Approval: "ap-1"}, lookupOne(t, r, "key-1"))
	as, err := r.Approvals(ctx, hop)
	require.NoError(t, err)
	require.Len(t, as, 1)
	want, err := ap.Normalized()
	require.NoError(t, err)
	require.True(t, as[0].Same(want), "%+v", as[0])
	require.Equal(t, 0, as[0].Remaining)
	h, err := r.Hop(ctx, hop)
	require.NoError(t, err)
	require.Equal(t, authority.HopRecord{Ack: &ack, Final: &fin, Effects: true}, h)
	err = r.Perform(ctx, effect("op-2", ""))
	require.ErrorIs(t, err, authority.ErrFinished)
}

// Replicas starting at once, each with its own pool, create the ledger
// once between them (the advisory lock) and all open it.
func TestConcurrentOpen(t *testing.T) {
	db := testDB(t, nil)
	name := testName(t, db)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		pool := testDB(t, nil)
		wg.Go(func() {
			_, errs[i] = pgauthority.Open(context.Background(), pool, pgauthority.Options{Name: name})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, mustOpen(t, db, name).Perform(context.Background(), effect("op-1", "")))
}

func TestName(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://handoff@127.0.0.1:1/postgres?sslmode=disable")
	require.NoError(t, err)
	db := sql.OpenDB(stdlib.GetConnector(*cfg))
	defer db.Close()
	for _, name := range []string{"1abc", "a-b", `a"b`, "a b", strings.Repeat("a", 49), "ledger; DROP TABLE x",
		"pg_class", "pg_authority"} { // pg_: issue 35, finding 8

		_, err := pgauthority.Open(context.Background(), db, pgauthority.Options{Name: name})
		require.ErrorIs(t, err, pgauthority.ErrName, name)
	}
	_, err = pgauthority.Open(context.Background(), nil, pgauthority.Options{})
	require.Error(t, err)
}

// A ledger whose server does not answer refuses, never allows.
func TestUnavailableRefuses(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://handoff@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1")
	require.NoError(t, err)
	db := sql.OpenDB(stdlib.GetConnector(*cfg))
	defer db.Close()
	_, err = pgauthority.Open(context.Background(), db, pgauthority.Options{})
	require.ErrorIs(t, err, authority.ErrUnavailable)
}

// Every method of a ledger whose tables and function are gone (dropped,
// or never created in the database it is pointed at) fails closed: an
// error wrapping ErrUnavailable, never an absent record or an allowed
// effect.
func TestMissingTablesFailClosed(t *testing.T) {
	db := testDB(t, nil)
	name := testName(t, db)
	l := mustOpen(t, db, name)
	ctx := context.Background()
	require.NoError(t, l.Perform(ctx, effect("op-1", "")))
	drop(t, db, name)
	ap := authority.Approval{ID: "ap-1", Hop: hop, Action: "refund.issue", Approver: "finance-lead",
		Issued: t0.Add(-time.Minute), Expires: t0.Add(time.Hour), Source: authority.SourceOperator}
	_, lerr := l.Lookup(ctx, "op-1")
	_, aerr := l.Approvals(ctx, hop)
	_, herr := l.Hop(ctx, hop)
	for what, err := range map[string]error{
		"perform":     l.Perform(ctx, effect("op-1", "")),
		"perform new": l.Perform(ctx, effect("op-2", "")),
		"lookup":      lerr,
		"grant":       l.Grant(ctx, ap),
		"approvals":   aerr,
		"acknowledge": l.Acknowledge(ctx, hop, authority.Ack{Decision: authority.Accepted, At: t0}),
		"finish":      l.Finish(ctx, hop, authority.Final{State: "completed", At: t0}),
		"hop":         herr,
	} {
		require.ErrorIs(t, err, authority.ErrUnavailable, what)
	}
}

// A cancelled context is refused as unavailable, and nothing is recorded.
func TestCanceledContextFailsClosed(t *testing.T) {
	db := testDB(t, nil)
	l := mustOpen(t, db, testName(t, db))
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := l.Perform(cctx, effect("op-1", ""))
	require.ErrorIs(t, err, authority.ErrUnavailable)
	require.True(t, errors.Is(err, context.Canceled))
	rs, err := l.Lookup(context.Background(), "op-1")
	require.NoError(t, err)
	require.Empty(t, rs)
}
