package handoff

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// A retransmission of a hop taken and still "accepted" resumes as that
// hop's work: Offer is the accepted offer (the same octets by digest),
// Refused stays nil, the hop is neither taken nor accepted again, and the
// work's outcome is answered on it. A plain retransmission keeps Offer nil
// (issue 32, finding 2).
func TestResume_TakenHopGivesItsAcceptedOffer(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		ctx := context.Background()
		w := newWorld(t, fe.Format, rxAgents...)
		a := w.agent(rxReceiver)
		data := encodeHandoff(t, handoffOf(w.path(nil, rxOrigin, rxPlanner, rxReceiver)...), fe.Encoding)
		first := receive(t, a, data, Host{Peer: rxPlanner, Dialog: "ctx-1"})
		require.True(t, first.Accepted())
		require.NoError(t, a.Take(ctx, first))

		again := receive(t, a, data, Host{Peer: rxPlanner, Dialog: "ctx-1"})
		require.True(t, again.Retransmission())
		require.Nil(t, again.Offer(), "a retransmission not resumed hands out no offer")
		in, err := a.Resume(ctx, again)
		require.NoError(t, err)
		require.NotNil(t, in.Offer())
		assert.Equal(t, first.Offer(), in.Offer())
		assert.True(t, in.Digest().Equal(first.Digest()))
		assert.Nil(t, in.Refused(), "Refused is for what was not accepted")
		assert.True(t, in.Retransmission())
		assert.False(t, in.Accepted(), "the hop is not taken again")
		assert.Equal(t, ChainFull, in.Chain(), "the carried chain is checked again")
		require.Len(t, in.Links(), 1)
		for _, r := range in.Refs() {
			assert.Equal(t, ref.NotChecked, r.Outcome)
		}
		assert.Nil(t, again.Offer(), "Resume leaves the retransmission as it was")
		require.ErrorIs(t, a.Take(ctx, in), ErrArgument, "HC-23: taken once")
		_, err = a.Resume(ctx, in)
		require.ErrorIs(t, err, ErrArgument, "a resumed hop is not resumed again")

		// The resumed work passes the hop on, with the chain checked again.
		out, err := a.Offer(ctx, OfferParams{To: rxTester, From: in})
		require.NoError(t, err)
		require.Len(t, out.Handoff.Chain, 2)
		assert.Equal(t, first.Digest().Val, out.Offer.Prev.Val)

		// Its outcome is answered on it; a hop that ended resumes no more.
		_, err = a.Reply(ctx, in, state.Completed, ReplyOptions{Effect: state.EffectFull})
		require.NoError(t, err)
		_, err = a.Resume(ctx, receive(t, a, data, Host{Peer: rxPlanner}))
		require.ErrorIs(t, err, ErrState)
	})
}

// Only a hop taken and "accepted", retransmitted by its delegator as the
// host authenticated it, resumes; anything else is a typed error.
func TestResume_Refusals(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, rxAgents...)
	a := w.agent(rxReceiver)
	data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON)
	first := receive(t, a, data, Host{Peer: rxPlanner})
	_, err := a.Resume(ctx, first)
	require.ErrorIs(t, err, ErrArgument, "an accepted delivery is no retransmission")
	_, err = a.Resume(ctx, receive(t, a, data, Host{Peer: rxPlanner}))
	require.ErrorIs(t, err, ErrState, "remembered, never taken")
	require.NoError(t, a.Take(ctx, first))

	for name, host := range map[string]Host{"no peer": {}, "another peer": {Peer: rxOther}} {
		_, err = a.Resume(ctx, receive(t, a, data, host))
		require.ErrorIs(t, err, ErrArgument, name)
	}
	_, err = a.Resume(ctx, receive(t, a, data, Host{Peer: rxPlanner, Dialog: "ctx-other"}))
	require.Equal(t, reason.Policy, ReasonOf(err), "step 5 on the resumed delivery")
	_, err = w.agent(rxOther).Resume(ctx, receive(t, a, data, Host{Peer: rxPlanner}))
	require.ErrorIs(t, err, ErrArgument, "another agent's Received")
	_, err = a.Resume(ctx, nil)
	require.ErrorIs(t, err, ErrArgument)

	// An equivocating offer under the hop, and a refused one, resume nothing.
	o := w.draftOffer(rxPlanner, rxReceiver)
	o.Hop = first.Offer().Hop
	eq := receive(t, a, encodeHandoff(t, handoffOf(w.signAs(rxPlanner, o)), JSON), Host{Peer: rxPlanner})
	require.NotEmpty(t, eq.Equivocation())
	_, err = a.Resume(ctx, eq)
	require.ErrorIs(t, err, ErrArgument)
}

// The chain travels outside the signature: a retransmission whose chain
// was altered does not resume, with the reason of step 6.
func TestResume_ChainOfTheRetransmissionIsChecked(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, rxAgents...)
	a := w.agent(rxReceiver)
	elems := w.path(nil, rxOrigin, rxPlanner, rxReceiver)
	data := encodeHandoff(t, handoffOf(elems...), JSON)
	first := receive(t, a, data, Host{Peer: rxPlanner})
	require.NoError(t, a.Take(ctx, first))
	stranger := w.offer(rxOther, rxPlanner, nil) // not the offer prev names
	altered := encodeHandoff(t, &Handoff{Offer: elems[1], Chain: []Signed{stranger}}, JSON)
	again := receive(t, a, altered, Host{Peer: rxPlanner})
	require.True(t, again.Retransmission(), "the same offer octets")
	_, err := a.Resume(ctx, again)
	var rj *Rejection
	require.True(t, errors.As(err, &rj), "%v", err)
	assert.Equal(t, reason.BrokenChain, rj.Reason)
}

// OfferParams.Deliver names the object the delegate receives with the
// task: its reference is appended to the offer's refs, checked against it
// for the draft's kinds, and the object is returned beside the Handoff,
// never inside the offer.
func TestOffer_Deliver(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, rxAgents...)
	a := w.agent(rxPlanner)
	pkg := []byte(`{"handoff":"package"}`)
	var seen *Offer
	out, err := a.Offer(ctx, OfferParams{To: rxReceiver, Dialog: "ctx-1",
		Refs: []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("other"))}},
		Deliver: func(o *Offer) (ref.Ref, ref.Object, error) {
			seen = o
			o.Hop = "changed-on-a-copy-only-xxxxxxxxx"
			salt, d, err := digest.Salted(nil, pkg)
			return ref.Ref{Kind: ref.KindSaltedDigest, Dig: d}, ref.Object{Octets: pkg, Salt: salt}, err
		}})
	require.NoError(t, err)
	require.NotNil(t, seen)
	require.Len(t, out.Offer.Refs, 2)
	assert.Equal(t, ref.KindSaltedDigest, out.Offer.Refs[1].Kind)
	require.NotNil(t, out.Delivered)
	assert.Equal(t, pkg, out.Delivered.Octets)
	assert.Equal(t, ref.Verified, ref.Check(out.Offer.Refs[1], *out.Delivered).Outcome)
	assert.NotEqual(t, HopID("changed-on-a-copy-only-xxxxxxxxx"), out.Offer.Hop)
	assert.NotContains(t, string(out.Handoff.Offer.Octets), string(pkg))

	_, err = a.Offer(ctx, OfferParams{To: rxReceiver, Dialog: "ctx-1",
		Deliver: func(*Offer) (ref.Ref, ref.Object, error) {
			return ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("not it"))}, ref.Object{Octets: pkg}, nil
		}})
	require.ErrorIs(t, err, ErrArgument, "a reference that does not name the object")
	plain, err := a.Offer(ctx, OfferParams{To: rxReceiver, Dialog: "ctx-1"})
	require.NoError(t, err)
	assert.Nil(t, plain.Delivered)
}
