package pgstore

import "strconv"

// The statements of the stores, in PostgreSQL's dialect (9.5 or later for
// INSERT ... ON CONFLICT, 11 or later for sha256). They are the only part
// of the package that knows SQL; each is built once per table, whose name
// has been checked to be an identifier.
//
// A time is two columns, Unix seconds (BIGINT) and nanoseconds (INTEGER),
// so that every time a Record or OfferRecord can hold is kept to the
// nanosecond, which neither TIMESTAMPTZ (microseconds) nor one BIGINT of
// nanoseconds (years 1678 to 2262) can do. An expiry is NULL when there is
// none; a row is live while its expiry is NULL or after the caller's
// clock, passed as the last two parameters of every statement that reads.

// lockSchema takes the advisory lock, named by $1, under which the
// statements of a schema run, so that replicas starting at once do not race
// on CREATE ... IF NOT EXISTS.
const lockSchema = `SELECT pg_advisory_xact_lock(hashtext($1))`

// live is the condition that the row aliased h is live at the time given
// by the parameters $n (seconds) and $n+1 (nanoseconds).
func live(h string, n int) string {
	return `(` + h + `.exp_s IS NULL OR (` + h + `.exp_s, ` + h + `.exp_ns) > ($` + strconv.Itoa(n) + `, $` + strconv.Itoa(n+1) + `))`
}

// hopStatements are those of a Store.
type hopStatements struct {
	schema                                                      []string
	remember, replace, get, update, swap, held, release, untake string
	sweep                                                       string
}

const hopColumns = `digest, token, created_s, created_ns, exp_s, exp_ns, state, status`

// hopColumnsOf is hopColumns qualified by the alias h.
func hopColumnsOf(h string) string {
	return h + `.digest, ` + h + `.token, ` + h + `.created_s, ` + h + `.created_ns, ` + h + `.exp_s, ` + h + `.exp_ns, ` + h + `.state, ` + h + `.status`
}

func newHopStatements(table string) hopStatements {
	t := `"` + table + `"`
	return hopStatements{
		schema: []string{
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
	k BYTEA PRIMARY KEY,
	iss BYTEA NOT NULL,
	hop BYTEA NOT NULL,
	digest BYTEA NOT NULL,
	token BYTEA,
	created_s BIGINT,
	created_ns INTEGER,
	exp_s BIGINT,
	exp_ns INTEGER,
	state BYTEA NOT NULL,
	status BYTEA
)`,
			`CREATE INDEX IF NOT EXISTS "` + table + `_exp" ON ` + t + ` (exp_s, exp_ns) WHERE exp_s IS NOT NULL`,
			`CREATE INDEX IF NOT EXISTS "` + table + `_untaken" ON ` + t + ` (created_s, created_ns) WHERE state = ''::bytea`,
		},
		// $1 key, $2 iss, $3 hop, $4..$11 the record, $12 $13 now. It
		// inserts and returns the row with true; or returns the row held
		// with false, and whether it is live. It takes no lock on a row
		// held. It returns no row when a row committed since the
		// statement's snapshot hides the one held: the caller runs it
		// again.
		remember: `WITH ins AS (
	INSERT INTO ` + t + ` (k, iss, hop, ` + hopColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
	ON CONFLICT (k) DO NOTHING
	RETURNING ` + hopColumns + `
)
SELECT true, true, ` + hopColumns + ` FROM ins
UNION ALL
SELECT false, ` + live("h", 12) + `, ` + hopColumns + ` FROM ` + t + ` h WHERE h.k = $1 AND NOT EXISTS (SELECT 1 FROM ins)`,
		// remember, for a slot that holds an expired row: it replaces the
		// row if it is still expired, locking it, and returns it with
		// true; or returns the live row held with false (and true).
		replace: `WITH ins AS (
	INSERT INTO ` + t + ` AS h (k, iss, hop, ` + hopColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
	ON CONFLICT (k) DO UPDATE SET iss = EXCLUDED.iss, hop = EXCLUDED.hop, digest = EXCLUDED.digest,
		token = EXCLUDED.token, created_s = EXCLUDED.created_s, created_ns = EXCLUDED.created_ns,
		exp_s = EXCLUDED.exp_s, exp_ns = EXCLUDED.exp_ns, state = EXCLUDED.state, status = EXCLUDED.status
	WHERE NOT ` + live("h", 12) + `
	RETURNING ` + hopColumns + `
)
SELECT true, true, ` + hopColumns + ` FROM ins
UNION ALL
SELECT false, true, ` + hopColumns + ` FROM ` + t + ` h WHERE h.k = $1 AND NOT EXISTS (SELECT 1 FROM ins) AND ` + live("h", 12),
		get: `SELECT ` + hopColumns + ` FROM ` + t + ` h WHERE h.k = $1 AND ` + live("h", 2),
		// $1 key, $2 state, $3 status, $4 $5 expiry, $6 digest, $7 token
		// or NULL, $8 $9 now.
		update: `UPDATE ` + t + ` h SET state = $2, status = $3, exp_s = $4, exp_ns = $5
WHERE h.k = $1 AND ` + live("h", 8) + ` AND h.digest = $6 AND ($7::bytea IS NULL OR h.token = $7)`,
		// $1 key, $2 old digest, $3 old token or NULL, $4 old state, $5
		// old status or NULL, $6 new state, $7 new status, $8 $9 new
		// expiry, $10 $11 now. It locks the live row of k, reading its
		// latest version even when a concurrent write committed since the
		// statement's snapshot; writes the new state, status and expiry
		// into it when its identity, state and status are old's, and
		// returns the row written with true; or returns the row held, as
		// it is, with false. It returns no row when no live row is held.
		// A NULL status and an empty one are the same status, as for
		// every store.
		swap: `WITH cur AS (
	SELECT h.k, ` + hopColumnsOf("h") + ` FROM ` + t + ` h WHERE h.k = $1 AND ` + live("h", 10) + `
	FOR NO KEY UPDATE
), upd AS (
	UPDATE ` + t + ` h SET state = $6::bytea, status = $7::bytea, exp_s = $8::bigint, exp_ns = $9::integer
	FROM cur
	WHERE h.k = cur.k AND cur.digest = $2::bytea AND ($3::bytea IS NULL OR cur.token = $3::bytea)
		AND cur.state = $4::bytea AND COALESCE(cur.status, ''::bytea) = COALESCE($5::bytea, ''::bytea)
	RETURNING ` + hopColumnsOf("h") + `
)
SELECT true, ` + hopColumns + ` FROM upd
UNION ALL
SELECT false, ` + hopColumns + ` FROM cur WHERE NOT EXISTS (SELECT 1 FROM upd)`,
		held: `SELECT digest, token, state FROM ` + t + ` h WHERE h.k = $1 AND ` + live("h", 2),
		// $1 key, $2 digest, $3 $4 now.
		release: `DELETE FROM ` + t + ` h WHERE h.k = $1 AND ` + live("h", 3) + ` AND h.digest = $2 AND h.state = ''::bytea`,
		// $1 $2 created before, $3 $4 now.
		untake: `SELECT iss, hop, ` + hopColumns + ` FROM ` + t + ` h
WHERE h.state = ''::bytea AND ` + live("h", 3) + ` AND (h.created_s IS NULL OR (h.created_s, h.created_ns) < ($1, $2))
ORDER BY h.created_s NULLS FIRST, h.created_ns, h.iss, h.hop`,
		// $1 $2 now, $3 the most rows to delete.
		sweep: `DELETE FROM ` + t + ` WHERE k IN (SELECT k FROM ` + t + ` h WHERE h.exp_s IS NOT NULL AND NOT ` + live("h", 1) + ` LIMIT $3)`,
	}
}

// openWork is the condition that the row aliased h is open and holds the
// work w, written so that the partial unique index on sha256(work) serves
// it.
func openWork(h, w string) string {
	return h + `.is_open AND ` + h + `.work <> ''::bytea AND sha256(` + h + `.work) = sha256(` + w + `) AND ` + h + `.work = ` + w
}

// listQuery returns the statement of a List with the conditions set: open
// only, a prev ($3), a work ($3, or $4 after a prev). Each shape has its
// own text, so that the planner can use the index on prev or on open work.
func (o offerStatements) listQuery(openOnly, prev, work bool) string {
	q := o.list
	n := 3
	if prev {
		q += ` AND h.prev = $` + strconv.Itoa(n) + `::bytea`
		n++
	}
	w := `$` + strconv.Itoa(n) + `::bytea`
	switch {
	case openOnly && work:
		q += ` AND ` + openWork("h", w)
	case openOnly:
		q += ` AND h.is_open`
	case work:
		q += ` AND h.work = ` + w
	}
	return q + ` ORDER BY h.created_s, h.created_ns, h.hop`
}

// offerStatements are those of an OfferStore.
type offerStatements struct {
	schema                                        []string
	workIndex                                     string
	create, get, swap, version, del, list, holder string
	sweep                                         string
}

const offerColumns = `hop, delegate, digest, prev, work, is_open, handoff, state, reason, status, canceled, observed, created_s, created_ns, exp_s, exp_ns, version`

func newOfferStatements(table string) offerStatements {
	t := `"` + table + `"`
	seq := `"` + table + `_version"`
	return offerStatements{
		schema: []string{
			// The sequence gives every write its Version: never the same
			// twice, across deletes and restarts.
			`CREATE SEQUENCE IF NOT EXISTS ` + seq + ` AS BIGINT`,
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
	k BYTEA PRIMARY KEY,
	hop BYTEA NOT NULL,
	delegate BYTEA NOT NULL,
	digest BYTEA NOT NULL,
	prev BYTEA,
	work BYTEA NOT NULL,
	is_open BOOLEAN NOT NULL,
	handoff BYTEA,
	state BYTEA NOT NULL,
	reason BYTEA NOT NULL,
	status BYTEA,
	canceled BOOLEAN NOT NULL,
	observed BOOLEAN NOT NULL,
	created_s BIGINT NOT NULL,
	created_ns INTEGER NOT NULL,
	exp_s BIGINT,
	exp_ns INTEGER,
	version BIGINT NOT NULL
)`,
			// HC-42: at most one open record per work, across every
			// process that shares the table. An open record never
			// expires, so the index needs no clock.
			`CREATE UNIQUE INDEX IF NOT EXISTS "` + table + `_work" ON ` + t + ` (sha256(work)) WHERE is_open AND work <> ''::bytea`,
			`CREATE INDEX IF NOT EXISTS "` + table + `_prev" ON ` + t + ` (prev) WHERE prev IS NOT NULL`,
			`CREATE INDEX IF NOT EXISTS "` + table + `_exp" ON ` + t + ` (exp_s, exp_ns) WHERE exp_s IS NOT NULL`,
		},
		workIndex: table + `_work`,
		// $1 key, $2..$17 the record, $18 $19 now. It inserts, or replaces
		// an expired row, and returns the row with true; or returns the
		// live row held with false. It inserts nothing while an open row
		// holds the work as its snapshot shows (HC-42), and returns no row
		// then, or when a row committed since its snapshot hides the one
		// held; two Creates that miss each other's work fail on the
		// partial unique index instead.
		create: `WITH ins AS (
	INSERT INTO ` + t + ` AS h (k, ` + offerColumns + `)
	SELECT $1::bytea, $2::bytea, $3::bytea, $4::bytea, $5::bytea, $6::bytea, $7::boolean, $8::bytea, $9::bytea,
		$10::bytea, $11::bytea, $12::boolean, $13::boolean, $14::bigint, $15::integer, $16::bigint, $17::integer,
		nextval('` + seq + `')
	WHERE NOT ($7::boolean AND $6::bytea <> ''::bytea AND EXISTS (
		SELECT 1 FROM ` + t + ` w WHERE ` + openWork("w", "$6::bytea") + `))
	ON CONFLICT (k) DO UPDATE SET hop = EXCLUDED.hop, delegate = EXCLUDED.delegate, digest = EXCLUDED.digest,
		prev = EXCLUDED.prev, work = EXCLUDED.work, is_open = EXCLUDED.is_open, handoff = EXCLUDED.handoff,
		state = EXCLUDED.state, reason = EXCLUDED.reason, status = EXCLUDED.status, canceled = EXCLUDED.canceled,
		observed = EXCLUDED.observed, created_s = EXCLUDED.created_s, created_ns = EXCLUDED.created_ns,
		exp_s = EXCLUDED.exp_s, exp_ns = EXCLUDED.exp_ns, version = EXCLUDED.version
	WHERE NOT ` + live("h", 18) + `
	RETURNING ` + offerColumns + `
)
SELECT true, ` + offerColumns + ` FROM ins
UNION ALL
SELECT false, ` + offerColumns + ` FROM ` + t + ` h WHERE h.k = $1 AND NOT EXISTS (SELECT 1 FROM ins) AND ` + live("h", 18),
		get: `SELECT ` + offerColumns + ` FROM ` + t + ` h WHERE h.k = $1 AND ` + live("h", 2),
		// $1 key, $2..$9 what a Swap changes, $10 old version, $11 $12 now.
		swap: `UPDATE ` + t + ` h SET is_open = $2, state = $3, reason = $4, status = $5, canceled = $6, observed = $7,
	exp_s = $8, exp_ns = $9, version = nextval('` + seq + `')
WHERE h.k = $1 AND h.version = $10 AND ` + live("h", 11) + `
RETURNING h.version`,
		version: `SELECT version FROM ` + t + ` h WHERE h.k = $1 AND ` + live("h", 2),
		// $1 key, $2 version, $3 $4 now.
		del: `DELETE FROM ` + t + ` h WHERE h.k = $1 AND h.version = $2 AND ` + live("h", 3),
		// $1 $2 now; the conditions of a query follow (see listQuery).
		list:   `SELECT ` + offerColumns + ` FROM ` + t + ` h WHERE ` + live("h", 1),
		holder: `SELECT hop FROM ` + t + ` h WHERE ` + openWork("h", "$1::bytea"),
		sweep:  `DELETE FROM ` + t + ` WHERE k IN (SELECT k FROM ` + t + ` h WHERE h.exp_s IS NOT NULL AND NOT ` + live("h", 1) + ` LIMIT $3)`,
	}
}
