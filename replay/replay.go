// Package replay holds the memory a delegate keeps for each hop it has seen:
// the (iss, hop) pair, the handoff digest of the offer first seen under it,
// and, once the delegate has answered or taken the work, the hop's state and
// the last status octets it sent.
//
// The draft requires a receiver to remember each (iss, hop) that passed the
// first three checks of section 5.1, with its digest, at least until exp plus
// the skew (HC-33), and asks a delegate that answered or took the work to
// keep the pair, the digest and its last status in storage that survives a
// restart (HC-34). A second offer under a remembered pair is a retransmission
// when the digest is the same and equivocation when it differs (HC-35); the
// memory is therefore keyed on (iss, hop), never on the digest.
//
// # Contract
//
// Every Store implementation must satisfy the suite in replay/storetest:
//
//   - Remember is one atomic insert-if-absent that is idempotent per call.
//     Each call carries its own Token (TokenSize random octets chosen by
//     the caller). Remember reports inserted exactly when the record held
//     for the Key after the call carries the caller's Token and Digest: the
//     call wrote it, or an earlier attempt of the same call did (a client
//     library's retry after a lost reply, or the caller's own retry with
//     the same Record). Of any number of concurrent calls with distinct
//     tokens for one Key, exactly one reports inserted, and every call
//     returns the record held after it. A call without a Token reports
//     inserted only when this very attempt wrote, which a retry inside a
//     client library cannot tell: callers always set Token.
//   - A record is kept at least until its Expires time; a zero Expires means
//     kept until updated with a non-zero one. A record past Expires is absent
//     for every method, and may be reclaimed at any time after.
//   - Update changes State, Status and Expires only; Digest, Token and
//     Created stay those of the call that inserted the record. An Update
//     that carries a Token applies only to the record that Token inserted
//     (ErrConflict otherwise), so that a call whose record was released and
//     remembered again by another delivery cannot take the hop too; one
//     without a Token compares the Digest only.
//   - Swap is Update as one atomic compare-and-set on the held State and
//     Status, with the same identity checks. It returns the record held
//     after the call, so that a caller whose expected state is stale
//     decides again without another read, and it is idempotent per call:
//     a retry that finds the State, Status and Expires it writes reports
//     swapped. The Agent writes a hop's state with Swap only (one round
//     trip per Reply or Take); Update stays for callers that set a state
//     unconditionally.
//   - Remember and Get are the Agent's only reads: a fresh offer costs one
//     Remember, which returns the record already held; Get is called only
//     for an offer that is no longer fresh, to recognise a remembered pair
//     (HC-38). A store that answers Remember in one round trip answers a
//     fresh receive in one.
//   - Records, keys and Expires are kept as given: an Expires the store
//     cannot represent is refused with ErrExpiry, never shortened.
//   - A store may bound the records held for one issuer (Key.Iss), so
//     that one delegator cannot crowd out the others; beyond that share
//     Remember returns ErrIssuerFull, which wraps ErrFull.
//   - A store never evicts an unexpired record to make room. A store that is
//     full returns ErrFull from Remember; the caller must refuse the offer.
//   - A store that cannot answer returns an error (wrapping ErrUnavailable
//     where it knows the cause is transient); the caller must refuse the
//     offer, never accept it.
//   - Every method honours its context's cancellation and deadline.
//
// # Records written by a call that failed
//
// A Remember whose write landed but whose caller saw an error (a timeout, a
// connection lost after the server applied the write) leaves a record that
// nobody acted on: the caller refused the offer, and every later delivery
// of the same offer finds the record and is a retransmission with no
// status owed. Such a hop would be stranded silently. Untaken lists the
// live records whose State is still empty and that were created before a
// given time, with their age, so that an operator (or a periodic task of
// the application) can see them; Release deletes one, atomically, only if
// it is live, holds the given digest and its State is still empty. A
// released hop is new again: the next delivery of its offer passes the
// (iss, hop) check and may be accepted.
//
// Release cannot lead to a second acceptance, because of the rule the
// library keeps on the delegate's side: work on a hop starts only after
// its State has been set, by Take or by Reply("accepted"), in this store,
// with a Swap (or an Update) that carries the Token of the Remember that
// inserted the record. A record whose State is empty has therefore never been worked
// on, and no status has been sent for it. Release and the write that sets
// State are each atomic on the record and Release requires State to be
// empty, so they are ordered: either the State write comes first, Release
// fails with ErrTaken and the hop stays remembered; or Release comes
// first, and the State write fails (ErrNotFound, or ErrConflict when
// another delivery has remembered the hop again since, under its own
// Token), the caller must not start the work, and the hop is accepted at
// most once, by whichever delivery remembers it next. A Release of a record
// that a live call is still about to take costs that call its acceptance
// (its State write fails and it refuses), never a duplicate; choose the
// age passed to Untaken well above the time a receiver takes from Remember
// to Take.
//
// The in-memory store of this package is the default. Durable and
// distributed backends live in nested modules (replay/boltstore,
// replay/redisstore) and pass the same suite.
//
// # Offer records
//
// OfferStore is the delegator's side: the hops it offered, with what it
// needs after a restart to retransmit, cancel, propagate cancels and keep
// the rule that no new offer is made for a piece of work while an earlier
// hop for it is unresolved (HC-42). Its contract is written on OfferStore;
// storetest.RunOffers checks it.
package replay

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"
)

// Key names one hop: the delegator's AgentId and the hop identifier.
type Key struct {
	Iss string
	Hop string
}

// Record is what a store keeps for one hop.
type Record struct {
	// Digest is the handoff digest (SHA-256 value, 32 octets) of the first
	// offer seen under the key.
	Digest []byte
	// Token identifies the Remember call that wrote the record: TokenSize
	// random octets chosen by the caller for each call (see NewToken), or
	// empty. It makes Remember idempotent per call; see the package
	// documentation.
	Token []byte
	// Created is when the record was first written, as the caller's clock
	// read it; Untaken reports ages from it. Zero means unknown: such a
	// record is listed by Untaken whatever the time asked for, with Age 0.
	Created time.Time
	// Expires is the time until which the record must be kept at least:
	// exp plus the skew for a hop only remembered, longer once the delegate
	// has answered (the retention period). Zero means no expiry, for a hop
	// whose outcome is unknown and must be kept until resolved (HC-34).
	Expires time.Time
	// State is the delegate's state for the hop: empty while the hop is only
	// remembered, else "accepted", "rejected", "completed", "failed" or
	// "canceled".
	State string
	// Status is the last status octets the delegate sent for the hop, or nil.
	Status []byte
}

// Equal reports whether two records hold the same values.
func (r Record) Equal(o Record) bool {
	return bytes.Equal(r.Digest, o.Digest) && bytes.Equal(r.Token, o.Token) &&
		r.Created.Equal(o.Created) && r.Expires.Equal(o.Expires) &&
		r.State == o.State && bytes.Equal(r.Status, o.Status)
}

// Live reports whether the record is still to be kept at time now.
func (r Record) Live(now time.Time) bool {
	return r.Expires.IsZero() || now.Before(r.Expires)
}

// Written reports whether held is the record a Remember call with rec
// wrote: both carry the same non-empty Token and the same Digest.
func Written(held, rec Record) bool {
	return len(rec.Token) > 0 && bytes.Equal(held.Token, rec.Token) && bytes.Equal(held.Digest, rec.Digest)
}

// TokenSize is the length of a Record's Token.
const TokenSize = 16

// NewToken returns TokenSize octets read from rand, or from crypto/rand
// when rand is nil.
func NewToken(rand io.Reader) ([]byte, error) {
	if rand == nil {
		rand = cryptorand.Reader
	}
	t := make([]byte, TokenSize)
	if _, err := io.ReadFull(rand, t); err != nil {
		return nil, fmt.Errorf("replay: token: %w", err)
	}
	return t, nil
}

// Untaken is a live record whose State is empty: remembered, never taken
// or answered.
type Untaken struct {
	Key    Key
	Record Record
	// Age is the time since Record.Created by the store's clock, or 0 when
	// Created is zero.
	Age time.Duration
}

// Store is the memory of hops. See the package documentation for the
// contract every implementation keeps.
type Store interface {
	// Remember inserts rec under k unless a live record is held for k. It
	// returns the record held for k after the call and whether this call
	// inserted it.
	Remember(ctx context.Context, k Key, rec Record) (held Record, inserted bool, err error)

	// Get returns the live record held for k; ok is false when there is none.
	Get(ctx context.Context, k Key) (rec Record, ok bool, err error)

	// Update replaces the State, Status and Expires of the live record held
	// for k, provided its Digest equals rec.Digest and, when rec.Token is
	// not empty, its Token equals rec.Token. It returns ErrNotFound when no
	// live record is held and ErrConflict when the digest or token differs.
	Update(ctx context.Context, k Key, rec Record) error

	// Swap is Update as a compare-and-set, in one step: it replaces the
	// State, Status and Expires of the live record held for k with those
	// of new, provided the held record's State and Status equal old's. Its
	// Digest must equal old.Digest and, when old.Token is not empty, its
	// Token old.Token, else Swap returns ErrConflict (ErrNotFound when no
	// live record is held); new's Digest, Token and Created are not used.
	// It returns the record held after the call and whether that record
	// carries new's State, Status and Expires: swapped is true when this
	// call wrote them or an earlier attempt of it did (a client library's
	// retry after a lost reply), false when the held State or Status
	// differ from old's, and then held is the record as it is, so that the
	// caller can decide again without another read.
	Swap(ctx context.Context, k Key, old, new Record) (held Record, swapped bool, err error)

	// Untaken returns the live records whose State is empty and whose
	// Created is before the given time (or zero), oldest first. A store may
	// return them in several calls' worth of work; it reads them all.
	Untaken(ctx context.Context, createdBefore time.Time) ([]Untaken, error)

	// Release deletes the record held for k, atomically, only if it is
	// live, its Digest equals digest and its State is empty. It returns
	// ErrNotFound when no live record is held, ErrConflict when the digest
	// differs and ErrTaken when State is set; the record then stays. A
	// Release retried by a client library after a lost reply reports
	// ErrNotFound for the delete its first attempt made: either way the
	// record is gone.
	Release(ctx context.Context, k Key, digest []byte) error

	// Close releases the store's resources.
	Close() error
}

var (
	// ErrFull is returned by Remember when the store holds as many live
	// records as it may and cannot take another without evicting one, and
	// wrapped by the *OffersFullError of OfferStore.Create at its cap.
	ErrFull = errors.New("replay: store full")
	// ErrIssuerFull is returned by Remember when the records held for the
	// key's issuer use its share of the store, so that one delegator
	// cannot crowd out the others. It wraps ErrFull.
	ErrIssuerFull = fmt.Errorf("%w: the issuer's share is used", ErrFull)
	// ErrExpiry is returned by Remember, Update and Swap for an Expires the
	// store cannot represent. The store refuses the record rather than
	// forget it early; the caller must refuse the offer.
	ErrExpiry = errors.New("replay: expiry beyond what the store can keep")
	// ErrNotFound is returned by Update, Swap and Release when no live
	// record is held, and by OfferStore methods when no record is held for
	// the hop.
	ErrNotFound = errors.New("replay: no record for hop")
	// ErrConflict is returned by Update, Swap and Release when the held
	// digest (or token) differs, and by OfferStore.Swap and Delete when the
	// held Version differs.
	ErrConflict = errors.New("replay: held record differs (digest or version)")
	// ErrUnavailable marks a store that cannot answer now.
	ErrUnavailable = errors.New("replay: store unavailable")
	// ErrTaken is returned by Release when the record's State is set: the
	// hop was taken or answered and must stay remembered.
	ErrTaken = errors.New("replay: hop already taken")
	// ErrInvalid is returned for a malformed Key or Record (empty Iss or Hop,
	// Digest not 32 octets, Token neither empty nor TokenSize octets).
	ErrInvalid = errors.New("replay: invalid key or record")
)
