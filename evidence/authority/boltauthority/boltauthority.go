// Package boltauthority is an authority.Ledger on a bbolt file: the
// receiving agent's effects, approvals and hop dispositions survive a
// restart, a crash included (every call is one bbolt transaction, synced
// before it returns).
//
// One process holds the file at a time (bbolt's file lock). Replicas of
// an agent on one host share a file with Options.Shared, which opens the
// file for each call and closes it after, so that the calls of every
// process are serialized by the lock; each call then costs an open and a
// sync. Across hosts, use evidence/authority/redisauthority.
//
// # File format
//
// Four buckets, every value JSON. "effects" holds each authority.Record
// under authority.EffectKey(name, hop), so that the records of one name,
// in every hop's scope, are the keys that start with EffectKey(name, "").
// "approvals" holds each authority.Approval under its hop, a zero octet
// and its ID; "ids" maps each approval ID to its hop; "hops" holds each
// hop's authority.HopRecord under the hop (its Effects set by the
// transaction that records the hop's first effect). A claim
// (authority.Effect.Claim) is written, and synced, before Perform returns:
// a process killed between the claim and its outcome leaves the claim in
// flight, and the names it holds refused, when the file is opened again.
package boltauthority

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentproto/handoff/evidence/authority"
)

var (
	bucketEffects   = []byte("effects")   // authority.EffectKey(name, hop) -> Record
	bucketApprovals = []byte("approvals") // hop 0x00 id -> Approval
	bucketIDs       = []byte("ids")       // approval id -> hop
	bucketHops      = []byte("hops")      // hop -> HopRecord
)

// DefaultLockTimeout bounds the wait for another process's file lock.
const DefaultLockTimeout = 5 * time.Second

// Options configure a ledger.
type Options struct {
	// Shared opens the file for each call instead of once (see the
	// package documentation).
	Shared bool
	// LockTimeout bounds the wait for the file lock, within the call's
	// deadline; zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading only, as an audit does
	// (authority.Audit, "handoff evidence audit"): it creates nothing,
	// every write is refused with authority.ErrUnavailable, and a process
	// that holds the file open for writing is waited for (LockTimeout).
	ReadOnly bool
}

// Ledger is an authority.Ledger on a bbolt file.
type Ledger struct {
	path string
	opts Options
	db   *bolt.DB // nil when Shared
}

var _ authority.Ledger = (*Ledger)(nil)

// Open opens (creating it if need be) the ledger at path.
func Open(path string, opts Options) (*Ledger, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	l := &Ledger{path: path, opts: opts}
	db, err := l.open(context.Background())
	if err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		if err := db.View(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bucketEffects, bucketApprovals, bucketIDs, bucketHops} {
				if tx.Bucket(b) == nil {
					return fmt.Errorf("%s holds no authority ledger (no %q bucket)", path, b)
				}
			}
			return nil
		}); err != nil {
			db.Close()
			return nil, fmt.Errorf("%w: %v", authority.ErrUnavailable, err)
		}
		if opts.Shared {
			return l, db.Close()
		}
		l.db = db
		return l, nil
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketEffects, bucketApprovals, bucketIDs, bucketHops} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %v", authority.ErrUnavailable, err)
	}
	if opts.Shared {
		return l, db.Close()
	}
	l.db = db
	return l, nil
}

func (l *Ledger) open(ctx context.Context) (*bolt.DB, error) {
	timeout := l.opts.LockTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: %w", authority.ErrUnavailable, context.DeadlineExceeded)
	}
	db, err := bolt.Open(l.path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: l.opts.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", authority.ErrUnavailable, err)
	}
	return db, nil
}

// Path is the ledger's file.
func (l *Ledger) Path() string { return l.path }

// Close closes the file (a no-op for a shared ledger).
func (l *Ledger) Close() error {
	if l.db == nil {
		return nil
	}
	return l.db.Close()
}

// tx runs fn in one transaction, opening the file first when shared.
func (l *Ledger) tx(ctx context.Context, write bool, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", authority.ErrUnavailable, err)
	}
	db := l.db
	if db == nil {
		var err error
		if db, err = l.open(ctx); err != nil {
			return err
		}
		defer db.Close()
	}
	run := db.View
	if write {
		run = db.Update
	}
	err := run(fn)
	var ours refusal
	if err != nil && !errors.As(err, &ours) {
		return fmt.Errorf("%w: %v", authority.ErrUnavailable, err)
	}
	if err != nil {
		return ours.err
	}
	return nil
}

// refusal carries a refusal out of a transaction (which it rolls back).
type refusal struct{ err error }

func (r refusal) Error() string { return r.err.Error() }

func approvalKey(hop, id string) []byte { return append(append([]byte(hop), 0), id...) }

// Perform implements authority.Ledger.
func (l *Ledger) Perform(ctx context.Context, e authority.Effect) error {
	if err := e.Validate(); err != nil {
		return err
	}
	var refused error
	err := l.tx(ctx, true, func(tx *bolt.Tx) error {
		var h authority.HopRecord
		if v := tx.Bucket(bucketHops).Get([]byte(e.Hop)); v != nil {
			if err := json.Unmarshal(v, &h); err != nil {
				return err
			}
			if h.Final != nil {
				return refusal{fmt.Errorf("%w: %s (%s)", authority.ErrFinished, e.Hop, h.Final.State)}
			}
		}
		effects := tx.Bucket(bucketEffects)
		names := e.Names()
		for _, hop := range append([]string{e.Hop}, e.Chain...) {
			for _, n := range names {
				k := authority.EffectKey(n, hop)
				v := effects.Get(k)
				if v == nil {
					continue
				}
				var r authority.Record
				if err := json.Unmarshal(v, &r); err != nil {
					return err
				}
				refused = e.Refuse(r)
				if !e.SameCall(r) {
					return refusal{refused}
				}
				// A retry suppressed: counted, and committed.
				r.Replays++
				refused = e.Refuse(r)
				return put(effects, k, r)
			}
		}
		var approval string
		if e.NeedsApproval {
			b := tx.Bucket(bucketApprovals)
			prefix := approvalKey(e.Hop, "")
			var as []authority.Approval
			c := b.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				var a authority.Approval
				if err := json.Unmarshal(v, &a); err != nil {
					return err
				}
				as = append(as, a)
			}
			i, err := authority.Choose(as, e)
			if err != nil {
				return refusal{authority.NoApproval(e, err)}
			}
			as[i].Remaining--
			if err := put(b, approvalKey(e.Hop, as[i].ID), as[i]); err != nil {
				return err
			}
			approval = as[i].ID
		}
		for _, n := range names {
			if err := put(effects, authority.EffectKey(n, e.Hop), e.Record(n, approval)); err != nil {
				return err
			}
		}
		if e.Marker || h.Effects {
			return nil
		}
		h.Effects = true
		return put(tx.Bucket(bucketHops), []byte(e.Hop), h)
	})
	if err != nil {
		return err
	}
	return refused
}

// put stores v, as JSON, under k.
func put(b *bolt.Bucket, k []byte, v any) error {
	enc, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, enc)
}

// Settle implements authority.Ledger.
func (l *Ledger) Settle(ctx context.Context, e authority.Effect, o authority.Outcome) error {
	if err := e.ValidateSettle(); err != nil {
		return err
	}
	o = authority.NormalizedOutcome(o)
	return l.tx(ctx, true, func(tx *bolt.Tx) error {
		effects := tx.Bucket(bucketEffects)
		for _, n := range e.Names() {
			k := authority.EffectKey(n, e.Hop)
			v := effects.Get(k)
			if v == nil {
				return refusal{fmt.Errorf("%w: %q holds no claim of this call on hop %s", authority.ErrConflict, n, e.Hop)}
			}
			var r authority.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			r, write, err := authority.SettleTo(e, r, o)
			if err != nil {
				return refusal{err} // rolls back the names settled before
			}
			if write {
				if err := put(effects, k, r); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Lookup implements authority.Ledger.
func (l *Ledger) Lookup(ctx context.Context, name string) ([]authority.Record, error) {
	return scan[authority.Record](ctx, l, bucketEffects, authority.EffectKey(name, ""))
}

// scan decodes each value under prefix in bucket, in the order of the keys.
func scan[T any](ctx context.Context, l *Ledger, bucket, prefix []byte) (out []T, err error) {
	err = l.tx(ctx, false, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var x T
			if err := json.Unmarshal(v, &x); err != nil {
				return err
			}
			out = append(out, x)
		}
		return nil
	})
	return out, err
}

// Grant implements authority.Ledger.
func (l *Ledger) Grant(ctx context.Context, a authority.Approval) error {
	a, err := a.Normalized()
	if err != nil {
		return err
	}
	return l.tx(ctx, true, func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketIDs)
		if hop := ids.Get([]byte(a.ID)); hop != nil {
			var held authority.Approval
			if err := json.Unmarshal(tx.Bucket(bucketApprovals).Get(approvalKey(string(hop), a.ID)), &held); err != nil {
				return err
			}
			if held.Same(a) {
				return nil
			}
			return refusal{fmt.Errorf("%w: approval %q is recorded with other terms", authority.ErrConflict, a.ID)}
		}
		if err := put(tx.Bucket(bucketApprovals), approvalKey(a.Hop, a.ID), a); err != nil {
			return err
		}
		return ids.Put([]byte(a.ID), []byte(a.Hop))
	})
}

// Approvals implements authority.Ledger.
func (l *Ledger) Approvals(ctx context.Context, hop string) ([]authority.Approval, error) {
	return scan[authority.Approval](ctx, l, bucketApprovals, approvalKey(hop, ""))
}

// hopUpdate reads hop's record, lets set change it, and writes it.
func (l *Ledger) hopUpdate(ctx context.Context, hop string, set func(*authority.HopRecord) error) error {
	return l.tx(ctx, true, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHops)
		var h authority.HopRecord
		if v := b.Get([]byte(hop)); v != nil {
			if err := json.Unmarshal(v, &h); err != nil {
				return err
			}
		}
		if err := set(&h); err != nil {
			return refusal{err}
		}
		v, err := json.Marshal(h)
		if err != nil {
			return err
		}
		return b.Put([]byte(hop), v)
	})
}

// Acknowledge implements authority.Ledger.
func (l *Ledger) Acknowledge(ctx context.Context, hop string, ack authority.Ack) error {
	if hop == "" || (ack.Decision != authority.Accepted && ack.Decision != authority.Rejected) {
		return fmt.Errorf("%w: an acknowledgement needs a hop and a decision", authority.ErrInvalid)
	}
	ack.At = ack.At.UTC().Round(0)
	return l.hopUpdate(ctx, hop, func(h *authority.HopRecord) error {
		if h.Ack != nil {
			if authority.SameAck(*h.Ack, ack) {
				return nil
			}
			return fmt.Errorf("%w: hop %s is acknowledged %s", authority.ErrConflict, hop, h.Ack.Decision)
		}
		h.Ack = &ack
		return nil
	})
}

// Finish implements authority.Ledger.
func (l *Ledger) Finish(ctx context.Context, hop string, f authority.Final) error {
	if hop == "" || f.State == "" {
		return fmt.Errorf("%w: a final disposition needs a hop and a state", authority.ErrInvalid)
	}
	f.At = f.At.UTC().Round(0)
	return l.hopUpdate(ctx, hop, func(h *authority.HopRecord) error {
		if h.Final != nil {
			if authority.SameFinal(*h.Final, f) {
				return nil
			}
			return fmt.Errorf("%w: hop %s is finished %s", authority.ErrConflict, hop, h.Final.State)
		}
		h.Final = &f
		return nil
	})
}

// Hop implements authority.Ledger.
func (l *Ledger) Hop(ctx context.Context, hop string) (h authority.HopRecord, err error) {
	err = l.tx(ctx, false, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketHops).Get([]byte(hop)); v != nil {
			return json.Unmarshal(v, &h)
		}
		return nil
	})
	return h, err
}
