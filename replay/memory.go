package replay

import (
	"context"
	"hash/maphash"
	"math"
	"slices"
	"strings"
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
	m  map[Key]memRecord
	_  [48]byte // keep shards on separate cache lines
}

// memRecord is a Record held inline, so that inserting one copies the
// caller's digest and token without allocating.
type memRecord struct {
	digest   [32]byte
	token    [TokenSize]byte
	hasToken bool
	created  time.Time
	expires  time.Time
	state    string
	status   []byte // owned by the store; replaced, never written in place
}

func (m *memRecord) live(now time.Time) bool {
	return m.expires.IsZero() || now.Before(m.expires)
}

// set copies rec into m. rec has been validated.
func (m *memRecord) set(rec Record) {
	copy(m.digest[:], rec.Digest)
	m.hasToken = len(rec.Token) == TokenSize
	if m.hasToken {
		copy(m.token[:], rec.Token)
	} else {
		m.token = [TokenSize]byte{}
	}
	m.created = rec.Created.Round(0)
	m.expires = rec.Expires.Round(0)
	m.state = rec.State
	m.status = cloneBytes(rec.Status)
}

// record returns a Record that shares nothing with m.
func (m *memRecord) record() Record {
	// One allocation holds the digest and the token, each capped so that
	// appending to one cannot write over the other.
	buf := make([]byte, 32+TokenSize)
	copy(buf, m.digest[:])
	r := Record{
		Digest:  buf[:32:32],
		Created: m.created,
		Expires: m.expires,
		State:   m.state,
		Status:  cloneBytes(m.status),
	}
	if m.hasToken {
		copy(buf[32:], m.token[:])
		r.Token = buf[32 : 32+TokenSize : 32+TokenSize]
	}
	return r
}

// written reports whether m carries rec's token and digest.
func (m *memRecord) written(rec Record) bool {
	return m.hasToken && len(rec.Token) == TokenSize &&
		[TokenSize]byte(rec.Token) == m.token && [32]byte(rec.Digest) == m.digest
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
		s.shards[i].m = make(map[Key]memRecord)
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

// Remember implements Store. Inserting a record copies its Digest, Token
// and Status; the record returned on insertion is rec itself, with
// Expires and Created stripped of monotonic readings, so the call does not
// allocate beyond the map's growth and a copy of a non-empty Status.
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
	rec.Created = rec.Created.Round(0)
	rec.Expires = rec.Expires.Round(0)
	sh := s.shard(k)
	for attempt := 0; ; attempt++ {
		sh.mu.Lock()
		held, ok := sh.m[k]
		if ok && held.live(s.now()) {
			sh.mu.Unlock()
			// The same call, retried, finds its own record.
			return held.record(), held.written(rec), nil
		}
		// An expired record under k is replaced in place; otherwise a
		// slot must be reserved.
		if ok || s.reserve() {
			var m memRecord
			m.set(rec)
			sh.m[k] = m
			sh.mu.Unlock()
			s.noteExpiry(rec.Expires)
			return rec, true, nil
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
	if !held.live(s.now()) {
		delete(sh.m, k)
		s.count.Add(-1)
		return Record{}, false, nil
	}
	return held.record(), true, nil
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
	if !held.live(s.now()) {
		delete(sh.m, k)
		s.count.Add(-1)
		return ErrNotFound
	}
	if [32]byte(rec.Digest) != held.digest {
		return ErrConflict
	}
	if len(rec.Token) == TokenSize && (!held.hasToken || [TokenSize]byte(rec.Token) != held.token) {
		return ErrConflict
	}
	held.expires = rec.Expires.Round(0)
	held.state = rec.State
	held.status = cloneBytes(rec.Status)
	sh.m[k] = held
	s.noteExpiry(held.expires)
	return nil
}

// Untaken implements Store.
func (s *Memory) Untaken(ctx context.Context, createdBefore time.Time) ([]Untaken, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now()
	var out []Untaken
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, m := range sh.m {
			if m.state == "" && m.live(now) && (m.created.IsZero() || m.created.Before(createdBefore)) {
				out = append(out, Untaken{Key: k, Record: m.record(), Age: age(now, m.created)})
			}
		}
		sh.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	SortUntaken(out)
	return out, nil
}

// Release implements Store.
func (s *Memory) Release(ctx context.Context, k Key, digest []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validKey(k); err != nil {
		return err
	}
	if len(digest) != 32 {
		return ErrInvalid
	}
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held, ok := sh.m[k]
	switch {
	case !ok:
		return ErrNotFound
	case !held.live(s.now()):
		delete(sh.m, k)
		s.count.Add(-1)
		return ErrNotFound
	case [32]byte(digest) != held.digest:
		return ErrConflict
	case held.state != "":
		return ErrTaken
	}
	delete(sh.m, k)
	s.count.Add(-1)
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
			if !r.live(now) {
				delete(sh.m, k)
				s.count.Add(-1)
			} else {
				s.noteExpiry(r.expires)
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
	if len(r.Digest) != 32 || (len(r.Token) != 0 && len(r.Token) != TokenSize) {
		return ErrInvalid
	}
	return nil
}

// age is now - created, or 0 for an unknown creation time.
func age(now, created time.Time) time.Duration {
	if created.IsZero() {
		return 0
	}
	return now.Sub(created)
}

// SortUntaken orders u oldest first: by Created (zero first), then by Key.
// Stores use it to return Untaken in the documented order.
func SortUntaken(u []Untaken) {
	slices.SortFunc(u, func(a, b Untaken) int {
		if c := a.Record.Created.Compare(b.Record.Created); c != 0 {
			return c
		}
		if c := strings.Compare(a.Key.Iss, b.Key.Iss); c != 0 {
			return c
		}
		return strings.Compare(a.Key.Hop, b.Key.Hop)
	})
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
