package handoff

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/agentproto/handoff/replay"
)

// BenchmarkReceiveStoreSize measures the receive of a fresh offer against
// an in-memory store holding 1,000,000 records, against the same receive
// with an empty store, in one run: the metric x-empty of the full store's
// run is its time per receive as a multiple of the empty store's, measured
// before and after it (their mean, so that a drift of the machine's load
// weighs less). Each
// iteration receives a distinct offer signed beforehand; run it with a
// fixed count so that every offer is fresh:
//
//	go test -run '^$' -bench ReceiveStoreSize -benchtime 4000x .
func BenchmarkReceiveStoreSize(b *testing.B) {
	w := newWorld(b, JWS, stPlanner, stWorker)
	offers := make([][]byte, 8192)
	for i := range offers {
		offers[i] = encodeHandoff(b, handoffOf(w.offer(stPlanner, stWorker, nil)), JSON)
	}
	// per[round] holds each run's time per receive of that round's
	// sub-benchmark: -count runs each sub-benchmark count times in a row,
	// so that the k-th full run is paired with the k-th empty runs.
	var per [3][]float64
	for round, size := range []int{0, 1_000_000, 0} {
		b.Run(fmt.Sprint("records=", size), func(b *testing.B) {
			st := replay.NewMemory(replay.MemoryOptions{MaxEntries: 2 * size, MaxPerIssuer: -1, Now: w.clock.Now})
			fillMemory(b, st, size, w.clock.Now())
			a := w.agent(stWorker, func(c *Config) { c.Store = st })
			ctx := context.Background()
			runtime.GC() // the filling's garbage is not the receive's
			i := 0
			for b.Loop() {
				in, err := a.Receive(ctx, offers[i%len(offers)], Host{})
				if err != nil || (i < len(offers) && !in.Accepted()) {
					b.Fatal(err, in.Reason())
				}
				i++
			}
			per[round] = append(per[round], float64(b.Elapsed().Nanoseconds())/float64(b.N))
			if k := len(per[2]) - 1; round == 2 && k < len(per[0]) && k < len(per[1]) {
				b.ReportMetric(per[1][k]/((per[0][k]+per[2][k])/2), "x-empty")
			}
		})
	}
}

// fillMemory remembers n records of other hops, of 16 issuers, live for
// an hour.
func fillMemory(b *testing.B, st replay.Store, n int, now time.Time) {
	ctx := context.Background()
	for i := range n {
		d := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		k := replay.Key{Iss: fmt.Sprint("spiffe://filler.example/agent/", i%16), Hop: fmt.Sprintf("%x", d[:11])}
		if _, ok, err := st.Remember(ctx, k, replay.Record{Digest: d[:], Token: d[:16], Created: now, Expires: now.Add(time.Hour)}); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
