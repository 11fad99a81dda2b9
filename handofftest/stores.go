package handofftest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentproto/handoff/replay"
)

// Method names of replay.Store and replay.OfferStore, as Call.Method and
// the fault stores' cues name them.
const (
	MethodRemember = "Remember"
	MethodGet      = "Get"
	MethodUpdate   = "Update"
	MethodCreate   = "Create"
	MethodSwap     = "Swap"
	MethodDelete   = "Delete"
	MethodList     = "List"
	MethodClose    = "Close"
)

// Call is one call a recording store saw, with what it returned.
type Call struct {
	Method string
	// Key is the hop of a replay.Store call; Hop that of a
	// replay.OfferStore call.
	Key replay.Key
	Hop string
	// Record is the record given to Remember or Update, and Held the one
	// returned by Remember or Get; Inserted is Remember's answer.
	Record, Held replay.Record
	Inserted     bool
	// Offer is the record given to Create or Swap (the new one), or
	// returned by Get.
	Offer replay.OfferRecord
	Err   error
}

// calls is a log of calls, safe for concurrent use.
type calls struct {
	mu  sync.Mutex
	log []Call
}

func (c *calls) add(call Call) {
	c.mu.Lock()
	c.log = append(c.log, call)
	c.mu.Unlock()
}

// Calls returns the calls seen so far, in order.
func (c *calls) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// Count returns how many calls of method were seen.
func (c *calls) Count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, call := range c.log {
		if call.Method == method {
			n++
		}
	}
	return n
}

// Reset forgets the calls seen so far.
func (c *calls) Reset() {
	c.mu.Lock()
	c.log = nil
	c.mu.Unlock()
}

// RecordingStore wraps a replay.Store and records every call of the
// methods it knows (Remember, Get, Update, Swap, Close) with its result. It
// embeds the store it wraps, so that a method added to replay.Store later
// reaches the wrapped store unrecorded.
type RecordingStore struct {
	replay.Store
	calls
}

// NewRecordingStore returns a store that records the calls made to s.
func NewRecordingStore(s replay.Store) *RecordingStore { return &RecordingStore{Store: s} }

// Remember calls the wrapped store and records the call.
func (s *RecordingStore) Remember(ctx context.Context, k replay.Key, rec replay.Record) (replay.Record, bool, error) {
	held, inserted, err := s.Store.Remember(ctx, k, rec)
	s.add(Call{Method: MethodRemember, Key: k, Record: rec, Held: held, Inserted: inserted, Err: err})
	return held, inserted, err
}

// Get calls the wrapped store and records the call.
func (s *RecordingStore) Get(ctx context.Context, k replay.Key) (replay.Record, bool, error) {
	rec, ok, err := s.Store.Get(ctx, k)
	s.add(Call{Method: MethodGet, Key: k, Held: rec, Inserted: ok, Err: err})
	return rec, ok, err
}

// Update calls the wrapped store and records the call.
func (s *RecordingStore) Update(ctx context.Context, k replay.Key, rec replay.Record) error {
	err := s.Store.Update(ctx, k, rec)
	s.add(Call{Method: MethodUpdate, Key: k, Record: rec, Err: err})
	return err
}

// Swap calls the wrapped store and records the call: Record is new, Held
// the record returned and Inserted whether it swapped.
func (s *RecordingStore) Swap(ctx context.Context, k replay.Key, old, new replay.Record) (replay.Record, bool, error) {
	held, swapped, err := s.Store.Swap(ctx, k, old, new)
	s.add(Call{Method: MethodSwap, Key: k, Record: new, Held: held, Inserted: swapped, Err: err})
	return held, swapped, err
}

// Close calls the wrapped store and records the call.
func (s *RecordingStore) Close() error {
	err := s.Store.Close()
	s.add(Call{Method: MethodClose, Err: err})
	return err
}

// RecordingOfferStore wraps a replay.OfferStore and records every call of
// the methods it knows, embedding the store as RecordingStore does.
type RecordingOfferStore struct {
	replay.OfferStore
	calls
}

// NewRecordingOfferStore returns a store that records the calls made to s.
func NewRecordingOfferStore(s replay.OfferStore) *RecordingOfferStore {
	return &RecordingOfferStore{OfferStore: s}
}

// Create calls the wrapped store and records the call.
func (s *RecordingOfferStore) Create(ctx context.Context, rec replay.OfferRecord) (replay.OfferRecord, error) {
	out, err := s.OfferStore.Create(ctx, rec)
	s.add(Call{Method: MethodCreate, Hop: rec.Hop, Offer: rec, Err: err})
	return out, err
}

// Get calls the wrapped store and records the call.
func (s *RecordingOfferStore) Get(ctx context.Context, hop string) (replay.OfferRecord, bool, error) {
	rec, ok, err := s.OfferStore.Get(ctx, hop)
	s.add(Call{Method: MethodGet, Hop: hop, Offer: rec, Inserted: ok, Err: err})
	return rec, ok, err
}

// Swap calls the wrapped store and records the call.
func (s *RecordingOfferStore) Swap(ctx context.Context, old, rec replay.OfferRecord) (replay.OfferRecord, error) {
	out, err := s.OfferStore.Swap(ctx, old, rec)
	s.add(Call{Method: MethodSwap, Hop: old.Hop, Offer: rec, Err: err})
	return out, err
}

// Delete calls the wrapped store and records the call.
func (s *RecordingOfferStore) Delete(ctx context.Context, hop string, version uint64) error {
	err := s.OfferStore.Delete(ctx, hop, version)
	s.add(Call{Method: MethodDelete, Hop: hop, Err: err})
	return err
}

// List calls the wrapped store and records the call.
func (s *RecordingOfferStore) List(ctx context.Context, q replay.OfferQuery) ([]replay.OfferRecord, error) {
	out, err := s.OfferStore.List(ctx, q)
	s.add(Call{Method: MethodList, Err: err})
	return out, err
}

// Close calls the wrapped store and records the call.
func (s *RecordingOfferStore) Close() error {
	err := s.OfferStore.Close()
	s.add(Call{Method: MethodClose, Err: err})
	return err
}

// ErrInjected is the error a fault store returns for a failure it was told
// to inject. It wraps replay.ErrUnavailable, as a store that cannot answer
// does (see package replay, "Contract").
var ErrInjected = fmt.Errorf("handofftest: injected fault: %w", replay.ErrUnavailable)

// ErrGone is the error a fault store returns once it has gone away. It
// wraps ErrInjected.
var ErrGone = fmt.Errorf("%w: store gone", ErrInjected)

// Fault is what a fault store does to a call on cue.
type Fault uint8

const (
	// Fail returns ErrInjected at once, without calling the wrapped store.
	Fail Fault = iota + 1
	// Hang blocks until the call's context ends, then returns an error
	// wrapping ErrInjected and the context's error: a store that timed
	// out. A call whose context has no deadline blocks until
	// FaultOptions.HangLimit has passed.
	Hang
	// Gone makes the store go away: this call and every later call of
	// every method return ErrGone, until Heal.
	Gone
)

func (f Fault) String() string {
	switch f {
	case Fail:
		return "fail"
	case Hang:
		return "hang"
	case Gone:
		return "gone"
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

// Cue says when a fault store injects a fault: on the calls of Methods
// (every method it knows but Close when empty), after Skip such calls have
// passed, for Times calls (every later call when zero).
type Cue struct {
	Fault   Fault
	Methods []string
	Skip    int
	Times   int
}

// faults decides, call by call, which fault to inject.
type faults struct {
	mu        sync.Mutex
	cues      []*Cue
	gone      bool
	injected  int
	hangLimit time.Duration
}

// Inject arms c. Cues are consulted in the order they were armed; the
// first that applies to a call decides it.
func (f *faults) Inject(c Cue) {
	f.mu.Lock()
	f.cues = append(f.cues, &c)
	f.mu.Unlock()
}

// Heal disarms every cue and brings a store that went away back.
func (f *faults) Heal() {
	f.mu.Lock()
	f.cues, f.gone = nil, false
	f.mu.Unlock()
}

// Injected returns how many calls a fault was injected into.
func (f *faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// next returns the fault for a call of method, or 0 to pass it through.
func (f *faults) next(method string) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		f.injected++
		return Gone
	}
	for i, c := range f.cues {
		if len(c.Methods) > 0 && !slices.Contains(c.Methods, method) ||
			len(c.Methods) == 0 && method == MethodClose {
			continue
		}
		if c.Skip > 0 {
			c.Skip--
			continue
		}
		if c.Times > 0 {
			if c.Times--; c.Times == 0 {
				f.cues = slices.Delete(f.cues, i, i+1)
			}
		}
		if c.Fault == Gone {
			f.gone = true
		}
		f.injected++
		return c.Fault
	}
	return 0
}

// inject runs the fault for a call of method: nil to pass it through.
func (f *faults) inject(ctx context.Context, method string) error {
	switch f.next(method) {
	case Fail:
		return fmt.Errorf("%s: %w", method, ErrInjected)
	case Gone:
		return fmt.Errorf("%s: %w", method, ErrGone)
	case Hang:
		limit := f.hangLimit
		if limit <= 0 {
			limit = DefaultHangLimit
		}
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w: %w", method, ErrInjected, ctx.Err())
		case <-timer.C:
			return fmt.Errorf("%s: %w: %w", method, ErrInjected, context.DeadlineExceeded)
		}
	}
	return nil
}

// DefaultHangLimit is how long a Hang fault blocks a call whose context
// never ends.
const DefaultHangLimit = 10 * time.Second

// FaultOptions configure a fault store.
type FaultOptions struct {
	// HangLimit bounds how long a Hang blocks a call whose context never
	// ends. Zero means DefaultHangLimit.
	HangLimit time.Duration
}

// FaultStore wraps a replay.Store and fails, hangs or goes away on cue
// (Inject), so that a test can show that a service refuses an offer, and
// never accepts it, when its memory cannot answer (HC-33). A call with no
// fault reaches the wrapped store. It embeds the store it wraps: a method
// added to replay.Store later reaches the wrapped store without faults.
type FaultStore struct {
	replay.Store
	faults
}

// NewFaultStore returns a fault store over s with no cue armed.
func NewFaultStore(s replay.Store, opts FaultOptions) *FaultStore {
	return &FaultStore{Store: s, faults: faults{hangLimit: opts.HangLimit}}
}

// Remember injects the fault due, or calls the wrapped store.
func (s *FaultStore) Remember(ctx context.Context, k replay.Key, rec replay.Record) (replay.Record, bool, error) {
	if err := s.inject(ctx, MethodRemember); err != nil {
		return replay.Record{}, false, err
	}
	return s.Store.Remember(ctx, k, rec)
}

// Get injects the fault due, or calls the wrapped store.
func (s *FaultStore) Get(ctx context.Context, k replay.Key) (replay.Record, bool, error) {
	if err := s.inject(ctx, MethodGet); err != nil {
		return replay.Record{}, false, err
	}
	return s.Store.Get(ctx, k)
}

// Update injects the fault due, or calls the wrapped store.
func (s *FaultStore) Update(ctx context.Context, k replay.Key, rec replay.Record) error {
	if err := s.inject(ctx, MethodUpdate); err != nil {
		return err
	}
	return s.Store.Update(ctx, k, rec)
}

// Swap injects the fault due, or calls the wrapped store.
func (s *FaultStore) Swap(ctx context.Context, k replay.Key, old, new replay.Record) (replay.Record, bool, error) {
	if err := s.inject(ctx, MethodSwap); err != nil {
		return replay.Record{}, false, err
	}
	return s.Store.Swap(ctx, k, old, new)
}

// Close closes the wrapped store; it fails only when the store has gone
// away or a cue names Close.
func (s *FaultStore) Close() error {
	if err := s.inject(context.Background(), MethodClose); err != nil {
		return err
	}
	return s.Store.Close()
}

// FaultOfferStore is FaultStore for a replay.OfferStore.
type FaultOfferStore struct {
	replay.OfferStore
	faults
}

// NewFaultOfferStore returns a fault store over s with no cue armed.
func NewFaultOfferStore(s replay.OfferStore, opts FaultOptions) *FaultOfferStore {
	return &FaultOfferStore{OfferStore: s, faults: faults{hangLimit: opts.HangLimit}}
}

// Create injects the fault due, or calls the wrapped store.
func (s *FaultOfferStore) Create(ctx context.Context, rec replay.OfferRecord) (replay.OfferRecord, error) {
	if err := s.inject(ctx, MethodCreate); err != nil {
		return replay.OfferRecord{}, err
	}
	return s.OfferStore.Create(ctx, rec)
}

// Get injects the fault due, or calls the wrapped store.
func (s *FaultOfferStore) Get(ctx context.Context, hop string) (replay.OfferRecord, bool, error) {
	if err := s.inject(ctx, MethodGet); err != nil {
		return replay.OfferRecord{}, false, err
	}
	return s.OfferStore.Get(ctx, hop)
}

// Swap injects the fault due, or calls the wrapped store.
func (s *FaultOfferStore) Swap(ctx context.Context, old, rec replay.OfferRecord) (replay.OfferRecord, error) {
	if err := s.inject(ctx, MethodSwap); err != nil {
		return replay.OfferRecord{}, err
	}
	return s.OfferStore.Swap(ctx, old, rec)
}

// Delete injects the fault due, or calls the wrapped store.
func (s *FaultOfferStore) Delete(ctx context.Context, hop string, version uint64) error {
	if err := s.inject(ctx, MethodDelete); err != nil {
		return err
	}
	return s.OfferStore.Delete(ctx, hop, version)
}

// List injects the fault due, or calls the wrapped store.
func (s *FaultOfferStore) List(ctx context.Context, q replay.OfferQuery) ([]replay.OfferRecord, error) {
	if err := s.inject(ctx, MethodList); err != nil {
		return nil, err
	}
	return s.OfferStore.List(ctx, q)
}

// Close closes the wrapped store, as FaultStore.Close does.
func (s *FaultOfferStore) Close() error {
	if err := s.inject(context.Background(), MethodClose); err != nil {
		return err
	}
	return s.OfferStore.Close()
}
