package handofftest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/reason"
)

// The agents of a World trust one another in both signed forms and both
// encodings, and a COSE World shares the keys, trust and clock of the JWS
// one (HC-19, HC-21).
func TestWorld_HC21_AgentsTrustOneAnother(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		wf := w.In(f)
		for _, enc := range []handoff.Encoding{handoff.JSON, handoff.CBOR} {
			t.Run(fmt.Sprintf("%s-in-%s", f, enc), func(t *testing.T) {
				s := wf.Offer(planner, coder, nil)
				if s.Format != f {
					t.Fatalf("signed in %v, want %v", s.Format, f)
				}
				data, err := handofftest.Handoff(s).Encode(enc)
				if err != nil {
					t.Fatal(err)
				}
				in := w.Receive(w.Agent(coder), data)
				handofftest.RequireAccepted(t, in)
				if in.Offer().Dialog != handofftest.DefaultDialog || in.Offer().Iss != planner {
					t.Fatalf("offer %+v", in.Offer())
				}
				// And the other way round, from a relay.
				handofftest.RequireAccepted(t, w.Receive(wf.Agent(planner), wf.Encode(wf.Offer(handofftest.Relay(3), planner, nil))))
			})
		}
	}
	if w.In(handoff.COSE).Encoding() != handoff.CBOR || w.Encoding() != handoff.JSON {
		t.Fatal("encodings")
	}
	if got := w.IDs(); len(got) != 2 || got[0] != planner || got[1] != coder {
		t.Fatalf("IDs %v", got)
	}
}

// The Outsider has a key but no trust: what it signs is "untrusted-key";
// TrustOnly narrows the trust.
func TestWorld_HC21_OutsiderAndTrustOnly(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	in := w.Receive(w.Agent(coder), w.Encode(w.Offer(handofftest.Outsider, coder, nil)))
	handofftest.AssertRefused(t, in, reason.UntrustedKey)
	narrow := func(c *handoff.Config) { c.Trust = w.TrustOnly(coder) }
	in = w.Receive(w.Agent(coder, narrow), w.Encode(w.Offer(planner, coder, nil)))
	handofftest.AssertRefused(t, in, reason.UntrustedKey)
}

// Chain builds n hops to the receiver: a full chain of n-1 elements that
// verifies, up to the limit, and too-deep one over it (HC-46, HC-50).
func TestWorld_HC50_Chain(t *testing.T) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		w := handofftest.NewWorld(t, planner, coder).In(f)
		for n := 1; n <= handofftest.MaxChain+2; n++ {
			t.Run(fmt.Sprintf("%s/%d hops", f, n), func(t *testing.T) {
				e := w.Chain(coder, n)
				if len(e) != n {
					t.Fatalf("%d elements, want %d", len(e), n)
				}
				in := w.Receive(w.Agent(coder), w.Encode(e...))
				if n-1 > handofftest.MaxChain {
					handofftest.AssertRefused(t, in, reason.TooDeep)
					return
				}
				handofftest.RequireAccepted(t, in)
				if in.Chain() != handoff.ChainFull || len(in.Links()) != n-1 {
					t.Fatalf("chain %s with %d links, want full with %d", in.Chain(), len(in.Links()), n-1)
				}
				if in.Offer().Iss != handofftest.Relay(n-1) {
					t.Fatalf("offer from %s", in.Offer().Iss)
				}
			})
		}
	}
	if !fails(func(t testing.TB) { handofftest.NewWorld(t, coder).Chain(coder, handofftest.MaxChain+3) }) {
		t.Error("a chain longer than the relays allowed")
	}
}

// One clock for every agent of a World, and for what it signs: moving it
// past an offer's exp makes the offer stale (HC-31).
func TestWorld_HC31_SharedClock(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	if w.Now().Unix() != handofftest.StartUnix {
		t.Fatalf("clock starts at %v", w.Now())
	}
	a := w.Agent(coder)
	data := w.Encode(w.Offer(planner, coder, nil))
	w.In(handoff.COSE).Clock().Advance(handofftest.TTL + time.Second)
	handofftest.AssertRefused(t, w.Receive(a, data), reason.Stale)
	w.Clock().Set(time.Unix(handofftest.StartUnix, 0))
	handofftest.RequireAccepted(t, w.Receive(a, data))
}

// Setup errors fail the test, never silently.
func TestWorld_SetupErrors(t *testing.T) {
	for name, fn := range map[string]func(t testing.TB){
		"no agents":         func(t testing.TB) { handofftest.NewWorld(t) },
		"an agent twice":    func(t testing.TB) { handofftest.NewWorld(t, coder, coder) },
		"a relay named":     func(t testing.TB) { handofftest.NewWorld(t, handofftest.Relay(0)) },
		"unknown agent":     func(t testing.TB) { handofftest.NewWorld(t, coder).Signer(planner) },
		"bad inputs to one": func(t testing.TB) { handofftest.NewWorld(t, coder).BadInputs(planner) },
		"unknown format":    func(t testing.TB) { handofftest.NewWorld(t, coder).In(7) },
		"unknown encoding":  func(t testing.TB) { handofftest.NewWorld(t, coder).Encoded(9) },
		"a subtest's own t": func(t testing.TB) { handofftest.NewWorld(&fakeT{}, coder).With(t).Signer(planner) },
		"a path of one":     func(t testing.TB) { handofftest.NewWorld(t, coder).Path(nil, coder) },
	} {
		if !fails(fn) {
			t.Errorf("%s: no failure", name)
		}
	}
}

// A World with one agent signs its bad inputs from a relay.
func TestWorld_BadInputsWithOneAgent(t *testing.T) {
	w := handofftest.NewWorld(t, coder)
	for _, bad := range w.BadInputs(coder) {
		a := w.Agent(coder, bad.Configure)
		for _, p := range bad.Prior {
			handofftest.RequireAccepted(t, w.Receive(a, p))
		}
		handofftest.AssertBad(t, w.Receive(a, bad.Data), bad)
	}
}

// The trust document binds the same keys as the World's trust: what one
// accepts, the other does, and the Outsider is in neither (HC-21).
func TestWorld_HC21_TrustDocument(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	tr, err := keyset.ParseTrust(w.TrustDocument())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(tr.AgentIDs()), len(w.Trust().AgentIDs()); got != want || got != 2+handofftest.MaxChain+2 {
		t.Fatalf("%d agents in the document, %d in the trust", got, want)
	}
	fromFile := func(c *handoff.Config) { c.Trust = tr }
	handofftest.RequireAccepted(t, w.Receive(w.Agent(coder, fromFile), w.Encode(w.Offer(planner, coder, nil))))
	in := w.Receive(w.Agent(coder, fromFile), w.Encode(w.Offer(handofftest.Outsider, coder, nil)))
	handofftest.AssertRefused(t, in, reason.UntrustedKey)
}
