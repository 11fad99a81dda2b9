// Package carrytest is the round trip every carriage package (a2a, mcp)
// runs in its tests: an offer and its statuses put into a host message's
// metadata, sent through JSON, taken out and verified on the other side.
package carriagetest

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
)

// Carrier is what a carriage package offers, over one metadata map.
type Carrier struct {
	AttachHandoff func(meta map[string]any, h *handoff.Handoff) error
	Handoff       func(meta map[string]any) ([]byte, error)
	AttachStatus  func(meta map[string]any, s handoff.Signed)
	Status        func(meta map[string]any) ([]byte, error)
}

// overJSON sends a metadata map through a JSON encoding, as a host
// protocol's message would carry it.
func overJSON(t *testing.T, meta map[string]any) map[string]any {
	t.Helper()
	wire, err := json.Marshal(map[string]any{"metadata": meta})
	require.NoError(t, err)
	var got struct {
		Metadata map[string]any `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(wire, &got))
	return got.Metadata
}

// RoundTrip runs, in both signed forms: an offer from a planner to a coder,
// the coder's "accepted" back, and the planner's "canceled" forward, each
// through metadata and JSON, each verified by its receiver.
func RoundTrip(t *testing.T, c Carrier) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		t.Run(f.String(), func(t *testing.T) { roundTrip(t, c, f) })
	}
}

func roundTrip(t *testing.T, c Carrier, f handoff.Format) {
	ctx := context.Background()
	const planner, coder = handoff.AgentID("spiffe://a/planner"), handoff.AgentID("spiffe://b/coder")
	keys, signers := map[handoff.AgentID][]handoff.TrustedKey{}, map[handoff.AgentID]*handoff.Signer{}
	for _, id := range []handoff.AgentID{planner, coder} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		s, err := handoff.NewSigner(k, f, nil)
		require.NoError(t, err)
		signers[id], keys[id] = s, []handoff.TrustedKey{s.Key()}
	}
	trust, err := handoff.NewTrust(keys)
	require.NoError(t, err)
	now := func() time.Time { return time.Unix(1793000000, 0) }
	p, err := handoff.NewAgent(handoff.Config{ID: planner, Signer: signers[planner], Trust: trust, Now: now})
	require.NoError(t, err)
	d, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: signers[coder], Trust: trust, Now: now})
	require.NoError(t, err)

	// The offer.
	out, err := p.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "ctx-1"})
	require.NoError(t, err)
	meta := map[string]any{}
	require.NoError(t, c.AttachHandoff(meta, out.Handoff))
	data, err := c.Handoff(overJSON(t, meta))
	require.NoError(t, err)
	in, err := d.Receive(ctx, data, handoff.Host{Dialog: "ctx-1"})
	require.NoError(t, err)
	require.True(t, in.Accepted(), in.Detail())
	assert.True(t, in.Digest().Equal(out.Digest), "the element's octets arrive exactly")

	// The delegate's status, back.
	st, err := d.Reply(ctx, in, handoff.Accepted, handoff.ReplyOptions{})
	require.NoError(t, err)
	reply := map[string]any{}
	c.AttachStatus(reply, st)
	octets, err := c.Status(overJSON(t, reply))
	require.NoError(t, err)
	assert.Equal(t, st.Octets, octets)
	res, err := p.HandleStatus(ctx, octets)
	require.NoError(t, err)
	assert.Equal(t, handoff.Accepted, res.State())

	// The delegator's "canceled", forward.
	cancel, err := p.Cancel(ctx, out.Offer.Hop)
	require.NoError(t, err)
	req := map[string]any{}
	c.AttachStatus(req, cancel.Status)
	octets, err = c.Status(overJSON(t, req))
	require.NoError(t, err)
	res, err = d.HandleStatus(ctx, octets)
	require.NoError(t, err)
	assert.Equal(t, handoff.Canceled, res.State())
}

// Absent checks what a carrier says of metadata without an element, or
// with one of the wrong type, under key.
func Absent(t *testing.T, c Carrier, key string, errAbsent error) {
	_, err := c.Handoff(map[string]any{})
	assert.ErrorIs(t, err, errAbsent)
	_, err = c.Handoff(map[string]any{key: "x"})
	assert.ErrorIs(t, err, handoff.ErrMalformed)
	_, err = c.Status(map[string]any{key: 7})
	assert.ErrorIs(t, err, handoff.ErrMalformed)
}
