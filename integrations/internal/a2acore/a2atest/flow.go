package a2atest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
)

// passOn is a body that passes the hop on to to through d, and completes
// when that hop completed.
func passOn(d Delegator, to handoff.AgentID) func(context.Context, *handoff.Received, Exec) error {
	return func(ctx context.Context, in *handoff.Received, x Exec) error {
		dl, err := d.Send(ctx, Text("pass it on"), handoff.OfferParams{To: to, From: in})
		if err != nil || dl.State != state.Completed {
			return x.Write(ctx, a2acore.Failed)
		}
		return x.Write(ctx, a2acore.Completed)
	}
}

// Three hops, end to end: the Handoff in Message.metadata, the extension
// requested by A2A-Extensions, "accepted" with working and "completed"
// with completed, both verified by the delegator, and a full chain at the
// last hop (HC-29, HC-46, HC-66).
func chain(t *testing.T, l Line) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		t.Run(f.String(), func(t *testing.T) {
			ps := agenttest.New(t, agenttest.Spec{ID: Assistant, Format: f}, agenttest.Spec{ID: Planner, Format: f},
				agenttest.Spec{ID: Coder, Format: f}, agenttest.Spec{ID: Tester, Format: f})
			te, co, pl := Serve(t, l, ps[Tester]), Serve(t, l, ps[Coder]), Serve(t, l, ps[Planner])
			co.Work.Do(passOn(te.Dial(t, l, ps[Coder]), Tester))
			pl.Work.Do(passOn(co.Dial(t, l, ps[Planner]), Coder))

			d, err := pl.Dial(t, l, ps[Assistant]).Send(context.Background(), Text("fix the pager"),
				handoff.OfferParams{To: Planner, Task: "fix-pager"})
			require.NoError(t, err)
			require.True(t, d.Result.Task)
			require.Equal(t, a2acore.Completed, d.Result.State)
			require.Equal(t, state.Completed, d.State)
			require.False(t, d.Refused)
			var states []state.State
			for _, s := range d.Statuses {
				require.NoError(t, s.Err())
				states = append(states, s.Status.State)
			}
			require.Equal(t, []state.State{state.Accepted, state.Completed}, states)
			require.True(t, hopState(t, ps[Assistant].Agent, d.Hop).Resolved)
			for _, n := range []*Node{pl, co, te} {
				require.EqualValues(t, 1, n.Work.Calls.Load(), "executor invocations of %s", n.Party.ID)
				require.Equal(t, []bool{true}, n.Requested(), "A2A-Extensions at %s", n.Party.ID)
			}
			in := te.Work.Seen()[0]
			require.Equal(t, handoff.ChainFull, in.Chain())
			require.Len(t, in.Links(), 2)
			require.Equal(t, Assistant, in.Links()[0].Offer().Iss)
			require.Equal(t, Planner, in.Links()[1].Offer().Iss)
			require.Equal(t, Coder, in.Offer().Iss)
			require.Equal(t, Dialog, in.Offer().Dialog)
			require.Equal(t, f, in.Handoff().Offer.Format)
		})
	}
}

// Refused offers never reach the executor: a forged one (no status), one
// for another dialog (a signed "rejected", reason "policy"), and a message
// without a Handoff (HC-30).
func refusals(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE})
	co := Serve(t, l, ps[Coder])
	cl := co.Dial(t, l, ps[Planner])

	out, err := ps[Planner].Agent.Offer(ctx, handoff.OfferParams{To: Coder, Dialog: Dialog, Task: "write-patch"})
	require.NoError(t, err)
	res, sts, err := SendWith(ctx, cl, agenttest.Tamper(t, out.Handoff, "write-patch", "drop-table!"), Text("x"))
	require.NoError(t, err)
	require.Equal(t, a2acore.Rejected, res.State)
	NoStatus(t, res, "a status for an offer whose signature failed")
	require.Empty(t, sts)

	d, err := cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder, Dialog: "another-dialog"})
	require.NoError(t, err)
	require.Equal(t, a2acore.Rejected, d.Result.State)
	require.True(t, d.Refused)
	require.Equal(t, state.Rejected, d.State)
	require.Equal(t, reason.Policy, d.Reason)
	require.Len(t, d.Statuses, 1)
	require.NoError(t, d.Statuses[0].Err())

	res, _, err = SendWith(ctx, cl, nil, Text("x"))
	l.NoHandoff(t, res, err)
	require.Zero(t, co.Work.Calls.Load(), "the executor ran for a refused offer")
}

// Every bad input of handofftest, carried in a real message over loopback
// HTTP, is refused by the executor wrapper with the reason and check the
// draft requires, answered with a signed "rejected" exactly when one is
// due, and never reaches the wrapped executor (HC-30, HC-38, HC-66).
func badInputs(t *testing.T, l Line) {
	ctx := context.Background()
	w0 := handofftest.NewWorld(t, Planner, Coder)
	total := 0
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		for _, bad := range w0.In(f).Encoded(handoff.JSON).BadInputs(Coder) {
			if !json.Valid(bad.Data) {
				continue // malformed JSON cannot be carried in JSON metadata at all
			}
			total++
			t.Run(bad.Name, func(t *testing.T) {
				w := w0.With(t)
				d := &Delegate{Agent: w.Agent(Coder, bad.Configure), Work: &Work{}}
				cl := l.Dial(t, w.Agent(Planner, nil), l.Serve(t, d), Dial{From: Planner})
				send := func(data []byte) *Result {
					res, _, err := SendWith(ctx, cl, nil, Msg{Text: "x", ContextID: bad.Host.Dialog,
						Meta: map[string]any{carry.ExtensionURI: json.RawMessage(data)}, Exts: []string{carry.ExtensionURI}})
					require.NoError(t, err)
					return res
				}
				for _, p := range bad.Prior {
					res := send(p)
					require.True(t, res.Task && res.State == a2acore.Completed, "a prior offer was refused")
				}
				res := send(bad.Data)
				require.EqualValues(t, len(bad.Prior), d.Work.Calls.Load(), "the executor ran for a bad input")
				in := d.last()
				require.NotNil(t, in)
				require.NoError(t, bad.Verify(in))
				if res.Task {
					require.Equal(t, a2acore.Rejected, res.State)
				} else {
					require.True(t, bad.Retransmission, "a reply message for a refusal")
				}
				status, err := carry.Status(res.Meta)
				switch {
				case bad.StatusDue():
					require.NoError(t, err)
					w.AssertStatus(t, status, bad.Offer, state.Rejected, bad.Reason)
				case bad.Retransmission:
					require.NoError(t, err) // the prior offer's last status (HC-39)
				default:
					require.ErrorIs(t, err, carry.ErrAbsent, "a status where none is due")
				}
			})
		}
	}
	require.Greater(t, total, 40, "bad inputs tried, of both forms")
}

// A retransmission is answered with the identical octets of the last
// status and never runs again (HC-38); another caller replaying the offer
// is not sent the status (HC-39).
func retransmission(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.COSE}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder])
	cl := co.Dial(t, l, ps[Planner])
	d, err := cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder})
	require.NoError(t, err)
	last := StatusOf(t, d.Result)
	for range 3 {
		res, sts, err := cl.Retransmit(ctx, Text("x"), d.Hop)
		require.NoError(t, err)
		require.False(t, res.Task, "a task for a retransmission")
		require.True(t, bytes.Equal(last, StatusOf(t, res)), "other status octets for a retransmission")
		require.Len(t, sts, 1)
		require.NoError(t, sts[0].Err())
	}
	require.EqualValues(t, 1, co.Work.Calls.Load(), "the executor ran again for a retransmission")

	h, err := ps[Planner].Agent.Retransmit(ctx, d.Hop)
	require.NoError(t, err)
	res, _, err := SendWith(ctx, co.Dial(t, l, ps[Coder]), h, Text("x")) // the coder's own client replays it
	require.NoError(t, err)
	NoStatus(t, res, "the status went to another caller than the delegator")
	require.EqualValues(t, 1, co.Work.Calls.Load())
}

// A call that does not answer before the first instant of asking.Backoff
// is abandoned and the identical Handoff sent again, which gets the
// "accepted" the first delivery sent; the work runs once (HC-37).
func backoff(t *testing.T, l Line) {
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder])
	release := make(chan struct{})
	co.Work.Do(func(ctx context.Context, _ *handoff.Received, x Exec) error {
		<-release
		return x.Write(context.WithoutCancel(ctx), a2acore.Completed)
	})
	d, err := co.Dial(t, l, ps[Planner], Dial{Attempts: 2}).Send(context.Background(), Text("x"),
		handoff.OfferParams{To: Coder, TTL: 2 * time.Second})
	close(release)
	require.NoError(t, err)
	// The first send times out (the work holds its answer); a
	// retransmission is answered. On a loaded machine the answer to the
	// first retransmission can miss its deadline too, and the last attempt
	// (no deadline) gets it: what holds is that the work ran once and
	// every answer was the hop's "accepted".
	require.GreaterOrEqual(t, d.Attempts, 2)
	require.False(t, d.Result.Task, "the retransmission is answered with a message")
	require.NotEmpty(t, d.Statuses)
	for _, s := range d.Statuses {
		require.Equal(t, state.Accepted, s.Status.State)
	}
	require.Equal(t, state.Accepted, d.State)
	require.EqualValues(t, 1, co.Work.Calls.Load())
}

// An equivocating offer is refused with no status (HC-53) and never runs.
func equivocation(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.COSE}, agenttest.Spec{ID: Coder, Format: handoff.COSE})
	co := Serve(t, l, ps[Coder])
	cl := co.Dial(t, l, ps[Planner])
	d, err := cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder, Task: "one"})
	require.NoError(t, err)
	res, sts, err := SendWith(ctx, cl, agenttest.Equivocate(t, ps[Planner], d.Offer, "two"), Text("x"))
	require.NoError(t, err)
	require.Equal(t, a2acore.Rejected, res.State)
	NoStatus(t, res, "HC-53/HC-54: no status after the first hop's terminal status")
	require.Empty(t, sts)
	require.EqualValues(t, 1, co.Work.Calls.Load(), "the executor ran for an equivocating offer")
}

// The first offer was remembered but not taken: an equivocating second one
// gets the first's "rejected", reason "equivocation" (HC-54).
func rejectFirst(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE})
	co := Serve(t, l, ps[Coder])
	out, err := ps[Planner].Agent.Offer(ctx, handoff.OfferParams{To: Coder, Dialog: Dialog, Task: "one"})
	require.NoError(t, err)
	wire, err := out.Handoff.Encode(handoff.CBOR)
	require.NoError(t, err)
	first, err := ps[Coder].Agent.Receive(ctx, wire, handoff.Host{Peer: Planner})
	require.NoError(t, err)
	require.True(t, first.Accepted()) // remembered, not taken

	res, sts, err := SendWith(ctx, co.Dial(t, l, ps[Planner]), agenttest.Equivocate(t, ps[Planner], out, "two"), Text("x"))
	require.NoError(t, err)
	require.Equal(t, a2acore.Rejected, res.State)
	require.Len(t, sts, 1)
	require.NoError(t, sts[0].Err())
	require.Equal(t, state.Rejected, sts[0].State)
	require.Equal(t, reason.Equivocation, sts[0].Status.Reason)
	require.True(t, sts[0].Status.Offer.Equal(out.Digest), "the status answers the FIRST offer")
	require.Zero(t, co.Work.Calls.Load())
}

// The first offer's work runs when an equivocating offer arrives: the work
// is stopped (its context's cause is ErrEquivocated), the second offer is
// refused with no status (HC-53), and the first hop's "failed" carries the
// reason "equivocation" (HC-54, finish-first).
func finishFirst(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.COSE}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder])
	started := make(chan struct{})
	co.Work.Do(func(ctx context.Context, _ *handoff.Received, x Exec) error {
		close(started)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), hopwork.ErrEquivocated) {
			return context.Cause(ctx)
		}
		x.Report(ctx, Outcome{Effect: state.EffectNone})
		return x.Write(context.WithoutCancel(ctx), a2acore.Failed)
	})
	cl := co.Dial(t, l, ps[Planner])
	out, err := ps[Planner].Agent.Offer(ctx, handoff.OfferParams{To: Coder, Dialog: Dialog, Task: "one"})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, _, err := SendWith(ctx, cl, out.Handoff, Text("x"))
		done <- err
	}()
	<-started
	res, sts, err := SendWith(ctx, cl, agenttest.Equivocate(t, ps[Planner], out, "two"), Text("x"))
	require.NoError(t, err)
	require.Equal(t, a2acore.Rejected, res.State)
	require.Empty(t, sts, "the second offer gets no status (HC-53)")
	require.NoError(t, <-done)
	info := hopState(t, ps[Planner].Agent, out.Offer.Hop)
	require.Equal(t, state.Failed, info.State)
	require.Equal(t, reason.Equivocation, info.Reason)
	require.EqualValues(t, 1, co.Work.Calls.Load())
}

// The state changes the executor makes, streamed: auth-required stays in
// the host protocol (no hop status; A2A 1.0 section 7.6.4), failed with a
// known partial outcome is "failed" with its refs (HC-29, HC-44).
func stateChanges(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder])
	r := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("half a patch"))}
	co.Work.Do(func(ctx context.Context, _ *handoff.Received, x Exec) error {
		if err := x.Write(ctx, a2acore.AuthRequired); err != nil {
			return err
		}
		x.Report(ctx, Outcome{Effect: state.EffectPartial, Refs: []ref.Ref{r}})
		return x.Write(ctx, a2acore.Failed)
	})
	out, err := ps[Planner].Agent.Offer(ctx, handoff.OfferParams{To: Coder, Dialog: Dialog})
	require.NoError(t, err)
	states, sts, err := StreamWith(ctx, co.Dial(t, l, ps[Planner]), out.Handoff, Text("x"))
	require.NoError(t, err)
	require.Equal(t, []string{a2acore.Working, a2acore.AuthRequired, a2acore.Failed}, states)
	var got []state.State
	for _, s := range sts {
		require.NoError(t, s.Err())
		got = append(got, s.Status.State)
	}
	require.Equal(t, []state.State{state.Accepted, state.Failed}, got)
	require.Len(t, sts[1].Status.Refs, 1)
	require.True(t, sts[1].Status.Refs[0].Dig.Equal(r.Dig))
	require.Equal(t, state.Failed, hopState(t, ps[Planner].Agent, out.Offer.Hop).State)
	require.EqualValues(t, 1, co.Work.Calls.Load())
}

// HC-29: the hop states map to the draft's nearest A2A task states.
func taskStates(t *testing.T, l Line) {
	for s, want := range map[state.State]string{
		state.Offered: "TASK_STATE_SUBMITTED", state.Accepted: a2acore.Working,
		state.Rejected: a2acore.Rejected, state.Completed: a2acore.Completed,
		state.Failed: a2acore.Failed, state.Canceled: a2acore.Canceled,
		state.Expired: "",
	} {
		require.Equal(t, want, l.TaskState(s), s)
	}
}

// A failed task with a known partial effect is answered "failed" with the
// refs of what took effect (HC-44); without a reported outcome, no
// terminal status is signed and the hop stays unresolved (HC-45).
func failedOutcome(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder])
	var mu sync.Mutex
	report := true
	r := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("half a patch"))}
	co.Work.Do(func(ctx context.Context, _ *handoff.Received, x Exec) error {
		mu.Lock()
		defer mu.Unlock()
		if report {
			x.Report(ctx, Outcome{Effect: state.EffectPartial, Refs: []ref.Ref{r}})
		}
		return x.Write(ctx, a2acore.Failed)
	})
	cl := co.Dial(t, l, ps[Planner])
	d, err := cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder})
	require.NoError(t, err)
	last := d.Statuses[len(d.Statuses)-1]
	require.Equal(t, state.Failed, last.State)
	require.Len(t, last.Status.Refs, 1)
	require.True(t, last.Status.Refs[0].Dig.Equal(r.Dig))

	mu.Lock()
	report = false
	mu.Unlock()
	d, err = cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder})
	require.NoError(t, err)
	require.Equal(t, a2acore.Failed, d.Result.State)
	for _, s := range d.Statuses {
		require.Equal(t, state.Accepted, s.State, "a terminal status without a known outcome")
	}
	require.False(t, hopState(t, ps[Planner].Agent, d.Hop).Resolved)
}

// A client whose interceptors lack the handoff Client sends nothing of the
// handoff: Send and Retransmit say so with the line's ErrNotIntercepted,
// whatever the server answered, and the executor never runs with an
// offer. A delivery says how it ended: State, Refused, Reason.
func missingInterceptor(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.COSE})
	for _, optional := range []bool{false, true} {
		co := Serve(t, l, ps[Coder], func(d *Delegate) { d.Optional = optional })
		bare := co.Dial(t, l, ps[Planner], Dial{Bare: true})
		d, err := bare.Send(ctx, Text("x"), handoff.OfferParams{To: Coder})
		require.ErrorIs(t, err, l.NotIntercepted())
		require.Equal(t, 1, d.Attempts, "not sent again")
		_, _, err = bare.Retransmit(ctx, Text("x"), d.Hop)
		require.ErrorIs(t, err, l.NotIntercepted())
		require.Empty(t, co.Work.Seen(), "the executor ran with an offer that was not sent")
		if !optional {
			require.Zero(t, co.Work.Calls.Load())
		} else {
			require.EqualValues(t, 2, co.Work.Calls.Load(), "Optional runs the executor without an offer")
		}
	}

	co := Serve(t, l, ps[Coder])
	cl := co.Dial(t, l, ps[Planner])
	d, err := cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	require.False(t, d.Refused)
	require.Empty(t, d.Reason)

	d, err = cl.Send(ctx, Text("x"), handoff.OfferParams{To: Coder, Dialog: "another-dialog"})
	require.NoError(t, err)
	require.Equal(t, state.Rejected, d.State)
	require.True(t, d.Refused)
	require.Equal(t, reason.Policy, d.Reason)
	require.EqualValues(t, 1, co.Work.Calls.Load())
}
