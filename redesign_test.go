package handoff

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"fmt"
	"math/big"

	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No exported path hands out the members of an offer whose signature did
// not verify as if they were verified: every exported method of Received
// and Link that returns an *Offer is either named Unverified or returns nil
// for such an offer. The test walks the method sets by reflection, so a
// method added later is covered too.
func TestReceived_UnverifiedOnlyUnderItsName(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxPlanner, rxReceiver, rxOther)
		a := w.agent(rxReceiver, func(c *Config) { c.Trust = c.Trust.without(rxPlanner) })
		in := receive(t, a, encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON), Host{})
		require.Equal(t, reason.UntrustedKey, in.Reason())
		require.NotNil(t, in.Unverified(), "decoded for diagnosis")

		offerType := reflect.TypeOf((*Offer)(nil))
		v := reflect.ValueOf(in)
		for i := 0; i < v.NumMethod(); i++ {
			m := v.Type().Method(i)
			if m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || m.Type.Out(0) != offerType {
				continue
			}
			got := v.Method(i).Call(nil)[0].Interface().(*Offer)
			if strings.HasPrefix(m.Name, "Unverified") {
				continue
			}
			assert.Nil(t, got, "Received.%s hands out an offer whose signature failed", m.Name)
		}
		linkType := reflect.TypeOf(Link{})
		for i := 0; i < linkType.NumMethod(); i++ {
			m := linkType.Method(i)
			if m.Type.NumOut() == 1 && m.Type.Out(0) == offerType && !strings.HasPrefix(m.Name, "Unverified") {
				l := Link{offer: in.Unverified()} // not Verified
				assert.Nil(t, reflect.ValueOf(l).Method(i).Call(nil)[0].Interface(), "Link.%s", m.Name)
			}
		}
		// Received has no exported fields: nothing can be written into it.
		rt := reflect.TypeOf(Received{})
		for i := 0; i < rt.NumField(); i++ {
			assert.False(t, rt.Field(i).IsExported(), "Received.%s is exported", rt.Field(i).Name)
		}
	})
}

// Offer is the accepted offer and nothing else: code that acts on
// Offer() != nil never does refused work. A verified offer that was not
// accepted is reachable as Refused, and any offer as Unverified (issue
// 21, point 4).
func TestReceived_OfferOnlyWhenAccepted(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxPlanner, rxReceiver, rxOther)
		a := w.agent(rxReceiver)
		good := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON)
		other := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Hop = HopID(strings.Repeat("A", 22)) })), JSON)
		twin := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Hop, o.Task = HopID(strings.Repeat("A", 22)), "twin" })), JSON)
		stale := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, func(o *Offer) { o.Exp = o.Iat })), JSON)
		wrongAud := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxOther, nil)), JSON)
		untrusted := w.agent(rxReceiver, func(c *Config) { c.Trust = c.Trust.without(rxPlanner) })

		accepted := receive(t, a, good, Host{})
		require.True(t, accepted.Accepted())
		assert.NotNil(t, accepted.Offer(), "accepted: Offer")
		assert.Nil(t, accepted.Refused(), "accepted: not Refused")
		assert.NotNil(t, accepted.Unverified())

		first := receive(t, a, other, Host{})
		require.True(t, first.Accepted())
		for name, in := range map[string]*Received{
			"retransmission": receive(t, a, good, Host{}),
			"equivocation":   receive(t, a, twin, Host{}),
			"stale":          receive(t, a, stale, Host{}),
			"wrong audience": receive(t, a, wrongAud, Host{}),
		} {
			require.False(t, in.Accepted(), name)
			assert.Nil(t, in.Offer(), "%s: no Offer", name)
			require.NotNil(t, in.Refused(), "%s: verified, so Refused", name)
			assert.Equal(t, rxPlanner, in.Refused().Iss, name)
			assert.NotNil(t, in.Unverified(), name)
		}
		bad := receive(t, untrusted, good, Host{})
		assert.Nil(t, bad.Offer(), "untrusted key: no Offer")
		assert.Nil(t, bad.Refused(), "untrusted key: not verified, so not Refused")
		assert.NotNil(t, bad.Unverified(), "untrusted key: Unverified only")
	})
}

// A Received from another agent cannot be passed on, answered or taken:
// only Receive makes one, and it remembers who received.
func TestOffer_FromMustBeThisAgents(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder, rxReceiver)
	ctx := context.Background()
	in := receive(t, w.agent(rxCoder), encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxCoder, nil)), JSON), Host{})
	require.True(t, in.Accepted())
	other := w.agent(rxReceiver)
	_, err := other.Offer(ctx, OfferParams{To: rxPlanner, From: in})
	assert.ErrorIs(t, err, ErrArgument)
	_, err = other.Reply(ctx, in, state.Accepted, ReplyOptions{})
	assert.ErrorIs(t, err, ErrArgument)
	assert.ErrorIs(t, other.Take(ctx, in), ErrArgument)
	assert.ErrorIs(t, other.Take(ctx, nil), ErrArgument)
	_, err = other.Offer(ctx, OfferParams{To: rxPlanner, From: &Received{}})
	assert.ErrorIs(t, err, ErrArgument, "a zero Received is no received offer")
}

// Argument errors are not lifecycle refusals.
func TestOffer_ArgumentErrors(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	a := w.agent(rxPlanner)
	ctx := context.Background()
	_, err := a.Offer(ctx, OfferParams{Dialog: "d"})
	assert.ErrorIs(t, err, ErrArgument)
	assert.NotErrorIs(t, err, ErrState)
	_, err = a.Offer(ctx, OfferParams{To: rxCoder})
	assert.ErrorIs(t, err, ErrArgument, "dialog is a required member")
	_, err = a.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d", TTL: time.Hour})
	assert.ErrorIs(t, err, ErrArgument)
	_, err = a.Retransmit(ctx, "AAAAAAAAAAAAAAAAAAAAAA")
	assert.ErrorIs(t, err, ErrArgument)
}

// OnConflict may call back into the Agent: it never runs under a lock.
// A conflicting terminal status, an equivocation and an abandoned hop each
// call it, and the callback asks the agent for its open hops.
func TestAgent_OnConflictMayReenter(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	ctx := context.Background()
	var mu sync.Mutex
	var seen []ConflictKind
	var p *Agent
	p = w.agent(rxPlanner, func(c *Config) {
		c.OnConflict = func(cf Conflict) {
			_, err := p.Unresolved(ctx) // re-enters the agent
			assert.NoError(t, err)
			mu.Lock()
			seen = append(seen, cf.Kind)
			mu.Unlock()
		}
	})
	coder := w.agent(rxCoder)
	out, err := p.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d"})
	require.NoError(t, err)
	in := receive(t, coder, encodeHandoff(t, out.Handoff, JSON), Host{})
	done, err := coder.Reply(ctx, in, state.Completed, ReplyOptions{Effect: state.EffectFull})
	require.NoError(t, err)
	res, err := p.HandleStatus(ctx, done.Octets)
	require.NoError(t, err)
	require.NoError(t, res.Err())
	// A conflicting terminal status, signed by the coder.
	failed := signStatus(t, w, &Status{Hop: out.Offer.Hop, Offer: out.Digest, Iss: rxCoder, Aud: rxPlanner,
		Iat: TimeOf(w.clock.Now()), State: state.Failed})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		res, err := p.HandleStatus(ctx, failed.Octets)
		assert.NoError(t, err)
		assert.True(t, res.Conflict)
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("HandleStatus did not return: OnConflict ran under a lock")
	}
	out2, err := p.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d"})
	require.NoError(t, err)
	require.NoError(t, p.Abandon(ctx, out2.Offer.Hop))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []ConflictKind{ConflictStatus, ConflictUnresolved}, seen)
}

// SetTrust replaces the trust configuration of a running agent and clears
// the verified-element cache: an element verified under the old one is
// checked again under the new.
func TestAgent_SetTrust(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxOrigin, rxPlanner, rxReceiver)
		a := w.agent(rxReceiver)
		first := w.path(nil, rxOrigin, rxPlanner, rxReceiver)
		in := receive(t, a, encodeHandoff(t, handoffOf(first...), JSON), Host{})
		require.True(t, in.Accepted(), in.Detail())
		assert.Equal(t, 1, a.trust.Load().cache.len())

		require.ErrorIs(t, a.SetTrust(nil), ErrConfig)
		require.NoError(t, a.SetTrust(w.trust.without(rxOrigin)))
		assert.Zero(t, a.trust.Load().cache.len(), "the cache starts again")
		// The same chain element, now from an untrusted origin.
		second := w.path(func(i int, o *Offer) {}, rxOrigin, rxPlanner, rxReceiver)
		in = receive(t, a, encodeHandoff(t, handoffOf(second...), JSON), Host{})
		require.True(t, in.Accepted(), in.Detail())
		assert.Equal(t, ChainUnverifiable, in.Chain())
	})
}

// A delegate that took the work before a restart answers for the hop
// after it, from its store alone (ReplyHop), and a delegator whose records
// survive answers HandleStatus for a hop it offered before.
func TestAgent_ReplyHopAfterRestart(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	ctx := context.Background()
	p := w.agent(rxPlanner)
	coder := w.agent(rxCoder)
	out, err := p.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d", Work: "w"})
	require.NoError(t, err)
	in := receive(t, coder, encodeHandoff(t, out.Handoff, JSON), Host{})
	require.NoError(t, coder.Take(ctx, in))

	// A new Agent on the same stores: the process came back.
	coder2 := w.agent(rxCoder, func(c *Config) { c.Store = coder.cfg.Store })
	p2 := w.agent(rxPlanner, func(c *Config) { c.Offers = p.cfg.Offers })
	_, err = coder2.ReplyHop(ctx, rxPlanner, "AAAAAAAAAAAAAAAAAAAAAA", state.Completed, ReplyOptions{Effect: state.EffectFull})
	assert.ErrorIs(t, err, ErrState, "a hop not remembered")
	_, err = coder2.ReplyHop(ctx, rxPlanner, out.Offer.Hop, state.Completed, ReplyOptions{})
	assert.ErrorIs(t, err, ErrArgument, "completed needs a known effect (HC-25)")
	done, err := coder2.ReplyHop(ctx, rxPlanner, out.Offer.Hop, state.Completed, ReplyOptions{Effect: state.EffectFull})
	require.NoError(t, err)
	_, err = coder2.ReplyHop(ctx, rxPlanner, out.Offer.Hop, state.Failed, ReplyOptions{Effect: state.EffectNone})
	assert.ErrorIs(t, err, ErrState, "the outcome is reported once (HC-23)")

	again, err := p2.Retransmit(ctx, out.Offer.Hop)
	require.NoError(t, err)
	assert.Equal(t, out.Handoff.Offer.Octets, again.Offer.Octets, "HC-52: the identical octets")
	_, err = p2.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d", Work: "w"})
	assert.ErrorIs(t, err, ErrState, "HC-42 holds across the restart")
	res, err := p2.HandleStatus(ctx, done.Octets)
	require.NoError(t, err)
	require.NoError(t, res.Err())
	assert.Equal(t, state.Completed, res.State)
	hop, ok, err := p2.Hop(ctx, out.Offer.Hop)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, hop.Resolved)
	assert.Equal(t, done.Octets, hop.Status.Octets)
	_, err = p2.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d", Work: "w"})
	assert.NoError(t, err, "resolved: a new offer for the work may follow")
}

// A refused status is a result, as a refused offer is; the error is for
// the stores and the context.
func TestHandleStatus_RejectionIsAResult(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	p := w.agent(rxPlanner)
	res, err := p.HandleStatus(context.Background(), []byte("not a status"))
	require.NoError(t, err)
	assert.Equal(t, reason.BadSignature, res.Reason())
	assert.ErrorIs(t, res.Err(), ErrMalformed)
	assert.Nil(t, res.Status)
	var rj *Rejection
	assert.True(t, errors.As(res.Err(), &rj))
}

// The delegate's table, driven directly: every state a hop can be in
// against every status a delegate might send.
func TestLifecycle_DelegateStepTable(t *testing.T) {
	full, none := state.EffectFull, state.EffectNone
	cases := []struct {
		name string
		hop  delegateHop
		send delegateSend
		next state.State
		rec  bool
		hc   string // "" when allowed
	}{
		{"accept after the checks", delegateHop{true, "", false, verdictAccepted}, delegateSend{State: state.Accepted}, state.Accepted, true, ""},
		{"accept twice", delegateHop{true, state.Accepted, true, verdictAccepted}, delegateSend{State: state.Accepted}, "", false, "HC-23"},
		{"accept after Take, none sent (HC-39)", delegateHop{true, state.Accepted, false, verdictAccepted}, delegateSend{State: state.Accepted}, state.Accepted, true, ""},
		{"owed accept on retransmission", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Accepted, OwesAccepted: true}, state.Accepted, true, ""},
		{"accept on retransmission after one was sent", delegateHop{true, state.Accepted, true, verdictRetransmit}, delegateSend{State: state.Accepted}, "", false, "HC-23"},
		{"accept a rejected offer", delegateHop{true, "", false, verdictRejected}, delegateSend{State: state.Accepted}, "", false, "section 5.1"},
		{"reject after a failed check", delegateHop{true, "", false, verdictRejected}, delegateSend{State: state.Rejected, Reason: reason.Policy}, state.Rejected, true, ""},
		{"reject before the pair is remembered", delegateHop{false, "", false, verdictRejected}, delegateSend{State: state.Rejected, Reason: reason.Stale}, "", false, ""},
		{"reject a taken hop", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Rejected, Reason: reason.Policy}, "", false, "HC-24"},
		{"reject without a reason", delegateHop{true, "", false, verdictRejected}, delegateSend{State: state.Rejected}, "", false, "reason"},
		{"stale for a remembered hop", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Rejected, Reason: reason.Stale}, "", false, "HC-24"},
		{"complete from accepted", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Completed, Effect: full}, state.Completed, true, ""},
		{"complete without accepted (HC-26)", delegateHop{true, "", false, verdictAccepted}, delegateSend{State: state.Completed, Effect: full}, state.Completed, true, ""},
		{"complete a canceled hop", delegateHop{true, state.Canceled, false, verdictRetransmit}, delegateSend{State: state.Completed, Effect: full}, state.Completed, true, ""},
		{"complete twice", delegateHop{true, state.Completed, true, verdictRetransmit}, delegateSend{State: state.Completed, Effect: full}, "", false, "HC-23"},
		{"complete, effect unknown", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Completed}, "", false, "HC-25"},
		{"fail with no effect", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Failed, Effect: none}, state.Failed, true, ""},
		{"fail with no effect but refs", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Failed, Effect: none, Refs: 1}, "", false, "HC-44"},
		{"fail partly without refs", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Failed, Effect: state.EffectPartial}, "", false, "HC-44"},
		{"fail partly with refs", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Failed, Effect: state.EffectPartial, Refs: 1}, state.Failed, true, ""},
		{"delegate cancels", delegateHop{true, state.Accepted, false, verdictRetransmit}, delegateSend{State: state.Canceled}, "", false, "only the delegator"},
		{"equivocation: reject the first", delegateHop{true, "", false, verdictEquivocation}, delegateSend{State: state.Rejected, Reason: reason.Equivocation, Equivocation: state.AnswerRejectFirst}, state.Rejected, true, ""},
		{"equivocation: accept", delegateHop{true, "", false, verdictEquivocation}, delegateSend{State: state.Accepted, Equivocation: state.AnswerRejectFirst}, "", false, "HC-54"},
		{"equivocation: finish the first", delegateHop{true, state.Accepted, false, verdictEquivocation}, delegateSend{State: state.Failed, Reason: reason.Equivocation, Effect: none, Equivocation: state.AnswerFinishFirst}, state.Failed, true, ""},
		{"equivocation: nothing more", delegateHop{true, state.Completed, true, verdictEquivocation}, delegateSend{State: state.Completed, Effect: full, Equivocation: state.AnswerNone}, "", false, "HC-54"},
	}
	// Options that contradict the state asked for are argument errors in
	// every state: they name the ReplyOptions field to set.
	argument := map[string]string{
		"reject without a reason":      "ReplyOptions.Reason",
		"complete, effect unknown":     "ReplyOptions.Effect",
		"fail with no effect but refs": "ReplyOptions.Effect",
		"fail partly without refs":     "ReplyOptions.Refs",
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next, rec, err := delegateStep(c.hop, c.send)
			if c.hc == "" {
				require.NoError(t, err)
				assert.Equal(t, c.next, next)
				assert.Equal(t, c.rec, rec)
				return
			}
			if field, ok := argument[c.name]; ok {
				require.ErrorIs(t, err, ErrArgument)
				assert.NotErrorIs(t, err, ErrState)
				assert.Contains(t, err.Error(), field, "the field to set is named")
			} else {
				require.ErrorIs(t, err, ErrState)
			}
			assert.Contains(t, err.Error(), c.hc, "the rule is named")
			assert.False(t, rec)
		})
	}
}

// The delegator's table, driven directly (HC-24, HC-26, HC-27, HC-41,
// HC-56).
func TestLifecycle_DelegatorStepTable(t *testing.T) {
	st := func(s state.State, r reason.Code) *Status { return &Status{State: s, Reason: r} }
	cases := []struct {
		name              string
		from              delegatorHop
		status            *Status
		want              state.State
		changed, conflict bool
		resolved          bool
	}{
		{"offered, accepted", delegatorHop{State: state.Offered}, st(state.Accepted, ""), state.Accepted, true, false, false},
		{"offered, completed (HC-26)", delegatorHop{State: state.Offered}, st(state.Completed, ""), state.Completed, true, false, true},
		{"offered, stale (HC-24)", delegatorHop{State: state.Offered}, st(state.Rejected, reason.Stale), state.Offered, false, false, false},
		{"offered, replay (HC-24)", delegatorHop{State: state.Offered}, st(state.Rejected, reason.Replay), state.Offered, false, false, false},
		{"offered, rejected", delegatorHop{State: state.Offered}, st(state.Rejected, reason.Policy), state.Rejected, true, false, true},
		{"accepted, failed", delegatorHop{State: state.Accepted}, st(state.Failed, ""), state.Failed, true, false, true},
		{"accepted, rejected (HC-56)", delegatorHop{State: state.Accepted}, st(state.Rejected, reason.Policy), state.Accepted, false, true, false},
		{"completed, failed (HC-56)", delegatorHop{State: state.Completed}, st(state.Failed, ""), state.Completed, false, true, true},
		{"completed, completed again", delegatorHop{State: state.Completed}, st(state.Completed, ""), state.Completed, false, false, true},
		{"completed, accepted", delegatorHop{State: state.Completed}, st(state.Accepted, ""), state.Completed, false, false, true},
		{"canceled, completed still resolves", delegatorHop{State: state.Offered, Canceled: true}, st(state.Completed, ""), state.Completed, true, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next, changed, conflict := delegatorStep(c.from, c.status)
			assert.Equal(t, c.want, next.State)
			assert.Equal(t, c.changed, changed)
			assert.Equal(t, c.conflict, conflict)
			assert.Equal(t, c.resolved, next.resolved())
		})
	}
	assert.False(t, delegatorHop{State: state.Offered, Canceled: true}.resolved(), "HC-41: a canceled hop is unresolved")
	assert.True(t, delegatorHop{State: state.Offered, Observed: true}.resolved(), "HC-41: an observation of no effect resolves")
	assert.Equal(t, state.Expired, delegatorHop{State: state.Offered}.localState(10, 10), "HC-27")
	assert.Equal(t, state.Offered, delegatorHop{State: state.Offered}.localState(10, 9))
}

// Checks 2 to 6 of section 5.3 as a pure function: each failure names the
// element and the reason.
func TestChain_StructureTable(t *testing.T) {
	d := func(s string) digest.Digest { return digest.SHA256([]byte(s)) }
	off := func(iss, aud AgentID, iat Time, prev *digest.Digest) *Offer {
		return &Offer{Iss: iss, Aud: aud, Iat: iat, Exp: iat + 60, Prev: prev}
	}
	p0, p1 := d("c0"), d("c1")
	good := []element{{offer: off("a", "b", 100, nil), verified: true}, {offer: off("b", "c", 110, &p0), verified: true}}
	digests := []digest.Digest{p0, p1}
	cur := off("c", "self", 120, &p1)
	cases := []struct {
		name  string
		elems []element
		o     *Offer
		pol   ChainPolicy
		state ChainState
		index int
		why   reason.Code
	}{
		{"full", good, cur, ChainPolicy{}, ChainFull, 0, ""},
		{"partial", []element{{offer: off("a", "b", 100, &p1), verified: true}, good[1]}, cur, ChainPolicy{}, ChainPartial, 0, ""},
		{"unverifiable", []element{{offer: good[0].offer, untrusted: true}, good[1]}, cur, ChainPolicy{}, ChainUnverifiable, 0, ""},
		{"prev of the offer", good, off("c", "self", 120, &p0), ChainPolicy{}, "", 2, reason.BrokenChain},
		{"continuity", good, off("x", "self", 120, &p1), ChainPolicy{}, "", 2, reason.BrokenChain},
		{"issued before the element before", good, off("c", "self", 105, &p1), ChainPolicy{}, "", 2, reason.BrokenChain},
		{"issued after its exp plus skew", good, off("c", "self", 181, &p1), ChainPolicy{}, "", 2, reason.BrokenChain},
		{"within the skew", good, off("c", "self", 180, &p1), ChainPolicy{}, ChainFull, 0, ""},
		{"cycle", good, off("c", "a", 120, &p1), ChainPolicy{}, ChainFull, 0, ""},
		{"iss twice", []element{good[0], {offer: off("b", "a", 110, &p0), verified: true}}, off("a", "self", 120, &p1), ChainPolicy{}, "", 2, reason.Cycle},
		{"re-entry allowed", []element{good[0], {offer: off("b", "a", 110, &p0), verified: true}}, off("a", "self", 120, &p1), ChainPolicy{AllowReentry: []AgentID{"a"}}, ChainFull, 0, ""},
		{"receiver in the chain", []element{{offer: off("a", "self", 100, nil), verified: true}, {offer: off("self", "c", 110, &p0), verified: true}}, cur, ChainPolicy{}, "", 0, reason.Cycle},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state, err := checkStructure(c.elems, digests, c.o, "self", c.pol, 10)
			if c.why == "" {
				require.Nil(t, err)
				assert.Equal(t, c.state, state)
				return
			}
			require.NotNil(t, err)
			assert.Equal(t, c.why, err.Reason)
			assert.Equal(t, c.index, err.Index)
			assert.ErrorIs(t, err, ErrRejected)
		})
	}
}

// A rejection at step 6 carries a *ChainError with the failing index.
func TestReceive_ChainErrorIndex(t *testing.T) {
	w := newWorld(t, JWS, rxOrigin, rxPlanner, rxCoder, rxReceiver)
	e := w.path(nil, rxOrigin, rxPlanner, rxCoder, rxReceiver)
	// Flip a bit of the signature itself: flipping one of a base64url
	// character can leave the alphabet ('A' ^ 1 is '@'), and then the
	// element is malformed, not badly signed.
	e[1] = tamperSignature(t, e[1])
	in := receive(t, w.agent(rxReceiver), encodeHandoff(t, handoffOf(e...), JSON), Host{})
	require.Equal(t, CheckChain, in.Check())
	var ce *chainError
	require.ErrorAs(t, in.Err(), &ce)
	assert.Equal(t, 1, ce.Index)
	assert.Equal(t, reason.BadSignature, ce.Reason)
	assert.ErrorIs(t, in.Err(), ErrSignature)
}

// OfferParams.Prepare binds what must name the hop before the offer is
// signed, and may not change who, which hop or when.
func TestOffer_Prepare(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	a := w.agent(rxPlanner)
	ctx := context.Background()
	var seen HopID
	out, err := a.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d", Prepare: func(o *Offer) error {
		seen = o.Hop
		o.Refs = append(o.Refs, ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte(o.Hop))})
		return nil
	}})
	require.NoError(t, err)
	assert.Equal(t, out.Offer.Hop, seen)
	in := receive(t, w.agent(rxCoder), encodeHandoff(t, out.Handoff, JSON), Host{})
	require.True(t, in.Accepted())
	assert.Equal(t, digest.SHA256([]byte(seen)), in.Offer().Refs[0].Dig, "signed with the offer")
	_, err = a.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d", Prepare: func(o *Offer) error { o.Aud = rxPlanner; return nil }})
	assert.ErrorIs(t, err, ErrArgument)
	boom := errors.New("boom")
	_, err = a.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d", Prepare: func(*Offer) error { return boom }})
	assert.ErrorIs(t, err, boom)
}

// HC-02: an AgentId is a string, compared exactly: no case folding, no
// normalisation, no URI rules; the trust configuration decides which keys
// speak for it.
func TestAgentID_HC02_ComparedExactly(t *testing.T) {
	const plain = AgentID("planner") // not a URI: the SHOULD is on whoever names agents
	const self = AgentID("spiffe://b.example/agent/coder")
	w := newWorld(t, JWS, plain, self)
	a := w.agent(self)
	ok := receive(t, a, encodeHandoff(t, handoffOf(w.offer(plain, self, nil)), JSON), Host{})
	assert.True(t, ok.Accepted(), ok.Detail())
	for _, aud := range []AgentID{
		"spiffe://B.example/agent/coder",   // case
		"spiffe://b.example/agent/coder/",  // trailing slash
		"spiffe://b.example/agent/Coder",   // case in the path
		"spiffe://b.example/agent/c%6Fder", // percent-encoding
		"spiffe://b.example/agent/coder\u00a0",
	} {
		in := receive(t, a, encodeHandoff(t, handoffOf(w.offer(plain, aud, nil)), JSON), Host{})
		assert.Equal(t, reason.WrongAudience, in.Reason(), "%q is not %q", aud, self)
	}
	// Keys are bound to the exact string: "Planner" has none.
	w2 := newWorld(t, JWS, "Planner", self)
	in := receive(t, w.agent(self), encodeHandoff(t, handoffOf(w2.offer("Planner", self, nil)), JSON), Host{})
	assert.Equal(t, reason.UntrustedKey, in.Reason())
}

// HC-06: a Digest is the closed map {alg, val}; val is the whole hash in
// canonical base64url without padding; sha-256 is always computed.
func TestDigest_HC06_ClosedAndUntruncated(t *testing.T) {
	d := digest.SHA256([]byte("x"))
	assert.Len(t, d.Val, 32)
	assert.Equal(t, digest.SHA256Alg, d.Alg)
	back, err := digest.Parse(d.String())
	require.NoError(t, err)
	assert.True(t, back.Equal(d))
	val := d.B64()
	for name, m := range map[string]map[string]any{
		"extra member": {"alg": digest.SHA256Alg, "val": val, "x": 1},
		"truncated":    {"alg": digest.SHA256Alg, "val": val[:len(val)-2]},
		"padded":       {"alg": digest.SHA256Alg, "val": val + "="},
		"std alphabet": {"alg": digest.SHA256Alg, "val": strings.NewReplacer("-", "+", "_", "/").Replace(val) + "+"},
		"no val":       {"alg": digest.SHA256Alg},
		"no alg":       {"val": val},
	} {
		_, err := digestFrom(m, "prev")
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	got, err := digestFrom(map[string]any{"alg": digest.SHA256Alg, "val": val}, "prev")
	require.NoError(t, err)
	assert.True(t, got.Equal(d))
	// The CDDL's alg is "sha-256" / text: the empty text is an alg this
	// implementation does not implement (HC-08), not a malformed Digest.
	empty, err := digestFrom(map[string]any{"alg": "", "val": val}, "prev")
	require.NoError(t, err)
	assert.False(t, empty.Supported())
	assert.False(t, empty.Equal(d), "\"\" is not \"sha-256\"")
}

// HC-65: a detail is sent only when the caller sets one, and a hop record
// is kept for the retention period after its last terminal status, then
// dropped; a hop whose outcome is unknown is kept.
func TestRetention_HC65(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	ctx := context.Background()
	p := w.agent(rxPlanner)
	c := w.agent(rxCoder, func(cfg *Config) { cfg.Retention = new(time.Hour) })
	out, err := p.Offer(ctx, OfferParams{To: rxCoder, Dialog: "d"})
	require.NoError(t, err)
	data := encodeHandoff(t, out.Handoff, JSON)
	in := receive(t, c, data, Host{})
	acc, err := c.Reply(ctx, in, state.Accepted, ReplyOptions{})
	require.NoError(t, err)
	st, err := OpenStatus(acc, w.trust, Limits{})
	require.NoError(t, err)
	assert.Empty(t, st.Detail, "no detail unless the caller sets one")

	w.clock.Add(48 * time.Hour) // long past exp: an accepted hop is kept
	again := receive(t, c, data, Host{Peer: rxPlanner})
	require.True(t, again.Retransmission(), "an outcome still unknown is kept")
	_, err = c.Reply(ctx, in, state.Completed, ReplyOptions{Effect: state.EffectFull})
	require.NoError(t, err)
	w.clock.Add(59 * time.Minute)
	assert.True(t, receive(t, c, data, Host{Peer: rxPlanner}).Retransmission(), "within the retention period")
	w.clock.Add(2 * time.Minute)
	gone := receive(t, c, data, Host{Peer: rxPlanner})
	assert.False(t, gone.Retransmission(), "dropped once the retention period ended")
	assert.Equal(t, reason.Stale, gone.Reason())
}

// lostReply is a store whose Remember writes and then reports an error, as
// a store client does when the reply to an applied write is lost.
type lostReply struct {
	replay.Store
	lose bool
}

func (s *lostReply) Remember(ctx context.Context, k replay.Key, rec replay.Record) (replay.Record, bool, error) {
	held, inserted, err := s.Store.Remember(ctx, k, rec)
	if s.lose && err == nil {
		s.lose = false
		return replay.Record{}, false, fmt.Errorf("%w: connection lost after the write", replay.ErrUnavailable)
	}
	return held, inserted, err
}

// A hop whose record was written by a call that then failed is not
// stranded silently: Untaken shows it with its age, and Release lets the
// next delivery accept it, once. A hop taken in the meantime is never
// released.
func TestAgent_UntakenAndRelease(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	ctx := context.Background()
	store := &lostReply{Store: replay.NewMemory(replay.MemoryOptions{Now: w.clock.Now}), lose: true}
	c := w.agent(rxCoder, func(cfg *Config) { cfg.Store = store })
	data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxCoder, nil)), JSON)

	_, err := c.Receive(ctx, data, Host{})
	require.ErrorIs(t, err, ErrStore, "the offer is refused: the caller never learned it was remembered")
	again := receive(t, c, data, Host{Peer: rxPlanner})
	require.True(t, again.Retransmission(), "the write landed: every later delivery is a retransmission")
	assert.False(t, again.OwesAccepted())
	_, ok := again.LastStatus()
	assert.False(t, ok, "no status owed: the hop would be stranded")

	w.clock.Add(30 * time.Second)
	hops, err := c.Untaken(ctx, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, hops, 1)
	assert.Equal(t, rxPlanner, hops[0].Iss)
	assert.Equal(t, again.Digest(), hops[0].Digest)
	assert.GreaterOrEqual(t, hops[0].Age, 30*time.Second)
	none, err := c.Untaken(ctx, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, none, "younger than the age asked for")

	assert.ErrorIs(t, c.Release(ctx, rxPlanner, hops[0].Hop, digest.SHA256([]byte("other"))), ErrArgument, "another offer")
	require.NoError(t, c.Release(ctx, rxPlanner, hops[0].Hop, hops[0].Digest))
	in := receive(t, c, data, Host{})
	require.True(t, in.Accepted(), "released: checked afresh and accepted, once")
	require.NoError(t, c.Take(ctx, in))
	assert.ErrorIs(t, c.Release(ctx, rxPlanner, hops[0].Hop, hops[0].Digest), ErrState, "a taken hop is never released")
	assert.True(t, receive(t, c, data, Host{Peer: rxPlanner}).Retransmission())
}

// A delivery whose record was released and remembered again by another
// delivery cannot take the hop: its write carries its own call token.
func TestAgent_TakeAfterReleaseRefused(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	ctx := context.Background()
	c := w.agent(rxCoder)
	data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxCoder, nil)), JSON)
	first := receive(t, c, data, Host{})
	require.True(t, first.Accepted())
	require.NoError(t, c.Release(ctx, rxPlanner, first.Offer().Hop, first.Digest()))
	second := receive(t, c, data, Host{})
	require.True(t, second.Accepted())
	assert.ErrorIs(t, c.Take(ctx, first), ErrState, "the first delivery's record is gone")
	require.NoError(t, c.Take(ctx, second))
}

// HC-39: a delegate that took the work and sent no status owes "accepted";
// it may send it once, in answer to the delivery or to a retransmission.
func TestAgent_AcceptedAfterTake_HC39(t *testing.T) {
	w := newWorld(t, JWS, rxPlanner, rxCoder)
	ctx := context.Background()
	c := w.agent(rxCoder)
	data := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxCoder, nil)), JSON)
	in := receive(t, c, data, Host{})
	require.NoError(t, c.Take(ctx, in))
	again := receive(t, c, data, Host{Peer: rxPlanner})
	assert.True(t, again.OwesAccepted())
	acc, err := c.Reply(ctx, in, state.Accepted, ReplyOptions{})
	require.NoError(t, err, "owed after Take")
	_, err = c.Reply(ctx, again, state.Accepted, ReplyOptions{})
	assert.ErrorIs(t, err, ErrState, "sent once")
	last, ok := receive(t, c, data, Host{Peer: rxPlanner}).LastStatus()
	require.True(t, ok)
	assert.Equal(t, acc.Octets, last.Octets)
}

// A bare signed offer handed to Receive, instead of a Handoff object, is
// refused with a message that says what was expected and what was given.
func TestReceive_BareSignedOfferSaysWhatWasExpected(t *testing.T) {
	eachFormat(t, func(t *testing.T, f Format) {
		w := newWorld(t, f, rxPlanner, rxCoder)
		s := w.offer(rxPlanner, rxCoder, nil)
		in := receive(t, w.agent(rxCoder), s.Octets, Host{})
		assert.Equal(t, reason.BadSignature, in.Reason())
		assert.ErrorIs(t, in.Err(), ErrMalformed)
		assert.Contains(t, in.Detail(), "on its own; a Handoff object {offer, chain} was expected")
		assert.NotContains(t, in.Detail(), "trailing data")
		_, err := ParseSigned(encodeHandoff(t, handoffOf(s), JSON), Limits{})
		assert.ErrorContains(t, err, "perhaps a Handoff object")
	})
}

// HC-15, HC-22: a trust configuration holds only keys that can verify
// under their alg. A key without coordinates, off its curve, or a typed nil
// is refused with ErrMalformed when the configuration is built, never a
// panic then or when an offer arrives.
func TestNewTrust_RefusesUnusableKeys(t *testing.T) {
	good, err := ecdsa.GenerateKey(elliptic.P256(), nil)
	require.NoError(t, err)
	for name, pub := range map[string]any{
		"typed nil":      (*ecdsa.PublicKey)(nil),
		"no coordinates": &ecdsa.PublicKey{Curve: elliptic.P256()},
		"off the curve":  &ecdsa.PublicKey{Curve: elliptic.P256(), X: good.X, Y: new(big.Int).Add(good.Y, big.NewInt(1))},
		"P-384 as ES256": &ecdsa.PublicKey{Curve: elliptic.P384(), X: good.X, Y: good.Y},
	} {
		_, err := NewTrust(map[AgentID][]TrustedKey{"a": {{Public: pub, Alg: ES256}}})
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	_, err = NewTrust(map[AgentID][]TrustedKey{"a": {{Public: &good.PublicKey, Alg: ES256}}})
	assert.NoError(t, err)
}
