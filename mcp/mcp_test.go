package mcp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/mcp"
)

// message has the JSON shape of the params of a tools/call request, or of
// a CallToolResult: the members this package uses.
type message struct {
	Role     string         `json:"name"`
	Metadata map[string]any `json:"_meta,omitempty"`
}

func agent(t *testing.T, id handoff.AgentID, f handoff.Format, trust map[handoff.AgentID][]handoff.TrustedKey, signers map[handoff.AgentID]*handoff.Signer) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	s, err := handoff.NewSigner(k, f, nil)
	require.NoError(t, err)
	signers[id] = s
	trust[id] = []handoff.TrustedKey{s.Key()}
}

// HC-67: an offer and its status travel in MCP _meta (tools/call params, CallToolResult), through a
// JSON round trip, and verify on the other side.
func TestMCP_HC67_RoundTrip(t *testing.T) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		t.Run(f.String(), func(t *testing.T) {
			ctx := context.Background()
			const planner, coder = handoff.AgentID("spiffe://a/planner"), handoff.AgentID("spiffe://b/coder")
			keys, signers := map[handoff.AgentID][]handoff.TrustedKey{}, map[handoff.AgentID]*handoff.Signer{}
			agent(t, planner, f, keys, signers)
			agent(t, coder, f, keys, signers)
			trust, err := handoff.NewTrust(keys)
			require.NoError(t, err)
			now := func() time.Time { return time.Unix(1793000000, 0) }
			p, err := handoff.NewAgent(handoff.Config{ID: planner, Signer: signers[planner], Trust: trust, Now: now})
			require.NoError(t, err)
			c, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: signers[coder], Trust: trust, Now: now})
			require.NoError(t, err)

			out, err := p.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "ctx-1"})
			require.NoError(t, err)
			msg := message{Role: "user", Metadata: map[string]any{}}
			require.NoError(t, mcp.AttachHandoff(msg.Metadata, out.Handoff))
			wire, err := json.Marshal(msg)
			require.NoError(t, err)

			var got message
			require.NoError(t, json.Unmarshal(wire, &got))
			data, err := mcp.Handoff(got.Metadata)
			require.NoError(t, err)
			in, err := c.Receive(ctx, data, handoff.Host{Dialog: "ctx-1"})
			require.NoError(t, err)
			require.True(t, in.Accepted(), in.Detail())
			assert.True(t, in.Digest.Equal(out.Digest), "the element's octets arrive exactly")

			st, err := c.Reply(ctx, in, handoff.Accepted, handoff.ReplyOptions{})
			require.NoError(t, err)
			reply := message{Role: "agent", Metadata: map[string]any{}}
			mcp.AttachStatus(reply.Metadata, st)
			wire, err = json.Marshal(reply)
			require.NoError(t, err)
			var back message
			require.NoError(t, json.Unmarshal(wire, &back))
			octets, err := mcp.Status(back.Metadata)
			require.NoError(t, err)
			assert.Equal(t, st.Octets, octets)
			res, err := p.HandleStatus(ctx, octets)
			require.NoError(t, err)
			assert.Equal(t, handoff.Accepted, res.State)

			// The delegator's "canceled" travels the same way (in A2A, in the
			// Cancel Task request's metadata; in MCP, in the params._meta of
			// notifications/cancelled).
			cancel, err := p.Cancel(ctx, out.Offer.Hop)
			require.NoError(t, err)
			req := message{Metadata: map[string]any{}}
			mcp.AttachStatus(req.Metadata, cancel.Status)
			wire, err = json.Marshal(req)
			require.NoError(t, err)
			var got2 message
			require.NoError(t, json.Unmarshal(wire, &got2))
			octets, err = mcp.Status(got2.Metadata)
			require.NoError(t, err)
			res, err = c.HandleStatus(ctx, octets)
			require.NoError(t, err)
			assert.Equal(t, handoff.Canceled, res.State)
		})
	}
}

func TestMCP_Absent(t *testing.T) {
	_, err := mcp.Handoff(map[string]any{})
	assert.ErrorIs(t, err, mcp.ErrAbsent)
	_, err = mcp.Handoff(map[string]any{mcp.MetaKey: "x"})
	assert.ErrorIs(t, err, handoff.ErrMalformed)
	_, err = mcp.Status(map[string]any{mcp.MetaKey: 7})
	assert.ErrorIs(t, err, handoff.ErrMalformed)
}
