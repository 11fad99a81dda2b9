package mcphop_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/handofftest"
	carry "github.com/agentproto/handoff/mcp"
	"github.com/agentproto/handoff/state"

	hmcp "github.com/agentproto/handoff/integrations/mcphop"
)

// Every bad input of handofftest, carried in a real tools/call, is refused
// by the middleware with the reason and check the draft requires, answered
// with a signed "rejected" exactly when one is due, and never reaches the
// tool: it runs once for each prior offer only (HC-30, HC-38, HC-67).
func TestMCP_HandofftestBadInputs_NeverReachTheTool_HC30(t *testing.T) {
	ctx := context.Background()
	w0 := handofftest.NewWorld(t, planner, coder)
	total, runs := 0, 0
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		for _, bad := range w0.In(f).Encoded(handoff.JSON).BadInputs(coder) {
			if !json.Valid(bad.Data) {
				continue // malformed JSON cannot be carried in JSON _meta at all
			}
			total++
			t.Run(bad.Name, func(t *testing.T) {
				w := w0.With(t)
				var calls atomic.Int32
				var mu sync.Mutex
				var last *handoff.Received
				mw, err := hmcp.Server(hmcp.ServerConfig{
					Agent:  w.Agent(coder, bad.Configure),
					Dialog: func(*mcp.CallToolRequest) string { return bad.Host.Dialog },
					Peer:   func(*mcp.CallToolRequest) handoff.AgentID { return planner },
					OnReceive: func(_ context.Context, in *handoff.Received) {
						mu.Lock()
						last = in
						mu.Unlock()
					},
				})
				require.NoError(t, err)
				srv := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
				srv.AddReceivingMiddleware(mw)
				mcp.AddTool(srv, &mcp.Tool{Name: "work"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
					calls.Add(1)
					return &mcp.CallToolResult{Content: []mcp.Content{}}, nil, nil
				})
				st, ct := mcp.NewInMemoryTransports()
				ss, err := srv.Connect(ctx, st, nil)
				require.NoError(t, err)
				defer ss.Close()
				s, err := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil).Connect(ctx, ct, nil)
				require.NoError(t, err)
				defer s.Close()
				send := func(data []byte) *mcp.CallToolResult {
					res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "work", Meta: mcp.Meta{hmcp.MetaKey: json.RawMessage(data)}})
					require.NoError(t, err)
					return res
				}
				for _, p := range bad.Prior {
					require.False(t, send(p).IsError, "a prior offer was refused")
				}
				res := send(bad.Data)
				require.EqualValues(t, len(bad.Prior), calls.Load(), "the tool ran for a bad input")
				mu.Lock()
				in := last
				mu.Unlock()
				require.NotNil(t, in)
				require.NoError(t, bad.Verify(in))
				status, err := carry.Status(res.Meta)
				switch {
				case bad.StatusDue():
					require.NoError(t, err)
					w.AssertStatus(t, status, bad.Offer, state.Rejected, bad.Reason)
				case bad.Retransmission:
					// answered with the prior offer's last status (HC-39)
					require.NoError(t, err)
				default:
					require.ErrorIs(t, err, carry.ErrAbsent, "a status where none is due")
				}
				runs += int(calls.Load())
			})
		}
	}
	require.Greater(t, total, 40, "bad inputs tried, of both forms")
	t.Logf("%d bad inputs through tools/call; the tool ran %d times, once per prior offer", total, runs)
}
