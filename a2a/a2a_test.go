package a2a_test

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
	"github.com/agentproto/handoff/a2a"
)

// message has the JSON shape of an A2A Message's members this package uses.
type message struct {
	Role       string         `json:"role"`
	Metadata   map[string]any `json:"metadata,omitempty"`
	Extensions []string       `json:"extensions,omitempty"`
}

func agent(t *testing.T, id handoff.AgentID, f handoff.Format, trust map[handoff.AgentID][]handoff.TrustedKey, signers map[handoff.AgentID]*handoff.Signer) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	s, err := handoff.NewSigner(k, f, nil)
	require.NoError(t, err)
	signers[id] = s
	trust[id] = []handoff.TrustedKey{s.Key()}
}

// HC-66: an offer and its status travel in A2A message metadata, through a
// JSON round trip, and verify on the other side.
func TestA2A_HC66_RoundTrip(t *testing.T) {
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
			msg.Extensions, err = a2a.AttachHandoff(msg.Metadata, msg.Extensions, out.Handoff)
			require.NoError(t, err)
			assert.Equal(t, []string{a2a.ExtensionURI}, msg.Extensions)
			wire, err := json.Marshal(msg)
			require.NoError(t, err)

			var got message
			require.NoError(t, json.Unmarshal(wire, &got))
			data, err := a2a.Handoff(got.Metadata)
			require.NoError(t, err)
			in, err := c.Receive(ctx, data, handoff.Host{Dialog: "ctx-1"})
			require.NoError(t, err)
			require.True(t, in.Accepted(), in.Detail())
			assert.True(t, in.Digest.Equal(out.Digest), "the element's octets arrive exactly")

			st, err := c.Reply(ctx, in, handoff.Accepted, handoff.ReplyOptions{})
			require.NoError(t, err)
			reply := message{Role: "agent", Metadata: map[string]any{}}
			a2a.AttachStatus(reply.Metadata, st)
			wire, err = json.Marshal(reply)
			require.NoError(t, err)
			var back message
			require.NoError(t, json.Unmarshal(wire, &back))
			octets, err := a2a.Status(back.Metadata)
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
			a2a.AttachStatus(req.Metadata, cancel.Status)
			wire, err = json.Marshal(req)
			require.NoError(t, err)
			var got2 message
			require.NoError(t, json.Unmarshal(wire, &got2))
			octets, err = a2a.Status(got2.Metadata)
			require.NoError(t, err)
			res, err = c.HandleStatus(ctx, octets)
			require.NoError(t, err)
			assert.Equal(t, handoff.Canceled, res.State)
		})
	}
}

func TestA2A_Absent(t *testing.T) {
	_, err := a2a.Handoff(map[string]any{})
	assert.ErrorIs(t, err, a2a.ErrAbsent)
	_, err = a2a.Handoff(map[string]any{a2a.ExtensionURI: "x"})
	assert.ErrorIs(t, err, handoff.ErrMalformed)
	_, err = a2a.Status(map[string]any{a2a.ExtensionURI: 7})
	assert.ErrorIs(t, err, handoff.ErrMalformed)
}
