package evidence

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
)

// A delegator names the package once, where it makes the offer
// (Builder.Deliver): the offer's refs name it by digest, the package and
// its salt come back beside the Handoff, and the delegate's check passes
// on the accepted delivery and on the hop's work resumed (Agent.Resume),
// whose Offer is the accepted offer (issue 32, findings 1 and 2).
func TestDeliver_OneNameChecksOnFirstAndResumed(t *testing.T) {
	for _, salted := range []bool{false, true} {
		ctx := context.Background()
		w := newWorld(t, handoff.JWS, nil)
		deliver := NewBuilder(refundPackage()).Deliver(BuildOptions{Salted: salted})
		out, err := w.from.Offer(ctx, handoff.OfferParams{To: payments, Dialog: "case-77", TTL: 120 * time.Second, Deliver: deliver})
		require.NoError(t, err)
		require.NotNil(t, out.Delivered)
		require.Len(t, Refs(out.Offer.Refs), 1, "the offer names the package")
		assert.Equal(t, salted, len(out.Delivered.Salt) > 0)
		d := Delivered{Package: out.Delivered.Octets, Salt: out.Delivered.Salt}

		in, rep := w.receive(out, handoff.JSON, d)
		require.True(t, rep.Acceptable(), "%v", rep.Findings())
		require.NoError(t, w.to.Take(ctx, in))
		data, err := out.Handoff.Encode(handoff.JSON)
		require.NoError(t, err)
		again, err := w.to.Receive(ctx, data, handoff.Host{Dialog: "case-77", Peer: triage})
		require.NoError(t, err)
		resumed, err := w.to.Resume(ctx, again)
		require.NoError(t, err)
		rep2, err := CheckReceived(ctx, resumed, d, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource()})
		require.NoError(t, err)
		require.True(t, rep2.Acceptable(), "%v", rep2.Findings())
		assert.True(t, rep2.OfferDigest().Equal(rep.OfferDigest()), "the same hop")
	}
}
