// Package boltstore is a replay.Store kept in one bbolt file, for a
// receiver or delegate that runs as a single process and must keep what it
// answered across a restart (HC-34 of the draft).
//
// Every Remember, Update, Swap and Release is written in a bbolt write
// transaction, synced to disk before the call returns: a hop acknowledged
// by the store is on disk. Concurrent writers share one transaction and
// one sync (bbolt's Batch, waiting at most Options.MaxBatchDelay for
// others to join), so that many receivers do not pay one sync each. A
// background goroutine deletes expired records in small transactions;
// until it does, they are absent to every method all the same.
//
// The file may be opened by one process at a time; Open fails after a
// second when another holds it. For several replicas sharing one memory,
// use replay/redisstore.
//
// # File layout
//
// The file holds three buckets:
//
//	records  key: uvarint(len(iss)) || iss || hop   value: the record encoding below
//	expiry   key: be64(sec ^ 1<<63) || be32(nsec) || record key   value: empty
//	meta     "version" -> 0x01, "count" -> be64(number of records)
//	issuers  key: iss   value: be64(number of records of iss)
//
// The issuers bucket, added after the first release, is built from the
// records when a file without it is opened.
//
// # Cap
//
// The file holds at most Options.MaxEntries records (DefaultMaxEntries,
// 1<<22, by default), and at most Options.MaxPerIssuer of them for one
// issuer (1/8 of MaxEntries by default), so that one delegator, however
// trusted, cannot fill the store and make it refuse the others' fresh
// offers. Remember returns replay.ErrFull beyond the first and
// replay.ErrIssuerFull beyond the second. In bytes: about 290 per record
// without a status in a file written in key order (BenchmarkReceiveStoreSize
// reports it), up to about twice that for records written in random order,
// which fill bbolt's pages by half; so about 1.2 to 2.4 GiB at the default
// cap, plus each status's octets.
//
// A record value is the encoding of replay/internal/codec: the octet 0x02
// (version); the 32-octet digest; an octet of identity flags (0x01: has a
// token, 0x02: has a creation time); Created as 8 octets of big-endian Unix
// seconds and 4 of nanoseconds; the 16-octet token (zeros without one); a
// flags octet, 0x01 when the record expires, else 0x00; Expires as 8 octets
// of big-endian Unix seconds and 4 of nanoseconds (zero without an expiry);
// the state and the status, each as a uvarint length and that many octets.
// Values of version 0x01 (no token, no creation time), written by earlier
// releases, are still read. A value that does not decode is reported as an
// error, never as an absent record.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/internal/codec"
)

// DefaultMaxEntries is the number of records a store holds when
// Options.MaxEntries is zero.
const DefaultMaxEntries = 1 << 22

// DefaultMaxBatchDelay is the longest a write waits for others to share
// its transaction when Options.MaxBatchDelay is zero.
const DefaultMaxBatchDelay = time.Millisecond

// DefaultReclaimEvery is the interval of the background reclaimer when
// Options.ReclaimEvery is zero.
const DefaultReclaimEvery = time.Minute

const (
	// reclaimBatch is the number of expired records deleted per
	// transaction by the background reclaimer, so that no transaction
	// holds the write lock long.
	reclaimBatch = 256
	// reclaimOnFull is the number of expired records Remember deletes
	// when the store is full.
	reclaimOnFull = 16
	// lockTimeout bounds the wait for another process's file lock.
	lockTimeout = time.Second
	// formatVersion is the version of the file layout.
	formatVersion = 1
)

var (
	bucketRecords = []byte("records")
	bucketExpiry  = []byte("expiry")
	bucketMeta    = []byte("meta")
	bucketIssuers = []byte("issuers")
	metaVersion   = []byte("version")
	metaCount     = []byte("count")
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// MaxEntries bounds the number of records in the file, live or
	// expired and not yet reclaimed. Zero or less means DefaultMaxEntries.
	MaxEntries int
	// MaxPerIssuer bounds the records held for one issuer (Key.Iss). Zero
	// means MaxEntries/replay.DefaultIssuerShare (at least 1); a negative
	// value lets one issuer take every record.
	MaxPerIssuer int
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// MaxBatchDelay is the longest a write waits for concurrent writes to
	// share its transaction and its sync. Zero means DefaultMaxBatchDelay;
	// a negative value writes each alone.
	MaxBatchDelay time.Duration
	// MaxOffers bounds the offer records of Store.Offers in the file (see
	// OfferStore). Zero or less means replay.DefaultMaxOffers.
	MaxOffers int
	// ReclaimEvery is the interval at which expired records are deleted in
	// the background. Zero means DefaultReclaimEvery; a negative value
	// turns the background reclaimer off (expired records are then only
	// reclaimed when the store is full).
	ReclaimEvery time.Duration
}

// Store is a replay.Store kept in a bbolt file. It is safe for concurrent
// use.
type Store struct {
	db        *bolt.DB
	path      string
	max       uint64
	maxIssuer uint64
	now       func() time.Time
	// maxOffers and offerGuard are those of the OfferStores of Offers.
	maxOffers  int
	offerGuard *sweepGuard

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ replay.Store = (*Store)(nil)

// ErrLocked is Open's and OpenOffers' error for a file another open Store
// or OfferStore holds, in this process or another: bbolt locks the file
// for the one that opened it until it is closed. It wraps
// replay.ErrUnavailable.
var ErrLocked = fmt.Errorf("%w: the file is locked by another open store, in this process or another", replay.ErrUnavailable)

// openDB opens the bbolt file at path, waiting at most lockTimeout for
// its lock.
func openDB(path string) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	switch {
	case errors.Is(err, bolt.ErrTimeout):
		return nil, fmt.Errorf("boltstore: open %s: %w (waited %s for its lock; close that store first)", path, ErrLocked, lockTimeout)
	case err != nil:
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return db, nil
}

// Open opens the store in the file at path, creating it if needed, and
// starts the background reclaimer. The caller must Close the store. A file
// that another open store holds is refused with ErrLocked.
func Open(path string, opts Options) (*Store, error) {
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	if err := db.Update(initFile); err != nil {
		db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s := &Store{
		db:         db,
		path:       path,
		now:        opts.Now,
		maxOffers:  opts.MaxOffers,
		offerGuard: &sweepGuard{},
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	switch {
	case opts.MaxBatchDelay < 0:
		db.MaxBatchSize = 1 // each write alone (bbolt runs a batch of one at once)
	case opts.MaxBatchDelay == 0:
		db.MaxBatchDelay = DefaultMaxBatchDelay
	default:
		db.MaxBatchDelay = opts.MaxBatchDelay
	}
	if opts.MaxEntries > 0 {
		s.max = uint64(opts.MaxEntries)
	} else {
		s.max = DefaultMaxEntries
	}
	switch {
	case opts.MaxPerIssuer < 0:
		s.maxIssuer = math.MaxUint64
	case opts.MaxPerIssuer == 0:
		s.maxIssuer = max(s.max/replay.DefaultIssuerShare, 1)
	default:
		s.maxIssuer = uint64(opts.MaxPerIssuer)
	}
	if s.now == nil {
		s.now = time.Now
	}
	every := opts.ReclaimEvery
	if every == 0 {
		every = DefaultReclaimEvery
	}
	if every > 0 {
		go s.reclaimer(every)
	} else {
		close(s.done)
	}
	return s, nil
}

func initFile(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if tx.Bucket(bucketRecords) != nil || tx.Bucket(bucketExpiry) != nil {
			return errors.New("not a replay store: records without meta bucket")
		}
		var err error
		if meta, err = tx.CreateBucket(bucketMeta); err != nil {
			return err
		}
		if err := meta.Put(metaVersion, []byte{formatVersion}); err != nil {
			return err
		}
		if err := putCount(meta, 0); err != nil {
			return err
		}
	}
	if v := meta.Get(metaVersion); len(v) != 1 || v[0] != formatVersion {
		return fmt.Errorf("unsupported file format version %x", v)
	}
	if len(meta.Get(metaCount)) != 8 {
		return errors.New("malformed record count")
	}
	recs, err := tx.CreateBucketIfNotExists(bucketRecords)
	if err != nil {
		return err
	}
	if _, err := tx.CreateBucketIfNotExists(bucketExpiry); err != nil {
		return err
	}
	if tx.Bucket(bucketIssuers) != nil {
		return nil
	}
	// A file of an earlier release: count each issuer's records.
	iss, err := tx.CreateBucket(bucketIssuers)
	if err != nil {
		return err
	}
	return recs.ForEach(func(rk, _ []byte) error {
		return addIssuer(iss, rk, 1)
	})
}

// issuerOf returns the issuer part of a record key.
func issuerOf(rk []byte) ([]byte, bool) {
	n, w := binary.Uvarint(rk)
	if w <= 0 || n > uint64(len(rk)-w) {
		return nil, false
	}
	return rk[w : w+int(n)], true
}

func issuerCount(iss *bolt.Bucket, rk []byte) uint64 {
	name, ok := issuerOf(rk)
	if !ok {
		return 0
	}
	if v := iss.Get(name); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// addIssuer adds delta (1 or -1) to the count of the issuer of rk, and
// drops an issuer whose count reaches zero.
func addIssuer(iss *bolt.Bucket, rk []byte, delta int) error {
	name, ok := issuerOf(rk)
	if !ok {
		return fmt.Errorf("malformed record key %x", rk)
	}
	n := issuerCount(iss, rk)
	switch {
	case delta > 0:
		n++
	case n > 0:
		n--
	}
	if n == 0 {
		return iss.Delete(name)
	}
	return iss.Put(name, binary.BigEndian.AppendUint64(nil, n))
}

// Path returns the path of the store's file.
func (s *Store) Path() string { return s.path }

// Close stops the background reclaimer and closes the file.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Remember implements replay.Store.
func (s *Store) Remember(ctx context.Context, k replay.Key, rec replay.Record) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, &rec); err != nil {
		return replay.Record{}, false, err
	}
	rk := recordKey(k)
	// A retransmission finds its record in a read transaction, without
	// the write lock and the sync of a write transaction.
	var (
		held     replay.Record
		inserted bool
		full     error
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketRecords).Get(rk)
		if v == nil {
			return nil
		}
		old, err := codec.Decode(v)
		if err != nil {
			return fmt.Errorf("record for %q: %w", k, err)
		}
		if old.Live(s.now()) {
			held, inserted = old, replay.Written(old, rec)
		}
		return nil
	})
	switch {
	case err != nil:
		return replay.Record{}, false, s.wrap(ctx, err)
	case held.Digest != nil:
		return held, inserted, nil
	}
	val := codec.Encode(rec)
	err = s.batch(func(tx *bolt.Tx) error {
		held, inserted, full = replay.Record{}, false, nil
		if err := ctx.Err(); err != nil {
			return err
		}
		now := s.now()
		recs, idx, meta := buckets(tx)
		if v := recs.Get(rk); v != nil {
			old, err := codec.Decode(v)
			if err != nil {
				return fmt.Errorf("record for %q: %w", k, err)
			}
			if old.Live(now) {
				held = old
				// The same call, retried, finds its own record.
				inserted = replay.Written(old, rec)
				return nil
			}
			// An expired record is replaced in place.
			if !old.Expires.IsZero() {
				if err := idx.Delete(indexKey(old.Expires, rk)); err != nil {
					return err
				}
			}
		} else {
			n, err := getCount(meta)
			if err != nil {
				return err
			}
			iss := tx.Bucket(bucketIssuers)
			if n >= s.max || issuerCount(iss, rk) >= s.maxIssuer {
				if _, _, err := reclaim(tx, now, reclaimOnFull); err != nil {
					return err
				}
				if n, err = getCount(meta); err != nil {
					return err
				}
			}
			if n >= s.max {
				full = replay.ErrFull
				return nil
			}
			if issuerCount(iss, rk) >= s.maxIssuer {
				full = replay.ErrIssuerFull
				return nil
			}
			if err := putCount(meta, n+1); err != nil {
				return err
			}
			if err := addIssuer(iss, rk, 1); err != nil {
				return err
			}
		}
		if err := recs.Put(rk, val); err != nil {
			return err
		}
		if !rec.Expires.IsZero() {
			if err := idx.Put(indexKey(rec.Expires, rk), nil); err != nil {
				return err
			}
		}
		inserted = true
		return nil
	})
	switch {
	case err != nil:
		return replay.Record{}, false, s.wrap(ctx, err)
	case full != nil:
		return replay.Record{}, false, full
	case held.Digest != nil:
		return held, inserted, nil
	}
	return clone(rec), true, nil
}

// Get implements replay.Store.
func (s *Store) Get(ctx context.Context, k replay.Key) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, nil); err != nil {
		return replay.Record{}, false, err
	}
	var (
		rec replay.Record
		ok  bool
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketRecords).Get(recordKey(k))
		if v == nil {
			return nil
		}
		var err error
		if rec, err = codec.Decode(v); err != nil {
			return fmt.Errorf("record for %q: %w", k, err)
		}
		ok = rec.Live(s.now())
		return nil
	})
	if err != nil {
		return replay.Record{}, false, s.wrap(ctx, err)
	}
	if !ok {
		return replay.Record{}, false, nil
	}
	return rec, true, nil
}

// Update implements replay.Store.
func (s *Store) Update(ctx context.Context, k replay.Key, rec replay.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := codec.Check(k, &rec); err != nil {
		return err
	}
	rk := recordKey(k)
	err := s.batch(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, idx, _ := buckets(tx)
		v := recs.Get(rk)
		if v == nil {
			return replay.ErrNotFound
		}
		old, err := codec.Decode(v)
		if err != nil {
			return fmt.Errorf("record for %q: %w", k, err)
		}
		if !old.Live(s.now()) {
			return replay.ErrNotFound
		}
		if !bytes.Equal(old.Digest, rec.Digest) || (len(rec.Token) > 0 && !bytes.Equal(old.Token, rec.Token)) {
			return replay.ErrConflict
		}
		if !old.Expires.Equal(rec.Expires) {
			if !old.Expires.IsZero() {
				if err := idx.Delete(indexKey(old.Expires, rk)); err != nil {
					return err
				}
			}
			if !rec.Expires.IsZero() {
				if err := idx.Put(indexKey(rec.Expires, rk), nil); err != nil {
					return err
				}
			}
		}
		// Digest, Token and Created stay those of the insert.
		old.Expires, old.State, old.Status = rec.Expires, rec.State, rec.Status
		return recs.Put(rk, codec.Encode(old))
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replay.ErrNotFound), errors.Is(err, replay.ErrConflict):
		return err
	}
	return s.wrap(ctx, err)
}

// Swap implements replay.Store in one write transaction.
func (s *Store) Swap(ctx context.Context, k replay.Key, old, new replay.Record) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, &old); err != nil {
		return replay.Record{}, false, err
	}
	rk := recordKey(k)
	var (
		held    replay.Record
		swapped bool
	)
	err := s.batch(func(tx *bolt.Tx) error {
		held, swapped = replay.Record{}, false
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, idx, _ := buckets(tx)
		v := recs.Get(rk)
		if v == nil {
			return replay.ErrNotFound
		}
		cur, err := codec.Decode(v)
		if err != nil {
			return fmt.Errorf("record for %q: %w", k, err)
		}
		switch {
		case !cur.Live(s.now()):
			return replay.ErrNotFound
		case !bytes.Equal(cur.Digest, old.Digest) || (len(old.Token) > 0 && !bytes.Equal(cur.Token, old.Token)):
			return replay.ErrConflict
		case cur.State == new.State && bytes.Equal(cur.Status, new.Status) && cur.Expires.Equal(new.Expires):
			held, swapped = cur, true // written already
			return nil
		case cur.State != old.State || !bytes.Equal(cur.Status, old.Status):
			held = cur
			return nil
		}
		if !cur.Expires.Equal(new.Expires) {
			if !cur.Expires.IsZero() {
				if err := idx.Delete(indexKey(cur.Expires, rk)); err != nil {
					return err
				}
			}
			if !new.Expires.IsZero() {
				if err := idx.Put(indexKey(new.Expires, rk), nil); err != nil {
					return err
				}
			}
		}
		cur.Expires, cur.State, cur.Status = new.Expires.Round(0), new.State, bytes.Clone(new.Status)
		held, swapped = cur, true
		return recs.Put(rk, codec.Encode(cur))
	})
	switch {
	case err == nil:
		return held, swapped, nil
	case errors.Is(err, replay.ErrNotFound), errors.Is(err, replay.ErrConflict):
		return replay.Record{}, false, err
	}
	return replay.Record{}, false, s.wrap(ctx, err)
}

// Untaken implements replay.Store. It reads every record in one read
// transaction.
func (s *Store) Untaken(ctx context.Context, createdBefore time.Time) ([]replay.Untaken, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []replay.Untaken
	err := s.db.View(func(tx *bolt.Tx) error {
		now := s.now()
		c := tx.Bucket(bucketRecords).Cursor()
		n := 0
		for rk, v := c.First(); rk != nil; rk, v = c.Next() {
			if n++; n%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			rec, err := codec.Decode(v)
			if err != nil {
				return fmt.Errorf("record under %x: %w", rk, err)
			}
			if rec.State != "" || !rec.Live(now) || (!rec.Created.IsZero() && !rec.Created.Before(createdBefore)) {
				continue
			}
			k, ok := parseRecordKey(rk)
			if !ok {
				return fmt.Errorf("malformed record key %x", rk)
			}
			u := replay.Untaken{Key: k, Record: rec}
			if !rec.Created.IsZero() {
				u.Age = now.Sub(rec.Created)
			}
			out = append(out, u)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap(ctx, err)
	}
	replay.SortUntaken(out)
	return out, nil
}

// Release implements replay.Store in one write transaction.
func (s *Store) Release(ctx context.Context, k replay.Key, digest []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := codec.Check(k, &replay.Record{Digest: digest}); err != nil {
		return err
	}
	rk := recordKey(k)
	err := s.batch(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, idx, meta := buckets(tx)
		v := recs.Get(rk)
		if v == nil {
			return replay.ErrNotFound
		}
		old, err := codec.Decode(v)
		switch {
		case err != nil:
			return fmt.Errorf("record for %q: %w", k, err)
		case !old.Live(s.now()):
			return replay.ErrNotFound
		case !bytes.Equal(old.Digest, digest):
			return replay.ErrConflict
		case old.State != "":
			return replay.ErrTaken
		}
		if err := recs.Delete(rk); err != nil {
			return err
		}
		if !old.Expires.IsZero() {
			if err := idx.Delete(indexKey(old.Expires, rk)); err != nil {
				return err
			}
		}
		n, err := getCount(meta)
		if err != nil {
			return err
		}
		if err := addIssuer(tx.Bucket(bucketIssuers), rk, -1); err != nil {
			return err
		}
		return putCount(meta, max(n, 1)-1)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replay.ErrNotFound), errors.Is(err, replay.ErrConflict), errors.Is(err, replay.ErrTaken):
		return err
	}
	return s.wrap(ctx, err)
}

// batch runs fn in a write transaction that concurrent callers share
// (bbolt's Batch): one commit, synced to disk, for all of them, before any
// of them returns, so that every write is durable before it is
// acknowledged. fn may run more than once and sets its results afresh each
// time. A refusal fn returns (replay.ErrNotFound, ErrConflict, ErrTaken),
// before writing anything, is returned to its caller alone, without
// undoing the other callers' writes.
func (s *Store) batch(fn func(tx *bolt.Tx) error) error {
	var refusal error
	err := s.db.Batch(func(tx *bolt.Tx) error {
		refusal = nil
		err := fn(tx)
		if errors.Is(err, replay.ErrNotFound) || errors.Is(err, replay.ErrConflict) || errors.Is(err, replay.ErrTaken) {
			refusal = err
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return refusal
}

// wrap annotates an error from a transaction. Context errors pass as they
// are; an error from a store that has been closed wraps
// replay.ErrUnavailable.
func (s *Store) wrap(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return err
	}
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("boltstore: %w: %w", replay.ErrUnavailable, err)
	}
	return fmt.Errorf("boltstore: %w", err)
}

// reclaimer deletes expired records every interval until Close.
func (s *Store) reclaimer(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for {
			var more bool
			err := s.db.Update(func(tx *bolt.Tx) error {
				var err error
				_, more, err = reclaim(tx, s.now(), reclaimBatch)
				return err
			})
			if err != nil || !more {
				break
			}
			select {
			case <-s.stop:
				return
			default:
			}
		}
	}
}

// Reclaim deletes every expired record now, in transactions of a few
// hundred records, and returns how many it deleted. The background
// reclaimer does the same on its interval.
func (s *Store) Reclaim(ctx context.Context) (int, error) {
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var (
			freed uint64
			more  bool
		)
		err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			freed, more, err = reclaim(tx, s.now(), reclaimBatch)
			return err
		})
		if err != nil {
			return total, s.wrap(ctx, err)
		}
		total += int(freed)
		if !more {
			return total, nil
		}
	}
}

// reclaim deletes up to limit expired records, earliest first, and
// reports how many records it deleted and whether more may be expired.
func reclaim(tx *bolt.Tx, now time.Time, limit int) (freed uint64, more bool, err error) {
	recs, idx, meta := buckets(tx)
	var keys [][]byte
	c := idx.Cursor()
	for ik, _ := c.First(); ik != nil; ik, _ = c.Next() {
		if len(keys) == limit {
			more = true
			break
		}
		exp, ok := indexTime(ik)
		if ok && now.Before(exp) {
			break
		}
		keys = append(keys, ik)
	}
	for _, ik := range keys {
		exp, ok := indexTime(ik)
		if ok {
			rk := ik[12:]
			if v := recs.Get(rk); v != nil {
				old, err := codec.Decode(v)
				// A record that does not decode is left for Get to
				// report; one whose expiry moved has another index
				// entry.
				if err == nil && old.Expires.Equal(exp) && !old.Live(now) {
					if err := recs.Delete(rk); err != nil {
						return freed, false, err
					}
					if err := addIssuer(tx.Bucket(bucketIssuers), rk, -1); err != nil {
						return freed, false, err
					}
					freed++
				}
			}
		}
		if err := idx.Delete(ik); err != nil {
			return freed, false, err
		}
	}
	if freed > 0 {
		n, err := getCount(meta)
		if err != nil {
			return 0, false, err
		}
		if freed > n {
			n = freed // a count that lags cannot go below zero
		}
		if err := putCount(meta, n-freed); err != nil {
			return 0, false, err
		}
	}
	return freed, more, nil
}

func buckets(tx *bolt.Tx) (recs, idx, meta *bolt.Bucket) {
	return tx.Bucket(bucketRecords), tx.Bucket(bucketExpiry), tx.Bucket(bucketMeta)
}

func getCount(meta *bolt.Bucket) (uint64, error) {
	v := meta.Get(metaCount)
	if len(v) != 8 {
		return 0, errors.New("malformed record count")
	}
	return binary.BigEndian.Uint64(v), nil
}

func putCount(meta *bolt.Bucket, n uint64) error {
	return meta.Put(metaCount, binary.BigEndian.AppendUint64(nil, n))
}

// recordKey is uvarint(len(iss)) || iss || hop.
func recordKey(k replay.Key) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(k.Iss)+len(k.Hop))
	b = binary.AppendUvarint(b, uint64(len(k.Iss)))
	b = append(b, k.Iss...)
	return append(b, k.Hop...)
}

// parseRecordKey is the inverse of recordKey.
func parseRecordKey(rk []byte) (replay.Key, bool) {
	n, w := binary.Uvarint(rk)
	if w <= 0 || n > uint64(len(rk)-w) {
		return replay.Key{}, false
	}
	return replay.Key{Iss: string(rk[w : w+int(n)]), Hop: string(rk[w+int(n):])}, true
}

// indexKey orders records by expiry: the Unix seconds with the sign bit
// flipped so that big-endian order is time order, then the nanoseconds.
func indexKey(exp time.Time, rk []byte) []byte {
	b := make([]byte, 12, 12+len(rk))
	binary.BigEndian.PutUint64(b, uint64(exp.Unix())^1<<63)
	binary.BigEndian.PutUint32(b[8:], uint32(exp.Nanosecond()))
	return append(b, rk...)
}

func indexTime(ik []byte) (time.Time, bool) {
	if len(ik) < 12 {
		return time.Time{}, false
	}
	sec := int64(binary.BigEndian.Uint64(ik) ^ 1<<63)
	nsec := binary.BigEndian.Uint32(ik[8:])
	if nsec >= 1e9 {
		return time.Time{}, false
	}
	return time.Unix(sec, int64(nsec)), true
}

func clone(r replay.Record) replay.Record {
	r.Digest = bytes.Clone(r.Digest)
	r.Token = bytes.Clone(r.Token)
	r.Status = bytes.Clone(r.Status)
	r.Created = r.Created.Round(0)
	r.Expires = r.Expires.Round(0)
	return r
}
