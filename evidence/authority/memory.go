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
// allocate beyond the growth of its maps.
type Memory struct {
	mu        sync.Mutex
	effects   map[string]map[string]memRecord // hop -> name -> record
	chains    map[string][]string             // hop -> its chain, as first recorded
	approvals map[string][]Approval           // hop -> approvals, ordered by ID
	ids       map[string]string               // approval ID -> hop
	hops      map[string]HopRecord
}

// scoped is a name in the scope of a hop.
type scoped struct{ hop, name string }

// memRecord is a Record as the memory ledger keeps it, under its hop and
// name (its chain is its hop's): small, so that the map holds it in place
// and grows cheaply; what only a call's record has is kept aside.
type memRecord struct {
	action, approval string
	at               int64 // UnixNano, UTC
	call             *memCall
}

// memCall is what a record made for a call keeps besides.
type memCall struct {
	tool, key, args string
	outcome         *Outcome
	replays         int
	inFlight        bool
}

func (m *Memory) record(k scoped, r memRecord) Record {
	out := Record{Name: k.name, Hop: k.hop, Chain: slices.Clone(m.chains[k.hop]), Action: r.action, At: time.Unix(0, r.at).UTC(),
		Approval: r.approval}
	if c := r.call; c != nil {
		out.Tool, out.Key, out.Args, out.InFlight, out.Replays = c.tool, c.key, c.args, c.inFlight, c.replays
		if c.outcome != nil {
			o := *c.outcome
			o.Result = slices.Clone(o.Result)
			out.Outcome = &o
		}
	}
	return out
}

func (m *Memory) get(k scoped) (memRecord, bool) {
	r, ok := m.effects[k.hop][k.name]
	return r, ok
}

func (m *Memory) put(k scoped, r memRecord) {
	names, ok := m.effects[k.hop]
	if !ok {
		names = map[string]memRecord{}
		m.effects[k.hop] = names
	}
	names[k.name] = r
}

// NewMemory returns an empty in-memory ledger.
func NewMemory() *Memory {
	return &Memory{effects: map[string]map[string]memRecord{}, chains: map[string][]string{},
		approvals: map[string][]Approval{}, ids: map[string]string{}, hops: map[string]HopRecord{}}
}

var _ Ledger = (*Memory)(nil)

// held returns the first record of one of e's names in one of its scopes,
// its own hop first.
func (m *Memory) held(e Effect) (scoped, memRecord, bool) {
	for _, h := range e.scopes() {
		names := m.effects[h]
		for _, n := range [2]string{e.OperationID, e.IdempotencyKey} {
			if r, ok := names[n]; ok && n != "" {
				return scoped{h, n}, r, true
			}
		}
	}
	return scoped{}, memRecord{}, false
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
		held := m.record(k, r)
		if e.SameCall(held) {
			r.call.replays++ // a call's record: its key is set
			held.Replays++
		}
		return e.Refuse(held)
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
	if _, ok := m.chains[e.Hop]; !ok && len(e.Chain) > 0 {
		m.chains[e.Hop] = slices.Clone(e.Chain)
	}
	r := memRecord{action: e.Action, approval: approval, at: e.At.UnixNano()}
	for i, n := range [2]string{e.OperationID, e.IdempotencyKey} {
		if n == "" || (i == 1 && n == e.OperationID) {
			continue
		}
		if e.Key != "" || e.Tool != "" || e.Args != "" || e.Claim {
			// Each name's record is settled and counted on its own.
			r.call = &memCall{tool: e.Tool, key: e.Key, args: e.Args, inFlight: e.Claim}
		}
		m.put(scoped{e.Hop, n}, r)
	}
	if h := m.hops[e.Hop]; !e.Marker && !h.Effects {
		h.Effects = true
		m.hops[e.Hop] = h
	}
	return nil
}

// Settle implements Ledger.
func (m *Memory) Settle(ctx context.Context, e Effect, o Outcome) error {
	if err := e.ValidateSettle(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	o = NormalizedOutcome(o)
	m.mu.Lock()
	defer m.mu.Unlock()
	names := e.Names()
	calls := make([]*memCall, len(names))
	for i, n := range names {
		k := scoped{e.Hop, n}
		r, ok := m.get(k)
		if !ok {
			return fmt.Errorf("%w: %q holds no claim of this call on hop %s", ErrConflict, n, e.Hop)
		}
		if _, _, err := SettleTo(e, m.record(k, r), o); err != nil {
			return err
		}
		calls[i] = r.call // set: SettleTo found the call's key
	}
	for _, c := range calls {
		if c.inFlight {
			c.inFlight, c.outcome = false, &o
		}
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
	for hop, names := range m.effects {
		if r, ok := names[name]; ok {
			out = append(out, m.record(scoped{hop, name}, r))
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
	out := HopRecord{Effects: h.Effects}
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
