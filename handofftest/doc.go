// Package handofftest is a kit for testing a service's handoff wiring, in
// the manner of net/http/httptest and testing/fstest: a World of agents
// that trust one another, ready-made bad inputs with the refusal the draft
// requires for each, assertions, and stores that record calls or fail on
// cue.
//
// Everything here takes a testing.TB and fails the test on a setup error;
// nothing is global, and the kit links no module the handoff package does
// not link already.
//
// # A world
//
// NewWorld makes one ECDSA P-256 (ES256) key per agent, one trust
// configuration binding every key to its AgentID, and one settable Clock
// that every agent made by World.Agent reads. World.In gives the same
// world signing in COSE instead of JWS. Besides the agents named, a World
// holds relay agents for chains (World.Chain builds n hops to a receiver)
// and the Outsider, whose key no trust configuration binds.
//
// # Bad inputs
//
// World.BadInputs lists one input per attack class (Attacks), in JWS and
// COSE: a tampered payload, a wrong key, an embedded key, alg "none", an
// HMAC keyed with the public key, a wrong audience, an expired, future-dated
// or over-long offer, a replay, an equivocation and a high-S twin, a wrong
// dialog, broken, reordered, truncated, cyclic and too-deep chains, a forged
// element behind an untrusted one, a mismatched and an unverifiable
// reference, an oversize input, malformed JSON and CBOR. Each carries the
// reason code and check of section 5.1 that the draft requires, and the
// package's own tests prove that handoff.Agent refuses each exactly so.
//
// A worked example: a service wraps an *handoff.Agent in its handler. Its
// test feeds every bad input to a handler made fresh for the input, and
// checks the reason it refused with and the "rejected" status it sent:
//
//	func TestHandlerRefusesBadInputs(t *testing.T) {
//		w := handofftest.NewWorld(t, planner, coder)
//		for _, bad := range w.BadInputs(coder) {
//			t.Run(bad.Name, func(t *testing.T) {
//				w := w.With(t)
//				h := myservice.NewHandler(w.Agent(coder, bad.Configure))
//				for _, p := range bad.Prior { // the first of a replay or equivocation
//					h.Handle(ctx, p, bad.Host)
//				}
//				reason, status, err := h.Handle(ctx, bad.Data, bad.Host)
//				if err != nil || reason != bad.Reason {
//					t.Fatalf("refused with %q (%v), want %q: %s", reason, err, bad.Reason, bad.Rule)
//				}
//				if bad.StatusDue() {
//					w.AssertStatus(t, status, bad.Offer, handoff.Rejected, bad.Reason)
//				}
//			})
//		}
//	}
//
// Deliver each bad input to a receiver with a fresh memory: a replay's
// prior offer is accepted, and would be remembered by the next input's
// receiver otherwise. A handler that hands out the *handoff.Received can
// check everything at once with AssertBad (reason, check, failure class,
// retransmission, and whether a status is due). The package Example runs
// this test in full against a toy handler.
//
// # Assertions
//
// AssertAccepted, AssertRefused (an offer refused with a given reason),
// AssertBad, AssertStatus (a status answers a given offer with a given
// state, HC-55) and, with a Counter wrapping the work function,
// AssertRanOnce (the work of a retransmitted offer ran once, HC-38).
//
// # Stores
//
// RecordingStore and RecordingOfferStore wrap a replay.Store or
// replay.OfferStore and record each call with its result. FaultStore and
// FaultOfferStore fail, hang until the caller's deadline, or go away, on a
// Cue, so that a test can show that a service refuses an offer, and never
// accepts it, when its memory cannot answer. All four embed the store they
// wrap: a method the interface gains later reaches the wrapped store as is.
package handofftest
