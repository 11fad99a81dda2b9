package boltstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentproto/handoff/replay"
)

// The memory store is the baseline: compare bolt/* with memory/* in the
// output of
//
//	go test -run '^$' -bench . ./replay/boltstore
func benchStores(b *testing.B, fn func(b *testing.B, s replay.Store)) {
	b.Run("memory", func(b *testing.B) {
		s := replay.NewMemory(replay.MemoryOptions{MaxEntries: 1 << 30})
		defer s.Close()
		fn(b, s)
	})
	b.Run("bolt", func(b *testing.B) {
		s := openTemp(b, Options{MaxEntries: 1 << 30})
		defer s.Close()
		fn(b, s)
	})
}

func benchRecord(i uint64) (replay.Key, replay.Record) {
	d := sha256.Sum256(binary.BigEndian.AppendUint64(nil, i))
	return replay.Key{Iss: "https://delegator.example/agents/a1", Hop: fmt.Sprintf("hop-%016x", i)},
		replay.Record{Digest: d[:], Expires: time.Now().Add(time.Hour)}
}

// BenchmarkRemember measures Remember of a new hop, the receiver's path for
// every fresh offer.
func BenchmarkRemember(b *testing.B) {
	benchStores(b, func(b *testing.B, s replay.Store) {
		var next atomic.Uint64
		ctx := context.Background()
		b.Run("serial", func(b *testing.B) {
			for b.Loop() {
				k, r := benchRecord(next.Add(1))
				if _, ok, err := s.Remember(ctx, k, r); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
		b.Run("parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k, r := benchRecord(next.Add(1))
					if _, ok, err := s.Remember(ctx, k, r); err != nil || !ok {
						b.Error(ok, err)
						return
					}
				}
			})
		})
	})
}

// BenchmarkGet measures Get of a held hop.
func BenchmarkGet(b *testing.B) {
	benchStores(b, func(b *testing.B, s replay.Store) {
		ctx := context.Background()
		const held = 1024
		for i := range uint64(held) {
			k, r := benchRecord(i)
			if _, _, err := s.Remember(ctx, k, r); err != nil {
				b.Fatal(err)
			}
		}
		keys := make([]replay.Key, held)
		for i := range keys {
			keys[i], _ = benchRecord(uint64(i))
		}
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, ok, err := s.Get(ctx, keys[i%held]); err != nil || !ok {
					b.Error(ok, err)
					return
				}
				i++
			}
		})
	})
}
