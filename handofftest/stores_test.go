package handofftest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/storetest"
)

// The wrappers keep the replay.Store contract: with no cue armed they pass
// the conformance suite (HC-33, HC-34).
func TestStores_KeepTheContract(t *testing.T) {
	t.Run("recording", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
			return handofftest.NewRecordingStore(replay.NewMemory(replay.MemoryOptions{Now: now}))
		}, storetest.Options{})
	})
	t.Run("fault", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
			return handofftest.NewFaultStore(replay.NewMemory(replay.MemoryOptions{Now: now}), handofftest.FaultOptions{})
		}, storetest.Options{})
	})
}

// The recording store sees the receiver check and record a fresh offer
// in one call (HC-33); a fresh retransmission costs the same one call,
// which finds the record (HC-35); a retransmission no longer fresh costs
// one read, which still recognises it (HC-38).
func TestRecordingStore_HC33_SeesReceive(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	store := handofftest.NewRecordingStore(replay.NewMemory(replay.MemoryOptions{Now: w.Now}))
	a := w.Agent(coder, func(c *handoff.Config) { c.Store = store })
	offer := w.Offer(planner, coder, nil)
	handofftest.RequireAccepted(t, w.Receive(a, w.Encode(offer)))
	o, _, err := handoff.InspectUnverified(offer, handoff.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	key := replay.Key{Iss: string(planner), Hop: string(o.Hop)}
	calls := store.Calls()
	if len(calls) != 1 || calls[0].Method != handofftest.MethodRemember {
		t.Fatalf("calls %+v, want one Remember", calls)
	}
	if calls[0].Key != key || !calls[0].Inserted || !offer.Digest().Equal(digest.Digest{Alg: digest.SHA256Alg, Val: calls[0].Record.Digest}) {
		t.Fatalf("Remember %+v, want an insert of the offer's digest under %v", calls[0], key)
	}

	store.Reset()
	if in := w.Receive(a, w.Encode(offer)); !in.Retransmission() {
		t.Fatalf("not a retransmission: %s", in.Reason())
	}
	if calls := store.Calls(); len(calls) != 1 || calls[0].Method != handofftest.MethodRemember || calls[0].Inserted {
		t.Fatalf("calls %+v, want one Remember that finds the record", calls)
	}

	store.Reset()
	w.Clock().Set(o.Exp.Std()) // expired, still remembered (exp + skew)
	if in := w.Receive(a, w.Encode(offer)); !in.Retransmission() {
		t.Fatalf("not a retransmission: %s", in.Reason())
	}
	if store.Count(handofftest.MethodGet) != 1 || store.Count(handofftest.MethodRemember) != 0 {
		t.Fatalf("calls %+v, want one Get", store.Calls())
	}
}

// A receiver whose store fails, hangs or has gone away refuses the offer
// with an error wrapping handoff.ErrStore or the context's, remembers
// nothing, and accepts the offer once the store is back (fail closed).
func TestFaultStore_HC33_ReceiverFailsClosed(t *testing.T) {
	for _, f := range []handofftest.Fault{handofftest.Fail, handofftest.Hang, handofftest.Gone} {
		for _, method := range []string{handofftest.MethodGet, handofftest.MethodRemember} {
			t.Run(f.String()+"/"+method, func(t *testing.T) {
				w := handofftest.NewWorld(t, planner, coder)
				store := handofftest.NewFaultStore(replay.NewMemory(replay.MemoryOptions{Now: w.Now}), handofftest.FaultOptions{})
				a := w.Agent(coder, func(c *handoff.Config) { c.Store = store })
				data := w.Encode(w.Offer(planner, coder, nil))
				if method == handofftest.MethodGet {
					// A fresh offer is checked and recorded by Remember
					// alone; Get is the read for an offer no longer
					// fresh, whose pair may be remembered (HC-38). Such
					// an offer is never accepted: refused with the
					// error, then stale once the store is back.
					testGetFailsClosed(t, w, store, a, data, f)
					return
				}

				store.Inject(handofftest.Cue{Fault: f, Methods: []string{method}, Times: 1})
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				in, err := a.Receive(ctx, data, w.Host())
				if in != nil && in.Accepted() {
					t.Fatal("accepted with a failing store")
				}
				switch f {
				case handofftest.Hang:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("error %v, want the deadline", err)
					}
				default:
					if !errors.Is(err, handoff.ErrStore) || !errors.Is(err, handofftest.ErrInjected) {
						t.Fatalf("error %v, want handoff.ErrStore wrapping the injected fault", err)
					}
				}
				if store.Injected() != 1 {
					t.Fatalf("%d faults injected, want 1", store.Injected())
				}
				if f == handofftest.Gone {
					if _, err := a.Receive(context.Background(), data, w.Host()); !errors.Is(err, handofftest.ErrGone) {
						t.Fatalf("a store gone came back by itself: %v", err)
					}
					store.Heal()
				}
				handofftest.RequireAccepted(t, w.Receive(a, data))
			})
		}
	}
}

func testGetFailsClosed(t *testing.T, w *handofftest.World, store *handofftest.FaultStore, a *handoff.Agent, data []byte, f handofftest.Fault) {
	handofftest.RequireAccepted(t, w.Receive(a, data))
	w.Clock().Advance(time.Hour) // past exp + skew: stale, and forgotten
	store.Inject(handofftest.Cue{Fault: f, Methods: []string{handofftest.MethodGet}, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	in, err := a.Receive(ctx, data, w.Host())
	if in != nil {
		t.Fatalf("an answer (%s) without the store's", in.Reason())
	}
	switch f {
	case handofftest.Hang:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the deadline", err)
		}
	default:
		if !errors.Is(err, handoff.ErrStore) || !errors.Is(err, handofftest.ErrInjected) {
			t.Fatalf("error %v, want handoff.ErrStore wrapping the injected fault", err)
		}
	}
	if f == handofftest.Gone {
		store.Heal()
	}
	if in := w.Receive(a, data); in.Check() != handoff.CheckFreshness {
		t.Fatalf("check %s once the store is back, want freshness", in.Check())
	}
}

// Cues count: Skip calls pass, Times calls fail, later calls pass; a cue
// names its methods.
func TestFaultStore_Cues(t *testing.T) {
	ctx := context.Background()
	store := handofftest.NewFaultStore(replay.NewMemory(replay.MemoryOptions{}), handofftest.FaultOptions{})
	store.Inject(handofftest.Cue{Fault: handofftest.Fail, Methods: []string{handofftest.MethodGet}, Skip: 2, Times: 2})
	k := replay.Key{Iss: "i", Hop: "h"}
	var got []bool
	for range 5 {
		_, _, err := store.Get(ctx, k)
		got = append(got, err != nil)
		if _, _, err := store.Remember(ctx, k, replay.Record{Digest: make([]byte, 32)}); err != nil {
			t.Fatalf("Remember failed: %v", err)
		}
	}
	want := []bool{false, false, true, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Get failed %v, want %v", got, want)
		}
	}
	store.Inject(handofftest.Cue{Fault: handofftest.Hang})
	start := make(chan struct{})
	done := make(chan error)
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-start; cancel() }()
		done <- store.Update(ctx, k, replay.Record{Digest: make([]byte, 32)})
	}()
	close(start)
	if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("hung Update returned %v, want the context's error and ErrUnavailable", err)
	}
	if err := store.Close(); err != nil {
		t.Fatalf("Close failed under a cue that does not name it: %v", err)
	}
	short := handofftest.NewFaultStore(replay.NewMemory(replay.MemoryOptions{}), handofftest.FaultOptions{HangLimit: time.Millisecond})
	short.Inject(handofftest.Cue{Fault: handofftest.Hang})
	if _, _, err := short.Get(context.Background(), k); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hang without deadline returned %v, want DeadlineExceeded after HangLimit", err)
	}
	short.Heal() // the Hang cue above is armed for every later call
	short.Inject(handofftest.Cue{Fault: handofftest.Gone, Methods: []string{handofftest.MethodUpdate}})
	if err := short.Update(context.Background(), k, replay.Record{Digest: make([]byte, 32)}); !errors.Is(err, handofftest.ErrGone) {
		t.Fatalf("Update returned %v, want ErrGone", err)
	}
	if err := short.Close(); !errors.Is(err, handofftest.ErrGone) || !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("Close of a store gone returned %v", err)
	}
	short.Heal()
	if err := short.Close(); err != nil {
		t.Fatalf("Close after Heal: %v", err)
	}
}

// A delegator whose offer store fails makes no offer, and says so with an
// error; once healed it offers.
func TestFaultOfferStore_DelegatorFailsClosed(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	offers := handofftest.NewFaultOfferStore(replay.NewMemoryOffers(replay.MemoryOffersOptions{Now: w.Now}), handofftest.FaultOptions{})
	rec := handofftest.NewRecordingOfferStore(offers)
	a := w.Agent(planner, func(c *handoff.Config) { c.Offers = rec })
	offers.Inject(handofftest.Cue{Fault: handofftest.Fail, Methods: []string{handofftest.MethodCreate}, Times: 1})
	if out, err := a.Offer(context.Background(), handoff.OfferParams{To: coder, Dialog: handofftest.DefaultDialog}); err == nil || out != nil {
		t.Fatalf("offer made with a failing store: %v", err)
	}
	out, err := a.Offer(context.Background(), handoff.OfferParams{To: coder, Dialog: handofftest.DefaultDialog})
	if err != nil {
		t.Fatal(err)
	}
	if n := rec.Count(handofftest.MethodCreate); n != 2 {
		t.Fatalf("%d Create calls, want 2", n)
	}
	calls := rec.Calls()
	last := calls[len(calls)-1]
	if last.Err != nil || last.Hop != string(out.Offer.Hop) {
		t.Fatalf("last call %+v, want the Create of hop %s", last, out.Offer.Hop)
	}
	handofftest.RequireAccepted(t, w.Receive(w.Agent(coder), mustEncode(t, out)))
}

func mustEncode(t *testing.T, out *handoff.Outgoing) []byte {
	t.Helper()
	b, err := out.Handoff.Encode(handoff.JSON)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
