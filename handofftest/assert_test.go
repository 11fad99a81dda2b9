package handofftest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

// fakeT records what an assertion reports, so that the assertions
// themselves can be shown to fail.
type fakeT struct {
	testing.TB
	errors []string
	failed bool
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
	f.failed = true
}
func (f *fakeT) FailNow() { f.failed = true; runtime.Goexit() }
func (f *fakeT) Fatalf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
	f.FailNow()
}
func (f *fakeT) Fatal(args ...any) { f.errors = append(f.errors, fmt.Sprint(args...)); f.FailNow() }

// fails runs fn on a fakeT, in a goroutine of its own as testing does, and
// reports whether it failed.
func fails(fn func(t testing.TB)) bool {
	f := &fakeT{}
	done := make(chan struct{})
	go func() { defer close(done); fn(f) }()
	<-done
	return f.failed
}

func TestAssertRefusedAndAccepted(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	good := w.Receive(w.Agent(coder), w.Encode(w.Offer(planner, coder, nil)))
	stale := w.Receive(w.Agent(coder), w.Encode(w.Offer(planner, coder, func(o *handoff.Offer) { o.Exp = o.Iat - 1 })))

	if fails(func(t testing.TB) { handofftest.AssertAccepted(t, good) }) {
		t.Error("AssertAccepted failed on an accepted offer")
	}
	if !fails(func(t testing.TB) { handofftest.AssertAccepted(t, stale) }) {
		t.Error("AssertAccepted passed a refused offer")
	}
	if !fails(func(t testing.TB) { handofftest.RequireAccepted(t, stale) }) {
		t.Error("RequireAccepted passed a refused offer")
	}
	if fails(func(t testing.TB) { handofftest.AssertRefused(t, stale, reason.Stale) }) {
		t.Error("AssertRefused failed on the right reason")
	}
	for _, c := range []struct {
		in     *handoff.Received
		reason reason.Code
	}{{good, reason.Stale}, {stale, reason.Replay}, {nil, reason.Stale}} {
		if !fails(func(t testing.TB) { handofftest.AssertRefused(t, c.in, c.reason) }) {
			t.Errorf("AssertRefused passed %q", c.reason)
		}
	}
	bad := w.BadInputs(coder)[0]
	if !fails(func(t testing.TB) { handofftest.AssertBad(t, good, bad) }) {
		t.Error("AssertBad passed an accepted offer")
	}
}

// A status answers a given offer with a given state (HC-55).
func TestAssertStatus_HC55(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	ctx := context.Background()
	offer := w.Offer(planner, coder, nil)
	a := w.Agent(coder)
	in := w.Receive(a, w.Encode(offer))
	st, err := a.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.AssertStatus(t, st.Octets, offer, state.Accepted, ""); got == nil || got.State != state.Accepted {
		t.Fatal("the status does not verify")
	}
	other := w.Offer(planner, coder, nil)
	for name, fn := range map[string]func(t testing.TB){
		"another state": func(t testing.TB) { w.AssertStatus(t, st.Octets, offer, state.Completed, "") },
		"a reason":      func(t testing.TB) { w.AssertStatus(t, st.Octets, offer, state.Accepted, reason.Policy) },
		"another offer": func(t testing.TB) { w.AssertStatus(t, st.Octets, other, state.Accepted, "") },
		"not a status":  func(t testing.TB) { w.AssertStatus(t, []byte("{}"), offer, state.Accepted, "") },
		"untrusted iss": func(t testing.TB) {
			handofftest.AssertStatus(t, w.TrustOnly(planner), st.Octets, offer, state.Accepted, "")
		},
		"an offer as st": func(t testing.TB) { w.AssertStatus(t, offer.Octets, offer, state.Accepted, "") },
	} {
		if !fails(fn) {
			t.Errorf("AssertStatus passed %s", name)
		}
	}

	// A refusal the rules answer: "rejected" with the reason (HC-30).
	wrongDialog := w.Offer(planner, coder, func(o *handoff.Offer) { o.Dialog = "another" })
	in = w.Receive(a, w.Encode(wrongDialog))
	handofftest.AssertRefused(t, in, reason.Policy)
	st, err = a.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
	if err != nil {
		t.Fatal(err)
	}
	w.AssertStatus(t, st.Octets, wrongDialog, state.Rejected, reason.Policy)
}

// An empty status, what a failed Reply returns, is reported as empty, not
// as a form that is neither JWS nor COSE.
func TestAssertStatus_Empty(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	offer := w.Offer(planner, coder, nil)
	for name, status := range map[string][]byte{"nil": nil, "zero Signed": (handoff.Signed{}).Octets, "empty": {}} {
		f := &fakeT{}
		done := make(chan struct{})
		go func() { defer close(done); w.AssertStatus(f, status, offer, state.Accepted, "") }()
		<-done
		if !f.failed || len(f.errors) != 1 {
			t.Fatalf("%s: AssertStatus reported %q", name, f.errors)
		}
		if msg := f.errors[0]; !strings.Contains(msg, "the status is empty") || strings.Contains(msg, "COSE_Sign1") {
			t.Errorf("%s: %q does not say the status is empty", name, msg)
		}
	}
}

// The work of a retransmitted offer runs once (HC-38), and the counter
// tells a second run apart.
func TestCounter_HC38_RanOnce(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	var c handofftest.Counter
	a := w.Agent(coder)
	work := c.Wrap(func(context.Context, *handoff.Offer) error { return nil })
	serve := func(data []byte) {
		in := w.Receive(a, data)
		if in.Accepted() {
			if err := a.Take(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			if err := work(context.Background(), in.Offer()); err != nil {
				t.Fatal(err)
			}
		}
	}
	offer := w.Offer(planner, coder, nil)
	for range 3 {
		serve(w.Encode(offer))
	}
	handofftest.AssertRanOnce(t, &c, offer)
	if c.Total() != 1 {
		t.Fatalf("total %d, want 1", c.Total())
	}

	// A service that redoes the work is caught.
	o, _, _ := handoff.InspectUnverified(offer, handoff.Limits{})
	c.Inc(o.Iss, o.Hop)
	if !fails(func(t testing.TB) { handofftest.AssertRanOnce(t, &c, offer) }) {
		t.Error("AssertRanOnce passed two runs")
	}
	if !fails(func(t testing.TB) { handofftest.AssertRanOnce(t, &c, w.Offer(planner, coder, nil)) }) {
		t.Error("AssertRanOnce passed no run")
	}
}

// A "rejected" with "wrong-audience" comes from an agent the offer did not
// name: AssertStatus checks it against the offer all the same, except for
// its iss.
func TestAssertStatus_HC55_WrongAudience(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	ctx := context.Background()
	offer := w.Offer(planner, handofftest.Relay(5), nil)
	a := w.Agent(coder)
	in := w.Receive(a, w.Encode(offer))
	handofftest.AssertRefused(t, in, reason.WrongAudience)
	st, err := a.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
	if err != nil {
		t.Fatal(err)
	}
	w.AssertStatus(t, st.Octets, offer, state.Rejected, reason.WrongAudience)
	if !fails(func(t testing.TB) {
		w.AssertStatus(t, st.Octets, w.Offer(planner, handofftest.Relay(5), nil), state.Rejected, reason.WrongAudience)
	}) {
		t.Error("AssertStatus passed a status naming another offer")
	}
	if !fails(func(t testing.TB) {
		handofftest.AssertStatus(t, w.TrustOnly(planner), st.Octets, offer, state.Rejected, reason.WrongAudience)
	}) {
		t.Error("AssertStatus passed a status of an untrusted agent")
	}
}
