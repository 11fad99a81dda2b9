package handofftest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

// toyHandler is a service's handoff wiring, as a framework might write it:
// it refuses what its agent refuses, answers "rejected" when the rules ask
// for it (HC-30), and runs the work of an accepted offer once.
type toyHandler struct {
	agent *handoff.Agent
	work  func(context.Context, *handoff.Offer) error
}

// Handle takes a Handoff object from a host message. It returns the reason
// of a refusal ("" when it accepted, or for a retransmission) and the
// status to send back, if any. An error means the offer was refused
// because the agent's store could not answer.
func (h *toyHandler) Handle(ctx context.Context, data []byte, host handoff.Host) (reason.Code, []byte, error) {
	in, err := h.agent.Receive(ctx, data, host)
	if err != nil {
		return "", nil, err
	}
	switch {
	case in.Accepted():
		st, err := h.agent.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
		if err != nil {
			return "", nil, err
		}
		return "", st.Octets, h.work(ctx, in.Offer())
	case in.StatusDue():
		st, err := h.agent.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
		return in.Reason(), st.Octets, err
	}
	return in.Reason(), nil, nil
}

// exampleT stands in for the *testing.T of a test function, which an
// example is not given.
type exampleT struct{ testing.TB }

func (exampleT) Helper()                           {}
func (exampleT) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (exampleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (exampleT) FailNow()                          { panic("FailNow") }

// A table test of a toy handler against every bad input of the kit: each
// is refused with the draft's reason, answered with a verified "rejected"
// status when the rules ask for one, and the work of a retransmitted offer
// runs once. In a test function, t is the *testing.T.
func Example() {
	t := exampleT{}
	ctx := context.Background()
	w := handofftest.NewWorld(t, "spiffe://a.example/agent/planner", "spiffe://b.example/agent/coder")
	var runs handofftest.Counter
	bads := w.BadInputs("spiffe://b.example/agent/coder")
	for _, bad := range bads {
		h := &toyHandler{agent: w.Agent("spiffe://b.example/agent/coder", bad.Configure),
			work: runs.Wrap(func(context.Context, *handoff.Offer) error { return nil })}
		for _, p := range bad.Prior {
			h.Handle(ctx, p, bad.Host)
		}
		reason, status, err := h.Handle(ctx, bad.Data, bad.Host)
		if err != nil || reason != bad.Reason {
			t.Errorf("%s: refused with %q (%v), want %q", bad.Name, reason, err, bad.Reason)
		}
		if bad.StatusDue() {
			w.AssertStatus(t, status, bad.Offer, state.Rejected, bad.Reason)
		} else if status != nil {
			t.Errorf("%s: a status sent where none is due", bad.Name)
		}
		if bad.Retransmission {
			handofftest.AssertRanOnce(t, &runs, bad.Offer)
		}
	}
	fmt.Printf("%d bad inputs refused; work ran %d times, once for each prior offer\n", len(bads), runs.Total())
	// Output: 45 bad inputs refused; work ran 6 times, once for each prior offer
}
