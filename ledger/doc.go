// Package ledger lets a delegate know whether the work of a hop took effect,
// as section "Knowing the Outcome" of draft -01 requires: "completed" and
// "failed" are claims about what happened, made only when the delegate
// knows, including after a crash or after losing an acknowledgement from its
// own storage.
//
// # Effects in the delegate's own store (HC-43)
//
// For work whose effect is in the delegate's own SQL database, SQL records
// the pair (iss, hop) and the handoff digest of the offer in that database,
// inside the caller's transaction, so that the record commits or aborts
// together with the effect:
//
//	err := l.Do(ctx, iss, hop, digest, func(tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE accounts SET ...")
//		return err
//	})
//
// A record that is present shows that the effect took place. A record that
// is absent shows that the effect did not take place only once the delegate
// knows the step cannot still complete: its transaction rolled back, or was
// never committed, or the store reported an abort or has finished its own
// recovery after a crash. An absent record seen by a lookup that failed,
// timed out, or ran while the step may still be running shows nothing. The
// caller states which case holds through the settled argument of
// SQL.Outcome; the package never infers it.
//
// A second record of the same (iss, hop) is refused (ErrRecorded, or
// ErrConflict when the digest differs), which aborts the caller's
// transaction and its effect with it: the work is never done twice (HC-38).
//
// # Databases
//
// The ledger takes the delegate's *sql.DB and brings no driver of its own.
// It speaks three dialects: SQLite, PostgreSQL (for example through
// github.com/jackc/pgx/v5/stdlib) and MySQL or MariaDB (through
// github.com/go-sql-driver/mysql, with InnoDB tables). NewSQL detects the
// dialect from the driver; NewSQLDialect names it, for a driver it does not
// know. Each dialect has its own placeholders, column types, insert-if-absent
// form and transaction isolation, described on Dialect. Every value is a
// bound parameter; the table name, the only text put into a statement, must
// be an identifier, and not one the dialect reserves (ErrTable). An iss or
// hop the table cannot hold exactly, such as U+0000 in PostgreSQL's TEXT,
// is refused with ErrKey before any work runs; CheckKey tells a delegate
// so before it takes the work.
//
// # Partial effects (HC-44)
//
// Because the record and the effect commit as one step, an effect in the
// delegate's own store is either wholly present with its record or wholly
// absent. A "failed" sent after Do returned an error that does not wrap
// ErrUncertain therefore truthfully carries no refs for that step. Work that
// spans several steps, or reaches outside the store, must list in refs each
// part that took effect.
//
// # Effects outside the store
//
// No record the delegate keeps can be atomic with a message sent or a call to
// another system. The outcome of such an effect is known only from the other
// system's record of the same attempt, found by an identifier the delegate
// gave it. OperationID derives that identifier from (iss, hop), so that the
// other system can also use it as an idempotency key.
//
// # Unknown outcomes (HC-45)
//
// An outcome that could not be established is not a failure. While
// SQL.Outcome reports Unknown, the delegate keeps the hop "accepted",
// answers retransmissions accordingly, and keeps looking. If the record is
// lost and the outcome cannot be learned, the delegate never guesses: the
// hop stays "accepted" and the delegate flags it to its operator.
package ledger
