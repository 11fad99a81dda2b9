package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/mcp"
)

// throughMCP carries a JSON Handoff object in tools/call params._meta,
// sends the message through JSON and takes the Handoff out, as a delegate
// would. It fails as the host's JSON parser does for a Handoff that is not
// JSON.
func throughMCP(data []byte) ([]byte, error) {
	var h map[string]any
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, err
	}
	wire, err := json.Marshal(map[string]any{"_meta": map[string]any{mcp.MetaKey: h}})
	if err != nil {
		return nil, err
	}
	var msg struct {
		Meta map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(wire, &msg); err != nil {
		return nil, err
	}
	return mcp.Handoff(msg.Meta)
}

// HC-67: every bad input of the handofftest kit, carried in
// tools/call params._meta (JSON, so COSE elements as base64url text), is
// refused by the delegate exactly as the kit says: the carriage changes
// nothing that a check of section 5.1 sees.
func TestMCP_HC67_BadInputsRefusedThroughMetadata(t *testing.T) {
	const planner, coder = handoff.AgentID("spiffe://a/planner"), handoff.AgentID("spiffe://b/coder")
	w := handofftest.NewWorld(t, planner, coder).Encoded(handoff.JSON)
	for _, bad := range w.BadInputs(coder) {
		t.Run(bad.Name, func(t *testing.T) {
			w := w.With(t)
			a := w.Agent(coder, bad.Configure)
			for _, p := range bad.Prior {
				data, err := throughMCP(p)
				if err != nil {
					t.Fatal(err)
				}
				handofftest.RequireAccepted(t, w.Receive(a, data))
			}
			data, err := throughMCP(bad.Data)
			if bad.Attack == handofftest.AttackMalformedJSON {
				if err == nil {
					t.Fatal("malformed JSON carried in a JSON message")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in, err := a.Receive(context.Background(), data, bad.Host)
			if err != nil {
				t.Fatal(err)
			}
			handofftest.AssertBad(t, in, bad)
		})
	}
}
