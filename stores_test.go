package handoff

import (
	"context"
	"hash/fnv"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"
)

const (
	stPlanner AgentID = "spiffe://example.org/planner"
	stWorker  AgentID = "spiffe://example.org/worker"
)

// TestRejectedKeepsItsRecordUntilExpPlusSkew: an offer refused by a check
// after 1-3 (here the dialog) and answered "rejected" is remembered until
// exp + skew (HC-33) and no longer; until then its retransmissions get the
// identical signed "rejected" (HC-39).
func TestRejectedKeepsItsRecordUntilExpPlusSkew(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, stPlanner, stWorker)
	store := replay.NewMemory(replay.MemoryOptions{Now: w.clock.Now})
	a := w.agent(stWorker, func(c *Config) { c.Store = store })
	s := w.offer(stPlanner, stWorker, nil)
	o, _, err := InspectUnverified(s, Limits{})
	require.NoError(t, err)
	data := encodeHandoff(t, handoffOf(s), JSON)
	host := Host{Dialog: "another dialog", Peer: stPlanner}

	in := receive(t, a, data, host)
	require.True(t, in.StatusDue())
	require.Equal(t, CheckDialog, in.Check())
	rejected, err := a.Reply(ctx, in, state.Rejected, ReplyOptions{Reason: reason.Policy})
	require.NoError(t, err)

	key := replay.Key{Iss: string(o.Iss), Hop: string(o.Hop)}
	rec, ok, err := store.Get(ctx, key)
	require.NoError(t, err)
	require.True(t, ok)
	want := o.Exp.Std().Add(defaultSkew)
	assert.True(t, rec.Expires.Equal(want), "the record expires at exp + skew %s, not after the retention period: %s", want, rec.Expires)

	setClock(w.clock, want.Add(-time.Second))
	again := receive(t, a, data, host)
	require.True(t, again.Retransmission())
	last, ok := again.LastStatus()
	require.True(t, ok)
	assert.Equal(t, rejected.Octets, last.Octets, "a retransmission is answered with the identical rejected")

	setClock(w.clock, want)
	_, ok, err = store.Get(ctx, key)
	require.NoError(t, err)
	assert.False(t, ok, "the record is gone at exp + skew")
	late := receive(t, a, data, host)
	assert.Equal(t, CheckFreshness, late.Check(), "and the offer is stale by then")
}

// TestDeclinedKeepsItsRecordForTheRetention: a "rejected" for an offer
// that passed every check (the delegate declined the work) is kept for
// the retention period (HC-34).
func TestDeclinedKeepsItsRecordForTheRetention(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, stPlanner, stWorker)
	store := replay.NewMemory(replay.MemoryOptions{Now: w.clock.Now})
	a := w.agent(stWorker, func(c *Config) { c.Store = store })
	s := w.offer(stPlanner, stWorker, nil)
	in := receive(t, a, encodeHandoff(t, handoffOf(s), JSON), Host{})
	require.True(t, in.Accepted())
	_, err := a.Reply(ctx, in, state.Rejected, ReplyOptions{Reason: reason.Policy})
	require.NoError(t, err)
	rec, ok, err := store.Get(ctx, replay.Key{Iss: string(stPlanner), Hop: string(in.Offer().Hop)})
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, rec.Expires.Equal(w.clock.Now().Add(defaultRetention)), "expires %s", rec.Expires)
}

// TestMemoryPast2200: with the clock past 2200, an accepted offer is
// remembered until its exp + skew like any other, and a second delivery
// is a retransmission, never a second acceptance (HC-33).
func TestMemoryPast2200(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, stPlanner, stWorker)
	setClock(w.clock, time.Date(2300, 6, 1, 0, 0, 0, 0, time.UTC))
	a := w.agent(stWorker)
	data := encodeHandoff(t, handoffOf(w.offer(stPlanner, stWorker, nil)), JSON)
	in := receive(t, a, data, Host{})
	require.True(t, in.Accepted())
	require.NoError(t, a.Take(ctx, in))
	w.clock.Add(time.Minute)
	again := receive(t, a, data, Host{Peer: stPlanner})
	assert.False(t, again.Accepted(), "accepted a second time")
	assert.True(t, again.Retransmission())
	assert.True(t, again.OwesAccepted())
}

// TestMemoryPast2Pow62 (issue 35, finding 7): with the clock past 2^62
// seconds, where Time.Std clamps, exp plus the skew was stored clamped, so
// the record was expired when written and the same offer, or its twin,
// was accepted a second time. A record is now kept at least until exp plus
// the skew whatever the clock (HC-33): an expiry past 2^62 s is stored as
// none, kept longer than asked, never shorter. The clocks: just past 2^62,
// an hour before time.Time's own arithmetic wraps (there the retention
// period of a taken hop crosses it), and the clock of vector #146, past
// that point, 808 s before 2^63.
func TestMemoryPast2Pow62(t *testing.T) {
	ctx := context.Background()
	for name, sec := range map[string]int64{
		"just past 2^62":          1<<62 + 1000,
		"an hour before the wrap": math.MaxInt64 - 62135596800 - 3600,
		"vector 146":              9223372036854775000,
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, JWS, stPlanner, stWorker)
			setClock(w.clock, time.Unix(sec, 0))
			store := replay.NewMemory(replay.MemoryOptions{Now: w.clock.Now})
			a := w.agent(stWorker, func(c *Config) { c.Store = store })
			s := w.offer(stPlanner, stWorker, nil)
			data := encodeHandoff(t, handoffOf(s), JSON)
			in := receive(t, a, data, Host{})
			require.True(t, in.Accepted(), "%s: %s", in.Reason(), in.Detail())
			rec, ok, err := store.Get(ctx, replay.Key{Iss: string(stPlanner), Hop: string(in.Offer().Hop)})
			require.NoError(t, err)
			require.True(t, ok, "remembered when written")
			assert.True(t, rec.Live(w.clock.Now()))

			again := receive(t, a, data, Host{Peer: stPlanner})
			assert.False(t, again.Accepted(), "the same offer accepted a second time")
			assert.True(t, again.Retransmission())
			twin := receive(t, a, encodeHandoff(t, handoffOf(atkTwin(t, s)), JSON), Host{})
			assert.False(t, twin.Accepted(), "its twin accepted")
			assert.Equal(t, reason.Equivocation, twin.Reason())

			// Taken, then answered "completed": kept for the retention
			// period at least, and still a retransmission a minute later.
			require.NoError(t, a.Take(ctx, in))
			_, err = a.Reply(ctx, in, state.Completed, ReplyOptions{Effect: state.EffectFull})
			require.NoError(t, err)
			w.clock.Add(time.Minute)
			again = receive(t, a, data, Host{Peer: stPlanner})
			assert.False(t, again.Accepted(), "accepted again after its answer")
			assert.True(t, again.Retransmission())
		})
	}
}

// TestMemoryLostPast2Pow62: the rule of HC-59 compares iat with the time
// the memory was lost exactly, past 2^62 seconds too: an offer issued after
// the loss is not refused as issued before it, and one issued before it is.
func TestMemoryLostPast2Pow62(t *testing.T) {
	w := newWorld(t, JWS, stPlanner, stWorker)
	lost := time.Unix(1<<62+1000, 0)
	setClock(w.clock, lost.Add(10*time.Second))
	a := w.agent(stWorker, func(c *Config) { c.MemoryLostAt = lost })
	after := receive(t, a, encodeHandoff(t, handoffOf(w.offer(stPlanner, stWorker, nil)), JSON), Host{})
	assert.True(t, after.Accepted(), "%s: %s", after.Reason(), after.Detail())
	before := receive(t, a, encodeHandoff(t, handoffOf(w.offer(stPlanner, stWorker, func(o *Offer) { o.Iat -= 20 })), JSON), Host{})
	assert.Equal(t, reason.Replay, before.Reason(), before.Detail())
}

// TestOffersCap (issue 35, finding 6): the delegator's record of the hops
// it offered is bounded. At the cap a new offer is refused with the store's
// *replay.OffersFullError (wrapping replay.ErrFull and ErrStore), before
// anything is sent, and no unresolved hop is forgotten to make room; a hop
// resolved and past its retention, or abandoned, makes room again.
func TestOffersCap(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, stPlanner, stWorker)
	offers := replay.NewMemoryOffers(replay.MemoryOffersOptions{MaxRecords: 3, Now: w.clock.Now})
	a := w.agent(stPlanner, func(c *Config) { c.Offers = offers })
	var made []*Outgoing
	for range 3 {
		out, err := a.Offer(ctx, OfferParams{To: stWorker, Dialog: "d"})
		require.NoError(t, err)
		made = append(made, out)
	}
	w.clock.Add(48 * time.Hour) // never answered
	_, err := a.Offer(ctx, OfferParams{To: stWorker, Dialog: "d"})
	var full *replay.OffersFullError
	require.ErrorAs(t, err, &full)
	assert.Equal(t, 3, full.Cap)
	assert.ErrorIs(t, err, replay.ErrFull)
	assert.ErrorIs(t, err, ErrStore)
	open, err := a.Unresolved(ctx)
	require.NoError(t, err)
	assert.Len(t, open, 3, "no unresolved hop forgotten")

	require.NoError(t, a.Abandon(ctx, made[0].Offer.Hop))
	_, err = a.Offer(ctx, OfferParams{To: stWorker, Dialog: "d"})
	require.NoError(t, err, "an abandoned hop makes room")
	_, err = a.Offer(ctx, OfferParams{To: stWorker, Dialog: "d"})
	require.ErrorAs(t, err, &full)
}

// hangingStore is a Memory store whose Get and Update of one hop hang,
// whatever their context says, until released.
type hangingStore struct {
	*replay.Memory
	hang    replay.Key
	release chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (s *hangingStore) wait(k replay.Key) {
	if k == s.hang {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
}

func (s *hangingStore) Get(ctx context.Context, k replay.Key) (replay.Record, bool, error) {
	s.wait(k)
	return s.Memory.Get(ctx, k)
}

func (s *hangingStore) Update(ctx context.Context, k replay.Key, rec replay.Record) error {
	s.wait(k)
	return s.Memory.Update(ctx, k, rec)
}

// TestHopLockHonoursDeadline: a Reply with a 200 ms deadline returns by
// its deadline while another hop's store call hangs, even when the two
// hops would have shared a lock stripe; and a Reply for the hung hop itself
// gives up waiting for its lock at its deadline.
func TestHopLockHonoursDeadline(t *testing.T) {
	w := newWorld(t, JWS, stPlanner, stWorker)
	store := &hangingStore{Memory: replay.NewMemory(replay.MemoryOptions{Now: w.clock.Now}),
		release: make(chan struct{}), entered: make(chan struct{})}
	a := w.agent(stWorker, func(c *Config) { c.Store = store })
	stripe := func(hop HopID) uint32 {
		h := fnv.New32a()
		h.Write([]byte(stPlanner))
		h.Write([]byte{0})
		h.Write([]byte(hop))
		return h.Sum32() % 64
	}
	first := w.offer(stPlanner, stWorker, nil)
	inA := receive(t, a, encodeHandoff(t, handoffOf(first), JSON), Host{})
	require.True(t, inA.Accepted())
	var inB *Received
	for inB == nil || stripe(inB.Offer().Hop) != stripe(inA.Offer().Hop) {
		inB = receive(t, a, encodeHandoff(t, handoffOf(w.offer(stPlanner, stWorker, nil)), JSON), Host{})
		require.True(t, inB.Accepted())
	}
	store.hang = replay.Key{Iss: string(stPlanner), Hop: string(inA.Offer().Hop)}

	hung := make(chan error, 1)
	go func() {
		_, err := a.Reply(context.Background(), inA, state.Accepted, ReplyOptions{})
		hung <- err
	}()
	<-store.entered // hop A's store call hangs, holding whatever it holds

	reply := func(in *Received) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		start := time.Now()
		go func() { _, err := a.Reply(ctx, in, state.Accepted, ReplyOptions{}); done <- err }()
		select {
		case err := <-done:
			return time.Since(start), err
		case <-time.After(5 * time.Second):
			t.Fatalf("Reply with a 200 ms deadline still blocked after 5 s")
			return 0, nil
		}
	}
	_, err := reply(inB)
	require.NoError(t, err, "an unrelated hop does not wait on the hung one")
	_, err = reply(inA)
	require.ErrorIs(t, err, context.DeadlineExceeded, "waiting for the hung hop's lock ends at the deadline")

	close(store.release)
	require.NoError(t, <-hung)
	_, err = a.Reply(context.Background(), inA, state.Accepted, ReplyOptions{})
	assert.ErrorIs(t, err, ErrState, "a second accepted is refused")
}

func setClock(c *clock, t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// Swap for the stub stores of the other tests, as their Update behaves.

func (forgetful) Swap(_ context.Context, _ replay.Key, old, new replay.Record) (replay.Record, bool, error) {
	old.State, old.Status, old.Expires = new.State, new.Status, new.Expires
	return old, true, nil
}

func (f failingStore) Swap(context.Context, replay.Key, replay.Record, replay.Record) (replay.Record, bool, error) {
	return replay.Record{}, false, f.fail()
}

func (forgetfulStore) Swap(context.Context, replay.Key, replay.Record, replay.Record) (replay.Record, bool, error) {
	return replay.Record{}, false, replay.ErrNotFound
}

func (s *hangingStore) Swap(ctx context.Context, k replay.Key, old, new replay.Record) (replay.Record, bool, error) {
	s.wait(k)
	return s.Memory.Swap(ctx, k, old, new)
}

// TestReplyAfterTheRecordExpired: a Reply decides from the record Receive
// returned; when the record has expired since, it decides again as for a
// hop not remembered: a "rejected" for an offer refused by a check is still
// signed (and recorded nowhere), an "accepted" is refused.
func TestReplyAfterTheRecordExpired(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, stPlanner, stWorker)
	a := w.agent(stWorker)
	s := w.offer(stPlanner, stWorker, nil)
	o, _, err := InspectUnverified(s, Limits{})
	require.NoError(t, err)
	data := encodeHandoff(t, handoffOf(s), JSON)
	refused := receive(t, a, data, Host{Dialog: "another dialog"})
	require.True(t, refused.StatusDue())

	setClock(w.clock, o.Exp.Std().Add(defaultSkew)) // the record is gone
	st, err := a.Reply(ctx, refused, state.Rejected, ReplyOptions{Reason: reason.Policy})
	require.NoError(t, err)
	assert.NotEmpty(t, st.Octets)

	s2 := w.offer(stPlanner, stWorker, func(o *Offer) { o.Exp = o.Iat + 60 })
	o2, _, err := InspectUnverified(s2, Limits{})
	require.NoError(t, err)
	in := receive(t, a, encodeHandoff(t, handoffOf(s2), JSON), Host{})
	require.True(t, in.Accepted())
	setClock(w.clock, o2.Exp.Std().Add(defaultSkew))
	_, err = a.Reply(ctx, in, state.Accepted, ReplyOptions{})
	assert.ErrorIs(t, err, ErrState, "an accepted for a hop no longer remembered")
}

// TestFloodingDelegatorCannotCrowdOut: a trusted delegator floods the
// receiver with offers that fail a later check (a wrong dialog), each
// answered "rejected", until the store refuses it its share; another
// delegator's fresh offer is still accepted meanwhile (issue 20, point 3).
func TestFloodingDelegatorCannotCrowdOut(t *testing.T) {
	const innocent AgentID = "spiffe://example.org/innocent"
	ctx := context.Background()
	w := newWorld(t, JWS, stPlanner, stWorker, innocent)
	store := replay.NewMemory(replay.MemoryOptions{MaxEntries: 80, Now: w.clock.Now}) // a share of 10
	a := w.agent(stWorker, func(c *Config) { c.Store = store })
	flooded := false
	for i := 0; i < 80 && !flooded; i++ {
		data := encodeHandoff(t, handoffOf(w.offer(stPlanner, stWorker, nil)), JSON)
		in, err := a.Receive(ctx, data, Host{Dialog: "not the offer's"})
		if err != nil {
			require.ErrorIs(t, err, replay.ErrIssuerFull, "the flood meets its issuer's share")
			require.ErrorIs(t, err, ErrStore)
			flooded = true
			break
		}
		require.True(t, in.StatusDue())
		_, err = a.Reply(ctx, in, state.Rejected, ReplyOptions{Reason: reason.Policy})
		require.NoError(t, err)
	}
	require.True(t, flooded, "the flooding delegator was never refused")
	in := receive(t, a, encodeHandoff(t, handoffOf(w.offer(innocent, stWorker, nil)), JSON), Host{})
	assert.True(t, in.Accepted(), "the innocent delegator's fresh offer: %s", in.Reason())
}
