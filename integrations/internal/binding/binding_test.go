package binding_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/internal/binding"
)

// Check names the hop a "canceled" is for, or refuses it: another hop,
// another signer, another offer, no hop at all, an offer instead of a
// status, octets that are no element (HC-28, HC-55).
func TestCheck(t *testing.T) {
	ctx := context.Background()
	const alice, bob, coder = handoff.AgentID("spiffe://a/alice"), handoff.AgentID("spiffe://b/bob"), handoff.AgentID("spiffe://c/coder")
	ps := agenttest.New(t, agenttest.Spec{ID: alice, Format: handoff.JWS}, agenttest.Spec{ID: bob, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	oa, err := ps[alice].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "d"})
	require.NoError(t, err)
	ob, err := ps[bob].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "d"})
	require.NoError(t, err)
	ha := binding.Hop{Iss: alice, Hop: oa.Offer.Hop, Offer: oa.Digest}
	hb := binding.Hop{Iss: bob, Hop: ob.Offer.Hop, Offer: ob.Digest}
	na, err := ps[alice].Agent.Cancel(ctx, oa.Offer.Hop)
	require.NoError(t, err)

	got, err := binding.Check(na.Status.Octets, []binding.Hop{hb, ha})
	require.NoError(t, err)
	require.Equal(t, ha.Hop, got.Hop)
	_, err = binding.Check(na.Status.Octets, []binding.Hop{hb})
	require.ErrorIs(t, err, binding.ErrForeign)
	_, err = binding.Check(na.Status.Octets, nil)
	require.ErrorIs(t, err, binding.ErrForeign)
	// The same hop id under another signer, or another offer digest.
	_, err = binding.Check(na.Status.Octets, []binding.Hop{{Iss: bob, Hop: oa.Offer.Hop, Offer: oa.Digest}})
	require.ErrorIs(t, err, binding.ErrForeign)
	_, err = binding.Check(na.Status.Octets, []binding.Hop{{Iss: alice, Hop: oa.Offer.Hop, Offer: ob.Digest}})
	require.ErrorIs(t, err, binding.ErrForeign)
	_, err = binding.Check(oa.Handoff.Offer.Octets, []binding.Hop{ha})
	require.ErrorIs(t, err, handoff.ErrMalformed)
	_, err = binding.Check([]byte("not an element"), []binding.Hop{ha})
	require.Error(t, err)

	var tb binding.Table[string]
	require.True(t, tb.Bind("task", ha))
	require.False(t, tb.Bind("task", ha), "bound once")
	require.False(t, tb.Bind("task", hb))
	require.Len(t, tb.Hops("task"), 2)
	tb.Forget("task", ha)
	require.Equal(t, []binding.Hop{hb}, tb.Hops("task"), "a hop that ended is forgotten, the others kept")
	tb.Forget("task", ha)
	tb.Forget("other", ha)
	require.Equal(t, []binding.Hop{hb}, tb.Hops("task"))
	require.False(t, tb.Bind("task", ha), "the task is still known")
	require.Len(t, tb.Hops("task"), 2)
	tb.Unbind("task")
	require.Empty(t, tb.Hops("task"))
}
