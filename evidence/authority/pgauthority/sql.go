package pgauthority

// The statements of the ledger, in PostgreSQL's dialect (11 or later, for
// sha256 and PL/pgSQL procedures returning a table). They are the only part
// of the package that knows SQL; each is built once per ledger, whose name
// has been checked to be an identifier.
//
// Every name, hop, action, ID and text is kept as octets (BYTEA), so that
// any Go string, NUL octets and invalid UTF-8 included, is held and
// compared exactly (octet for octet), as the authority contract requires.
// Each table's primary key is a SHA-256 value, so that a name of any
// length fits the index: an effect's is that of authority.EffectKey(name,
// hop), its name in the scope of its hop, computed by the caller. A time
// is two columns, Unix seconds (BIGINT) and nanoseconds (INTEGER), so that
// every time.Time is kept to the nanosecond. A list of hops (a chain) is
// one BYTEA of length-prefixed octets (encodeStrings), NULL when empty.

// lockSchema takes the advisory lock, named by $1, under which the
// statements of a schema run, so that replicas starting at once do not race
// on CREATE ... IF NOT EXISTS.
const lockSchema = `SELECT pg_advisory_xact_lock(hashtext($1))`

// statements are those of one ledger.
type statements struct {
	schema []string
	// columns counts, for $1 a table and $2 column names, how many of
	// them it has: a table an earlier version created lacks some.
	columns string
	effects string
	perform, lookup, claims, settle, grant, granted, approvals,
	acknowledge, finish, hop string
}

const (
	effectColumns   = `name, hop, chain, action, tool, key, args, at_s, at_ns, approval, in_flight, outcome_result, outcome_error, outcome_at_s, outcome_at_ns, replays`
	approvalColumns = `id, hop, chain, action, operation, tool, args, uses, remaining, approver, issued_s, issued_ns, expires_s, expires_ns, source, evidence`
	hopColumns      = `ack_decision, ack_reason, ack_findings, ack_package, ack_at_s, ack_at_ns, final_state, final_detail, final_at_s, final_at_ns`
)

// effectColumnNames are the columns of this version's effects table (the
// last ones an earlier version did not have).
var effectColumnNames = []string{"k", "nk", "name", "chain", "tool", "key", "args", "in_flight", "outcome_at_s", "replays"}

func newStatements(name string) statements {
	effects := `"` + name + `_effects"`
	approvals := `"` + name + `_approvals"`
	hops := `"` + name + `_hops"`
	perform := `"` + name + `_perform"`
	// The record of e, as effectColumns, prefixed by outcome 'repeated'.
	held := `SELECT 'repeated'::TEXT, e.name, e.hop, e.chain, e.action, e.tool, e.key, e.args, e.at_s, e.at_ns, e.approval,
		e.in_flight, e.outcome_result, e.outcome_error, e.outcome_at_s, e.outcome_at_ns, e.replays FROM ` + effects + ` e`
	// A row of no record, for the other outcomes.
	none := `NULL::BYTEA, NULL::BYTEA, NULL::BYTEA, NULL::BYTEA, NULL::BYTEA, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::INTEGER,
		NULL::BYTEA, NULL::BOOLEAN, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::INTEGER, NULL::INTEGER`
	return statements{
		schema: []string{
			// Every performed effect, under each of its names, in the scope
			// of its hop: k is the SHA-256 of authority.EffectKey(name,
			// hop), nk that of its name (for Lookup). A claim is in flight
			// until settled; its outcome columns are NULL until then.
			`CREATE TABLE IF NOT EXISTS ` + effects + ` (
	k BYTEA PRIMARY KEY,
	nk BYTEA NOT NULL,
	name BYTEA NOT NULL,
	hop BYTEA NOT NULL,
	chain BYTEA,
	action BYTEA NOT NULL,
	tool BYTEA NOT NULL,
	key BYTEA NOT NULL,
	args BYTEA NOT NULL,
	at_s BIGINT NOT NULL,
	at_ns INTEGER NOT NULL,
	approval BYTEA,
	in_flight BOOLEAN NOT NULL,
	outcome_result BYTEA,
	outcome_error BYTEA,
	outcome_at_s BIGINT,
	outcome_at_ns INTEGER,
	replays INTEGER NOT NULL DEFAULT 0
)`,
			`CREATE INDEX IF NOT EXISTS "` + name + `_effects_name" ON ` + effects + ` (nk)`,
			// marker: the record only marks its names as used
			// (authority.Effect.Marker); the hop's effects are the rows of
			// its own scope that are not markers (Hop).
			`ALTER TABLE ` + effects + ` ADD COLUMN IF NOT EXISTS marker BOOLEAN NOT NULL DEFAULT false`,
			`CREATE INDEX IF NOT EXISTS "` + name + `_effects_hop" ON ` + effects + ` (sha256(hop)) WHERE NOT marker`,
			// Every approval, with the uses it has left; operation, tool
			// and args are empty when it does not bind them.
			`CREATE TABLE IF NOT EXISTS ` + approvals + ` (
	k BYTEA PRIMARY KEY,
	hk BYTEA NOT NULL,
	id BYTEA NOT NULL,
	hop BYTEA NOT NULL,
	chain BYTEA,
	action BYTEA NOT NULL,
	operation BYTEA NOT NULL,
	tool BYTEA NOT NULL,
	args BYTEA NOT NULL,
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
			//  2. a name already recorded in one of the effect's scopes
			//     (p_own: its names' keys in its hop; p_others: in the
			//     hops of its chain) refuses it, the own hop's first; the
			//     same call presented again (its own hop, its key) counts
			//     one more suppressed retry;
			//  3. an effect that needs an approval locks the one it would
			//     consume (FOR UPDATE: a concurrent consumer waits, then
			//     skips it if its last use went); none refuses it, as a
			//     mismatch when one with uses left names the operation for
			//     another tool or other arguments;
			//  4. its names are inserted, in the order of their keys so
			//     that two calls sharing two names cannot deadlock; a name
			//     another call recorded meanwhile refuses it, and the names
			//     this call inserted are deleted again;
			//  5. the approval loses one use.
			//
			// It returns one row: the outcome ('ok', 'finished',
			// 'repeated', 'noapproval', 'mismatch' or 'retry'), then the
			// record held (repeated: effectColumns), the hop's final state
			// (finished, in the second column), or the approval used (ok,
			// in the second column).
			`CREATE OR REPLACE FUNCTION ` + perform + `(p_hop BYTEA, p_action BYTEA, p_names BYTEA[], p_own BYTEA[], p_others BYTEA[],
	p_op BYTEA, p_ikey BYTEA, p_need BOOLEAN, p_at_s BIGINT, p_at_ns INTEGER, p_tool BYTEA, p_key BYTEA, p_args BYTEA,
	p_claim BOOLEAN, p_chain BYTEA, p_marker BOOLEAN)
RETURNS TABLE (o_outcome TEXT, o_name BYTEA, o_hop BYTEA, o_chain BYTEA, o_action BYTEA, o_tool BYTEA, o_key BYTEA,
	o_args BYTEA, o_at_s BIGINT, o_at_ns INTEGER, o_approval BYTEA, o_in_flight BOOLEAN, o_outcome_result BYTEA,
	o_outcome_error BYTEA, o_outcome_at_s BIGINT, o_outcome_at_ns INTEGER, o_replays INTEGER)
LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
	v_hk BYTEA := sha256(p_hop);
	v_final BYTEA;
	v_approval BYTEA;
	v_approval_id BYTEA;
	v_keys BYTEA[] := p_own || p_others;
	v_held BYTEA;
	v_mine BYTEA[];
BEGIN
	INSERT INTO ` + hops + ` (k, hop) VALUES (v_hk, p_hop) ON CONFLICT (k) DO NOTHING;
	SELECT h.final_state INTO v_final FROM ` + hops + ` h WHERE h.k = v_hk FOR SHARE;
	IF v_final IS NOT NULL THEN
		RETURN QUERY SELECT 'finished'::TEXT, v_final, ` + none[len("NULL::BYTEA, "):] + `;
		RETURN;
	END IF;

	SELECT e.k INTO v_held FROM ` + effects + ` e WHERE e.k = ANY (v_keys) ORDER BY array_position(v_keys, e.k) LIMIT 1;
	IF FOUND THEN
		UPDATE ` + effects + ` e SET replays = e.replays + 1
			WHERE e.k = v_held AND e.k = ANY (p_own) AND p_key <> ''::BYTEA AND e.key = p_key;
		RETURN QUERY ` + held + ` WHERE e.k = v_held;
		RETURN;
	END IF;

	IF p_need THEN
		SELECT a.k, a.id INTO v_approval, v_approval_id FROM ` + approvals + ` a
		WHERE a.hk = v_hk AND a.hop = p_hop AND a.action = p_action AND a.remaining > 0
			AND (a.issued_s, a.issued_ns) <= (p_at_s, p_at_ns) AND (p_at_s, p_at_ns) < (a.expires_s, a.expires_ns)
			AND (a.operation = ''::BYTEA OR a.operation = p_op OR a.operation = p_ikey)
			AND (a.tool = ''::BYTEA OR a.tool = p_tool) AND (a.args = ''::BYTEA OR a.args = p_args)
		ORDER BY (a.operation <> ''::BYTEA) DESC, a.expires_s, a.expires_ns, a.id
		LIMIT 1
		FOR UPDATE OF a;
		IF NOT FOUND THEN
			PERFORM 1 FROM ` + approvals + ` a
			WHERE a.hk = v_hk AND a.hop = p_hop AND a.action = p_action AND a.remaining > 0
				AND (a.issued_s, a.issued_ns) <= (p_at_s, p_at_ns) AND (p_at_s, p_at_ns) < (a.expires_s, a.expires_ns)
				AND a.operation <> ''::BYTEA AND (a.operation = p_op OR a.operation = p_ikey);
			IF FOUND THEN
				RETURN QUERY SELECT 'mismatch'::TEXT, ` + none + `;
			ELSE
				RETURN QUERY SELECT 'noapproval'::TEXT, ` + none + `;
			END IF;
			RETURN;
		END IF;
	END IF;

	WITH ins AS (
		INSERT INTO ` + effects + ` (k, nk, name, hop, chain, action, tool, key, args, at_s, at_ns, approval, in_flight, marker)
		SELECT u.k, sha256(u.nm), u.nm, p_hop, p_chain, p_action, p_tool, p_key, p_args, p_at_s, p_at_ns, v_approval_id, p_claim, p_marker
		FROM unnest(p_own, p_names) AS u(k, nm) ORDER BY u.k
		ON CONFLICT (k) DO NOTHING
		RETURNING k
	)
	SELECT coalesce(array_agg(ins.k), '{}') INTO v_mine FROM ins;
	IF cardinality(v_mine) < cardinality(p_own) THEN
		DELETE FROM ` + effects + ` e WHERE e.k = ANY (v_mine);
		SELECT e.k INTO v_held FROM ` + effects + ` e WHERE e.k = ANY (p_own) AND NOT e.k = ANY (v_mine)
			ORDER BY array_position(p_own, e.k) LIMIT 1;
		IF NOT FOUND THEN
			RETURN QUERY SELECT 'retry'::TEXT, ` + none + `;
			RETURN;
		END IF;
		UPDATE ` + effects + ` e SET replays = e.replays + 1 WHERE e.k = v_held AND p_key <> ''::BYTEA AND e.key = p_key;
		RETURN QUERY ` + held + ` WHERE e.k = v_held;
		RETURN;
	END IF;

	IF v_approval IS NOT NULL THEN
		UPDATE ` + approvals + ` a SET remaining = a.remaining - 1 WHERE a.k = v_approval;
	END IF;
	RETURN QUERY SELECT 'ok'::TEXT, v_approval_id, ` + none[len("NULL::BYTEA, "):] + `;
END
$body$`,
		},
		columns: `SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = ANY ($2) AND NOT attisdropped`,
		effects: effects,
		// $1 hop, $2 action, $3 names, $4 their keys in the hop, $5 in
		// the chain's hops, $6 operation id, $7 idempotency key, $8 needs
		// approval, $9 $10 at, $11 tool, $12 call key, $13 args, $14 claim,
		// $15 chain, $16 marker.
		perform: `SELECT o_outcome, o_name, o_hop, o_chain, o_action, o_tool, o_key, o_args, o_at_s, o_at_ns, o_approval,
	o_in_flight, o_outcome_result, o_outcome_error, o_outcome_at_s, o_outcome_at_ns, o_replays
FROM ` + perform + `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		// $1 name: its records in every hop, ordered by hop.
		lookup: `SELECT ` + effectColumns + ` FROM ` + effects + ` e WHERE e.nk = sha256($1::BYTEA) AND e.name = $1::BYTEA ORDER BY e.hop`,
		// $1 keys: the records a Settle would change, locked, in the order
		// of their keys (two Settles of one call cannot deadlock).
		claims: `SELECT e.k, ` + effectColumns + ` FROM ` + effects + ` e WHERE e.k = ANY ($1) ORDER BY e.k FOR UPDATE`,
		// $1 key, $2..$5 the outcome.
		settle: `UPDATE ` + effects + ` e SET in_flight = false, outcome_result = $2, outcome_error = $3, outcome_at_s = $4, outcome_at_ns = $5
WHERE e.k = $1 AND e.in_flight`,
		// $1 id, $2 hop, $3..$16 the terms. It inserts and returns a row,
		// or returns none when the ID is held.
		grant: `INSERT INTO ` + approvals + ` (k, hk, ` + approvalColumns + `)
VALUES (sha256($1::BYTEA), sha256($2::BYTEA), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
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
		// $1 hop: its row, and whether an effect that is not a marker is
		// recorded in its scope (Perform makes the row first).
		hop: `SELECT ` + hopColumns + `, EXISTS (SELECT 1 FROM ` + effects + ` e
	WHERE sha256(e.hop) = sha256($1::BYTEA) AND e.hop = $1::BYTEA AND NOT e.marker)
FROM ` + hops + ` h WHERE h.k = sha256($1::BYTEA) AND h.hop = $1::BYTEA`,
	}
}
