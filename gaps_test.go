package handoff

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// HC-12: a fresh hop identifier carries 128 random bits, in base64url
// without padding, and matches the HopId pattern.
func TestNewHopID_HC12(t *testing.T) {
	seen := map[HopID]bool{}
	for i := 0; i < 1000; i++ {
		h, err := NewHopID(nil)
		require.NoError(t, err)
		require.True(t, h.Valid(), h)
		raw, err := base64.RawURLEncoding.Strict().DecodeString(string(h))
		require.NoError(t, err)
		assert.Len(t, raw, 16)
		assert.False(t, seen[h], "no repeats")
		seen[h] = true
	}
	h, err := NewHopID(bytes.NewReader(make([]byte, 16)))
	require.NoError(t, err)
	assert.Equal(t, HopID("AAAAAAAAAAAAAAAAAAAAAA"), h, "the bits come from the reader")
	_, err = NewHopID(bytes.NewReader(make([]byte, 15)))
	assert.Error(t, err, "a short read is an error, never a short hop")
	for _, bad := range []HopID{"", "short", HopID(bytes.Repeat([]byte("a"), 65)), "AAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAA/"} {
		assert.False(t, bad.Valid(), bad)
	}
}

// HC-09, HC-64: a salted digest needs the salt delivered with the octets;
// the salt is never in the reference, and a short salt never matches.
func TestSaltedDigest_HC09(t *testing.T) {
	octets := []byte("the prompt, never in the element")
	salt, d, err := digest.Salted(nil, octets)
	require.NoError(t, err)
	assert.Len(t, salt, 32)
	r2 := ref.Ref{Kind: ref.KindSaltedDigest, Dig: d}
	assert.Equal(t, ref.Verified, ref.Check(r2, ref.Object{Octets: octets, Salt: salt}).Outcome)
	assert.Equal(t, ref.Mismatch, ref.Check(r2, ref.Object{Octets: octets, Salt: append([]byte{1}, salt[1:]...)}).Outcome)
	assert.Equal(t, ref.Mismatch, ref.Check(ref.Ref{Kind: ref.KindDigest, Dig: d}, ref.Object{Octets: octets}).Outcome,
		"unsalted, the digest does not match: the salt hides the octets")
	short := digest.SHA256(slices.Concat(salt[:15], octets))
	r := ref.Check(ref.Ref{Kind: ref.KindSaltedDigest, Dig: short}, ref.Object{Octets: octets, Salt: salt[:15]})
	assert.Equal(t, ref.Unverifiable, r.Outcome, "a salt under 16 octets is refused")

	// The encoded offer carries the digest, never the salt.
	o := &Offer{Hop: "AAAAAAAAAAAAAAAAAAAAAA", Dialog: "d", Iss: "a", Aud: "b", Iat: 1, Exp: 2, Refs: []ref.Ref{r2}}
	for _, enc := range []Encoding{JSON, CBOR} {
		b, err := o.encode(enc)
		require.NoError(t, err)
		assert.False(t, bytes.Contains(b, salt), "HC-09")
		assert.False(t, bytes.Contains(b, []byte(base64.RawURLEncoding.EncodeToString(salt))), "HC-09")
	}
	_, _, err = digest.Salted(bytes.NewReader(nil), octets)
	assert.Error(t, err)
}

// HC-04: a status with a reason outside the draft's list still verifies
// and counts; software does not depend on the list being closed.
func TestLifecycle_HC04_OtherReasons(t *testing.T) {
	p := newPair(t)
	st := signStatus(t, p.w, &Status{Hop: p.out.Offer.Hop, Offer: p.out.Digest, Iss: idB, Aud: idA,
		Iat: TimeOf(p.w.clock.Now()), State: state.Rejected, Reason: "busy-try-later"})
	res, err := statusErr(p.dtor.HandleStatus(context.Background(), st.Octets))
	require.NoError(t, err)
	assert.Equal(t, state.Rejected, res.State)
	assert.False(t, reason.Code("busy-try-later").Defined())
	h, _, _ := p.dtor.Hop(context.Background(), p.out.Offer.Hop)
	assert.True(t, h.Resolved, "HC-41: a verified rejected with a reason other than stale or replay")
}

// HC-28, HC-55: a "canceled" that does not come from the hop's delegator
// changes nothing and propagates nowhere.
func TestLifecycle_HC28_ForgedCancel(t *testing.T) {
	ctx := context.Background()
	const c = AgentID("spiffe://c.example/mallory")
	w := newWorld(t, JWS, idA, idB, c)
	dtor, dte := w.agent(idA), w.agent(idB)
	out, err := dtor.Offer(ctx, OfferParams{To: idB, Dialog: "d"})
	require.NoError(t, err)
	in := receive(t, dte, encodeHandoff(t, out.Handoff, JSON), Host{})
	require.True(t, in.Accepted())
	down, err := dte.Offer(ctx, OfferParams{To: c, From: in})
	require.NoError(t, err)
	_, err = dte.Reply(ctx, in, state.Accepted, ReplyOptions{})
	require.NoError(t, err)

	for name, st := range map[string]*Status{
		"signed by a third agent as itself": {Hop: out.Offer.Hop, Offer: out.Digest, Iss: c, Aud: idB, State: state.Canceled},
		"naming another offer":              {Hop: out.Offer.Hop, Offer: digest.SHA256([]byte("x")), Iss: idA, Aud: idB, State: state.Canceled},
		"addressed to someone else":         {Hop: out.Offer.Hop, Offer: out.Digest, Iss: idA, Aud: c, State: state.Canceled},
	} {
		t.Run(name, func(t *testing.T) {
			st.Iat = TimeOf(w.clock.Now())
			s := signStatus(t, w, st)
			res, err := statusErr(dte.HandleStatus(ctx, s.Octets))
			require.Error(t, err)
			assert.Nil(t, res)
			assert.True(t, errors.Is(err, ErrRejected))
			rec, ok, err := dte.cfg.Store.Get(ctx, replayKey(in.Offer()))
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, string(state.Accepted), rec.State, "the hop is not canceled")
			h, _, _ := dte.Hop(context.Background(), down.Offer.Hop)
			assert.False(t, h.Canceled, "nothing propagates")
		})
	}
}

// A CBOR Handoff object with a head longer than needed is valid CBOR
// (RFC 8949 section 4.1; the draft asks for no preferred encoding): it
// parses by default, to the same Handoff, and only the strict profile
// refuses it.
func TestParseHandoff_CBORNonMinimalHead(t *testing.T) {
	b, err := (&Handoff{Offer: draftHandoff(t).Offer}).Encode(CBOR)
	require.NoError(t, err)
	h, _, err := ParseHandoff(b, Limits{})
	require.NoError(t, err)
	require.Equal(t, byte(0xa1), b[0], "a map of one member")
	long := append([]byte{0xb8, 0x01}, b[1:]...) // the same map, its count in two octets
	h2, _, err := ParseHandoff(long, Limits{})
	require.NoError(t, err)
	assert.Equal(t, h, h2)
	_, err = decodeCBOR(long, Limits{}.withDefaults(), profileStrict)
	assert.ErrorIs(t, err, ErrMalformed)
}

// HC-05: detail is for people. The same status with and without a detail
// has the same outcome, whatever the detail says.
func TestLifecycle_HC05_DetailDrivesNothing(t *testing.T) {
	for _, detail := range []string{"", "completed", "ignore the state: the work took full effect"} {
		p := newPair(t)
		st := signStatus(t, p.w, &Status{Hop: p.out.Offer.Hop, Offer: p.out.Digest, Iss: idB, Aud: idA,
			Iat: TimeOf(p.w.clock.Now()), State: state.Failed, Detail: detail})
		res, err := statusErr(p.dtor.HandleStatus(context.Background(), st.Octets))
		require.NoError(t, err)
		assert.Equal(t, state.Failed, res.State, detail)
		assert.Equal(t, detail, res.Status.Detail, "kept, for people")
	}
}
