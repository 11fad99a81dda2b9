package handofftest

import (
	"context"
	"fmt"

	"sync"
	"testing"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

// AssertAccepted reports, with t.Errorf, an offer that was not accepted,
// with its reason and detail. It returns whether it was accepted.
func AssertAccepted(t testing.TB, in *handoff.Received) bool {
	t.Helper()
	switch {
	case in == nil:
		t.Errorf("handofftest: no outcome, want an accepted offer")
		return false
	case !in.Accepted():
		t.Errorf("handofftest: offer not accepted: reason %q at check %v, retransmission %v: %s",
			in.Reason(), in.Check(), in.Retransmission(), in.Detail())
		return false
	}
	return true
}

// RequireAccepted is AssertAccepted that stops the test (t.FailNow).
func RequireAccepted(t testing.TB, in *handoff.Received) {
	t.Helper()
	if !AssertAccepted(t, in) {
		t.FailNow()
	}
}

// AssertRefused reports an offer that was not refused with reason: one
// accepted, one taken for a retransmission, or one refused for another
// reason. It returns whether the offer was refused with reason.
func AssertRefused(t testing.TB, in *handoff.Received, reason reason.Code) bool {
	t.Helper()
	switch {
	case in == nil:
		t.Errorf("handofftest: no outcome, want a refusal with %q", reason)
	case in.Accepted():
		t.Errorf("handofftest: offer accepted, want a refusal with %q", reason)
	case in.Retransmission():
		t.Errorf("handofftest: offer taken for a retransmission, want a refusal with %q", reason)
	case in.Reason() != reason:
		t.Errorf("handofftest: offer refused with %q at check %v, want %q: %s", in.Reason(), in.Check(), reason, in.Detail())
	case handoff.ReasonOf(in.Err()) != reason:
		t.Errorf("handofftest: error %v carries reason %q, want %q", in.Err(), handoff.ReasonOf(in.Err()), reason)
	default:
		return true
	}
	return false
}

// AssertBad reports how in differs from the refusal bad claims (see
// BadInput.Verify). It returns whether it matched.
func AssertBad(t testing.TB, in *handoff.Received, bad BadInput) bool {
	t.Helper()
	if err := bad.Verify(in); err != nil {
		t.Errorf("handofftest: %v", err)
		return false
	}
	return true
}

// AssertStatus checks that status (the signed octets, JWS or COSE) is a
// status that answers offer as the draft requires (section 5.4, HC-55:
// signed by a key trust binds to its iss, iss the offer's aud, aud the
// offer's iss, hop and offer digest those of offer), in state, with
// reason (empty for none). It returns the verified status, or nil after
// t.Errorf.
//
// A "rejected" with reason "wrong-audience" comes from an agent the offer
// was not addressed to, so its iss cannot be the offer's aud: for it,
// every other part of HC-55 is checked, and iss only for a trusted key.
func AssertStatus(t testing.TB, trust *handoff.Trust, status []byte, offer handoff.Signed, st2 state.State, why reason.Code) *handoff.Status {
	t.Helper()
	if len(status) == 0 {
		// The zero Signed a failed Reply returns, or a status never sent.
		t.Errorf("handofftest: the status is empty: no status was signed (check the error of the Reply that made it)")
		return nil
	}
	s, err := handoff.ParseSigned(status, handoff.Limits{})
	if err != nil {
		t.Errorf("handofftest: not a signed status: %v", err)
		return nil
	}
	var st *handoff.Status
	if st2 == state.Rejected && why == reason.WrongAudience {
		st, err = openMisaddressed(s, offer, trust)
	} else {
		st, err = handoff.VerifyStatus(s, offer, trust, handoff.Limits{})
	}
	if err != nil {
		t.Errorf("handofftest: status does not answer the offer: %v", err)
		return nil
	}
	if st.State != st2 || st.Reason != why {
		t.Errorf("handofftest: status %q with reason %q, want %q with reason %q", st.State, st.Reason, st2, why)
		return nil
	}
	return st
}

// openMisaddressed checks a status from an agent that an offer did not
// name as aud: its signature, and that it names the offer and goes back to
// its iss.
func openMisaddressed(s, offer handoff.Signed, trust *handoff.Trust) (*handoff.Status, error) {
	st, err := handoff.OpenStatus(s, trust, handoff.Limits{})
	if err != nil {
		return nil, err
	}
	o, _, err := handoff.InspectUnverified(offer, handoff.Limits{})
	if err != nil || o == nil {
		return nil, fmt.Errorf("the offer does not decode: %v", err)
	}
	switch {
	case st.Hop != o.Hop:
		return nil, fmt.Errorf("status hop %s, offer hop %s", st.Hop, o.Hop)
	case !st.Offer.Equal(offer.Digest()):
		return nil, fmt.Errorf("status names offer %s, not %s", st.Offer, offer.Digest())
	case st.Aud != o.Iss:
		return nil, fmt.Errorf("status aud %q, not the offer's iss %q", st.Aud, o.Iss)
	}
	return st, nil
}

// AssertStatus is AssertStatus with the World's trust.
func (w *World) AssertStatus(t testing.TB, status []byte, offer handoff.Signed, state state.State, reason reason.Code) *handoff.Status {
	t.Helper()
	return AssertStatus(t, w.trust, status, offer, state, reason)
}

// Counter counts how many times work ran for each hop, so that a test can
// show that a retransmitted offer is not processed again (HC-38). It is
// safe for concurrent use; the zero value is ready.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

func counterKey(iss handoff.AgentID, hop handoff.HopID) string {
	return string(iss) + "\x00" + string(hop)
}

// Inc counts one run of the work of the hop (iss, hop).
func (c *Counter) Inc(iss handoff.AgentID, hop handoff.HopID) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[counterKey(iss, hop)]++
	c.mu.Unlock()
}

// Count returns how many times the work of (iss, hop) ran.
func (c *Counter) Count(iss handoff.AgentID, hop handoff.HopID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[counterKey(iss, hop)]
}

// Total returns how many times any work ran.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// Wrap returns work counting each run under the offer's (iss, hop): the
// function a service calls once an offer is accepted.
func (c *Counter) Wrap(work func(context.Context, *handoff.Offer) error) func(context.Context, *handoff.Offer) error {
	return func(ctx context.Context, o *handoff.Offer) error {
		c.Inc(o.Iss, o.Hop)
		return work(ctx, o)
	}
}

// AssertRanOnce reports work that did not run exactly once for the hop of
// offer (read without verifying: the test made it). It returns whether it
// ran once.
func AssertRanOnce(t testing.TB, c *Counter, offer handoff.Signed) bool {
	t.Helper()
	o, _, err := handoff.InspectUnverified(offer, handoff.Limits{})
	if err != nil || o == nil {
		t.Errorf("handofftest: not an offer: %v", err)
		return false
	}
	if n := c.Count(o.Iss, o.Hop); n != 1 {
		t.Errorf("handofftest: work ran %d times for hop %s of %s, want once", n, o.Hop, o.Iss)
		return false
	}
	return true
}
