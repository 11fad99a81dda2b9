package pgstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/storetest"
)

// The tests use the PostgreSQL server at HANDOFF_POSTGRES_DSN (by default
// the one .ci/postgres.sh starts). When none answers they are skipped,
// unless CI is set or HANDOFF_REQUIRE_POSTGRES=1, when they fail. Each
// store gets a table of its own, dropped when the test ends.

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

// testDB returns a pool of the test server whose statements c counts (c
// may be nil), or skips or fails t when the server does not answer.
func testDB(t testing.TB, c *counter) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn())
	require.NoError(t, err)
	if c == nil {
		c = &counter{}
	}
	db := sql.OpenDB(countingConnector{Connector: stdlib.GetConnector(*cfg), c: c})
	db.SetMaxOpenConns(48)
	db.SetMaxIdleConns(48)
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

// testTable returns a table name no other test uses, and drops the table
// (and its sequence) when the test ends.
func testTable(t testing.TB, db *sql.DB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "pgt_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS "`+table+`"`)
		assert.NoError(t, err)
		_, err = db.ExecContext(ctx, `DROP SEQUENCE IF EXISTS "`+table+`_version"`)
		assert.NoError(t, err)
	})
	return table
}

func mustOpen(t testing.TB, db *sql.DB, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), db, opts)
	require.NoError(t, err)
	return s
}

func mustOpenOffers(t testing.TB, db *sql.DB, opts Options) *Offers {
	t.Helper()
	s, err := OpenOffers(context.Background(), db, opts)
	require.NoError(t, err)
	return s
}

// The suite runs with its own clock: every statement compares expiry with
// the time the store's Now gives, so the suite checks expiry to the
// nanosecond without sleeping.
func TestStore(t *testing.T) {
	db := testDB(t, nil)
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return mustOpen(t, db, Options{Table: testTable(t, db), Now: now})
	}, storetest.Options{
		Reopen: func(t *testing.T, closed replay.Store, now func() time.Time) replay.Store {
			return mustOpen(t, db, Options{Table: closed.(*Store).Table(), Now: now})
		},
		// No per-issuer share ("No per-issuer share" in the package
		// documentation): the IssuerShare subtest does not apply.
		MaxPerIssuer: 0,
	})
}

func TestOffers(t *testing.T) {
	db := testDB(t, nil)
	storetest.RunOffers(t, func(t *testing.T, now func() time.Time) replay.OfferStore {
		return mustOpenOffers(t, db, Options{Table: testTable(t, db), Now: now})
	}, storetest.OfferOptions{
		Reopen: func(t *testing.T, closed replay.OfferStore, now func() time.Time) replay.OfferStore {
			return mustOpenOffers(t, db, Options{Table: closed.(*Offers).Table(), Now: now})
		},
	})
}

// The suite on the real clock too, with the background sweeper deleting
// expired rows while the subtests run: expired rows are never live,
// whether swept or not.
func TestStoreRealTimeWithSweeper(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps past expiries")
	}
	db := testDB(t, nil)
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return mustOpen(t, db, Options{Table: testTable(t, db), Now: now, SweepEvery: 50 * time.Millisecond, SweepBatch: 2})
	}, storetest.Options{RealTime: true})
}

func digest(s string) []byte {
	d := [32]byte{}
	copy(d[:], s)
	return d[:]
}

// Remember is one statement, one round trip, whether it inserts or finds
// the record held, and so is Swap, whether it writes or finds another
// state: a fresh receive costs one round trip, a reply one. Get, and
// Update and Release that succeed, are one too.
func TestOneRoundTrip(t *testing.T) {
	c := &counter{}
	db := testDB(t, c)
	st := mustOpen(t, db, Options{Table: testTable(t, db)})
	defer st.Close()
	ctx := context.Background()
	k := replay.Key{Iss: "https://a.example", Hop: "h1"}
	rec := replay.Record{Digest: digest("offer"), Token: make([]byte, replay.TokenSize), Expires: time.Now().Add(time.Hour)}
	step := func(name string, fn func() error) {
		t.Helper()
		before := c.n.Load()
		require.NoError(t, fn(), name)
		assert.EqualValues(t, 1, c.n.Load()-before, "%s: round trips", name)
	}
	step("Remember (insert)", func() error { _, _, err := st.Remember(ctx, k, rec); return err })
	again := rec
	again.Token = nil
	step("Remember (held)", func() error { _, _, err := st.Remember(ctx, k, again); return err })
	step("Get", func() error { _, _, err := st.Get(ctx, k); return err })
	upd := rec
	upd.State = "accepted"
	step("Update", func() error { return st.Update(ctx, k, upd) })
	done := replay.Record{State: "completed", Status: []byte("completed"), Expires: rec.Expires}
	step("Swap (writes)", func() error {
		_, swapped, err := st.Swap(ctx, k, upd, done)
		if err == nil && !swapped {
			err = errors.New("Swap from the held state did not write")
		}
		return err
	})
	step("Swap (another state held)", func() error {
		held, swapped, err := st.Swap(ctx, k, upd, replay.Record{State: "failed", Status: []byte("failed")})
		if err == nil && (swapped || held.State != "completed") {
			err = fmt.Errorf("Swap from a stale state: swapped %v, held %q", swapped, held.State)
		}
		return err
	})
	k2 := replay.Key{Iss: "https://a.example", Hop: "h2"}
	step("Remember (insert)", func() error { _, _, err := st.Remember(ctx, k2, rec); return err })
	step("Release", func() error { return st.Release(ctx, k2, rec.Digest) })
}

// Sweep deletes at most SweepBatch expired rows per call and never a live
// one; expired rows are absent before the sweep already.
func TestSweep(t *testing.T) {
	db := testDB(t, nil)
	var now atomic.Pointer[time.Time]
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	st := mustOpen(t, db, Options{Table: testTable(t, db), Now: clock, SweepBatch: 3})
	defer st.Close()
	ctx := context.Background()
	for i := range 7 {
		exp := t0.Add(time.Minute)
		if i >= 5 {
			exp = time.Time{} // kept until updated
		}
		_, ok, err := st.Remember(ctx, replay.Key{Iss: "i", Hop: fmt.Sprint(i)}, replay.Record{Digest: digest(fmt.Sprint(i)), Expires: exp})
		require.NoError(t, err)
		require.True(t, ok)
	}
	n, err := st.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing expired yet")

	later := t0.Add(time.Minute)
	now.Store(&later)
	_, ok, err := st.Get(ctx, replay.Key{Iss: "i", Hop: "0"})
	require.NoError(t, err)
	assert.False(t, ok, "an expired row is not live, swept or not")
	rows := func() int {
		var n int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM "`+st.Table()+`"`).Scan(&n))
		return n
	}
	require.Equal(t, 7, rows())
	for _, want := range []int{3, 2, 0} {
		n, err := st.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, n)
	}
	assert.Equal(t, 2, rows(), "the records without expiry stay")
}

// Every database error fails closed: it is returned wrapping
// replay.ErrUnavailable, never as an absent record or a fresh insert.
func TestFailClosed(t *testing.T) {
	ctx := context.Background()
	k := replay.Key{Iss: "i", Hop: "h"}
	rec := replay.Record{Digest: digest("offer")}

	t.Run("table gone", func(t *testing.T) {
		db := testDB(t, nil)
		st := mustOpen(t, db, Options{Table: testTable(t, db)})
		defer st.Close()
		_, err := db.Exec(`DROP TABLE "` + st.Table() + `"`)
		require.NoError(t, err)
		_, inserted, err := st.Remember(ctx, k, rec)
		assert.ErrorIs(t, err, replay.ErrUnavailable)
		assert.False(t, inserted)
		_, ok, err := st.Get(ctx, k)
		assert.ErrorIs(t, err, replay.ErrUnavailable)
		assert.False(t, ok)
		assert.ErrorIs(t, st.Update(ctx, k, rec), replay.ErrUnavailable)
		_, swapped, err := st.Swap(ctx, k, rec, replay.Record{State: "accepted"})
		assert.ErrorIs(t, err, replay.ErrUnavailable)
		assert.False(t, swapped)
		assert.ErrorIs(t, st.Release(ctx, k, rec.Digest), replay.ErrUnavailable)
		_, err = st.Untaken(ctx, time.Now())
		assert.ErrorIs(t, err, replay.ErrUnavailable)
	})

	t.Run("server gone", func(t *testing.T) {
		db, gone := testDB(t, nil), testDB(t, nil)
		st := mustOpen(t, gone, Options{Table: testTable(t, db)})
		offers := mustOpenOffers(t, gone, Options{Table: testTable(t, db)})
		defer st.Close()
		defer offers.Close()
		require.NoError(t, gone.Close()) // every later call fails
		_, inserted, err := st.Remember(ctx, k, rec)
		assert.ErrorIs(t, err, replay.ErrUnavailable)
		assert.False(t, inserted)
		_, _, err = st.Get(ctx, k)
		assert.ErrorIs(t, err, replay.ErrUnavailable)
		_, swapped, err := st.Swap(ctx, k, rec, replay.Record{State: "accepted"})
		assert.ErrorIs(t, err, replay.ErrUnavailable)
		assert.False(t, swapped)
		_, err = offers.Create(ctx, replay.OfferRecord{Hop: "h", To: "t", Digest: digest("o")})
		assert.ErrorIs(t, err, replay.ErrUnavailable)
		_, _, err = offers.Get(ctx, "h")
		assert.ErrorIs(t, err, replay.ErrUnavailable)
		_, err = offers.List(ctx, replay.OfferQuery{})
		assert.ErrorIs(t, err, replay.ErrUnavailable)
	})

	t.Run("no server", func(t *testing.T) {
		cfg, err := pgx.ParseConfig("postgres://handoff@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1")
		require.NoError(t, err)
		db := stdlib.OpenDB(*cfg)
		defer db.Close()
		_, err = Open(ctx, db, Options{})
		assert.ErrorIs(t, err, replay.ErrUnavailable)
	})
}

func TestOpenChecks(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, nil, Options{})
	assert.Error(t, err)
	db := stdlib.OpenDB(pgx.ConnConfig{})
	defer db.Close()
	for _, name := range []string{`x"; DROP TABLE y; --`, "1abc", "a-b", "a234567890123456789012345678901234567890123456789",
		"pg_class", "pg_hops"} { // pg_: issue 35, finding 8
		_, err := Open(ctx, db, Options{Table: name})
		assert.ErrorIs(t, err, ErrTable, name)
		_, err = OpenOffers(ctx, db, Options{Table: name})
		assert.ErrorIs(t, err, ErrTable, name)
	}
}

// A call the database cannot answer before the context's deadline fails
// with the deadline's error: a row locked by another transaction blocks
// Update and Release, which give up at the deadline. Remember of the held
// row takes no lock, and answers.
func TestDeadlineWhileBlocked(t *testing.T) {
	db := testDB(t, nil)
	st := mustOpen(t, db, Options{Table: testTable(t, db)})
	defer st.Close()
	ctx := context.Background()
	k := replay.Key{Iss: "i", Hop: "locked"}
	rec := replay.Record{Digest: digest("offer"), Token: make([]byte, replay.TokenSize)}
	_, ok, err := st.Remember(ctx, k, rec)
	require.NoError(t, err)
	require.True(t, ok)

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, `SELECT 1 FROM "`+st.Table()+`" WHERE k = $1 FOR UPDATE`, key(k))
	require.NoError(t, err)

	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	other := rec
	other.Token = nil
	other.Digest = digest("other")
	// The held row is live, so Remember needs no lock: it answers.
	held, inserted, err := st.Remember(short(), k, other)
	require.NoError(t, err)
	assert.False(t, inserted)
	assert.True(t, held.Equal(rec))

	upd := rec
	upd.State = "accepted"
	assert.ErrorIs(t, st.Update(short(), k, upd), context.DeadlineExceeded, "Update of a locked row")
	assert.ErrorIs(t, st.Release(short(), k, rec.Digest), context.DeadlineExceeded, "Release of a locked row")
	_, swapped, err := st.Swap(short(), k, rec, upd)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Swap of a locked row")
	assert.False(t, swapped)
	// A statement abandoned at its deadline may still land once the lock
	// is released: the caller was told it failed and refused, which is
	// the case "Records written by a call that failed" of package replay.
	require.NoError(t, tx.Rollback())
}

// A slot whose row has expired but is not swept yet is taken by the next
// Remember, in a second statement that replaces the row.
func TestRememberReplacesExpired(t *testing.T) {
	c := &counter{}
	db := testDB(t, c)
	var now atomic.Pointer[time.Time]
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(&t0)
	st := mustOpen(t, db, Options{Table: testTable(t, db), Now: func() time.Time { return *now.Load() }})
	defer st.Close()
	ctx := context.Background()
	k := replay.Key{Iss: "i", Hop: "h"}
	first := replay.Record{Digest: digest("first"), Expires: t0.Add(time.Minute)}
	_, ok, err := st.Remember(ctx, k, first)
	require.NoError(t, err)
	require.True(t, ok)

	later := t0.Add(time.Minute)
	now.Store(&later)
	second := replay.Record{Digest: digest("second"), Token: make([]byte, replay.TokenSize), State: "accepted"}
	before := c.n.Load()
	held, ok, err := st.Remember(ctx, k, second)
	require.NoError(t, err)
	assert.True(t, ok, "the expired slot is taken")
	assert.True(t, held.Equal(second))
	assert.EqualValues(t, 2, c.n.Load()-before, "round trips into an expired slot")
	got, ok, err := st.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, got.Equal(second))
}

// HC-42 across replicas: three OfferStores, each on a pool of its own,
// share one table; of 30 concurrent Creates of open records for one work,
// spread over them, exactly one succeeds and the others name its hop.
func TestOffersAcrossPools(t *testing.T) {
	first := testDB(t, nil)
	table := testTable(t, first)
	var stores []*Offers
	for range 3 {
		db := testDB(t, nil)
		s := mustOpenOffers(t, db, Options{Table: table})
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	ctx := context.Background()
	for round := range 3 {
		work := fmt.Sprint("job ", round)
		const n = 30
		errs := make([]error, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				_, errs[i] = stores[i%len(stores)].Create(ctx, replay.OfferRecord{Hop: fmt.Sprint(work, " hop ", i),
					To: "spiffe://b.example/agent/coder", Digest: digest(fmt.Sprint(work, i)), Work: work, Open: true})
			}()
		}
		close(gate)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "%s: hops %d and %d both created", work, winner, i)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "%s: no Create succeeded", work)
		for i, err := range errs {
			if i == winner {
				continue
			}
			var busy *replay.BusyError
			require.ErrorAs(t, err, &busy, "%s: Create %d", work, i)
			assert.Equal(t, fmt.Sprint(work, " hop ", winner), busy.Hop)
		}
	}
}

// A Swap whose snapshot predates a write committed while it waited for
// the row decides on the row as that write left it: it writes when the
// row now holds old's state, and otherwise returns the row as it is now,
// never its snapshot's.
func TestSwapAfterConcurrentCommit(t *testing.T) {
	db := testDB(t, nil)
	st := mustOpen(t, db, Options{Table: testTable(t, db)})
	defer st.Close()
	ctx := context.Background()
	rec := replay.Record{Digest: digest("offer"), Token: make([]byte, replay.TokenSize)}
	accepted := rec
	accepted.State = "accepted"
	for name, tc := range map[string]struct {
		old, new    replay.Record
		swapped     bool
		state       string
		status, why string
	}{
		"from the committed state": {accepted, replay.Record{State: "completed", Status: []byte("done")}, true, "completed", "done",
			"a Swap from the state the concurrent write committed writes"},
		"from the snapshot's state": {rec, replay.Record{State: "rejected", Status: []byte("no")}, false, "accepted", "",
			"a Swap from the state its snapshot saw returns the committed row"},
	} {
		t.Run(name, func(t *testing.T) {
			k := replay.Key{Iss: "i", Hop: name}
			_, ok, err := st.Remember(ctx, k, rec)
			require.NoError(t, err)
			require.True(t, ok)
			// Another writer holds the row, with a write not committed.
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			_, err = tx.ExecContext(ctx, `UPDATE "`+st.Table()+`" SET state = 'accepted'::bytea WHERE k = $1`, key(k))
			require.NoError(t, err)

			type result struct {
				held    replay.Record
				swapped bool
				err     error
			}
			done := make(chan result, 1)
			go func() {
				held, swapped, err := st.Swap(ctx, k, tc.old, tc.new)
				done <- result{held, swapped, err}
			}()
			// The Swap has taken its snapshot and waits for the row.
			require.Eventually(t, func() bool {
				var n int
				err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'WITH cur AS%' AND query LIKE '%`+st.Table()+`%'`).Scan(&n)
				return err == nil && n == 1
			}, 5*time.Second, 5*time.Millisecond, "the Swap never waited for the row")
			require.NoError(t, tx.Commit())

			r := <-done
			require.NoError(t, r.err)
			assert.Equal(t, tc.swapped, r.swapped, tc.why)
			assert.Equal(t, tc.state, r.held.State)
			assert.Equal(t, tc.status, string(r.held.Status))
			got, ok, err := st.Get(ctx, k)
			require.NoError(t, err)
			require.True(t, ok)
			assert.True(t, got.Equal(r.held), "Swap returned %+v, held %+v", r.held, got)
		})
	}
}
