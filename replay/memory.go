package replay

import (
	"bytes"
	"context"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxEntries is the number of records a Memory store holds when
// MemoryOptions.MaxEntries is zero.
const DefaultMaxEntries = 1 << 20

const memoryShards = 64

// MemoryOptions configures a Memory store. The zero value is usable.
type MemoryOptions struct {
	// MaxEntries bounds the number of records held, live or expired and not
	// yet reclaimed. Zero or less means DefaultMaxEntries.
	MaxEntries int
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Memory is a Store that keeps records in the memory of one process. It is
// safe for concurrent use.
//
// Its records are lost when the process ends: a receiver that uses it after
// a restart has forgotten every hop it saw and must apply the rule of HC-59
// (reject offers issued before the restart until the maximum lifetime has
// passed). A delegate that must keep its answers across a restart (HC-34)
// needs a durable store such as replay/boltstore.
//
// Expired records are reclaimed when touched, and all at once when the
// store is full; a live record is never evicted.
type Memory struct {
	max    int64
	now    func() time.Time
	seed   maphash.Seed
	count  atomic.Int64 // records held, live or not
	shards [memoryShards]memoryShard

	// sweepMu serialises the full-store path. nextExpiry is a lower bound
	// on the Expires (UnixNano) of every held record with an expiry, or
	// math.MaxInt64 when none is known; when the clock has not reached it,
	// a sweep cannot free anything and is skipped.
	sweepMu    sync.Mutex
	nextExpiry atomic.Int64
}

type memoryShard struct {
	mu sync.Mutex
	m  map[Key]Record
	_  [48]byte // keep shards on separate cache lines
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory(opts MemoryOptions) *Memory {
	s := &Memory{
		max:  int64(opts.MaxEntries),
		now:  opts.Now,
		seed: maphash.MakeSeed(),
	}
	if s.max <= 0 {
		s.max = DefaultMaxEntries
	}
	if s.now == nil {
		s.now = time.Now
	}
	for i := range s.shards {
		s.shards[i].m = make(map[Key]Record)
	}
	s.nextExpiry.Store(math.MaxInt64)
	return s
}

func (s *Memory) shard(k Key) *memoryShard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.Iss)
	h.WriteByte(0)
	h.WriteString(k.Hop)
	return &s.shards[h.Sum64()%memoryShards]
}

// Remember implements Store.
func (s *Memory) Remember(ctx context.Context, k Key, rec Record) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, err
	}
	if err := validKey(k); err != nil {
		return Record{}, false, err
	}
	if err := validRecord(rec); err != nil {
		return Record{}, false, err
	}
	rec = cloneRecord(rec)
	sh := s.shard(k)
	for attempt := 0; ; attempt++ {
		sh.mu.Lock()
		held, ok := sh.m[k]
		if ok && held.Live(s.now()) {
			sh.mu.Unlock()
			return cloneRecord(held), false, nil
		}
		// An expired record under k is replaced in place; otherwise a
		// slot must be reserved.
		if ok || s.reserve() {
			sh.m[k] = rec
			sh.mu.Unlock()
			s.noteExpiry(rec.Expires)
			return cloneRecord(rec), true, nil
		}
		sh.mu.Unlock()
		if attempt > 0 || !s.sweep() {
			return Record{}, false, ErrFull
		}
	}
}

// Get implements Store.
func (s *Memory) Get(ctx context.Context, k Key) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, err
	}
	if err := validKey(k); err != nil {
		return Record{}, false, err
	}
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held, ok := sh.m[k]
	if !ok {
		return Record{}, false, nil
	}
	if !held.Live(s.now()) {
		delete(sh.m, k)
		s.count.Add(-1)
		return Record{}, false, nil
	}
	return cloneRecord(held), true, nil
}

// Update implements Store.
func (s *Memory) Update(ctx context.Context, k Key, rec Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validKey(k); err != nil {
		return err
	}
	if err := validRecord(rec); err != nil {
		return err
	}
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held, ok := sh.m[k]
	if !ok {
		return ErrNotFound
	}
	if !held.Live(s.now()) {
		delete(sh.m, k)
		s.count.Add(-1)
		return ErrNotFound
	}
	if !bytes.Equal(held.Digest, rec.Digest) {
		return ErrConflict
	}
	held.Expires = rec.Expires.Round(0)
	held.State = rec.State
	held.Status = cloneBytes(rec.Status)
	sh.m[k] = held
	s.noteExpiry(held.Expires)
	return nil
}

// Close implements Store. It drops every record.
func (s *Memory) Close() error {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.count.Add(-int64(len(sh.m)))
		clear(sh.m)
		sh.mu.Unlock()
	}
	return nil
}

// reserve takes one slot if the store is not full.
func (s *Memory) reserve() bool {
	for {
		n := s.count.Load()
		if n >= s.max {
			return false
		}
		if s.count.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// noteExpiry lowers nextExpiry to t when t is earlier.
func (s *Memory) noteExpiry(t time.Time) {
	if t.IsZero() {
		return
	}
	n := unixNanoClamped(t)
	for {
		cur := s.nextExpiry.Load()
		if n >= cur || s.nextExpiry.CompareAndSwap(cur, n) {
			return
		}
	}
}

// sweep removes every expired record, unless the clock shows none can have
// expired since the last sweep. It reports whether there may be room now.
func (s *Memory) sweep() bool {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	if s.count.Load() < s.max {
		return true // another caller made room meanwhile
	}
	now := s.now()
	if unixNanoClamped(now) < s.nextExpiry.Load() {
		return false
	}
	// Records noted from here on lower nextExpiry themselves; the ones
	// seen below contribute their expiry as they are kept.
	s.nextExpiry.Store(math.MaxInt64)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, r := range sh.m {
			if !r.Live(now) {
				delete(sh.m, k)
				s.count.Add(-1)
			} else {
				s.noteExpiry(r.Expires)
			}
		}
		sh.mu.Unlock()
	}
	return s.count.Load() < s.max
}

func unixNanoClamped(t time.Time) int64 {
	// UnixNano is undefined outside about 1678 to 2262; clamp instead.
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64-1)):
		return math.MaxInt64 - 1
	}
	return t.UnixNano()
}

func validKey(k Key) error {
	if k.Iss == "" || k.Hop == "" {
		return ErrInvalid
	}
	return nil
}

func validRecord(r Record) error {
	if len(r.Digest) != 32 {
		return ErrInvalid
	}
	return nil
}

func cloneRecord(r Record) Record {
	r.Digest = cloneBytes(r.Digest)
	r.Status = cloneBytes(r.Status)
	r.Expires = r.Expires.Round(0)
	return r
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
