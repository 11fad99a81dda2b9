package authority

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is the in-memory Ledger: the default, for one process. Its
// records live as long as the value; use a durable backend to keep them
// across a restart and to share them between replicas. It is safe for
// concurrent use, and Perform of an effect that needs no approval does not
// allocate beyond the growth of its map.
type Memory struct {
	mu        sync.Mutex
	effects   map[string]memRecord
	approvals map[string][]Approval // hop -> approvals, ordered by ID
	ids       map[string]string     // approval ID -> hop
	hops      map[string]HopRecord
}

// memRecord is a Record as the memory ledger keeps it, under its name.
type memRecord struct {
	hop, action, approval string
	at                    int64 // UnixNano, UTC
}

func (r memRecord) record(name string) Record {
	return Record{Name: name, Hop: r.hop, Action: r.action, At: time.Unix(0, r.at).UTC(), Approval: r.approval}
}

// NewMemory returns an empty in-memory ledger.
func NewMemory() *Memory {
	return &Memory{effects: map[string]memRecord{}, approvals: map[string][]Approval{}, ids: map[string]string{}, hops: map[string]HopRecord{}}
}

var _ Ledger = (*Memory)(nil)

// Perform implements Ledger.
func (m *Memory) Perform(ctx context.Context, e Effect) error {
	if err := e.validate(); err != nil {
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
	for _, n := range [2]string{e.OperationID, e.IdempotencyKey} {
		if r, ok := m.effects[n]; ok && n != "" {
			return &Refusal{Held: r.record(n)}
		}
	}
	var approval string
	if e.NeedsApproval {
		as := m.approvals[e.Hop]
		i := Choose(as, e)
		if i < 0 {
			return fmt.Errorf("%w: %q on hop %s", ErrNoApproval, e.Action, e.Hop)
		}
		as[i].Remaining--
		approval = as[i].ID
	}
	r := memRecord{hop: e.Hop, action: e.Action, approval: approval, at: e.At.UnixNano()}
	if e.OperationID != "" {
		m.effects[e.OperationID] = r
	}
	if e.IdempotencyKey != "" && e.IdempotencyKey != e.OperationID {
		m.effects[e.IdempotencyKey] = r
	}
	return nil
}

// Lookup implements Ledger.
func (m *Memory) Lookup(ctx context.Context, name string) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.effects[name]
	if !ok {
		return Record{}, false, nil
	}
	return r.record(name), true, nil
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
	a.Evidence = slices.Clone(a.Evidence)
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
		out[i].Evidence = slices.Clone(out[i].Evidence)
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
