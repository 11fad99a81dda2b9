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
//   - Remember is one atomic insert-if-absent: of any number of concurrent
//     calls for one Key, exactly one reports inserted, and every call returns
//     the record held after it.
//   - A record is kept at least until its Expires time; a zero Expires means
//     kept until updated with a non-zero one. A record past Expires is absent
//     for Get, Remember and Update, and may be reclaimed at any time after.
//   - A store never evicts an unexpired record to make room. A store that is
//     full returns ErrFull from Remember; the caller must refuse the offer.
//   - A store that cannot answer returns an error (wrapping ErrUnavailable
//     where it knows the cause is transient); the caller must refuse the
//     offer, never accept it.
//   - Every method honours its context's cancellation and deadline.
//
// The in-memory store of this package is the default. Durable and
// distributed backends live in subpackages and pass the same suite.
package replay

import (
	"bytes"
	"context"
	"errors"
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
	// Token names the call that remembered the record (PROVISIONAL).
	Token []byte
	// Created is when the record was remembered (PROVISIONAL).
	Created time.Time
}

// Equal reports whether two records hold the same values.
func (r Record) Equal(o Record) bool {
	return bytes.Equal(r.Digest, o.Digest) && r.Expires.Equal(o.Expires) &&
		r.State == o.State && bytes.Equal(r.Status, o.Status)
}

// Live reports whether the record is still to be kept at time now.
func (r Record) Live(now time.Time) bool {
	return r.Expires.IsZero() || now.Before(r.Expires)
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
	// for k, provided its Digest equals rec.Digest. It returns ErrNotFound
	// when no live record is held and ErrConflict when the digest differs.
	Update(ctx context.Context, k Key, rec Record) error

	// Close releases the store's resources.
	Close() error
}

var (
	// ErrFull is returned by Remember when the store holds as many live
	// records as it may and cannot take another without evicting one.
	ErrFull = errors.New("replay: store full")
	// ErrNotFound is returned by Update when no live record is held.
	ErrNotFound = errors.New("replay: no record for hop")
	// ErrConflict is returned by Update when the held digest differs.
	ErrConflict = errors.New("replay: record holds another digest")
	// ErrUnavailable marks a store that cannot answer now.
	ErrUnavailable = errors.New("replay: store unavailable")
	// ErrInvalid is returned for a malformed Key or Record (empty Iss or Hop,
	// Digest not 32 octets).
	ErrInvalid = errors.New("replay: invalid key or record")
)
