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

const (
	memoryShards = 64
	// chunkSize is the number of record slots allocated at once.
	chunkSize = 512
	// inlineHop is the longest hop identifier kept in the record's slot;
	// a longer one is kept beside it. Hop identifiers made by
	// handoff.NewHopID have 22 characters.
	inlineHop = 29
)

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
// # Cap and layout
//
// The store holds at most MaxEntries records (DefaultMaxEntries, 1<<20, by
// default), and at most MaxPerIssuer of them for one issuer (1/8 of
// MaxEntries by default). Remember returns ErrFull beyond the first and
// ErrIssuerFull (which wraps ErrFull) beyond the second. In bytes: about
// 150 per record without a status at 1<<20 records, so about 150 MiB for
// a full store at the default cap, plus each status's octets.
//
// A record without a status is one fixed-size slot without pointers (the
// digest, the token, the times in Unix nanoseconds, the issuer as a number
// and the hop inline), in chunks of slots indexed by a map from a hash of
// the key, also without pointers: the garbage collector does not scan
// them, so that a full store costs a receive what an empty one does. The
// issuer's name is kept once per shard. What does not fit a slot (a
// status, a state other than the draft's, a hop of more than 29 octets, a
// time outside 1678 to 2262) is kept beside it. BENCHMARKS.md gives the
// measured bytes per record.
type Memory struct {
	max       int64
	maxIssuer int64 // records per issuer; math.MaxInt64 for no share
	now       func() time.Time
	seed      maphash.Seed
	count     atomic.Int64 // records held, live or not
	shards    [memoryShards]memoryShard
	issuers   [memoryShards]issuerShard

	// sweepMu serialises the full-store path. nextExpiry is a lower bound
	// on the expiry (UnixNano, clamped) of every held record with an
	// expiry, or math.MaxInt64 when none is known; when the clock has not
	// reached it, a sweep cannot free anything and is skipped.
	sweepMu    sync.Mutex
	nextExpiry atomic.Int64
}

type memoryShard struct {
	mu     sync.Mutex
	index  map[uint64]uint32 // key hash -> 1 + slot of the first record of its chain
	chunks [][]memSlot
	free   []uint32 // slots to reuse
	used   uint32   // slots handed out from the chunks
	ext    map[uint32]*memExt
	// The shard's issuers: a record names its issuer by number.
	issID   map[string]uint32
	issName []string
	issRefs []uint32
	issFree []uint32
	_       [40]byte // keep shards on separate cache lines
}

// memSlot is one record, without pointers.
type memSlot struct {
	digest  [32]byte
	token   [TokenSize]byte
	created int64 // UnixNano, clamped; exact in ext when slotTimeExt
	expires int64
	next    uint32 // 1 + slot of the next record of the hash chain, or 0
	iss     uint32
	flags   uint8
	state   uint8 // index in memStates, or stateExt
	hopLen  uint8 // or hopExt
	hop     [inlineHop]byte
}

// memExt is what a record holds beyond its slot.
type memExt struct {
	state            string
	status           []byte // owned by the store; replaced, never written in place
	hop              string
	created, expires time.Time // exact, when slotTimeExt
}

const (
	slotUsed = 1 << iota
	slotToken
	slotCreated
	slotExpires
	slotExt
	slotTimeExt // created or expires is outside UnixNano's range

	stateExt = 255
	hopExt   = 255
)

// memStates are the states a slot names by number.
var memStates = [...]string{"", "accepted", "rejected", "completed", "failed", "canceled"}

// issuerShard counts the records of the issuers that hash to it, across
// the store, for their shares; an issuer's entry is dropped when its count
// reaches zero.
type issuerShard struct {
	mu sync.Mutex
	m  map[string]*issuer
	_  [48]byte
}

type issuer struct{ n int64 }

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
		sh := &s.shards[i]
		sh.index = make(map[uint64]uint32)
		sh.ext = make(map[uint32]*memExt)
		sh.issID = make(map[string]uint32)
		s.issuers[i].m = make(map[string]*issuer)
	}
	s.nextExpiry.Store(math.MaxInt64)
	return s
}

func (s *Memory) hash(k Key) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.Iss)
	h.WriteByte(0)
	h.WriteString(k.Hop)
	return h.Sum64()
}

func (s *Memory) shard(h uint64) *memoryShard { return &s.shards[h%memoryShards] }

// ---- The shard's slots. sh.mu is held by every caller. ----

func (sh *memoryShard) slot(i uint32) *memSlot { return &sh.chunks[i/chunkSize][i%chunkSize] }

// find returns the slot of the record held for k, whose hash is h.
func (sh *memoryShard) find(k Key, h uint64) (uint32, bool) {
	id, ok := sh.issID[k.Iss]
	if !ok {
		return 0, false
	}
	for n := sh.index[h]; n != 0; {
		sl := sh.slot(n - 1)
		if sl.iss == id && sh.hopIs(n-1, sl, k.Hop) {
			return n - 1, true
		}
		n = sl.next
	}
	return 0, false
}

func (sh *memoryShard) hopIs(i uint32, sl *memSlot, hop string) bool {
	if sl.hopLen == hopExt {
		return sh.ext[i].hop == hop
	}
	return string(sl.hop[:sl.hopLen]) == hop
}

func (sh *memoryShard) key(i uint32, sl *memSlot) Key {
	k := Key{Iss: sh.issName[sl.iss]}
	if sl.hopLen == hopExt {
		k.Hop = sh.ext[i].hop
	} else {
		k.Hop = string(sl.hop[:sl.hopLen])
	}
	return k
}

// alloc returns a free slot.
func (sh *memoryShard) alloc() uint32 {
	if n := len(sh.free); n > 0 {
		i := sh.free[n-1]
		sh.free = sh.free[:n-1]
		return i
	}
	if int(sh.used/chunkSize) == len(sh.chunks) {
		sh.chunks = append(sh.chunks, make([]memSlot, chunkSize))
	}
	sh.used++
	return sh.used - 1
}

// issuerID returns the shard's number for iss, counting one more record.
func (sh *memoryShard) issuerID(iss string) uint32 {
	id, ok := sh.issID[iss]
	if !ok {
		name := strings.Clone(iss)
		if n := len(sh.issFree); n > 0 {
			id = sh.issFree[n-1]
			sh.issFree = sh.issFree[:n-1]
			sh.issName[id] = name
		} else {
			id = uint32(len(sh.issName))
			sh.issName = append(sh.issName, name)
			sh.issRefs = append(sh.issRefs, 0)
		}
		sh.issID[name] = id
	}
	sh.issRefs[id]++
	return id
}

// insert writes rec as a new record for k, whose hash is h, and returns
// its slot. rec has been validated.
func (sh *memoryShard) insert(k Key, h uint64, rec Record) uint32 {
	i := sh.alloc()
	sl := sh.slot(i)
	*sl = memSlot{flags: slotUsed, iss: sh.issuerID(k.Iss)}
	copy(sl.digest[:], rec.Digest)
	if len(rec.Token) == TokenSize {
		sl.flags |= slotToken
		copy(sl.token[:], rec.Token)
	}
	if len(k.Hop) <= inlineHop {
		sl.hopLen = uint8(len(k.Hop))
		copy(sl.hop[:], k.Hop)
	} else {
		sl.hopLen = hopExt
		sh.extOf(i, sl).hop = strings.Clone(k.Hop)
	}
	if !rec.Created.IsZero() {
		sl.flags |= slotCreated
		sl.created = sh.putTime(i, sl, rec.Created, true)
	}
	sh.write(i, sl, rec)
	sl.next = sh.index[h]
	sh.index[h] = i + 1
	return i
}

// write sets the State, Status and Expires of slot i from rec.
func (sh *memoryShard) write(i uint32, sl *memSlot, rec Record) {
	var e *memExt
	if sl.flags&slotExt != 0 {
		e = sh.ext[i]
		e.state, e.status, e.expires = "", nil, time.Time{}
	}
	sl.state = stateExt
	for n, st := range memStates {
		if st == rec.State {
			sl.state = uint8(n)
		}
	}
	if sl.state == stateExt {
		sh.extOf(i, sl).state = strings.Clone(rec.State)
	}
	if rec.Status != nil {
		sh.extOf(i, sl).status = cloneBytes(rec.Status)
	}
	sl.flags &^= slotExpires
	sl.expires = 0
	if !rec.Expires.IsZero() {
		sl.flags |= slotExpires
		sl.expires = sh.putTime(i, sl, rec.Expires, false)
	}
	if e != nil && e.hop == "" && e.state == "" && e.status == nil && sl.flags&slotTimeExt == 0 {
		delete(sh.ext, i)
		sl.flags &^= slotExt
	}
}

// putTime returns t in Unix nanoseconds, clamped, and keeps t itself
// beside the slot when it is outside their range.
func (sh *memoryShard) putTime(i uint32, sl *memSlot, t time.Time, created bool) int64 {
	t = t.Round(0)
	n := unixNanoClamped(t)
	if time.Unix(0, n).Equal(t) {
		return n
	}
	sl.flags |= slotTimeExt
	e := sh.extOf(i, sl)
	if created {
		e.created = t
	} else {
		e.expires = t
	}
	return n
}

func (sh *memoryShard) extOf(i uint32, sl *memSlot) *memExt {
	if sl.flags&slotExt != 0 {
		return sh.ext[i]
	}
	sl.flags |= slotExt
	e := new(memExt)
	sh.ext[i] = e
	return e
}

func (sh *memoryShard) times(i uint32, sl *memSlot) (created, expires time.Time) {
	var e *memExt
	if sl.flags&slotTimeExt != 0 {
		e = sh.ext[i]
	}
	if sl.flags&slotCreated != 0 {
		if e != nil && !e.created.IsZero() {
			created = e.created
		} else {
			created = time.Unix(0, sl.created)
		}
	}
	if sl.flags&slotExpires != 0 {
		if e != nil && !e.expires.IsZero() {
			expires = e.expires
		} else {
			expires = time.Unix(0, sl.expires)
		}
	}
	return created, expires
}

// live reports whether the record of slot i is to be kept at time now,
// whose clamped Unix nanoseconds are nowN.
func (sh *memoryShard) live(i uint32, sl *memSlot, now time.Time, nowN int64) bool {
	switch {
	case sl.flags&slotExpires == 0:
		return true
	case sl.flags&slotTimeExt != 0:
		if e := sh.ext[i]; !e.expires.IsZero() {
			return now.Before(e.expires)
		}
	}
	return nowN < sl.expires
}

func (sh *memoryShard) state(i uint32, sl *memSlot) string {
	if sl.state == stateExt {
		return sh.ext[i].state
	}
	return memStates[sl.state]
}

func (sh *memoryShard) status(i uint32, sl *memSlot) []byte {
	if sl.flags&slotExt == 0 {
		return nil
	}
	return sh.ext[i].status
}

// record returns the record of slot i, sharing nothing with the store.
func (sh *memoryShard) record(i uint32, sl *memSlot) Record {
	// One allocation holds the digest and the token, each capped so that
	// appending to one cannot write over the other.
	buf := make([]byte, 32+TokenSize)
	copy(buf, sl.digest[:])
	r := Record{Digest: buf[:32:32], State: sh.state(i, sl), Status: cloneBytes(sh.status(i, sl))}
	r.Created, r.Expires = sh.times(i, sl)
	if sl.flags&slotToken != 0 {
		copy(buf[32:], sl.token[:])
		r.Token = buf[32 : 32+TokenSize : 32+TokenSize]
	}
	return r
}

// written reports whether slot i carries rec's token and digest.
func (sl *memSlot) written(rec Record) bool {
	return sl.flags&slotToken != 0 && len(rec.Token) == TokenSize &&
		[TokenSize]byte(rec.Token) == sl.token && [32]byte(rec.Digest) == sl.digest
}

// identity reports whether slot i holds digest and, when token is not
// empty, token.
func (sl *memSlot) identity(digest, token []byte) bool {
	return [32]byte(digest) == sl.digest &&
		(len(token) != TokenSize || (sl.flags&slotToken != 0 && [TokenSize]byte(token) == sl.token))
}

// remove deletes the record of slot i, whose key's hash is h.
func (sh *memoryShard) remove(h uint64, i uint32) {
	sl := sh.slot(i)
	next := sl.next
	if n := sh.index[h]; n == i+1 {
		if next == 0 {
			delete(sh.index, h)
		} else {
			sh.index[h] = next
		}
	} else {
		for n != 0 {
			p := sh.slot(n - 1)
			if p.next == i+1 {
				p.next = next
				break
			}
			n = p.next
		}
	}
	id := sl.iss
	if sh.issRefs[id]--; sh.issRefs[id] == 0 {
		delete(sh.issID, sh.issName[id])
		sh.issName[id] = ""
		sh.issFree = append(sh.issFree, id)
	}
	if sl.flags&slotExt != 0 {
		delete(sh.ext, i)
	}
	*sl = memSlot{}
	sh.free = append(sh.free, i)
}

// ---- The store ----

// take counts one more record for iss unless its share is used.
func (s *Memory) take(iss string) bool {
	sh := &s.issuers[maphash.String(s.seed, iss)%memoryShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[iss]
	if e == nil {
		e = new(issuer)
		sh.m[strings.Clone(iss)] = e
	}
	if e.n >= s.maxIssuer {
		if e.n == 0 {
			delete(sh.m, iss)
		}
		return false
	}
	e.n++
	return true
}

// untake counts one record fewer for iss.
func (s *Memory) untake(iss string) {
	sh := &s.issuers[maphash.String(s.seed, iss)%memoryShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[iss]; e != nil {
		if e.n--; e.n <= 0 {
			delete(sh.m, iss)
		}
	}
}

// drop deletes the record of slot i, held for k. sh.mu is held.
func (s *Memory) drop(sh *memoryShard, k Key, h uint64, i uint32) {
	sh.remove(h, i)
	s.count.Add(-1)
	s.untake(k.Iss)
}

// lookup returns the live record's slot for k at time now, dropping an
// expired one. sh.mu is held.
func (s *Memory) lookup(sh *memoryShard, k Key, h uint64, now time.Time) (uint32, *memSlot, bool) {
	i, ok := sh.find(k, h)
	if !ok {
		return 0, nil, false
	}
	sl := sh.slot(i)
	if !sh.live(i, sl, now, unixNanoClamped(now)) {
		s.drop(sh, k, h, i)
		return 0, nil, false
	}
	return i, sl, true
}

// Remember implements Store. Inserting a record copies its Digest, Token
// and Status; the record returned on insertion is rec itself, with
// Expires and Created stripped of monotonic readings.
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
	h := s.hash(k)
	sh := s.shard(h)
	for attempt := 0; ; attempt++ {
		now := s.now() // never under a lock: the clock may call the store
		sh.mu.Lock()
		if i, sl, ok := s.lookup(sh, k, h, now); ok {
			held, written := sh.record(i, sl), sl.written(rec)
			sh.mu.Unlock()
			// The same call, retried, finds its own record.
			return held, written, nil
		}
		shared := s.take(k.Iss)
		if shared && s.reserve() {
			sh.insert(k, h, rec)
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
	h := s.hash(k)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, sl, ok := s.lookup(sh, k, h, now)
	if !ok {
		return Record{}, false, nil
	}
	return sh.record(i, sl), true, nil
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
	h := s.hash(k)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, sl, ok := s.lookup(sh, k, h, now)
	switch {
	case !ok:
		return ErrNotFound
	case !sl.identity(rec.Digest, rec.Token):
		return ErrConflict
	}
	sh.write(i, sl, rec)
	s.noteExpiry(rec.Expires)
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
	h := s.hash(k)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, sl, ok := s.lookup(sh, k, h, now)
	switch {
	case !ok:
		return Record{}, false, ErrNotFound
	case !sl.identity(old.Digest, old.Token):
		return Record{}, false, ErrConflict
	}
	state, status := sh.state(i, sl), sh.status(i, sl)
	_, expires := sh.times(i, sl)
	switch {
	case state == new.State && string(status) == string(new.Status) && expires.Equal(new.Expires):
		// Written already: by an earlier attempt of this call, or old
		// was new.
	case state == old.State && string(status) == string(old.Status):
		sh.write(i, sl, new)
		s.noteExpiry(new.Expires)
	default:
		return sh.record(i, sl), false, nil
	}
	return sh.record(i, sl), true, nil
}

// Untaken implements Store.
func (s *Memory) Untaken(ctx context.Context, createdBefore time.Time) ([]Untaken, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now()
	nowN := unixNanoClamped(now)
	var out []Untaken
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		for i := range sh.used {
			sl := sh.slot(i)
			if sl.flags&slotUsed == 0 || sh.state(i, sl) != "" || !sh.live(i, sl, now, nowN) {
				continue
			}
			if created, _ := sh.times(i, sl); created.IsZero() || created.Before(createdBefore) {
				out = append(out, Untaken{Key: sh.key(i, sl), Record: sh.record(i, sl), Age: age(now, created)})
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
	h := s.hash(k)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, sl, ok := s.lookup(sh, k, h, now)
	switch {
	case !ok:
		return ErrNotFound
	case [32]byte(digest) != sl.digest:
		return ErrConflict
	case sh.state(i, sl) != "":
		return ErrTaken
	}
	s.drop(sh, k, h, i)
	return nil
}

// Close implements Store. It drops every record.
func (s *Memory) Close() error {
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		for i := range sh.used {
			if sl := sh.slot(i); sl.flags&slotUsed != 0 {
				k := sh.key(i, sl)
				s.drop(sh, k, s.hash(k), i)
			}
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
	nowN := unixNanoClamped(now)
	if nowN < s.nextExpiry.Load() {
		return false
	}
	// Records noted from here on lower nextExpiry themselves; the ones
	// seen below contribute their expiry as they are kept.
	s.nextExpiry.Store(math.MaxInt64)
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		for i := range sh.used {
			sl := sh.slot(i)
			switch {
			case sl.flags&slotUsed == 0:
			case !sh.live(i, sl, now, nowN):
				k := sh.key(i, sl)
				s.drop(sh, k, s.hash(k), i)
			default:
				_, exp := sh.times(i, sl)
				s.noteExpiry(exp)
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
