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

// DefaultIssuerShare is the fraction of a store's records that one issuer
// may hold when the options leave its share zero: 1/DefaultIssuerShare.
const DefaultIssuerShare = 8

const memoryShards = 64

// MemoryOptions configures a Memory store. The zero value is usable.
type MemoryOptions struct {
	// MaxEntries bounds the number of records held, live or expired and not
	// yet reclaimed. Zero or less means DefaultMaxEntries.
	MaxEntries int
	// MaxPerIssuer bounds the records held for one issuer (Key.Iss), so
	// that one delegator, however trusted, cannot fill the store and make
	// it refuse the fresh offers of the others. Zero means
	// MaxEntries/DefaultIssuerShare (at least 1); a negative value lets one
	// issuer take every record.
	MaxPerIssuer int
	// Now returns the current time; nil means time.Now. The store calls it
	// holding none of its locks, so it may call back into the store.
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
// store is full or an issuer's share is used; a live record is never
// evicted.
//
// # Cap
//
// The store holds at most MaxEntries records (DefaultMaxEntries, 1<<20, by
// default), and at most MaxPerIssuer of them for one issuer (1/8 of
// MaxEntries by default). Remember returns ErrFull beyond the first and
// ErrIssuerFull (which wraps ErrFull) beyond the second. BENCHMARKS.md
// gives the measured bytes per record.
type Memory struct {
	max       int64
	maxIssuer int64 // records per issuer; math.MaxInt64 for no share
	now       func() time.Time
	seed      maphash.Seed
	count     atomic.Int64 // records held, live or not
	shards    [memoryShards]memoryShard
	issuers   [memoryShards]issuerShard

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

// issuerShard counts the records of the issuers that hash to it. Each
// issuer's entry also holds the one copy of its name that the records'
// keys share (interning), and is dropped when its count reaches zero.
type issuerShard struct {
	mu sync.Mutex
	m  map[string]*issuer
	_  [48]byte
}

type issuer struct {
	name string
	n    int64
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
	switch {
	case opts.MaxPerIssuer < 0:
		s.maxIssuer = math.MaxInt64
	case opts.MaxPerIssuer == 0:
		s.maxIssuer = max(s.max/DefaultIssuerShare, 1)
	default:
		s.maxIssuer = int64(opts.MaxPerIssuer)
	}
	if s.now == nil {
		s.now = time.Now
	}
	for i := range s.shards {
		s.shards[i].m = make(map[Key]memRecord)
		s.issuers[i].m = make(map[string]*issuer)
	}
	s.nextExpiry.Store(math.MaxInt64)
	return s
}

func (s *Memory) issuerShard(iss string) *issuerShard {
	return &s.issuers[maphash.String(s.seed, iss)%memoryShards]
}

// take counts one more record for iss unless its share is used, and
// returns the interned copy of iss for the record's key.
func (s *Memory) take(iss string) (string, bool) {
	sh := s.issuerShard(iss)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[iss]
	if e == nil {
		e = &issuer{name: strings.Clone(iss)}
		sh.m[e.name] = e
	}
	if e.n >= s.maxIssuer {
		return "", false
	}
	e.n++
	return e.name, true
}

// untake counts one record fewer for iss.
func (s *Memory) untake(iss string) {
	sh := s.issuerShard(iss)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[iss]; e != nil {
		if e.n--; e.n <= 0 {
			delete(sh.m, iss)
		}
	}
}

// drop deletes the record held for k. sh.mu is held.
func (s *Memory) drop(sh *memoryShard, k Key) {
	delete(sh.m, k)
	s.count.Add(-1)
	s.untake(k.Iss)
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
		now := s.now() // never under a lock: the clock may call the store
		sh.mu.Lock()
		held, ok := sh.m[k]
		if ok && held.live(now) {
			sh.mu.Unlock()
			// The same call, retried, finds its own record.
			return held.record(), held.written(rec), nil
		}
		if ok {
			// An expired record under k is replaced in place; it was
			// counted for the same issuer.
			var m memRecord
			m.set(rec)
			sh.m[k] = m
			sh.mu.Unlock()
			s.noteExpiry(rec.Expires)
			return rec, true, nil
		}
		iss, shared := s.take(k.Iss)
		if shared && s.reserve() {
			var m memRecord
			m.set(rec)
			sh.m[Key{Iss: iss, Hop: strings.Clone(k.Hop)}] = m
			sh.mu.Unlock()
			s.noteExpiry(rec.Expires)
			return rec, true, nil
		}
		sh.mu.Unlock()
		if shared {
			s.untake(k.Iss)
		}
		if attempt > 0 || !s.sweep(now) {
			if !shared {
				return Record{}, false, ErrIssuerFull
			}
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
	now := s.now()
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held, ok := sh.m[k]
	if !ok {
		return Record{}, false, nil
	}
	if !held.live(now) {
		s.drop(sh, k)
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
	now := s.now()
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held, ok := sh.m[k]
	if !ok {
		return ErrNotFound
	}
	if !held.live(now) {
		s.drop(sh, k)
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

// Swap implements Store.
func (s *Memory) Swap(ctx context.Context, k Key, old, new Record) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, err
	}
	if err := validKey(k); err != nil {
		return Record{}, false, err
	}
	if err := validRecord(old); err != nil {
		return Record{}, false, err
	}
	now := s.now()
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held, ok := sh.m[k]
	if !ok {
		return Record{}, false, ErrNotFound
	}
	if !held.live(now) {
		s.drop(sh, k)
		return Record{}, false, ErrNotFound
	}
	if [32]byte(old.Digest) != held.digest ||
		(len(old.Token) == TokenSize && (!held.hasToken || [TokenSize]byte(old.Token) != held.token)) {
		return Record{}, false, ErrConflict
	}
	switch {
	case held.state == new.State && string(held.status) == string(new.Status) && held.expires.Equal(new.Expires):
		// Written already: by an earlier attempt of this call, or old
		// was new.
	case held.state == old.State && string(held.status) == string(old.Status):
		held.expires = new.Expires.Round(0)
		held.state = new.State
		held.status = cloneBytes(new.Status)
		sh.m[k] = held
		s.noteExpiry(held.expires)
	default:
		return held.record(), false, nil
	}
	return held.record(), true, nil
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
	now := s.now()
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held, ok := sh.m[k]
	switch {
	case !ok:
		return ErrNotFound
	case !held.live(now):
		s.drop(sh, k)
		return ErrNotFound
	case [32]byte(digest) != held.digest:
		return ErrConflict
	case held.state != "":
		return ErrTaken
	}
	s.drop(sh, k)
	return nil
}

// Close implements Store. It drops every record.
func (s *Memory) Close() error {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k := range sh.m {
			s.drop(sh, k)
		}
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

// sweep removes every expired record by the time now, unless the clock
// shows none can have expired since the last sweep. It reports whether
// there may be room now.
func (s *Memory) sweep(now time.Time) bool {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
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
				s.drop(sh, k)
			} else {
				s.noteExpiry(r.expires)
			}
		}
		sh.mu.Unlock()
	}
	return true
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
