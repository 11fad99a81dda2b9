package replay_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/agentproto/handoff/replay"
)

// hopID is a hop identifier as handoff.NewHopID makes them: 16 random
// octets, base64url (22 characters).
func hopID(i uint64) string {
	d := sha256.Sum256(binary.BigEndian.AppendUint64(nil, i))
	return base64.RawURLEncoding.EncodeToString(d[:16])
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemoryBytesPerRecord reports the heap a Memory store holds per
// record without a status (a hop remembered, not yet answered), filled
// with n records of 8 issuers, as a receiver holds them: the metric
// B/record, for several n. It reports sizes, not times:
//
//	go test -run '^$' -bench MemoryBytesPerRecord -benchtime 1x ./replay
func BenchmarkMemoryBytesPerRecord(b *testing.B) {
	for _, n := range []int{1 << 16, 1 << 20} {
		b.Run(fmt.Sprint("records=", n), func(b *testing.B) {
			ctx := context.Background()
			now := time.Unix(1793000000, 123456789)
			var perRecord float64
			for b.Loop() {
				keys := make([]replay.Key, n) // the caller's, not counted
				for i := range keys {
					keys[i] = replay.Key{Iss: "spiffe://delegators.example/agent/" + string(rune('a'+i%8)), Hop: hopID(uint64(i))}
				}
				before := heapInUse()
				s := replay.NewMemory(replay.MemoryOptions{MaxEntries: 2 * n, MaxPerIssuer: -1, Now: func() time.Time { return now }})
				for i, k := range keys {
					d := sha256.Sum256([]byte(k.Hop))
					rec := replay.Record{Digest: d[:], Token: d[16:], Created: now, Expires: now.Add(time.Duration(i) * time.Millisecond)}
					if _, ok, err := s.Remember(ctx, k, rec); err != nil || !ok {
						b.Fatal(ok, err)
					}
				}
				after := heapInUse()
				perRecord = float64(after-before) / float64(n)
				runtime.KeepAlive(s)
				runtime.KeepAlive(keys)
			}
			b.ReportMetric(perRecord, "B/record")
		})
	}
}

// BenchmarkMemoryOffersBytesPerRecord reports the heap a MemoryOffers holds
// per record of an unanswered offer, beyond its Handoff's octets (here
// 700, an offer without a chain in CBOR): the metric B/record.
//
//	go test -run '^$' -bench MemoryOffersBytesPerRecord -benchtime 1x ./replay
func BenchmarkMemoryOffersBytesPerRecord(b *testing.B) {
	const n, handoffSize = 1 << 16, 700
	ctx := context.Background()
	now := time.Unix(1793000000, 123456789)
	var perRecord float64
	for b.Loop() {
		recs := make([]replay.OfferRecord, n) // the caller's, not counted
		for i := range recs {
			d := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
			recs[i] = replay.OfferRecord{Hop: hopID(uint64(i)), To: "spiffe://delegates.example/agent/coder", Digest: d[:],
				Open: true, Handoff: make([]byte, handoffSize), State: "offered", Created: now}
		}
		before := heapInUse()
		s := replay.NewMemoryOffers(replay.MemoryOffersOptions{MaxRecords: n, Now: func() time.Time { return now }})
		for _, r := range recs {
			if _, err := s.Create(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		after := heapInUse()
		perRecord = float64(after-before)/float64(n) - handoffSize
		runtime.KeepAlive(s)
		runtime.KeepAlive(recs)
	}
	b.ReportMetric(perRecord, "B/record")
}
