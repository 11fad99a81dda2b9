package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
)

// testSwap: Swap writes State, Status and Expires when the held State and
// Status are old's, keeps Digest, Token and Created, and otherwise returns
// the record held, unchanged; a retried Swap reports its own write.
func (s *suite) testSwap(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	exp := c.Now().Add(c.long())
	k := key("swap")
	rec := fresh("offer", c.Now(), exp)
	mustRemember(t, st, k, rec)

	taken := rec
	taken.State, taken.Expires = "accepted", time.Time{}
	held, swapped, err := st.Swap(ctx, k, rec, replay.Record{State: "accepted"})
	require.NoError(t, err)
	assert.True(t, swapped, "Swap from the held state")
	equal(t, taken, held, "Swap: record held after")
	mustGet(t, st, k, taken)

	// The same call again, as a client library retries it after a lost
	// reply: its write is found.
	held, swapped, err = st.Swap(ctx, k, rec, replay.Record{State: "accepted"})
	require.NoError(t, err)
	assert.True(t, swapped, "a retried Swap reports its own write")
	equal(t, taken, held, "retried Swap: record held after")

	// A Swap from a state no longer held writes nothing and returns what
	// is held.
	held, swapped, err = st.Swap(ctx, k, rec, replay.Record{State: "rejected", Status: []byte("rejected"), Expires: exp})
	require.NoError(t, err)
	assert.False(t, swapped, "Swap from a state no longer held")
	equal(t, taken, held, "Swap refused: record held")
	mustGet(t, st, k, taken)

	// From the held state, with a status and an expiry; old without a
	// token compares the digest only.
	done := taken
	done.State, done.Status, done.Expires = "completed", []byte("\x00completed\xff"), exp.Add(c.long())
	held, swapped, err = st.Swap(ctx, k, replay.Record{Digest: rec.Digest, State: "accepted"},
		replay.Record{Digest: digest("ignored"), Token: token("ignored"), State: done.State, Status: done.Status, Expires: done.Expires})
	require.NoError(t, err)
	assert.True(t, swapped)
	equal(t, done, held, "Swap with a status: record held after")
	mustGet(t, st, k, done)
	// A status differing from the held one is another state.
	_, swapped, err = st.Swap(ctx, k, replay.Record{Digest: rec.Digest, State: "completed", Status: []byte("other")},
		replay.Record{State: "failed", Status: []byte("failed")})
	require.NoError(t, err)
	assert.False(t, swapped, "Swap from a status no longer held")
	mustGet(t, st, k, done)

	// The identity must be the held one's.
	for name, old := range map[string]replay.Record{
		"digest": {Digest: digest("other offer"), State: "completed", Status: done.Status},
		"token":  {Digest: rec.Digest, Token: token("other call"), State: "completed", Status: done.Status},
	} {
		_, swapped, err := st.Swap(ctx, k, old, replay.Record{State: "failed"})
		require.ErrorIs(t, err, replay.ErrConflict, "Swap with another %s", name)
		assert.False(t, swapped)
		mustGet(t, st, k, done)
	}
	_, _, err = st.Swap(ctx, key("absent"), rec, taken)
	require.ErrorIs(t, err, replay.ErrNotFound, "Swap of an absent hop")
	mustBeAbsent(t, st, key("absent"))
	_, _, err = st.Swap(ctx, replay.Key{Iss: "i"}, rec, taken)
	require.ErrorIs(t, err, replay.ErrInvalid, "Swap with an empty hop")
	_, _, err = st.Swap(ctx, k, replay.Record{Digest: []byte("short")}, taken)
	require.ErrorIs(t, err, replay.ErrInvalid, "Swap with a short digest")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = st.Swap(canceled, k, done, replay.Record{State: "failed"})
	require.ErrorIs(t, err, context.Canceled)
	mustGet(t, st, k, done)

	// Swap's expiry is kept: the record goes at it.
	short := fresh("short", c.Now(), exp.Add(c.long()))
	mustRemember(t, st, key("short"), short)
	until := c.Now().Add(c.ttl())
	_, swapped, err = st.Swap(ctx, key("short"), short, replay.Record{State: "rejected", Status: []byte("r"), Expires: until})
	require.NoError(t, err)
	require.True(t, swapped)
	c.justBefore(until)
	got, ok, err := st.Get(ctx, key("short"))
	require.NoError(t, err)
	require.True(t, ok, "record absent before the Expires Swap gave it")
	assert.True(t, got.Expires.Equal(until), "Expires %s, want %s", got.Expires, until)
	c.at(until)
	mustBeAbsent(t, st, key("short"))
	_, _, err = st.Swap(ctx, key("short"), short, replay.Record{State: "accepted"})
	require.ErrorIs(t, err, replay.ErrNotFound, "Swap of an expired record")
}

// testConcurrentSwaps: of concurrent Swaps from one state, exactly one
// writes; every other returns the winner's record.
func (s *suite) testConcurrentSwaps(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	k := key("contended")
	rec := fresh("offer", c.Now(), c.Now().Add(c.long()))
	mustRemember(t, st, k, rec)
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
		helds   []replay.Record
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status := fmt.Sprint("status of call ", i)
			held, swapped, err := st.Swap(ctx, k, rec, replay.Record{State: "accepted", Status: []byte(status)})
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			if swapped {
				winners = append(winners, status)
			}
			helds = append(helds, held)
		}()
	}
	wg.Wait()
	require.Len(t, winners, 1, "exactly one Swap writes")
	for _, h := range helds {
		assert.Equal(t, winners[0], string(h.Status), "every Swap returns the record held after the winner")
	}
}
