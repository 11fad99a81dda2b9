package ledger_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/agentproto/handoff/ledger"
)

// The tests run against each dialect: SQLite in a temporary file, and the
// PostgreSQL and MySQL (MariaDB) servers named by HANDOFF_POSTGRES_DSN and
// HANDOFF_MYSQL_DSN (by default those .ci/postgres.sh and .ci/mariadb.sh
// start). Each test gets a schema (PostgreSQL) or database (MySQL) of its
// own, dropped when it ends. A server that does not answer skips its
// subtests, unless CI is set or HANDOFF_REQUIRE_POSTGRES=1 (or
// HANDOFF_REQUIRE_MYSQL=1), when they fail.
const (
	defaultPostgresDSN = "postgres://handoff@127.0.0.1:5439/postgres?sslmode=disable"
	defaultMySQLDSN    = "handoff@tcp(127.0.0.1:3319)/"
)

// backend is one dialect under test.
type backend struct {
	name    string
	dialect ledger.Dialect
	// journal is the SQLite journal mode, empty for the default.
	journal string
}

var backends = []backend{
	{name: "sqlite", dialect: ledger.SQLite},
	{name: "postgresql", dialect: ledger.PostgreSQL},
	{name: "mysql", dialect: ledger.MySQL},
}

// eachBackend runs fn as a subtest for each dialect.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// missing skips or fails the test for a server that does not answer.
func missing(t testing.TB, require string, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" || os.Getenv(require) == "1" {
		t.Fatalf("%s (required: CI or %s=1 is set)", msg, require)
	}
	t.Skipf("%s; start one with .ci/postgres.sh or .ci/mariadb.sh (CI=1 or %s=1 turns this skip into a failure)", msg, require)
}

// place names one empty database namespace: a SQLite file, a PostgreSQL
// schema or a MySQL database. A child process reopens it from its
// environment.
type place struct {
	dialect ledger.Dialect
	// where is the SQLite file, or the server's DSN.
	where string
	// ns is the schema or database; journal the SQLite journal mode.
	ns, journal string
}

const (
	envDialect = "LEDGER_TEST_DIALECT"
	envWhere   = "LEDGER_TEST_WHERE"
	envNS      = "LEDGER_TEST_NS"
	envJournal = "LEDGER_TEST_JOURNAL"
)

func (p place) env() []string {
	return []string{envDialect + "=" + strconv.Itoa(int(p.dialect)), envWhere + "=" + p.where,
		envNS + "=" + p.ns, envJournal + "=" + p.journal}
}

func placeFromEnv() (place, bool) {
	d, err := strconv.Atoi(os.Getenv(envDialect))
	if err != nil || os.Getenv(envWhere) == "" {
		return place{}, false
	}
	return place{dialect: ledger.Dialect(d), where: os.Getenv(envWhere), ns: os.Getenv(envNS),
		journal: os.Getenv(envJournal)}, true
}

// newPlace makes a fresh, empty namespace for t and drops it when t ends.
func newPlace(t testing.TB, b backend) place {
	t.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	ns := "lt_" + hex.EncodeToString(r[:])
	switch b.dialect {
	case ledger.SQLite:
		return place{dialect: b.dialect, where: filepath.Join(t.TempDir(), "ledger.db"), journal: b.journal}
	case ledger.PostgreSQL:
		p := place{dialect: b.dialect, where: envOr("HANDOFF_POSTGRES_DSN", defaultPostgresDSN), ns: ns}
		admin(t, p, "HANDOFF_REQUIRE_POSTGRES", `CREATE SCHEMA `+ns, `DROP SCHEMA IF EXISTS `+ns+` CASCADE`)
		return p
	case ledger.MySQL:
		p := place{dialect: b.dialect, where: envOr("HANDOFF_MYSQL_DSN", defaultMySQLDSN), ns: ns}
		admin(t, p, "HANDOFF_REQUIRE_MYSQL", `CREATE DATABASE `+ns, `DROP DATABASE IF EXISTS `+ns)
		return p
	}
	t.Fatalf("unknown dialect %v", b.dialect)
	return place{}
}

// admin runs create on the server of p, and drop when t ends.
func admin(t testing.TB, p place, req, create, drop string) {
	t.Helper()
	db := openServer(t, p, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		missing(t, req, "no %v server answers at %s: %v", p.dialect, p.where, err)
	}
	_, err := db.ExecContext(ctx, create)
	require.NoError(t, err)
	t.Cleanup(func() {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := db.ExecContext(ctx, drop)
		require.NoError(t, err)
	})
}

// openServer opens the server of p, in the namespace ns ("" for none).
func openServer(t testing.TB, p place, ns string) *sql.DB {
	t.Helper()
	switch p.dialect {
	case ledger.PostgreSQL:
		cfg, err := pgx.ParseConfig(p.where)
		require.NoError(t, err)
		if ns != "" {
			cfg.RuntimeParams["search_path"] = ns
		}
		return stdlib.OpenDB(*cfg)
	case ledger.MySQL:
		cfg, err := mysql.ParseDSN(p.where)
		require.NoError(t, err)
		cfg.DBName = ns
		c, err := mysql.NewConnector(cfg)
		require.NoError(t, err)
		return sql.OpenDB(c)
	}
	t.Fatalf("no server for dialect %v", p.dialect)
	return nil
}

// open opens the database of p. The caller closes it.
func (p place) open(t testing.TB) *sql.DB {
	t.Helper()
	if p.dialect != ledger.SQLite {
		return openServer(t, p, p.ns)
	}
	dsn := p.where + "?_pragma=busy_timeout(10000)"
	if p.journal != "" {
		dsn += "&_pragma=journal_mode(" + p.journal + ")"
	}
	db, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	return db
}

// q rewrites the "?" placeholders of query for the dialect.
func q(d ledger.Dialect, query string) string {
	if d != ledger.PostgreSQL {
		return query
	}
	var sb strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			sb.WriteString("$" + strconv.Itoa(n))
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// effectsTable is the DDL of the caller's own table, in which the tests'
// work takes effect.
func effectsTable(d ledger.Dialect) string {
	if d == ledger.MySQL {
		return `CREATE TABLE IF NOT EXISTS effects (hop VARCHAR(255) PRIMARY KEY, note TEXT NOT NULL) ENGINE=InnoDB`
	}
	return `CREATE TABLE IF NOT EXISTS effects (hop TEXT PRIMARY KEY, note TEXT NOT NULL)`
}
