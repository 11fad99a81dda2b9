package a2atest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// Stranger is an agent with no part in the hop a task runs.
const Stranger = handoff.AgentID("spiffe://x.example/stranger")

// A pause belongs to its parties: a message on a paused task from anyone
// but the hop's delegator, with anything but the hop's own offer, leaves
// the task paused and runs nothing; the owner's answer then resumes it,
// from the task as a fresh read shows it.
func pauseStrangers(t *testing.T, l Line) {
	cases := []struct {
		name string
		// send sends the stranger's message on task, through a client
		// authenticated as the stranger.
		send func(t *testing.T, f *PauseFixture, d *Delivery, task *Result, cl Delegator) error
		// trusted: the coder trusts the stranger's key.
		trusted bool
	}{
		{"UntrustedKey", func(t *testing.T, f *PauseFixture, _ *Delivery, task *Result, cl Delegator) error {
			// The stranger's own offer, signed with a key the coder does
			// not trust (check 1, "untrusted-key").
			ps := agenttest.New(t, agenttest.Spec{ID: Stranger, Format: handoff.JWS})
			out, err := ps[Stranger].Agent.Offer(context.Background(), handoff.OfferParams{To: Coder, Dialog: task.ContextID})
			require.NoError(t, err)
			_, _, err = SendWith(context.Background(), cl, out.Handoff, on(task, "give up"))
			return err
		}, false},
		{"NoHandoff", func(t *testing.T, _ *PauseFixture, _ *Delivery, task *Result, cl Delegator) error {
			_, err := cl.SendMessage(context.Background(), on(task, "give up"))
			return err
		}, false},
		{"MalformedHandoff", func(t *testing.T, _ *PauseFixture, _ *Delivery, task *Result, cl Delegator) error {
			m := on(task, "give up")
			m.Meta = map[string]any{carry.ExtensionURI: json.RawMessage(`{"offer":"not a signed offer"}`)}
			m.Exts = []string{carry.ExtensionURI}
			_, err := cl.SendMessage(context.Background(), m)
			return err
		}, false},
		{"MalformedCarriage", func(t *testing.T, _ *PauseFixture, _ *Delivery, task *Result, cl Delegator) error {
			m := on(task, "give up")
			m.Meta = map[string]any{carry.ExtensionURI: 42} // not a Handoff object at all
			m.Exts = []string{carry.ExtensionURI}
			_, err := cl.SendMessage(context.Background(), m)
			return err
		}, false},
		{"TrustedStrangersOwnOffer", func(t *testing.T, f *PauseFixture, _ *Delivery, task *Result, cl Delegator) error {
			out, err := f.Ps[Stranger].Agent.Offer(context.Background(), handoff.OfferParams{To: Coder, Dialog: task.ContextID})
			require.NoError(t, err)
			_, sts, err := SendWith(context.Background(), cl, out.Handoff, on(task, "mine now"))
			require.NoError(t, err)
			// Declined by policy, with a status the stranger verifies (the
			// task's other statuses are the owner's, refused here).
			var mine []*handoff.StatusResult
			for _, s := range sts {
				if s.Err() == nil {
					mine = append(mine, s)
				}
			}
			require.Len(t, mine, 1)
			require.Equal(t, state.Rejected, mine[0].Status.State)
			require.Equal(t, reason.Policy, mine[0].Status.Reason)
			return nil
		}, true},
		{"OwnersHandoffReplayed", func(t *testing.T, f *PauseFixture, d *Delivery, task *Result, cl Delegator) error {
			// The owner's Handoff and a copy of an approving answer, sent
			// by another authenticated caller.
			h, err := f.Ps[Planner].Agent.Retransmit(context.Background(), d.Hop)
			require.NoError(t, err)
			m, err := cl.Answer(task, "approve", nil)
			require.NoError(t, err)
			_, _, err = SendWith(context.Background(), cl, h, m)
			return err
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewPauseFixture(t, l)
			f.TrustStranger = c.trusted
			r := f.Delegate(t, "refund-INV-1042")
			d, task := f.First(t, r)
			stranger := r.Dial(t, l, f.Ps[Stranger])
			_ = c.send(t, f, d, task, stranger) // how the stranger is answered is the line's; the task is what matters

			got, err := r.Client.Get(context.Background(), task.ID)
			require.NoError(t, err)
			require.Equal(t, a2acore.InputRequired, got.State, "a stranger's message changed the paused task")
			require.EqualValues(t, 1, r.Work.Calls.Load(), "the executor ran for a stranger's message")
			require.Zero(t, r.Refunds.Load())
			require.Zero(t, f.Approvals(t, d), "a stranger's message recorded an approval")
			require.Equal(t, state.Accepted, f.HopState(t, d.Hop))

			// The owner answers from the task as it reads it now.
			res := f.Answer(t, r, d, got, "approve")
			require.Equal(t, a2acore.Completed, res.State, "the owner's answer did not resume the task")
			require.EqualValues(t, 1, r.Refunds.Load())
			require.Equal(t, state.Completed, f.HopState(t, d.Hop))
		})
	}
}

// on is a message with text on the task and context of task.
func on(task *Result, text string) Msg {
	return Msg{Text: text, ContextID: task.ContextID, TaskID: task.ID}
}

// Client.Send with a message that names no context: the offer's dialog is
// OfferParams.Dialog, and the message is sent on it; with neither, the
// error names Message.ContextID and nothing is sent (finding 9).
func sendWithoutContext(t *testing.T, l Line) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder])
	cl := co.Dial(t, l, ps[Planner])
	_, err := cl.Send(ctx, Msg{Text: "x"}, handoff.OfferParams{To: Coder})
	require.ErrorIs(t, err, handoff.ErrArgument)
	require.ErrorContains(t, err, "Message.ContextID")
	require.Zero(t, co.Work.Calls.Load(), "sent without a dialog")

	d, err := cl.Send(ctx, Msg{Text: "x"}, handoff.OfferParams{To: Coder, Dialog: "case-9"})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	require.Equal(t, "case-9", co.Work.Seen()[0].Offer().Dialog)
	require.Equal(t, "case-9", d.Result.ContextID, "the message went on the offer's dialog")
}

// A delivery that ended in a transport error (401: no credentials) still
// says the hop's state: offered (finding 9).
func sendTransportError(t *testing.T, l Line) {
	ps := agenttest.New(t, agenttest.Spec{ID: Planner, Format: handoff.JWS}, agenttest.Spec{ID: Coder, Format: handoff.JWS})
	co := Serve(t, l, ps[Coder])
	d, err := co.Dial(t, l, ps[Planner], Dial{NoBearer: true}).Send(context.Background(), Text("x"), handoff.OfferParams{To: Coder})
	require.Error(t, err)
	require.NotNil(t, d)
	require.Equal(t, state.Offered, d.State)
	require.False(t, d.Refused)
	require.Equal(t, 1, d.Attempts)
	require.Zero(t, co.Work.Calls.Load())
}
