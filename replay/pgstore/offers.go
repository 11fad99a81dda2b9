package pgstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentproto/handoff/replay"
)

// Offers is a replay.OfferStore kept in PostgreSQL. It is safe for
// concurrent use, by any number of processes sharing the table. Versions
// come from a sequence of the table, so that none is given twice, across
// deletes, restarts and processes; HC-42 is a partial unique index on the
// work of the open records, so that of concurrent Creates for one work,
// in any process, exactly one succeeds.
type Offers struct {
	*base
	q offerStatements
}

var _ replay.OfferStore = (*Offers)(nil)

// OpenOffers returns an OfferStore that keeps its records in the table
// opts.Table of db (DefaultOfferTable when empty), creating the table, its
// sequence and its indexes if they do not exist. Close does not close db.
func OpenOffers(ctx context.Context, db *sql.DB, opts Options) (*Offers, error) {
	b, err := newBase(ctx, db, opts, DefaultOfferTable, func(t string) []string { return newOfferStatements(t).schema })
	if err != nil {
		return nil, err
	}
	s := &Offers{base: b, q: newOfferStatements(b.table)}
	b.sweep = s.q.sweep
	b.startSweeper(opts.SweepEvery)
	return s, nil
}

// Table returns the name of the store's table.
func (s *Offers) Table() string { return s.table }

// Create implements replay.OfferStore in one round trip, two for an HC-42
// refusal (the second reads the hop that holds the work).
func (s *Offers) Create(ctx context.Context, rec replay.OfferRecord) (replay.OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return replay.OfferRecord{}, err
	}
	if err := replay.CheckOffer(rec); err != nil {
		return replay.OfferRecord{}, err
	}
	rec = rec.Clone()
	cs, cns := split(rec.Created)
	es, ens := nullTime(rec.Expires)
	for range retries {
		ns, nns := split(s.now())
		var wrote bool
		var row offerRow
		err := s.db.QueryRowContext(ctx, s.q.create, offerKey(rec.Hop), []byte(rec.Hop), []byte(rec.To), rec.Digest,
			nullBytes(rec.Prev), octets(rec.Work), rec.Open, nullBytes(rec.Handoff), octets(rec.State),
			octets(rec.Reason), nullBytes(rec.Status), rec.Canceled, rec.Observed, cs, cns, es, ens, ns, nns,
		).Scan(append([]any{&wrote}, row.dest()...)...)
		var pe *pgconn.PgError
		switch {
		case errors.Is(err, sql.ErrNoRows) && !(rec.Open && rec.Work != ""):
			continue // the row held was committed after the snapshot
		case errors.Is(err, sql.ErrNoRows),
			errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == s.q.workIndex:
			// HC-42: an open record holds the work, or a row committed
			// since the snapshot hides the one held.
			var hop []byte
			herr := s.db.QueryRowContext(ctx, s.q.holder, []byte(rec.Work)).Scan(&hop)
			switch {
			case errors.Is(herr, sql.ErrNoRows) || (herr == nil && string(hop) == rec.Hop):
				continue // resolved meanwhile, or held by this very hop: try again
			case herr != nil:
				return replay.OfferRecord{}, fail(ctx, "create", herr)
			}
			return replay.OfferRecord{}, &replay.BusyError{Work: rec.Work, Hop: string(hop)}
		case err != nil:
			return replay.OfferRecord{}, fail(ctx, "create", err)
		}
		held, err := row.record()
		if err != nil {
			return replay.OfferRecord{}, err
		}
		if wrote {
			return held, nil
		}
		// The same Create again (a retry after a lost reply) finds its
		// own record.
		if rec.Version = held.Version; held.Equal(rec) {
			return held, nil
		}
		return replay.OfferRecord{}, replay.ErrExists
	}
	return replay.OfferRecord{}, fmt.Errorf("pgstore: create: %w: lost %d races in a row", replay.ErrUnavailable, retries)
}

// Get implements replay.OfferStore.
func (s *Offers) Get(ctx context.Context, hop string) (replay.OfferRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.OfferRecord{}, false, err
	}
	if hop == "" {
		return replay.OfferRecord{}, false, replay.ErrInvalid
	}
	ns, nns := split(s.now())
	var row offerRow
	err := s.db.QueryRowContext(ctx, s.q.get, offerKey(hop), ns, nns).Scan(row.dest()...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return replay.OfferRecord{}, false, nil
	case err != nil:
		return replay.OfferRecord{}, false, fail(ctx, "get", err)
	}
	rec, err := row.record()
	if err != nil {
		return replay.OfferRecord{}, false, err
	}
	return rec, true, nil
}

// Swap implements replay.OfferStore in one round trip when it succeeds.
func (s *Offers) Swap(ctx context.Context, old, new replay.OfferRecord) (replay.OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return replay.OfferRecord{}, err
	}
	if err := replay.CheckSwap(old, new); err != nil {
		return replay.OfferRecord{}, err
	}
	new = new.Clone()
	es, ens := nullTime(new.Expires)
	for range retries {
		ns, nns := split(s.now())
		var version int64
		err := s.db.QueryRowContext(ctx, s.q.swap, offerKey(old.Hop), new.Open, octets(new.State), octets(new.Reason),
			nullBytes(new.Status), new.Canceled, new.Observed, es, ens, int64(old.Version), ns, nns).Scan(&version)
		switch {
		case err == nil:
			new.Version = uint64(version)
			return new, nil
		case !errors.Is(err, sql.ErrNoRows):
			return replay.OfferRecord{}, fail(ctx, "swap", err)
		}
		if err := s.classify(ctx, old.Hop, old.Version); err != nil {
			return replay.OfferRecord{}, err
		}
	}
	return replay.OfferRecord{}, fmt.Errorf("pgstore: swap: %w: lost %d races in a row", replay.ErrUnavailable, retries)
}

// Delete implements replay.OfferStore in one round trip when it succeeds.
func (s *Offers) Delete(ctx context.Context, hop string, version uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if hop == "" {
		return replay.ErrInvalid
	}
	for range retries {
		ns, nns := split(s.now())
		res, err := s.db.ExecContext(ctx, s.q.del, offerKey(hop), int64(version), ns, nns)
		if err != nil {
			return fail(ctx, "delete", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fail(ctx, "delete", err)
		} else if n == 1 {
			return nil
		}
		if err := s.classify(ctx, hop, version); err != nil {
			return err
		}
	}
	return fmt.Errorf("pgstore: delete: %w: lost %d races in a row", replay.ErrUnavailable, retries)
}

// classify tells why a write of hop at version touched no row:
// ErrNotFound, ErrConflict, or nil when the row now matches and the write
// is to be tried again.
func (s *Offers) classify(ctx context.Context, hop string, version uint64) error {
	ns, nns := split(s.now())
	var held int64
	err := s.db.QueryRowContext(ctx, s.q.version, offerKey(hop), ns, nns).Scan(&held)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return replay.ErrNotFound
	case err != nil:
		return fail(ctx, "read", err)
	case uint64(held) != version:
		return replay.ErrConflict
	}
	return nil
}

// List implements replay.OfferStore in one query.
func (s *Offers) List(ctx context.Context, q replay.OfferQuery) ([]replay.OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ns, nns := split(s.now())
	args := []any{ns, nns}
	if q.Prev != nil {
		args = append(args, append([]byte{}, q.Prev...))
	}
	if q.Work != "" {
		args = append(args, octets(q.Work))
	}
	rows, err := s.db.QueryContext(ctx, s.q.listQuery(q.OpenOnly, q.Prev != nil, q.Work != ""), args...)
	if err != nil {
		return nil, fail(ctx, "list", err)
	}
	defer rows.Close()
	var out []replay.OfferRecord
	for rows.Next() {
		var row offerRow
		if err := rows.Scan(row.dest()...); err != nil {
			return nil, fail(ctx, "list", err)
		}
		rec, err := row.record()
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, "list", err)
	}
	replay.SortOffers(out)
	return out, nil
}

// offerRow is a row of offerColumns being scanned.
type offerRow struct {
	hop, to, digest, prev, work, handoff, state, reason, status []byte
	open, canceled, observed                                    bool
	cs                                                          int64
	cns                                                         int32
	es                                                          sql.NullInt64
	ens                                                         sql.NullInt32
	version                                                     int64
}

func (r *offerRow) dest() []any {
	return []any{&r.hop, &r.to, &r.digest, &r.prev, &r.work, &r.open, &r.handoff, &r.state, &r.reason, &r.status,
		&r.canceled, &r.observed, &r.cs, &r.cns, &r.es, &r.ens, &r.version}
}

// record returns the OfferRecord the row holds.
func (r *offerRow) record() (replay.OfferRecord, error) {
	created, err := fromColumns(sql.NullInt64{Int64: r.cs, Valid: true}, sql.NullInt32{Int32: r.cns, Valid: true})
	if err != nil {
		return replay.OfferRecord{}, err
	}
	expires, err := fromColumns(r.es, r.ens)
	if err != nil {
		return replay.OfferRecord{}, err
	}
	rec := replay.OfferRecord{Hop: string(r.hop), To: string(r.to), Digest: r.digest, Prev: r.prev, Work: string(r.work),
		Open: r.open, Handoff: r.handoff, State: string(r.state), Reason: string(r.reason), Status: r.status,
		Canceled: r.canceled, Observed: r.observed, Created: created, Expires: expires, Version: uint64(r.version)}
	if err := replay.CheckOffer(rec); err != nil || r.version <= 0 {
		return replay.OfferRecord{}, fmt.Errorf("pgstore: a row of hop %q is not an offer record: %v", rec.Hop, err)
	}
	return rec.Clone(), nil
}

// offerKey returns the primary key of the record of hop.
func offerKey(hop string) []byte {
	h := sha256.Sum256(append([]byte("handoff pgstore offer\x00"), hop...))
	return h[:]
}
