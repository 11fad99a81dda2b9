// Package authority is the system of record of what a receiving agent did
// with the authority a handoff package gave it: the external effects it
// performed (by operation id and idempotency key), the approvals it was
// given and how many uses of each are left, and each hop's acknowledgement
// and final disposition (evidence contract: "Preserve operation
// identifiers, idempotency keys, pending approvals ... and the
// system-of-record state so a receiver does not repeat an action after an
// ambiguous response"; "Preserve the final acknowledgement and disposition
// in the system of record").
//
// A Ledger is as pluggable as replay.Store. Memory is the default, for one
// process; durable and shared backends live in nested modules
// (evidence/authority/boltauthority, evidence/authority/redisauthority) and
// pass the same suite, authoritytest.Run. An evidence.Guard consults its
// ledger before every effect, so that a guard rebuilt after a restart, a
// guard for a retransmission of the same offer, and every replica of an
// agent sharing one ledger refuse an effect already performed.
//
// # Contract
//
//   - Perform is one atomic check-and-record. It refuses, changing
//     nothing, an effect one of whose names is already recorded
//     (ErrRepeated), an effect for a hop whose final disposition is
//     recorded (ErrFinished), and an effect that needs an approval when no
//     live approval matches (ErrNoApproval). Otherwise it consumes one use
//     of the matching approval, if one is needed, and records every name
//     of the effect, all at once. Of any number of concurrent calls, from
//     goroutines or replicas, that present one name, exactly one succeeds.
//   - Names compare exactly (octet for octet: no case folding, no
//     trimming, no normalisation), and an operation id and an idempotency
//     key share one namespace: the value "op-1" names one effect whether
//     it is presented as the one or the other. An effect with two names is
//     refused when either is recorded, and records both.
//   - An approval matches an effect when its hop and action are the
//     effect's, its time window [Issued, Expires) holds the effect's time,
//     it has uses left, and, if it names an operation, that operation is
//     one of the effect's names. Among several, one naming the operation
//     is used first, then the one that expires first.
//   - Grant records an approval under its ID once; granting the same
//     approval again is a no-op, and another approval under a used ID is
//     ErrConflict. An approval's uses are only ever consumed.
//   - Acknowledge and Finish record a hop's acknowledgement and final
//     disposition once each; the same value again is a no-op, another is
//     ErrConflict.
//   - Records are kept until the ledger is deleted: effects are how a
//     receiver knows, after any delay, that an action was taken.
//   - A ledger that cannot answer returns an error (wrapping
//     ErrUnavailable where the cause is transient); the guard then refuses
//     the effect. Every method honours its context.
package authority

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors. Every refusal of Perform wraps one of the first three.
var (
	// ErrRepeated: one of the effect's names is already recorded.
	ErrRepeated = errors.New("authority: effect already performed")
	// ErrNoApproval: the effect needs an approval and none matches.
	ErrNoApproval = errors.New("authority: no live approval matches")
	// ErrFinished: the hop's final disposition is recorded; it takes no
	// more effects.
	ErrFinished = errors.New("authority: hop finished")
	// ErrConflict: a record under this ID or hop already holds another
	// value.
	ErrConflict = errors.New("authority: conflicting record")
	// ErrInvalid: the record is not well formed (an empty hop, action or
	// ID, an expiry not after the issue time, a negative count).
	ErrInvalid = errors.New("authority: invalid record")
	// ErrUnavailable: the ledger could not answer; the effect must be
	// refused.
	ErrUnavailable = errors.New("authority: ledger unavailable")
)

// Effect is one external effect about to be performed.
type Effect struct {
	// Hop names the hop the effect is performed under: the handoff digest
	// of its offer, as Digest.String gives it.
	Hop string
	// Action is the action name of the package's authority.
	Action string
	// OperationID and IdempotencyKey are the effect's names; at least one
	// is set (an effect without a name cannot be deduplicated and is not
	// recorded). See the package documentation for how they compare.
	OperationID    string
	IdempotencyKey string
	// NeedsApproval says the action is "must ask": one use of a matching
	// approval is consumed with the record.
	NeedsApproval bool
	// At is when the effect is performed, by the caller's clock.
	At time.Time
}

// Names returns the effect's distinct, non-empty names.
func (e Effect) Names() []string {
	switch {
	case e.OperationID == "" && e.IdempotencyKey == "":
		return nil
	case e.OperationID == "" || e.OperationID == e.IdempotencyKey:
		if e.OperationID == "" {
			return []string{e.IdempotencyKey}
		}
		return []string{e.OperationID}
	case e.IdempotencyKey == "":
		return []string{e.OperationID}
	}
	return []string{e.OperationID, e.IdempotencyKey}
}

func (e Effect) validate() error {
	if e.Hop == "" || e.Action == "" || (e.OperationID == "" && e.IdempotencyKey == "") {
		return fmt.Errorf("%w: an effect needs a hop, an action and a name", ErrInvalid)
	}
	return nil
}

// Validate reports whether e can be performed at all.
func (e Effect) Validate() error { return e.validate() }

// Record is a performed effect, under one of its names.
type Record struct {
	Name   string
	Hop    string
	Action string
	At     time.Time
	// Approval is the ID of the approval it consumed, if any.
	Approval string
}

// Refusal is Perform's refusal of a repeated effect: the name found and
// the record that holds it.
type Refusal struct {
	Held Record
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%v: %q by %q on hop %s", ErrRepeated, r.Held.Name, r.Held.Action, r.Held.Hop)
}

func (r *Refusal) Unwrap() error { return ErrRepeated }

// Source says where an approval comes from.
type Source string

const (
	// SourceSigned: a statement signed by the approver's key, verified
	// through the receiver's trust configuration: portable evidence,
	// kept in Evidence, that anyone holding the trust can check again.
	SourceSigned Source = "signed"
	// SourceOperator: recorded by a local operator whom the host
	// authenticated; the ledger's record is the only evidence, and Evidence
	// names the operator's session as the host gave it.
	SourceOperator Source = "operator"
)

// Approval is one approval of a "must ask" action: bound to a hop, an
// action and either an operation or a number of uses, given by the owner
// the package names, for a time window.
type Approval struct {
	// ID names the approval; Grant records it once.
	ID string `json:"id"`
	// Hop and Action are what it approves (Hop as in Effect.Hop).
	Hop    string `json:"hop"`
	Action string `json:"action"`
	// OperationID, when set, approves that one effect only (by either of
	// its names).
	OperationID string `json:"operation_id,omitempty"`
	// Uses is how many effects it approves: 1 when zero. Remaining is how
	// many are left; Grant sets it to Uses.
	Uses      int `json:"uses"`
	Remaining int `json:"remaining"`
	// Approver is who approved: the owner of the package's pending
	// approval for Action.
	Approver string `json:"approver"`
	// Issued and Expires bound when it may be used: [Issued, Expires).
	Issued  time.Time `json:"issued"`
	Expires time.Time `json:"expires"`
	// Source and Evidence: where it came from (see Source). For
	// SourceSigned, Evidence is the signed statement as received.
	Source   Source `json:"source"`
	Evidence []byte `json:"evidence,omitempty"`
}

// Normalized returns a with its defaults applied (Uses 1, Remaining Uses)
// and checks it.
func (a Approval) Normalized() (Approval, error) {
	if a.Uses == 0 {
		a.Uses = 1
	}
	if a.OperationID != "" && a.Uses != 1 {
		return a, fmt.Errorf("%w: an approval of one operation has one use", ErrInvalid)
	}
	a.Remaining = a.Uses
	a.Issued, a.Expires = a.Issued.UTC().Round(0), a.Expires.UTC().Round(0)
	switch {
	case a.ID == "" || a.Hop == "" || a.Action == "" || a.Approver == "":
		return a, fmt.Errorf("%w: an approval needs an id, a hop, an action and an approver", ErrInvalid)
	case a.Uses < 0:
		return a, fmt.Errorf("%w: negative uses", ErrInvalid)
	case a.Issued.IsZero() || !a.Expires.After(a.Issued):
		return a, fmt.Errorf("%w: an approval needs an issue time before its expiry", ErrInvalid)
	case a.Source != SourceSigned && a.Source != SourceOperator:
		return a, fmt.Errorf("%w: source %q", ErrInvalid, a.Source)
	}
	return a, nil
}

// Matches reports whether a may approve e (uses left aside).
func (a Approval) Matches(e Effect) bool {
	if a.Hop != e.Hop || a.Action != e.Action || e.At.Before(a.Issued) || !e.At.Before(a.Expires) {
		return false
	}
	return a.OperationID == "" || a.OperationID == e.OperationID || a.OperationID == e.IdempotencyKey
}

// Same reports whether two approvals are one grant: equal in everything
// but Remaining.
func (a Approval) Same(b Approval) bool {
	return a.ID == b.ID && a.Hop == b.Hop && a.Action == b.Action && a.OperationID == b.OperationID &&
		a.Uses == b.Uses && a.Approver == b.Approver && a.Issued.Equal(b.Issued) && a.Expires.Equal(b.Expires) &&
		a.Source == b.Source && string(a.Evidence) == string(b.Evidence)
}

// Choose returns the index of the approval to consume for e among as, or
// -1: a live one with uses left, one naming the operation first, then the
// one that expires first, then the lowest ID.
func Choose(as []Approval, e Effect) int {
	best := -1
	for i, a := range as {
		if a.Remaining <= 0 || !a.Matches(e) {
			continue
		}
		if best < 0 || better(a, as[best]) {
			best = i
		}
	}
	return best
}

func better(a, b Approval) bool {
	if (a.OperationID != "") != (b.OperationID != "") {
		return a.OperationID != ""
	}
	if !a.Expires.Equal(b.Expires) {
		return a.Expires.Before(b.Expires)
	}
	return a.ID < b.ID
}

// Decision is a hop's acknowledgement.
type Decision string

const (
	Accepted Decision = "accepted"
	Rejected Decision = "rejected"
)

// Ack is a hop's acknowledgement: the decision, the reason of a
// rejection, the finding codes behind it, and the package digest it
// acknowledged.
type Ack struct {
	Decision Decision  `json:"decision"`
	Reason   string    `json:"reason,omitempty"`
	Findings []string  `json:"findings,omitempty"`
	Package  string    `json:"package,omitempty"`
	At       time.Time `json:"at"`
}

// Final is a hop's final disposition: its terminal state ("completed",
// "failed", "canceled", "rejected") and why.
type Final struct {
	State  string    `json:"state"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// HopRecord is what the ledger holds of a hop.
type HopRecord struct {
	Ack   *Ack   `json:"ack,omitempty"`
	Final *Final `json:"final,omitempty"`
}

// SameAck reports whether two acknowledgements are one.
func SameAck(a, b Ack) bool {
	if a.Decision != b.Decision || a.Reason != b.Reason || a.Package != b.Package || !a.At.Equal(b.At) || len(a.Findings) != len(b.Findings) {
		return false
	}
	for i := range a.Findings {
		if a.Findings[i] != b.Findings[i] {
			return false
		}
	}
	return true
}

// SameFinal reports whether two final dispositions are one.
func SameFinal(a, b Final) bool {
	return a.State == b.State && a.Detail == b.Detail && a.At.Equal(b.At)
}

// Ledger is the system of record of a receiving agent's effects, approvals
// and hop dispositions. See the package documentation for the contract
// every implementation keeps.
type Ledger interface {
	// Perform checks and records e atomically.
	Perform(ctx context.Context, e Effect) error
	// Lookup returns the record that holds name, if any.
	Lookup(ctx context.Context, name string) (Record, bool, error)
	// Grant records an approval (see Approval.Normalized for its defaults).
	Grant(ctx context.Context, a Approval) error
	// Approvals returns the approvals recorded for hop, with the uses they
	// have left, ordered by ID.
	Approvals(ctx context.Context, hop string) ([]Approval, error)
	// Acknowledge records hop's acknowledgement.
	Acknowledge(ctx context.Context, hop string, ack Ack) error
	// Finish records hop's final disposition; later effects of the hop are
	// refused with ErrFinished.
	Finish(ctx context.Context, hop string, f Final) error
	// Hop returns what the ledger holds of hop.
	Hop(ctx context.Context, hop string) (HopRecord, error)
}
