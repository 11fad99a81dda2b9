package replay

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxOffers is the number of records an OfferStore of this package
// or of replay/boltstore holds when its options leave the bound zero.
const DefaultMaxOffers = 1 << 16

// MemoryOffersOptions configures a MemoryOffers. The zero value is usable.
type MemoryOffersOptions struct {
	// MaxRecords bounds the records held, open or resolved and not yet
	// expired. Zero or less means DefaultMaxOffers.
	MaxRecords int
	// Now returns the current time; nil means time.Now. The store calls it
	// holding none of its locks, so the clock may call back into it.
	Now func() time.Time
}

// MemoryOffers is an OfferStore kept in the memory of one process. It is
// safe for concurrent use. Its records are lost when the process ends: a
// delegator that must retransmit, cancel or keep HC-42 across a restart
// needs a durable store (replay/boltstore, replay/redisstore).
//
// # Cap
//
// It holds at most MemoryOffersOptions.MaxRecords records
// (DefaultMaxOffers, 65,536, by default). An Open record is kept until its
// hop is resolved, canceled and answered, or abandoned (HC-41, HC-42),
// however long that takes, and a resolved one until its Expires; so an
// offer that is never answered holds its record for good. At the cap,
// Create first deletes the records that have expired, then refuses a new
// record with an *OffersFullError, which wraps ErrFull: the delegator makes no new offer
// until one of its hops is resolved or abandoned (Agent.Unresolved lists
// them). It never drops a record to make room, which would forget a hop
// whose outcome is unknown. A record costs its Handoff's octets (the offer
// as sent, and its chain) and a few hundred bytes besides
// (BenchmarkMemoryOffersBytesPerRecord).
type MemoryOffers struct {
	now func() time.Time
	max int

	mu      sync.Mutex
	recs    map[string]OfferRecord
	work    map[string]string // Work -> Hop of the Open record holding it
	version uint64
	// nextExpiry is a lower bound on the Expires of every held record
	// that has one, or the zero time when none is known to: before it, a
	// sweep at the cap cannot free anything and is skipped.
	nextExpiry time.Time
}

var _ OfferStore = (*MemoryOffers)(nil)

// NewMemoryOffers returns an empty MemoryOffers.
func NewMemoryOffers(opts MemoryOffersOptions) *MemoryOffers {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = DefaultMaxOffers
	}
	return &MemoryOffers{now: opts.Now, max: opts.MaxRecords, recs: map[string]OfferRecord{}, work: map[string]string{}}
}

// noteExpiry lowers nextExpiry to e, a held record's Expires. s.mu is held.
func (s *MemoryOffers) noteExpiry(e time.Time) {
	if !e.IsZero() && (s.nextExpiry.IsZero() || e.Before(s.nextExpiry)) {
		s.nextExpiry = e
	}
}

// sweep drops every expired record, when one may have expired by now.
// s.mu is held.
func (s *MemoryOffers) sweep(now time.Time) {
	if s.nextExpiry.IsZero() || now.Before(s.nextExpiry) {
		return
	}
	s.nextExpiry = time.Time{}
	for _, r := range s.recs {
		if !r.Live(now) {
			s.drop(r)
		} else {
			s.noteExpiry(r.Expires)
		}
	}
}

// live returns the live record held for hop at time now, dropping an
// expired one. s.mu is held; now was read before it was taken, since the
// clock may call back into the store (or the Agent that owns it).
func (s *MemoryOffers) live(hop string, now time.Time) (OfferRecord, bool) {
	r, ok := s.recs[hop]
	if !ok {
		return OfferRecord{}, false
	}
	if !r.Live(now) {
		s.drop(r)
		return OfferRecord{}, false
	}
	return r, true
}

// drop removes r and frees its Work. s.mu is held.
func (s *MemoryOffers) drop(r OfferRecord) {
	delete(s.recs, r.Hop)
	if r.Open && r.Work != "" && s.work[r.Work] == r.Hop {
		delete(s.work, r.Work)
	}
}

// Create implements OfferStore.
func (s *MemoryOffers) Create(ctx context.Context, rec OfferRecord) (OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return OfferRecord{}, err
	}
	if err := CheckOffer(rec); err != nil {
		return OfferRecord{}, err
	}
	rec = rec.Clone()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, ok := s.live(rec.Hop, now); ok {
		if rec.Version = held.Version; held.Equal(rec) {
			return held.Clone(), nil // the same Create again
		}
		return OfferRecord{}, ErrExists
	}
	if rec.Open && rec.Work != "" {
		if h, ok := s.work[rec.Work]; ok {
			return OfferRecord{}, &BusyError{Work: rec.Work, Hop: h}
		}
	}
	if len(s.recs) >= s.max {
		s.sweep(now)
		if len(s.recs) >= s.max {
			return OfferRecord{}, &OffersFullError{Cap: s.max}
		}
	}
	if rec.Open && rec.Work != "" {
		s.work[rec.Work] = rec.Hop
	}
	s.version++
	rec.Version = s.version
	s.recs[rec.Hop] = rec
	s.noteExpiry(rec.Expires)
	return rec.Clone(), nil
}

// Get implements OfferStore.
func (s *MemoryOffers) Get(ctx context.Context, hop string) (OfferRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return OfferRecord{}, false, err
	}
	if hop == "" {
		return OfferRecord{}, false, ErrInvalid
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(hop, now)
	if !ok {
		return OfferRecord{}, false, nil
	}
	return r.Clone(), true, nil
}

// Swap implements OfferStore.
func (s *MemoryOffers) Swap(ctx context.Context, old, new OfferRecord) (OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return OfferRecord{}, err
	}
	if err := CheckSwap(old, new); err != nil {
		return OfferRecord{}, err
	}
	new = new.Clone()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.live(old.Hop, now)
	if !ok {
		return OfferRecord{}, ErrNotFound
	}
	if held.Version != old.Version {
		return OfferRecord{}, ErrConflict
	}
	if held.Open && !new.Open && held.Work != "" && s.work[held.Work] == held.Hop {
		delete(s.work, held.Work)
	}
	s.version++
	new.Version = s.version
	s.recs[new.Hop] = new
	s.noteExpiry(new.Expires)
	return new.Clone(), nil
}

// Delete implements OfferStore.
func (s *MemoryOffers) Delete(ctx context.Context, hop string, version uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if hop == "" {
		return ErrInvalid
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.live(hop, now)
	if !ok {
		return ErrNotFound
	}
	if held.Version != version {
		return ErrConflict
	}
	s.drop(held)
	return nil
}

// List implements OfferStore.
func (s *MemoryOffers) List(ctx context.Context, q OfferQuery) ([]OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []OfferRecord
	for _, r := range s.recs {
		if !r.Live(now) {
			s.drop(r)
			continue
		}
		if q.Match(r) {
			out = append(out, r.Clone())
		}
	}
	SortOffers(out)
	return out, nil
}

// Close implements OfferStore. It drops every record.
func (s *MemoryOffers) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.recs)
	clear(s.work)
	return nil
}
