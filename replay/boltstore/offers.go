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
//
// The offers bucket's sequence is the last Version given.
var (
	bucketOffers    = []byte("offers")
	bucketOfferWork = []byte("offer-work")
)

// OfferOptions configures an OfferStore. The zero value is usable.
type OfferOptions struct {
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// OfferStore is a replay.OfferStore kept in a bbolt file. Every write is
// one transaction, synced to disk before the call returns; Versions come
// from the bucket's sequence, so they never repeat, across restarts too.
// Expired records are absent to every method and deleted when a write
// touches them or by Reclaim.
type OfferStore struct {
	db    *bolt.DB
	path  string
	now   func() time.Time
	owned bool // Close closes db

	closeOnce sync.Once
	closeErr  error
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &OfferStore{db: db, path: path, now: opts.Now, owned: true}, nil
}

// Offers returns an OfferStore kept in the store's file, beside its
// records, with the store's clock. Closing it does nothing; closing the
// Store closes the file.
func (s *Store) Offers() (*OfferStore, error) {
	if err := s.db.Update(initOffers); err != nil {
		return nil, s.wrap(context.Background(), err)
	}
	return &OfferStore{db: s.db, path: s.path, now: s.now}, nil
}

func initOffers(tx *bolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketOffers); err != nil {
		return err
	}
	_, err := tx.CreateBucketIfNotExists(bucketOfferWork)
	return err
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
	var busy *replay.BusyError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replay.ErrExists), errors.Is(err, replay.ErrNotFound), errors.Is(err, replay.ErrConflict),
		errors.As(err, &busy):
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
		if rec.Open && rec.Work != "" {
			w := tx.Bucket(bucketOfferWork)
			if h := w.Get([]byte(rec.Work)); h != nil {
				return &replay.BusyError{Work: rec.Work, Hop: string(h)}
			}
			if err := w.Put([]byte(rec.Work), []byte(rec.Hop)); err != nil {
				return err
			}
		}
		var err error
		out, err = put(tx, rec)
		return err
	})
	if err != nil {
		return replay.OfferRecord{}, err
	}
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
		now := s.now()
		var expired []replay.OfferRecord
		if err := tx.Bucket(bucketOffers).ForEach(func(k, v []byte) error {
			rec, err := codec.DecodeOffer(v)
			if err == nil && !rec.Live(now) {
				expired = append(expired, rec)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, rec := range expired {
			if err := dropOffer(tx, rec); err != nil {
				return err
			}
		}
		n = len(expired)
		return nil
	})
	return n, err
}
