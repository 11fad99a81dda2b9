package handofftest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/reason"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
)

// worlds returns w as BadInputs users see it: each form in its own
// encoding, and everything in JSON, and in CBOR.
func worlds(w *handofftest.World) []*handofftest.World {
	return []*handofftest.World{w, w.Encoded(handoff.JSON), w.Encoded(handoff.CBOR)}
}

// Every bad input of the kit is refused by the library's own Agent with
// exactly the reason, check and failure class the kit claims, in both
// signed forms, both encodings and under both profiles: the kit cannot
// drift from the library (HC-13..HC-61, section 5.1).
func TestBadInputs_HC30_RefusedByAgentAsClaimed(t *testing.T) {
	for _, w := range worlds(handofftest.NewWorld(t, planner, coder)) {
		for _, strict := range []bool{false, true} {
			testRefusedAsClaimed(t, w, strict)
		}
	}
}

func testRefusedAsClaimed(t *testing.T, w *handofftest.World, strict bool) {
	profile := map[bool]string{false: "default", true: "strict"}[strict]
	for _, bad := range w.BadInputs(coder) {
		t.Run(profile+"/"+bad.Name, func(t *testing.T) {
			w := w.With(t)
			a := w.Agent(coder, bad.Configure, func(c *handoff.Config) { c.Limits.Strict = strict })
			for i, p := range bad.Prior {
				in, err := a.Receive(context.Background(), p, bad.Host)
				if err != nil {
					t.Fatalf("prior %d: %v", i, err)
				}
				handofftest.RequireAccepted(t, in)
			}
			in, err := a.Receive(context.Background(), bad.Data, bad.Host)
			if err != nil {
				t.Fatal(err)
			}
			if err := bad.Verify(in); err != nil {
				t.Error(err)
			}
		})
	}
}

// Each attack class is present, in both forms where it applies, and names
// are unique.
func TestBadInputs_CoverEveryAttack(t *testing.T) {
	for _, w := range worlds(handofftest.NewWorld(t, planner, coder)) {
		testCoverEveryAttack(t, w)
	}
}

func testCoverEveryAttack(t *testing.T, w *handofftest.World) {
	seen := map[handoff.Format][]handofftest.Attack{}
	encodings := map[handoff.Format]handoff.Encoding{}
	names := map[string]bool{}
	for _, bad := range w.BadInputs(coder) {
		if names[bad.Name] {
			t.Errorf("name %q twice", bad.Name)
		}
		names[bad.Name] = true
		seen[bad.Format] = append(seen[bad.Format], bad.Attack)
		if e, ok := encodings[bad.Format]; ok && e != bad.Encoding {
			t.Errorf("%s: encoding %v, others of its form %v", bad.Name, bad.Encoding, e)
		}
		encodings[bad.Format] = bad.Encoding
		if bad.Reason == "" && !bad.Retransmission {
			t.Errorf("%s: no reason", bad.Name)
		}
		if bad.Class == nil && !bad.Retransmission {
			t.Errorf("%s: no failure class", bad.Name)
		}
		if bad.Rule == "" || len(bad.Data) == 0 || bad.Host.Dialog == "" {
			t.Errorf("%s: incomplete", bad.Name)
		}
	}
	for _, a := range handofftest.Attacks() {
		for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
			want := true
			switch a {
			case handofftest.AttackAlgNone:
				want = f == handoff.JWS
			case handofftest.AttackMalformedJSON:
				want = encodings[f] == handoff.JSON
			case handofftest.AttackMalformedCBOR:
				want = encodings[f] == handoff.CBOR
			}
			if got := slices.Contains(seen[f], a); got != want {
				t.Errorf("%s in %s: present %v, want %v", a, f, got, want)
			}
		}
	}
}

// A World that In made gives the bad inputs of its format alone, in every
// encoding; a World that In did not make gives both forms.
func TestBadInputs_InChoosesTheFormat(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	formats := func(w *handofftest.World) map[handoff.Format]int {
		n := map[handoff.Format]int{}
		for _, bad := range w.BadInputs(coder) {
			n[bad.Format]++
		}
		return n
	}
	both := formats(w)
	if both[handoff.JWS] == 0 || both[handoff.COSE] == 0 {
		t.Fatalf("NewWorld: %v, want both forms", both)
	}
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		for _, ww := range []*handofftest.World{w.In(f), w.In(f).Encoded(handoff.JSON), w.Encoded(handoff.CBOR).In(f)} {
			got := formats(ww)
			if len(got) != 1 || got[f] != both[f] {
				t.Errorf("In(%v): %v, want only %d of %v", f, got, both[f], f)
			}
		}
	}
}

// Without the configuration a bad input names, the default receiver does
// not refuse it for that reason: Configure is needed, not decoration.
func TestBadInputs_ConfigureIsNeeded(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	n := 0
	for _, bad := range w.BadInputs(coder) {
		if bad.Configure == nil {
			continue
		}
		n++
		in := w.Receive(w.Agent(coder), bad.Data)
		if in.Reason() == bad.Reason {
			t.Errorf("%s: refused with %q without its configuration", bad.Name, in.Reason())
		}
	}
	if n == 0 {
		t.Fatal("no bad input needs a configuration")
	}
}

// A replay or an equivocation without its prior offer is accepted: the
// prior is what makes it bad.
func TestBadInputs_HC35_PriorIsNeeded(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	n := 0
	for _, bad := range w.BadInputs(coder) {
		if len(bad.Prior) == 0 {
			continue
		}
		n++
		if in := w.Receive(w.Agent(coder), bad.Data); !in.Accepted() {
			t.Errorf("%s: refused without its prior: %s %s", bad.Name, in.Reason(), in.Detail())
		}
	}
	if n != 6 {
		t.Fatalf("%d bad inputs with a prior, want 6", n)
	}
}

// Verify finds every difference: an accepted offer, and a refusal with
// another reason or check than claimed.
func TestBadInput_VerifyFindsDifferences(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	bad := w.BadInputs(coder)[0]
	good := w.Receive(w.Agent(coder), w.Encode(w.Offer(planner, coder, nil)))
	if err := bad.Verify(good); err == nil {
		t.Fatal("an accepted offer verified as a refusal")
	}
	in := w.Receive(w.Agent(coder), bad.Data)
	if err := bad.Verify(in); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*handofftest.BadInput){
		"reason":         func(b *handofftest.BadInput) { b.Reason = reason.UntrustedKey },
		"check":          func(b *handofftest.BadInput) { b.Check = handoff.CheckAudience },
		"class":          func(b *handofftest.BadInput) { b.Class = handoff.ErrTooLarge },
		"retransmission": func(b *handofftest.BadInput) { b.Retransmission = true },
	} {
		b := bad
		mod(&b)
		if err := b.Verify(in); err == nil {
			t.Errorf("a different %s verified", name)
		}
	}
	if err := bad.Verify(nil); err == nil {
		t.Error("no outcome verified")
	}
}

// The kit catches a handler wired wrongly: one that does not pass the
// host's dialog to Receive accepts an offer from another dialog, and one
// that runs the work again for a retransmission runs it twice (HC-38).
func TestBadInputs_HC38_CatchABrokenHandler(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder)
	var caught []string
	for _, bad := range w.BadInputs(coder) {
		var runs handofftest.Counter
		a := w.Agent(coder, bad.Configure)
		noDialog := func(data []byte) reason.Code { // forgets the host's dialog
			in, err := a.Receive(context.Background(), data, handoff.Host{})
			if err != nil {
				t.Fatal(err)
			}
			if in.Accepted() || in.Retransmission() { // works again on a retransmission
				runs.Inc(in.Unverified().Iss, in.Unverified().Hop)
			}
			return in.Reason()
		}
		for _, p := range bad.Prior {
			noDialog(p)
		}
		ft := &fakeT{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if reason := noDialog(bad.Data); reason != bad.Reason {
				ft.Errorf("%s: refused with %q, want %q", bad.Name, reason, bad.Reason)
			}
			if bad.Retransmission {
				handofftest.AssertRanOnce(ft, &runs, bad.Offer)
			}
		}()
		<-done
		if ft.failed {
			caught = append(caught, string(bad.Attack))
		}
	}
	want := []string{"replay", "wrong-dialog", "replay", "wrong-dialog"}
	if fmt.Sprint(caught) != fmt.Sprint(want) {
		t.Fatalf("caught %v, want %v", caught, want)
	}
}
