package authority

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Memory is the in-memory Ledger: the default, for one process. Its
// records live as long as the value; use a durable backend to keep them
// across a restart and to share them between replicas. It is safe for
// concurrent use, and Perform of an effect that needs no approval does not
// allocate beyond the growth of its maps.
type Memory struct {
	mu        sync.Mutex
	effects   map[scoped]Record
	chains    map[string][]string   // hop -> its chain, as first recorded
	approvals map[string][]Approval // hop -> approvals, ordered by ID
	ids       map[string]string     // approval ID -> hop
	hops      map[string]HopRecord
}

// scoped is a name in the scope of a hop.
type scoped struct{ hop, name string }

// NewMemory returns an empty in-memory ledger.
func NewMemory() *Memory {
	return &Memory{effects: map[scoped]Record{}, chains: map[string][]string{},
		approvals: map[string][]Approval{}, ids: map[string]string{}, hops: map[string]HopRecord{}}
}

var _ Ledger = (*Memory)(nil)

// held returns the first record of one of e's names in one of its scopes,
// its own hop first.
func (m *Memory) held(e Effect) (scoped, Record, bool) {
	for _, n := range [2]string{e.OperationID, e.IdempotencyKey} {
		if n == "" {
			continue
		}
		if r, ok := m.effects[scoped{e.Hop, n}]; ok {
			return scoped{e.Hop, n}, r, true
		}
	}
	for _, h := range e.Chain {
		for _, n := range [2]string{e.OperationID, e.IdempotencyKey} {
			if r, ok := m.effects[scoped{h, n}]; ok && n != "" {
				return scoped{h, n}, r, true
			}
		}
	}
	return scoped{}, Record{}, false
}

// Perform implements Ledger.
func (m *Memory) Perform(ctx context.Context, e Effect) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.hops[e.Hop]; ok && h.Final != nil {
		return fmt.Errorf("%w: %s (%s)", ErrFinished, e.Hop, h.Final.State)
	}
	if k, r, ok := m.held(e); ok {
		if e.SameCall(r) {
			r.Replays++
			m.effects[k] = r
		}
		return e.Refuse(m.out(r))
	}
	var approval string
	if e.NeedsApproval {
		as := m.approvals[e.Hop]
		i, err := Choose(as, e)
		if err != nil {
			return NoApproval(e, err)
		}
		as[i].Remaining--
		approval = as[i].ID
	}
	chain, ok := m.chains[e.Hop]
	if !ok && len(e.Chain) > 0 {
		chain = slices.Clone(e.Chain)
		m.chains[e.Hop] = chain
	}
	for _, n := range e.Names() {
		r := e.Record(n, approval)
		r.Chain = chain
		m.effects[scoped{e.Hop, n}] = r
	}
	return nil
}

// out returns a copy of r the caller may keep.
func (m *Memory) out(r Record) Record {
	r.Chain = slices.Clone(r.Chain)
	if r.Outcome != nil {
		o := *r.Outcome
		o.Result = slices.Clone(o.Result)
		r.Outcome = &o
	}
	return r
}

// Settle implements Ledger.
func (m *Memory) Settle(ctx context.Context, e Effect, o Outcome) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if e.Key == "" {
		return fmt.Errorf("%w: settling needs the call's key", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	o = NormalizedOutcome(o)
	m.mu.Lock()
	defer m.mu.Unlock()
	names := e.Names()
	settled := make([]Record, len(names))
	for i, n := range names {
		r, ok := m.effects[scoped{e.Hop, n}]
		if !ok {
			return fmt.Errorf("%w: %q holds no claim of this call on hop %s", ErrConflict, n, e.Hop)
		}
		var err error
		if settled[i], _, err = SettleTo(e, r, o); err != nil {
			return err
		}
	}
	for i, n := range names {
		m.effects[scoped{e.Hop, n}] = settled[i]
	}
	return nil
}

// Lookup implements Ledger. It reads every record: an operator's query.
func (m *Memory) Lookup(ctx context.Context, name string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for k, r := range m.effects {
		if k.name == name {
			out = append(out, m.out(r))
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Hop, b.Hop) })
	return out, nil
}

// Grant implements Ledger.
func (m *Memory) Grant(ctx context.Context, a Approval) error {
	a, err := a.Normalized()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	a.Evidence, a.Chain = slices.Clone(a.Evidence), slices.Clone(a.Chain)
	m.mu.Lock()
	defer m.mu.Unlock()
	if hop, ok := m.ids[a.ID]; ok {
		as := m.approvals[hop]
		i, _ := slices.BinarySearchFunc(as, a.ID, func(x Approval, id string) int { return strings.Compare(x.ID, id) })
		if as[i].Same(a) {
			return nil
		}
		return fmt.Errorf("%w: approval %q is recorded with other terms", ErrConflict, a.ID)
	}
	as := m.approvals[a.Hop]
	i, _ := slices.BinarySearchFunc(as, a.ID, func(x Approval, id string) int { return strings.Compare(x.ID, id) })
	m.approvals[a.Hop] = slices.Insert(as, i, a)
	m.ids[a.ID] = a.Hop
	return nil
}

// Approvals implements Ledger.
func (m *Memory) Approvals(ctx context.Context, hop string) ([]Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.approvals[hop])
	for i := range out {
		out[i].Evidence, out[i].Chain = slices.Clone(out[i].Evidence), slices.Clone(out[i].Chain)
	}
	return out, nil
}

// Acknowledge implements Ledger.
func (m *Memory) Acknowledge(ctx context.Context, hop string, ack Ack) error {
	if hop == "" || (ack.Decision != Accepted && ack.Decision != Rejected) {
		return fmt.Errorf("%w: an acknowledgement needs a hop and a decision", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	ack.At = ack.At.UTC().Round(0)
	ack.Findings = slices.Clone(ack.Findings)
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hops[hop]
	if h.Ack != nil {
		if SameAck(*h.Ack, ack) {
			return nil
		}
		return fmt.Errorf("%w: hop %s is acknowledged %s", ErrConflict, hop, h.Ack.Decision)
	}
	h.Ack = &ack
	m.hops[hop] = h
	return nil
}

// Finish implements Ledger.
func (m *Memory) Finish(ctx context.Context, hop string, f Final) error {
	if hop == "" || f.State == "" {
		return fmt.Errorf("%w: a final disposition needs a hop and a state", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	f.At = f.At.UTC().Round(0)
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hops[hop]
	if h.Final != nil {
		if SameFinal(*h.Final, f) {
			return nil
		}
		return fmt.Errorf("%w: hop %s is finished %s", ErrConflict, hop, h.Final.State)
	}
	h.Final = &f
	m.hops[hop] = h
	return nil
}

// Hop implements Ledger.
func (m *Memory) Hop(ctx context.Context, hop string) (HopRecord, error) {
	if err := ctx.Err(); err != nil {
		return HopRecord{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hops[hop]
	out := HopRecord{}
	if h.Ack != nil {
		a := *h.Ack
		a.Findings = slices.Clone(a.Findings)
		out.Ack = &a
	}
	if h.Final != nil {
		f := *h.Final
		out.Final = &f
	}
	return out, nil
}
