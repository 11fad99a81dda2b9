package replay_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return replay.NewMemory(replay.MemoryOptions{Now: now})
	}, storetest.Options{})
}

func TestMemoryBounded(t *testing.T) {
	const max = 200
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return replay.NewMemory(replay.MemoryOptions{MaxEntries: max, MaxPerIssuer: -1, Now: now})
	}, storetest.Options{MaxEntries: max})
}

func TestMemoryIssuerShare(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return replay.NewMemory(replay.MemoryOptions{MaxEntries: 1000, MaxPerIssuer: 40, Now: now})
	}, storetest.Options{MaxPerIssuer: 40})
}

func TestMemoryRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps")
	}
	// The real-time mode of the suite, exercised against a store known to
	// be correct, so that its margins are checked here too.
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return replay.NewMemory(replay.MemoryOptions{MaxEntries: 64, MaxPerIssuer: -1})
	}, storetest.Options{RealTime: true, MaxEntries: 64})
}

func TestMemoryDefaults(t *testing.T) {
	s := replay.NewMemory(replay.MemoryOptions{})
	defer s.Close()
	ctx := context.Background()
	k := replay.Key{Iss: "iss", Hop: "hop"}
	d := sha256.Sum256([]byte("offer"))
	// The default clock is the real one.
	_, inserted, err := s.Remember(ctx, k, replay.Record{Digest: d[:], Expires: time.Now().Add(-time.Second)})
	require.NoError(t, err)
	assert.True(t, inserted)
	_, ok, err := s.Get(ctx, k)
	require.NoError(t, err)
	assert.False(t, ok, "a record expired by the real clock is absent")
}

// TestMemoryFullSweep checks that a full store refuses while no record has
// expired and makes room from each record as soon as it expires.
func TestMemoryFullSweep(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := replay.NewMemory(replay.MemoryOptions{MaxEntries: 3, MaxPerIssuer: -1, Now: clock})
	ctx := context.Background()
	rec := func(i int, exp time.Time) replay.Record {
		d := sha256.Sum256(fmt.Appendf(nil, "offer %d", i))
		return replay.Record{Digest: d[:], Expires: exp}
	}
	k := func(i int) replay.Key { return replay.Key{Iss: "iss", Hop: fmt.Sprint(i)} }
	for i, exp := range []time.Time{now.Add(2 * time.Second), now.Add(time.Second), {}} {
		_, ok, err := s.Remember(ctx, k(i), rec(i, exp))
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, _, err := s.Remember(ctx, k(3), rec(3, time.Time{}))
	require.ErrorIs(t, err, replay.ErrFull)

	mu.Lock()
	now = now.Add(time.Second) // record 1 expires
	mu.Unlock()
	_, ok, err := s.Remember(ctx, k(3), rec(3, now.Add(time.Hour)))
	require.NoError(t, err)
	require.True(t, ok)
	_, _, err = s.Remember(ctx, k(4), rec(4, time.Time{}))
	require.ErrorIs(t, err, replay.ErrFull)

	mu.Lock()
	now = now.Add(time.Second) // record 0 expires
	mu.Unlock()
	_, ok, err = s.Remember(ctx, k(4), rec(4, time.Time{}))
	require.NoError(t, err)
	require.True(t, ok)

	// An Update that shortens a retention makes its record reclaimable.
	require.NoError(t, s.Update(ctx, k(3), rec(3, now.Add(time.Second))))
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	_, ok, err = s.Remember(ctx, k(5), rec(5, time.Time{}))
	require.NoError(t, err)
	require.True(t, ok)
	for _, i := range []int{2, 4, 5} {
		_, ok, err := s.Get(ctx, k(i))
		require.NoError(t, err)
		assert.True(t, ok, "record %d", i)
	}
}

func TestMemoryConcurrentFull(t *testing.T) {
	// Many writers racing for the last slots never exceed the bound.
	const max = 100
	s := replay.NewMemory(replay.MemoryOptions{MaxEntries: max, MaxPerIssuer: -1})
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted, full := 0, 0
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				d := sha256.Sum256(fmt.Appendf(nil, "%d/%d", g, i))
				_, ok, err := s.Remember(ctx, replay.Key{Iss: "iss", Hop: fmt.Sprint(g, "/", i)}, replay.Record{Digest: d[:]})
				mu.Lock()
				switch {
				case err == nil && ok:
					inserted++
				case err != nil:
					assert.ErrorIs(t, err, replay.ErrFull)
					full++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, max, inserted)
	assert.Equal(t, 16*20-max, full)
}

func TestMemoryOffers(t *testing.T) {
	storetest.RunOffers(t, func(t *testing.T, now func() time.Time) replay.OfferStore {
		return replay.NewMemoryOffers(replay.MemoryOffersOptions{MaxRecords: 8, Now: now})
	}, storetest.OfferOptions{MaxRecords: 8})
}

// BenchmarkMemoryRemember measures the in-memory store's Remember in a
// steady state: a fixed set of hops whose records expire and are replaced
// in place, so the map neither grows nor shrinks, with keys and records
// built before the timer starts. "new" is a fresh offer (insert), "held"
// a retransmission (the held record is copied out). Run with -benchmem;
// the new path allocates nothing.
func BenchmarkMemoryRemember(b *testing.B) {
	const n = 1 << 14
	var (
		mu  sync.Mutex
		now = time.Unix(2e9, 0)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	keys := make([]replay.Key, n)
	recs := make([]replay.Record, n)
	for i := range keys {
		d := sha256.Sum256([]byte(fmt.Sprint(i)))
		keys[i] = replay.Key{Iss: "https://delegator.example/agents/a1", Hop: fmt.Sprintf("hop-%08d", i)}
		recs[i] = replay.Record{Digest: d[:], Token: d[:replay.TokenSize], Created: now, Expires: now.Add(time.Second)}
	}
	ctx := context.Background()
	b.Run("new", func(b *testing.B) {
		s := replay.NewMemory(replay.MemoryOptions{Now: clock})
		// Fill, then move the clock past every expiry each round so that
		// the next round replaces each record in place.
		round := 0
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if i == n {
				i = 0
				round++
				b.StopTimer()
				mu.Lock()
				now = now.Add(time.Second)
				mu.Unlock()
				for j := range recs {
					recs[j].Expires = now.Add(time.Second)
				}
				b.StartTimer()
			}
			if _, ok, err := s.Remember(ctx, keys[i], recs[i]); err != nil || !ok {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.Run("held", func(b *testing.B) {
		s := replay.NewMemory(replay.MemoryOptions{Now: clock})
		for i := range keys {
			recs[i].Expires = clock().Add(time.Hour)
			if _, _, err := s.Remember(ctx, keys[i], recs[i]); err != nil {
				b.Fatal(err)
			}
		}
		other := make([]byte, replay.TokenSize)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			r := recs[i%n]
			r.Token = other
			if _, ok, err := s.Remember(ctx, keys[i%n], r); err != nil || ok {
				b.Fatal(ok, err)
			}
			i++
		}
	})
}

// TestMemoryBeyondSlot: what does not fit a record's slot (a hop of more
// than 29 octets, a state the draft does not name, a status, times outside
// 1678 to 2262) is kept exactly, and expires exactly, as well.
func TestMemoryBeyondSlot(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2999, 1, 1, 0, 0, 0, 5, time.UTC)
	clock := func() time.Time { return now }
	s := replay.NewMemory(replay.MemoryOptions{Now: clock})
	d := sha256.Sum256([]byte("offer"))
	k := replay.Key{Iss: "iss", Hop: strings.Repeat("h", 100)}
	rec := replay.Record{Digest: d[:], Token: d[:16], Created: time.Date(1500, 1, 1, 0, 0, 0, 7, time.UTC),
		Expires: time.Date(3000, 1, 1, 0, 0, 0, 9, time.UTC)}
	_, ok, err := s.Remember(ctx, k, rec)
	require.NoError(t, err)
	require.True(t, ok)
	got, ok, err := s.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, rec.Equal(got), "got %+v", got)

	next := replay.Record{State: "a state of its own", Status: []byte{0, 1, 2}, Expires: time.Date(3000, 1, 1, 0, 0, 0, 10, time.UTC)}
	held, swapped, err := s.Swap(ctx, k, rec, next)
	require.NoError(t, err)
	require.True(t, swapped)
	want := rec
	want.State, want.Status, want.Expires = next.State, next.Status, next.Expires
	assert.True(t, want.Equal(held), "held %+v", held)
	u, err := s.Untaken(ctx, now)
	require.NoError(t, err)
	assert.Empty(t, u)

	now = next.Expires.Add(-1)
	_, ok, err = s.Get(ctx, k)
	require.NoError(t, err)
	assert.True(t, ok, "kept until its expiry past 2262")
	now = next.Expires
	_, ok, err = s.Get(ctx, k)
	require.NoError(t, err)
	assert.False(t, ok, "gone at its expiry")
	_, ok, err = s.Remember(ctx, k, rec)
	require.NoError(t, err)
	assert.True(t, ok, "the slot and what was beside it are free again")
}
