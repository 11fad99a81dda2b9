package handoff

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	gocose "github.com/veraison/go-cose"

	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Agents of the receive, chain and refs tests. rxReceiver is the delegate
// under test unless a test says otherwise.
const (
	rxOrigin   = AgentID("spiffe://o.example/agent/origin")
	rxPlanner  = AgentID("spiffe://p.example/agent/planner")
	rxCoder    = AgentID("spiffe://c.example/agent/coder")
	rxTester   = AgentID("spiffe://t.example/agent/tester")
	rxReceiver = AgentID("spiffe://r.example/agent/receiver")
	rxOther    = AgentID("spiffe://x.example/agent/other")
)

var rxAgents = []AgentID{rxOrigin, rxPlanner, rxCoder, rxTester, rxReceiver, rxOther}

// rxInput is what one row of a receive table hands to Receive.
type rxInput struct {
	agent *Agent
	h     *Handoff                  // encoded in the cell's encoding
	raw   func(enc Encoding) []byte // used instead of h when set
	host  Host
}

// rxCase is one row of a receive table. build runs in a fresh world whose
// agents all sign in the cell's format.
type rxCase struct {
	name   string
	build  func(t *testing.T, w *world) rxInput
	reason reason.Code // "" means accepted
	class  error       // when set, errors.Is(in.Err(), class) must hold
	check  func(t *testing.T, w *world, in *Received)
}

// runRxCases runs every row in every cell: JWS and COSE elements, each in
// a JSON and a CBOR Handoff object.
func runRxCases(t *testing.T, cases []rxCase) {
	t.Helper()
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				w := newWorld(t, fe.Format, rxAgents...)
				in := c.build(t, w)
				data := in.raw
				if data == nil {
					data = func(enc Encoding) []byte { return encodeHandoff(t, in.h, enc) }
				}
				got := receive(t, in.agent, data(fe.Encoding), in.host)
				assertReceived(t, got, c.reason, c.class)
				if c.check != nil {
					c.check(t, w, got)
				}
			})
		}
	})
}

// assertReceived asserts an accepted offer (reason "") or a rejection with
// exactly reason, whose error is of class when class is not nil.
func assertReceived(t *testing.T, in *Received, reason reason.Code, class error) {
	t.Helper()
	if reason == "" {
		assert.True(t, in.Accepted(), "want accepted, got %q: %s", in.Reason(), in.Detail())
		assert.Empty(t, in.Reason())
		assert.NoError(t, in.Err())
		assert.False(t, in.StatusDue())
		return
	}
	assert.False(t, in.Accepted(), "want %q", reason)
	assert.False(t, in.Retransmission())
	assert.Equal(t, reason, in.Reason(), in.Detail())
	if assert.Error(t, in.Err()) {
		assert.Equal(t, reason, ReasonOf(in.Err()))
		if class != nil {
			assert.ErrorIs(t, in.Err(), class)
		}
	}
}

// plain is an offer from iss to rxReceiver with nothing special about it.
func plain(iss AgentID) func(t *testing.T, w *world) rxInput {
	return func(t *testing.T, w *world) rxInput {
		return rxInput{agent: w.agent(rxReceiver), h: handoffOf(w.offer(iss, rxReceiver, nil))}
	}
}

// withOffer is an offer from rxPlanner to rxReceiver changed by mod.
func withOffer(mod func(w *world, o *Offer)) func(t *testing.T, w *world) rxInput {
	return func(t *testing.T, w *world) rxInput {
		o := w.draftOffer(rxPlanner, rxReceiver)
		mod(w, o)
		return rxInput{agent: w.agent(rxReceiver), h: handoffOf(w.signAs(o.Iss, o))}
	}
}

// tamperPayload changes one value of a signed element's payload, keeping
// its structure and its signature.
func tamperPayload(t testing.TB, s Signed) Signed {
	t.Helper()
	if s.Format == COSE {
		out := bytes.Replace(s.Octets, []byte("ctx-1"), []byte("ctx-2"), 1)
		require.NotEqual(t, s.Octets, out)
		return Signed{Format: COSE, Octets: out}
	}
	parts := strings.Split(string(s.Octets), ".")
	require.Len(t, parts, 3)
	p, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	q := bytes.Replace(p, []byte("ctx-1"), []byte("ctx-2"), 1)
	require.NotEqual(t, p, q)
	parts[1] = base64.RawURLEncoding.EncodeToString(q)
	return Signed{Format: JWS, Octets: []byte(strings.Join(parts, "."))}
}

// withSignature replaces the raw ES256 signature r||s of an element by
// what change makes of it.
func withSignature(t testing.TB, s Signed, change func(sig []byte) []byte) Signed {
	t.Helper()
	if s.Format == COSE {
		out := bytes.Clone(s.Octets)
		n := len(out) - 64 // the signature is the last member: 64 octets
		copy(out[n:], change(bytes.Clone(out[n:])))
		return Signed{Format: COSE, Octets: out}
	}
	parts := strings.Split(string(s.Octets), ".")
	require.Len(t, parts, 3)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	require.Len(t, sig, 64)
	parts[2] = base64.RawURLEncoding.EncodeToString(change(sig))
	return Signed{Format: JWS, Octets: []byte(strings.Join(parts, "."))}
}

// tamperSignature flips one bit of r.
func tamperSignature(t testing.TB, s Signed) Signed {
	return withSignature(t, s, func(sig []byte) []byte { sig[0] ^= 0x01; return sig })
}

// signatureTwin gives the other valid form (r, n-s) of the signature: the
// same payload under different octets.
func signatureTwin(t testing.TB, s Signed) Signed {
	return withSignature(t, s, func(sig []byte) []byte {
		twin, err := ecsig.Twin(ES256, sig)
		require.NoError(t, err)
		return twin
	})
}

// signRaw signs an arbitrary payload with signer's key in its format,
// bypassing the checks of SignOffer.
func signRaw(t testing.TB, s *Signer, payload []byte) Signed {
	t.Helper()
	var b []byte
	var err error
	if s.Format() == COSE {
		b, err = cose.Sign(payload, s.key, s.alg, s.kid, nil)
	} else {
		b, err = jws.Sign(payload, s.key, s.alg, s.kid, nil)
	}
	require.NoError(t, err)
	return Signed{Format: s.Format(), Octets: b}
}

// rawHandoff encodes a Handoff-like map whose members the Handoff type
// cannot express.
func rawHandoff(t testing.TB, m map[string]any, enc Encoding) []byte {
	t.Helper()
	var b []byte
	var err error
	if enc == JSON {
		var v any
		v, err = toJSONValue(m)
		require.NoError(t, err)
		b, err = marshalJSON(v)
	} else {
		b, err = cborEncMode.Marshal(m)
	}
	require.NoError(t, err)
	return b
}

// nestedArray is n arrays, each holding the next, around the number 1.
func nestedArray(n int) any {
	var v any = uint64(1)
	for range n {
		v = []any{v}
	}
	return v
}

// HC-30, HC-31, HC-32, HC-36: each reason of steps 1, 2, 3 and 5 of section
// 5.1, with its error class, in both signed forms and both encodings of
// the Handoff object. Chain reasons are in chain_test.go, reference
// reasons in refs_test.go, replay and equivocation below.
func TestReceive_HC30_ReasonPerCheck(t *testing.T) {
	runRxCases(t, []rxCase{
		{name: "valid offer", build: plain(rxPlanner), check: func(t *testing.T, _ *world, in *Received) {
			assert.Equal(t, ChainFull, in.Chain(), "an offer without prev starts its own chain")
			assert.Empty(t, in.Links())
			assert.Equal(t, in.Handoff().Offer.Digest(), in.Digest())
			assert.Equal(t, rxPlanner, in.Offer().Iss)
		}},

		// Step 1: bad-signature.
		{name: "HC13 tampered payload", reason: reason.BadSignature, class: ErrSignature,
			build: func(t *testing.T, w *world) rxInput {
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(tamperPayload(t, w.offer(rxPlanner, rxReceiver, nil)))}
			}},
		{name: "HC13 tampered signature", reason: reason.BadSignature, class: ErrSignature,
			build: func(t *testing.T, w *world) rxInput {
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(tamperSignature(t, w.offer(rxPlanner, rxReceiver, nil)))}
			}},
		{name: "HC13 status presented as an offer", reason: reason.BadSignature, class: ErrMalformed,
			build: func(t *testing.T, w *world) rxInput {
				o := w.draftOffer(rxPlanner, rxReceiver)
				st, err := w.signers[rxPlanner].SignStatus(&Status{Hop: o.Hop, Offer: digest.SHA256([]byte("an offer")),
					Iss: rxPlanner, Aud: rxReceiver, Iat: o.Iat, State: state.Accepted})
				require.NoError(t, err)
				return rxInput{agent: w.agent(rxReceiver), h: &Handoff{Offer: st}}
			}},
		{name: "HC19 element under the other form's label", reason: reason.BadSignature,
			build: func(t *testing.T, w *world) rxInput {
				s := w.offer(rxPlanner, rxReceiver, nil)
				b64 := base64.RawURLEncoding.EncodeToString(s.Octets)
				return rxInput{agent: w.agent(rxReceiver), raw: func(enc Encoding) []byte {
					var v any
					switch {
					case s.Format == JWS && enc == JSON:
						v = b64 // base64url text is COSE in a JSON chain
					case s.Format == JWS && enc == CBOR:
						v = s.Octets // a byte string is COSE in a CBOR chain
					case s.Format == COSE && enc == JSON:
						v = b64 + "." + b64 + "." + b64 // JWS-shaped text holding COSE octets
					default:
						v = b64 // text is a JWS in a CBOR chain
					}
					return rawHandoff(t, map[string]any{"offer": v}, enc)
				}}
			}},
		{name: "HC13 empty signed element", reason: reason.BadSignature, class: ErrMalformed,
			build: func(t *testing.T, w *world) rxInput {
				return rxInput{agent: w.agent(rxReceiver), raw: func(enc Encoding) []byte {
					return rawHandoff(t, map[string]any{"offer": ""}, enc)
				}}
			}},

		// Step 1: untrusted-key.
		{name: "HC21 iss unknown to the receiver", reason: reason.UntrustedKey, class: ErrUntrustedKey,
			build: func(t *testing.T, w *world) rxInput {
				a := w.agent(rxReceiver, func(c *Config) { c.Trust = w.trustOnly(rxReceiver, rxPlanner) })
				return rxInput{agent: a, h: handoffOf(w.offer(rxOther, rxReceiver, nil))}
			}},
		{name: "HC21 kid names another agent's key", reason: reason.UntrustedKey, class: ErrUntrustedKey,
			build: func(t *testing.T, w *world) rxInput {
				// Signed by rxOther's key, which the receiver trusts, but
				// in the name of rxPlanner.
				o := w.draftOffer(rxPlanner, rxReceiver)
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(w.signAs(rxOther, o))}
			}},
		{name: "HC21 no trust for anyone but the receiver", reason: reason.UntrustedKey, class: ErrUntrustedKey,
			build: func(t *testing.T, w *world) rxInput {
				a := w.agent(rxReceiver, func(c *Config) { c.Trust = w.trustOnly(rxReceiver) })
				return rxInput{agent: a, h: handoffOf(w.offer(rxPlanner, rxReceiver, nil))}
			}},

		// Step 2: wrong-audience.
		{name: "aud is another agent", reason: reason.WrongAudience, class: ErrRejected,
			build: func(t *testing.T, w *world) rxInput {
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(w.offer(rxPlanner, rxOther, nil))}
			}},

		// Step 3: stale (HC-31, HC-32).
		{name: "HC31 exp equals iat", reason: reason.Stale, class: ErrRejected,
			build: withOffer(func(_ *world, o *Offer) { o.Exp = o.Iat })},
		{name: "HC31 exp before iat", reason: reason.Stale, class: ErrRejected,
			build: withOffer(func(_ *world, o *Offer) { o.Exp = o.Iat - 1 })},
		{name: "HC31 iat in the future beyond the skew", reason: reason.Stale, class: ErrRejected,
			build: withOffer(func(_ *world, o *Offer) { o.Iat += 61; o.Exp = o.Iat + 60 })},
		{name: "HC31 iat in the future within the skew",
			build: withOffer(func(_ *world, o *Offer) { o.Iat += 60; o.Exp = o.Iat + 60 })},
		{name: "HC32 lifetime over the maximum", reason: reason.Stale, class: ErrRejected,
			build: withOffer(func(_ *world, o *Offer) { o.Exp = o.Iat + 301 })},
		{name: "HC32 lifetime of 292 years, past what a Duration holds", reason: reason.Stale, class: ErrRejected,
			build: withOffer(func(_ *world, o *Offer) { o.Exp = o.Iat + (1<<63)/Time(time.Second) + 1 })},
		{name: "HC32 exp at the largest Time", reason: reason.Stale, class: ErrRejected,
			build: withOffer(func(_ *world, o *Offer) { o.Exp = Time(math.MaxUint64) })},
		{name: "HC32 lifetime at the maximum",
			build: withOffer(func(_ *world, o *Offer) { o.Exp = o.Iat + 300 })},
		{name: "HC32 lifetime over a configured maximum", reason: reason.Stale, class: ErrRejected,
			build: func(t *testing.T, w *world) rxInput {
				a := w.agent(rxReceiver, func(c *Config) { c.MaxLifetime = new(30 * time.Second) })
				return rxInput{agent: a, h: handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Exp = o.Iat + 31 }))}
			}},
		{name: "HC31 expired", reason: reason.Stale, class: ErrRejected,
			build: func(t *testing.T, w *world) rxInput {
				s := w.offer(rxPlanner, rxReceiver, nil)
				w.clock.Add(120 * time.Second) // now == exp
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(s)}
			}},
		{name: "HC31 one second before exp",
			build: func(t *testing.T, w *world) rxInput {
				s := w.offer(rxPlanner, rxReceiver, nil)
				w.clock.Add(119 * time.Second)
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(s)}
			}},

		// Step 5: the dialog (policy).
		{name: "HC36 dialog differs from the host's", reason: reason.Policy, class: ErrRejected,
			build: func(t *testing.T, w *world) rxInput {
				in := plain(rxPlanner)(t, w)
				in.host.Dialog = "ctx-2"
				return in
			}},
		{name: "HC36 dialog equals the host's",
			build: func(t *testing.T, w *world) rxInput {
				in := plain(rxPlanner)(t, w)
				in.host.Dialog = "ctx-1"
				return in
			}},
	})
}

// HC-60: a COSE element whose content type is the JWS media type (a
// hand-made element) is refused: the label, not just the signature, is checked.
func TestReceive_HC60_COSEContentTypeOfJWS(t *testing.T) {
	for _, enc := range []Encoding{JSON, CBOR} {
		t.Run(enc.String(), func(t *testing.T) {
			w := newWorld(t, COSE, rxAgents...)
			s := w.signers[rxPlanner]
			payload, err := w.draftOffer(rxPlanner, rxReceiver).encode(CBOR)
			require.NoError(t, err)
			signer, err := gocose.NewSigner(gocose.AlgorithmES256, s.key)
			require.NoError(t, err)
			msg := gocose.Sign1Message{
				Headers: gocose.Headers{Protected: gocose.ProtectedHeader{
					gocose.HeaderLabelAlgorithm:   gocose.AlgorithmES256,
					gocose.HeaderLabelContentType: "application/" + jws.Type,
					gocose.HeaderLabelKeyID:       []byte(s.kid),
				}},
				Payload: payload,
			}
			require.NoError(t, msg.Sign(crand.Reader, nil, signer))
			b, err := msg.MarshalCBOR()
			require.NoError(t, err)

			in := receive(t, w.agent(rxReceiver), encodeHandoff(t, handoffOf(Signed{Format: COSE, Octets: b}), enc), Host{})
			assertReceived(t, in, reason.BadSignature, ErrSignature)
			assert.ErrorIs(t, in.Err(), cose.ErrType)
			assert.False(t, in.StatusDue(), "no status answers an offer whose signer is unknown")
		})
	}
}

// An element opened under the other form's label never verifies.
func TestReceive_HC19_OpenUnderTheOtherLabel(t *testing.T) {
	for _, f := range []Format{JWS, COSE} {
		w := newWorld(t, f, rxAgents...)
		s := w.offer(rxPlanner, rxReceiver, nil)
		other := JWS
		if f == JWS {
			other = COSE
		}
		_, err := OpenOffer(Signed{Format: other, Octets: s.Octets}, w.trust, Limits{})
		assert.Equal(t, reason.BadSignature, ReasonOf(err), f.String())
		_, err = OpenOffer(s, w.trust, Limits{})
		assert.NoError(t, err, f.String())
	}
}

// HC-35, HC-38: the same octets twice: the second is a retransmission and
// is not processed again, even when its Handoff object is encoded
// differently or the host's view changed.
func TestReceive_HC35_Retransmission(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		var flagged []Conflict
		a := w.agent(rxReceiver, func(c *Config) {
			c.OnConflict = func(x Conflict) { flagged = append(flagged, x) }
			c.Refs = ref.CheckRequired // every ref would be unverifiable if checked again
		})
		elems := w.path(func(i int, o *Offer) {
			if i == 1 {
				o.Refs = []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("prior context"))}}
			}
		}, rxPlanner, rxCoder, rxReceiver)
		h := handoffOf(elems...)
		first := receive(t, a, encodeHandoff(t, h, fe.Encoding), Host{Dialog: "ctx-1"})
		require.Equal(t, reason.UnverifiableRef, first.Reason(), "the first reception runs every check")

		other := CBOR
		if fe.Encoding == CBOR {
			other = JSON
		}
		again := receive(t, a, encodeHandoff(t, h, other), Host{Dialog: "another dialog"})
		assert.True(t, again.Retransmission())
		assert.False(t, again.Accepted())
		assert.Empty(t, again.Reason(), "not processed again: no dialog, chain or ref check ran")
		assert.NoError(t, again.Err())
		assert.Empty(t, again.Chain())
		assert.Empty(t, again.Links())
		assert.Equal(t, ref.NotChecked, again.Refs()[0].Outcome)
		assert.Equal(t, first.Digest(), again.Digest())
		assert.Equal(t, first.Digest(), again.First())
		assert.Empty(t, again.Equivocation())
		assert.False(t, again.StatusDue(), "answered by LastStatus or OwesAccepted, not a new status")
		assert.False(t, again.OwesAccepted(), "undecided: nothing to send yet (HC-39)")
		_, ok := again.LastStatus()
		assert.False(t, ok)
		assert.Empty(t, flagged, "a retransmission is not a conflict")
	})
}

// Draft -01 step 3: a remembered (iss, hop) skips freshness, so a
// retransmission after exp is still answered; a hop only remembered is kept
// at least until exp plus the skew (HC-33), a hop answered for the
// retention period (HC-34).
func TestReceive_HC33_RetransmissionAfterExp(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		ctx := context.Background()
		w := newWorld(t, fe.Format, rxAgents...)
		a := w.agent(rxReceiver)

		// Only remembered: still a retransmission after exp, until exp + skew.
		s := w.offer(rxPlanner, rxReceiver, nil)
		data := encodeHandoff(t, handoffOf(s), fe.Encoding)
		require.True(t, receive(t, a, data, Host{}).Accepted())
		w.clock.Add(150 * time.Second) // exp + 30 s
		assert.True(t, receive(t, a, data, Host{}).Retransmission(), "after exp, within the skew")
		w.clock.Add(31 * time.Second) // exp + skew + 1 s
		late := receive(t, a, data, Host{})
		assert.Equal(t, reason.Stale, late.Reason(), "forgotten after exp + skew: checked afresh")

		// Answered: kept for the retention period, answered long after exp.
		s2 := w.offer(rxPlanner, rxReceiver, nil)
		data2 := encodeHandoff(t, handoffOf(s2), fe.Encoding)
		in := receive(t, a, data2, Host{})
		require.True(t, in.Accepted())
		st, err := a.Reply(ctx, in, state.Accepted, ReplyOptions{})
		require.NoError(t, err)
		w.clock.Add(10 * time.Hour)
		again := receive(t, a, data2, Host{Peer: rxPlanner})
		require.True(t, again.Retransmission())
		last, ok := again.LastStatus()
		require.True(t, ok)
		assert.Equal(t, st.Octets, last.Octets)
	})
}

// HC-39: the last status is resent as the identical octets, and only to a
// party the host authenticated as the offer's iss; with none sent but the
// work taken, "accepted" is owed.
func TestReceive_HC39_LastStatusAndOwesAccepted(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		ctx := context.Background()
		w := newWorld(t, fe.Format, rxAgents...)
		a := w.agent(rxReceiver)
		data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), fe.Encoding)
		in := receive(t, a, data, Host{Peer: rxPlanner})
		require.True(t, in.Accepted())
		_, ok := in.LastStatus()
		assert.False(t, ok, "not a retransmission")
		assert.False(t, in.OwesAccepted())

		// Taken, nothing sent: "accepted" is owed.
		require.NoError(t, a.Take(ctx, in))
		again := receive(t, a, data, Host{Peer: rxPlanner})
		require.True(t, again.Retransmission())
		assert.True(t, again.OwesAccepted())
		_, ok = again.LastStatus()
		assert.False(t, ok, "nothing sent yet")
		acc, err := a.Reply(ctx, again, state.Accepted, ReplyOptions{})
		require.NoError(t, err, "the owed accepted is sent in answer to the retransmission")

		// Sent: the identical octets, to the offer's iss only.
		for _, c := range []struct {
			name string
			peer AgentID
			ok   bool
		}{
			{"peer is the offer's iss", rxPlanner, true},
			{"peer not authenticated", "", false},
			{"peer is another agent", rxOther, false},
			{"peer is the receiver itself", rxReceiver, false},
		} {
			r := receive(t, a, data, Host{Peer: c.peer})
			require.True(t, r.Retransmission(), c.name)
			assert.False(t, r.OwesAccepted(), c.name)
			last, ok := r.LastStatus()
			assert.Equal(t, c.ok, ok, c.name)
			if c.ok {
				assert.Equal(t, acc.Octets, last.Octets, c.name)
				assert.Equal(t, acc.Format, last.Format, c.name)
			} else {
				assert.True(t, len(last.Octets) == 0, c.name)
			}
		}

		// A later terminal status becomes the last status.
		done, err := a.Reply(ctx, again, state.Completed, ReplyOptions{Effect: state.EffectFull})
		require.NoError(t, err)
		r := receive(t, a, data, Host{Peer: rxPlanner})
		last, ok := r.LastStatus()
		require.True(t, ok)
		assert.Equal(t, done.Octets, last.Octets)
		assert.NotEqual(t, acc.Octets, last.Octets)
	})
}

// HC-39: a JWS status larger than the default element bound (its payload
// within the bound, its base64url form not), signed and sent by an agent
// whose peers raised the bound, is resent as it was sent.
func TestReceive_HC39_LargeLastStatus(t *testing.T) {
	for _, f := range []Format{JWS} {
		t.Run(f.String(), func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, f, rxAgents...)
			a := w.agent(rxReceiver, func(c *Config) { c.Limits.MaxElementSize = 64 << 10 })
			data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON)
			in := receive(t, a, data, Host{})
			require.True(t, in.Accepted())
			var refs []ref.Ref
			for i := range 120 {
				refs = append(refs, ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte{byte(i)}),
					Loc: fmt.Sprintf("https://r.example/effects/%03d", i)})
			}
			st, err := a.Reply(ctx, in, state.Failed, ReplyOptions{Effect: state.EffectPartial, Refs: refs})
			require.NoError(t, err)
			require.Greater(t, len(st.Octets), defaultMaxElementSize)

			again := receive(t, a, data, Host{Peer: rxPlanner})
			require.True(t, again.Retransmission())
			last, ok := again.LastStatus()
			require.True(t, ok)
			assert.Equal(t, st, last)
		})
	}
}

// HC-30: the checks run in order and the first failure is reported.
func TestReceive_HC30_OrderOfChecks(t *testing.T) {
	badRef := func(o *Offer) {
		o.Refs = []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("expected")), Loc: "https://r.example/ctx/1"}}
	}
	refAgent := func(w *world, mod ...func(*Config)) *Agent {
		return w.agent(rxReceiver, append([]func(*Config){func(c *Config) {
			c.Refs = ref.CheckRequired
			c.RefSource = ref.ByLoc(map[string]ref.Object{"https://r.example/ctx/1": {Octets: []byte("other")}})
		}}, mod...)...)
	}
	runRxCases(t, []rxCase{
		{name: "bad signature and wrong audience", reason: reason.BadSignature,
			build: func(t *testing.T, w *world) rxInput {
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(tamperSignature(t, w.offer(rxPlanner, rxOther, nil)))}
			}},
		{name: "untrusted key and wrong audience", reason: reason.UntrustedKey,
			build: func(t *testing.T, w *world) rxInput {
				a := w.agent(rxReceiver, func(c *Config) { c.Trust = w.trustOnly(rxReceiver) })
				return rxInput{agent: a, h: handoffOf(w.offer(rxPlanner, rxOther, nil))}
			}},
		{name: "untrusted key and stale", reason: reason.UntrustedKey,
			build: func(t *testing.T, w *world) rxInput {
				a := w.agent(rxReceiver, func(c *Config) { c.Trust = w.trustOnly(rxReceiver) })
				return rxInput{agent: a, h: handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Exp = o.Iat }))}
			}},
		{name: "wrong audience and stale", reason: reason.WrongAudience,
			build: func(t *testing.T, w *world) rxInput {
				s := w.offer(rxPlanner, rxOther, nil)
				w.clock.Add(time.Hour)
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(s)}
			}},
		{name: "wrong audience and replay", reason: reason.WrongAudience,
			build: func(t *testing.T, w *world) rxInput {
				s := w.offer(rxPlanner, rxOther, nil)
				lost := w.clock.Now().Add(time.Second)
				return rxInput{agent: w.agent(rxReceiver, func(c *Config) { c.MemoryLostAt = lost }), h: handoffOf(s)}
			}},
		{name: "stale and bad dialog", reason: reason.Stale,
			build: func(t *testing.T, w *world) rxInput {
				s := w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Exp = o.Iat + 301 })
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(s), host: Host{Dialog: "ctx-2"}}
			}},
		{name: "stale and broken chain", reason: reason.Stale,
			build: func(t *testing.T, w *world) rxInput {
				e := w.path(nil, rxPlanner, rxCoder, rxReceiver)
				w.clock.Add(time.Hour)
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(e[1], e[0], e[1])}
			}},
		{name: "replay and bad dialog", reason: reason.Replay,
			build: func(t *testing.T, w *world) rxInput {
				s := w.offer(rxPlanner, rxReceiver, nil)
				lost := w.clock.Now().Add(time.Second)
				a := w.agent(rxReceiver, func(c *Config) { c.MemoryLostAt = lost })
				return rxInput{agent: a, h: handoffOf(s), host: Host{Dialog: "ctx-2"}}
			}},
		{name: "bad dialog and broken chain", reason: reason.Policy,
			build: func(t *testing.T, w *world) rxInput {
				e := w.path(nil, rxPlanner, rxCoder, rxReceiver)
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(e[1], e[1]), host: Host{Dialog: "ctx-2"}}
			}},
		{name: "bad dialog and bad ref", reason: reason.Policy,
			build: func(t *testing.T, w *world) rxInput {
				s := w.offer(rxPlanner, rxReceiver, badRef)
				return rxInput{agent: refAgent(w), h: handoffOf(s), host: Host{Dialog: "ctx-2"}}
			}},
		{name: "broken chain and bad ref", reason: reason.BrokenChain,
			build: func(t *testing.T, w *world) rxInput {
				e := w.path(func(i int, o *Offer) {
					if i == 1 {
						badRef(o)
						o.Prev = &digest.Digest{Alg: digest.SHA256Alg, Val: make([]byte, 32)}
					}
				}, rxPlanner, rxCoder, rxReceiver)
				return rxInput{agent: refAgent(w), h: handoffOf(e...)}
			}},
		{name: "cycle and bad ref", reason: reason.Cycle,
			build: func(t *testing.T, w *world) rxInput {
				e := w.path(func(i int, o *Offer) {
					if i == 2 {
						badRef(o)
					}
				}, rxPlanner, rxCoder, rxPlanner, rxReceiver)
				return rxInput{agent: refAgent(w), h: handoffOf(e...)}
			}},
		{name: "chain policy and bad ref", reason: reason.Policy,
			build: func(t *testing.T, w *world) rxInput {
				e := w.path(func(i int, o *Offer) {
					if i == 1 {
						badRef(o)
					}
				}, rxPlanner, rxCoder, rxReceiver)
				a := refAgent(w, func(c *Config) { c.Chain.RequireFull = true })
				return rxInput{agent: a, h: handoffOf(e[1])} // chain absent
			}},
		{name: "bad ref alone", reason: reason.RefMismatch,
			build: func(t *testing.T, w *world) rxInput {
				return rxInput{agent: refAgent(w), h: handoffOf(w.offer(rxPlanner, rxReceiver, badRef))}
			}},
	})
}

// HC-30, HC-35: a remembered offer is a retransmission or an equivocation
// before the dialog is checked.
func TestReceive_HC30_MemoryBeforeDialog(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		a := w.agent(rxReceiver)
		o := w.draftOffer(rxPlanner, rxReceiver)
		first, second := w.signAs(rxPlanner, o), w.signAs(rxPlanner, o)
		require.True(t, receive(t, a, encodeHandoff(t, handoffOf(first), fe.Encoding), Host{Dialog: "ctx-1"}).Accepted())

		re := receive(t, a, encodeHandoff(t, handoffOf(first), fe.Encoding), Host{Dialog: "ctx-2"})
		assert.True(t, re.Retransmission())
		assert.Empty(t, re.Reason())
		eq := receive(t, a, encodeHandoff(t, handoffOf(second), fe.Encoding), Host{Dialog: "ctx-2"})
		assert.Equal(t, reason.Equivocation, eq.Reason())
	})
}

// HC-33: an offer that passed checks 1-3 is remembered even when step 5, 6
// or 7 rejects it: sent again, it is a retransmission, and the rejection
// sent for it is resent. An offer rejected at step 1, 2 or 3 is not
// remembered: sent again, it is checked again.
func TestReceive_HC33_RememberedAfterLaterRejection(t *testing.T) {
	type setup struct {
		name       string
		reason     reason.Code
		remembered bool
		build      func(t *testing.T, w *world) rxInput
	}
	mismatch := func(w *world, mod ...func(*Config)) *Agent {
		return w.agent(rxReceiver, append([]func(*Config){func(c *Config) {
			c.Refs = ref.CheckRequired
			c.RefSource = ref.ByLoc(map[string]ref.Object{"https://r.example/x": {Octets: []byte("not it")}})
		}}, mod...)...)
	}
	withRef := func(o *Offer) {
		o.Refs = []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("it")), Loc: "https://r.example/x"}}
	}
	cases := []setup{
		{"step 1 bad signature", reason.BadSignature, false, func(t *testing.T, w *world) rxInput {
			return rxInput{agent: w.agent(rxReceiver), h: handoffOf(tamperSignature(t, w.offer(rxPlanner, rxReceiver, nil)))}
		}},
		{"step 2 wrong audience", reason.WrongAudience, false, func(t *testing.T, w *world) rxInput {
			return rxInput{agent: w.agent(rxReceiver), h: handoffOf(w.offer(rxPlanner, rxOther, nil))}
		}},
		{"step 3 stale", reason.Stale, false, func(t *testing.T, w *world) rxInput {
			return rxInput{agent: w.agent(rxReceiver), h: handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Exp = o.Iat + 400 }))}
		}},
		{"step 5 dialog", reason.Policy, true, func(t *testing.T, w *world) rxInput {
			return rxInput{agent: w.agent(rxReceiver), h: handoffOf(w.offer(rxPlanner, rxReceiver, nil)), host: Host{Dialog: "ctx-2"}}
		}},
		{"step 6 broken chain", reason.BrokenChain, true, func(t *testing.T, w *world) rxInput {
			e := w.path(nil, rxPlanner, rxCoder, rxTester, rxReceiver)
			return rxInput{agent: w.agent(rxReceiver), h: handoffOf(e[0], e[2])}
		}},
		{"step 6 chain policy", reason.Policy, true, func(t *testing.T, w *world) rxInput {
			e := w.path(nil, rxPlanner, rxCoder, rxReceiver)
			a := w.agent(rxReceiver, func(c *Config) { c.Chain.RequireFull = true })
			return rxInput{agent: a, h: handoffOf(e[1])}
		}},
		{"step 7 ref mismatch", reason.RefMismatch, true, func(t *testing.T, w *world) rxInput {
			return rxInput{agent: mismatch(w), h: handoffOf(w.offer(rxPlanner, rxReceiver, withRef))}
		}},
	}
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				w := newWorld(t, fe.Format, rxAgents...)
				in := c.build(t, w)
				data := encodeHandoff(t, in.h, fe.Encoding)
				first := receive(t, in.agent, data, in.host)
				require.Equal(t, c.reason, first.Reason(), first.Detail())
				assert.Equal(t, c.reason != reason.BadSignature, first.StatusDue(), "HC-30: a rejection is answered unless the signer is unknown")

				var rejected Signed
				if first.StatusDue() {
					var err error
					rejected, err = in.agent.Reply(ctx, first, state.Rejected, ReplyOptions{Reason: c.reason})
					require.NoError(t, err, "the rejection may be sent")
				}
				again := receive(t, in.agent, data, Host{Peer: first.Unverified().Iss, Dialog: in.host.Dialog})
				if !c.remembered {
					assert.False(t, again.Retransmission())
					assert.Equal(t, c.reason, again.Reason(), "not remembered: checked again")
					return
				}
				assert.True(t, again.Retransmission())
				assert.Empty(t, again.Reason())
				last, ok := again.LastStatus()
				require.True(t, ok)
				assert.Equal(t, rejected.Octets, last.Octets, "HC-39: the rejection is resent as the identical octets")
			})
		}
	})
}

// HC-53, HC-54: the second of two offers with one (iss, hop) and different
// octets is never accepted and gets no status; what may be sent for the
// first depends on what the receiver recorded for it.
func TestReceive_HC53_Equivocation(t *testing.T) {
	type step func(t *testing.T, w *world, a *Agent, first *Received)
	none := step(func(*testing.T, *world, *Agent, *Received) {})
	ctx := context.Background()
	cases := []struct {
		name   string
		host   Host // for the first offer
		record step
		answer state.Answer
		allow  state.State // a status the answer allows for the first offer
	}{
		{"neither taken nor answered", Host{}, none, state.AnswerRejectFirst, state.Rejected},
		{"first rejected by a check, not answered", Host{Dialog: "ctx-2"}, none, state.AnswerRejectFirst, state.Rejected},
		{"taken", Host{}, func(t *testing.T, w *world, a *Agent, in *Received) {
			require.NoError(t, a.Take(ctx, in))
		}, state.AnswerFinishFirst, state.Completed},
		{"accepted sent", Host{}, func(t *testing.T, w *world, a *Agent, in *Received) {
			_, err := a.Reply(ctx, in, state.Accepted, ReplyOptions{})
			require.NoError(t, err)
		}, state.AnswerFinishFirst, state.Failed},
		{"completed sent", Host{}, func(t *testing.T, w *world, a *Agent, in *Received) {
			_, err := a.Reply(ctx, in, state.Completed, ReplyOptions{Effect: state.EffectFull})
			require.NoError(t, err)
		}, state.AnswerNone, ""},
		{"failed sent", Host{}, func(t *testing.T, w *world, a *Agent, in *Received) {
			_, err := a.Reply(ctx, in, state.Failed, ReplyOptions{Effect: state.EffectNone})
			require.NoError(t, err)
		}, state.AnswerNone, ""},
		{"canceled by the delegator after accepted", Host{}, func(t *testing.T, w *world, a *Agent, in *Received) {
			_, err := a.Reply(ctx, in, state.Accepted, ReplyOptions{})
			require.NoError(t, err)
			cancelAtDelegate(t, w, a, in)
		}, state.AnswerFinishFirst, state.Failed},
		{"canceled by the delegator before taken", Host{}, func(t *testing.T, w *world, a *Agent, in *Received) {
			cancelAtDelegate(t, w, a, in)
		}, state.AnswerFinishFirst, state.Failed},
		{"rejected sent", Host{Dialog: "ctx-2"}, func(t *testing.T, w *world, a *Agent, in *Received) {
			_, err := a.Reply(ctx, in, state.Rejected, ReplyOptions{Reason: reason.Policy})
			require.NoError(t, err)
		}, state.AnswerNone, ""},
	}
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				w := newWorld(t, fe.Format, rxAgents...)
				var flagged []Conflict
				a := w.agent(rxReceiver, func(cfg *Config) { cfg.OnConflict = func(x Conflict) { flagged = append(flagged, x) } })
				o := w.draftOffer(rxPlanner, rxReceiver)
				s1, s2 := w.signAs(rxPlanner, o), w.signAs(rxPlanner, o)
				require.NotEqual(t, s1.Octets, s2.Octets, "a hop signed twice gives different octets")

				first := receive(t, a, encodeHandoff(t, handoffOf(s1), fe.Encoding), c.host)
				c.record(t, w, a, first)
				second := receive(t, a, encodeHandoff(t, handoffOf(s2), fe.Encoding), Host{Peer: rxPlanner})

				assert.False(t, second.Accepted())
				assert.False(t, second.Retransmission())
				assert.Equal(t, reason.Equivocation, second.Reason())
				assert.Equal(t, c.answer, second.Equivocation())
				assert.ErrorIs(t, second.Err(), ErrRejected)
				assert.Equal(t, reason.Equivocation, ReasonOf(second.Err()))
				assert.False(t, second.StatusDue(), "HC-53: no status for the second offer")
				_, ok := second.LastStatus()
				assert.False(t, ok, "HC-53: not even a resent one")
				assert.Equal(t, s1.Digest(), second.First())
				assert.Equal(t, s2.Digest(), second.Digest())

				require.Len(t, flagged, 1, "HC-54: flagged to the operator")
				assert.Equal(t, ConflictEquivocation, flagged[0].Kind)
				assert.Equal(t, s1.Digest(), flagged[0].First)
				assert.Equal(t, s2.Digest(), flagged[0].Second)

				// Accepting the second is never allowed (HC-53).
				_, err := a.Reply(ctx, second, state.Accepted, ReplyOptions{})
				assert.ErrorIs(t, err, ErrState)
				// What the answer allows goes to the first offer.
				var st Signed
				switch c.allow {
				case state.Rejected:
					st, err = a.Reply(ctx, second, state.Rejected, ReplyOptions{Reason: reason.Equivocation})
				case state.Completed:
					st, err = a.Reply(ctx, second, state.Completed, ReplyOptions{Effect: state.EffectFull})
				case state.Failed:
					st, err = a.Reply(ctx, second, state.Failed, ReplyOptions{Reason: reason.Equivocation, Effect: state.EffectNone})
				default:
					_, err = a.Reply(ctx, second, state.Rejected, ReplyOptions{Reason: reason.Equivocation})
					assert.ErrorIs(t, err, ErrState, "HC-54: no further status")
					_, err = a.Reply(ctx, second, state.Failed, ReplyOptions{Reason: reason.Equivocation, Effect: state.EffectNone})
					assert.ErrorIs(t, err, ErrState, "HC-54: no further status")
					return
				}
				require.NoError(t, err)
				sent, err := OpenStatus(st, w.trust, Limits{})
				require.NoError(t, err)
				assert.Equal(t, s1.Digest(), sent.Offer, "HC-54: status.offer names the first offer")

				// The first offer sent again is still a retransmission.
				re := receive(t, a, encodeHandoff(t, handoffOf(s1), fe.Encoding), Host{})
				assert.True(t, re.Retransmission())
			})
		}
	})
}

// cancelAtDelegate has the offer's delegator cancel the hop at the delegate
// a, with a verified "canceled" status.
func cancelAtDelegate(t *testing.T, w *world, a *Agent, in *Received) {
	t.Helper()
	o := in.Offer()
	st := &Status{Hop: o.Hop, Offer: in.Digest(), Iss: o.Iss, Aud: o.Aud, Iat: TimeOf(w.clock.Now()), State: state.Canceled}
	s, err := w.signers[o.Iss].SignStatus(st)
	require.NoError(t, err)
	res, err := statusErr(a.HandleStatus(context.Background(), s.Octets))
	require.NoError(t, err)
	require.Equal(t, state.Canceled, res.State)
}

// HC-35: the memory is keyed on (iss, hop): one hop identifier used by two
// delegators is two hops, and neither is a retransmission or equivocation
// of the other.
func TestReceive_HC35_KeyIsIssAndHop(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		a := w.agent(rxReceiver)
		o1 := w.draftOffer(rxPlanner, rxReceiver)
		o2 := w.draftOffer(rxCoder, rxReceiver)
		o2.Hop = o1.Hop
		for _, s := range []Signed{w.signAs(rxPlanner, o1), w.signAs(rxCoder, o2)} {
			in := receive(t, a, encodeHandoff(t, handoffOf(s), fe.Encoding), Host{})
			assertReceived(t, in, "", nil)
		}
	})
}

// HC-53: equivocation is detected after exp too (step 3 is skipped for a
// remembered pair), and two offers that differ only in the form of their
// signature are equivocation as well.
func TestReceive_HC53_EquivocationAfterExpAndSignatureTwin(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		ctx := context.Background()
		w := newWorld(t, fe.Format, rxAgents...)
		a := w.agent(rxReceiver)
		o := w.draftOffer(rxPlanner, rxReceiver)
		s1, s2 := w.signAs(rxPlanner, o), w.signAs(rxPlanner, o)
		first := receive(t, a, encodeHandoff(t, handoffOf(s1), fe.Encoding), Host{})
		require.True(t, first.Accepted())
		_, err := a.Reply(ctx, first, state.Accepted, ReplyOptions{})
		require.NoError(t, err)

		twin := signatureTwin(t, s1)
		require.NotEqual(t, s1.Octets, twin.Octets)
		in := receive(t, a, encodeHandoff(t, handoffOf(twin), fe.Encoding), Host{})
		assert.Equal(t, reason.Equivocation, in.Reason(), "the high-S twin verifies but is other octets")

		w.clock.Add(time.Hour) // long after exp
		in = receive(t, a, encodeHandoff(t, handoffOf(s2), fe.Encoding), Host{})
		assert.Equal(t, reason.Equivocation, in.Reason(), "after exp: equivocation, not stale")
		assert.Equal(t, state.AnswerFinishFirst, in.Equivocation())
	})
}

// HC-59: a receiver that lost its memory rejects offers issued before the
// loss with reason "replay" until the maximum lifetime plus the skew has
// passed; offers issued since are accepted, and hops its store still
// records are answered normally.
func TestReceive_HC59_ReplayAfterMemoryLoss(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		ctx := context.Background()
		w := newWorld(t, fe.Format, rxAgents...)
		enc := func(s Signed) []byte { return encodeHandoff(t, handoffOf(s), fe.Encoding) }

		// Before the restart, with a store that will survive it.
		store := replay.NewMemory(replay.MemoryOptions{Now: w.clock.Now})
		before := w.agent(rxReceiver, func(c *Config) { c.Store = store })
		o := w.draftOffer(rxPlanner, rxReceiver)
		kept := w.signAs(rxPlanner, o)
		keptTwin := w.signAs(rxPlanner, o)
		in := receive(t, before, enc(kept), Host{})
		require.True(t, in.Accepted())
		accepted, err := before.Reply(ctx, in, state.Accepted, ReplyOptions{})
		require.NoError(t, err)
		oldOffer := w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Exp = o.Iat + 200 })

		w.clock.Add(10 * time.Second)
		lost := w.clock.Now()
		restarted := func(store replay.Store) *Agent {
			return w.agent(rxReceiver, func(c *Config) { c.MemoryLostAt = lost; c.Store = store })
		}

		// Memory lost: an offer issued before the loss is refused.
		fresh := restarted(nil)
		r := receive(t, fresh, enc(oldOffer), Host{})
		assertReceived(t, r, reason.Replay, ErrRejected)
		assert.True(t, r.StatusDue(), "HC-24: a replay rejection may be sent; it sets no state")
		st, err := fresh.Reply(ctx, r, state.Rejected, ReplyOptions{Reason: reason.Replay})
		require.NoError(t, err)
		assert.NotEmpty(t, st.Octets)
		r = receive(t, fresh, enc(oldOffer), Host{})
		assert.Equal(t, reason.Replay, r.Reason(), "a replay rejection is not remembered")

		// Issued at or after the loss: accepted.
		assert.True(t, receive(t, fresh, enc(w.offer(rxPlanner, rxReceiver, nil)), Host{}).Accepted())

		// Still within MaxLifetime + Skew of the loss.
		w.clock.Add(100 * time.Second)
		assert.Equal(t, reason.Replay, receive(t, fresh, enc(oldOffer), Host{}).Reason())

		// Records the store kept are answered normally, not as replay.
		survivor := restarted(store)
		again := receive(t, survivor, enc(kept), Host{Peer: rxPlanner})
		assert.True(t, again.Retransmission())
		last, ok := again.LastStatus()
		require.True(t, ok)
		assert.Equal(t, accepted.Octets, last.Octets)
		eq := receive(t, survivor, enc(keptTwin), Host{})
		assert.Equal(t, reason.Equivocation, eq.Reason())
		assert.Equal(t, state.AnswerFinishFirst, eq.Equivocation())

		// After MaxLifetime + Skew the rule lapses: an old offer can only
		// be stale by then, and new offers are accepted.
		w.clock.Add(260 * time.Second) // lost + 360 s
		assert.Equal(t, reason.Stale, receive(t, fresh, enc(oldOffer), Host{}).Reason())
		assert.True(t, receive(t, fresh, enc(w.offer(rxPlanner, rxReceiver, nil)), Host{}).Accepted())
	})
}

// HC-59: the replay window outlasts every offer issued before the loss:
// such an offer is "replay" up to the last second it is fresh, then
// "stale". A custom MaxLifetime and Skew set the window.
func TestReceive_HC59_WindowCoversEveryOlderOffer(t *testing.T) {
	for _, f := range []Format{JWS, COSE} {
		t.Run(f.String(), func(t *testing.T) {
			w := newWorld(t, f, rxAgents...)
			lost := w.clock.Now()
			mod := func(c *Config) {
				c.MemoryLostAt, c.MaxLifetime, c.Skew = lost, new(30*time.Second), new(5*time.Second)
			}
			// Issued one second before the loss, for the longest lifetime.
			s := w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Iat--; o.Exp = o.Iat + 30 })
			data := encodeHandoff(t, handoffOf(s), JSON)
			assert.Equal(t, reason.Replay, receive(t, w.agent(rxReceiver, mod), data, Host{}).Reason())
			w.clock.Add(28 * time.Second) // exp - 1 s
			assert.Equal(t, reason.Replay, receive(t, w.agent(rxReceiver, mod), data, Host{}).Reason())
			w.clock.Add(time.Second) // exp
			assert.Equal(t, reason.Stale, receive(t, w.agent(rxReceiver, mod), data, Host{}).Reason())
			// Issued at the loss: accepted.
			in := receive(t, w.agent(rxReceiver, mod), encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) {
				o.Iat, o.Exp = TimeOf(lost), TimeOf(lost)+30
			})), JSON), Host{})
			assert.True(t, in.Accepted(), "%s %s", in.Reason(), in.Detail())
		})
	}
}

// HC-35, HC-38 under -race: 64 goroutines receive one offer at once;
// exactly one accepts it, every other sees a retransmission.
func TestReceive_HC35_ConcurrentSameOffer(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		a := w.agent(rxReceiver)
		data := encodeHandoff(t, handoffOf(w.path(nil, rxPlanner, rxCoder, rxReceiver)...), fe.Encoding)
		results := receiveConcurrently(t, 64, func(int) (*Agent, []byte) { return a, data })
		accepted, retrans := 0, 0
		for _, in := range results {
			switch {
			case in.Accepted():
				accepted++
				assert.Equal(t, ChainFull, in.Chain())
			case in.Retransmission():
				retrans++
				assert.Empty(t, in.Reason())
			default:
				t.Errorf("neither accepted nor retransmission: %q %s", in.Reason(), in.Detail())
			}
		}
		assert.Equal(t, 1, accepted)
		assert.Equal(t, 63, retrans)
	})
}

// HC-53 under -race: two offers for one (iss, hop), each received by 32 of
// 64 goroutines at once: exactly one is accepted, the other copies of it
// are retransmissions, and every copy of the other is equivocation.
func TestReceive_HC53_ConcurrentEquivocation(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		var mu sync.Mutex
		flagged := 0
		a := w.agent(rxReceiver, func(c *Config) {
			c.OnConflict = func(Conflict) { mu.Lock(); flagged++; mu.Unlock() }
		})
		o := w.draftOffer(rxPlanner, rxReceiver)
		s := []Signed{w.signAs(rxPlanner, o), w.signAs(rxPlanner, o)}
		data := [][]byte{encodeHandoff(t, handoffOf(s[0]), fe.Encoding), encodeHandoff(t, handoffOf(s[1]), fe.Encoding)}
		results := receiveConcurrently(t, 64, func(i int) (*Agent, []byte) { return a, data[i%2] })

		var winner *Received
		for _, in := range results {
			if in.Accepted() {
				require.Nil(t, winner, "at most one offer is accepted")
				winner = in
			}
		}
		require.NotNil(t, winner)
		eq := 0
		for _, in := range results {
			switch {
			case in == winner:
			case in.Digest().Equal(winner.Digest()):
				assert.True(t, in.Retransmission(), "a copy of the accepted offer")
			default:
				assert.Equal(t, reason.Equivocation, in.Reason(), "a copy of the other offer")
				assert.Equal(t, winner.Digest(), in.First())
				eq++
			}
		}
		assert.Equal(t, 32, eq)
		assert.Equal(t, 32, flagged)
	})
}

// receiveConcurrently starts n goroutines that wait at a barrier and then
// each call Receive once.
func receiveConcurrently(t *testing.T, n int, input func(i int) (*Agent, []byte)) []*Received {
	t.Helper()
	results := make([]*Received, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		a, data := input(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = a.Receive(context.Background(), data, Host{})
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.NotNil(t, results[i])
	}
	return results
}

// HC-61: a 10 MB input is refused by its size, before parsing.
func TestReceive_HC61_TenMegabytes(t *testing.T) {
	w := newWorld(t, JWS, rxAgents...)
	a := w.agent(rxReceiver)
	for name, data := range map[string][]byte{
		"json": append([]byte(`{"offer":"`), bytes.Repeat([]byte("A"), 10<<20)...),
		"cbor": append([]byte{0xa1, 0x65, 'o', 'f', 'f', 'e', 'r', 0x5a, 0x00, 0xa0, 0x00, 0x00}, make([]byte, 10<<20)...),
		"junk": bytes.Repeat([]byte{0xff}, 10<<20),
	} {
		t.Run(name, func(t *testing.T) {
			in := receive(t, a, data, Host{})
			assertReceived(t, in, reason.BadSignature, ErrTooLarge)
			assert.Nil(t, in.Handoff())
			assert.Nil(t, in.Offer())
			assert.False(t, in.StatusDue())
		})
	}
}

// HC-61: one element over the element size bound is refused even inside a
// Handoff object of acceptable size.
func TestReceive_HC61_ElementTooLarge(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		a := w.agent(rxReceiver, func(c *Config) { c.Limits.MaxElementSize = 256 })
		in := receive(t, a, encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), fe.Encoding), Host{})
		assertReceived(t, in, reason.BadSignature, ErrTooLarge)
	})
}

// HC-50, HC-61: a chain of 10,000 elements behind a valid offer is
// refused as too-deep, and no element is verified: each element is junk or
// a copy of an element with a broken signature, so verifying any of them
// would have reported bad-signature instead, as the one-element controls
// show.
func TestReceive_HC50_TenThousandElementChain(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		e := w.path(nil, rxPlanner, rxCoder, rxReceiver)
		junk := Signed{Format: JWS, Octets: []byte("a.b.c")}
		if fe.Format == COSE {
			junk = Signed{Format: COSE, Octets: []byte{0xd2}}
		}
		broken := tamperSignature(t, e[0])
		big := func(c *Config) { c.Limits.MaxHandoffSize = 32 << 20 }
		cases := []struct {
			name    string
			element Signed
			mod     func(*Config)
			reason  reason.Code // of the one-element control
		}{
			{"junk", junk, nil, reason.BadSignature},
			{"copies of a broken element", broken, big, reason.BadSignature},
			{"copies of a valid element", e[0], big, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var mods []func(*Config)
				if c.mod != nil {
					mods = append(mods, c.mod)
				}
				chain := make([]Signed, 10000)
				for i := range chain {
					chain[i] = c.element
				}
				h := &Handoff{Offer: e[1], Chain: chain}
				in := receive(t, w.agent(rxReceiver, mods...), encodeHandoff(t, h, fe.Encoding), Host{})
				assertReceived(t, in, reason.TooDeep, ErrRejected)
				assert.Empty(t, in.Links(), "no element was checked")

				control := receive(t, w.agent(rxReceiver, mods...), encodeHandoff(t, &Handoff{Offer: e[1], Chain: chain[:1]}, fe.Encoding), Host{})
				assert.Equal(t, c.reason, control.Reason(), control.Detail())
			})
		}
	})
}

// HC-61 bounds element size, not nesting. Nesting beyond what the decoders
// can hold (jsontext's 10000 levels, the CBOR library's 65535) is
// malformed, wherever it is; within that, an unknown member of the Handoff
// object is kept undecoded whatever its nesting, and a signed payload
// nested 200 deep under a trusted key is accepted by default and refused
// under the opt-in MaxDepth bound.
func TestReceive_HC61_DeepNesting(t *testing.T) {
	deepCBOR := func(prefix []byte, n int) []byte {
		b := append(bytes.Clone(prefix), bytes.Repeat([]byte{0x81}, n)...)
		return append(b, 0x01)
	}
	offerKey := []byte{0xa1, 0x65, 'o', 'f', 'f', 'e', 'r'}
	for name, data := range map[string][]byte{
		"json past the decoder":     []byte(`{"offer":` + strings.Repeat("[", 100000) + "1" + strings.Repeat("]", 100000) + `}`),
		"cbor past the decoder":     deepCBOR(offerKey, 100000),
		"json offer that is nested": []byte(`{"offer":` + strings.Repeat("[", 16) + "1" + strings.Repeat("]", 16) + `}`),
		"cbor offer that is nested": deepCBOR(offerKey, 16),
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, JWS, rxAgents...)
			in := receive(t, w.agent(rxReceiver), data, Host{})
			assertReceived(t, in, reason.BadSignature, ErrMalformed)
		})
	}
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		t.Run("unknown member beside a valid offer", func(t *testing.T) {
			s := w.offer(rxPlanner, rxReceiver, nil)
			h := &Handoff{Offer: s, Extra: map[string]any{"x": nestedArray(5000)}}
			in := receive(t, w.agent(rxReceiver), encodeHandoff(t, h, fe.Encoding), Host{})
			assertReceived(t, in, "", nil)
		})
		t.Run("signed payload", func(t *testing.T) {
			o := w.draftOffer(rxPlanner, rxReceiver)
			o.Extra = map[string]any{"x": nestedArray(200)}
			s := w.signAs(rxPlanner, o)
			data := encodeHandoff(t, handoffOf(s), fe.Encoding)
			assertReceived(t, receive(t, w.agent(rxReceiver), data, Host{}), "", nil)
			bounded := w.agent(rxReceiver, func(c *Config) { c.Limits.MaxDepth = 16 })
			assertReceived(t, receive(t, bounded, data, Host{}), reason.BadSignature, ErrMalformed)
		})
	})
}

// HC-61: no input panics or makes Receive fail: random changes to valid
// Handoff objects (bit flips, truncations, insertions, deletions) come out
// as rejections, and anything accepted carries the original signed offer.
func TestReceive_HC61_MutationsNeverPanic(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		e := w.path(func(i int, o *Offer) {
			o.Refs = []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte{byte(i)}), Loc: "https://r.example/" + fmt.Sprint(i)}}
		}, rxPlanner, rxCoder, rxTester, rxReceiver)
		h := handoffOf(e...)
		orig := encodeHandoff(t, h, fe.Encoding)
		rng := rand.New(rand.NewPCG(uint64(fe.Format), uint64(fe.Encoding)))
		n := 300
		if testing.Short() {
			n = 50
		}
		for i := range n {
			data := mutate(rng, orig)
			a := w.agent(rxReceiver, func(c *Config) { c.Refs = ref.CheckAvailable })
			var in *Received
			var err error
			require.NotPanics(t, func() { in, err = a.Receive(context.Background(), data, Host{}) }, "mutation %d", i)
			require.NoError(t, err, "mutation %d", i)
			require.NotNil(t, in)
			if in.Accepted() {
				assert.Equal(t, h.Offer.Digest(), in.Digest(), "mutation %d accepted another offer", i)
			} else {
				assert.True(t, in.Reason().Defined(), "mutation %d: %q", i, in.Reason())
			}
			_, _ = in.LastStatus()
			_ = in.Detail()
		}
	})
}

func mutate(rng *rand.Rand, orig []byte) []byte {
	b := bytes.Clone(orig)
	for range 1 + rng.IntN(3) {
		if len(b) == 0 {
			return b
		}
		i := rng.IntN(len(b))
		switch rng.IntN(5) {
		case 0:
			b[i] ^= 1 << rng.IntN(8)
		case 1:
			b[i] = byte(rng.IntN(256))
		case 2:
			b = b[:i]
		case 3:
			b = append(b[:i:i], append([]byte{byte(rng.IntN(256))}, b[i:]...)...)
		default:
			b = append(b[:i:i], b[i+1:]...)
		}
	}
	return b
}

// A store that cannot answer refuses the offer: Receive returns an error
// wrapping ErrStore, never an acceptance.
func TestReceive_StoreFailureFailsClosed(t *testing.T) {
	w := newWorld(t, JWS, rxAgents...)
	for name, st := range map[string]replay.Store{"get": failingStore{failGet: true}, "remember": failingStore{}} {
		t.Run(name, func(t *testing.T) {
			a := w.agent(rxReceiver, func(c *Config) { c.Store = st })
			in, err := a.Receive(context.Background(), encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON), Host{})
			assert.ErrorIs(t, err, ErrStore)
			assert.ErrorIs(t, err, replay.ErrUnavailable)
			assert.Nil(t, in)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := w.agent(rxReceiver, func(c *Config) { c.Store = failingStore{err: context.Canceled} })
	_, err := a.Receive(ctx, encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON), Host{})
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrStore)
}

type failingStore struct {
	failGet bool
	err     error
}

func (f failingStore) fail() error {
	if f.err != nil {
		return f.err
	}
	return fmt.Errorf("%w: down", replay.ErrUnavailable)
}

func (f failingStore) Remember(context.Context, replay.Key, replay.Record) (replay.Record, bool, error) {
	return replay.Record{}, false, f.fail()
}

func (f failingStore) Get(context.Context, replay.Key) (replay.Record, bool, error) {
	if f.failGet || f.err != nil {
		return replay.Record{}, false, f.fail()
	}
	return replay.Record{}, false, nil
}

func (f failingStore) Update(context.Context, replay.Key, replay.Record) error { return f.fail() }
func (f failingStore) Close() error                                            { return nil }
func (f failingStore) Untaken(context.Context, time.Time) ([]replay.Untaken, error) {
	return nil, f.fail()
}
func (f failingStore) Release(context.Context, replay.Key, []byte) error { return f.fail() }

// forgetfulStore remembers nothing, so that a benchmark can receive one
// offer again and again through every check.
type forgetfulStore struct{}

func (forgetfulStore) Remember(_ context.Context, _ replay.Key, rec replay.Record) (replay.Record, bool, error) {
	return rec, true, nil
}

func (forgetfulStore) Get(context.Context, replay.Key) (replay.Record, bool, error) {
	return replay.Record{}, false, nil
}

func (forgetfulStore) Update(context.Context, replay.Key, replay.Record) error {
	return replay.ErrNotFound
}

func (forgetfulStore) Close() error { return nil }

func (forgetfulStore) Untaken(context.Context, time.Time) ([]replay.Untaken, error) { return nil, nil }

func (forgetfulStore) Release(context.Context, replay.Key, []byte) error { return replay.ErrNotFound }

// benchValid returns an agent that forgets every hop and a valid Handoff
// with a chain of three elements, in the given cell.
func benchValid(b *testing.B, fe formatEncoding) (*Agent, []byte) {
	b.Helper()
	w := newWorld(b, fe.Format, rxAgents...)
	a := w.agent(rxReceiver, func(c *Config) { c.Store = forgetfulStore{} })
	data := encodeHandoff(b, handoffOf(w.path(nil, rxOrigin, rxPlanner, rxCoder, rxTester, rxReceiver)...), fe.Encoding)
	in := receive(b, a, data, Host{})
	require.True(b, in.Accepted(), in.Detail())
	require.Len(b, in.Links(), 3)
	return a, data
}

// BenchmarkReceive: a valid offer with a chain of three elements, four
// signatures verified per operation.
func BenchmarkReceive(b *testing.B) {
	for _, fe := range allFormatEncodings {
		b.Run(fe.String(), func(b *testing.B) {
			a, data := benchValid(b, fe)
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := a.Receive(ctx, data, Host{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// validBaseline measures, in the same run, the time of one valid receive.
func validBaseline(b *testing.B) float64 {
	b.Helper()
	a, data := benchValid(b, formatEncoding{JWS, JSON})
	ctx := context.Background()
	const n = 200
	for range n / 4 { // warm up
		if _, err := a.Receive(ctx, data, Host{}); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for range n {
		if _, err := a.Receive(ctx, data, Host{}); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Nanoseconds()) / n
}

// BenchmarkReceiveHostile10MB: a 10 MB input is refused by its size. The
// x-valid metric is its cost as a fraction of one valid receive measured
// in the same run.
func BenchmarkReceiveHostile10MB(b *testing.B) {
	base := validBaseline(b)
	w := newWorld(b, JWS, rxAgents...)
	a := w.agent(rxReceiver)
	data := append([]byte(`{"offer":"`), bytes.Repeat([]byte("A"), 10<<20)...)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		in, err := a.Receive(ctx, data, Host{})
		if err != nil || !errors.Is(in.Err(), ErrTooLarge) {
			b.Fatal(err, in.Err())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x-valid")
}

// BenchmarkReceiveHostileChain: a valid offer behind 10,000 junk chain
// elements is refused as too-deep without verifying any of them.
func BenchmarkReceiveHostileChain(b *testing.B) {
	base := validBaseline(b)
	w := newWorld(b, JWS, rxAgents...)
	a := w.agent(rxReceiver, func(c *Config) { c.Store = forgetfulStore{} })
	e := w.path(nil, rxPlanner, rxCoder, rxReceiver)
	chain := make([]Signed, 10000)
	for i := range chain {
		chain[i] = Signed{Format: JWS, Octets: []byte("a.b.c")}
	}
	data := encodeHandoff(b, &Handoff{Offer: e[1], Chain: chain}, JSON)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		in, err := a.Receive(ctx, data, Host{})
		if err != nil || in.Reason() != reason.TooDeep {
			b.Fatal(err, in.Reason())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x-valid")
}
