package handoff

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Messages that name the cause: each refusal says what to change, and
// says each thing once. The reason codes are the draft's and the
// vectors'; these tests hold only the words a person reads (HC-05: no
// program depends on them).

// saysOnce fails when msg repeats the package prefix or a word right
// after itself ("policy: policy ...").
func saysOnce(t *testing.T, msg string) {
	t.Helper()
	assert.Equal(t, 1, strings.Count(msg, "handoff:"), "the package is named once: %s", msg)
	words := strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == ':' || r == ';' || r == ',' })
	for i := 1; i < len(words); i++ {
		assert.NotEqual(t, words[i-1], words[i], "a word said twice in a row: %s", msg)
	}
}

// A signer whose key the trust configuration does not bind to its iss,
// under the alg the trust pins iss's key to: untrusted-key, and the
// message says the signing key is not one bound to iss (HC-21).
func TestMessage_WrongKeySameAlg(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxPlanner, rxCoder)
		s, err := testSigner(t, f).SignOffer(w.draftOffer(rxPlanner, rxCoder))
		require.NoError(t, err)
		_, err = OpenOffer(s, w.trust, Limits{})
		require.ErrorIs(t, err, ErrUntrustedKey)
		assert.Equal(t, reason.UntrustedKey, ReasonOf(err))
		msg := err.Error()
		assert.Contains(t, msg, `the signing key is not one the trust configuration binds to "`+string(rxPlanner)+`"`)
		assert.Contains(t, msg, "names none of the 1 key(s) bound to it")
		assert.Contains(t, msg, "HC-21")
		saysOnce(t, msg)
	})
}

// The same mistake when the trust configuration pins iss's key to another
// alg: the reason stays bad-signature (vector #040, HC-22), and the
// message names both causes, the alg pinned and the key not bound.
func TestMessage_WrongKeyOtherAlg(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxPlanner, rxCoder)
		k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		require.NoError(t, err)
		es384, err := NewSigner(k, f, nil)
		require.NoError(t, err)
		trust := w.trust.withKeys(t, rxPlanner, es384.Key())
		s := w.offer(rxPlanner, rxCoder, nil) // an ES256 key

		_, err = OpenOffer(s, trust, Limits{})
		require.ErrorIs(t, err, ErrSignature)
		assert.Equal(t, reason.BadSignature, ReasonOf(err))
		msg := err.Error()
		assert.Contains(t, msg, `the trust configuration pins the key(s) of "`+string(rxPlanner)+`" to ES384, but the element is signed with ES256 (HC-22)`)
		assert.Contains(t, msg, `the signing key is not one bound to "`+string(rxPlanner)+`" (HC-21)`)
		assert.NotContains(t, msg, "algorithm not accepted", "the cause, not the symptom")
		saysOnce(t, msg)
	})
}

// Vector #040's case: the kid names iss's key but the header says an alg
// the key is not pinned to. The message names the pin, and says nothing
// of a foreign key.
func TestMessage_AlgNotPinnedKidNamed(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	forged := withHeader(t, w.offer(rxPlanner, rxCoder, nil), "alg", "ES384")
	_, err := OpenOffer(forged, w.trust, Limits{})
	assert.Equal(t, reason.BadSignature, ReasonOf(err))
	msg := err.Error()
	assert.Contains(t, msg, `pins the key(s) of "`+string(rxPlanner)+`" to ES256, but the element is signed with ES384 (HC-22)`)
	assert.NotContains(t, msg, "not one bound", "the kid names iss's own key")
	saysOnce(t, msg)
}

// withHeader returns s, a JWS, with its protected header's member name
// set to v, the signature left as it was.
func withHeader(t *testing.T, s Signed, name string, v any) Signed {
	t.Helper()
	parts := strings.SplitN(string(s.Octets), ".", 3)
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	var hdr map[string]any
	require.NoError(t, json.Unmarshal(h, &hdr))
	hdr[name] = v
	h, err = json.Marshal(hdr)
	require.NoError(t, err)
	return Signed{Format: JWS, Octets: []byte(base64.RawURLEncoding.EncodeToString(h) + "." + parts[1] + "." + parts[2])}
}

// A status whose options contradict the state asked for is an argument
// error that names the ReplyOptions field to set, in every state of the
// hop, not a state error.
func TestMessage_ReplyOptionsNamed(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		state state.State
		opt   ReplyOptions
		want  []string
	}{
		{"completed without effect", state.Completed, ReplyOptions{},
			[]string{"ReplyOptions.Effect", "set Effect to EffectFull", "(HC-25)"}},
		{"completed with no effect", state.Completed, ReplyOptions{Effect: state.EffectNone},
			[]string{"ReplyOptions.Effect", "send \"failed\" with EffectNone or EffectPartial"}},
		{"rejected without reason", state.Rejected, ReplyOptions{},
			[]string{"ReplyOptions.Reason", `"rejected" needs a reason: set Reason`}},
		{"failed without effect", state.Failed, ReplyOptions{},
			[]string{"ReplyOptions.Effect", "set Effect to EffectNone or EffectPartial", "HC-45"}},
		{"failed with full effect", state.Failed, ReplyOptions{Effect: state.EffectFull},
			[]string{"ReplyOptions.Effect", `send "completed"`}},
		{"failed partly without refs", state.Failed, ReplyOptions{Effect: state.EffectPartial},
			[]string{"ReplyOptions.Refs", "(HC-44)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t)
			s, err := p.dte.Reply(ctx, p.in, c.state, c.opt)
			require.ErrorIs(t, err, ErrArgument)
			assert.NotErrorIs(t, err, ErrState)
			assert.True(t, len(s.Octets) == 0, "nothing is sent")
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			saysOnce(t, err.Error())
			// Nothing was recorded: the right options still go through.
			_, err = p.dte.Reply(ctx, p.in, state.Accepted, ReplyOptions{})
			require.NoError(t, err)
		})
	}
}

// Errors that carry another error of this package say the package once.
func TestMessage_NoStutter(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, JWS, rxOrigin, rxPlanner, rxCoder, rxReceiver)
	check := func(t *testing.T, err error, want string) {
		t.Helper()
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
		saysOnce(t, err.Error())
	}

	t.Run("policy", func(t *testing.T) {
		a := w.agent(rxCoder, requireFull)
		prev := digest.SHA256([]byte("an earlier offer, not carried"))
		in := receive(t, a, encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxCoder, func(o *Offer) { o.Prev = &prev })), JSON), Host{})
		require.Equal(t, reason.Policy, in.Reason())
		check(t, in.Err(), "handoff: rejected: policy: chain: ChainPolicy.RequireFull requires a full verified chain; this one is absent")
		var ce *chainError
		require.ErrorAs(t, in.Err(), &ce)
		check(t, ce, "handoff: chain: policy: ChainPolicy.RequireFull requires")
	})
	t.Run("trusted origins", func(t *testing.T) {
		a := w.agent(rxCoder, func(c *Config) { c.Chain.TrustedOrigins = []AgentID{rxOrigin} })
		in := receive(t, a, encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxCoder, nil)), JSON), Host{})
		require.Equal(t, reason.Policy, in.Reason())
		check(t, in.Err(), `handoff: rejected: policy: chain[0]: the chain's origin "`+string(rxPlanner)+`" is not one of ChainPolicy.TrustedOrigins`)
	})
	t.Run("payload of another type", func(t *testing.T) {
		st, err := w.signers[rxPlanner].SignStatus(&Status{Hop: "AAAAAAAAAAAAAAAAAAAAAA", Offer: digest.SHA256([]byte("x")),
			Iss: rxPlanner, Aud: rxCoder, Iat: TimeOf(w.clock.Now()), State: state.Accepted})
		require.NoError(t, err)
		_, err = OpenOffer(st, w.trust, Limits{})
		require.ErrorIs(t, err, ErrMalformed)
		check(t, err, `handoff: rejected: bad-signature: jws: key lookup: malformed input: type: "status", want "offer"`)
	})
	t.Run("wrong typ", func(t *testing.T) {
		_, err := OpenOffer(withHeader(t, w.offer(rxPlanner, rxCoder, nil), "typ", "JWT"), w.trust, Limits{})
		check(t, err, `handoff: rejected: bad-signature: jws: wrong typ: "JWT", want "agent-handoff+jwt"`)
	})
	t.Run("chain element not signed", func(t *testing.T) {
		a := w.agent(rxCoder)
		data := []byte(`{"offer":"` + string(w.offer(rxPlanner, rxCoder, nil).Octets) + `","chain":["!!"]}`)
		in := receive(t, a, data, Host{})
		require.Equal(t, reason.BadSignature, in.Reason())
		check(t, in.Err(), "handoff: rejected: bad-signature: chain[0]: malformed input: ")
		assert.Equal(t, 1, strings.Count(in.Err().Error(), "chain[0]"), in.Err().Error())
	})
	t.Run("chain not an array", func(t *testing.T) {
		a := w.agent(rxCoder)
		data := []byte(`{"offer":"` + string(w.offer(rxPlanner, rxCoder, nil).Octets) + `","chain":"x"}`)
		in := receive(t, a, data, Host{})
		require.Equal(t, reason.BadSignature, in.Reason())
		check(t, in.Err(), "handoff: rejected: bad-signature: chain: want an array of signed handoffs")
	})
	t.Run("status for an offer that does not decode", func(t *testing.T) {
		_, err := VerifyStatus(w.offer(rxPlanner, rxCoder, nil), Signed{Format: JWS, Octets: []byte("x")}, w.trust, Limits{})
		check(t, err, "handoff: rejected: policy: the offer does not decode: malformed input: ")
	})
	t.Run("reference unavailable", func(t *testing.T) {
		res := ref.Checkers(nil).Check(ctx, ref.Ref{Kind: ref.KindDigest, Loc: "urn:x", Dig: digest.SHA256([]byte("x"))}, ref.ByLoc(nil))
		assert.Equal(t, ref.Unverifiable, res.Outcome)
		assert.Equal(t, `referenced object unavailable: nothing supplied for loc "urn:x"`, res.Detail)
		_, rej := checkRefs(ctx, []ref.Ref{res.Ref}, ref.CheckRequired, nil, ref.ByLoc(nil))
		check(t, rej, `handoff: rejected: unverifiable-ref: refs[0]: referenced object unavailable`)
	})
	t.Run("trust with a bad key", func(t *testing.T) {
		_, err := NewTrust(map[AgentID][]TrustedKey{rxPlanner: {{Public: w.signers[rxPlanner].Key().Public, Alg: ES384}}})
		require.ErrorIs(t, err, ErrMalformed)
		check(t, err, "handoff: trust: "+string(rxPlanner)+": malformed input: ")
	})
	t.Run("class sentinels still match", func(t *testing.T) {
		err := unprefixed{malformed("x")}
		assert.True(t, errors.Is(err, ErrMalformed))
		assert.Equal(t, "malformed input: x", err.Error())
	})
}

// A chain refusal's detail says where in the chain and why, once: no
// package prefix and no reason code, which Reason already gives.
func TestMessage_ChainDetailOnce(t *testing.T) {
	w := newWorld(t, JWS, rxOrigin, rxPlanner, rxReceiver)
	elems := w.path(func(i int, o *Offer) {
		if i == 1 {
			o.Prev = &digest.Digest{Alg: digest.SHA256Alg, Val: digest.SHA256([]byte("not the element before")).Val}
		}
	}, rxOrigin, rxPlanner, rxReceiver)
	in := receive(t, w.agent(rxReceiver), encodeHandoff(t, handoffOf(elems...), JSON), Host{})
	require.Equal(t, reason.BrokenChain, in.Reason())
	assert.NotContains(t, in.Detail(), "handoff:")
	assert.NotContains(t, in.Detail(), string(reason.BrokenChain))
	assert.True(t, strings.HasPrefix(in.Detail(), "chain"), in.Detail())
}

// NewAgent and SetTrust refuse a trust configuration that does not bind
// the Signer's key to the agent's ID, naming the fields to set, unless
// Config.TrustLacksSigner says that is meant (issue 21, point 5).
func TestNewAgent_TrustBindsTheSigner(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxReceiver)
	other := testSigner(t, JWS)
	for name, c := range map[string]struct {
		cfg  Config
		want []string
	}{
		"another agent's key": {Config{ID: rxReceiver, Signer: w.signers[rxPlanner], Trust: w.trust},
			[]string{"Config.Trust binds 1 key(s) to Config.ID", "none of them Config.Signer's", "another agent's key"}},
		"a key the trust does not know": {Config{ID: rxReceiver, Signer: other, Trust: w.trust},
			[]string{"none of them Config.Signer's", "out of date"}},
		"no key for the ID": {Config{ID: rxOther, Signer: other, Trust: w.trust},
			[]string{"Config.Trust binds no key to Config.ID", "Config.Signer.Key()", "Config.TrustLacksSigner"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewAgent(c.cfg)
			require.ErrorIs(t, err, ErrConfig)
			for _, s := range c.want {
				assert.Contains(t, err.Error(), s)
			}
			saysOnce(t, err.Error())
			c.cfg.TrustLacksSigner = true
			_, err = NewAgent(c.cfg)
			assert.NoError(t, err, "TrustLacksSigner: the check is skipped")
		})
	}
	t.Run("SetTrust", func(t *testing.T) {
		a := w.agent(rxReceiver)
		err := a.SetTrust(w.trust.without(rxReceiver))
		require.ErrorIs(t, err, ErrConfig)
		assert.Contains(t, err.Error(), "Config.Trust binds no key to Config.ID")
		require.NoError(t, a.SetTrust(w.trust), "the same trust again")
	})
}
