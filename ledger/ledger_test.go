package ledger_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/agentproto/handoff/ledger"
)

const (
	testIss   = "https://delegator.example/agent"
	testTable = "handoff_ledger"
)

func digestOf(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

// fixture is a ledger and the caller's own table, effects, in one fresh
// database namespace of one dialect.
type fixture struct {
	d  ledger.Dialect
	p  place
	db *sql.DB
	l  *ledger.SQL
}

// setup creates the ledger and the caller's own table in db.
func setup(t testing.TB, d ledger.Dialect, db *sql.DB) *ledger.SQL {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.NewSQL(db, testTable)
	require.NoError(t, err)
	require.Equal(t, d, l.Dialect(), "dialect detected from the driver")
	require.NoError(t, l.Init(ctx))
	require.NoError(t, l.Init(ctx), "Init is idempotent")
	_, err = db.ExecContext(ctx, effectsTable(d))
	require.NoError(t, err)
	return l
}

func newLedger(t *testing.T, b backend) *fixture {
	t.Helper()
	p := newPlace(t, b)
	db := p.open(t)
	t.Cleanup(func() { _ = db.Close() })
	return &fixture{d: b.dialect, p: p, db: db, l: setup(t, b.dialect, db)}
}

func (f *fixture) q(query string) string { return q(f.d, query) }

func (f *fixture) insertEffect(ctx context.Context, hop, note string) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, f.q(`INSERT INTO effects (hop, note) VALUES (?, ?)`), hop, note)
		return err
	}
}

func (f *fixture) hasEffect(t testing.TB, hop string) bool {
	t.Helper()
	return count(t, f.d, f.db, `SELECT COUNT(*) FROM effects WHERE hop = ?`, hop) == 1
}

func (f *fixture) hasRecord(t testing.TB, iss, hop string) bool {
	t.Helper()
	return count(t, f.d, f.db, `SELECT COUNT(*) FROM `+testTable+` WHERE iss = ? AND hop = ?`, iss, hop) == 1
}

func count(t testing.TB, d ledger.Dialect, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(q(d, query), args...).Scan(&n))
	return n
}

func TestOperationID(t *testing.T) {
	id := ledger.OperationID("a", "bc")
	assert.Equal(t, id, ledger.OperationID("a", "bc"), "deterministic")
	assert.NotEqual(t, id, ledger.OperationID("ab", "c"), "length prefixes keep concatenations apart")
	assert.NotEqual(t, id, ledger.OperationID("bc", "a"), "order matters")
	assert.NotEqual(t, ledger.OperationID("", "abc"), ledger.OperationID("abc", ""))

	urlSafe := regexp.MustCompile(`^hop-[A-Za-z0-9_-]{43}$`)
	for _, p := range [][2]string{
		{"a", "bc"}, {"", ""}, {testIss, "01J9ZK3"}, {"did:example:ü", "hop/with?odd&chars=+"},
	} {
		got := ledger.OperationID(p[0], p[1])
		assert.Regexp(t, urlSafe, got, "URL-safe, unpadded: %q", p)
	}
}

func TestNewSQLValidatesTable(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	defer db.Close()

	for _, name := range []string{"ledger", "_l", "handoff_ledger_2", "L"} {
		_, err := ledger.NewSQL(db, name)
		assert.NoError(t, err, name)
	}
	for _, name := range []string{"", "2ledger", "led-ger", `x"; DROP TABLE effects; --`, "a.b", "a b",
		"a234567890123456789012345678901234567890123456789012345678901234", "sqlite_master", "SQLite_x"} {
		_, err := ledger.NewSQL(db, name)
		assert.ErrorIs(t, err, ledger.ErrTable, name)
	}
	// PostgreSQL reserves pg_ for its system catalogs (issue 35, finding 8:
	// "pg_class" passed the name check, and every write then failed).
	for _, name := range []string{"pg_class", "pg_ledger"} {
		_, err := ledger.NewSQLDialect(db, name, ledger.PostgreSQL)
		assert.ErrorIs(t, err, ledger.ErrTable, name)
	}
	for _, name := range []string{"PG_ledger", "xpg_class", "sqlite_x"} {
		_, err := ledger.NewSQLDialect(db, name, ledger.PostgreSQL)
		assert.NoError(t, err, name)
	}
	_, err = ledger.NewSQL(nil, "ledger")
	assert.Error(t, err)
}

// HC-43: the record is written in the same atomic step as the effect.
func TestHC43EffectAndRecordCommitTogether(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		db, l := f.db, f.l
		d := digestOf("offer 1")

		require.NoError(t, l.Do(ctx, testIss, "h1", d, f.insertEffect(ctx, "h1", "done")))
		assert.True(t, f.hasEffect(t, "h1"))
		assert.True(t, f.hasRecord(t, testIss, "h1"))

		var opID string
		require.NoError(t, db.QueryRow(f.q(`SELECT op_id FROM `+testTable+` WHERE iss = ? AND hop = ?`), testIss, "h1").Scan(&opID))
		assert.Equal(t, ledger.OperationID(testIss, "h1"), opID)

		for _, settled := range []bool{false, true} {
			o, err := l.Outcome(ctx, testIss, "h1", d, settled)
			require.NoError(t, err)
			assert.Equal(t, ledger.TookEffect, o, "settled=%v", settled)
		}
	})
}

// HC-43, HC-44: an effect that fails leaves neither effect nor record, so a
// "failed" without refs is true; once the rollback is known, absence of the
// record shows that nothing took effect.
func TestHC44EffectErrorLeavesNeither(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		l := f.l
		d := digestOf("offer 2")
		boom := errors.New("boom")

		err := l.Do(ctx, testIss, "h2", d, func(tx *sql.Tx) error {
			if err := f.insertEffect(ctx, "h2", "half")(tx); err != nil {
				return err
			}
			return boom // after part of the work was written in tx
		})
		require.ErrorIs(t, err, boom)
		assert.NotErrorIs(t, err, ledger.ErrUncertain)
		assert.False(t, f.hasEffect(t, "h2"))
		assert.False(t, f.hasRecord(t, testIss, "h2"))

		o, err := l.Outcome(ctx, testIss, "h2", d, true) // Do's error proves the rollback
		require.NoError(t, err)
		assert.Equal(t, ledger.NoEffect, o)

		// The hop can still be done afterwards.
		require.NoError(t, l.Do(ctx, testIss, "h2", d, f.insertEffect(ctx, "h2", "done")))
		assert.True(t, f.hasEffect(t, "h2"))
	})
}

// HC-43, HC-38: a second record of the same (iss, hop) fails, and the effect
// written before it in the same transaction is rolled back with it: the work
// is not done twice.
func TestHC43DuplicateRecordRollsBackEffect(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		l := f.l
		d := digestOf("offer 3")
		require.NoError(t, l.Do(ctx, testIss, "h3", d, f.insertEffect(ctx, "h3", "first")))

		// Same digest: a retransmission. The second effect goes to another row
		// so that only the record can make the transaction fail.
		err := l.Do(ctx, testIss, "h3", d, f.insertEffect(ctx, "h3-again", "second"))
		require.ErrorIs(t, err, ledger.ErrRecorded)
		assert.NotErrorIs(t, err, ledger.ErrConflict)
		assert.NotErrorIs(t, err, ledger.ErrUncertain)
		assert.False(t, f.hasEffect(t, "h3-again"), "effect rolled back with the failed record")

		// Different digest: equivocation.
		other := digestOf("offer 3, re-signed")
		err = l.Do(ctx, testIss, "h3", other, f.insertEffect(ctx, "h3-other", "third"))
		require.ErrorIs(t, err, ledger.ErrConflict)
		assert.ErrorIs(t, err, ledger.ErrRecorded, "ErrConflict wraps ErrRecorded")
		assert.False(t, f.hasEffect(t, "h3-other"))

		o, err := l.Outcome(ctx, testIss, "h3", other, true)
		require.NoError(t, err)
		assert.Equal(t, ledger.Conflict, o)
		o, err = l.Outcome(ctx, testIss, "h3", d, false)
		require.NoError(t, err)
		assert.Equal(t, ledger.TookEffect, o)

		// The same hop under another iss is another pair.
		require.NoError(t, l.Do(ctx, "https://other.example/agent", "h3", other, f.insertEffect(ctx, "h3-iss2", "x")))
	})
}

// HC-43: Record joins the caller's own transaction, and a rollback by the
// caller removes the record with the effect.
func TestHC43RecordFollowsCallerTransaction(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		db, l := f.db, f.l
		d := digestOf("offer 4")

		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, f.insertEffect(ctx, "h4", "x")(tx))
		require.NoError(t, l.Record(ctx, tx, testIss, "h4", d))
		require.ErrorIs(t, l.Record(ctx, tx, testIss, "h4", d), ledger.ErrRecorded, "seen within the same transaction")
		require.NoError(t, tx.Rollback())
		assert.False(t, f.hasEffect(t, "h4"))
		assert.False(t, f.hasRecord(t, testIss, "h4"))

		tx, err = db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, f.insertEffect(ctx, "h4", "x")(tx))
		require.NoError(t, l.Record(ctx, tx, testIss, "h4", d))
		require.NoError(t, tx.Commit())
		assert.True(t, f.hasEffect(t, "h4"))
		assert.True(t, f.hasRecord(t, testIss, "h4"))
	})
}

// HC-43: while the step may still complete, an absent record shows nothing.
func TestHC43AbsenceWhileStepRunningIsUnknown(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		db, l := f.db, f.l
		d := digestOf("offer 5")

		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		require.NoError(t, f.insertEffect(ctx, "h5", "x")(tx))
		require.NoError(t, l.Record(ctx, tx, testIss, "h5", d))

		// Another connection does not see the uncommitted record.
		o, err := l.Outcome(ctx, testIss, "h5", d, false)
		require.NoError(t, err)
		assert.Equal(t, ledger.Unknown, o, "the step may still complete")

		require.NoError(t, tx.Commit())
		o, err = l.Outcome(ctx, testIss, "h5", d, false)
		require.NoError(t, err)
		assert.Equal(t, ledger.TookEffect, o)
	})
}

// HC-45: a lost record with an unknowable outcome is never guessed.
//
// The record is deleted by hand, as if the ledger had lost it. The effect is
// still there, but nothing the ledger holds shows it: Outcome with
// settled=false reports Unknown. The delegate then keeps the hop "accepted",
// answers retransmissions with "accepted", and flags the hop to its operator;
// it sends neither "completed" nor "failed". The caller must not pass
// settled=true after a loss: settled asserts that no record was lost, and
// the last assertion shows the false NoEffect that would follow.
func TestHC45LostRecordIsUnknown(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		db, l := f.db, f.l
		d := digestOf("offer 6")
		require.NoError(t, l.Do(ctx, testIss, "h6", d, f.insertEffect(ctx, "h6", "done")))

		res, err := db.ExecContext(ctx, f.q(`DELETE FROM `+testTable+` WHERE iss = ? AND hop = ?`), testIss, "h6")
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.EqualValues(t, 1, n)

		o, err := l.Outcome(ctx, testIss, "h6", d, false)
		require.NoError(t, err)
		assert.Equal(t, ledger.Unknown, o, "keep the hop accepted and flag it; do not guess")
		assert.True(t, f.hasEffect(t, "h6"), "the work did take effect")

		o, err = l.Outcome(ctx, testIss, "h6", d, true)
		require.NoError(t, err)
		assert.Equal(t, ledger.NoEffect, o, "settled=true after a loss would be a guess, and a wrong one")
	})
}

// HC-45: a lookup that fails shows nothing, whatever the caller knows about
// the step.
func TestHC45FailedLookupIsUnknown(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := digestOf("offer 7")

		t.Run("closed database", func(t *testing.T) {
			f := newLedger(t, b)
			db, l := f.db, f.l
			require.NoError(t, l.Do(ctx, testIss, "h7", d, nil))
			require.NoError(t, db.Close())
			for _, hop := range []string{"h7", "absent"} {
				for _, settled := range []bool{false, true} {
					o, err := l.Outcome(ctx, testIss, hop, d, settled)
					assert.Error(t, err, "hop=%s settled=%v", hop, settled)
					assert.Equal(t, ledger.Unknown, o, "hop=%s settled=%v", hop, settled)
				}
			}
			assert.Error(t, l.Do(ctx, testIss, "h8", d, nil))
		})

		t.Run("cancelled lookup", func(t *testing.T) {
			l := newLedger(t, b).l
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			o, err := l.Outcome(cctx, testIss, "absent", d, true)
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, ledger.Unknown, o)
		})

		t.Run("missing table", func(t *testing.T) {
			db := newPlace(t, b).open(t)
			defer db.Close()
			l, err := ledger.NewSQL(db, testTable) // Init not called
			require.NoError(t, err)
			o, err := l.Outcome(ctx, testIss, "h7", d, true)
			assert.Error(t, err)
			assert.Equal(t, ledger.Unknown, o)
		})
	})
}

func TestArgumentChecks(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		db, l := f.db, f.l
		d := digestOf("offer 9")

		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		assert.Error(t, l.Record(ctx, nil, testIss, "h9", d), "nil transaction")
		assert.Error(t, l.Record(ctx, tx, "", "h9", d))
		assert.Error(t, l.Record(ctx, tx, testIss, "", d))
		assert.Error(t, l.Record(ctx, tx, testIss, "h9", nil))

		o, err := l.Outcome(ctx, testIss, "h9", nil, true)
		assert.Error(t, err)
		assert.Equal(t, ledger.Unknown, o)
		assert.Error(t, l.Do(ctx, testIss, "h9", nil, nil))
	})
}

func TestDoRollsBackOnPanic(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		l := f.l
		assert.Panics(t, func() {
			_ = l.Do(ctx, testIss, "h10", digestOf("offer 10"), func(tx *sql.Tx) error {
				if err := f.insertEffect(ctx, "h10", "x")(tx); err != nil {
					return err
				}
				panic("effect panicked")
			})
		})
		assert.False(t, f.hasEffect(t, "h10"))
		assert.False(t, f.hasRecord(t, testIss, "h10"))
		// The connection was released: the database is still writable.
		require.NoError(t, l.Do(ctx, testIss, "h10", digestOf("offer 10"), f.insertEffect(ctx, "h10", "x")))
	})
}

func TestOutcomeString(t *testing.T) {
	assert.Equal(t, "unknown", ledger.Unknown.String())
	assert.Equal(t, "took-effect", ledger.TookEffect.String())
	assert.Equal(t, "no-effect", ledger.NoEffect.String())
	assert.Equal(t, "conflict", ledger.Conflict.String())
	assert.Equal(t, "Outcome(9)", ledger.Outcome(9).String())
	var zero ledger.Outcome
	assert.Equal(t, ledger.Unknown, zero, "the zero value is Unknown")
}
