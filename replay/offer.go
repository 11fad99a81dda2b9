package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// OfferRecord is what a delegator keeps for one hop it offered: enough to
// retransmit the offer (HC-52), cancel it and propagate a cancel down the
// path (HC-28), know whether the hop is still unresolved (HC-41), refuse a
// second offer for the same work while it is (HC-42), and apply the
// statuses that come back, across a restart.
type OfferRecord struct {
	// Hop is the hop identifier of the offer; the record's key.
	Hop string
	// To is the delegate, the offer's aud.
	To string
	// Digest is the handoff digest of the offer (SHA-256 value, 32 octets).
	Digest []byte
	// Prev is the digest of the received offer this one passes on, or nil
	// for an offer that starts a path. A cancel of that offer propagates to
	// every record whose Prev is its digest (HC-28).
	Prev []byte
	// Work names the piece of work the hop was offered for, as the
	// application tracks it, or "" when untracked. While an Open record
	// holds a Work, no other Open record may be created for it (HC-42).
	Work string
	// Open is true while the hop is unresolved (HC-41). It only ever goes
	// from true to false.
	Open bool
	// Handoff is the Handoff object exactly as sent, for retransmission
	// (HC-52).
	Handoff []byte
	// State and Reason are those of the last verified status applied to
	// the hop, or empty.
	State, Reason string
	// Status is the octets of the verified status that set State.
	Status []byte
	// Canceled records that this delegator canceled the hop; Observed that
	// a status for it has been seen.
	Canceled, Observed bool
	// Created is when the offer was made. Expires is when the record may be
	// dropped; zero means kept until deleted. An Open record is never
	// dropped by time: its Expires must be zero.
	Created, Expires time.Time
	// Version is set by the store on every write and is the token of
	// Swap's and Delete's compare-and-swap. A store never gives the same
	// Version twice, across deletes and restarts, so a stale record never
	// matches a later one.
	Version uint64
}

// Live reports whether the record is still kept at time now.
func (r OfferRecord) Live(now time.Time) bool {
	return r.Expires.IsZero() || now.Before(r.Expires)
}

// OfferQuery selects records for OfferStore.List. Every condition set must
// hold; the zero OfferQuery selects every live record.
type OfferQuery struct {
	// OpenOnly selects records whose Open is true.
	OpenOnly bool
	// Prev, when not nil, selects records whose Prev equals it.
	Prev []byte
	// Work, when not empty, selects records whose Work equals it.
	Work string
}

// Match reports whether r meets every condition of q.
func (q OfferQuery) Match(r OfferRecord) bool {
	return (!q.OpenOnly || r.Open) &&
		(q.Prev == nil || (r.Prev != nil && string(q.Prev) == string(r.Prev))) &&
		(q.Work == "" || q.Work == r.Work)
}

// OfferStore keeps a delegator's OfferRecords. Every implementation must
// satisfy the suite storetest.RunOffers:
//
//   - Create inserts a record under its Hop when no live record is held for
//     it, else returns ErrExists, except when the held record equals the
//     one given in every field but Version: then Create returns it, so that
//     a Create retried after a lost reply (a client library's retry)
//     reports its own insert. When the new record is Open and names a
//     Work, and a live Open record with the same Work is held, Create
//     returns a *BusyError naming that record's hop (HC-42); the check and
//     the insert are one atomic step across every process sharing the
//     store, so of any number of concurrent Creates of Open records for one
//     Work exactly one succeeds.
//   - Swap replaces the record held for old.Hop with new, iff the held
//     Version equals old.Version; else ErrConflict (ErrNotFound when no live
//     record is held). Hop, To, Digest, Prev, Work, Handoff and Created
//     never change, and Open never goes from false to true: a new that
//     differs from old so is refused with ErrInvalid. A Swap that sets Open
//     false frees the Work for a new Create.
//   - Delete removes the record held for hop iff its Version equals
//     version; else ErrConflict, or ErrNotFound.
//   - Swap and Delete are not idempotent: one retried by a client library
//     after its reply was lost reports ErrConflict (or ErrNotFound) for a
//     write that landed. After an error, Get tells the caller what is held.
//   - Every write gives the record a new Version, never given before by
//     the store (across deletes, and across restarts for a durable store),
//     and returns the record as stored.
//   - A record with a non-zero Expires is absent at and after Expires. An
//     Open record with a non-zero Expires is refused with ErrInvalid: an
//     unresolved hop is kept until resolved.
//   - A store may bound the records it holds. At its bound, Create of a
//     new hop returns an *OffersFullError (wrapping ErrFull), after
//     reclaiming expired records; it never drops a live record to make
//     room. A Create that finds its own record held still returns it.
//   - List returns the live records that match the query, ordered by
//     Created, then Hop.
//   - Byte slices are copied in and out; records are kept byte for byte
//     and times to the nanosecond.
//   - A malformed record (empty Hop or To, Digest not 32 octets, Prev
//     neither nil nor 32 octets) is refused with ErrInvalid.
//   - A store that cannot answer returns an error wrapping ErrUnavailable
//     where it knows the cause is transient, never a wrong answer; every
//     method honours its context's cancellation and deadline.
type OfferStore interface {
	// Create inserts rec and returns it as stored, with its Version.
	Create(ctx context.Context, rec OfferRecord) (OfferRecord, error)
	// Get returns the live record held for hop; ok is false when none is.
	Get(ctx context.Context, hop string) (rec OfferRecord, ok bool, err error)
	// Swap replaces old with new if old is still the record held, and
	// returns new as stored, with its Version.
	Swap(ctx context.Context, old, new OfferRecord) (OfferRecord, error)
	// Delete removes the record held for hop if its Version is version.
	Delete(ctx context.Context, hop string, version uint64) error
	// List returns the live records that match q.
	List(ctx context.Context, q OfferQuery) ([]OfferRecord, error)
	// Close releases the store's resources.
	Close() error
}

var (
	// ErrExists is returned by OfferStore.Create when a live record is
	// held for the hop.
	ErrExists = errors.New("replay: a record is held for the hop")
	// ErrBusy is wrapped by the *BusyError OfferStore.Create returns when
	// an Open record holds the same Work (HC-42).
	ErrBusy = errors.New("replay: an unresolved hop holds the work")
)

// BusyError reports that an Open record holds the Work of a record that
// Create was asked to insert (HC-42: no new offer for the same work while
// an earlier hop for it is unresolved). It wraps ErrBusy.
type BusyError struct {
	// Work is the work both records name.
	Work string
	// Hop is the hop of the unresolved record that holds it.
	Hop string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("replay: work %q is held by unresolved hop %q", e.Work, e.Hop)
}

// Unwrap returns ErrBusy.
func (e *BusyError) Unwrap() error { return ErrBusy }

// OffersFullError is returned by OfferStore.Create when the store holds as
// many records as its cap allows. It wraps ErrFull. No record is dropped
// to make room: an Open record is a hop whose outcome is unknown (HC-41),
// and forgetting it would let a new offer repeat its work (HC-42). Room is
// made by resolving, canceling or abandoning hops, and by resolved records
// reaching their Expires.
type OffersFullError struct {
	// Cap is the number of records the store holds at most.
	Cap int
}

func (e *OffersFullError) Error() string {
	return fmt.Sprintf("replay: the offer store holds its cap of %d records; no new offer until a hop is resolved, canceled or abandoned (HC-41, HC-42)", e.Cap)
}

// Unwrap returns ErrFull.
func (e *OffersFullError) Unwrap() error { return ErrFull }

// CheckOffer returns an error wrapping ErrInvalid when rec is not a record
// an OfferStore may hold.
func CheckOffer(rec OfferRecord) error {
	switch {
	case rec.Hop == "":
		return fmt.Errorf("%w: empty hop", ErrInvalid)
	case rec.To == "":
		return fmt.Errorf("%w: empty delegate (To)", ErrInvalid)
	case len(rec.Digest) != 32:
		return fmt.Errorf("%w: digest of %d octets, want 32", ErrInvalid, len(rec.Digest))
	case rec.Prev != nil && len(rec.Prev) != 32:
		return fmt.Errorf("%w: prev of %d octets, want 32 or none", ErrInvalid, len(rec.Prev))
	case rec.Open && !rec.Expires.IsZero():
		return fmt.Errorf("%w: an open record must not expire", ErrInvalid)
	}
	return nil
}

// CheckSwap returns an error wrapping ErrInvalid when new may not replace
// old: either is malformed, or new changes what never changes (Hop, To,
// Digest, Prev, Work, Handoff, Created) or reopens a resolved hop.
func CheckSwap(old, new OfferRecord) error {
	if err := CheckOffer(new); err != nil {
		return err
	}
	switch {
	case old.Hop != new.Hop:
		return fmt.Errorf("%w: Swap of hop %q with a record for hop %q", ErrInvalid, old.Hop, new.Hop)
	case old.To != new.To || string(old.Digest) != string(new.Digest) || string(old.Prev) != string(new.Prev) ||
		(old.Prev == nil) != (new.Prev == nil) || old.Work != new.Work || string(old.Handoff) != string(new.Handoff) ||
		!old.Created.Equal(new.Created):
		return fmt.Errorf("%w: Swap changes To, Digest, Prev, Work, Handoff or Created of hop %q", ErrInvalid, old.Hop)
	case !old.Open && new.Open:
		return fmt.Errorf("%w: Swap reopens resolved hop %q", ErrInvalid, old.Hop)
	}
	return nil
}

// Clone returns a copy of r that shares no memory with it, with times
// stripped of monotonic clock readings. Empty byte slices become nil.
func (r OfferRecord) Clone() OfferRecord {
	r.Digest = cloneOrNil(r.Digest)
	r.Prev = cloneOrNil(r.Prev)
	r.Handoff = cloneOrNil(r.Handoff)
	r.Status = cloneOrNil(r.Status)
	r.Created = r.Created.Round(0)
	r.Expires = r.Expires.Round(0)
	return r
}

func cloneOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// Equal reports whether two records hold the same values, Version
// included. Nil and empty byte slices are equal.
func (r OfferRecord) Equal(o OfferRecord) bool {
	return r.Hop == o.Hop && r.To == o.To && string(r.Digest) == string(o.Digest) &&
		string(r.Prev) == string(o.Prev) && r.Work == o.Work && r.Open == o.Open &&
		string(r.Handoff) == string(o.Handoff) && r.State == o.State && r.Reason == o.Reason &&
		string(r.Status) == string(o.Status) && r.Canceled == o.Canceled && r.Observed == o.Observed &&
		r.Created.Equal(o.Created) && r.Expires.Equal(o.Expires) && r.Version == o.Version
}

// SortOffers orders records by Created, then Hop, as List returns them.
func SortOffers(recs []OfferRecord) {
	slices.SortFunc(recs, func(a, b OfferRecord) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Hop, b.Hop)
	})
}
