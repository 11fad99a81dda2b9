// Package authority is the system of record of what a receiving agent did
// with the authority a handoff package gave it: the external effects it
// performed (by operation id and idempotency key, in the scope of a hop),
// how each ended, the approvals it was given and how many uses of each are
// left, and each hop's acknowledgement and final disposition (evidence
// contract: "Preserve operation identifiers, idempotency keys, pending
// approvals ... and the system-of-record state so a receiver does not
// repeat an action after an ambiguous response"; "Preserve the final
// acknowledgement and disposition in the system of record").
//
// A Ledger is as pluggable as replay.Store. Memory is the default, for one
// process; durable and shared backends live in nested modules
// (evidence/authority/boltauthority, evidence/authority/redisauthority,
// evidence/authority/pgauthority) and pass the same suite,
// authoritytest.Run. An evidence.Guard consults its ledger before every
// effect, so that a guard rebuilt after a restart, a guard for a
// retransmission of the same offer, and every replica of an agent sharing
// one ledger refuse an effect already performed.
//
// # Scopes: what an operation id names
//
// An operation id or idempotency key names an effect only within the scope
// that could have performed it. The scope of an effect is its hop (the
// handoff digest of the offer it was performed under); the scopes an
// effect is checked against are its hop and the earlier hops of its hop's
// verified chain (Effect.Chain). The work of one chain is one piece of
// work: an effect an earlier hop performed is not performed again further
// down. Work that came through another chain is someone else's: the same
// name there is another effect, and a record there is neither consulted
// nor shown. Without scopes, any party that can get one name recorded (a
// delegator listing it among its package's completed actions) could have
// the real effect of an unrelated hop refused, and learn of that hop's
// record from the refusal.
//
// # Contract
//
//   - Perform is one atomic check-and-record. It refuses, changing
//     nothing but a count of suppressed retries, an effect one of whose
//     names is already recorded in one of its scopes (ErrRepeated, or one
//     of the three errors below that wrap it), an effect for a hop whose
//     final disposition is recorded (ErrFinished), and an effect that
//     needs an approval when no live approval matches (ErrNoApproval,
//     ErrApprovalMismatch). Otherwise it consumes one use of the matching
//     approval, if one is needed, and records every name of the effect in
//     the scope of its hop, all at once. Of any number of concurrent
//     calls, from goroutines or replicas, that present one name in one
//     scope, exactly one succeeds.
//   - Names compare exactly (octet for octet: no case folding, no
//     trimming, no normalisation), and within a scope an operation id and
//     an idempotency key share one namespace: the value "op-1" names one
//     effect whether it is presented as the one or the other. An effect
//     with two names is refused when either is recorded, and records both.
//   - An effect may carry its call's key (Effect.Key: see
//     evidence.Call.Key). A name recorded in the effect's own hop under
//     the same key is the same call presented again: ErrInFlight while it
//     was claimed and not settled, ErrReplayed once settled, and the
//     record counts one more suppressed retry (Record.Replays). Under
//     another key it is another call reusing the name: ErrKeyConflict.
//     A name recorded without a key, or by an earlier hop, is ErrRepeated.
//     The Refusal shows the record held only when it is the effect's own
//     hop's; of an earlier hop's record it names the hop, nothing more.
//   - A claim (Effect.Claim) is recorded in flight; Settle records its
//     outcome once. A claim is never released: one whose outcome was never
//     recorded (its process died between the two) stays in flight, and its
//     names refused, until it is settled, after the system of record has
//     been consulted (HC-34: a hop of unknown outcome is kept until
//     resolved; HC-38: a delegate never does the work again).
//   - An approval matches an effect when its hop and action are the
//     effect's, its time window [Issued, Expires) holds the effect's time,
//     it has uses left, and each of its operation, tool and arguments'
//     digest, when set, is the effect's (the operation one of the
//     effect's names). Among several, one naming the operation is used
//     first, then the one that expires first. When none matches but one
//     with uses left names one of the effect's names for another tool or
//     other arguments, the refusal is ErrApprovalMismatch.
//   - Grant records an approval under its ID once; granting it again is a
//     no-op, and another approval under a used ID is ErrConflict. Two
//     presentations of one approval differ at most in their Evidence (two
//     encodings or signatures of one statement): they are one grant. An
//     approval's uses are only ever consumed.
//   - Acknowledge and Finish record a hop's acknowledgement and final
//     disposition once each; the same value again is a no-op, another is
//     ErrConflict.
//   - Perform notes, in the same atomic step, that the hop took an effect
//     (HopRecord.Effects) when it records an effect in its hop's own
//     scope that is not a Marker; nothing else sets it, and nothing
//     clears it. Read after Finish, it is final: every later effect of
//     the hop is refused.
//   - Records are kept until the ledger is deleted: effects are how a
//     receiver knows, after any delay, that an action was taken.
//   - A ledger that cannot answer returns an error (wrapping
//     ErrUnavailable where the cause is transient); the guard then refuses
//     the effect. Every method honours its context.
package authority

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Errors. Every refusal of Perform wraps ErrRepeated, ErrNoApproval or
// ErrFinished.
var (
	// ErrRepeated: one of the effect's names is already recorded in one
	// of its scopes.
	ErrRepeated = errors.New("authority: effect already performed")
	// ErrInFlight: the effect's own call was claimed and its outcome is
	// not recorded yet (or never will be: its process died); wraps
	// ErrRepeated.
	ErrInFlight = fmt.Errorf("%w: the same call is in flight", ErrRepeated)
	// ErrReplayed: the effect's own call was performed and settled; the
	// Refusal holds its record and outcome. Wraps ErrRepeated.
	ErrReplayed = fmt.Errorf("%w: the same call, replayed", ErrRepeated)
	// ErrKeyConflict: the name is recorded in the effect's hop for another
	// call (another key: other arguments, action or tool). Wraps
	// ErrRepeated.
	ErrKeyConflict = fmt.Errorf("%w: by another call", ErrRepeated)
	// ErrNoApproval: the effect needs an approval and none matches.
	ErrNoApproval = errors.New("authority: no live approval matches")
	// ErrApprovalMismatch: the approval of one of the effect's names was
	// given for another call (another tool or other arguments); wraps
	// ErrNoApproval.
	ErrApprovalMismatch = fmt.Errorf("%w: the approval of this operation is for another call", ErrNoApproval)
	// ErrFinished: the hop's final disposition is recorded; it takes no
	// more effects.
	ErrFinished = errors.New("authority: hop finished")
	// ErrConflict: a record under this ID or hop already holds another
	// value, or Settle found no claim of the call to settle.
	ErrConflict = errors.New("authority: conflicting record")
	// ErrInvalid: the record is not well formed (an empty hop, action or
	// ID, an expiry not after the issue time, a negative count, a claim
	// without a key).
	ErrInvalid = errors.New("authority: invalid record")
	// ErrUnavailable: the ledger could not answer; the effect must be
	// refused.
	ErrUnavailable = errors.New("authority: ledger unavailable")
)

// Effect is one external effect about to be performed.
type Effect struct {
	// Hop names the hop the effect is performed under, its scope: the
	// handoff digest of its offer, as Digest.String gives it.
	Hop string
	// Chain names the earlier hops of Hop's verified chain, outermost
	// first (handoff digests, as Hop): the other scopes the effect's names
	// are checked in, and what the record says the hop came through.
	Chain []string
	// Action is the action name of the package's authority, and Tool the
	// tool the host runs for it (empty when the host does not say).
	Action string
	Tool   string
	// OperationID and IdempotencyKey are the effect's names; at least one
	// is set (an effect without a name cannot be deduplicated and is not
	// recorded). See the package documentation for how they compare.
	OperationID    string
	IdempotencyKey string
	// Key is the call's idempotency key and Args the digest of its
	// canonical arguments (evidence.Call.Key, evidence.ArgsDigest, as
	// Digest.String gives them); empty for an effect recorded without a
	// call (a package's completed action).
	Key  string
	Args string
	// NeedsApproval says the action is "must ask": one use of a matching
	// approval is consumed with the record.
	NeedsApproval bool
	// Claim records the effect in flight: its outcome is recorded later,
	// once, by Settle. It needs a Key. Without it the effect is recorded
	// as performed, with no outcome.
	Claim bool
	// Marker says the record only marks its names as used and is not an
	// effect the hop's delegate takes: a package's completed action, done
	// before the hop (evidence.NewGuard), or the claim of a host's unit
	// of work, which authorizes nothing (evidence.Guard.Once). It is
	// refused and recorded as any effect is; HopRecord.Effects does not
	// count it.
	Marker bool
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

// Validate reports whether e can be performed at all.
func (e Effect) Validate() error {
	switch {
	case e.Hop == "" || e.Action == "" || (e.OperationID == "" && e.IdempotencyKey == ""):
		return fmt.Errorf("%w: an effect needs a hop, an action and a name", ErrInvalid)
	case e.Claim && e.Key == "":
		return fmt.Errorf("%w: a claim needs its call's key", ErrInvalid)
	case slices.Contains(e.Chain, "") || slices.Contains(e.Chain, e.Hop):
		return fmt.Errorf("%w: a chain names earlier hops, none empty", ErrInvalid)
	}
	return nil
}

// ValidateSettle reports whether the claim e made can be settled: e is
// valid and names its call's key.
func (e Effect) ValidateSettle() error {
	if e.Key == "" {
		return fmt.Errorf("%w: settling needs the call's key", ErrInvalid)
	}
	return e.Validate()
}

// Record returns the record Perform keeps of e under name, having consumed
// approval (or none).
func (e Effect) Record(name, approval string) Record {
	return Record{Name: name, Hop: e.Hop, Chain: e.Chain, Action: e.Action, Tool: e.Tool, Key: e.Key, Args: e.Args,
		At: e.At.UTC().Round(0), Approval: approval, InFlight: e.Claim}
}

// SameCall reports whether held, a record of one of e's names, is e's own
// call presented again: in e's hop, under e's key. Perform counts it as a
// suppressed retry (Record.Replays).
func (e Effect) SameCall(held Record) bool {
	return e.Key != "" && held.Hop == e.Hop && held.Key == e.Key
}

// Refuse returns Perform's refusal of e for held, a record of one of e's
// names in one of e's scopes (see the package documentation).
func (e Effect) Refuse(held Record) *Refusal {
	switch {
	case held.Hop != e.Hop:
		return &Refusal{Held: Record{Name: held.Name, Hop: held.Hop}, Err: ErrRepeated}
	case e.SameCall(held) && held.InFlight:
		return &Refusal{Held: held, Err: ErrInFlight}
	case e.SameCall(held):
		return &Refusal{Held: held, Err: ErrReplayed}
	case e.Key != "" && held.Key != "":
		held.Outcome = nil
		return &Refusal{Held: held, Err: ErrKeyConflict}
	}
	return &Refusal{Held: held, Err: ErrRepeated}
}

// scopes calls yield with e's scopes, its own hop first, then its chain's.
func (e Effect) scopes() func(yield func(int, string) bool) {
	return func(yield func(int, string) bool) {
		if !yield(0, e.Hop) {
			return
		}
		for i, h := range e.Chain {
			if !yield(i+1, h) {
				return
			}
		}
	}
}

// EffectKey is the key under which a ledger keeps the record of name in
// the scope of hop: the length of name (a uvarint), name, then hop. Every
// record of one name shares the prefix EffectKey(name, ""), and no two
// (name, hop) pairs share a key.
func EffectKey(name, hop string) []byte {
	b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(name)+len(hop)), uint64(len(name)))
	return append(append(b, name...), hop...)
}

// Outcome is how a claimed effect ended, as its caller recorded it: what a
// call presented again is answered with (ErrReplayed).
type Outcome struct {
	// Result is the effect's result in the host's encoding, kept as
	// given.
	Result []byte `json:"result,omitempty"`
	// Error is the text of the error the effect ended with, if any.
	Error string `json:"error,omitempty"`
	// At is when it was recorded.
	At time.Time `json:"at"`
}

// Equal reports whether two outcomes are one.
func (o Outcome) Equal(p Outcome) bool {
	return bytes.Equal(o.Result, p.Result) && o.Error == p.Error && o.At.Equal(p.At)
}

// Record is a performed effect, under one of its names, in the scope of
// its hop: which hop performed it, through which chain, for which call,
// with which approval, and how it ended.
type Record struct {
	Name string `json:"name"`
	// Hop is the effect's scope, and Chain the earlier hops of its
	// verified chain, outermost first: the delegations it came through.
	Hop   string   `json:"hop"`
	Chain []string `json:"chain,omitempty"`
	// Action, Tool, Key and Args are the call's, as in Effect.
	Action string `json:"action"`
	Tool   string `json:"tool,omitempty"`
	Key    string `json:"key,omitempty"`
	Args   string `json:"args,omitempty"`
	// At is when it was performed (or claimed).
	At time.Time `json:"at"`
	// Approval is the ID of the approval it consumed, if any.
	Approval string `json:"approval,omitempty"`
	// InFlight says the effect was claimed and its outcome is not
	// recorded: still running, or its process died and the outcome is
	// unknown.
	InFlight bool `json:"in_flight,omitempty"`
	// Outcome is how it ended, once settled; nil for an effect recorded
	// without a claim (performed, its outcome not kept by the ledger).
	Outcome *Outcome `json:"outcome,omitempty"`
	// Replays counts the presentations of the same call refused since
	// (ErrInFlight, ErrReplayed): retries suppressed, not second actions.
	Replays int `json:"replays,omitempty"`
}

// Refusal is Perform's refusal of a repeated effect: the name found, the
// record that holds it (only its name and hop when an earlier hop holds
// it), and which of ErrRepeated, ErrInFlight, ErrReplayed and
// ErrKeyConflict it is.
type Refusal struct {
	Held Record
	Err  error
}

func (r *Refusal) Error() string {
	if r.Held.Action == "" {
		return fmt.Sprintf("%v: %q on earlier hop %s", r.Err, r.Held.Name, r.Held.Hop)
	}
	return fmt.Sprintf("%v: %q by %q on hop %s", r.Err, r.Held.Name, r.Held.Action, r.Held.Hop)
}

func (r *Refusal) Unwrap() error {
	if r.Err == nil {
		return ErrRepeated
	}
	return r.Err
}

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
// action and either an operation or a number of uses, and possibly to a
// tool and the digest of a call's arguments, given by the owner the
// package names, for a time window.
type Approval struct {
	// ID names the approval; Grant records it once. It is derived from
	// what the approval says (for a signed one, from its statement), never
	// from the octets that carried it.
	ID string `json:"id"`
	// Hop and Action are what it approves (Hop as in Effect.Hop).
	Hop    string `json:"hop"`
	Action string `json:"action"`
	// Chain is the earlier hops of Hop's verified chain, outermost first,
	// as in Effect.Chain: the delegations it was given under.
	Chain []string `json:"chain,omitempty"`
	// OperationID, when set, approves that one effect only (by either of
	// its names).
	OperationID string `json:"operation_id,omitempty"`
	// Tool and Args, when set, approve only a call of that tool with
	// arguments of that digest (as Effect.Tool and Effect.Args).
	Tool string `json:"tool,omitempty"`
	Args string `json:"args,omitempty"`
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
	// SourceSigned, Evidence is the signed statement as first received.
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
	case slices.Contains(a.Chain, "") || slices.Contains(a.Chain, a.Hop):
		return a, fmt.Errorf("%w: a chain names earlier hops, none empty", ErrInvalid)
	}
	return a, nil
}

// names reports whether a's operation is one of e's names.
func (a Approval) names(e Effect) bool {
	return a.OperationID == e.OperationID || a.OperationID == e.IdempotencyKey
}

// window reports whether a applies to e's hop, action and time.
func (a Approval) window(e Effect) bool {
	return a.Hop == e.Hop && a.Action == e.Action && !e.At.Before(a.Issued) && e.At.Before(a.Expires)
}

// Matches reports whether a may approve e (uses left aside).
func (a Approval) Matches(e Effect) bool {
	return a.window(e) && (a.OperationID == "" || a.names(e)) && (a.Tool == "" || a.Tool == e.Tool) &&
		(a.Args == "" || a.Args == e.Args)
}

// Same reports whether two approvals are one grant: equal in everything
// but Remaining and Evidence (two encodings or signatures of one
// statement are one grant).
func (a Approval) Same(b Approval) bool {
	return a.ID == b.ID && a.Hop == b.Hop && a.Action == b.Action && slices.Equal(a.Chain, b.Chain) &&
		a.OperationID == b.OperationID && a.Tool == b.Tool && a.Args == b.Args && a.Uses == b.Uses &&
		a.Approver == b.Approver && a.Issued.Equal(b.Issued) && a.Expires.Equal(b.Expires) && a.Source == b.Source
}

// Choose returns the index of the approval to consume for e among as: a
// live one with uses left, one naming the operation first, then the one
// that expires first, then the lowest ID. When there is none it returns
// ErrApprovalMismatch if one with uses left names one of e's names for
// another call, and ErrNoApproval otherwise.
func Choose(as []Approval, e Effect) (int, error) {
	best, mismatch := -1, false
	for i, a := range as {
		if a.Remaining <= 0 {
			continue
		}
		if !a.Matches(e) {
			mismatch = mismatch || (a.OperationID != "" && a.window(e) && a.names(e))
			continue
		}
		if best < 0 || better(a, as[best]) {
			best = i
		}
	}
	switch {
	case best >= 0:
		return best, nil
	case mismatch:
		return -1, ErrApprovalMismatch
	}
	return -1, ErrNoApproval
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

// NoApproval returns Perform's refusal of e when Choose found no approval
// (err is what it returned).
func NoApproval(e Effect, err error) error {
	return fmt.Errorf("%w: %q on hop %s", err, e.Action, e.Hop)
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
	// Effects reports that an effect is recorded in the hop's own scope
	// (an Effect whose Hop is this hop, not a Marker): performed, or
	// claimed and in flight, whatever became of it. False shows that the
	// hop's delegate took no effect through the ledger so far, and for
	// good once no effect of the hop can be recorded any more: its final
	// disposition is recorded (Perform then refuses every effect of the
	// hop), or every authority it had expired. It is what a host knows of
	// a hop's outcome from the system of record (draft section 4, "Knowing
	// the Outcome": a record written in the same atomic step as the
	// effect).
	Effects bool `json:"effects,omitempty"`
}

// SameAck reports whether two acknowledgements are one.
func SameAck(a, b Ack) bool {
	return a.Decision == b.Decision && a.Reason == b.Reason && a.Package == b.Package && a.At.Equal(b.At) &&
		slices.Equal(a.Findings, b.Findings)
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
	// Settle records the outcome of the claim e made (Effect.Claim), in
	// e's hop, under e's key, for every name of e, at once. The same
	// outcome again is a no-op; another, or no claim of e's call, is
	// ErrConflict.
	Settle(ctx context.Context, e Effect, o Outcome) error
	// Lookup returns the records of name in every scope, ordered by hop:
	// an operator's query (see Audit), never an answer to a call but of
	// the call's own hop's record (the guard answers a call presented
	// again after its hop finished with the outcome recorded for it).
	Lookup(ctx context.Context, name string) ([]Record, error)
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

// SettleTo returns held settled with o for Settle, or ErrConflict when held
// is not a claim of e's call in e's hop, or is settled otherwise already.
// The second result is false when held is already settled with o (nothing
// to write).
func SettleTo(e Effect, held Record, o Outcome) (Record, bool, error) {
	switch {
	case held.Hop != e.Hop || held.Key != e.Key || e.Key == "":
		return held, false, fmt.Errorf("%w: %q holds no claim of this call on hop %s", ErrConflict, held.Name, e.Hop)
	case held.InFlight:
		held.InFlight, held.Outcome = false, &o
		return held, true, nil
	case held.Outcome != nil && held.Outcome.Equal(o):
		return held, false, nil
	}
	return held, false, fmt.Errorf("%w: %q is settled already with another outcome", ErrConflict, held.Name)
}

// NormalizedOutcome returns o as ledgers keep it: its time in UTC without
// a monotonic reading, an empty result as none.
func NormalizedOutcome(o Outcome) Outcome {
	o.At = o.At.UTC().Round(0)
	if len(o.Result) == 0 {
		o.Result = nil
	} else {
		o.Result = slices.Clone(o.Result)
	}
	return o
}

// Trail is what the ledger says of one effect: its record (the hop that
// performed it and the chain that hop came through, its call and how it
// ended) and the approval it consumed, with who gave it.
type Trail struct {
	Record   Record    `json:"record"`
	Approval *Approval `json:"approval,omitempty"`
}

// Reader is what Audit reads of a ledger: every Ledger is one, and so is a
// read-only view of a ledger's storage.
type Reader interface {
	Lookup(ctx context.Context, name string) ([]Record, error)
	Approvals(ctx context.Context, hop string) ([]Approval, error)
}

// Audit answers "which delegation authorized this effect, and who approved
// it" for the effects named name, in every scope, ordered by hop.
func Audit(ctx context.Context, l Reader, name string) ([]Trail, error) {
	recs, err := l.Lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	out := make([]Trail, 0, len(recs))
	approvals := map[string][]Approval{}
	for _, r := range recs {
		t := Trail{Record: r}
		if r.Approval != "" {
			as, ok := approvals[r.Hop]
			if !ok {
				if as, err = l.Approvals(ctx, r.Hop); err != nil {
					return nil, err
				}
				approvals[r.Hop] = as
			}
			for _, a := range as {
				if a.ID == r.Approval {
					t.Approval = &a
					break
				}
			}
		}
		out = append(out, t)
	}
	return out, nil
}
