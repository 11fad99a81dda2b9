package a2acore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/binding"
)

// CancelInterrupted sends a Cancel Task request again only while the SDK
// answers with one of the errors named and the task stays interrupted; a
// refusal, a task that ended, and a canceled context end it at once, and
// it gives up after five tries more (HC-28, HC-39).
func TestCancelInterrupted(t *testing.T) {
	notCancelable, internal, refused := errors.New("task cannot be canceled"), errors.New("internal error"), errors.New("invalid params")
	retry := []error{notCancelable, internal}
	for _, c := range []struct {
		name    string
		answers []error  // what each send gets; the last repeats
		states  []string // what each look at the task finds; the last repeats
		ctx     func() context.Context
		sends   int
		want    error
	}{
		{"accepted at once", []error{nil}, []string{InputRequired}, nil, 1, nil},
		{"refused: never again", []error{refused}, []string{InputRequired}, nil, 1, refused},
		{"ended: never again", []error{notCancelable}, []string{Completed}, nil, 1, notCancelable},
		{"dropped, then taken", []error{notCancelable, nil}, []string{InputRequired}, nil, 2, nil},
		{"internal error while the execution ends", []error{internal, internal, nil}, []string{AuthRequired}, nil, 3, nil},
		{"dropped every time: six sends", []error{notCancelable}, []string{InputRequired}, nil, 6, notCancelable},
		{"state unknown: never again", []error{notCancelable}, []string{""}, nil, 1, notCancelable},
		{"context canceled", []error{notCancelable}, []string{InputRequired}, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, 1, notCancelable},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.ctx != nil {
				ctx = c.ctx()
			}
			sends, looks := 0, 0
			at := func(list []error, i int) error { return list[min(i, len(list)-1)] }
			err := CancelInterrupted(ctx, retry,
				func(context.Context) (string, error) {
					s := c.states[min(looks, len(c.states)-1)]
					looks++
					if s == "" {
						return "", errors.New("no such task")
					}
					return s, nil
				},
				func(context.Context) error {
					sends++
					return at(c.answers, sends-1)
				})
			if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if sends != c.sends {
				t.Fatalf("%d sends, want %d", sends, c.sends)
			}
		})
	}
}

// The outcomes signed in a Cancel are held for the same request sent
// again: for their hop and state only, for canceledHold, and at most
// canceledMax of them; an older one makes room once its hold is over.
func TestCanceledOutcomes(t *testing.T) {
	var c canceledOutcomes
	t0 := time.Unix(1_800_000_000, 0)
	h := binding.Hop{Iss: "spiffe://a.example/p", Hop: "h1"}
	st := handoff.Signed{Octets: []byte("failed")}
	c.put(h, state.Failed, st, t0)
	if got, ok := c.get(h, state.Failed, t0.Add(time.Minute)); !ok || string(got.Octets) != "failed" {
		t.Fatalf("not held: %v %q", ok, got.Octets)
	}
	if _, ok := c.get(h, state.Completed, t0); ok {
		t.Fatal("held for another state")
	}
	if _, ok := c.get(binding.Hop{Iss: h.Iss, Hop: "h2"}, state.Failed, t0); ok {
		t.Fatal("held for another hop")
	}
	if _, ok := c.get(binding.Hop{Iss: "spiffe://b.example/p", Hop: h.Hop}, state.Failed, t0); ok {
		t.Fatal("held for another issuer's hop of the same id")
	}
	if _, ok := c.get(h, state.Failed, t0.Add(canceledHold+time.Second)); ok {
		t.Fatal("held past canceledHold")
	}
	for i := range canceledMax + 10 {
		c.put(binding.Hop{Iss: h.Iss, Hop: handoff.HopID(fmt.Sprint("f", i))}, state.Failed, st, t0)
	}
	if n := len(c.held); n != canceledMax {
		t.Fatalf("%d held, want the cap %d", n, canceledMax)
	}
	late := binding.Hop{Iss: h.Iss, Hop: "late"}
	c.put(late, state.Failed, st, t0.Add(canceledHold+time.Second))
	if _, ok := c.get(late, state.Failed, t0.Add(canceledHold+time.Second)); !ok {
		t.Fatal("no room made once the older outcomes' hold was over")
	}
	if n := len(c.held); n != 1 {
		t.Fatalf("%d held after the older ones expired, want 1", n)
	}
}
