package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
)

// OfferOpenFunc returns a new, empty OfferStore that reads the time from
// now. The suite closes every store it is given exactly once.
type OfferOpenFunc func(t *testing.T, now func() time.Time) replay.OfferStore

// OfferOptions describes the OfferStore under test to RunOffers. The zero
// value describes a store that keeps time by the clock it is given and does
// not survive a restart.
type OfferOptions struct {
	// RealTime and Margin are as in Options.
	RealTime bool
	Margin   time.Duration
	// Reopen is as in Options, for OfferStores.
	Reopen func(t *testing.T, closed replay.OfferStore, now func() time.Time) replay.OfferStore
	// MaxRecords is the number of records the stores returned by open hold
	// at most, or zero when they are unbounded or the bound is too large
	// to fill in a test. When set, the Bounded subtest fills the store.
	MaxRecords int
}

// RunOffers runs the conformance suite of the OfferStore contract, written
// on replay.OfferStore, against the stores returned by open, each subtest
// with a fresh store.
func RunOffers(t *testing.T, open OfferOpenFunc, opts OfferOptions) {
	if opts.Margin <= 0 {
		opts.Margin = 300 * time.Millisecond
	}
	s := &offerSuite{open: open, opts: opts}
	for _, tt := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Invalid", s.testInvalid},
		{"CreateGet", s.testCreateGet},
		{"Exists", s.testExists},
		{"Swap", s.testSwap},
		{"SwapImmutable", s.testSwapImmutable},
		{"SwapContention", s.testSwapContention},
		{"Delete", s.testDelete},
		{"VersionsNeverRepeat", s.testVersions},
		{"HC42_WorkBusy", s.testBusy},
		{"HC42_ConcurrentCreatesOneWork", s.testConcurrentWork},
		{"ConcurrentCreatesOneHop", s.testConcurrentHop},
		{"List", s.testList},
		{"Expiry", s.testExpiry},
		{"NoAliasing", s.testNoAliasing},
		{"Context", s.testContext},
		{"Restart", s.testRestart},
		{"Bounded", s.testBounded},
	} {
		t.Run(tt.name, tt.fn)
	}
}

type offerSuite struct {
	open OfferOpenFunc
	opts OfferOptions
}

func (s *offerSuite) clock() *clock {
	return &clock{real: s.opts.RealTime, margin: s.opts.Margin, t: base}
}

func (s *offerSuite) openWith(t *testing.T, c *clock) replay.OfferStore {
	t.Helper()
	now := c.Now
	if c.real {
		now = time.Now
	}
	st := s.open(t, now)
	require.NotNil(t, st, "open returned a nil store")
	return st
}

func (s *offerSuite) start(t *testing.T) (replay.OfferStore, *clock) {
	t.Helper()
	c := s.clock()
	st := s.openWith(t, c)
	t.Cleanup(func() { assert.NoError(t, st.Close(), "Close") })
	return st, c
}

// offerRec is an open offer of hop for work, made at created.
func offerRec(hop, work string, created time.Time) replay.OfferRecord {
	return replay.OfferRecord{
		Hop: hop, To: "spiffe://b.example/agent/coder", Digest: digest("offer " + hop),
		Work: work, Open: true, Handoff: []byte("{\"offer\":\"" + hop + "\"}"), Created: created,
	}
}

func showOffer(r replay.OfferRecord) string {
	return fmt.Sprintf("%+v", r)
}

func equalOffer(t *testing.T, want, got replay.OfferRecord, msg string) {
	t.Helper()
	if !want.Equal(got) {
		t.Errorf("%s:\n got  %s\n want %s", msg, showOffer(got), showOffer(want))
	}
}

func mustCreate(t *testing.T, st replay.OfferStore, rec replay.OfferRecord) replay.OfferRecord {
	t.Helper()
	got, err := st.Create(context.Background(), rec)
	require.NoError(t, err, "Create %s", rec.Hop)
	require.NotZero(t, got.Version, "Create %s: no Version", rec.Hop)
	rec.Version = got.Version
	equalOffer(t, rec, got, "Create: stored record")
	return got
}

func mustGetOffer(t *testing.T, st replay.OfferStore, want replay.OfferRecord) {
	t.Helper()
	got, ok, err := st.Get(context.Background(), want.Hop)
	require.NoError(t, err, "Get %s", want.Hop)
	if !ok {
		t.Errorf("Get %s: no record, want %s", want.Hop, showOffer(want))
		return
	}
	equalOffer(t, want, got, "Get")
}

func mustNotHold(t *testing.T, st replay.OfferStore, hop string) {
	t.Helper()
	got, ok, err := st.Get(context.Background(), hop)
	require.NoError(t, err, "Get %s", hop)
	if ok {
		t.Errorf("Get %s: found %s, want none", hop, showOffer(got))
	}
}

func (s *offerSuite) testInvalid(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	good := offerRec("h1", "w", c.Now())
	bad := map[string]func(r *replay.OfferRecord){
		"empty hop":           func(r *replay.OfferRecord) { r.Hop = "" },
		"empty to":            func(r *replay.OfferRecord) { r.To = "" },
		"short digest":        func(r *replay.OfferRecord) { r.Digest = r.Digest[:31] },
		"no digest":           func(r *replay.OfferRecord) { r.Digest = nil },
		"short prev":          func(r *replay.OfferRecord) { r.Prev = make([]byte, 31) },
		"empty prev":          func(r *replay.OfferRecord) { r.Prev = []byte{} },
		"open that expires":   func(r *replay.OfferRecord) { r.Expires = c.Now().Add(time.Hour) },
		"long prev":           func(r *replay.OfferRecord) { r.Prev = make([]byte, 33) },
		"digest of 64 octets": func(r *replay.OfferRecord) { r.Digest = make([]byte, 64) },
	}
	for name, mod := range bad {
		r := good
		mod(&r)
		_, err := st.Create(ctx, r)
		assert.ErrorIs(t, err, replay.ErrInvalid, "Create with %s", name)
	}
	mustNotHold(t, st, "h1")
	_, _, err := st.Get(ctx, "")
	assert.ErrorIs(t, err, replay.ErrInvalid, "Get of an empty hop")
	assert.ErrorIs(t, st.Delete(ctx, "", 1), replay.ErrInvalid, "Delete of an empty hop")

	held := mustCreate(t, st, good)
	for name, mod := range bad {
		r := held
		mod(&r)
		_, err := st.Swap(ctx, held, r)
		assert.ErrorIs(t, err, replay.ErrInvalid, "Swap with %s", name)
	}
	mustGetOffer(t, st, held)
}

func (s *offerSuite) testCreateGet(t *testing.T) {
	st, c := s.start(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	recs := []replay.OfferRecord{
		offerRec("plain", "", c.Now()),
		{
			Hop: "h\x00|{}é", To: "to \xff", Digest: digest("d"), Prev: digest("prev"), Work: "work \x00 é",
			Open: true, Handoff: all, State: "accepted", Reason: "r", Status: []byte("\x00status\xff"),
			Canceled: true, Observed: true, Created: c.Now().Add(123456789 * time.Nanosecond),
		},
		{
			Hop: strings.Repeat("h", 2048), To: "t", Digest: make([]byte, 32), Handoff: []byte(strings.Repeat("\x00\xff", 64<<10)),
			State: "completed", Created: time.Date(1969, 7, 20, 20, 17, 40, 1, time.UTC),
			Expires: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		},
		{Hop: "resolved", To: "t", Digest: digest("r"), State: "failed", Expires: c.Now().Add(c.long()).Add(time.Nanosecond)},
	}
	for _, r := range recs {
		got := mustCreate(t, st, r)
		mustGetOffer(t, st, got)
	}
	mustNotHold(t, st, "absent")
}

func (s *offerSuite) testExists(t *testing.T) {
	st, c := s.start(t)
	orig := offerRec("h1", "", c.Now())
	first := mustCreate(t, st, orig)
	other := offerRec("h1", "", c.Now().Add(time.Second))
	other.Digest = digest("another offer")
	_, err := st.Create(context.Background(), other)
	assert.ErrorIs(t, err, replay.ErrExists)
	mustGetOffer(t, st, first)

	// The same Create again (a retry after a lost reply) reports the
	// record it inserted.
	again, err := st.Create(context.Background(), orig)
	require.NoError(t, err, "the same Create again")
	equalOffer(t, first, again, "the same Create again")
	// Not once the record has changed.
	next := first
	next.State = "accepted"
	_, err = st.Swap(context.Background(), first, next)
	require.NoError(t, err)
	_, err = st.Create(context.Background(), orig)
	assert.ErrorIs(t, err, replay.ErrExists, "Create of the original after a Swap")
}

func (s *offerSuite) testSwap(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	v1 := mustCreate(t, st, offerRec("h1", "w", c.Now()))
	next := v1
	next.State, next.Status, next.Observed = "accepted", []byte("accepted status"), true
	v2, err := st.Swap(ctx, v1, next)
	require.NoError(t, err)
	assert.NotEqual(t, v1.Version, v2.Version, "Swap gives a new Version")
	next.Version = v2.Version
	equalOffer(t, next, v2, "Swap: stored record")
	mustGetOffer(t, st, v2)

	// A stale record loses.
	stale := v1
	stale.State = "rejected"
	_, err = st.Swap(ctx, v1, stale)
	assert.ErrorIs(t, err, replay.ErrConflict, "Swap with a stale Version")
	mustGetOffer(t, st, v2)

	// Resolving: Open goes false, with an expiry.
	done := v2
	done.Open, done.State, done.Expires = false, "completed", c.Now().Add(c.long())
	v3, err := st.Swap(ctx, v2, done)
	require.NoError(t, err)
	mustGetOffer(t, st, v3)

	// A resolved hop cannot be reopened.
	reopen := v3
	reopen.Open, reopen.Expires = true, time.Time{}
	_, err = st.Swap(ctx, v3, reopen)
	assert.ErrorIs(t, err, replay.ErrInvalid)

	// Absent.
	ghost := offerRec("ghost", "", c.Now())
	ghost.Version = v3.Version
	_, err = st.Swap(ctx, ghost, ghost)
	assert.ErrorIs(t, err, replay.ErrNotFound)
	mustNotHold(t, st, "ghost")
}

func (s *offerSuite) testSwapImmutable(t *testing.T) {
	st, c := s.start(t)
	held := mustCreate(t, st, offerRec("h1", "w", c.Now()))
	for name, mod := range map[string]func(r *replay.OfferRecord){
		"hop":     func(r *replay.OfferRecord) { r.Hop = "h2" },
		"to":      func(r *replay.OfferRecord) { r.To = "another" },
		"digest":  func(r *replay.OfferRecord) { r.Digest = digest("x") },
		"prev":    func(r *replay.OfferRecord) { r.Prev = digest("x") },
		"work":    func(r *replay.OfferRecord) { r.Work = "w2" },
		"handoff": func(r *replay.OfferRecord) { r.Handoff = []byte("x") },
		"created": func(r *replay.OfferRecord) { r.Created = r.Created.Add(time.Nanosecond) },
	} {
		r := held
		mod(&r)
		_, err := st.Swap(context.Background(), held, r)
		assert.ErrorIs(t, err, replay.ErrInvalid, "Swap changing %s", name)
	}
	mustGetOffer(t, st, held)
}

// testSwapContention has many goroutines add to one record by
// read-modify-Swap, retrying on ErrConflict: no update is lost.
func (s *offerSuite) testSwapContention(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	mustCreate(t, st, offerRec("h1", "", c.Now()))
	const goroutines, each = 8, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	conflicts := 0
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				for {
					cur, ok, err := st.Get(ctx, "h1")
					if !assert.NoError(t, err) || !assert.True(t, ok) {
						return
					}
					next := cur
					next.Status = append(append([]byte(nil), cur.Status...), byte(g))
					_, err = st.Swap(ctx, cur, next)
					if errors.Is(err, replay.ErrConflict) {
						mu.Lock()
						conflicts++
						mu.Unlock()
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	got, ok, err := st.Get(ctx, "h1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, got.Status, goroutines*each, "every update kept (%d conflicts retried)", conflicts)
	counts := map[byte]int{}
	for _, b := range got.Status {
		counts[b]++
	}
	for g := range goroutines {
		assert.Equal(t, each, counts[byte(g)], "updates of goroutine %d", g)
	}
}

func (s *offerSuite) testDelete(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	held := mustCreate(t, st, offerRec("h1", "w", c.Now()))
	assert.ErrorIs(t, st.Delete(ctx, "h1", held.Version+1000), replay.ErrConflict)
	mustGetOffer(t, st, held)
	require.NoError(t, st.Delete(ctx, "h1", held.Version))
	mustNotHold(t, st, "h1")
	assert.ErrorIs(t, st.Delete(ctx, "h1", held.Version), replay.ErrNotFound)
	_, err := st.Swap(ctx, held, held)
	assert.ErrorIs(t, err, replay.ErrNotFound, "Swap of a deleted record")
	// Deleting an open record frees its work.
	mustCreate(t, st, offerRec("h2", "w", c.Now()))
}

func (s *offerSuite) testVersions(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	seen := map[uint64]string{}
	note := func(r replay.OfferRecord, what string) {
		t.Helper()
		if prev, ok := seen[r.Version]; ok {
			t.Errorf("Version %d given twice: %s and %s", r.Version, prev, what)
		}
		seen[r.Version] = what
	}
	first := mustCreate(t, st, offerRec("h1", "", c.Now()))
	note(first, "create h1")
	require.NoError(t, st.Delete(ctx, "h1", first.Version))
	again := mustCreate(t, st, offerRec("h1", "", c.Now()))
	note(again, "create h1 again")
	// The first record's Version does not match the second record.
	_, err := st.Swap(ctx, first, first)
	assert.ErrorIs(t, err, replay.ErrConflict, "Swap with the Version of a deleted record")
	assert.ErrorIs(t, st.Delete(ctx, "h1", first.Version), replay.ErrConflict)
	for i := range 5 {
		r := mustCreate(t, st, offerRec(fmt.Sprint("other ", i), "", c.Now()))
		note(r, r.Hop)
		next := r
		next.State = "accepted"
		r2, err := st.Swap(ctx, r, next)
		require.NoError(t, err)
		note(r2, r.Hop+" swapped")
	}
}

func (s *offerSuite) testBusy(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	a := mustCreate(t, st, offerRec("a", "job-1", c.Now()))
	_, err := st.Create(ctx, offerRec("b", "job-1", c.Now()))
	var busy *replay.BusyError
	require.ErrorAs(t, err, &busy, "a second open offer for one work while the first is unresolved (HC-42)")
	assert.ErrorIs(t, err, replay.ErrBusy)
	assert.Equal(t, "a", busy.Hop, "the error names the unresolved hop")
	assert.Equal(t, "job-1", busy.Work)
	mustNotHold(t, st, "b")

	// Other work, untracked work, and resolved records do not block.
	mustCreate(t, st, offerRec("c", "job-2", c.Now()))
	mustCreate(t, st, offerRec("d", "", c.Now()))
	mustCreate(t, st, offerRec("e", "", c.Now()))
	closed := offerRec("f", "job-1", c.Now())
	closed.Open = false
	mustCreate(t, st, closed)

	// Once resolved, the work is free.
	done := a
	done.Open, done.State = false, "completed"
	_, err = st.Swap(ctx, a, done)
	require.NoError(t, err)
	b := mustCreate(t, st, offerRec("b", "job-1", c.Now()))
	_, err = st.Create(ctx, offerRec("g", "job-1", c.Now()))
	require.ErrorAs(t, err, &busy)
	assert.Equal(t, "b", busy.Hop)

	// A Swap that keeps the record open keeps the work held.
	upd := b
	upd.State = "accepted"
	_, err = st.Swap(ctx, b, upd)
	require.NoError(t, err)
	_, err = st.Create(ctx, offerRec("g", "job-1", c.Now()))
	require.ErrorIs(t, err, replay.ErrBusy)
}

func (s *offerSuite) testConcurrentWork(t *testing.T) {
	st, c := s.start(t)
	const goroutines = 32
	for round := range 4 {
		work := fmt.Sprint("job ", round)
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				_, errs[i] = st.Create(context.Background(), offerRec(fmt.Sprint(work, " hop ", i), work, c.Now()))
			}()
		}
		close(gate)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "hops %d and %d both created for one work", winner, i)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "no Create succeeded")
		for i, err := range errs {
			if i == winner {
				continue
			}
			var busy *replay.BusyError
			if assert.ErrorAs(t, err, &busy, "goroutine %d", i) {
				assert.Equal(t, fmt.Sprint(work, " hop ", winner), busy.Hop)
			}
		}
		list, err := st.List(context.Background(), replay.OfferQuery{Work: work})
		require.NoError(t, err)
		assert.Len(t, list, 1)
	}
}

func (s *offerSuite) testConcurrentHop(t *testing.T) {
	st, c := s.start(t)
	const goroutines = 32
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := offerRec("h1", "", c.Now())
			r.Digest = digest(fmt.Sprint("offer ", i))
			<-gate
			_, errs[i] = st.Create(context.Background(), r)
		}()
	}
	close(gate)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			assert.ErrorIs(t, err, replay.ErrExists)
		}
	}
	assert.Equal(t, 1, ok)
}

func (s *offerSuite) testList(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	t0 := c.Now()
	p1, p2 := digest("received 1"), digest("received 2")
	mk := func(hop, work string, prev []byte, open bool, created time.Duration) replay.OfferRecord {
		r := offerRec(hop, work, t0.Add(created))
		r.Prev, r.Open = prev, open
		return mustCreate(t, st, r)
	}
	// Created out of hop order, to check the ordering.
	mk("d", "w1", p1, true, 1)
	mk("a", "", p1, false, 3)
	b := mk("b", "w2", p2, true, 2)
	mk("c", "w1", nil, false, 2)
	mk("e", "", nil, true, 0)
	hops := func(q replay.OfferQuery) []string {
		t.Helper()
		recs, err := st.List(ctx, q)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			out = append(out, r.Hop)
		}
		return out
	}
	assert.Equal(t, []string{"e", "d", "b", "c", "a"}, hops(replay.OfferQuery{}), "all, by Created then Hop")
	assert.Equal(t, []string{"e", "d", "b"}, hops(replay.OfferQuery{OpenOnly: true}))
	assert.Equal(t, []string{"d", "a"}, hops(replay.OfferQuery{Prev: p1}), "cancel propagation: by Prev (HC-28)")
	assert.Equal(t, []string{"d"}, hops(replay.OfferQuery{Prev: p1, OpenOnly: true}))
	assert.Equal(t, []string{"d", "c"}, hops(replay.OfferQuery{Work: "w1"}))
	assert.Equal(t, []string{"d"}, hops(replay.OfferQuery{Work: "w1", OpenOnly: true}))
	assert.Empty(t, hops(replay.OfferQuery{Prev: digest("unknown")}))
	assert.Empty(t, hops(replay.OfferQuery{Work: "w2", Prev: p1}))
	recs, err := st.List(ctx, replay.OfferQuery{Work: "w2"})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	equalOffer(t, b, recs[0], "List: record")
}

func (s *offerSuite) testExpiry(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	exp := c.Now().Add(c.ttl())
	r := offerRec("h1", "w", c.Now())
	r.Open, r.Expires = false, exp
	held := mustCreate(t, st, r)
	long := offerRec("long", "", c.Now())
	long.Open, long.Expires = false, exp.Add(c.long())
	longHeld := mustCreate(t, st, long)

	c.justBefore(exp)
	mustGetOffer(t, st, held)
	c.stillBefore(t, exp)
	c.at(exp)
	mustNotHold(t, st, "h1")
	recs, err := st.List(ctx, replay.OfferQuery{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	equalOffer(t, longHeld, recs[0], "List after expiry")
	_, err = st.Swap(ctx, held, held)
	assert.ErrorIs(t, err, replay.ErrNotFound, "Swap of an expired record")
	assert.ErrorIs(t, st.Delete(ctx, "h1", held.Version), replay.ErrNotFound)
	// The hop may be created anew.
	mustCreate(t, st, offerRec("h1", "w", c.Now()))
}

func (s *offerSuite) testNoAliasing(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	in := offerRec("h1", "", c.Now())
	in.Prev, in.Status = digest("p"), []byte("status")
	want := in.Clone()
	got, err := st.Create(ctx, in)
	require.NoError(t, err)
	want.Version = got.Version
	for _, b := range [][]byte{in.Digest, in.Prev, in.Handoff, in.Status, got.Digest, got.Prev, got.Handoff, got.Status} {
		b[0] ^= 0xff
	}
	mustGetOffer(t, st, want)
	g, _, err := st.Get(ctx, "h1")
	require.NoError(t, err)
	next := g.Clone()
	next.Status = []byte("later")
	swapped, err := st.Swap(ctx, g, next)
	require.NoError(t, err)
	next.Status[0] ^= 0xff
	swapped.Status[1] ^= 0xff
	g.Digest[0] ^= 0xff
	want.Status, want.Version = []byte("later"), swapped.Version
	mustGetOffer(t, st, want)
	list, err := st.List(ctx, replay.OfferQuery{})
	require.NoError(t, err)
	list[0].Handoff[0] ^= 0xff
	mustGetOffer(t, st, want)
}

func (s *offerSuite) testContext(t *testing.T) {
	st, c := s.start(t)
	held := mustCreate(t, st, offerRec("held", "w", c.Now()))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"canceled", canceled, context.Canceled},
		{"deadline", expired, context.DeadlineExceeded},
	} {
		_, err := st.Create(tc.ctx, offerRec("new "+tc.name, "", c.Now()))
		assert.ErrorIs(t, err, tc.want, "Create")
		mustNotHold(t, st, "new "+tc.name)
		_, _, err = st.Get(tc.ctx, "held")
		assert.ErrorIs(t, err, tc.want, "Get")
		next := held
		next.State = "accepted"
		_, err = st.Swap(tc.ctx, held, next)
		assert.ErrorIs(t, err, tc.want, "Swap")
		assert.ErrorIs(t, st.Delete(tc.ctx, "held", held.Version), tc.want, "Delete")
		_, err = st.List(tc.ctx, replay.OfferQuery{})
		assert.ErrorIs(t, err, tc.want, "List")
		mustGetOffer(t, st, held)
	}
}

func (s *offerSuite) testRestart(t *testing.T) {
	if s.opts.Reopen == nil {
		t.Skip("store does not survive a restart (OfferOptions.Reopen is nil)")
	}
	c := s.clock()
	ctx := context.Background()
	st := s.openWith(t, c)
	open := true
	t.Cleanup(func() {
		if open {
			assert.NoError(t, st.Close(), "Close")
		}
	})
	reopen := func() {
		t.Helper()
		open = false
		require.NoError(t, st.Close(), "Close before reopening")
		now := c.Now
		if c.real {
			now = time.Now
		}
		st = s.opts.Reopen(t, st, now)
		require.NotNil(t, st, "Reopen returned a nil store")
		open = true
	}
	a := mustCreate(t, st, offerRec("a", "job", c.Now()))
	b0 := mustCreate(t, st, offerRec("b", "", c.Now()))
	b1next := b0
	b1next.State, b1next.Status, b1next.Observed = "accepted", []byte("status"), true
	b1, err := st.Swap(ctx, b0, b1next)
	require.NoError(t, err)
	short := offerRec("short", "", c.Now())
	short.Open, short.Expires = false, c.Now().Add(c.ttl())
	mustCreate(t, st, short)

	reopen()
	mustGetOffer(t, st, a)
	mustGetOffer(t, st, b1)
	// HC-42 holds across the restart.
	_, err = st.Create(ctx, offerRec("a2", "job", c.Now()))
	require.ErrorIs(t, err, replay.ErrBusy, "the work of an unresolved hop stays held across a restart")
	// Versions given before the restart are not given again.
	_, err = st.Swap(ctx, b0, b0)
	assert.ErrorIs(t, err, replay.ErrConflict)
	b2next := b1
	b2next.State = "completed"
	b2, err := st.Swap(ctx, b1, b2next)
	require.NoError(t, err)
	for _, v := range []uint64{a.Version, b0.Version, b1.Version} {
		assert.NotEqual(t, v, b2.Version, "a Version given before the restart")
	}
	c.at(short.Expires)
	reopen()
	mustNotHold(t, st, "short")
	mustGetOffer(t, st, b2)
}

// testBounded fills a bounded store: at its cap a new hop is refused with
// an *OffersFullError, no record is dropped, a Create retried still finds
// its own record, and a Delete or a resolved record's expiry makes room.
func (s *offerSuite) testBounded(t *testing.T) {
	n := s.opts.MaxRecords
	if n == 0 {
		t.Skip("store declares no bound (OfferOptions.MaxRecords is zero)")
	}
	st, c := s.start(t)
	ctx := context.Background()
	var in, held []replay.OfferRecord
	for i := range n - 1 {
		r := offerRec(fmt.Sprintf("h%d", i), fmt.Sprintf("w%d", i), c.Now())
		in = append(in, r)
		held = append(held, mustCreate(t, st, r))
	}
	exp := c.Now().Add(c.ttl())
	resolved := offerRec("resolved", "", c.Now())
	resolved.Open, resolved.Expires = false, exp
	mustCreate(t, st, resolved)

	over := func(hop string) {
		t.Helper()
		_, err := st.Create(ctx, offerRec(hop, "", c.Now()))
		var full *replay.OffersFullError
		require.ErrorAs(t, err, &full, "Create of %s beyond the cap", hop)
		assert.ErrorIs(t, err, replay.ErrFull)
		assert.Equal(t, n, full.Cap)
		mustNotHold(t, st, hop)
	}
	over("over")
	for _, h := range held {
		mustGetOffer(t, st, h)
	}
	got, err := st.Create(ctx, in[0])
	require.NoError(t, err, "the same Create again, at the cap")
	equalOffer(t, held[0], got, "Create again")

	require.NoError(t, st.Delete(ctx, held[0].Hop, held[0].Version))
	mustCreate(t, st, offerRec("over", "", c.Now()))
	over("over2")
	c.at(exp)
	mustCreate(t, st, offerRec("over2", "", c.Now()))
	over("over3")
}
