package pgauthority

// The statements of the ledger, in PostgreSQL's dialect (11 or later, for
// sha256 and PL/pgSQL procedures returning a table). They are the only part
// of the package that knows SQL; each is built once per ledger, whose name
// has been checked to be an identifier.
//
// Every name, hop, action, ID and text is kept as octets (BYTEA), so that
// any Go string, NUL octets and invalid UTF-8 included, is held and
// compared exactly (octet for octet), as the authority contract requires.
// Each table's primary key is the SHA-256 value of its name, so that a
// name of any length fits the index. A time is two columns, Unix seconds
// (BIGINT) and nanoseconds (INTEGER), so that every time.Time is kept to
// the nanosecond.

// lockSchema takes the advisory lock, named by $1, under which the
// statements of a schema run, so that replicas starting at once do not race
// on CREATE ... IF NOT EXISTS.
const lockSchema = `SELECT pg_advisory_xact_lock(hashtext($1))`

// statements are those of one ledger.
type statements struct {
	schema []string
	perform, lookup, grant, granted, approvals,
	acknowledge, finish, hop string
}

const (
	effectColumns   = `name, hop, action, at_s, at_ns, approval`
	approvalColumns = `id, hop, action, operation, uses, remaining, approver, issued_s, issued_ns, expires_s, expires_ns, source, evidence`
	hopColumns      = `ack_decision, ack_reason, ack_findings, ack_package, ack_at_s, ack_at_ns, final_state, final_detail, final_at_s, final_at_ns`
)

func newStatements(name string) statements {
	effects := `"` + name + `_effects"`
	approvals := `"` + name + `_approvals"`
	hops := `"` + name + `_hops"`
	perform := `"` + name + `_perform"`
	return statements{
		schema: []string{
			// Every performed effect, under each of its names.
			`CREATE TABLE IF NOT EXISTS ` + effects + ` (
	k BYTEA PRIMARY KEY,
	name BYTEA NOT NULL,
	hop BYTEA NOT NULL,
	action BYTEA NOT NULL,
	at_s BIGINT NOT NULL,
	at_ns INTEGER NOT NULL,
	approval BYTEA
)`,
			// Every approval, with the uses it has left; operation is
			// empty when it approves a number of uses.
			`CREATE TABLE IF NOT EXISTS ` + approvals + ` (
	k BYTEA PRIMARY KEY,
	hk BYTEA NOT NULL,
	id BYTEA NOT NULL,
	hop BYTEA NOT NULL,
	action BYTEA NOT NULL,
	operation BYTEA NOT NULL,
	uses INTEGER NOT NULL,
	remaining INTEGER NOT NULL CHECK (remaining >= 0),
	approver BYTEA NOT NULL,
	issued_s BIGINT NOT NULL,
	issued_ns INTEGER NOT NULL,
	expires_s BIGINT NOT NULL,
	expires_ns INTEGER NOT NULL,
	source BYTEA NOT NULL,
	evidence BYTEA
)`,
			`CREATE INDEX IF NOT EXISTS "` + name + `_approvals_hop" ON ` + approvals + ` (hk, action)`,
			// Every hop the ledger has seen: its acknowledgement and final
			// disposition, each NULL until recorded. Perform holds a share
			// lock on its hop's row, so that Finish waits for the effects
			// in flight and every later effect sees the disposition.
			`CREATE TABLE IF NOT EXISTS ` + hops + ` (
	k BYTEA PRIMARY KEY,
	hop BYTEA NOT NULL,
	ack_decision BYTEA,
	ack_reason BYTEA,
	ack_findings BYTEA,
	ack_package BYTEA,
	ack_at_s BIGINT,
	ack_at_ns INTEGER,
	final_state BYTEA,
	final_detail BYTEA,
	final_at_s BIGINT,
	final_at_ns INTEGER
)`,
			// The check-and-record of an effect, in one call (one round
			// trip), atomic as one statement is. Under READ COMMITTED each
			// statement of the body sees what committed before it started:
			//
			//  1. the hop's row is created if missing and share-locked: a
			//     final disposition recorded refuses the effect;
			//  2. a name already recorded refuses it;
			//  3. an effect that needs an approval locks the one it would
			//     consume (FOR UPDATE: a concurrent consumer waits, then
			//     skips it if its last use went); none refuses it;
			//  4. its names are inserted, in the order of their keys so
			//     that two calls sharing two names cannot deadlock; a name
			//     another call recorded meanwhile refuses it, and the names
			//     this call inserted are deleted again;
			//  5. the approval loses one use.
			//
			// It returns one row: the outcome ('ok', 'finished',
			// 'repeated', 'noapproval' or 'retry'), then the record held
			// (repeated), the hop's final state (finished), or the
			// approval used (ok).
			`CREATE OR REPLACE FUNCTION ` + perform + `(p_hop BYTEA, p_action BYTEA, p_names BYTEA[], p_op BYTEA, p_key BYTEA,
	p_need BOOLEAN, p_at_s BIGINT, p_at_ns INTEGER)
RETURNS TABLE (o_outcome TEXT, o_name BYTEA, o_hop BYTEA, o_action BYTEA, o_at_s BIGINT, o_at_ns INTEGER, o_approval BYTEA)
LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
	v_hk BYTEA := sha256(p_hop);
	v_final BYTEA;
	v_approval BYTEA;
	v_approval_id BYTEA;
	v_keys BYTEA[];
	v_mine BYTEA[];
BEGIN
	SELECT array_agg(sha256(u.nm) ORDER BY u.i) INTO v_keys FROM unnest(p_names) WITH ORDINALITY AS u(nm, i);

	INSERT INTO ` + hops + ` (k, hop) VALUES (v_hk, p_hop) ON CONFLICT (k) DO NOTHING;
	SELECT h.final_state INTO v_final FROM ` + hops + ` h WHERE h.k = v_hk FOR SHARE;
	IF v_final IS NOT NULL THEN
		RETURN QUERY SELECT 'finished'::TEXT, v_final, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::INTEGER, NULL::BYTEA;
		RETURN;
	END IF;

	RETURN QUERY SELECT 'repeated'::TEXT, e.name, e.hop, e.action, e.at_s, e.at_ns, e.approval
		FROM ` + effects + ` e WHERE e.k = ANY (v_keys)
		ORDER BY array_position(v_keys, e.k) LIMIT 1;
	IF FOUND THEN
		RETURN;
	END IF;

	IF p_need THEN
		SELECT a.k, a.id INTO v_approval, v_approval_id FROM ` + approvals + ` a
		WHERE a.hk = v_hk AND a.hop = p_hop AND a.action = p_action AND a.remaining > 0
			AND (a.issued_s, a.issued_ns) <= (p_at_s, p_at_ns) AND (p_at_s, p_at_ns) < (a.expires_s, a.expires_ns)
			AND (a.operation = ''::BYTEA OR a.operation = p_op OR a.operation = p_key)
		ORDER BY (a.operation <> ''::BYTEA) DESC, a.expires_s, a.expires_ns, a.id
		LIMIT 1
		FOR UPDATE OF a;
		IF NOT FOUND THEN
			RETURN QUERY SELECT 'noapproval'::TEXT, NULL::BYTEA, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::INTEGER, NULL::BYTEA;
			RETURN;
		END IF;
	END IF;

	WITH ins AS (
		INSERT INTO ` + effects + ` (k, name, hop, action, at_s, at_ns, approval)
		SELECT sha256(u.nm), u.nm, p_hop, p_action, p_at_s, p_at_ns, v_approval_id
		FROM unnest(p_names) AS u(nm) ORDER BY sha256(u.nm)
		ON CONFLICT (k) DO NOTHING
		RETURNING k
	)
	SELECT coalesce(array_agg(ins.k), '{}') INTO v_mine FROM ins;
	IF cardinality(v_mine) < cardinality(v_keys) THEN
		DELETE FROM ` + effects + ` e WHERE e.k = ANY (v_mine);
		RETURN QUERY SELECT 'repeated'::TEXT, e.name, e.hop, e.action, e.at_s, e.at_ns, e.approval
			FROM ` + effects + ` e WHERE e.k = ANY (v_keys) AND NOT e.k = ANY (v_mine)
			ORDER BY array_position(v_keys, e.k) LIMIT 1;
		IF NOT FOUND THEN
			RETURN QUERY SELECT 'retry'::TEXT, NULL::BYTEA, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::INTEGER, NULL::BYTEA;
		END IF;
		RETURN;
	END IF;

	IF v_approval IS NOT NULL THEN
		UPDATE ` + approvals + ` a SET remaining = a.remaining - 1 WHERE a.k = v_approval;
	END IF;
	RETURN QUERY SELECT 'ok'::TEXT, NULL::BYTEA, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::INTEGER, v_approval_id;
END
$body$`,
		},
		// $1 hop, $2 action, $3 names, $4 operation id, $5 idempotency
		// key, $6 needs approval, $7 $8 at.
		perform: `SELECT o_outcome, o_name, o_hop, o_action, o_at_s, o_at_ns, o_approval FROM ` + perform + `($1, $2, $3, $4, $5, $6, $7, $8)`,
		// $1 name.
		lookup: `SELECT ` + effectColumns + ` FROM ` + effects + ` e WHERE e.k = sha256($1::BYTEA) AND e.name = $1::BYTEA`,
		// $1 id, $2 hop, $3..$13 the terms. It inserts and returns a row,
		// or returns none when the ID is held.
		grant: `INSERT INTO ` + approvals + ` (k, hk, ` + approvalColumns + `)
VALUES (sha256($1::BYTEA), sha256($2::BYTEA), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (k) DO NOTHING
RETURNING true`,
		// $1 id: the approval held under it.
		granted: `SELECT ` + approvalColumns + ` FROM ` + approvals + ` a WHERE a.k = sha256($1::BYTEA) AND a.id = $1::BYTEA`,
		// $1 hop.
		approvals: `SELECT ` + approvalColumns + ` FROM ` + approvals + ` a WHERE a.hk = sha256($1::BYTEA) AND a.hop = $1::BYTEA ORDER BY a.id`,
		// $1 hop, $2..$7 the acknowledgement. It records it and returns a
		// row, or returns none when the hop holds one.
		acknowledge: `INSERT INTO ` + hops + ` AS h (k, hop, ack_decision, ack_reason, ack_findings, ack_package, ack_at_s, ack_at_ns)
VALUES (sha256($1::BYTEA), $1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (k) DO UPDATE SET ack_decision = EXCLUDED.ack_decision, ack_reason = EXCLUDED.ack_reason,
	ack_findings = EXCLUDED.ack_findings, ack_package = EXCLUDED.ack_package, ack_at_s = EXCLUDED.ack_at_s, ack_at_ns = EXCLUDED.ack_at_ns
WHERE h.ack_decision IS NULL
RETURNING true`,
		// $1 hop, $2..$5 the final disposition, as acknowledge.
		finish: `INSERT INTO ` + hops + ` AS h (k, hop, final_state, final_detail, final_at_s, final_at_ns)
VALUES (sha256($1::BYTEA), $1, $2, $3, $4, $5)
ON CONFLICT (k) DO UPDATE SET final_state = EXCLUDED.final_state, final_detail = EXCLUDED.final_detail,
	final_at_s = EXCLUDED.final_at_s, final_at_ns = EXCLUDED.final_at_ns
WHERE h.final_state IS NULL
RETURNING true`,
		// $1 hop.
		hop: `SELECT ` + hopColumns + ` FROM ` + hops + ` h WHERE h.k = sha256($1::BYTEA) AND h.hop = $1::BYTEA`,
	}
}
