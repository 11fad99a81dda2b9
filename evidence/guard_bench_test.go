package evidence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
)

// BenchmarkGuardAuthorize: Guard.Authorize on the in-memory ledger, in
// steady state, for an allowed action with no effect (a lookup in the
// package's authority) and for one that records a fresh operation id (the
// ledger's atomic check-and-record), each reported against a map lookup
// of the same keys measured in the same run (issue 23: at most 2 µs and
// 0 allocations), and against the guard as it was before issue 33
// (baselineGuard: one namespace for every hop, no call key) on the same
// report, in chunks that alternate with the guard's, so that a busy
// machine slows both alike: guard-ns/op and baseline-ns/op are each one's
// time, x-baseline their ratio (issue 33: at most 2); ns/op counts both.
func BenchmarkGuardAuthorize(b *testing.B) {
	run := func(b *testing.B, withID bool) {
		w := newWorld(b, handoffJWS, nil)
		g := newHopGuardTB(b, w, refundPackage(), authority.NewMemory())
		base := newBaselineGuard(g.Guard)
		ctx := context.Background()
		ids := make([]string, b.N)
		set := make(map[string]struct{}, b.N)
		for i := range ids {
			ids[i] = "op-" + strconv.Itoa(i)
			set[ids[i]] = struct{}{}
		}
		c := g.call("ledger.read", "", "")
		loop := func(from, to int, authorize func(context.Context, Call) error) time.Duration {
			start := time.Now()
			for i := from; i < to; i++ {
				if withID {
					c.OperationID = ids[i]
				}
				if err := authorize(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			return time.Since(start)
		}
		const chunk = 2048
		var guard, baseline time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		for from := 0; from < b.N; from += chunk {
			to := min(from+chunk, b.N)
			guard += loop(from, to, g.Authorize)
			baseline += loop(from, to, base.authorize)
		}
		b.StopTimer()
		hits := 0
		mstart := time.Now()
		for i := range b.N {
			if _, ok := set[ids[i]]; ok {
				hits++
			}
		}
		mapNs := float64(time.Since(mstart).Nanoseconds()) / float64(b.N)
		if hits != b.N {
			b.Fatal("map lookups missed")
		}
		ns := float64(guard.Nanoseconds()) / float64(b.N)
		baseNs := float64(baseline.Nanoseconds()) / float64(b.N)
		b.ReportMetric(ns, "guard-ns/op")
		b.ReportMetric(mapNs, "map-ns/op")
		b.ReportMetric(ns/mapNs, "x-map")
		b.ReportMetric(baseNs, "baseline-ns/op")
		b.ReportMetric(ns/baseNs, "x-baseline")
	}
	b.Run("allowed", func(b *testing.B) { run(b, false) })
	b.Run("allowed+operation-id", func(b *testing.B) { run(b, true) })
}

// BenchmarkGuardDo: Guard.Do of an allowed call with arguments and a fresh
// operation id (canonicalize, key, claim, run, settle) against
// Guard.Authorize of the same call in the same run.
func BenchmarkGuardDo(b *testing.B) {
	w := newWorld(b, handoffJWS, nil)
	g := newHopGuardTB(b, w, refundPackage(), authority.NewMemory())
	ctx := context.Background()
	args := []byte(`{"invoice":"INV-1042","amount":{"currency":"EUR","value":"640.00"},"reason":"duplicate charge"}`)
	c := g.call("ledger.read", "", "")
	c.Tool, c.Args = "ledger", args
	f := func(context.Context) ([]byte, error) { return []byte(`{"ok":true}`), nil }
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		c.OperationID = "do-" + strconv.Itoa(i)
		if _, err := g.Do(ctx, c, f); err != nil {
			b.Fatal(err)
		}
	}
	ns := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.StopTimer()
	astart := time.Now()
	for i := range b.N {
		c.OperationID = "authorize-" + strconv.Itoa(i)
		if err := g.Authorize(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(ns/(float64(time.Since(astart).Nanoseconds())/float64(b.N)), "x-authorize")
}

// baselineGuard is Guard.Authorize, on the in-memory ledger, as it was
// before issue 33, kept here as the benchmark's baseline only: every
// effect's names in one namespace, no chain, no call key.
type baselineGuard struct {
	hop     digest.Digest
	hopKey  string
	exp     time.Time
	actions map[string]class
	now     func() time.Time
	stopped chan struct{}
	reason  error
	ledger  *baselineMemory
}

func newBaselineGuard(g *Guard) *baselineGuard {
	return &baselineGuard{hop: g.hop, hopKey: g.hopKey, exp: g.exp, actions: g.actions, now: g.now, stopped: make(chan struct{}),
		ledger: &baselineMemory{effects: map[string]baselineRecord{}, hops: map[string]authority.HopRecord{}}}
}

func (g *baselineGuard) authorize(ctx context.Context, c Call) error {
	if !c.Hop.Equal(g.hop) {
		return &Refusal{Action: c.Action, Err: ErrOtherHop}
	}
	select {
	case <-g.stopped:
		return &Refusal{Action: c.Action, Err: g.reason}
	default:
	}
	now := g.now()
	if !now.Before(g.exp) {
		return &Refusal{Action: c.Action, Err: fmt.Errorf("%w: the offer expired at %s", ErrStopped, g.exp.Format(time.RFC3339))}
	}
	cl := g.actions[c.Action]
	switch cl {
	case denied:
		return &Refusal{Action: c.Action, Err: ErrDenied}
	case unlisted:
		return &Refusal{Action: c.Action, Err: ErrUnlisted}
	case mustAsk:
		if c.OperationID == "" && c.IdempotencyKey == "" {
			return &Refusal{Action: c.Action, Err: ErrUnnamed}
		}
	}
	if c.OperationID == "" && c.IdempotencyKey == "" {
		return nil
	}
	err := g.ledger.perform(ctx, baselineEffect{hop: g.hopKey, action: c.Action, operationID: c.OperationID,
		idempotencyKey: c.IdempotencyKey, needsApproval: cl == mustAsk, at: now})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, authority.ErrRepeated):
		return &Refusal{Action: c.Action, Key: c.OperationID, Err: ErrRepeated}
	default:
		return &Refusal{Action: c.Action, Err: fmt.Errorf("%w: %w", ErrLedger, err)}
	}
}

type baselineEffect struct {
	hop, action, operationID, idempotencyKey string
	needsApproval                            bool
	at                                       time.Time
}

type baselineRecord struct {
	hop, action, approval string
	at                    int64
}

// baselineMemory is authority.Memory's Perform as it was before issue 33,
// for effects that need no approval.
type baselineMemory struct {
	mu      sync.Mutex
	effects map[string]baselineRecord
	hops    map[string]authority.HopRecord
}

func (m *baselineMemory) perform(ctx context.Context, e baselineEffect) error {
	if e.hop == "" || e.action == "" || (e.operationID == "" && e.idempotencyKey == "") {
		return authority.ErrInvalid
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", authority.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.hops[e.hop]; ok && h.Final != nil {
		return fmt.Errorf("%w: %s (%s)", authority.ErrFinished, e.hop, h.Final.State)
	}
	for _, n := range [2]string{e.operationID, e.idempotencyKey} {
		if _, ok := m.effects[n]; ok && n != "" {
			return &authority.Refusal{Held: authority.Record{Name: n}}
		}
	}
	if e.needsApproval {
		return authority.ErrNoApproval
	}
	r := baselineRecord{hop: e.hop, action: e.action, at: e.at.UnixNano()}
	if e.operationID != "" {
		m.effects[e.operationID] = r
	}
	if e.idempotencyKey != "" && e.idempotencyKey != e.operationID {
		m.effects[e.idempotencyKey] = r
	}
	return nil
}
