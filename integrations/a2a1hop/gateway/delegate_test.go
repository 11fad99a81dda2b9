package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/agentcard"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/a2a1hop/gateway"
)

// An accepted offer reaches the upstream once, over either binding on
// either side, blocking or streamed; the hop ends "completed", the
// statuses come back where the draft places them, and the upstream gets
// the message without the Handoff (the default).
func TestDelegate_AcceptedOffer_ReachesTheUpstreamOnce(t *testing.T) {
	for _, b := range bindings {
		for _, restFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/upstream-rest-first=%v", b, restFirst), func(t *testing.T) {
				w := world(t)
				up := newUpstream(t, upstreamOptions{restFirst: restFirst})
				_, base := delegate(t, w, up, gateway.DelegateConfig{})
				p := w.Agent(planner)
				hc, cl := delegator(t, p, base, b, a2a1hop.ClientConfig{})
				d, err := hc.Send(context.Background(), cl, message("ctx-1", "complete"), handoff.OfferParams{To: coder, Task: "fix-pager"})
				require.NoError(t, err)
				assert.Equal(t, state.Completed, d.State)
				assert.False(t, d.Refused)
				assert.Equal(t, 1, d.Attempts)
				task, ok := d.Result.(*a2a.Task)
				require.True(t, ok, "%T", d.Result)
				assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
				require.Len(t, task.Artifacts, 1, "the upstream's artifact comes back")
				assert.Equal(t, "done: complete", task.Artifacts[0].Parts[0].Text())
				w.AssertStatus(t, statusOf(task), d.Offer.Handoff.Offer, state.Completed, "")
				var got []state.State
				for _, s := range d.Statuses {
					require.NotNil(t, s.Status, "every status verified")
					require.True(t, s.Changed, "and applied")
					got = append(got, s.Status.State)
				}
				assert.Equal(t, []state.State{state.Accepted, state.Completed}, got)

				require.EqualValues(t, 1, up.calls.Load())
				seen := up.messages()[0]
				assert.NotContains(t, seen.meta, a2a1hop.ExtensionURI, "the Handoff is removed by default")
				assert.NotContains(t, seen.exts, a2a1hop.ExtensionURI)
				assert.NotContains(t, seen.ext, a2a1hop.ExtensionURI)
				assert.Equal(t, "ctx-1", seen.context, "the dialog goes on upstream")
				assert.Empty(t, seen.task, "a new task upstream")
				assert.NotEmpty(t, task.Metadata[gateway.UpstreamTaskKey], "the gateway's task names the upstream's")
			})
		}
	}
}

// Streamed: each status update carries the status of the state it sets
// (accepted with WORKING, completed with COMPLETED), and the stream ends
// with the upstream's task.
func TestDelegate_Stream_StatusesOnTheUpdates(t *testing.T) {
	for _, b := range bindings {
		for _, noStreaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/upstream-streams=%v", b, !noStreaming), func(t *testing.T) {
				w := world(t)
				up := newUpstream(t, upstreamOptions{noStreaming: noStreaming})
				_, base := delegate(t, w, up, gateway.DelegateConfig{})
				p := w.Agent(planner)
				_, cl := delegator(t, p, base, b, a2a1hop.ClientConfig{})
				out, err := p.Offer(context.Background(), handoff.OfferParams{To: coder, Dialog: "ctx-s"})
				require.NoError(t, err)
				ctx := a2a1hop.WithHandoff(context.Background(), out.Handoff)
				var states []a2a.TaskState
				var signed []state.State
				for ev, err := range cl.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: message("ctx-s", "complete")}) {
					require.NoError(t, err)
					var ts *a2a.TaskStatus
					switch ev := ev.(type) {
					case *a2a.Task:
						ts = &ev.Status
					case *a2a.TaskStatusUpdateEvent:
						ts = &ev.Status
					default:
						continue
					}
					states = append(states, ts.State)
					if ts.Message == nil {
						continue
					}
					if st, err := carry.Status(ts.Message.Metadata); err == nil {
						signed = append(signed, verified(t, w, st, out.Handoff.Offer).State)
					}
				}
				assert.Equal(t, a2a.TaskStateCompleted, states[len(states)-1])
				assert.Equal(t, []state.State{state.Accepted, state.Completed}, signed)
				info, ok, err := p.Hop(context.Background(), out.Offer.Hop)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, state.Completed, info.State)
				assert.EqualValues(t, 1, up.calls.Load())
			})
		}
	}
}

// KeepHandoff passes the Handoff on, with the extension in the message's
// extensions and in A2A-Extensions; ForwardHeaders passes the headers it
// names.
func TestDelegate_KeepHandoff_PassesItOn(t *testing.T) {
	w := world(t)
	up := newUpstream(t, upstreamOptions{})
	_, base := delegate(t, w, up, gateway.DelegateConfig{KeepHandoff: true, ForwardHeaders: []string{"Authorization"}})
	hc, cl := delegator(t, w.Agent(planner), base, overJSONRPC, a2a1hop.ClientConfig{})
	ctx := a2aclient.AttachServiceParams(context.Background(), a2aclient.ServiceParams{"Authorization": {"Bearer t0ken"}})
	d, err := hc.Send(ctx, cl, message("ctx-k", "complete"), handoff.OfferParams{To: coder})
	require.NoError(t, err)
	require.Equal(t, state.Completed, d.State)
	seen := up.messages()[0]
	got, err := carry.Handoff(seen.meta)
	require.NoError(t, err, "the Handoff is passed on")
	h, _, err := handoff.ParseHandoff(got, handoff.Limits{})
	require.NoError(t, err)
	assert.Equal(t, d.Offer.Handoff.Offer.Octets, h.Offer.Octets, "the offer's octets unchanged (HC-20)")
	assert.Contains(t, seen.exts, a2a1hop.ExtensionURI)
	assert.Contains(t, seen.ext, a2a1hop.ExtensionURI)
	assert.Equal(t, []string{"Bearer t0ken"}, seen.auth)
}

// Every input the draft refuses, and every offer that is not new, never
// reaches the upstream: handofftest's bad inputs, in JWS and COSE, each
// after the good offers it needs (a replay's and an equivocation's first
// offer, which are forwarded once each). The reply carries the "rejected"
// the draft asks for, the last status for a retransmission, and nothing
// for an offer whose signature failed or the second of two equivocating
// offers (HC-30, HC-38, HC-39, HC-53).
func TestDelegate_NeverForwards_RefusedRetransmittedOrEquivocating(t *testing.T) {
	w := handofftest.NewWorld(t, planner, coder).Encoded(handoff.JSON)
	up := newUpstream(t, upstreamOptions{})
	ran := 0
	for _, bad := range w.BadInputs(coder) {
		t.Run(bad.Name, func(t *testing.T) {
			w := w.With(t)
			_, base := delegate(t, w, up, gateway.DelegateConfig{Agent: w.Agent(coder, bad.Configure)})
			cl := client(t, base, overJSONRPC)
			var last []byte
			for _, prior := range bad.Prior {
				res, err := sendRaw(context.Background(), cl, bad.Host.Dialog, prior)
				require.NoError(t, err)
				last = statusOf(res)
				ran++
				require.EqualValues(t, ran, up.calls.Load(), "a good offer is forwarded once")
			}
			res, err := sendRaw(context.Background(), cl, bad.Host.Dialog, bad.Data)
			assert.EqualValues(t, ran, up.calls.Load(), "never forwarded")
			if bad.Attack == handofftest.AttackMalformedJSON {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			st := statusOf(res)
			switch {
			case bad.Retransmission:
				assert.Equal(t, last, st, "the identical last status (HC-39)")
			case bad.StatusDue():
				w.AssertStatus(t, st, bad.Offer, state.Rejected, bad.Reason)
			default:
				assert.Empty(t, st, "no status (HC-30, HC-53)")
			}
			if task, ok := res.(*a2a.Task); ok && !bad.Retransmission {
				assert.Equal(t, a2a.TaskStateRejected, task.Status.State)
			}
		})
	}
}

// A retransmission to a caller that is not the offer's iss gets no status
// (HC-39), and is not forwarded either.
func TestDelegate_Retransmission_StatusOnlyToTheDelegator(t *testing.T) {
	w := world(t)
	up := newUpstream(t, upstreamOptions{})
	_, base := delegate(t, w, up, gateway.DelegateConfig{Peer: func(r *http.Request) (handoff.AgentID, bool) {
		return handoff.AgentID(r.Header.Get("X-Caller")), true
	}})
	p := w.Agent(planner)
	out, err := p.Offer(context.Background(), handoff.OfferParams{To: coder, Dialog: "ctx-r"})
	require.NoError(t, err)
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	cl := client(t, base, overREST)
	as := func(id handoff.AgentID) context.Context {
		return a2aclient.AttachServiceParams(context.Background(), a2aclient.ServiceParams{"X-Caller": {string(id)}})
	}
	res, err := sendRaw(as(planner), cl, "ctx-r", data)
	require.NoError(t, err)
	first := statusOf(res)
	w.AssertStatus(t, first, out.Handoff.Offer, state.Completed, "")
	res, err = sendRaw(as("spiffe://c.example/someone-else"), cl, "ctx-r", data)
	require.NoError(t, err)
	assert.Empty(t, statusOf(res), "not to another caller")
	res, err = sendRaw(as(planner), cl, "ctx-r", data)
	require.NoError(t, err)
	assert.Equal(t, first, statusOf(res), "to the delegator, the identical octets")
	assert.EqualValues(t, 1, up.calls.Load())
}

// A message without a Handoff is refused, unless Optional: then it goes to
// the upstream as it is, and the reply is the upstream's.
func TestDelegate_NoHandoff(t *testing.T) {
	w := world(t)
	up := newUpstream(t, upstreamOptions{})
	_, base := delegate(t, w, up, gateway.DelegateConfig{})
	_, err := client(t, base, overJSONRPC).SendMessage(context.Background(), &a2a.SendMessageRequest{Message: message("ctx-n", "complete")})
	require.ErrorIs(t, err, a2a.ErrExtensionSupportRequired)
	assert.Zero(t, up.calls.Load())

	_, base = delegate(t, w, up, gateway.DelegateConfig{Optional: true})
	for _, b := range bindings {
		cl := client(t, base, b)
		res, err := cl.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: message("ctx-n", "complete")})
		require.NoError(t, err)
		task, ok := res.(*a2a.Task)
		require.True(t, ok, "%T", res)
		assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
		assert.Empty(t, statusOf(task))
		got, err := cl.GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID})
		require.NoError(t, err, "the gateway's own task")
		assert.Equal(t, a2a.TaskStateCompleted, got.Status.State)
		res, err = cl.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: message("ctx-n", "answer")})
		require.NoError(t, err)
		m, ok := res.(*a2a.Message)
		require.True(t, ok, "%T", res)
		assert.Equal(t, "answered", m.Parts[0].Text())
	}
	assert.EqualValues(t, 4, up.calls.Load())
}

// What the upstream's task does decides the hop's status (the table of
// the package documentation): a known effect is "completed" or "failed";
// an unknown one leaves the hop "accepted" (HC-25, HC-45).
func TestDelegate_Outcomes(t *testing.T) {
	for _, c := range []struct {
		text       string
		failedNone bool
		task       a2a.TaskState
		hop        state.State
	}{
		{"complete", false, a2a.TaskStateCompleted, state.Completed},
		{"answer", false, a2a.TaskStateCompleted, state.Completed},
		{"reject", false, a2a.TaskStateFailed, state.Failed},
		{"refuse", false, a2a.TaskStateFailed, state.Failed},
		{"fail", false, a2a.TaskStateFailed, state.Accepted},
		{"fail", true, a2a.TaskStateFailed, state.Failed},
		{"cancel-self", false, a2a.TaskStateCanceled, state.Accepted},
		{"input", false, a2a.TaskStateInputRequired, state.Accepted},
	} {
		t.Run(fmt.Sprintf("%s/failed-means-no-effect=%v", c.text, c.failedNone), func(t *testing.T) {
			w := world(t)
			up := newUpstream(t, upstreamOptions{})
			_, base := delegate(t, w, up, gateway.DelegateConfig{FailedMeansNoEffect: c.failedNone})
			hc, cl := delegator(t, w.Agent(planner), base, overJSONRPC, a2a1hop.ClientConfig{})
			d, err := hc.Send(context.Background(), cl, message("ctx-o", c.text), handoff.OfferParams{To: coder})
			require.NoError(t, err)
			task, ok := d.Result.(*a2a.Task)
			require.True(t, ok, "%T", d.Result)
			assert.Equal(t, c.task, task.Status.State)
			assert.Equal(t, c.hop, d.State)
			assert.False(t, d.Refused, "a hop the gateway took is not refused (HC-24)")
			if c.hop == state.Failed {
				s := w.AssertStatus(t, statusOf(task), d.Offer.Handoff.Offer, state.Failed, "")
				if s != nil {
					assert.Empty(t, s.Refs, "no effect: no refs (HC-44)")
				}
			}
			assert.EqualValues(t, 1, up.calls.Load())
		})
	}
}

// An upstream that answers before its task ends is followed: through
// tasks/subscribe when it streams, tasks/get when it does not, until the
// task ends; the hop ends "completed" and the upstream worked once.
func TestDelegate_UpstreamAnswersAtOnce_Followed(t *testing.T) {
	for _, noStreaming := range []bool{false, true} {
		for _, text := range []string{"complete", "slow"} {
			t.Run(fmt.Sprintf("upstream-streams=%v/%s", !noStreaming, text), func(t *testing.T) {
				w := world(t)
				up := newUpstream(t, upstreamOptions{atOnce: true, noStreaming: noStreaming})
				_, base := delegate(t, w, up, gateway.DelegateConfig{})
				hc, cl := delegator(t, w.Agent(planner), base, overJSONRPC, a2a1hop.ClientConfig{})
				d, err := hc.Send(context.Background(), cl, message("ctx-a", text), handoff.OfferParams{To: coder})
				require.NoError(t, err)
				assert.Equal(t, state.Completed, d.State)
				task := taskOf(t, d.Result)
				assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
				w.AssertStatus(t, statusOf(task), d.Offer.Handoff.Offer, state.Completed, "")
				assert.EqualValues(t, 1, up.calls.Load())
			})
		}
	}
}

// An upstream that cannot be reached never got the message: the hop is
// "failed" with no refs.
func TestDelegate_UpstreamDown_Failed(t *testing.T) {
	w := world(t)
	up := newUpstream(t, upstreamOptions{})
	srv, base := listen(t)
	d, err := gateway.NewDelegate(context.Background(), gateway.DelegateConfig{Agent: w.Agent(coder), Upstream: up.URL, URL: base})
	require.NoError(t, err)
	srv.Config.Handler = d
	srv.Start()
	closeUpstream(t, up)
	hc, cl := delegator(t, w.Agent(planner), base, overJSONRPC, a2a1hop.ClientConfig{})
	dv, err := hc.Send(context.Background(), cl, message("ctx-d", "complete"), handoff.OfferParams{To: coder})
	require.NoError(t, err)
	assert.Equal(t, state.Failed, dv.State)
	assert.Equal(t, a2a.TaskStateFailed, taskOf(t, dv.Result).Status.State)
}

// The delegator's signed "canceled" is verified and applied, then the
// upstream's task is canceled (HC-28); a tasks/cancel without one cancels
// the task only, or is refused with RequireSignedCancel.
func TestDelegate_Cancel(t *testing.T) {
	for _, signed := range []bool{true, false} {
		for _, require_ := range []bool{false, true} {
			t.Run(fmt.Sprintf("signed=%v/require=%v", signed, require_), func(t *testing.T) {
				w := world(t)
				up := newUpstream(t, upstreamOptions{})
				var canceled []*handoff.StatusResult
				_, base := delegate(t, w, up, gateway.DelegateConfig{RequireSignedCancel: require_,
					OnCancel: func(_ context.Context, r *handoff.StatusResult) { canceled = append(canceled, r) }})
				p := w.Agent(planner)
				hc, cl := delegator(t, p, base, overJSONRPC, a2a1hop.ClientConfig{SendConfig: &a2a.SendMessageConfig{ReturnImmediately: true}})
				d, err := hc.Send(context.Background(), cl, message("ctx-c", "wait"), handoff.OfferParams{To: coder})
				require.NoError(t, err)
				task := taskOf(t, d.Result)
				eventually(t, func() bool {
					t, err := cl.GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID})
					return err == nil && t.Metadata[gateway.UpstreamTaskKey] != nil
				}, "the message reaches the upstream")
				var got *a2a.Task
				if signed {
					got, _, err = hc.Cancel(context.Background(), cl, d.Hop)
				} else {
					got, err = client(t, base, overJSONRPC).CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: task.ID})
				}
				if !signed && require_ {
					require.ErrorIs(t, err, a2a.ErrInvalidParams)
					assert.Zero(t, up.cancels.Load(), "the upstream's task goes on")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, a2a.TaskStateCanceled, got.Status.State)
				assert.EqualValues(t, 1, up.cancels.Load())
				if signed {
					require.Len(t, canceled, 1)
					require.NotNil(t, canceled[0].Status, "the delegator's canceled is verified")
					assert.Equal(t, state.Canceled, canceled[0].Status.State)
					assert.True(t, canceled[0].Changed, "and applied")
				} else {
					assert.Empty(t, canceled)
				}
				info, _, err := p.Hop(context.Background(), d.Hop)
				require.NoError(t, err)
				assert.NotEqual(t, state.Completed, info.State, "no outcome is claimed for a canceled task")
			})
		}
	}
}

// The card the gateway serves is the upstream's with the gateway's
// interfaces and the extension declared, signed with the agent's key: it
// verifies with the Trust that checks the agent's statuses, strictly and
// as @a2a-js/sdk reads it.
func TestDelegate_Card_SignedWithTheExtension(t *testing.T) {
	for _, optional := range []bool{false, true} {
		t.Run(fmt.Sprintf("optional=%v", optional), func(t *testing.T) {
			w := world(t)
			up := newUpstream(t, upstreamOptions{noStreaming: true})
			d, base := delegate(t, w, up, gateway.DelegateConfig{CardKey: w.Key(coder), Optional: optional})
			resp, err := http.Get(base + gateway.CardPath)
			require.NoError(t, err)
			defer resp.Body.Close()
			served, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, d.Card(), served)
			for _, loose := range []bool{false, true} {
				v, err := agentcard.Verify(served, w.Trust(), coder, agentcard.VerifyOptions{AllowDroppedEmpty: loose})
				require.NoError(t, err)
				assert.Equal(t, coder, v.Agent())
			}
			_, err = agentcard.Verify(served, w.Trust(), planner, agentcard.VerifyOptions{})
			require.Error(t, err, "not the planner's card")

			var card a2a.AgentCard
			require.NoError(t, json.Unmarshal(served, &card))
			assert.Equal(t, "upstream", card.Name)
			assert.Len(t, card.Skills, 1)
			assert.True(t, card.Capabilities.Streaming, "the gateway streams")
			require.Len(t, card.SupportedInterfaces, 2)
			assert.Equal(t, base+gateway.JSONRPCPath, card.SupportedInterfaces[0].URL)
			assert.Equal(t, base+gateway.RESTPath, card.SupportedInterfaces[1].URL)
			require.Len(t, card.Capabilities.Extensions, 1)
			assert.Equal(t, a2a1hop.ExtensionURI, card.Capabilities.Extensions[0].URI)
			assert.Equal(t, !optional, card.Capabilities.Extensions[0].Required)

			// A client of the card reaches the gateway.
			cl, err := a2aclient.NewFromCard(context.Background(), &card)
			require.NoError(t, err)
			defer cl.Destroy()
			_, err = cl.GetTask(context.Background(), &a2a.GetTaskRequest{ID: "none"})
			require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		})
	}
}

// A gateway that restarts over the same store takes no hop twice: the
// offer is answered with its last status, and the upstream is not called
// again (HC-34).
func TestDelegate_Restart_DurableStore(t *testing.T) {
	w := world(t)
	up := newUpstream(t, upstreamOptions{})
	store := replay.NewMemory(replay.MemoryOptions{})
	agent := func() *handoff.Agent { return w.Agent(coder, func(c *handoff.Config) { c.Store = store }) }
	p := w.Agent(planner)
	out, err := p.Offer(context.Background(), handoff.OfferParams{To: coder, Dialog: "ctx-rs"})
	require.NoError(t, err)
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)

	_, base := delegate(t, w, up, gateway.DelegateConfig{Agent: agent()})
	res, err := sendRaw(context.Background(), client(t, base, overJSONRPC), "ctx-rs", data)
	require.NoError(t, err)
	first := statusOf(res)
	w.AssertStatus(t, first, out.Handoff.Offer, state.Completed, "")

	_, base = delegate(t, w, up, gateway.DelegateConfig{Agent: agent()}) // the same store, a new process
	res, err = sendRaw(context.Background(), client(t, base, overJSONRPC), "ctx-rs", data)
	require.NoError(t, err)
	assert.Equal(t, first, statusOf(res))
	assert.EqualValues(t, 1, up.calls.Load())
}

// NewDelegate fails closed: no agent, no upstream, or an upstream whose
// card cannot be had.
func TestNewDelegate_Errors(t *testing.T) {
	w := world(t)
	_, err := gateway.NewDelegate(context.Background(), gateway.DelegateConfig{Upstream: "http://127.0.0.1:1", URL: "http://x"})
	require.ErrorIs(t, err, handoff.ErrConfig)
	_, err = gateway.NewDelegate(context.Background(), gateway.DelegateConfig{Agent: w.Agent(coder), URL: "http://x"})
	require.ErrorIs(t, err, handoff.ErrConfig)
	up := newUpstream(t, upstreamOptions{})
	closeUpstream(t, up)
	_, err = gateway.NewDelegate(context.Background(), gateway.DelegateConfig{Agent: w.Agent(coder), Upstream: up.URL, URL: "http://x"})
	require.ErrorIs(t, err, gateway.ErrUpstream)
	srv, base := listen(t)
	srv.Config.Handler = http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte(`{"name":"no interfaces"}`)) })
	srv.Start()
	_, err = gateway.NewDelegate(context.Background(), gateway.DelegateConfig{Agent: w.Agent(coder), Upstream: base, URL: "http://x"})
	require.ErrorIs(t, err, gateway.ErrUpstream)
	assert.False(t, errors.Is(err, handoff.ErrConfig))
}

// The upstream pauses its task for input (TASK_STATE_INPUT_REQUIRED); the
// client answers on the gateway's task with the hop's identical Handoff
// (a2a1hop's Client.Retransmit, or a plain client through the Delegator,
// which attaches the task's hop), which a2a1hop's executor runs as the
// hop's work resumed: the gateway sends the answer on the SAME upstream
// task (UpstreamTaskKey), which completes, and so does the hop. The
// upstream ran twice, on one task, whether it streams or not, or answers
// at once.
func TestDelegate_FollowUp_ContinuesTheUpstreamTask(t *testing.T) {
	for _, c := range []struct {
		name  string
		b     binding
		plain bool // a plain client through the Delegator
		o     upstreamOptions
	}{
		{"jsonrpc", overJSONRPC, false, upstreamOptions{}},
		{"rest", overREST, false, upstreamOptions{}},
		{"upstream-not-streaming", overJSONRPC, false, upstreamOptions{noStreaming: true}},
		{"upstream-at-once", overJSONRPC, false, upstreamOptions{atOnce: true}},
		{"plain-client-through-both-gateways", overREST, true, upstreamOptions{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			w := world(t)
			up := newUpstream(t, c.o)
			_, base := delegate(t, w, up, gateway.DelegateConfig{})
			p := w.Agent(planner)
			send := func(m *a2a.Message) a2a.SendMessageResult {
				t.Helper()
				res, err := client(t, base, c.b).SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
				require.NoError(t, err)
				return res
			}
			var hop handoff.HopID
			if c.plain {
				_, dl := delegatorFor(t, w, p, base, gateway.DelegatorConfig{})
				base = dl
			} else {
				hc, cl := delegator(t, p, base, c.b, a2a1hop.ClientConfig{})
				send = func(m *a2a.Message) a2a.SendMessageResult {
					t.Helper()
					if hop == "" {
						d, err := hc.Send(ctx, cl, m, handoff.OfferParams{To: coder})
						require.NoError(t, err)
						hop = d.Hop
						return d.Result
					}
					res, _, err := hc.Retransmit(ctx, cl, m, hop)
					require.NoError(t, err)
					return res
				}
			}
			task := taskOf(t, send(message("ctx-f", "input")))
			require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
			open, err := p.Unresolved(ctx)
			require.NoError(t, err)
			require.Len(t, open, 1, "the paused hop is \"accepted\"")
			hop = open[0].Hop
			info := open[0]

			answer := message(task.ContextID, "pager.go")
			answer.TaskID = task.ID
			done := taskOf(t, send(answer))
			require.Equal(t, task.ID, done.ID, "the gateway's task goes on")
			require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
			require.NotEmpty(t, done.Artifacts)
			assert.Equal(t, "done: pager.go", done.Artifacts[len(done.Artifacts)-1].Parts[0].Text())
			require.NotNil(t, statusOf(done), "the answer carries the hop's \"completed\"")
			info, _, err = p.Hop(ctx, hop)
			require.NoError(t, err)
			require.Equal(t, state.Completed, info.State)
			require.True(t, info.Resolved)

			require.EqualValues(t, 2, up.calls.Load(), "the upstream ran for the message and for the answer")
			seen := up.messages()
			require.Len(t, seen, 2)
			assert.Empty(t, seen[0].task, "a new task upstream")
			assert.NotEmpty(t, seen[1].task)
			if upTask, ok := task.Metadata[gateway.UpstreamTaskKey].(string); assert.True(t, ok, "%v", task.Metadata) {
				assert.Equal(t, a2a.TaskID(upTask), seen[1].task, "the answer continues the upstream task the gateway's names")
			}
			assert.NotContains(t, seen[1].meta, a2a1hop.ExtensionURI, "the Handoff is removed by default")
		})
	}
}
