// Package storetest is the conformance suite for replay.Store
// implementations. Every store, in this module or outside it, is expected to
// pass Run; the contract it checks is the one written in the documentation
// of package replay.
//
// A store's test calls Run with a function that opens an empty store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
//			return mystore.New(mystore.Options{Now: now})
//		}, storetest.Options{})
//	}
package storetest

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
)

// OpenFunc returns a new, empty store that reads the time from now. The
// suite closes every store it is given exactly once.
type OpenFunc func(t *testing.T, now func() time.Time) replay.Store

// Options describes the store under test to Run. The zero value describes
// an unbounded store that keeps time by the clock it is given and does not
// survive a restart.
type Options struct {
	// RealTime declares that the store expires records by a clock the
	// suite does not control, such as a database server's. The suite then
	// passes time.Now to open, and the subtests that depend on expiry use
	// records that expire about a second and a half ahead and sleep past
	// them, allowing Margin on either side of Expires.
	RealTime bool
	// Margin is the tolerance around Expires in RealTime mode; zero means
	// 300ms. It is unused otherwise: with the suite's clock, a record must
	// be present one nanosecond before Expires and absent at Expires.
	Margin time.Duration

	// MaxEntries is the number of records the stores returned by open may
	// hold, or zero when they are unbounded or the bound is too large to
	// fill in a test. When set, the Bounded subtest fills the store.
	MaxEntries int

	// MaxPerIssuer is the number of records the stores returned by open
	// hold for one issuer (Key.Iss) at most, or zero when they keep no
	// per-issuer share or it is too large to fill in a test. When set, the
	// IssuerShare subtest floods one issuer to its share and checks that
	// another issuer's fresh record is still taken.
	MaxPerIssuer int

	// Reopen is given a store returned by open or by Reopen, which the
	// suite has already closed, and returns a new store over the same
	// storage, as a process would open it after a restart. Nil when the
	// store does not survive a restart; the Restart subtest is then
	// skipped.
	Reopen func(t *testing.T, closed replay.Store, now func() time.Time) replay.Store
}

// Run runs the conformance suite against the stores returned by open, each
// subtest with a fresh store. Beyond the contract of package replay, it
// expects:
//
//   - ErrInvalid, and no effect, for an empty Iss or Hop or a Digest that
//     is not 32 octets, from every method;
//   - from a method called with a context already canceled or past its
//     deadline, an error wrapping the context's error, and no effect;
//   - byte slices copied in and out: changing a Record passed to or
//     returned by the store does not change what it holds;
//   - records held byte for byte, whatever octets State and Status hold,
//     and Expires to the nanosecond;
//   - Remember and Update of held records to keep working when the store
//     is full.
func Run(t *testing.T, open OpenFunc, opts Options) {
	if opts.Margin <= 0 {
		opts.Margin = 300 * time.Millisecond
	}
	s := &suite{open: open, opts: opts}
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Invalid", s.testInvalid},
		{"RememberInserts", s.testRememberInserts},
		{"SameDigest", s.testSameDigest},
		{"DifferentDigest", s.testDifferentDigest},
		{"DistinctKeys", s.testDistinctKeys},
		{"ConcurrentInsertIfAbsent", s.testConcurrent},
		{"Expiry", s.testExpiry},
		{"ZeroExpiresNeverExpires", s.testZeroExpires},
		{"Update", s.testUpdate},
		{"UpdateExtendsRetention", s.testUpdateExtends},
		{"Swap", s.testSwap},
		{"ConcurrentSwaps", s.testConcurrentSwaps},
		{"RoundTrip", s.testRoundTrip},
		{"NoAliasing", s.testNoAliasing},
		{"Context", s.testContext},
		{"Bounded", s.testBounded},
		{"IssuerShare", s.testIssuerShare},
		{"Restart", s.testRestart},
		{"TokenIdempotent", s.testToken},
		{"ConcurrentTokens", s.testConcurrentTokens},
		{"UpdateKeepsTokenAndCreated", s.testUpdateKeepsIdentity},
		{"Untaken", s.testUntaken},
		{"Release", s.testRelease},
		{"ReleaseRacesUpdate", s.testReleaseRace},
		{"ReleaseThenStaleTake", s.testReleaseThenStaleTake},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.fn)
	}
}

type suite struct {
	open OpenFunc
	opts Options
}

// clock is the time seen by one subtest's store: a settable clock, or the
// real one in RealTime mode, where advancing means sleeping.
type clock struct {
	real   bool
	margin time.Duration
	mu     sync.Mutex
	t      time.Time
}

func (c *clock) Now() time.Time {
	if c.real {
		return time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// ttl is the lifetime of a short-lived record.
func (c *clock) ttl() time.Duration {
	if c.real {
		return 1500 * time.Millisecond
	}
	return time.Hour
}

// long is a lifetime that does not end during a subtest.
func (c *clock) long() time.Duration { return 1000 * time.Hour }

func (c *clock) advanceTo(t time.Time) {
	if c.real {
		time.Sleep(time.Until(t))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// justBefore advances to the last instant at which a record expiring at
// exp must still be held.
func (c *clock) justBefore(exp time.Time) {
	if c.real {
		c.advanceTo(exp.Add(-c.margin))
		return
	}
	c.advanceTo(exp.Add(-time.Nanosecond))
}

// stillBefore reports whether a check made just now was made before exp,
// so that finding the record present proves something. It is always true
// with the suite's clock.
func (c *clock) stillBefore(t *testing.T, exp time.Time) {
	t.Helper()
	if c.real && !time.Now().Before(exp) {
		t.Fatalf("the test ran too slowly: past Expires before the check returned")
	}
}

// at advances to the first instant at which a record expiring at exp must
// be absent.
func (c *clock) at(exp time.Time) {
	if c.real {
		c.advanceTo(exp.Add(c.margin))
		return
	}
	c.advanceTo(exp)
}

// base is the suite clock's starting time; its nanoseconds check that
// stores keep Expires exactly.
var base = time.Date(2031, time.March, 4, 5, 6, 7, 891011121, time.UTC)

// start opens a store with a fresh clock and closes it when the test ends.
func (s *suite) start(t *testing.T) (replay.Store, *clock) {
	t.Helper()
	c := &clock{real: s.opts.RealTime, margin: s.opts.Margin, t: base}
	now := c.Now
	if c.real {
		now = time.Now
	}
	st := s.open(t, now)
	require.NotNil(t, st, "open returned a nil store")
	t.Cleanup(func() { assert.NoError(t, st.Close(), "Close") })
	return st, c
}

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func key(hop string) replay.Key {
	return replay.Key{Iss: "https://delegator.example/agents/a1", Hop: hop}
}

func remembered(d string, exp time.Time) replay.Record {
	return replay.Record{Digest: digest(d), Expires: exp}
}

func equal(t *testing.T, want, got replay.Record, msg string) {
	t.Helper()
	if !want.Equal(got) {
		t.Errorf("%s:\n got  %s\n want %s", msg, show(got), show(want))
	}
}

func show(r replay.Record) string {
	exp := "none"
	if !r.Expires.IsZero() {
		exp = r.Expires.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("{Digest:%x Token:%x Created:%s Expires:%s State:%q Status:%q}", r.Digest, r.Token,
		r.Created.UTC().Format(time.RFC3339Nano), exp, r.State, r.Status)
}

func mustRemember(t *testing.T, st replay.Store, k replay.Key, rec replay.Record) {
	t.Helper()
	held, inserted, err := st.Remember(context.Background(), k, rec)
	require.NoError(t, err, "Remember %v", k)
	require.True(t, inserted, "Remember %v: not inserted into an empty slot", k)
	equal(t, rec, held, "Remember: held record")
}

func mustGet(t *testing.T, st replay.Store, k replay.Key, want replay.Record) {
	t.Helper()
	got, ok, err := st.Get(context.Background(), k)
	require.NoError(t, err, "Get %v", k)
	if !ok {
		t.Errorf("Get %v: no record, want %s", k, show(want))
		return
	}
	equal(t, want, got, "Get")
}

func mustBeAbsent(t *testing.T, st replay.Store, k replay.Key) {
	t.Helper()
	got, ok, err := st.Get(context.Background(), k)
	require.NoError(t, err, "Get %v", k)
	if ok {
		t.Errorf("Get %v: found %s, want no record", k, show(got))
	}
}

func (s *suite) testInvalid(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	good := remembered("offer", c.Now().Add(c.long()))
	keys := []replay.Key{{}, {Iss: "iss"}, {Hop: "hop"}}
	for _, k := range keys {
		_, inserted, err := st.Remember(ctx, k, good)
		assert.ErrorIs(t, err, replay.ErrInvalid, "Remember %+v", k)
		assert.False(t, inserted, "Remember %+v", k)
		_, _, err = st.Get(ctx, k)
		assert.ErrorIs(t, err, replay.ErrInvalid, "Get %+v", k)
		assert.ErrorIs(t, st.Update(ctx, k, good), replay.ErrInvalid, "Update %+v", k)
	}
	k := key("h1")
	for _, n := range []int{0, 1, 31, 33, 64} {
		bad := good
		bad.Digest = make([]byte, n)
		_, inserted, err := st.Remember(ctx, k, bad)
		assert.ErrorIs(t, err, replay.ErrInvalid, "Remember with a %d-octet digest", n)
		assert.False(t, inserted)
		assert.ErrorIs(t, st.Update(ctx, k, bad), replay.ErrInvalid, "Update with a %d-octet digest", n)
		assert.ErrorIs(t, st.Release(ctx, k, bad.Digest), replay.ErrInvalid, "Release with a %d-octet digest", n)
	}
	for _, n := range []int{1, 15, 17, 32} {
		bad := good
		bad.Token = make([]byte, n)
		_, inserted, err := st.Remember(ctx, k, bad)
		assert.ErrorIs(t, err, replay.ErrInvalid, "Remember with a %d-octet token", n)
		assert.False(t, inserted)
	}
	for _, k := range keys {
		assert.ErrorIs(t, st.Release(ctx, k, good.Digest), replay.ErrInvalid, "Release %+v", k)
	}
	mustBeAbsent(t, st, k)
	// A valid record is still accepted afterwards, and an invalid Update
	// leaves it alone.
	mustRemember(t, st, k, good)
	bad := good
	bad.Digest = nil
	bad.State = "accepted"
	assert.ErrorIs(t, st.Update(ctx, k, bad), replay.ErrInvalid)
	mustGet(t, st, k, good)
}

func (s *suite) testRememberInserts(t *testing.T) {
	st, c := s.start(t)
	k := key("h1")
	mustBeAbsent(t, st, k)
	rec := remembered("offer", c.Now().Add(c.long()))
	mustRemember(t, st, k, rec)
	mustGet(t, st, k, rec)
}

func (s *suite) testSameDigest(t *testing.T) {
	st, c := s.start(t)
	k := key("h1")
	first := remembered("offer", c.Now().Add(c.long()))
	mustRemember(t, st, k, first)
	again := first
	again.Expires = first.Expires.Add(time.Hour)
	again.State = "accepted"
	again.Status = []byte("retransmitted")
	held, inserted, err := st.Remember(context.Background(), k, again)
	require.NoError(t, err)
	assert.False(t, inserted, "a retransmission must not be inserted")
	equal(t, first, held, "Remember of a retransmission: held record")
	mustGet(t, st, k, first)

	// Once updated, the held record is the updated one.
	upd := first
	upd.State = "completed"
	upd.Status = []byte{0xa1, 0x00, 0xff}
	require.NoError(t, st.Update(context.Background(), k, upd))
	held, inserted, err = st.Remember(context.Background(), k, first)
	require.NoError(t, err)
	assert.False(t, inserted)
	equal(t, upd, held, "Remember after Update: held record")
}

func (s *suite) testDifferentDigest(t *testing.T) {
	st, c := s.start(t)
	k := key("h1")
	first := remembered("offer", c.Now().Add(c.long()))
	mustRemember(t, st, k, first)
	other := remembered("equivocating offer", c.Now().Add(c.long()))
	held, inserted, err := st.Remember(context.Background(), k, other)
	require.NoError(t, err)
	assert.False(t, inserted, "a second digest under one key must not be inserted")
	equal(t, first, held, "Remember of another digest: held record")
	mustGet(t, st, k, first)
}

func (s *suite) testDistinctKeys(t *testing.T) {
	st, c := s.start(t)
	exp := c.Now().Add(c.long())
	// Pairs that naive concatenation or escaping would confuse.
	keys := []replay.Key{
		{Iss: "a", Hop: "b|c"},
		{Iss: "a|b", Hop: "c"},
		{Iss: "a}", Hop: "b"},
		{Iss: "a", Hop: "}b"},
		{Iss: "{a", Hop: "b"},
		{Iss: "a:{b", Hop: "c}"},
		{Iss: "a\x00", Hop: "b"},
		{Iss: "a", Hop: "\x00b"},
		{Iss: "ab", Hop: "c"},
		{Iss: "a", Hop: "bc"},
		{Iss: "a", Hop: "b"},
		{Iss: "b", Hop: "a"},
		{Iss: "é", Hop: "ß"},
		{Iss: strings.Repeat("i", 2048), Hop: strings.Repeat("h", 2048)},
	}
	for i, k := range keys {
		mustRemember(t, st, k, remembered(fmt.Sprint("offer ", i), exp))
	}
	for i, k := range keys {
		mustGet(t, st, k, remembered(fmt.Sprint("offer ", i), exp))
	}
}

func (s *suite) testConcurrent(t *testing.T) {
	st, c := s.start(t)
	const goroutines = 64
	exp := c.Now().Add(c.long())
	for round := range 8 {
		k := key(fmt.Sprint("h", round))
		type result struct {
			held     replay.Record
			inserted bool
			err      error
		}
		results := make([]result, goroutines)
		var ready, done sync.WaitGroup
		gate := make(chan struct{})
		for i := range goroutines {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				rec := remembered(fmt.Sprint("offer ", round, " ", i), exp)
				ready.Done()
				<-gate
				r := &results[i]
				r.held, r.inserted, r.err = st.Remember(context.Background(), k, rec)
			}()
		}
		ready.Wait()
		close(gate)
		done.Wait()

		winner := -1
		for i, r := range results {
			require.NoError(t, r.err, "goroutine %d", i)
			if r.inserted {
				require.Equal(t, -1, winner, "goroutines %d and %d both inserted", winner, i)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "no goroutine inserted")
		want := remembered(fmt.Sprint("offer ", round, " ", winner), exp)
		for i, r := range results {
			equal(t, want, r.held, fmt.Sprint("goroutine ", i, ": held record"))
		}
		mustGet(t, st, k, want)
	}
}

func (s *suite) testExpiry(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	exp := c.Now().Add(c.ttl())
	k, k2, kLong := key("short"), key("short 2"), key("long")
	rec := remembered("offer", exp)
	long := remembered("long", exp.Add(c.long()))
	mustRemember(t, st, k, rec)
	mustRemember(t, st, k2, remembered("offer 2", exp))
	mustRemember(t, st, kLong, long)

	c.justBefore(exp)
	mustGet(t, st, k, rec)
	held, inserted, err := st.Remember(ctx, k, remembered("equivocating offer", exp.Add(c.long())))
	require.NoError(t, err)
	c.stillBefore(t, exp)
	assert.False(t, inserted, "a record must be held until its Expires")
	equal(t, rec, held, "Remember just before Expires: held record")

	c.at(exp)
	// Remember, before anything else touches the expired record, takes
	// the slot.
	next2 := remembered("a later offer 2", exp.Add(c.long()))
	mustRemember(t, st, k2, next2)
	mustGet(t, st, k2, next2)
	mustBeAbsent(t, st, k)
	mustGet(t, st, kLong, long)
	upd := rec
	upd.State = "accepted"
	assert.ErrorIs(t, st.Update(ctx, k, upd), replay.ErrNotFound, "Update of an expired record")
	mustBeAbsent(t, st, k)

	// An expired slot takes a new record, whatever its digest.
	next := remembered("a later offer", c.Now().Add(c.long()))
	mustRemember(t, st, k, next)
	mustGet(t, st, k, next)
}

func (s *suite) testZeroExpires(t *testing.T) {
	st, c := s.start(t)
	k, kShort := key("forever"), key("short")
	rec := remembered("offer", time.Time{})
	rec.State = "accepted"
	mustRemember(t, st, k, rec)
	exp := c.Now().Add(c.ttl())
	mustRemember(t, st, kShort, remembered("short", exp))
	c.at(exp)
	mustBeAbsent(t, st, kShort)
	mustGet(t, st, k, rec)
	if !c.real {
		c.advanceTo(base.AddDate(200, 0, 0))
		mustGet(t, st, k, rec)
	}
}

func (s *suite) testUpdate(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	k := key("h1")
	rec := remembered("offer", c.Now().Add(c.long()))

	absent := rec
	absent.State = "accepted"
	assert.ErrorIs(t, st.Update(ctx, k, absent), replay.ErrNotFound, "Update of an absent record")
	mustBeAbsent(t, st, k)

	mustRemember(t, st, k, rec)
	upd := rec
	upd.State = "accepted"
	upd.Status = []byte("status octets")
	upd.Expires = rec.Expires.Add(time.Hour)
	require.NoError(t, st.Update(ctx, k, upd))
	mustGet(t, st, k, upd)

	wrong := upd
	wrong.Digest = digest("equivocating offer")
	wrong.State = "completed"
	wrong.Status = []byte("other")
	assert.ErrorIs(t, st.Update(ctx, k, wrong), replay.ErrConflict, "Update with another digest")
	mustGet(t, st, k, upd)

	// Update replaces Status, including with nothing.
	cleared := upd
	cleared.State = "completed"
	cleared.Status = nil
	require.NoError(t, st.Update(ctx, k, cleared))
	mustGet(t, st, k, cleared)
}

func (s *suite) testUpdateExtends(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	exp := c.Now().Add(c.ttl())
	kExt, kZero, kShort := key("extended"), key("unknown outcome"), key("short")
	ext := remembered("extended", exp)
	zero := remembered("zero", exp)
	short := remembered("short", exp)
	for k, r := range map[replay.Key]replay.Record{kExt: ext, kZero: zero, kShort: short} {
		mustRemember(t, st, k, r)
	}
	ext.State, ext.Status, ext.Expires = "completed", []byte("done"), exp.Add(c.long())
	require.NoError(t, st.Update(ctx, kExt, ext))
	zero.State, zero.Expires = "accepted", time.Time{}
	require.NoError(t, st.Update(ctx, kZero, zero))

	c.at(exp)
	mustBeAbsent(t, st, kShort)
	mustGet(t, st, kExt, ext)
	mustGet(t, st, kZero, zero)
	if !c.real {
		c.justBefore(ext.Expires)
		mustGet(t, st, kExt, ext)
		c.at(ext.Expires)
		mustBeAbsent(t, st, kExt)
		mustGet(t, st, kZero, zero)
	}
}

func (s *suite) testRoundTrip(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := []byte(strings.Repeat("\x00\xff status ", 64<<10/9))
	exp := c.Now().Add(c.long()).Add(123456789 * time.Nanosecond)
	recs := []replay.Record{
		{Digest: digest("0"), Expires: exp},
		{Digest: digest("1"), Expires: exp, State: "accepted", Status: all},
		{Digest: digest("2"), State: "rejected", Status: []byte{0}},
		{Digest: digest("3"), Expires: exp.Add(time.Nanosecond), State: "completed", Status: big},
		{Digest: digest("4"), Expires: exp, State: "failed", Status: []byte("\r\n{}|\"")},
		{Digest: digest("5"), Expires: exp, State: "canceled"},
		{Digest: make([]byte, 32), Expires: exp, State: "state \x00 with\xffodd octets"},
		{Digest: []byte(strings.Repeat("\xff", 32)), Expires: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{Digest: digest("6"), Token: token("6"), Created: exp.Add(-time.Hour + 7*time.Nanosecond), Expires: exp},
		{Digest: digest("7"), Token: []byte(strings.Repeat("\x00", 16)), Created: time.Date(1969, 7, 20, 20, 17, 40, 1, time.UTC),
			State: "accepted", Status: []byte("s")},
	}
	for i, r := range recs {
		k := key(fmt.Sprint("h", i))
		mustRemember(t, st, k, r)
		mustGet(t, st, k, r)
		held, inserted, err := st.Remember(ctx, k, remembered("other", exp))
		require.NoError(t, err)
		assert.False(t, inserted)
		equal(t, r, held, fmt.Sprint("record ", i, ": held record"))
	}
	// The same values written by Update.
	for i, r := range recs {
		k := key(fmt.Sprint("u", i))
		mustRemember(t, st, k, replay.Record{Digest: r.Digest, Token: r.Token, Created: r.Created, Expires: exp})
		require.NoError(t, st.Update(ctx, k, r))
		mustGet(t, st, k, r)
	}
}

func (s *suite) testNoAliasing(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	k := key("h1")
	exp := c.Now().Add(c.long())
	in := replay.Record{Digest: digest("offer"), Expires: exp, Status: []byte("status")}
	want := replay.Record{Digest: digest("offer"), Expires: exp, Status: []byte("status")}
	held, inserted, err := st.Remember(ctx, k, in)
	require.NoError(t, err)
	require.True(t, inserted)
	in.Digest[0] ^= 0xff
	in.Status[0] ^= 0xff
	mustGet(t, st, k, want)
	held.Digest[1] ^= 0xff
	held.Status[1] ^= 0xff
	mustGet(t, st, k, want)

	got, ok, err := st.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, ok)
	got.Digest[2] ^= 0xff
	got.Status[2] ^= 0xff
	mustGet(t, st, k, want)

	held, inserted, err = st.Remember(ctx, k, want)
	require.NoError(t, err)
	require.False(t, inserted)
	held.Digest[3] ^= 0xff
	held.Status[3] ^= 0xff
	mustGet(t, st, k, want)

	upd := replay.Record{Digest: digest("offer"), Expires: exp, State: "accepted", Status: []byte("later")}
	require.NoError(t, st.Update(ctx, k, upd))
	upd.Status[0] ^= 0xff
	upd.Digest[0] ^= 0xff
	mustGet(t, st, k, replay.Record{Digest: digest("offer"), Expires: exp, State: "accepted", Status: []byte("later")})
}

func (s *suite) testContext(t *testing.T) {
	st, c := s.start(t)
	rec := remembered("offer", c.Now().Add(c.long()))
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
		k := key(tc.name)
		_, inserted, err := st.Remember(tc.ctx, k, rec)
		assert.ErrorIs(t, err, tc.want, "Remember with a %s context", tc.name)
		assert.False(t, inserted, "Remember with a %s context", tc.name)
		mustBeAbsent(t, st, k)

		_, _, err = st.Get(tc.ctx, k)
		assert.ErrorIs(t, err, tc.want, "Get with a %s context", tc.name)

		mustRemember(t, st, k, rec)
		upd := rec
		upd.State = "accepted"
		assert.ErrorIs(t, st.Update(tc.ctx, k, upd), tc.want, "Update with a %s context", tc.name)
		mustGet(t, st, k, rec)
	}
}

func (s *suite) testBounded(t *testing.T) {
	n := s.opts.MaxEntries
	if n <= 0 {
		t.Skip("store declares no bound (Options.MaxEntries is zero)")
	}
	if n < 4 {
		t.Fatalf("Options.MaxEntries is %d; the subtest needs at least 4", n)
	}
	st, c := s.start(t)
	ctx := context.Background()
	exp := c.Now().Add(c.ttl())
	// A quarter of the records expire at exp; the rest outlive the test,
	// half of those with no expiry at all.
	short := n / 4
	recs := make([]replay.Record, n)
	for i := range n {
		switch {
		case i < short:
			recs[i] = remembered(fmt.Sprint("offer ", i), exp)
		case i%2 == 0:
			recs[i] = remembered(fmt.Sprint("offer ", i), time.Time{})
		default:
			recs[i] = remembered(fmt.Sprint("offer ", i), exp.Add(c.long()))
		}
		mustRemember(t, st, key(fmt.Sprint("h", i)), recs[i])
	}
	extra := remembered("one too many", exp.Add(c.long()))
	_, inserted, err := st.Remember(ctx, key("extra"), extra)
	require.ErrorIs(t, err, replay.ErrFull, "Remember into a full store")
	assert.False(t, inserted)
	mustBeAbsent(t, st, key("extra"))

	// A full store still answers for what it holds.
	held, inserted, err := st.Remember(ctx, key("h0"), remembered("equivocating offer", time.Time{}))
	require.NoError(t, err, "Remember of a held key in a full store")
	assert.False(t, inserted)
	equal(t, recs[0], held, "Remember of a held key in a full store")
	upd := recs[n-1]
	upd.State = "completed"
	require.NoError(t, st.Update(ctx, key(fmt.Sprint("h", n-1)), upd), "Update in a full store")
	recs[n-1] = upd

	// Once the short-lived records expire, exactly their room is free.
	c.at(exp)
	for i := range short {
		mustRemember(t, st, key(fmt.Sprint("new", i)), remembered(fmt.Sprint("new ", i), time.Time{}))
	}
	_, _, err = st.Remember(ctx, key("extra"), extra)
	require.ErrorIs(t, err, replay.ErrFull, "Remember into a store full again")
	for i := short; i < n; i++ {
		mustGet(t, st, key(fmt.Sprint("h", i)), recs[i])
	}
}

// testIssuerShare: a trusted delegator that floods the store is refused
// once its share is used, and another delegator's fresh record is still
// taken; the flooder's room comes back as its records expire or are
// released.
func (s *suite) testIssuerShare(t *testing.T) {
	n := s.opts.MaxPerIssuer
	if n <= 0 {
		t.Skip("store declares no per-issuer share (Options.MaxPerIssuer is zero)")
	}
	st, c := s.start(t)
	ctx := context.Background()
	exp := c.Now().Add(c.ttl())
	flooder := func(i int) replay.Key { return replay.Key{Iss: "https://flooder.example", Hop: fmt.Sprint("f", i)} }
	for i := range n {
		e := exp
		if i > 0 {
			e = exp.Add(c.long())
		}
		mustRemember(t, st, flooder(i), remembered(fmt.Sprint("flood ", i), e))
	}
	for i := n; i < n+3; i++ {
		_, inserted, err := st.Remember(ctx, flooder(i), remembered(fmt.Sprint("flood ", i), exp.Add(c.long())))
		require.ErrorIs(t, err, replay.ErrFull, "Remember beyond the issuer's share")
		assert.False(t, inserted)
		mustBeAbsent(t, st, flooder(i))
	}
	// The flooder's held records are still answered for.
	held, inserted, err := st.Remember(ctx, flooder(1), remembered("flood 1", time.Time{}))
	require.NoError(t, err, "Remember of a held key of an issuer at its share")
	assert.False(t, inserted)
	assert.Equal(t, digest("flood 1"), held.Digest)

	// An innocent delegator's fresh offers are taken.
	for i := range 3 {
		k := replay.Key{Iss: "https://innocent.example", Hop: fmt.Sprint("i", i)}
		mustRemember(t, st, k, remembered(fmt.Sprint("innocent ", i), exp.Add(c.long())))
	}

	// A released record, and an expired one, give the flooder its room back,
	// one record each.
	require.NoError(t, st.Release(ctx, flooder(n-1), digest(fmt.Sprint("flood ", n-1))))
	mustRemember(t, st, flooder(n), remembered(fmt.Sprint("flood ", n), exp.Add(c.long())))
	_, _, err = st.Remember(ctx, flooder(n+1), remembered(fmt.Sprint("flood ", n+1), exp.Add(c.long())))
	require.ErrorIs(t, err, replay.ErrFull, "Remember beyond the share once the released room is taken")
	c.at(exp) // flooder(0) expires
	mustRemember(t, st, flooder(n+1), remembered(fmt.Sprint("flood ", n+1), exp.Add(c.long())))
	_, _, err = st.Remember(ctx, flooder(n+2), remembered(fmt.Sprint("flood ", n+2), exp.Add(c.long())))
	require.ErrorIs(t, err, replay.ErrFull, "Remember beyond the share once the expired room is taken")
}

func (s *suite) testRestart(t *testing.T) {
	if s.opts.Reopen == nil {
		t.Skip("store does not survive a restart (Options.Reopen is nil)")
	}
	c := &clock{real: s.opts.RealTime, margin: s.opts.Margin, t: base}
	now := c.Now
	if c.real {
		now = time.Now
	}
	ctx := context.Background()
	st := s.open(t, now)
	require.NotNil(t, st, "open returned a nil store")
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
		st = s.opts.Reopen(t, st, now)
		require.NotNil(t, st, "Reopen returned a nil store")
		open = true
	}

	exp := c.Now().Add(c.ttl())
	remembered1 := remembered("remembered", exp.Add(c.long()))
	answered := replay.Record{Digest: digest("answered"), Expires: exp.Add(c.long()), State: "completed", Status: []byte("\x00last status\xff")}
	unknown := replay.Record{Digest: digest("unknown"), State: "accepted", Status: []byte("accepted")}
	short := remembered("short", exp)
	mustRemember(t, st, key("remembered"), remembered1)
	mustRemember(t, st, key("answered"), remembered("answered", exp))
	require.NoError(t, st.Update(ctx, key("answered"), answered))
	mustRemember(t, st, key("unknown"), replay.Record{Digest: unknown.Digest, Expires: exp})
	require.NoError(t, st.Update(ctx, key("unknown"), unknown))
	mustRemember(t, st, key("short"), short)

	reopen()
	mustGet(t, st, key("remembered"), remembered1)
	mustGet(t, st, key("answered"), answered)
	mustGet(t, st, key("unknown"), unknown)
	held, inserted, err := st.Remember(ctx, key("answered"), remembered("equivocating offer", time.Time{}))
	require.NoError(t, err)
	assert.False(t, inserted)
	equal(t, answered, held, "Remember after reopening: held record")
	mustRemember(t, st, key("new"), remembered("new", time.Time{}))

	// Expiry keeps working across the restart; reopen once more with the
	// clock past the short record's Expires.
	c.at(exp)
	mustBeAbsent(t, st, key("short"))
	reopen()
	mustBeAbsent(t, st, key("short"))
	mustGet(t, st, key("remembered"), remembered1)
	mustGet(t, st, key("new"), remembered("new", time.Time{}))
}

// token returns a TokenSize-octet token derived from s.
func token(s string) []byte {
	d := sha256.Sum256([]byte("token " + s))
	return d[:replay.TokenSize]
}

// fresh is a record as a receiver writes it: with its own token and the
// time it was created.
func fresh(d string, created, exp time.Time) replay.Record {
	return replay.Record{Digest: digest(d), Token: token(d), Created: created, Expires: exp}
}

func (s *suite) testToken(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	k := key("h1")
	rec := fresh("offer", c.Now(), c.Now().Add(c.long()))
	mustRemember(t, st, k, rec)

	// The same call again (a client's retry after a lost reply, or the
	// caller's): still its own insert.
	held, inserted, err := st.Remember(ctx, k, rec)
	require.NoError(t, err)
	assert.True(t, inserted, "a retried call must report its own insert")
	equal(t, rec, held, "Remember retried: held record")

	// Another call for the same offer, with its own token, finds a
	// retransmission.
	other := rec
	other.Token = token("another delivery")
	held, inserted, err = st.Remember(ctx, k, other)
	require.NoError(t, err)
	assert.False(t, inserted, "another call's token must not count as an insert")
	equal(t, rec, held, "Remember with another token: held record")

	// Another digest under the same token is not the same call.
	eq := rec
	eq.Digest = digest("equivocating offer")
	_, inserted, err = st.Remember(ctx, k, eq)
	require.NoError(t, err)
	assert.False(t, inserted, "the same token with another digest must not count as an insert")

	// Without a token, only the attempt that writes reports inserted.
	k2 := key("h2")
	bare := remembered("bare", c.Now().Add(c.long()))
	mustRemember(t, st, k2, bare)
	_, inserted, err = st.Remember(ctx, k2, bare)
	require.NoError(t, err)
	assert.False(t, inserted, "a call without a token cannot be recognised")

	// Once updated, the record still carries its token: a late retry of
	// the inserting call is still recognised.
	upd := rec
	upd.State, upd.Status = "accepted", []byte("status")
	require.NoError(t, st.Update(ctx, k, upd))
	held, inserted, err = st.Remember(ctx, k, rec)
	require.NoError(t, err)
	assert.True(t, inserted)
	equal(t, upd, held, "Remember retried after Update: held record")
}

func (s *suite) testConcurrentTokens(t *testing.T) {
	st, c := s.start(t)
	const goroutines = 32
	exp := c.Now().Add(c.long())
	for round := range 4 {
		k := key(fmt.Sprint("h", round))
		recs := make([]replay.Record, goroutines)
		for i := range recs {
			// One offer delivered many times: one digest, a token per call.
			recs[i] = replay.Record{Digest: digest(fmt.Sprint("offer ", round)), Token: token(fmt.Sprint(round, " ", i)),
				Created: c.Now(), Expires: exp}
		}
		inserted := make([]bool, goroutines)
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				// Each call is made twice, as a client retrying it would.
				_, _, errs[i] = st.Remember(context.Background(), k, recs[i])
				if errs[i] == nil {
					_, inserted[i], errs[i] = st.Remember(context.Background(), k, recs[i])
				}
			}()
		}
		close(gate)
		wg.Wait()
		winners := 0
		for i := range goroutines {
			require.NoError(t, errs[i])
			if inserted[i] {
				winners++
				mustGet(t, st, k, recs[i])
			}
		}
		assert.Equal(t, 1, winners, "exactly one call's retry reports its insert")
	}
}

func (s *suite) testUpdateKeepsIdentity(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	k := key("h1")
	rec := fresh("offer", c.Now().Add(-123456789*time.Nanosecond), c.Now().Add(c.long()))
	mustRemember(t, st, k, rec)
	upd := replay.Record{Digest: rec.Digest, Token: rec.Token, Created: c.Now().Add(time.Hour),
		Expires: rec.Expires.Add(time.Hour), State: "completed", Status: []byte("done")}
	require.NoError(t, st.Update(ctx, k, upd))
	want := rec
	want.Expires, want.State, want.Status = upd.Expires, upd.State, upd.Status
	mustGet(t, st, k, want)
	// Update without a token keeps the token too.
	upd.Token = nil
	upd.State = "canceled"
	require.NoError(t, st.Update(ctx, k, upd))
	want.State = "canceled"
	mustGet(t, st, k, want)
	// Update with another call's token is refused.
	upd.Token = token("another")
	upd.State = "failed"
	assert.ErrorIs(t, st.Update(ctx, k, upd), replay.ErrConflict)
	mustGet(t, st, k, want)
	// So is a token on a record remembered without one.
	k2 := key("h2")
	bare := remembered("bare", c.Now().Add(c.long()))
	mustRemember(t, st, k2, bare)
	withToken := bare
	withToken.Token, withToken.State = token("bare"), "accepted"
	assert.ErrorIs(t, st.Update(ctx, k2, withToken), replay.ErrConflict)
	mustGet(t, st, k2, bare)
}

// testReleaseThenStaleTake: a call remembers a hop and is slow to take it;
// meanwhile the record is released and another delivery remembers the hop
// again. The slow call's take, which carries its token, must fail: only
// the second call may take the hop.
func (s *suite) testReleaseThenStaleTake(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	k := key("h1")
	first := fresh("offer", c.Now(), c.Now().Add(c.long()))
	mustRemember(t, st, k, first)
	require.NoError(t, st.Release(ctx, k, first.Digest))
	second := first
	second.Token = token("second delivery")
	mustRemember(t, st, k, second)

	late := first
	late.State = "accepted"
	assert.ErrorIs(t, st.Update(ctx, k, late), replay.ErrConflict, "the released call's take")
	mustGet(t, st, k, second)
	take := second
	take.State = "accepted"
	require.NoError(t, st.Update(ctx, k, take), "the second call's take")
	mustGet(t, st, k, take)
}

func (s *suite) testUntaken(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	t0 := c.Now()
	exp := t0.Add(c.long())
	old := fresh("old", t0.Add(-2*time.Hour), exp)
	older := fresh("older", t0.Add(-3*time.Hour), exp)
	unknown := remembered("unknown age", exp) // Created zero
	taken := fresh("taken", t0.Add(-3*time.Hour), exp)
	recent := fresh("recent", t0.Add(-time.Minute), exp)
	gone := fresh("gone", t0.Add(-3*time.Hour), t0.Add(c.ttl()))
	for name, r := range map[string]replay.Record{"old": old, "older": older, "unknown": unknown,
		"taken": taken, "recent": recent, "gone": gone} {
		mustRemember(t, st, key(name), r)
	}
	taken.State = "accepted"
	require.NoError(t, st.Update(ctx, key("taken"), taken))
	c.at(gone.Expires)

	got, err := st.Untaken(ctx, t0.Add(-time.Hour))
	require.NoError(t, err)
	var hops []string
	for _, u := range got {
		hops = append(hops, u.Key.Hop)
		switch u.Key.Hop {
		case "unknown":
			assert.Zero(t, u.Age, "age of a record without Created")
			equal(t, unknown, u.Record, "untaken record")
		case "older":
			equal(t, older, u.Record, "untaken record")
			assertAge(t, c, u.Age, c.Now().Sub(older.Created))
		case "old":
			equal(t, old, u.Record, "untaken record")
			assertAge(t, c, u.Age, c.Now().Sub(old.Created))
		}
	}
	assert.Equal(t, []string{"unknown", "older", "old"}, hops,
		"live records with State empty created before the time, oldest first (zero Created first)")

	got, err = st.Untaken(ctx, t0.Add(-4*time.Hour))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "unknown", got[0].Key.Hop)
}

func assertAge(t *testing.T, c *clock, got, want time.Duration) {
	t.Helper()
	if c.real {
		assert.InDelta(t, want.Seconds(), got.Seconds(), 5, "age")
		return
	}
	assert.Equal(t, want, got, "age")
}

func (s *suite) testRelease(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	exp := c.Now().Add(c.long())
	k := key("stranded")
	rec := fresh("offer", c.Now(), exp)
	assert.ErrorIs(t, st.Release(ctx, k, rec.Digest), replay.ErrNotFound, "Release of an absent record")
	mustRemember(t, st, k, rec)
	assert.ErrorIs(t, st.Release(ctx, k, digest("another offer")), replay.ErrConflict, "Release with another digest")
	mustGet(t, st, k, rec)
	require.NoError(t, st.Release(ctx, k, rec.Digest))
	mustBeAbsent(t, st, k)
	assert.ErrorIs(t, st.Release(ctx, k, rec.Digest), replay.ErrNotFound, "Release twice")
	upd := rec
	upd.State = "accepted"
	assert.ErrorIs(t, st.Update(ctx, k, upd), replay.ErrNotFound, "Update of a released record")

	// A released hop is new again, for any call.
	again := rec
	again.Token = token("the next delivery")
	mustRemember(t, st, k, again)

	// A record whose State is set stays.
	kt := key("taken")
	taken := fresh("taken", c.Now(), exp)
	mustRemember(t, st, kt, taken)
	taken.State, taken.Status = "rejected", []byte("status")
	require.NoError(t, st.Update(ctx, kt, taken))
	assert.ErrorIs(t, st.Release(ctx, kt, taken.Digest), replay.ErrTaken)
	mustGet(t, st, kt, taken)

	// An expired record is not found.
	ke := key("expired")
	short := fresh("short", c.Now(), c.Now().Add(c.ttl()))
	mustRemember(t, st, ke, short)
	c.at(short.Expires)
	assert.ErrorIs(t, st.Release(ctx, ke, short.Digest), replay.ErrNotFound)

	// Context.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, st.Release(canceled, k, again.Digest), context.Canceled)
	mustGet(t, st, k, again)
	_, err := st.Untaken(canceled, c.Now())
	assert.ErrorIs(t, err, context.Canceled)
}

// testReleaseRace races Release with the Update that takes the hop: either
// the Update wins and the record stays, taken, or the Release wins and the
// Update finds nothing. Never both, never neither.
func (s *suite) testReleaseRace(t *testing.T) {
	st, c := s.start(t)
	ctx := context.Background()
	exp := c.Now().Add(c.long())
	for i := range 32 {
		k := key(fmt.Sprint("race ", i))
		rec := fresh(fmt.Sprint("offer ", i), c.Now(), exp)
		mustRemember(t, st, k, rec)
		var relErr, updErr error
		var wg sync.WaitGroup
		gate := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-gate; relErr = st.Release(ctx, k, rec.Digest) }()
		upd := rec
		upd.State = "accepted"
		go func() { defer wg.Done(); <-gate; updErr = st.Update(ctx, k, upd) }()
		close(gate)
		wg.Wait()
		if updErr == nil {
			require.ErrorIs(t, relErr, replay.ErrTaken, "round %d: Update won, Release must fail", i)
			mustGet(t, st, k, upd)
		} else {
			require.ErrorIs(t, updErr, replay.ErrNotFound, "round %d", i)
			require.NoError(t, relErr, "round %d: Update lost, Release must have won", i)
			mustBeAbsent(t, st, k)
		}
	}
}
