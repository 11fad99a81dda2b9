package evidence

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/ref"
)

// Decoding never panics; what decodes re-encodes to a fixed point, and the
// digest of that encoding is the package's Canonical digest; bad input
// always carries a class.
func FuzzDecode(f *testing.F) {
	f.Add(Template())
	f.Add([]byte(`{"control":"transfer-ownership","x":{"y":[1,2.5,"\u00e9"]}}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"a":"\ud800"}`))
	f.Add(mustEncodeF(f, refundPackage()))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data, DecodeOptions{})
		if err != nil {
			if !errors.Is(err, ErrTooLarge) {
				require.ErrorIs(t, err, ErrMalformed)
			}
			return
		}
		enc, err := p.Encode()
		require.NoError(t, err)
		p2, err := Decode(enc, DecodeOptions{MaxSize: len(enc)})
		require.NoError(t, err)
		enc2, err := p2.Encode()
		require.NoError(t, err)
		require.True(t, bytes.Equal(enc, enc2), "encoding is a fixed point")
		c1, err1 := p.Canonical()
		c2, err2 := Canonical(enc, DecodeOptions{MaxSize: len(enc)})
		require.Equal(t, err1 == nil, err2 == nil)
		if err1 == nil {
			require.Equal(t, c1, c2)
		}
	})
}

func mustEncodeF(f *testing.F, p Package) []byte {
	b, err := p.Encode()
	require.NoError(f, err)
	return b
}

// The root's reference check does not know the package kinds: under a
// policy that checks available references, the root reports the package
// reference unverifiable without rejecting, and the package is verified by
// Check (through CheckRef). This records the division of work.
func TestRootRefMachinery_PackageKindIsCheckedByEvidence(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	to, err := handoff.NewAgent(handoff.Config{ID: payments, Signer: w.signers[payments], Trust: w.trust, Now: w.clock.Now,
		Refs: ref.CheckAvailable})
	require.NoError(t, err)
	// Registered for its kind, the package's checker runs at step 7, and a
	// receiver that requires references accepts the verified package.
	strict, err := handoff.NewAgent(handoff.Config{ID: payments, Signer: w.signers[payments], Trust: w.trust, Now: w.clock.Now,
		Refs: ref.CheckRequired, RefCheckers: ref.Checkers{Kind: RefChecker{}, KindSalted: RefChecker{}}})
	require.NoError(t, err)
	built, bind := w.build(refundPackage(), BuildOptions{})
	out := w.offer(built, bind)
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := to.Receive(context.Background(), data, handoff.Host{RefSource: Source(built.Encoded, nil)})
	require.NoError(t, err)
	require.True(t, in.Accepted())
	require.Equal(t, ref.Unverifiable, in.Refs()[0].Outcome, "no checker registered for the kind")
	in2, err := strict.Receive(context.Background(), data, handoff.Host{RefSource: Source(built.Encoded, nil)})
	require.NoError(t, err)
	require.True(t, in2.Accepted(), in2.Detail())
	require.Equal(t, ref.Verified, in2.Refs()[0].Outcome)
	in3, err := strict.Receive(context.Background(), data, handoff.Host{RefSource: Source([]byte(`{"other":1}`), nil)})
	require.NoError(t, err)
	require.True(t, in3.Retransmission(), "the same offer again")
	rep, err := Check(context.Background(), in.Offer(), Delivered{Package: built.Encoded}, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource()})
	require.NoError(t, err)
	require.Equal(t, ref.Verified, rep.Binding().Outcome)
}

func TestRecorded_UnknownHop(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	_, ok, err := Recorded(context.Background(), w.store, triage, "AAAAAAAAAAAAAAAAAAAAAA", w.trust, handoff.Limits{})
	require.NoError(t, err)
	require.False(t, ok)
}

// CheckReceived refuses an offer that failed the receive checks: here one
// signed by a key the receiver does not trust.
func TestCheckReceived_RefusesUnverifiedOffer(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	built, bind := w.build(refundPackage(), BuildOptions{})
	out := w.offer(built, bind)
	stranger := newWorld(t, handoff.JWS, nil) // other keys, same names
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := stranger.to.Receive(context.Background(), data, handoff.Host{})
	require.NoError(t, err)
	require.False(t, in.Accepted())
	require.NotNil(t, in.Unverified(), "the unverified offer is there for diagnosis")
	require.Nil(t, in.Offer(), "never as a verified one")
	_, err = CheckReceived(context.Background(), in, Delivered{Package: built.Encoded}, CheckConfig{Now: w.clock.Now})
	require.ErrorIs(t, err, ErrOfferNotVerified)
	_, err = CheckReceived(context.Background(), nil, Delivered{Package: built.Encoded}, CheckConfig{})
	require.ErrorIs(t, err, ErrOfferNotVerified)
}
