package replay_test

import (
	"context"
	"crypto/sha256"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
)

// within fails the test when fn has not returned after a few seconds: a
// deadlock, reported instead of hanging the run.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return: the store called its clock while holding a lock the clock needs", what)
	}
}

// TestMemoryClockCallsBack: the store reads its clock holding none of its
// locks, so a clock that calls back into the store (as an application's
// clock may call the Agent that owns the store) does not deadlock.
func TestMemoryClockCallsBack(t *testing.T) {
	ctx := context.Background()
	var s *replay.Memory
	var inside atomic.Bool
	k := replay.Key{Iss: "iss", Hop: "hop"}
	now := time.Unix(1e9, 0)
	clock := func() time.Time {
		if inside.CompareAndSwap(false, true) {
			_, _, _ = s.Get(ctx, k) // the same key, so the same shard
			inside.Store(false)
		}
		return now
	}
	s = replay.NewMemory(replay.MemoryOptions{MaxEntries: 1, MaxPerIssuer: -1, Now: clock})
	d := sha256.Sum256([]byte("offer"))
	rec := replay.Record{Digest: d[:], Expires: now.Add(time.Second)}
	within(t, "Remember", func() {
		_, ok, err := s.Remember(ctx, k, rec)
		require.NoError(t, err)
		require.True(t, ok)
	})
	within(t, "Remember of a held key", func() { _, _, _ = s.Remember(ctx, k, rec) })
	within(t, "Get", func() { _, _, _ = s.Get(ctx, k) })
	within(t, "Update", func() { _ = s.Update(ctx, k, rec) })
	within(t, "Untaken", func() { _, _ = s.Untaken(ctx, now) })
	within(t, "Remember into a full store", func() {
		now = now.Add(2 * time.Second) // k expired: the full store sweeps
		_, _, _ = s.Remember(ctx, replay.Key{Iss: "iss", Hop: "other"}, rec)
	})
	within(t, "Release", func() { _ = s.Release(ctx, k, d[:]) })
}

// TestMemoryOffersClockCallsBack is TestMemoryClockCallsBack for the
// delegator's store.
func TestMemoryOffersClockCallsBack(t *testing.T) {
	ctx := context.Background()
	var s *replay.MemoryOffers
	var inside atomic.Bool
	now := time.Unix(1e9, 0)
	clock := func() time.Time {
		if inside.CompareAndSwap(false, true) {
			_, _, _ = s.Get(ctx, "hop")
			inside.Store(false)
		}
		return now
	}
	s = replay.NewMemoryOffers(replay.MemoryOffersOptions{Now: clock})
	d := sha256.Sum256([]byte("offer"))
	var rec replay.OfferRecord
	within(t, "Create", func() {
		var err error
		rec, err = s.Create(ctx, replay.OfferRecord{Hop: "hop", To: "to", Digest: d[:], Open: true})
		require.NoError(t, err)
	})
	within(t, "Get", func() { _, _, _ = s.Get(ctx, "hop") })
	within(t, "List", func() { _, _ = s.List(ctx, replay.OfferQuery{}) })
	within(t, "Swap", func() {
		next := rec
		next.Open = false
		var err error
		rec, err = s.Swap(ctx, rec, next)
		require.NoError(t, err)
	})
	within(t, "Delete", func() { require.NoError(t, s.Delete(ctx, "hop", rec.Version)) })
}
