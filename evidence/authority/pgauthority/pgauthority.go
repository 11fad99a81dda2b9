// Package pgauthority is an authority.Ledger in PostgreSQL, for a
// deployment whose system of record is already PostgreSQL: the effects a
// receiving agent performed, the approvals it was given and the uses they
// have left, and each hop's acknowledgement and final disposition then sit
// in the service's own database, shared by every replica of the agent and
// kept across restarts as the database keeps them. It passes the suite of
// evidence/authority/authoritytest.
//
// The ledger takes the application's *sql.DB, opened with the pgx driver
// (github.com/jackc/pgx/v5/stdlib), and keeps its records in three tables
// and one function, named by Options.Name, which Open creates if missing
// (PostgreSQL 11 or later). Open replaces the function every time, so that
// its body is always this version's: the role that opens the ledger must
// own the function (the role that first created it, or a member of it).
//
// # One round trip
//
// Perform, the check-and-record of every effect, is one call of a PL/pgSQL
// function that Open creates, and therefore one statement, atomic as a
// statement is: it refuses, changing nothing but the count of a suppressed
// retry, or records every name of the effect, in the scope of its hop,
// and consumes one use of its approval. It holds a share lock on
// the hop's row while it runs, so that a concurrent Finish waits for it and
// every later effect sees the disposition; it locks the approval it
// consumes (FOR UPDATE), so that of two concurrent consumers of its last
// use exactly one wins and the other moves on to another approval or is
// refused; and the unique key of each name makes exactly one of any number
// of concurrent calls presenting that name succeed, across every process
// that shares the database. Lookup, Approvals and Hop are one query each;
// Grant, Acknowledge and Finish are one statement, and read the record held
// once more only when one is already there, to tell a repetition (no-op)
// from a conflict. Settle, which records a claim's outcome, is one
// transaction that locks the claim's records, checks them and updates
// them. A claim is committed before Perform returns: a process that dies
// between the claim and its outcome leaves it in flight, its names
// refused.
//
// # Failing closed
//
// Every error from the database (a refused or broken connection, a
// timeout, a missing table, a row it cannot read) is returned as an error
// wrapping authority.ErrUnavailable, never as an absent record or an
// allowed effect; a cancelled or expired context is returned wrapped with
// it too. The guard then refuses the effect. A deadlock or serialization
// failure, which rolls the statement back, is retried a few times first.
// An answer lost after the database committed (a connection broken, a
// context ended, at that moment) leaves the effect recorded and Perform
// returning ErrUnavailable: the effect is then refused, not repeated, and
// Lookup shows the record.
//
// # Records
//
// Records are kept until the tables are dropped: effects are how a
// receiver knows, after any delay, that an action was taken (there is no
// expiry and no sweeper). A hop gets its row with its first effect, its
// acknowledgement or its final disposition. Tables an earlier version of
// this package created, which kept effects by name alone, are refused
// (ErrSchema) rather than read.
//
// # Exactness
//
// Names, hops, actions, approval IDs and every text are kept as octets
// (BYTEA) and compared octet for octet, NUL octets and invalid UTF-8
// included; times are kept to the nanosecond.
package pgauthority

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentproto/handoff/evidence/authority"
)

// DefaultName names the ledger when Options.Name is empty.
const DefaultName = "handoff_authority"

// retries bounds how often a statement rolled back by a deadlock or a
// serialization failure, or a Perform that lost a race it cannot see the
// winner of yet, is run again.
const retries = 8

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// ErrName: Options.Name is not an identifier of at most 48 characters, or
// begins with "pg_", the prefix PostgreSQL reserves for its system
// catalogs (an unqualified name that is one of them names the catalog).
var ErrName = errors.New("pgauthority: the ledger's name must be a letter or underscore followed by at most 47 letters, digits or underscores, not beginning with pg_")

// ErrSchema: the ledger's tables were created by an earlier version of
// this package, which kept effects by name alone. Its records are not
// read: open the ledger under another name (Options.Name), or drop the
// tables once their records are no longer needed.
var ErrSchema = errors.New("pgauthority: the ledger's tables are of an earlier version")

// Options configure a ledger. The zero value is usable.
type Options struct {
	// Name names the ledger: its tables are Name_effects, Name_approvals
	// and Name_hops, and its function Name_perform. It is a letter or
	// underscore followed by up to 47 letters, digits or underscores, not
	// beginning with "pg_"; empty means DefaultName. Ledgers of different names in one database
	// are independent.
	Name string
}

// Ledger is an authority.Ledger in PostgreSQL. It is safe for concurrent
// use, by any number of processes sharing the database.
type Ledger struct {
	db   *sql.DB
	name string
	q    statements
}

var _ authority.Ledger = (*Ledger)(nil)

// Open returns the ledger opts.Name of db, creating its tables and its
// function if they do not exist. The ledger does not own db: the caller
// closes it.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Ledger, error) {
	if db == nil {
		return nil, errors.New("pgauthority: nil *sql.DB")
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if !identRE.MatchString(opts.Name) || strings.HasPrefix(opts.Name, "pg_") {
		return nil, fmt.Errorf("%w: %q", ErrName, opts.Name)
	}
	l := &Ledger{db: db, name: opts.Name, q: newStatements(opts.Name)}
	if err := l.createSchema(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Name returns the ledger's name.
func (l *Ledger) Name() string { return l.name }

// createSchema runs the statements of the schema in one transaction that
// holds an advisory lock named by the ledger, so that replicas starting at
// once do not race on CREATE ... IF NOT EXISTS.
func (l *Ledger) createSchema(ctx context.Context) error {
	const op = "create the ledger"
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, lockSchema, "handoff pgauthority "+l.name); err != nil {
		return fail(ctx, op, err)
	}
	// A table an earlier version created keys effects otherwise: reading
	// it would forget what it records, so it is refused.
	var have int
	if err := tx.QueryRowContext(ctx, l.q.columns, l.q.effects, effectColumnNames).Scan(&have); err != nil {
		return fail(ctx, op, err)
	}
	if have != 0 && have != len(effectColumnNames) {
		return fmt.Errorf("%w: %s", ErrSchema, l.q.effects)
	}
	for _, s := range l.q.schema {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fail(ctx, op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

// keys returns the keys of e's names in the scope of hop.
func keys(names []string, hop string) [][]byte {
	out := make([][]byte, len(names))
	for i, n := range names {
		k := sha256.Sum256(authority.EffectKey(n, hop))
		out[i] = k[:]
	}
	return out
}

// Perform implements authority.Ledger in one round trip.
func (l *Ledger) Perform(ctx context.Context, e authority.Effect) error {
	if err := e.Validate(); err != nil {
		return err
	}
	names := e.Names()
	bound := make([][]byte, len(names))
	for i, n := range names {
		bound[i] = []byte(n)
	}
	own := keys(names, e.Hop)
	others := [][]byte{}
	for _, h := range e.Chain {
		others = append(others, keys(names, h)...)
	}
	s, ns := split(e.At)
	for range retries {
		if err := ctx.Err(); err != nil {
			return fail(ctx, "perform", err)
		}
		var outcome string
		var r effectRow
		err := l.db.QueryRowContext(ctx, l.q.perform, []byte(e.Hop), []byte(e.Action), bound, own, others,
			[]byte(e.OperationID), []byte(e.IdempotencyKey), e.NeedsApproval, s, ns, []byte(e.Tool), []byte(e.Key),
			[]byte(e.Args), e.Claim, encodeStrings(e.Chain), e.Marker,
		).Scan(append([]any{&outcome}, r.dest()...)...)
		switch {
		case err != nil && transient(err):
			continue
		case err != nil:
			return fail(ctx, "perform", err)
		}
		switch outcome {
		case "ok":
			return nil
		case "finished":
			return fmt.Errorf("%w: %s (%s)", authority.ErrFinished, e.Hop, r.name)
		case "noapproval":
			return authority.NoApproval(e, authority.ErrNoApproval)
		case "mismatch":
			return authority.NoApproval(e, authority.ErrApprovalMismatch)
		case "repeated":
			held, err := r.record()
			if err != nil {
				return fail(ctx, "perform", err)
			}
			return e.Refuse(held)
		case "retry":
			continue // the winner of a race on a name is not visible yet
		}
		return fail(ctx, "perform", fmt.Errorf("unexpected outcome %q", outcome))
	}
	return fail(ctx, "perform", fmt.Errorf("lost %d races in a row", retries))
}

// Settle implements authority.Ledger in one transaction: the records of
// e's names in its hop are read and locked, checked, and settled.
func (l *Ledger) Settle(ctx context.Context, e authority.Effect, o authority.Outcome) error {
	if err := e.ValidateSettle(); err != nil {
		return err
	}
	o = authority.NormalizedOutcome(o)
	names := e.Names()
	ks := keys(names, e.Hop)
	for range retries {
		err := l.settle(ctx, e, o, names, ks)
		if err != nil && transient(err) {
			continue
		}
		var refused refusal
		switch {
		case errors.As(err, &refused):
			return refused.err
		case err != nil:
			return fail(ctx, "settle", err)
		}
		return nil
	}
	return fail(ctx, "settle", fmt.Errorf("rolled back %d times in a row", retries))
}

// refusal is a refusal of Settle, out of its transaction.
type refusal struct{ err error }

func (r refusal) Error() string { return r.err.Error() }

func (l *Ledger) settle(ctx context.Context, e authority.Effect, o authority.Outcome, names []string, ks [][]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, l.q.claims, ks)
	if err != nil {
		return err
	}
	held := map[string]authority.Record{}
	hk := map[string][]byte{}
	for rows.Next() {
		var k []byte
		var r effectRow
		if err := rows.Scan(append([]any{&k}, r.dest()...)...); err != nil {
			rows.Close()
			return err
		}
		rec, err := r.record()
		if err != nil {
			rows.Close()
			return err
		}
		held[rec.Name], hk[rec.Name] = rec, k
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var write [][]byte
	for _, n := range names {
		r, ok := held[n]
		if !ok {
			return refusal{fmt.Errorf("%w: %q holds no claim of this call on hop %s", authority.ErrConflict, n, e.Hop)}
		}
		_, w, err := authority.SettleTo(e, r, o)
		if err != nil {
			return refusal{err}
		}
		if w {
			write = append(write, hk[n])
		}
	}
	s, ns := split(o.At)
	for _, k := range write {
		if _, err := tx.ExecContext(ctx, l.q.settle, k, nullBytes(o.Result), []byte(o.Error), s, ns); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Lookup implements authority.Ledger in one query.
func (l *Ledger) Lookup(ctx context.Context, name string) ([]authority.Record, error) {
	return query(ctx, l, "lookup", l.q.lookup, []byte(name), (*effectRow).dest, (*effectRow).record)
}

// query runs q with arg and returns each row it answers, scanned into a
// new row R (dest) and made a T (conv).
func query[T, R any](ctx context.Context, l *Ledger, op, q string, arg any, dest func(*R) []any, conv func(*R) (T, error)) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, fail(ctx, op, err)
	}
	rows, err := l.db.QueryContext(ctx, q, arg)
	if err != nil {
		return nil, fail(ctx, op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var r R
		if err := rows.Scan(dest(&r)...); err != nil {
			return nil, fail(ctx, op, err)
		}
		x, err := conv(&r)
		if err != nil {
			return nil, fail(ctx, op, err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, op, err)
	}
	return out, nil
}

// effectRow is an effect's record as its columns hold it (effectColumns).
type effectRow struct {
	name, hop, chain, action, tool, key, args, approval []byte
	atS, outS                                           sql.NullInt64
	atNS, outNS, replays                                sql.NullInt32
	inFlight                                            sql.NullBool
	outResult, outError                                 []byte
}

func (r *effectRow) dest() []any {
	return []any{&r.name, &r.hop, &r.chain, &r.action, &r.tool, &r.key, &r.args, &r.atS, &r.atNS, &r.approval,
		&r.inFlight, &r.outResult, &r.outError, &r.outS, &r.outNS, &r.replays}
}

func (r *effectRow) record() (authority.Record, error) {
	at, err := fromColumns(r.atS, r.atNS)
	if err != nil {
		return authority.Record{}, err
	}
	chain, err := decodeStrings(r.chain)
	if err != nil {
		return authority.Record{}, err
	}
	rec := authority.Record{Name: string(r.name), Hop: string(r.hop), Chain: chain, Action: string(r.action),
		Tool: string(r.tool), Key: string(r.key), Args: string(r.args), At: at, Approval: string(r.approval),
		InFlight: r.inFlight.Bool, Replays: int(r.replays.Int32)}
	if r.outS.Valid {
		oat, err := fromColumns(r.outS, r.outNS)
		if err != nil {
			return authority.Record{}, err
		}
		rec.Outcome = &authority.Outcome{Result: r.outResult, Error: string(r.outError), At: oat}
	}
	return rec, nil
}

// Grant implements authority.Ledger in one statement, two when the ID is
// already held.
func (l *Ledger) Grant(ctx context.Context, a authority.Approval) error {
	a, err := a.Normalized()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fail(ctx, "grant", err)
	}
	is, ins := split(a.Issued)
	es, ens := split(a.Expires)
	var wrote bool
	err = l.db.QueryRowContext(ctx, l.q.grant, []byte(a.ID), []byte(a.Hop), encodeStrings(a.Chain), []byte(a.Action),
		[]byte(a.OperationID), []byte(a.Tool), []byte(a.Args), a.Uses, a.Remaining, []byte(a.Approver), is, ins, es, ens,
		[]byte(a.Source), nullBytes(a.Evidence)).Scan(&wrote)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fail(ctx, "grant", err)
	}
	// The ID is held, by a grant that committed: read its terms.
	var r approvalRow
	if err := l.db.QueryRowContext(ctx, l.q.granted, []byte(a.ID)).Scan(r.dest()...); err != nil {
		return fail(ctx, "grant", err)
	}
	held, err := r.approval()
	if err != nil {
		return fail(ctx, "grant", err)
	}
	if held.Same(a) {
		return nil
	}
	return fmt.Errorf("%w: approval %q is recorded with other terms", authority.ErrConflict, a.ID)
}

// Approvals implements authority.Ledger in one query.
func (l *Ledger) Approvals(ctx context.Context, hop string) ([]authority.Approval, error) {
	return query(ctx, l, "approvals", l.q.approvals, []byte(hop), (*approvalRow).dest, (*approvalRow).approval)
}

// Acknowledge implements authority.Ledger in one statement, two when the
// hop is already acknowledged.
func (l *Ledger) Acknowledge(ctx context.Context, hop string, ack authority.Ack) error {
	if hop == "" || (ack.Decision != authority.Accepted && ack.Decision != authority.Rejected) {
		return fmt.Errorf("%w: an acknowledgement needs a hop and a decision", authority.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fail(ctx, "acknowledge", err)
	}
	ack.At = ack.At.UTC().Round(0)
	s, ns := split(ack.At)
	var wrote bool
	err := l.db.QueryRowContext(ctx, l.q.acknowledge, []byte(hop), []byte(ack.Decision), []byte(ack.Reason),
		encodeStrings(ack.Findings), []byte(ack.Package), s, ns).Scan(&wrote)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fail(ctx, "acknowledge", err)
	}
	h, err := l.Hop(ctx, hop)
	switch {
	case err != nil:
		return err
	case h.Ack == nil:
		return fail(ctx, "acknowledge", errors.New("the acknowledgement held is not readable"))
	case authority.SameAck(*h.Ack, ack):
		return nil
	}
	return fmt.Errorf("%w: hop %s is acknowledged %s", authority.ErrConflict, hop, h.Ack.Decision)
}

// Finish implements authority.Ledger in one statement, two when the hop is
// already finished. It waits for the effects of the hop in flight.
func (l *Ledger) Finish(ctx context.Context, hop string, f authority.Final) error {
	if hop == "" || f.State == "" {
		return fmt.Errorf("%w: a final disposition needs a hop and a state", authority.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fail(ctx, "finish", err)
	}
	f.At = f.At.UTC().Round(0)
	s, ns := split(f.At)
	var wrote bool
	err := l.db.QueryRowContext(ctx, l.q.finish, []byte(hop), []byte(f.State), []byte(f.Detail), s, ns).Scan(&wrote)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fail(ctx, "finish", err)
	}
	h, err := l.Hop(ctx, hop)
	switch {
	case err != nil:
		return err
	case h.Final == nil:
		return fail(ctx, "finish", errors.New("the final disposition held is not readable"))
	case authority.SameFinal(*h.Final, f):
		return nil
	}
	return fmt.Errorf("%w: hop %s is finished %s", authority.ErrConflict, hop, h.Final.State)
}

// Hop implements authority.Ledger in one query.
func (l *Ledger) Hop(ctx context.Context, hop string) (authority.HopRecord, error) {
	if err := ctx.Err(); err != nil {
		return authority.HopRecord{}, fail(ctx, "hop", err)
	}
	var ackDecision, ackReason, ackFindings, ackPackage, finalState, finalDetail []byte
	var ackS, finalS sql.NullInt64
	var ackNS, finalNS sql.NullInt32
	var effects bool
	err := l.db.QueryRowContext(ctx, l.q.hop, []byte(hop)).Scan(&ackDecision, &ackReason, &ackFindings, &ackPackage,
		&ackS, &ackNS, &finalState, &finalDetail, &finalS, &finalNS, &effects)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return authority.HopRecord{}, nil
	case err != nil:
		return authority.HopRecord{}, fail(ctx, "hop", err)
	}
	h := authority.HopRecord{Effects: effects}
	if ackDecision != nil {
		at, err := fromColumns(ackS, ackNS)
		if err != nil {
			return authority.HopRecord{}, fail(ctx, "hop", err)
		}
		findings, err := decodeStrings(ackFindings)
		if err != nil {
			return authority.HopRecord{}, fail(ctx, "hop", err)
		}
		h.Ack = &authority.Ack{Decision: authority.Decision(ackDecision), Reason: string(ackReason), Findings: findings,
			Package: string(ackPackage), At: at}
	}
	if finalState != nil {
		at, err := fromColumns(finalS, finalNS)
		if err != nil {
			return authority.HopRecord{}, fail(ctx, "hop", err)
		}
		h.Final = &authority.Final{State: string(finalState), Detail: string(finalDetail), At: at}
	}
	return h, nil
}

// approvalRow is an approval as its columns hold it.
type approvalRow struct {
	id, hop, chain, action, operation, tool, args, approver, source, evidence []byte
	uses, remaining                                                           int64
	issuedS, expiresS                                                         sql.NullInt64
	issuedNS, expiresNS                                                       sql.NullInt32
}

// dest returns the scan destinations, in the order of approvalColumns.
func (r *approvalRow) dest() []any {
	return []any{&r.id, &r.hop, &r.chain, &r.action, &r.operation, &r.tool, &r.args, &r.uses, &r.remaining, &r.approver,
		&r.issuedS, &r.issuedNS, &r.expiresS, &r.expiresNS, &r.source, &r.evidence}
}

func (r *approvalRow) approval() (authority.Approval, error) {
	issued, err := fromColumns(r.issuedS, r.issuedNS)
	if err != nil {
		return authority.Approval{}, err
	}
	expires, err := fromColumns(r.expiresS, r.expiresNS)
	if err != nil {
		return authority.Approval{}, err
	}
	if r.remaining < 0 || r.remaining > r.uses {
		return authority.Approval{}, errors.New("a row holds a malformed count of uses")
	}
	chain, err := decodeStrings(r.chain)
	if err != nil {
		return authority.Approval{}, err
	}
	return authority.Approval{ID: string(r.id), Hop: string(r.hop), Chain: chain, Action: string(r.action),
		OperationID: string(r.operation), Tool: string(r.tool), Args: string(r.args), Uses: int(r.uses),
		Remaining: int(r.remaining), Approver: string(r.approver), Issued: issued, Expires: expires,
		Source: authority.Source(r.source), Evidence: r.evidence}, nil
}

// split returns t as Unix seconds and nanoseconds.
func split(t time.Time) (int64, int32) {
	return t.Unix(), int32(t.Nanosecond())
}

// fromColumns is the inverse of split.
func fromColumns(s sql.NullInt64, ns sql.NullInt32) (time.Time, error) {
	if !s.Valid || !ns.Valid || ns.Int32 < 0 || ns.Int32 >= 1e9 {
		return time.Time{}, errors.New("a row holds a malformed time")
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

// encodeStrings packs strings (finding codes, a chain's hops) into one
// value, each prefixed with its length (a uvarint), so that every string
// is kept exactly; none is NULL.
func encodeStrings(fs []string) any {
	if len(fs) == 0 {
		return nil
	}
	var b []byte
	for _, f := range fs {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// decodeStrings is the inverse of encodeStrings.
func decodeStrings(b []byte) ([]string, error) {
	var out []string
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errors.New("a row holds a malformed list")
		}
		out = append(out, string(b[k:k+int(n)]))
		b = b[k+int(n):]
	}
	return out, nil
}

// transient reports an error that rolled the statement back and that
// running it again may cure: a serialization failure or a deadlock.
func transient(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// fail wraps an error of the database, or the context's error when it
// ended the call, in authority.ErrUnavailable: the caller refuses.
func fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("pgauthority: %s: %w: %w: %w", op, authority.ErrUnavailable, cerr, err)
	}
	return fmt.Errorf("pgauthority: %s: %w: %w", op, authority.ErrUnavailable, err)
}
