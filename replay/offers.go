package replay

// PROVISIONAL: replaced by the offer store of the replay branch on merge.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

type OfferRecord struct {
	Hop, To            string
	Digest             []byte
	Prev               []byte
	Work               string
	Open               bool
	Handoff            []byte
	State, Reason      string
	Status             []byte
	Canceled, Observed bool
	Created, Expires   time.Time
	Version            uint64
}

type OfferQuery struct {
	OpenOnly bool
	Prev     []byte
	Work     string
}

type OfferStore interface {
	Create(ctx context.Context, rec OfferRecord) (OfferRecord, error)
	Get(ctx context.Context, hop string) (OfferRecord, bool, error)
	Swap(ctx context.Context, old, new OfferRecord) (OfferRecord, error)
	Delete(ctx context.Context, hop string, version uint64) error
	List(ctx context.Context, q OfferQuery) ([]OfferRecord, error)
	Close() error
}

var (
	ErrExists = errors.New("replay: hop already recorded")
	ErrBusy   = errors.New("replay: an unresolved hop holds the same work")
)

type BusyError struct{ Hop string }

func (e *BusyError) Error() string {
	return fmt.Sprintf("replay: unresolved hop %s holds the same work", e.Hop)
}
func (e *BusyError) Unwrap() error { return ErrBusy }

type memOffers struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]OfferRecord
}

func NewMemoryOffers(now func() time.Time) OfferStore {
	if now == nil {
		now = time.Now
	}
	return &memOffers{now: now, m: map[string]OfferRecord{}}
}

func (s *memOffers) live(r OfferRecord) bool { return r.Expires.IsZero() || s.now().Before(r.Expires) }

func (s *memOffers) Create(ctx context.Context, rec OfferRecord) (OfferRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[rec.Hop]; ok && s.live(r) {
		return OfferRecord{}, ErrExists
	}
	if rec.Work != "" {
		for _, r := range s.m {
			if r.Open && r.Work == rec.Work && s.live(r) {
				return OfferRecord{}, &BusyError{Hop: r.Hop}
			}
		}
	}
	rec.Version = 1
	s.m[rec.Hop] = rec
	return rec, nil
}

func (s *memOffers) Get(ctx context.Context, hop string) (OfferRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[hop]
	if !ok || !s.live(r) {
		return OfferRecord{}, false, nil
	}
	return r, true, nil
}

func (s *memOffers) Swap(ctx context.Context, old, rec OfferRecord) (OfferRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[old.Hop]
	if !ok || !s.live(r) {
		return OfferRecord{}, ErrNotFound
	}
	if r.Version != old.Version {
		return OfferRecord{}, ErrConflict
	}
	rec.Version = r.Version + 1
	s.m[old.Hop] = rec
	return rec, nil
}

func (s *memOffers) Delete(ctx context.Context, hop string, version uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[hop]
	if !ok {
		return ErrNotFound
	}
	if r.Version != version {
		return ErrConflict
	}
	delete(s.m, hop)
	return nil
}

func (s *memOffers) List(ctx context.Context, q OfferQuery) ([]OfferRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []OfferRecord
	for _, r := range s.m {
		if !s.live(r) || (q.OpenOnly && !r.Open) || (q.Prev != nil && !bytes.Equal(q.Prev, r.Prev)) || (q.Work != "" && q.Work != r.Work) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

func (s *memOffers) Close() error { return nil }
