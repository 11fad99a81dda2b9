// Package carriagetest is the round trip every carriage package (a2a, mcp)
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
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/state"
)

// Carrier is what a carriage package offers, over one metadata map.
type Carrier struct {
	// Key is the metadata key under which the Handoff object travels.
	Key           string
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
	st, err := d.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
	require.NoError(t, err)
	reply := map[string]any{}
	c.AttachStatus(reply, st)
	octets, err := c.Status(overJSON(t, reply))
	require.NoError(t, err)
	assert.Equal(t, st.Octets, octets)
	res, err := p.HandleStatus(ctx, octets)
	require.NoError(t, err)
	assert.Equal(t, state.Accepted, res.State)

	// The delegator's "canceled", forward.
	cancel, err := p.Cancel(ctx, out.Offer.Hop)
	require.NoError(t, err)
	req := map[string]any{}
	c.AttachStatus(req, cancel.Status)
	octets, err = c.Status(overJSON(t, req))
	require.NoError(t, err)
	res, err = d.HandleStatus(ctx, octets)
	require.NoError(t, err)
	assert.Equal(t, state.Canceled, res.State)
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

// BadInputs carries every bad input of the handofftest kit, as a JSON
// Handoff object under c.Key in a metadata map sent through JSON (so COSE
// elements travel as base64url text), takes it out with c.Handoff, and
// checks that the delegate refuses it exactly as the kit says: the carriage
// changes nothing that a check of section 5.1 sees (HC-66, HC-67).
func BadInputs(t *testing.T, c Carrier) {
	const planner, coder = handoff.AgentID("spiffe://a/planner"), handoff.AgentID("spiffe://b/coder")
	through := func(data []byte) ([]byte, error) {
		var h map[string]any
		if err := json.Unmarshal(data, &h); err != nil {
			return nil, err // the host's JSON parser refuses it first
		}
		return c.Handoff(overJSON(t, map[string]any{c.Key: h}))
	}
	w := handofftest.NewWorld(t, planner, coder).Encoded(handoff.JSON)
	for _, bad := range w.BadInputs(coder) {
		t.Run(bad.Name, func(t *testing.T) {
			w := w.With(t)
			a := w.Agent(coder, bad.Configure)
			for _, p := range bad.Prior {
				data, err := through(p)
				require.NoError(t, err)
				handofftest.RequireAccepted(t, w.Receive(a, data))
			}
			data, err := through(bad.Data)
			if bad.Attack == handofftest.AttackMalformedJSON {
				require.Error(t, err, "malformed JSON carried in a JSON message")
				return
			}
			require.NoError(t, err)
			in, err := a.Receive(context.Background(), data, bad.Host)
			require.NoError(t, err)
			handofftest.AssertBad(t, in, bad)
		})
	}
}
