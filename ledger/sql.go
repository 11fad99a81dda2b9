package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

var (
	// ErrRecorded is returned by Record and Do when (iss, hop) is already
	// recorded: the work of that hop has already taken effect and must not
	// be done again (HC-38). The caller's transaction must be rolled back.
	ErrRecorded = errors.New("ledger: (iss, hop) already recorded")

	// ErrConflict is returned by Record and Do when (iss, hop) is already
	// recorded with a different digest (equivocation, HC-35). It wraps
	// ErrRecorded, so errors.Is(err, ErrRecorded) holds for both.
	ErrConflict = fmt.Errorf("%w with a different digest", ErrRecorded)

	// ErrUncertain is wrapped by the error Do returns when the commit
	// itself failed. The step may or may not have taken effect; the caller
	// learns which from Outcome once the step cannot still complete, and
	// until then keeps the hop "accepted" (HC-45). Any other error from Do
	// means the transaction was never committed and nothing took effect.
	ErrUncertain = errors.New("ledger: commit failed, outcome unknown")

	// ErrKey is returned by CheckKey, and by Record, Do and Outcome before
	// they touch the database or run any work, for an iss or hop the
	// ledger's table cannot hold exactly: in PostgreSQL, whose iss and hop
	// columns are TEXT, one holding U+0000 or octets that are not UTF-8;
	// in MySQL, one over 1024 octets. Such a pair can never be recorded,
	// so Do never runs its effect, and Outcome reports Unknown with this
	// error for it. A delegate calls CheckKey on a received offer before it
	// takes the work, and refuses the offer when it fails. The draft's
	// HopId ([A-Za-z0-9_-]{22,64}) already excludes both from a hop that
	// passed the receive checks; an AgentId is any text, U+0000 included.
	ErrKey = errors.New("ledger: the table cannot hold this iss or hop")

	// ErrTable is returned by NewSQL and NewSQLDialect for a table name
	// that is not an identifier, or that the dialect reserves: in
	// PostgreSQL a name beginning "pg_", the prefix of the system catalogs
	// (an unqualified "pg_class" names pg_catalog.pg_class, which CREATE
	// TABLE IF NOT EXISTS takes as existing and every write then fails
	// on); in SQLite one beginning "sqlite_", in any case.
	ErrTable = errors.New("ledger: table name refused")
)

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// SQL is a ledger kept in a table of the delegate's own SQL database, the
// database in which its work takes effect. It is safe for concurrent use.
//
// The table has the columns iss, hop (the primary key), digest (the handoff
// digest of the offer), op_id (OperationID(iss, hop)) and recorded_at (Unix
// time in milliseconds). Its statements are those of its Dialect: SQLite,
// PostgreSQL or MySQL (MariaDB too); see Dialect for each one's column
// types, insert-if-absent form and isolation.
type SQL struct {
	db      *sql.DB
	table   string
	dialect Dialect
	stmt    statements
}

// NewSQL returns a ledger kept in table of db, in the dialect of db's
// driver (see DetectDialect). The table name must be an identifier: a
// letter or underscore followed by up to 62 letters, digits or
// underscores, and not one the dialect reserves (ErrTable). Call Init to
// create the table.
func NewSQL(db *sql.DB, table string) (*SQL, error) {
	return NewSQLDialect(db, table, Detect)
}

// NewSQLDialect is NewSQL with the dialect named, for a driver that
// DetectDialect does not know or a wrapped one; Detect detects it.
func NewSQLDialect(db *sql.DB, table string, d Dialect) (*SQL, error) {
	if db == nil {
		return nil, errors.New("ledger: nil *sql.DB")
	}
	if !identRE.MatchString(table) {
		return nil, fmt.Errorf("%w: %q is not an identifier", ErrTable, table)
	}
	if d == Detect {
		var err error
		if d, err = DetectDialect(db); err != nil {
			return nil, err
		}
	}
	if err := d.checkTable(table); err != nil {
		return nil, err
	}
	stmt, err := d.statements(table)
	if err != nil {
		return nil, err
	}
	return &SQL{db: db, table: table, dialect: d, stmt: stmt}, nil
}

// Dialect returns the dialect of the ledger's statements.
func (l *SQL) Dialect() Dialect { return l.dialect }

// Table returns the name of the ledger table.
func (l *SQL) Table() string { return l.table }

// Init creates the ledger table if it does not exist.
func (l *SQL) Init(ctx context.Context) error {
	if _, err := l.db.ExecContext(ctx, l.stmt.create); err != nil {
		return fmt.Errorf("ledger: create table %s: %w", l.table, err)
	}
	return nil
}

// Record records (iss, hop, digest) inside the caller's transaction tx, the
// transaction that makes the work of the hop take effect, so that the record
// commits or aborts together with the effect (HC-43). tx must belong to the
// database the ledger was created with.
//
// If (iss, hop) is already recorded, Record returns ErrRecorded when the
// digest is the same and ErrConflict when it differs; the caller must then
// roll tx back, so that the work is not done a second time (HC-38). Any
// other error also leaves tx unusable for the effect and must end in a
// rollback.
func (l *SQL) Record(ctx context.Context, tx *sql.Tx, iss, hop string, digest []byte) error {
	if tx == nil {
		return errors.New("ledger: Record needs the caller's transaction")
	}
	if err := l.checkArgs(iss, hop, digest); err != nil {
		return err
	}
	iv, hv := l.dialect.bind(iss), l.dialect.bind(hop)
	res, err := tx.ExecContext(ctx, l.stmt.insert, iv, hv, digest, OperationID(iss, hop), time.Now().UnixMilli())
	if err == nil {
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("ledger: record: %w", err)
		}
		if n == 1 {
			return nil
		}
	} else if !l.stmt.insertReportsDuplicate {
		return fmt.Errorf("ledger: record: %w", err)
	}
	// Nothing inserted, or (MySQL) an insert that failed, perhaps on the
	// primary key: read the record held, with a locking read where the
	// transaction's snapshot could hide one committed since.
	var have []byte
	switch lerr := tx.QueryRowContext(ctx, l.stmt.lookupLocked, iv, hv).Scan(&have); {
	case err != nil && errors.Is(lerr, sql.ErrNoRows):
		return fmt.Errorf("ledger: record: %w", err) // not a duplicate
	case err != nil && lerr != nil:
		return fmt.Errorf("ledger: record: %w (reading existing record: %v)", err, lerr)
	case lerr != nil:
		return fmt.Errorf("ledger: record: reading existing record: %w", lerr)
	}
	if bytes.Equal(have, digest) {
		return ErrRecorded
	}
	return ErrConflict
}

// Outcome looks up the record of (iss, hop) and reports what it shows about
// the work of the offer whose handoff digest is digest. It never guesses
// (HC-45):
//
//   - a record with this digest: TookEffect;
//   - a record with another digest: Conflict;
//   - no record: NoEffect if settled is true, else Unknown;
//   - any error from the database, including a cancelled or expired ctx:
//     Unknown and the error.
//
// Absence of the record proves that the effect did not take place only once
// the step that would have written it cannot still complete (HC-43). The
// method cannot know that, so the caller states it: settled is true only
// when the caller knows that every transaction that may record (iss, hop)
// has ended without committing or has been resolved, for example because
// the transaction rolled back, Do returned an error not wrapping
// ErrUncertain, or the store has finished its recovery after a crash, and
// that no record has been lost. Otherwise the caller passes false, and an
// absent record yields Unknown: the delegate keeps the hop "accepted" and
// keeps looking, and if the outcome cannot be learned it flags the hop to
// its operator.
func (l *SQL) Outcome(ctx context.Context, iss, hop string, digest []byte, settled bool) (Outcome, error) {
	if err := l.checkArgs(iss, hop, digest); err != nil {
		return Unknown, err
	}
	if err := ctx.Err(); err != nil {
		return Unknown, fmt.Errorf("ledger: lookup: %w", err)
	}
	var have []byte
	err := l.db.QueryRowContext(ctx, l.stmt.lookup, l.dialect.bind(iss), l.dialect.bind(hop)).Scan(&have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// A lookup cut short by its context may come back empty; an
		// absence it reports shows nothing.
		if cerr := ctx.Err(); cerr != nil {
			return Unknown, fmt.Errorf("ledger: lookup: %w", cerr)
		}
		if settled {
			return NoEffect, nil
		}
		return Unknown, nil
	case err != nil:
		return Unknown, fmt.Errorf("ledger: lookup: %w", err)
	case bytes.Equal(have, digest):
		return TookEffect, nil
	default:
		return Conflict, nil
	}
}

// Do makes the work of the hop (iss, hop) take effect together with its
// record: it begins a transaction on the ledger's database, runs effect in
// it, records (iss, hop, digest) in it, and commits. effect must make its
// changes only through tx. On any error Do rolls the transaction back and
// returns the error; effect may be nil to record only.
//
// The effect runs before the record, so that a duplicate record also undoes
// it. An effect that itself fails on a hop already done, for example on a
// unique key of its own, returns its own error rather than ErrRecorded; such
// an error still means nothing took effect in this call.
//
// A nil result means the effect and its record were committed. An error
// wrapping ErrUncertain means the commit failed and the outcome is unknown
// until the step cannot still complete (see Outcome). Any other error means
// nothing took effect; it wraps ErrRecorded or ErrConflict when the hop was
// already recorded, in which case its work has already been done and must
// not be done again (HC-38).
func (l *SQL) Do(ctx context.Context, iss, hop string, digest []byte, effect func(tx *sql.Tx) error) error {
	if err := l.checkArgs(iss, hop, digest); err != nil {
		return err // before the effect: a pair that cannot be recorded is never worked on
	}
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{Isolation: l.stmt.isolation})
	if err != nil {
		return fmt.Errorf("ledger: begin: %w", err)
	}
	// Rolls back on every path that does not commit, a panic in effect
	// included; after a commit it is a no-op.
	defer func() { _ = tx.Rollback() }()
	if effect != nil {
		if err := effect(tx); err != nil {
			return err
		}
	}
	if err := l.Record(ctx, tx, iss, hop, digest); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: %w", ErrUncertain, err)
	}
	return nil
}

// CheckKey returns an error wrapping ErrKey when the ledger's table cannot
// hold the pair (iss, hop) exactly, and nil otherwise. Call it before
// taking the work of a hop whose outcome the ledger will record: a pair it
// refuses can never be recorded.
func (l *SQL) CheckKey(iss, hop string) error {
	return l.dialect.checkKey(iss, hop)
}

func (l *SQL) checkArgs(iss, hop string, digest []byte) error {
	switch {
	case iss == "":
		return errors.New("ledger: empty iss")
	case hop == "":
		return errors.New("ledger: empty hop")
	case len(digest) == 0:
		return errors.New("ledger: empty digest")
	}
	return l.dialect.checkKey(iss, hop)
}
