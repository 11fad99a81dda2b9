package pgauthority_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/agentproto/handoff/evidence/authority"
)

// BenchmarkPerform records effects of fresh operation ids on the in-memory
// ledger (the baseline) and on PostgreSQL, in the same run, and reports the
// statements (round trips) each Perform sends. Compare the two as a ratio:
// the absolute figures depend on the machine and the server.
func BenchmarkPerform(b *testing.B) {
	run := func(b *testing.B, l authority.Ledger, c *counter) {
		ctx := context.Background()
		e := effect("", "")
		var before int64
		if c != nil {
			before = c.n.Load()
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			e.OperationID = "op-" + strconv.Itoa(i)
			if err := l.Perform(ctx, e); err != nil {
				b.Fatal(err)
			}
		}
		if c != nil {
			b.ReportMetric(float64(c.n.Load()-before)/float64(b.N), "roundtrips/op")
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, authority.NewMemory(), nil) })
	b.Run("postgres", func(b *testing.B) {
		c := &counter{}
		db := testDB(b, c)
		run(b, mustOpen(b, db, testName(b, db)), c)
	})
	// Throughput: 8 callers per core on one pool, each with fresh names.
	parallel := func(b *testing.B, l authority.Ledger) {
		var next atomic.Int64
		b.SetParallelism(8)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			e := effect("", "")
			for pb.Next() {
				e.OperationID = "op-" + strconv.FormatInt(next.Add(1), 10)
				if err := l.Perform(context.Background(), e); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("memory-parallel", func(b *testing.B) { parallel(b, authority.NewMemory()) })
	b.Run("postgres-parallel", func(b *testing.B) {
		db := testDB(b, nil)
		parallel(b, mustOpen(b, db, testName(b, db)))
	})
}
