package ledger

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Dialect names the SQL dialect of the database a ledger is kept in. Each
// has its own placeholders, column types, quoting and insert-if-absent
// statement; the package writes every value as a bound parameter, never
// into the text of a statement.
type Dialect int

const (
	// Detect, the zero value, tells NewSQLDialect to detect the dialect
	// from the database's driver, as NewSQL does.
	Detect Dialect = iota
	// SQLite 3.24 or later: "?" placeholders, TEXT and BLOB columns,
	// INSERT ... ON CONFLICT (iss, hop) DO NOTHING. Writers are serialized
	// by the database, so the transaction of Do is SQLite's default. A
	// table name beginning "sqlite_" is refused (ErrTable).
	SQLite
	// PostgreSQL 9.5 or later: "$1" placeholders, TEXT and BYTEA columns,
	// INSERT ... ON CONFLICT (iss, hop) DO NOTHING. Do runs at READ
	// COMMITTED: a second transaction recording the same (iss, hop) waits
	// for the first on the primary key, then inserts nothing, and its
	// lookup (a new snapshot at that level) finds the first one's record:
	// ErrRecorded. In a caller's transaction at REPEATABLE READ or
	// SERIALIZABLE the server may refuse the second with a serialization
	// failure, which Record returns; nothing is recorded twice at any
	// level. iss and hop are TEXT: valid UTF-8 without U+0000; any other
	// is refused with ErrKey before anything is written. A table name
	// beginning "pg_" is refused (ErrTable).
	PostgreSQL
	// MySQL 5.7 or later, or MariaDB 10.3 or later, with InnoDB: "?"
	// placeholders, VARBINARY and BLOB columns (compared octet by octet,
	// with no collation and no padding), a plain INSERT whose duplicate-key
	// error is followed by a locking read (LOCK IN SHARE MODE) of the held
	// record. Neither INSERT IGNORE, which turns errors such as a truncated
	// value into warnings, nor ON DUPLICATE KEY UPDATE, whose count of
	// affected rows depends on the client flag CLIENT_FOUND_ROWS, can tell
	// an insert apart reliably. A duplicate-key error ends the statement,
	// not the transaction. The locking read sees the latest committed
	// record whatever the transaction's snapshot; Do runs at READ
	// COMMITTED, which takes fewer gap locks. iss and hop are at most 1024
	// octets each, so that the primary key fits InnoDB's limit of 3072.
	MySQL
)

// String returns "sqlite", "postgresql", "mysql" or "detect".
func (d Dialect) String() string {
	switch d {
	case Detect:
		return "detect"
	case SQLite:
		return "sqlite"
	case PostgreSQL:
		return "postgresql"
	case MySQL:
		return "mysql"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// drivers maps the package path of a database/sql driver to its dialect.
var drivers = map[string]Dialect{
	"modernc.org/sqlite":                   SQLite,
	"github.com/mattn/go-sqlite3":          SQLite,
	"github.com/ncruces/go-sqlite3/driver": SQLite,
	"github.com/glebarez/go-sqlite":        SQLite,
	"github.com/jackc/pgx/v5/stdlib":       PostgreSQL,
	"github.com/jackc/pgx/v4/stdlib":       PostgreSQL,
	"github.com/lib/pq":                    PostgreSQL,
	"github.com/go-sql-driver/mysql":       MySQL,
}

// DetectDialect returns the dialect of db's driver, from the Go package
// that implements it: modernc.org/sqlite, github.com/mattn/go-sqlite3,
// github.com/ncruces/go-sqlite3/driver and github.com/glebarez/go-sqlite
// are SQLite; github.com/jackc/pgx/v5/stdlib (and v4) and github.com/lib/pq
// are PostgreSQL; github.com/go-sql-driver/mysql is MySQL (MariaDB too). A
// driver it does not know, or one wrapped by another package, is an error:
// name the dialect with NewSQLDialect.
func DetectDialect(db *sql.DB) (Dialect, error) {
	if db == nil {
		return Detect, fmt.Errorf("ledger: nil *sql.DB")
	}
	drv := db.Driver()
	if d, ok := drivers[driverPackage(drv)]; ok {
		return d, nil
	}
	return Detect, fmt.Errorf("ledger: cannot tell the SQL dialect of driver %T; name it with NewSQLDialect", drv)
}

func driverPackage(drv driver.Driver) string {
	t := reflect.TypeOf(drv)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.PkgPath()
}

// maxKey is the most octets of iss or hop the MySQL table holds.
const maxKey = 1024

// statements are the texts of a ledger's statements in one dialect, with
// the table name, checked to be an identifier, quoted in them.
type statements struct {
	create, insert, lookup, lookupLocked string
	// insertReportsDuplicate: the insert fails on a held (iss, hop)
	// instead of inserting nothing (MySQL).
	insertReportsDuplicate bool
	// isolation is that of the transaction Do begins.
	isolation sql.IsolationLevel
}

func (d Dialect) statements(table string) (statements, error) {
	switch d {
	case SQLite:
		q := `"` + table + `"`
		return statements{
			create: `CREATE TABLE IF NOT EXISTS ` + q + ` (
	iss TEXT NOT NULL,
	hop TEXT NOT NULL,
	digest BLOB NOT NULL,
	op_id TEXT NOT NULL,
	recorded_at INTEGER NOT NULL,
	PRIMARY KEY (iss, hop)
)`,
			insert:       `INSERT INTO ` + q + ` (iss, hop, digest, op_id, recorded_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (iss, hop) DO NOTHING`,
			lookup:       `SELECT digest FROM ` + q + ` WHERE iss = ? AND hop = ?`,
			lookupLocked: `SELECT digest FROM ` + q + ` WHERE iss = ? AND hop = ?`,
			isolation:    sql.LevelDefault,
		}, nil
	case PostgreSQL:
		q := `"` + table + `"`
		return statements{
			create: `CREATE TABLE IF NOT EXISTS ` + q + ` (
	iss TEXT NOT NULL,
	hop TEXT NOT NULL,
	digest BYTEA NOT NULL,
	op_id TEXT NOT NULL,
	recorded_at BIGINT NOT NULL,
	PRIMARY KEY (iss, hop)
)`,
			insert:       `INSERT INTO ` + q + ` (iss, hop, digest, op_id, recorded_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (iss, hop) DO NOTHING`,
			lookup:       `SELECT digest FROM ` + q + ` WHERE iss = $1 AND hop = $2`,
			lookupLocked: `SELECT digest FROM ` + q + ` WHERE iss = $1 AND hop = $2`,
			isolation:    sql.LevelReadCommitted,
		}, nil
	case MySQL:
		q := "`" + table + "`"
		return statements{
			create: `CREATE TABLE IF NOT EXISTS ` + q + ` (
	iss VARBINARY(` + strconv.Itoa(maxKey) + `) NOT NULL,
	hop VARBINARY(` + strconv.Itoa(maxKey) + `) NOT NULL,
	digest BLOB NOT NULL,
	op_id VARBINARY(64) NOT NULL,
	recorded_at BIGINT NOT NULL,
	PRIMARY KEY (iss, hop)
) ENGINE=InnoDB`,
			insert:                 `INSERT INTO ` + q + ` (iss, hop, digest, op_id, recorded_at) VALUES (?, ?, ?, ?, ?)`,
			lookup:                 `SELECT digest FROM ` + q + ` WHERE iss = ? AND hop = ?`,
			lookupLocked:           `SELECT digest FROM ` + q + ` WHERE iss = ? AND hop = ? LOCK IN SHARE MODE`,
			insertReportsDuplicate: true,
			isolation:              sql.LevelReadCommitted,
		}, nil
	}
	return statements{}, fmt.Errorf("ledger: unknown dialect %v", d)
}

// checkKey returns an error wrapping ErrKey for an iss or hop the
// dialect's table cannot hold exactly.
func (d Dialect) checkKey(iss, hop string) error {
	for _, f := range [...]struct{ name, v string }{{"iss", iss}, {"hop", hop}} {
		switch {
		case d == MySQL && len(f.v) > maxKey:
			return fmt.Errorf("%w: %s of %d octets; the MySQL ledger holds at most %d", ErrKey, f.name, len(f.v), maxKey)
		case d == PostgreSQL && strings.IndexByte(f.v, 0) >= 0:
			return fmt.Errorf("%w: %s holds U+0000, which a PostgreSQL TEXT column cannot hold", ErrKey, f.name)
		case d == PostgreSQL && !utf8.ValidString(f.v):
			return fmt.Errorf("%w: %s is not valid UTF-8, which a PostgreSQL TEXT column requires", ErrKey, f.name)
		}
	}
	return nil
}

// checkTable returns an error wrapping ErrTable for a table name the
// dialect reserves.
func (d Dialect) checkTable(table string) error {
	switch {
	case d == PostgreSQL && strings.HasPrefix(table, "pg_"):
		return fmt.Errorf("%w: %q begins with pg_, the prefix PostgreSQL reserves for its system catalogs", ErrTable, table)
	case d == SQLite && strings.HasPrefix(strings.ToLower(table), "sqlite_"):
		return fmt.Errorf("%w: %q begins with sqlite_, the prefix SQLite reserves for its own tables", ErrTable, table)
	}
	return nil
}

// bind returns s as the dialect binds it: as octets for MySQL's VARBINARY
// columns, as text otherwise.
func (d Dialect) bind(s string) any {
	if d == MySQL {
		return []byte(s)
	}
	return s
}
