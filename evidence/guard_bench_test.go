package evidence

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/agentproto/handoff/evidence/authority"
)

// BenchmarkGuardAuthorize: Guard.Authorize on the in-memory ledger, in
// steady state, for an allowed action with no effect (a lookup in the
// package's authority) and for one that records a fresh operation id (the
// ledger's atomic check-and-record), each reported against a map lookup
// of the same keys measured in the same run (issue 23: at most 2 µs and
// 0 allocations).
func BenchmarkGuardAuthorize(b *testing.B) {
	run := func(b *testing.B, withID bool) {
		w := newWorld(b, handoffJWS, nil)
		g := newHopGuardTB(b, w, refundPackage(), authority.NewMemory())
		ctx := context.Background()
		ids := make([]string, b.N)
		set := make(map[string]struct{}, b.N)
		for i := range ids {
			ids[i] = "op-" + strconv.Itoa(i)
			set[ids[i]] = struct{}{}
		}
		c := g.call("ledger.read", "", "")
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			if withID {
				c.OperationID = ids[i]
			}
			if err := g.Authorize(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
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
		ns := float64(elapsed.Nanoseconds()) / float64(b.N)
		b.ReportMetric(mapNs, "map-ns/op")
		b.ReportMetric(ns/mapNs, "x-map")
	}
	b.Run("allowed", func(b *testing.B) { run(b, false) })
	b.Run("allowed+operation-id", func(b *testing.B) { run(b, true) })
}
