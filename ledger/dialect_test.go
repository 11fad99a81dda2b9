package ledger_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/ledger"
)

// unknownConnector opens a database whose driver is of this package, which
// DetectDialect does not know.
type unknownConnector struct{}

type unknownDriver struct{}

func (unknownConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("not a database")
}
func (unknownConnector) Driver() driver.Driver         { return unknownDriver{} }
func (unknownDriver) Open(string) (driver.Conn, error) { return nil, errors.New("not a database") }

func TestDetectDialect(t *testing.T) {
	for _, c := range []struct {
		driver string
		want   ledger.Dialect
	}{{"sqlite", ledger.SQLite}, {"pgx", ledger.PostgreSQL}, {"mysql", ledger.MySQL}} {
		db, err := sql.Open(c.driver, "")
		require.NoError(t, err)
		got, err := ledger.DetectDialect(db)
		require.NoError(t, err, c.driver)
		assert.Equal(t, c.want, got, c.driver)
		l, err := ledger.NewSQL(db, testTable)
		require.NoError(t, err)
		assert.Equal(t, c.want, l.Dialect())
		_ = db.Close()
	}

	db := sql.OpenDB(unknownConnector{})
	defer db.Close()
	_, err := ledger.DetectDialect(db)
	assert.ErrorContains(t, err, "NewSQLDialect")
	_, err = ledger.NewSQL(db, testTable)
	assert.Error(t, err, "an unknown driver is not guessed")
	for _, d := range []ledger.Dialect{ledger.SQLite, ledger.PostgreSQL, ledger.MySQL} {
		l, err := ledger.NewSQLDialect(db, testTable, d)
		require.NoError(t, err, "a named dialect needs no detection")
		assert.Equal(t, d, l.Dialect())
	}
	_, err = ledger.NewSQLDialect(db, testTable, ledger.Dialect(9))
	assert.Error(t, err)
	_, err = ledger.NewSQLDialect(db, `x"; DROP TABLE effects; --`, ledger.PostgreSQL)
	assert.Error(t, err, "the table-name check holds whatever the dialect")
	_, err = ledger.DetectDialect(nil)
	assert.Error(t, err)

	assert.Equal(t, "sqlite", ledger.SQLite.String())
	assert.Equal(t, "postgresql", ledger.PostgreSQL.String())
	assert.Equal(t, "mysql", ledger.MySQL.String())
	assert.Equal(t, "detect", ledger.Detect.String())
	assert.Equal(t, "Dialect(9)", ledger.Dialect(9).String())
}

// HC-38, HC-43: two connections doing the work of the same hop at once:
// exactly one records it and its effect; the other gets ErrRecorded and its
// effect is rolled back.
func TestHC43ConcurrentDoRecordsOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		f := newLedger(t, b)
		// Two connections of their own, so that both transactions are
		// open at once on the server.
		db1, db2 := f.p.open(t), f.p.open(t)
		defer db1.Close()
		defer db2.Close()
		l1, err := ledger.NewSQL(db1, testTable)
		require.NoError(t, err)
		l2, err := ledger.NewSQL(db2, testTable)
		require.NoError(t, err)
		ledgers := []*ledger.SQL{l1, l2}

		for round := range 16 {
			race(t, f, ledgers, fmt.Sprint("race-", round))
		}
	})
}

// A transaction of the caller whose snapshot predates another's record of
// the same hop never records it a second time, at REPEATABLE READ. On
// MySQL its locking read sees the record committed since its snapshot, so
// Record reports ErrRecorded; PostgreSQL refuses the insert with a
// serialization failure.
func TestRecordAfterOlderSnapshot(t *testing.T) {
	for _, b := range backends[1:] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newLedger(t, b)
			d := digestOf("snapshot")
			tx, err := f.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			var n int
			require.NoError(t, tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM effects`).Scan(&n)) // takes the snapshot
			require.NoError(t, f.l.Do(ctx, testIss, "h", d, f.insertEffect(ctx, "h", "first")))

			require.NoError(t, f.insertEffect(ctx, "h-again", "second")(tx))
			err = f.l.Record(ctx, tx, testIss, "h", d)
			require.Error(t, err, "recorded twice")
			if b.dialect == ledger.MySQL {
				assert.ErrorIs(t, err, ledger.ErrRecorded)
			}
			require.NoError(t, tx.Rollback())
			assert.False(t, f.hasEffect(t, "h-again"))
			assert.Equal(t, 1, count(t, f.d, f.db, `SELECT COUNT(*) FROM `+testTable))
		})
	}
}

// Values are bound, never written into a statement: pairs full of quotes,
// placeholders and comment markers are recorded and found as they are, and
// keys that differ only by case or trailing spaces stay apart (MySQL's
// VARBINARY columns have no collation and no padding).
func TestValuesAreBound(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		f := newLedger(t, b)
		pairs := [][2]string{
			{`x'); DROP TABLE effects; --`, `?`},
			{`$1`, `"; --`},
			{"a", "h"}, {"A", "h"}, {"a ", "h"}, {"a", "h "}, {"é", "ß"},
		}
		for i, p := range pairs {
			require.NoError(t, f.l.Do(ctx, p[0], p[1], digestOf(fmt.Sprint(i)), nil), "%q", p)
		}
		for i, p := range pairs {
			o, err := f.l.Outcome(ctx, p[0], p[1], digestOf(fmt.Sprint(i)), false)
			require.NoError(t, err)
			assert.Equal(t, ledger.TookEffect, o, "%q", p)
		}
		assert.Equal(t, len(pairs), count(t, f.d, f.db, `SELECT COUNT(*) FROM `+testTable))
		assert.Equal(t, 0, count(t, f.d, f.db, `SELECT COUNT(*) FROM effects`), "effects still there")
	})
}

// A pair the table cannot hold exactly is refused with ErrKey before any
// work runs, and nothing is recorded: on MySQL, iss or hop over 1024
// octets; on PostgreSQL, U+0000 or octets that are not UTF-8 in the TEXT
// columns (issue 35, finding 8: the effect ran and the server then refused
// the record, so the hop could never be recorded and its outcome stayed
// unknown).
func TestUnholdablePairRefused(t *testing.T) {
	for _, c := range []struct {
		b        backend
		iss, hop string
	}{
		{backends[2], strings.Repeat("i", 1025), "h"},
		{backends[2], "i", strings.Repeat("h", 1025)},
		{backends[1], "i\x00", "h"},
		{backends[1], "i", "Vb3kQx9ZtR2mN8pL4wYc1A\x00"},
		{backends[1], "i\xff", "h"},
		{backends[1], "i", "h\xc3"},
	} {
		t.Run(c.b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newLedger(t, c.b)
			require.ErrorIs(t, f.l.CheckKey(c.iss, c.hop), ledger.ErrKey)
			ran := false
			err := f.l.Do(ctx, c.iss, c.hop, digestOf("x"), func(tx *sql.Tx) error {
				ran = true
				return f.insertEffect(ctx, "e", "x")(tx)
			})
			require.ErrorIs(t, err, ledger.ErrKey)
			assert.False(t, ran, "the work ran for a pair that cannot be recorded")
			assert.NotErrorIs(t, err, ledger.ErrRecorded)
			assert.NotErrorIs(t, err, ledger.ErrUncertain)
			assert.False(t, f.hasEffect(t, "e"))
			tx, err := f.db.BeginTx(ctx, nil)
			require.NoError(t, err)
			assert.ErrorIs(t, f.l.Record(ctx, tx, c.iss, c.hop, digestOf("x")), ledger.ErrKey)
			require.NoError(t, tx.Rollback())
			o, err := f.l.Outcome(ctx, c.iss, c.hop, digestOf("x"), true)
			assert.ErrorIs(t, err, ledger.ErrKey)
			assert.Equal(t, ledger.Unknown, o)
		})
	}
	// SQLite holds every one of them.
	lite := newLedger(t, backends[0])
	assert.NoError(t, lite.l.CheckKey("i\x00\xff", strings.Repeat("h", 1025)))
	assert.NoError(t, lite.l.Do(context.Background(), "i\x00\xff", "h\x00", digestOf("x"), nil))
	// At the limit, MySQL holds the pair.
	f := newLedger(t, backends[2])
	ctx := context.Background()
	iss, hop := strings.Repeat("i", 1024), strings.Repeat("h", 1024)
	require.NoError(t, f.l.Do(ctx, iss, hop, digestOf("x"), nil))
	o, err := f.l.Outcome(ctx, iss, hop, digestOf("x"), false)
	require.NoError(t, err)
	assert.Equal(t, ledger.TookEffect, o)
}

// HC-38, HC-43: eight transactions of one pool racing for each of twenty
// hops: one records each hop, the seven others get ErrRecorded, and no
// deadlock or serialization failure reaches the caller (MySQL's locking
// read is a shared lock, which the losers can all hold at once).
func TestHC43ManyDoRecordOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const racers = 8
		f := newLedger(t, b)
		f.db.SetMaxOpenConns(racers)
		ledgers := make([]*ledger.SQL, racers)
		for i := range ledgers {
			ledgers[i] = f.l
		}
		for round := range 20 {
			race(t, f, ledgers, fmt.Sprint("many-", round))
		}
	})
}

// race has each ledger do the work of hop at once, each effect writing a
// row of its own so that only the record can make one of them fail, and
// checks that exactly one recorded it with its effect, and that every
// other got ErrRecorded with its effect rolled back.
func race(t *testing.T, f *fixture, ledgers []*ledger.SQL, hop string) {
	t.Helper()
	ctx := context.Background()
	d := digestOf(hop)
	errs := make([]error, len(ledgers))
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, l := range ledgers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			errs[i] = l.Do(ctx, testIss, hop, d, f.insertEffect(ctx, fmt.Sprint(hop, "/", i), "x"))
		}()
	}
	close(gate)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "%s: recorded by %d and %d", hop, winner, i)
			winner = i
			continue
		}
		require.ErrorIs(t, err, ledger.ErrRecorded, "%s, racer %d", hop, i)
		require.NotErrorIs(t, err, ledger.ErrConflict)
	}
	require.NotEqual(t, -1, winner, "%s: nobody recorded", hop)
	for i := range ledgers {
		assert.Equal(t, i == winner, f.hasEffect(t, fmt.Sprint(hop, "/", i)), "%s: effect of racer %d", hop, i)
	}
	assert.True(t, f.hasRecord(t, testIss, hop))
}
