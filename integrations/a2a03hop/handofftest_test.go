package a2a03hop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/state"

	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
)

// Every bad input of handofftest, carried in a real message/send over
// loopback HTTP, is refused by the executor wrapper with the reason and
// check the draft requires, answered with a signed "rejected" exactly when
// one is due, and never reaches the wrapped executor (HC-30, HC-38, HC-66).
func TestA2A_HandofftestBadInputs_NeverReachTheExecutor_HC30(t *testing.T) {
	ctx := context.Background()
	w0 := handofftest.NewWorld(t, planner, coder)
	total, runs := 0, 0
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		for _, bad := range w0.In(f).Encoded(handoff.JSON).BadInputs(coder) {
			if !json.Valid(bad.Data) {
				continue // malformed JSON cannot be carried in JSON metadata at all
			}
			total++
			t.Run(bad.Name, func(t *testing.T) {
				w := w0.With(t)
				wk := &work{}
				var mu sync.Mutex
				var last *handoff.Received
				exec, err := ha2a.NewExecutor(ha2a.ServerConfig{Agent: w.Agent(coder, bad.Configure), Executor: wk,
					OnReceive: func(_ context.Context, in *handoff.Received) {
						mu.Lock()
						last = in
						mu.Unlock()
					}})
				require.NoError(t, err)
				srv := httptest.NewServer(ha2a.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
					func(*http.Request) (handoff.AgentID, bool) { return planner, true }))
				defer srv.Close()
				cl, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: srv.URL}})
				require.NoError(t, err)
				defer cl.Destroy()
				send := func(data []byte) a2a.SendMessageResult {
					m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "x"})
					m.ContextID = bad.Host.Dialog
					m.Metadata = map[string]any{ha2a.ExtensionURI: json.RawMessage(data)}
					m.Extensions = []string{ha2a.ExtensionURI}
					res, err := cl.SendMessage(ctx, &a2a.MessageSendParams{Message: m})
					require.NoError(t, err)
					return res
				}
				for _, p := range bad.Prior {
					task, ok := send(p).(*a2a.Task)
					require.True(t, ok && task.Status.State == a2a.TaskStateCompleted, "a prior offer was refused")
				}
				res := send(bad.Data)
				require.EqualValues(t, len(bad.Prior), wk.calls.Load(), "the executor ran for a bad input")
				mu.Lock()
				in := last
				mu.Unlock()
				require.NotNil(t, in)
				require.NoError(t, bad.Verify(in))
				var meta map[string]any
				switch r := res.(type) {
				case *a2a.Task:
					require.Equal(t, a2a.TaskStateRejected, r.Status.State)
					meta = r.Status.Message.Metadata
				case *a2a.Message:
					require.True(t, bad.Retransmission, "a reply message for a refusal")
					meta = r.Metadata
				}
				status, err := carry.Status(meta)
				switch {
				case bad.StatusDue():
					require.NoError(t, err)
					w.AssertStatus(t, status, bad.Offer, state.Rejected, bad.Reason)
				case bad.Retransmission:
					require.NoError(t, err) // the prior offer's last status (HC-39)
				default:
					require.ErrorIs(t, err, carry.ErrAbsent, "a status where none is due")
				}
				runs += int(wk.calls.Load())
			})
		}
	}
	require.Greater(t, total, 40, "bad inputs tried, of both forms")
	t.Logf("%d bad inputs through message/send; the executor ran %d times, once per prior offer", total, runs)
}
