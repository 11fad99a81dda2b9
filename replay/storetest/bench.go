package storetest

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

// Bench measures a backend against the in-memory store, the baseline, in
// the same run: Remember of a new hop (the receiver's path for every fresh
// offer), serially and in parallel, and Get of a held hop in parallel.
// Compare name/* with memory/* in the output of, for example,
//
//	go test -run '^$' -bench . ./replay/boltstore
//
// open returns a fresh store for one sub-benchmark; it may skip or fail b.
func Bench(b *testing.B, name string, open func(b *testing.B) replay.Store) {
	stores := []struct {
		name string
		open func(b *testing.B) replay.Store
	}{
		{"memory", func(*testing.B) replay.Store { return replay.NewMemory(replay.MemoryOptions{MaxEntries: 1 << 30}) }},
		{name, open},
	}
	b.Run("Remember", func(b *testing.B) {
		for _, st := range stores {
			b.Run(st.name, func(b *testing.B) {
				s := st.open(b)
				defer s.Close()
				benchRemember(b, s)
			})
		}
	})
	b.Run("Get", func(b *testing.B) {
		for _, st := range stores {
			b.Run(st.name, func(b *testing.B) {
				s := st.open(b)
				defer s.Close()
				benchGet(b, s)
			})
		}
	})
}

func benchRecord(i uint64) (replay.Key, replay.Record) {
	d := sha256.Sum256(binary.BigEndian.AppendUint64(nil, i))
	return replay.Key{Iss: "https://delegator.example/agents/a1", Hop: fmt.Sprintf("hop-%016x", i)},
		replay.Record{Digest: d[:], Expires: time.Now().Add(time.Hour)}
}

func benchRemember(b *testing.B, s replay.Store) {
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
}

func benchGet(b *testing.B, s replay.Store) {
	ctx := context.Background()
	const held = 1024
	keys := make([]replay.Key, held)
	for i := range keys {
		k, r := benchRecord(uint64(i))
		if _, _, err := s.Remember(ctx, k, r); err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	b.ResetTimer()
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
}
