package handoff

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/state"
)

// countingKey is an ECDSA key that counts its signatures.
type countingKey struct {
	*ecdsa.PrivateKey
	n *atomic.Int64
}

func (k countingKey) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	k.n.Add(1)
	return k.PrivateKey.Sign(r, digest, opts)
}

// A reply signs its status once, however many compare-and-set attempts
// it takes: after Take, or after an earlier Reply, the record the
// delivery's Received holds is stale, so that the first Swap fails and
// the reply decides again from the record held; it writes the octets it
// signed the first time.
func TestReply_SignsOnce_AcrossSwapAttempts(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, idA, idB)
	var n atomic.Int64
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	s, err := NewSigner(countingKey{k, &n}, JWS, nil)
	require.NoError(t, err)
	w.signers[idB] = s
	w.trust, err = NewTrust(map[AgentID][]TrustedKey{idA: {w.signers[idA].Key()}, idB: {s.Key()}})
	require.NoError(t, err)
	dtor, dte := w.agent(idA), w.agent(idB)

	for _, first := range []string{"take", "accepted"} {
		out, err := dtor.Offer(ctx, OfferParams{To: idB, Dialog: "d"})
		require.NoError(t, err)
		b, err := out.Handoff.Encode(JSON)
		require.NoError(t, err)
		in := receive(t, dte, b, Host{Peer: idA})
		require.True(t, in.Accepted())
		if first == "take" {
			require.NoError(t, dte.Take(ctx, in))
		} else {
			_, err := dte.Reply(ctx, in, state.Accepted, ReplyOptions{})
			require.NoError(t, err)
		}
		before := n.Load()
		done, err := dte.Reply(ctx, in, state.Completed, ReplyOptions{Effect: state.EffectFull})
		require.NoError(t, err)
		require.EqualValues(t, 1, n.Load()-before, "%s, then \"completed\": signatures", first)
		res, err := dtor.HandleStatus(ctx, done.Octets)
		require.NoError(t, err)
		require.NoError(t, res.Err())
		require.Equal(t, state.Completed, res.State)
		// A retransmission is answered with the octets written.
		again := receive(t, dte, b, Host{Peer: idA})
		last, ok := again.LastStatus()
		require.True(t, ok)
		require.Equal(t, done.Octets, last.Octets)
	}
}
