package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentproto/handoff/replay"
)

// baseline keeps the time per operation of the memory store's run of each
// benchmark, for the ratio the backend's run reports.
type baseline struct {
	mu sync.Mutex
	ns map[string]float64
}

// run runs fn as the sub-benchmark name of b, first for the memory store
// (the baseline) and then for the backend, which reports "x-memory": its
// time per operation as a multiple of the baseline's in the same run.
func (bl *baseline) run(b *testing.B, name string, stores []namedOpen, fn func(b *testing.B, st any)) {
	b.Run(name, func(b *testing.B) {
		for i, st := range stores {
			b.Run(st.name, func(b *testing.B) {
				s := st.open(b)
				defer s.Close()
				fn(b, s)
				if b.N == 0 || b.Elapsed() == 0 {
					return
				}
				per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				bl.mu.Lock()
				defer bl.mu.Unlock()
				if i == 0 {
					bl.ns[name] = per
				} else if base := bl.ns[name]; base > 0 {
					b.ReportMetric(per/base, "x-memory")
				}
			})
		}
	})
}

type closer interface{ Close() error }

type namedOpen struct {
	name string
	open func(b *testing.B) closer
}

// Bench measures a backend against the in-memory store, the baseline, in
// the same run: Remember of a new hop (the receiver's path for every fresh
// offer), serially and in parallel, Remember of a held hop (a
// retransmission), and Get of a held hop in parallel. Each backend result
// carries the metric x-memory, its time per operation as a multiple of the
// memory store's. For example:
//
//	go test -run '^$' -bench . ./replay/boltstore
//
// open returns a fresh store for one sub-benchmark; it may skip or fail b.
func Bench(b *testing.B, name string, open func(b *testing.B) replay.Store) {
	stores := []namedOpen{
		{"memory", func(*testing.B) closer { return replay.NewMemory(replay.MemoryOptions{MaxEntries: 1 << 30}) }},
		{name, func(b *testing.B) closer { return open(b) }},
	}
	bl := &baseline{ns: map[string]float64{}}
	var next atomic.Uint64
	ctx := context.Background()
	bl.run(b, "Remember/serial", stores, func(b *testing.B, st any) {
		s := st.(replay.Store)
		for b.Loop() {
			k, r := benchRecord(next.Add(1))
			if _, ok, err := s.Remember(ctx, k, r); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	bl.run(b, "Remember/parallel", stores, func(b *testing.B, st any) {
		s := st.(replay.Store)
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
	bl.run(b, "Remember/held", stores, func(b *testing.B, st any) {
		s := st.(replay.Store)
		k, r := benchRecord(next.Add(1))
		if _, _, err := s.Remember(ctx, k, r); err != nil {
			b.Fatal(err)
		}
		again := r
		again.Token = make([]byte, replay.TokenSize) // another delivery
		b.ResetTimer()
		for b.Loop() {
			if _, ok, err := s.Remember(ctx, k, again); err != nil || ok {
				b.Fatal(ok, err)
			}
		}
	})
	bl.run(b, "Get", stores, func(b *testing.B, st any) {
		s := st.(replay.Store)
		const held = 1024
		keys := make([]replay.Key, held)
		for i := range keys {
			k, r := benchRecord(next.Add(1))
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
	})
}

func benchRecord(i uint64) (replay.Key, replay.Record) {
	d := sha256.Sum256(binary.BigEndian.AppendUint64(nil, i))
	return replay.Key{Iss: "https://delegator.example/agents/a1", Hop: fmt.Sprintf("hop-%016x", i)},
		replay.Record{Digest: d[:], Token: d[:replay.TokenSize], Created: time.Now(), Expires: time.Now().Add(time.Hour)}
}

// BenchOffers measures an OfferStore against replay.MemoryOffers, the
// baseline, in the same run: the delegator's life of one hop (Create, a
// Swap for the accepted status, a Swap that resolves it), serially and in
// parallel, Get of a held record, and Create refused by HC-42. Each
// backend result carries the metric x-memory.
func BenchOffers(b *testing.B, name string, open func(b *testing.B) replay.OfferStore) {
	stores := []namedOpen{
		{"memory", func(*testing.B) closer { return replay.NewMemoryOffers(replay.MemoryOffersOptions{}) }},
		{name, func(b *testing.B) closer { return open(b) }},
	}
	bl := &baseline{ns: map[string]float64{}}
	var next atomic.Uint64
	ctx := context.Background()
	life := func(s replay.OfferStore) error {
		i := next.Add(1)
		d := sha256.Sum256(binary.BigEndian.AppendUint64(nil, i))
		hop := fmt.Sprintf("hop-%016x", i)
		r, err := s.Create(ctx, replay.OfferRecord{Hop: hop, To: "spiffe://b.example/agent/coder", Digest: d[:],
			Work: hop, Open: true, Handoff: make([]byte, 1024), Created: time.Now()})
		if err != nil {
			return err
		}
		acc := r
		acc.State, acc.Status, acc.Observed = "accepted", make([]byte, 256), true
		if r, err = s.Swap(ctx, r, acc); err != nil {
			return err
		}
		done := r
		done.Open, done.State, done.Expires = false, "completed", time.Now().Add(time.Hour)
		_, err = s.Swap(ctx, r, done)
		return err
	}
	bl.run(b, "Life/serial", stores, func(b *testing.B, st any) {
		s := st.(replay.OfferStore)
		for b.Loop() {
			if err := life(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	bl.run(b, "Life/parallel", stores, func(b *testing.B, st any) {
		s := st.(replay.OfferStore)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := life(s); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	bl.run(b, "Get", stores, func(b *testing.B, st any) {
		s := st.(replay.OfferStore)
		d := sha256.Sum256([]byte("get"))
		if _, err := s.Create(ctx, replay.OfferRecord{Hop: "get", To: "t", Digest: d[:], Handoff: make([]byte, 1024)}); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, ok, err := s.Get(ctx, "get"); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	bl.run(b, "CreateBusy", stores, func(b *testing.B, st any) {
		s := st.(replay.OfferStore)
		d := sha256.Sum256([]byte("busy"))
		if _, err := s.Create(ctx, replay.OfferRecord{Hop: "holder", To: "t", Digest: d[:], Work: "job", Open: true}); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			_, err := s.Create(ctx, replay.OfferRecord{Hop: "other", To: "t", Digest: d[:], Work: "job", Open: true})
			if !errors.Is(err, replay.ErrBusy) {
				b.Fatal(err)
			}
		}
	})
}
