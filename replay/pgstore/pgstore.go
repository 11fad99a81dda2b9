// Package pgstore keeps the delegate's memory of hops (replay.Store) and
// the delegator's records of the hops it offered (replay.OfferStore) in
// PostgreSQL, for a deployment whose system of record is already
// PostgreSQL: its replicas then share one memory without Redis.
//
// The stores take the application's *sql.DB, opened with the pgx driver
// (github.com/jackc/pgx/v5/stdlib), and each keeps its records in one table
// that Open (or OpenOffers) creates if missing. They pass the suites of
// replay/storetest.
//
// # One round trip
//
// Remember, the check-and-record of every received offer, is one
// statement: INSERT ... ON CONFLICT (k) DO NOTHING RETURNING, with a UNION
// ALL that returns the row held when nothing was written; it takes no lock
// on a held row, so that a storm of retransmissions does not queue. A
// second statement runs only when the row held has expired and not yet
// been swept (INSERT ... ON CONFLICT (k) DO UPDATE ... WHERE <still
// expired> RETURNING, which replaces it), or when a concurrent insert
// committed after the statement's snapshot hides the row it lost to; then
// Remember runs it again.
//
// Swap, the write of every reply and of Take, is one statement too: a
// CTE locks the live row (SELECT ... FOR NO KEY UPDATE, which reads its
// latest version even when a concurrent write committed after the
// statement's snapshot), an UPDATE ... FROM it writes the new state when
// the row holds the old one and the caller's identity, and RETURNING, with
// a UNION ALL that returns the locked row when nothing was written, gives
// the record held after the call either way. A fresh receive therefore
// costs one round trip and a reply one. Get, Update, Release and each
// OfferStore method are one statement too; Update, Release and the
// OfferStore's Swap and Delete read the row once more only when they
// fail, to tell which error applies.
//
// # Expiry
//
// A record's expiry is a column (Unix seconds and nanoseconds, NULL for
// none), and every statement counts a row as live only while its expiry
// is after the clock of the calling process (Options.Now), which is
// passed to it: an expired row is never returned, updated or released,
// and Remember or Create replaces it. The clocks of the processes that
// share a table must therefore be synchronised, as for Redis. Expired rows
// are deleted by Sweep, a bounded DELETE, which Options.SweepEvery runs in
// the background.
//
// # No per-issuer share
//
// The store keeps no per-issuer share (replay.ErrIssuerFull is never
// returned), for three reasons. It has no bound of its own to share: its
// cap is the database's, disk and quotas that the deployment manages for
// all its data, and it is full (replay.ErrFull) only when PostgreSQL says
// so. A share counted in the one Remember statement would not be exact:
// under READ COMMITTED the count reads the statement's snapshot, so
// concurrent Remembers of one issuer would each find the last room, and
// an exact count needs a per-issuer lock taken before the count's
// snapshot and held until the insert commits, which would queue every
// fresh receive of an issuer behind the commit of the one before. And the
// issuer's live rows would be counted on every fresh receive, a scan as
// long as the share. A deployment that must keep one delegator from
// crowding out the others limits each delegator's rate of offers before
// Receive, or keeps its memory in a store that offers the share
// (replay.Memory, replay/boltstore, replay/redisstore); a tablespace of
// the table's own, on a volume sized for it, keeps a flood from filling
// the rest of the database.
//
// # Failing closed
//
// Every error from the database (a refused or broken connection, a
// timeout, a serialization failure, a missing table) is returned as an
// error wrapping replay.ErrUnavailable, or replay.ErrFull when Remember
// cannot write for lack of resources (SQLSTATE class 53), and never as an
// absent record. A cancelled or expired context is returned as its error.
// The caller must then refuse the offer.
//
// # Keys
//
// iss and hop are kept as octets (BYTEA), so that any pair, NUL octets
// included, is held exactly; the primary key is the SHA-256 value of the
// pair, each part prefixed with its length, so that a pair of any length
// fits the index.
package pgstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/internal/codec"
)

// DefaultTable and DefaultOfferTable are the tables when Options.Table is
// empty.
const (
	DefaultTable      = "handoff_hops"
	DefaultOfferTable = "handoff_offers"
)

// DefaultSweepBatch is the most rows one Sweep deletes when
// Options.SweepBatch is zero.
const DefaultSweepBatch = 1000

// retries bounds how often a statement that lost a race is run again.
const retries = 8

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// ErrTable is returned by Open and OpenOffers for a table name that is not
// an identifier of at most 48 characters, or that begins with "pg_", the
// prefix PostgreSQL reserves for its system catalogs: an unqualified
// "pg_class" names pg_catalog.pg_class, which CREATE TABLE IF NOT EXISTS
// takes as existing, and every write then fails.
var ErrTable = errors.New("pgstore: table name refused")

// Options configures a Store or an OfferStore. The zero value is usable.
type Options struct {
	// Table is the table of the records: a letter or underscore followed
	// by up to 47 letters, digits or underscores (the indexes' names add
	// a suffix), not beginning with "pg_" (ErrTable). Empty means
	// DefaultTable (DefaultOfferTable for OpenOffers). Stores of different
	// tables are independent.
	Table string
	// Now returns the current time, by which records expire and Untaken
	// reports ages; nil means time.Now.
	Now func() time.Time
	// SweepEvery, when positive, runs Sweep in the background at that
	// interval until Close. Zero leaves expired rows until Sweep is
	// called; they are never live in any case.
	SweepEvery time.Duration
	// SweepBatch is the most rows one Sweep deletes; zero means
	// DefaultSweepBatch.
	SweepBatch int
}

// base is what both stores share: the database, the table, the clock and
// the sweeper.
type base struct {
	db    *sql.DB
	table string
	now   func() time.Time
	batch int
	sweep string

	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

func newBase(ctx context.Context, db *sql.DB, opts Options, def string, schema func(table string) []string) (*base, error) {
	if db == nil {
		return nil, errors.New("pgstore: nil *sql.DB")
	}
	if opts.Table == "" {
		opts.Table = def
	}
	switch {
	case !identRE.MatchString(opts.Table):
		return nil, fmt.Errorf("%w: %q is not an identifier of at most 48 characters", ErrTable, opts.Table)
	case strings.HasPrefix(opts.Table, "pg_"):
		return nil, fmt.Errorf("%w: %q begins with pg_, the prefix PostgreSQL reserves for its system catalogs", ErrTable, opts.Table)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SweepBatch <= 0 {
		opts.SweepBatch = DefaultSweepBatch
	}
	if err := createSchema(ctx, db, opts.Table, schema(opts.Table)); err != nil {
		return nil, err
	}
	return &base{db: db, table: opts.Table, now: opts.Now, batch: opts.SweepBatch, stop: make(chan struct{})}, nil
}

// createSchema runs the statements of the schema in one transaction that
// holds an advisory lock named by the table, so that replicas starting at
// once do not race on CREATE ... IF NOT EXISTS.
func createSchema(ctx context.Context, db *sql.DB, table string, schema []string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fail(ctx, "create table "+table, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, lockSchema, "handoff pgstore "+table); err != nil {
		return fail(ctx, "create table "+table, err)
	}
	for _, s := range schema {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fail(ctx, "create table "+table, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(ctx, "create table "+table, err)
	}
	return nil
}

func (b *base) startSweeper(every time.Duration) {
	if every <= 0 {
		return
	}
	b.done.Add(1)
	go func() {
		defer b.done.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), every)
				_, _ = b.Sweep(ctx) // a failed sweep is retried at the next tick
				cancel()
			}
		}
	}()
}

// Sweep deletes at most Options.SweepBatch expired rows and returns how
// many it deleted. Expired rows are never live whether swept or not; Sweep
// only reclaims their space.
func (b *base) Sweep(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s, ns := split(b.now())
	res, err := b.db.ExecContext(ctx, b.sweep, s, ns, b.batch)
	if err != nil {
		return 0, fail(ctx, "sweep", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fail(ctx, "sweep", err)
	}
	return int(n), nil
}

// Close stops the sweeper. It does not close the *sql.DB.
func (b *base) Close() error {
	b.once.Do(func() { close(b.stop) })
	b.done.Wait()
	return nil
}

// Store is a replay.Store kept in PostgreSQL. It is safe for concurrent
// use, by any number of processes sharing the table.
type Store struct {
	*base
	q hopStatements
}

var _ replay.Store = (*Store)(nil)

// Open returns a store that keeps its records in the table opts.Table of
// db, creating the table and its indexes if they do not exist. Close does
// not close db.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	b, err := newBase(ctx, db, opts, DefaultTable, func(t string) []string { return newHopStatements(t).schema })
	if err != nil {
		return nil, err
	}
	s := &Store{base: b, q: newHopStatements(b.table)}
	b.sweep = s.q.sweep
	b.startSweeper(opts.SweepEvery)
	return s, nil
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

// Remember implements replay.Store in one round trip, two when the slot
// holds an expired row not swept yet.
func (s *Store) Remember(ctx context.Context, k replay.Key, rec replay.Record) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, &rec); err != nil {
		return replay.Record{}, false, err
	}
	cs, cns := nullTime(rec.Created)
	es, ens := nullTime(rec.Expires)
	stmt := s.q.remember
	for range retries {
		ns, nns := split(s.now())
		var wrote, live bool
		var row hopRow
		err := s.db.QueryRowContext(ctx, stmt, key(k), []byte(k.Iss), []byte(k.Hop),
			rec.Digest, nullBytes(rec.Token), cs, cns, es, ens, octets(rec.State), nullBytes(rec.Status), ns, nns,
		).Scan(append([]any{&wrote, &live}, row.dest()...)...)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // the row held was committed after the snapshot
		case err != nil && resources(err):
			return replay.Record{}, false, fmt.Errorf("pgstore: remember: %w: %w", replay.ErrFull, err)
		case err != nil:
			return replay.Record{}, false, fail(ctx, "remember", err)
		case !live:
			stmt = s.q.replace // an expired row not swept yet: replace it
			continue
		}
		held, err := row.record()
		if err != nil {
			return replay.Record{}, false, err
		}
		// A retry of this call (by the caller, after a lost reply) finds
		// the record its first attempt wrote.
		return held, wrote || replay.Written(held, rec), nil
	}
	return replay.Record{}, false, fmt.Errorf("pgstore: remember: %w: lost %d races in a row", replay.ErrUnavailable, retries)
}

// Get implements replay.Store.
func (s *Store) Get(ctx context.Context, k replay.Key) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, nil); err != nil {
		return replay.Record{}, false, err
	}
	ns, nns := split(s.now())
	var row hopRow
	err := s.db.QueryRowContext(ctx, s.q.get, key(k), ns, nns).Scan(row.dest()...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return replay.Record{}, false, nil
	case err != nil:
		return replay.Record{}, false, fail(ctx, "get", err)
	}
	rec, err := row.record()
	if err != nil {
		return replay.Record{}, false, err
	}
	return rec, true, nil
}

// Update implements replay.Store in one round trip when it succeeds.
func (s *Store) Update(ctx context.Context, k replay.Key, rec replay.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := codec.Check(k, &rec); err != nil {
		return err
	}
	es, ens := nullTime(rec.Expires)
	for range retries {
		ns, nns := split(s.now())
		res, err := s.db.ExecContext(ctx, s.q.update, key(k), octets(rec.State), nullBytes(rec.Status), es, ens,
			rec.Digest, nullBytes(rec.Token), ns, nns)
		if err != nil {
			return fail(ctx, "update", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fail(ctx, "update", err)
		} else if n == 1 {
			return nil
		}
		digest, token, _, ok, err := s.held(ctx, k)
		switch {
		case err != nil:
			return err
		case !ok:
			return replay.ErrNotFound
		case string(digest) != string(rec.Digest) || (len(rec.Token) > 0 && string(token) != string(rec.Token)):
			return replay.ErrConflict
		}
		// The row matches now: it changed between the two statements.
	}
	return fmt.Errorf("pgstore: update: %w: lost %d races in a row", replay.ErrUnavailable, retries)
}

// Swap implements replay.Store in one statement, one round trip, whether
// it writes or finds the record held: the statement locks the live row,
// writes new's State, Status and Expires into it when its State and Status
// are old's (and its Digest and Token old's identity), and returns the row
// held after it either way.
func (s *Store) Swap(ctx context.Context, k replay.Key, old, new replay.Record) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, &old); err != nil {
		return replay.Record{}, false, err
	}
	es, ens := nullTime(new.Expires)
	ns, nns := split(s.now())
	var wrote bool
	var row hopRow
	err := s.db.QueryRowContext(ctx, s.q.swap, key(k), old.Digest, nullBytes(old.Token), octets(old.State), nullBytes(old.Status),
		octets(new.State), nullBytes(new.Status), es, ens, ns, nns,
	).Scan(append([]any{&wrote}, row.dest()...)...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return replay.Record{}, false, replay.ErrNotFound
	case err != nil:
		return replay.Record{}, false, fail(ctx, "swap", err)
	}
	held, err := row.record()
	switch {
	case err != nil:
		return replay.Record{}, false, err
	case wrote:
		return held, true, nil
	case !bytes.Equal(held.Digest, old.Digest) || (len(old.Token) > 0 && !bytes.Equal(held.Token, old.Token)):
		return replay.Record{}, false, replay.ErrConflict
	}
	// A retry of this call (by a client library, after a lost reply)
	// finds the values its first attempt wrote.
	return held, held.State == new.State && bytes.Equal(held.Status, new.Status) && held.Expires.Equal(new.Expires), nil
}

// Release implements replay.Store in one round trip when it succeeds.
func (s *Store) Release(ctx context.Context, k replay.Key, digest []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := codec.Check(k, &replay.Record{Digest: digest}); err != nil {
		return err
	}
	for range retries {
		ns, nns := split(s.now())
		res, err := s.db.ExecContext(ctx, s.q.release, key(k), digest, ns, nns)
		if err != nil {
			return fail(ctx, "release", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fail(ctx, "release", err)
		} else if n == 1 {
			return nil
		}
		held, _, state, ok, err := s.held(ctx, k)
		switch {
		case err != nil:
			return err
		case !ok:
			return replay.ErrNotFound
		case string(held) != string(digest):
			return replay.ErrConflict
		case len(state) > 0:
			return replay.ErrTaken
		}
	}
	return fmt.Errorf("pgstore: release: %w: lost %d races in a row", replay.ErrUnavailable, retries)
}

// held reads the digest, token and state of the live row of k.
func (s *Store) held(ctx context.Context, k replay.Key) (digest, token, state []byte, ok bool, err error) {
	ns, nns := split(s.now())
	err = s.db.QueryRowContext(ctx, s.q.held, key(k), ns, nns).Scan(&digest, &token, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil, nil, false, nil
	case err != nil:
		return nil, nil, nil, false, fail(ctx, "read", err)
	}
	return digest, token, state, true, nil
}

// Untaken implements replay.Store in one query.
func (s *Store) Untaken(ctx context.Context, createdBefore time.Time) ([]replay.Untaken, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now()
	bs, bns := split(createdBefore)
	ns, nns := split(now)
	rows, err := s.db.QueryContext(ctx, s.q.untake, bs, bns, ns, nns)
	if err != nil {
		return nil, fail(ctx, "untaken", err)
	}
	defer rows.Close()
	var out []replay.Untaken
	for rows.Next() {
		var iss, hop []byte
		var row hopRow
		if err := rows.Scan(append([]any{&iss, &hop}, row.dest()...)...); err != nil {
			return nil, fail(ctx, "untaken", err)
		}
		rec, err := row.record()
		if err != nil {
			return nil, err
		}
		u := replay.Untaken{Key: replay.Key{Iss: string(iss), Hop: string(hop)}, Record: rec}
		if !u.Record.Created.IsZero() {
			u.Age = now.Sub(u.Record.Created)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, "untaken", err)
	}
	replay.SortUntaken(out)
	return out, nil
}

// hopRow is a row of hopColumns being scanned.
type hopRow struct {
	digest, token, state, status []byte
	cs, es                       sql.NullInt64
	cns, ens                     sql.NullInt32
}

func (h *hopRow) dest() []any {
	return []any{&h.digest, &h.token, &h.cs, &h.cns, &h.es, &h.ens, &h.state, &h.status}
}

// record returns the Record the row holds.
func (h *hopRow) record() (replay.Record, error) {
	created, err := fromColumns(h.cs, h.cns)
	if err != nil {
		return replay.Record{}, err
	}
	expires, err := fromColumns(h.es, h.ens)
	if err != nil {
		return replay.Record{}, err
	}
	if len(h.digest) != codec.DigestSize || (len(h.token) != 0 && len(h.token) != replay.TokenSize) {
		return replay.Record{}, fmt.Errorf("pgstore: a row of %d-octet digest and %d-octet token is not a record", len(h.digest), len(h.token))
	}
	return replay.Record{Digest: h.digest, Token: h.token, Created: created, Expires: expires,
		State: string(h.state), Status: h.status}, nil
}

// key returns the primary key of the pair k: the SHA-256 value of both
// parts, each prefixed with its length in octets.
func key(k replay.Key) []byte {
	h := sha256.New()
	h.Write([]byte("handoff pgstore hop\x00"))
	var n [8]byte
	for _, p := range [...]string{k.Iss, k.Hop} {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

// split returns t as Unix seconds and nanoseconds.
func split(t time.Time) (int64, int32) { return t.Unix(), int32(t.Nanosecond()) }

// nullTime returns t as the two columns of a time, NULL for the zero time.
func nullTime(t time.Time) (any, any) {
	if t.IsZero() {
		return nil, nil
	}
	s, ns := split(t)
	return s, ns
}

// fromColumns is the inverse of nullTime.
func fromColumns(s sql.NullInt64, ns sql.NullInt32) (time.Time, error) {
	switch {
	case !s.Valid && !ns.Valid:
		return time.Time{}, nil
	case !s.Valid || !ns.Valid || ns.Int32 < 0 || ns.Int32 >= 1e9:
		return time.Time{}, errors.New("pgstore: a row holds a malformed time")
	}
	return time.Unix(s.Int64, int64(ns.Int32)).UTC(), nil
}

// nullBytes binds b, NULL when it is nil.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// octets binds s as octets, never NULL.
func octets(s string) []byte { return append([]byte{}, s...) }

// resources reports an error of SQLSTATE class 53, insufficient resources
// (disk full, out of memory, too many connections).
func resources(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && len(pe.Code) == 5 && pe.Code[:2] == "53"
}

// fail wraps an error of the database: the context's error when it ended
// the call, else replay.ErrUnavailable. Either way the caller refuses.
func fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("pgstore: %s: %w: %w", op, cerr, err)
	}
	return fmt.Errorf("pgstore: %s: %w: %w", op, replay.ErrUnavailable, err)
}
