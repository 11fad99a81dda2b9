package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/internal/codec"
)

// The buckets of the offer records, in a file of their own (OpenOffers) or
// beside the records of a Store (Store.Offers):
//
//	offers      key: hop   value: the codec encoding of the OfferRecord, Version included
//	offer-work  key: work  value: the hop of the Open record that holds it
//	offer-meta  "count" -> be64(number of records in offers)
//
// The offers bucket's sequence is the last Version given. The offer-meta
// bucket, added after the first release, is built from the records when a
// file without it is opened.
var (
	bucketOffers    = []byte("offers")
	bucketOfferWork = []byte("offer-work")
	bucketOfferMeta = []byte("offer-meta")
)

// OfferOptions configures an OfferStore. The zero value is usable.
type OfferOptions struct {
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// MaxRecords bounds the records in the file, open or resolved and not
	// yet deleted. Zero or less means replay.DefaultMaxOffers.
	MaxRecords int
}

// OfferStore is a replay.OfferStore kept in a bbolt file. Every write is
// one transaction, synced to disk before the call returns; Versions come
// from the bucket's sequence, so they never repeat, across restarts too.
// Expired records are absent to every method and deleted when a write
// touches them, by Reclaim, or by Create at the cap.
//
// # Cap
//
// The file holds at most MaxRecords offer records (replay.DefaultMaxOffers,
// 65,536, by default; Options.MaxOffers for Store.Offers). An Open record
// is kept until its hop is resolved, canceled and answered, or abandoned
// (HC-41, HC-42), however long that takes. At the cap, Create deletes the
// expired records (one pass over the file, taken only when a record may
// have expired since the last), then refuses a new record with a
// *replay.OffersFullError, which wraps replay.ErrFull: no record is dropped
// to make room. A record costs its Handoff's octets and a few hundred more
// on disk.
type OfferStore struct {
	db    *bolt.DB
	path  string
	now   func() time.Time
	max   uint64
	guard *sweepGuard
	owned bool // Close closes db

	closeOnce sync.Once
	closeErr  error
}

// sweepGuard keeps a lower bound on the Expires of the offer records of one
// file, shared by its OfferStores, so that Create at the cap reads the
// records only when one may have expired. It is read and written in write
// transactions only, which bbolt runs one at a time.
type sweepGuard struct {
	mu    sync.Mutex
	known bool      // next is a lower bound; false after opening
	next  time.Time // zero: no record expires
}

// due reports whether a record may have expired at now.
func (g *sweepGuard) due(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.known || (!g.next.IsZero() && !now.Before(g.next))
}

// note lowers the bound to e, the Expires of a record written.
func (g *sweepGuard) note(e time.Time) {
	if e.IsZero() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.known && (g.next.IsZero() || e.Before(g.next)) {
		g.next = e
	}
}

// set records the earliest Expires of the records after a sweep.
func (g *sweepGuard) set(next time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.known, g.next = true, next
}

func newOfferStore(db *bolt.DB, path string, now func() time.Time, max int, guard *sweepGuard, owned bool) *OfferStore {
	if now == nil {
		now = time.Now
	}
	if max <= 0 {
		max = replay.DefaultMaxOffers
	}
	return &OfferStore{db: db, path: path, now: now, max: uint64(max), guard: guard, owned: owned}
}

var _ replay.OfferStore = (*OfferStore)(nil)

// OpenOffers opens the offer store in the file at path, creating it if
// needed. The caller must Close it. The file may hold a Store's records
// too, but one process may open a file once: to keep both in one file,
// open the Store and use its Offers method (a second open is refused with
// ErrLocked).
func OpenOffers(path string, opts OfferOptions) (*OfferStore, error) {
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	if err := db.Update(initOffers); err != nil {
		db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return newOfferStore(db, path, opts.Now, opts.MaxRecords, &sweepGuard{}, true), nil
}

// Offers returns an OfferStore kept in the store's file, beside its
// records, with the store's clock and Options.MaxOffers as its cap.
// Closing it does nothing; closing the Store closes the file.
func (s *Store) Offers() (*OfferStore, error) {
	if err := s.db.Update(initOffers); err != nil {
		return nil, s.wrap(context.Background(), err)
	}
	return newOfferStore(s.db, s.path, s.now, s.maxOffers, s.offerGuard, false), nil
}

func initOffers(tx *bolt.Tx) error {
	offers, err := tx.CreateBucketIfNotExists(bucketOffers)
	if err != nil {
		return err
	}
	if _, err := tx.CreateBucketIfNotExists(bucketOfferWork); err != nil {
		return err
	}
	if meta := tx.Bucket(bucketOfferMeta); meta != nil {
		if len(meta.Get(metaCount)) != 8 {
			return errors.New("malformed offer record count")
		}
		return nil
	}
	// A new file, or one of an earlier release: count its records.
	meta, err := tx.CreateBucket(bucketOfferMeta)
	if err != nil {
		return err
	}
	return putCount(meta, uint64(offers.Stats().KeyN))
}

// addOffers adds delta (1 or -1) to the count of offer records.
func addOffers(tx *bolt.Tx, delta int) error {
	meta := tx.Bucket(bucketOfferMeta)
	n, err := getCount(meta)
	if err != nil {
		return err
	}
	switch {
	case delta > 0:
		n++
	case n > 0:
		n--
	}
	return putCount(meta, n)
}

// Path returns the path of the store's file.
func (s *OfferStore) Path() string { return s.path }

// Close implements replay.OfferStore.
func (s *OfferStore) Close() error {
	if !s.owned {
		return nil
	}
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

// held returns the live record held for hop, deleting an expired one when
// the transaction is writable.
func (s *OfferStore) held(tx *bolt.Tx, hop string) (replay.OfferRecord, bool, error) {
	v := tx.Bucket(bucketOffers).Get([]byte(hop))
	if v == nil {
		return replay.OfferRecord{}, false, nil
	}
	rec, err := codec.DecodeOffer(v)
	if err != nil {
		return replay.OfferRecord{}, false, fmt.Errorf("offer record for %q: %w", hop, err)
	}
	if !rec.Live(s.now()) {
		if tx.Writable() {
			if err := dropOffer(tx, rec); err != nil {
				return replay.OfferRecord{}, false, err
			}
		}
		return replay.OfferRecord{}, false, nil
	}
	return rec, true, nil
}

// dropOffer deletes rec and frees its Work.
func dropOffer(tx *bolt.Tx, rec replay.OfferRecord) error {
	if err := tx.Bucket(bucketOffers).Delete([]byte(rec.Hop)); err != nil {
		return err
	}
	if err := addOffers(tx, -1); err != nil {
		return err
	}
	return freeWork(tx, rec)
}

func freeWork(tx *bolt.Tx, rec replay.OfferRecord) error {
	if !rec.Open || rec.Work == "" {
		return nil
	}
	w := tx.Bucket(bucketOfferWork)
	if bytes.Equal(w.Get([]byte(rec.Work)), []byte(rec.Hop)) {
		return w.Delete([]byte(rec.Work))
	}
	return nil
}

// put stores rec under a new Version and returns it.
func put(tx *bolt.Tx, rec replay.OfferRecord) (replay.OfferRecord, error) {
	b := tx.Bucket(bucketOffers)
	v, err := b.NextSequence()
	if err != nil {
		return replay.OfferRecord{}, err
	}
	rec.Version = v
	return rec, b.Put([]byte(rec.Hop), codec.EncodeOffer(rec))
}

// room returns a *replay.OffersFullError when the file holds its cap of
// records once the expired ones are deleted.
func (s *OfferStore) room(tx *bolt.Tx) error {
	n, err := getCount(tx.Bucket(bucketOfferMeta))
	if err != nil {
		return err
	}
	if n < s.max {
		return nil
	}
	if now := s.now(); s.guard.due(now) {
		next, err := reclaimOffers(tx, now)
		if err != nil {
			return err
		}
		s.guard.set(next)
		if n, err = getCount(tx.Bucket(bucketOfferMeta)); err != nil {
			return err
		}
	}
	if n >= s.max {
		return &replay.OffersFullError{Cap: int(s.max)}
	}
	return nil
}

// update runs fn in a write transaction, with the context checked first
// and the errors of the contract passed through.
func (s *OfferStore) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(tx)
	})
	return s.wrap(ctx, err)
}

func (s *OfferStore) wrap(ctx context.Context, err error) error {
	var (
		busy *replay.BusyError
		full *replay.OffersFullError
	)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replay.ErrExists), errors.Is(err, replay.ErrNotFound), errors.Is(err, replay.ErrConflict),
		errors.As(err, &busy), errors.As(err, &full):
		return err
	}
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return err
	}
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("boltstore: %w: %w", replay.ErrUnavailable, err)
	}
	return fmt.Errorf("boltstore: %w", err)
}

// Create implements replay.OfferStore.
func (s *OfferStore) Create(ctx context.Context, rec replay.OfferRecord) (replay.OfferRecord, error) {
	if err := replay.CheckOffer(rec); err != nil {
		return replay.OfferRecord{}, err
	}
	rec = rec.Clone()
	var out replay.OfferRecord
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if held, ok, err := s.held(tx, rec.Hop); err != nil {
			return err
		} else if ok {
			if rec.Version = held.Version; held.Equal(rec) {
				out = held // the same Create again
				return nil
			}
			return replay.ErrExists
		}
		w := tx.Bucket(bucketOfferWork)
		if rec.Open && rec.Work != "" {
			if h := w.Get([]byte(rec.Work)); h != nil {
				return &replay.BusyError{Work: rec.Work, Hop: string(h)}
			}
		}
		if err := s.room(tx); err != nil {
			return err
		}
		if rec.Open && rec.Work != "" {
			if err := w.Put([]byte(rec.Work), []byte(rec.Hop)); err != nil {
				return err
			}
		}
		if err := addOffers(tx, 1); err != nil {
			return err
		}
		var err error
		out, err = put(tx, rec)
		return err
	})
	if err != nil {
		return replay.OfferRecord{}, err
	}
	s.guard.note(out.Expires)
	return out, nil
}

// Get implements replay.OfferStore.
func (s *OfferStore) Get(ctx context.Context, hop string) (replay.OfferRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.OfferRecord{}, false, err
	}
	if hop == "" {
		return replay.OfferRecord{}, false, replay.ErrInvalid
	}
	var (
		rec replay.OfferRecord
		ok  bool
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		rec, ok, err = s.held(tx, hop)
		return err
	})
	if err != nil {
		return replay.OfferRecord{}, false, s.wrap(ctx, err)
	}
	return rec, ok, nil
}

// Swap implements replay.OfferStore.
func (s *OfferStore) Swap(ctx context.Context, old, new replay.OfferRecord) (replay.OfferRecord, error) {
	if err := replay.CheckSwap(old, new); err != nil {
		return replay.OfferRecord{}, err
	}
	new = new.Clone()
	var out replay.OfferRecord
	err := s.update(ctx, func(tx *bolt.Tx) error {
		held, ok, err := s.held(tx, old.Hop)
		switch {
		case err != nil:
			return err
		case !ok:
			return replay.ErrNotFound
		case held.Version != old.Version:
			return replay.ErrConflict
		}
		if held.Open && !new.Open {
			if err := freeWork(tx, held); err != nil {
				return err
			}
		}
		out, err = put(tx, new)
		return err
	})
	if err != nil {
		return replay.OfferRecord{}, err
	}
	s.guard.note(out.Expires)
	return out, nil
}

// Delete implements replay.OfferStore.
func (s *OfferStore) Delete(ctx context.Context, hop string, version uint64) error {
	if hop == "" {
		if err := ctx.Err(); err != nil {
			return err
		}
		return replay.ErrInvalid
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		held, ok, err := s.held(tx, hop)
		switch {
		case err != nil:
			return err
		case !ok:
			return replay.ErrNotFound
		case held.Version != version:
			return replay.ErrConflict
		}
		return dropOffer(tx, held)
	})
}

// List implements replay.OfferStore. It reads every record in one read
// transaction.
func (s *OfferStore) List(ctx context.Context, q replay.OfferQuery) ([]replay.OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []replay.OfferRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		now := s.now()
		n := 0
		return tx.Bucket(bucketOffers).ForEach(func(k, v []byte) error {
			if n++; n%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			rec, err := codec.DecodeOffer(v)
			if err != nil {
				return fmt.Errorf("offer record for %q: %w", k, err)
			}
			if rec.Live(now) && q.Match(rec) {
				out = append(out, rec)
			}
			return nil
		})
	})
	if err != nil {
		return nil, s.wrap(ctx, err)
	}
	replay.SortOffers(out)
	return out, nil
}

// Reclaim deletes every expired record now and returns how many it
// deleted.
func (s *OfferStore) Reclaim(ctx context.Context) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bolt.Tx) error {
		before, err := getCount(tx.Bucket(bucketOfferMeta))
		if err != nil {
			return err
		}
		next, err := reclaimOffers(tx, s.now())
		if err != nil {
			return err
		}
		s.guard.set(next)
		after, err := getCount(tx.Bucket(bucketOfferMeta))
		n = int(before - after)
		return err
	})
	return n, err
}

// reclaimOffers deletes every record expired at now, and returns the
// earliest Expires of those that remain (zero when none expires).
func reclaimOffers(tx *bolt.Tx, now time.Time) (time.Time, error) {
	var (
		expired []replay.OfferRecord
		next    time.Time
	)
	if err := tx.Bucket(bucketOffers).ForEach(func(k, v []byte) error {
		rec, err := codec.DecodeOffer(v)
		switch {
		case err != nil:
		case !rec.Live(now):
			expired = append(expired, rec)
		case !rec.Expires.IsZero() && (next.IsZero() || rec.Expires.Before(next)):
			next = rec.Expires
		}
		return nil
	}); err != nil {
		return time.Time{}, err
	}
	for _, rec := range expired {
		if err := dropOffer(tx, rec); err != nil {
			return time.Time{}, err
		}
	}
	return next, nil
}
