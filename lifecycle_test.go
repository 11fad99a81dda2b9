package handoff

import (
	"context"
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

// conflictLog collects what an agent flags to its operator.
type conflictLog struct {
	mu   sync.Mutex
	seen []Conflict
}

func (c *conflictLog) add(x Conflict) { c.mu.Lock(); c.seen = append(c.seen, x); c.mu.Unlock() }

func (c *conflictLog) kinds() []ConflictKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var k []ConflictKind
	for _, x := range c.seen {
		k = append(k, x.Kind)
	}
	return k
}

// The five-agent chain of the lifecycle issue: assistant -> planner ->
// coder -> tester -> reviewer, each a separate Agent with its own key and
// store, exchanging real signed octets.
func TestLifecycle_FiveAgentChain(t *testing.T) {
	for _, f := range []Format{JWS, COSE} {
		t.Run(f.String(), func(t *testing.T) { fiveAgentChain(t, f) })
	}
}

func fiveAgentChain(t *testing.T, f Format) {
	ctx := context.Background()
	ids := []AgentID{"spiffe://u.example/assistant", "spiffe://a.example/planner", "spiffe://b.example/coder",
		"spiffe://c.example/tester", "spiffe://d.example/reviewer"}
	w := newWorld(t, f, ids...)
	logs := make([]*conflictLog, len(ids))
	agents := make([]*Agent, len(ids))
	for i, id := range ids {
		logs[i] = &conflictLog{}
		agents[i] = w.agent(id, func(c *Config) {
			c.OnConflict = logs[i].add
			c.Chain = ChainPolicy{RequireFull: true, TrustedOrigins: []AgentID{ids[0]}}
		})
	}
	enc := JSON
	if f == COSE {
		enc = CBOR
	}

	// Offers accepted down the chain.
	outs := make([]*Outgoing, len(ids)-1)
	ins := make([]*Received, len(ids))
	wire := make([][]byte, len(ids))
	for i := 0; i < len(ids)-1; i++ {
		p := OfferParams{To: ids[i+1], Dialog: "ctx-5", TTL: time.Minute, Work: "step"}
		if i > 0 {
			p.From, p.Dialog = ins[i], ""
		}
		out, err := agents[i].Offer(ctx, p)
		require.NoError(t, err)
		outs[i] = out
		wire[i+1], err = out.Handoff.Encode(enc)
		require.NoError(t, err)
		w.clock.Add(time.Second)
		in := receive(t, agents[i+1], wire[i+1], Host{Dialog: "ctx-5", Peer: ids[i]})
		require.True(t, in.Accepted(), "hop %d: %s: %s", i, in.Reason(), in.Detail())
		assert.Equal(t, ChainFull, in.Chain())
		assert.Len(t, in.Links(), i, "the chain grows by one offer per hop")
		ins[i+1] = in
		acc, err := agents[i+1].Reply(ctx, in, state.Accepted, ReplyOptions{})
		require.NoError(t, err)
		res, err := statusErr(agents[i].HandleStatus(ctx, acc.Octets))
		require.NoError(t, err)
		assert.Equal(t, state.Accepted, res.State)
		assert.True(t, res.Changed)
	}

	// A cancel from the assistant reaches the reviewer through every hop
	// (HC-28).
	c, err := agents[0].Cancel(ctx, outs[0].Offer.Hop)
	require.NoError(t, err)
	msg := c.Status.Octets
	for i := 1; i < len(ids); i++ {
		res, err := statusErr(agents[i].HandleStatus(ctx, msg))
		require.NoError(t, err, "hop %d", i)
		assert.Equal(t, state.Canceled, res.State)
		if i == len(ids)-1 {
			assert.Empty(t, res.Notices, "the reviewer issued no offers")
			break
		}
		require.Len(t, res.Notices, 1, "hop %d propagates", i)
		assert.Equal(t, ids[i+1], res.Notices[0].To)
		msg = res.Notices[0].Status.Octets
	}
	// Canceled hops stay unresolved for the delegator (HC-41).
	for i := 0; i < len(ids)-1; i++ {
		h, ok, _ := agents[i].Hop(context.Background(), outs[i].Offer.Hop)
		require.True(t, ok)
		assert.True(t, h.Canceled)
		assert.False(t, h.Resolved, "HC-41: a canceled hop is unresolved")
	}

	// The reviewer had finished anyway: a late "completed" still resolves
	// the canceled hop at the tester (HC-56).
	done, err := agents[4].Reply(ctx, ins[4], state.Completed, ReplyOptions{Effect: state.EffectFull})
	require.NoError(t, err)
	// The status is lost; the tester asks again with the identical octets
	// (HC-37, HC-52) and the reviewer resends the identical status (HC-39).
	again, err := agents[3].Retransmit(context.Background(), outs[3].Offer.Hop)
	require.NoError(t, err)
	b, err := again.Encode(enc)
	require.NoError(t, err)
	assert.Equal(t, wire[4], b, "a retransmission is the identical octets")
	re := receive(t, agents[4], b, Host{Dialog: "ctx-5", Peer: ids[3]})
	require.True(t, re.Retransmission())
	last, ok := re.LastStatus()
	require.True(t, ok)
	assert.Equal(t, done.Octets, last.Octets, "the last status, identical")
	res, err := statusErr(agents[3].HandleStatus(ctx, last.Octets))
	require.NoError(t, err)
	assert.Equal(t, state.Completed, res.State)
	h, _, _ := agents[3].Hop(context.Background(), outs[3].Offer.Hop)
	assert.True(t, h.Resolved)

	// A conflicting second terminal status is flagged and ignored (HC-56).
	conflicting, err := agents[4].Reply(ctx, ins[4], state.Failed, ReplyOptions{Effect: state.EffectNone})
	require.ErrorIs(t, err, ErrState, "HC-23: at most one of completed/failed")
	assert.True(t, len(conflicting.Octets) == 0)
	forged := signStatus(t, w, &Status{Hop: outs[3].Offer.Hop, Offer: outs[3].Digest, Iss: ids[4], Aud: ids[3],
		Iat: TimeOf(w.clock.Now()), State: state.Failed})
	res, err = statusErr(agents[3].HandleStatus(ctx, forged.Octets))
	require.NoError(t, err)
	assert.True(t, res.Conflict)
	assert.Equal(t, state.Completed, res.State, "the first verified terminal state stands")
	assert.Contains(t, logs[3].kinds(), ConflictStatus)
}

// signStatus signs a status directly, bypassing the lifecycle rules, as a
// misbehaving delegate could.
func signStatus(t *testing.T, w *world, st *Status) Signed {
	t.Helper()
	s, err := w.signers[st.Iss].SignStatus(st)
	require.NoError(t, err)
	return s
}

type pair struct {
	w         *world
	dtor, dte *Agent
	out       *Outgoing
	in        *Received
	log       *conflictLog
}

const (
	idA = AgentID("spiffe://a.example/delegator")
	idB = AgentID("spiffe://b.example/delegate")
)

func newPair(t *testing.T) *pair {
	w := newWorld(t, JWS, idA, idB)
	p := &pair{w: w, log: &conflictLog{}}
	p.dtor = w.agent(idA, func(c *Config) { c.OnConflict = p.log.add })
	p.dte = w.agent(idB, func(c *Config) { c.OnConflict = p.log.add })
	out, err := p.dtor.Offer(context.Background(), OfferParams{To: idB, Dialog: "d", Work: "job"})
	require.NoError(t, err)
	p.out = out
	b, err := out.Handoff.Encode(JSON)
	require.NoError(t, err)
	p.in = receive(t, p.dte, b, Host{Peer: idA})
	require.True(t, p.in.Accepted())
	return p
}

// The delegate's table: every (state, requested status) pair, asserting
// what is allowed and what is sent (HC-23..HC-26, HC-44, HC-45).
func TestLifecycle_DelegateTable(t *testing.T) {
	ctx := context.Background()
	reach := map[state.State]func(t *testing.T, p *pair){
		"": func(*testing.T, *pair) {},
		state.Accepted: func(t *testing.T, p *pair) {
			_, err := p.dte.Reply(ctx, p.in, state.Accepted, ReplyOptions{})
			require.NoError(t, err)
		},
		state.Rejected: func(t *testing.T, p *pair) {
			_, err := p.dte.Reply(ctx, p.in, state.Rejected, ReplyOptions{Reason: reason.Policy})
			require.NoError(t, err)
		},
		state.Completed: func(t *testing.T, p *pair) {
			_, err := p.dte.Reply(ctx, p.in, state.Completed, ReplyOptions{Effect: state.EffectFull})
			require.NoError(t, err)
		},
		state.Failed: func(t *testing.T, p *pair) {
			_, err := p.dte.Reply(ctx, p.in, state.Failed, ReplyOptions{Effect: state.EffectNone})
			require.NoError(t, err)
		},
	}
	type req struct {
		state state.State
		opt   ReplyOptions
	}
	reqs := map[string]req{
		"accepted":               {state.Accepted, ReplyOptions{}},
		"rejected":               {state.Rejected, ReplyOptions{Reason: reason.Policy}},
		"rejected-stale":         {state.Rejected, ReplyOptions{Reason: reason.Stale}},
		"completed":              {state.Completed, ReplyOptions{Effect: state.EffectFull}},
		"completed-unknown":      {state.Completed, ReplyOptions{Effect: state.EffectUnknown}},
		"failed-none":            {state.Failed, ReplyOptions{Effect: state.EffectNone}},
		"failed-partial":         {state.Failed, ReplyOptions{Effect: state.EffectPartial, Refs: []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("effect"))}}}},
		"failed-partial-no-refs": {state.Failed, ReplyOptions{Effect: state.EffectPartial}},
		"failed-none-with-refs":  {state.Failed, ReplyOptions{Effect: state.EffectNone, Refs: []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("x"))}}}},
		"failed-unknown":         {state.Failed, ReplyOptions{Effect: state.EffectUnknown}},
		"canceled":               {state.Canceled, ReplyOptions{}},
	}
	// argument[request] = the ReplyOptions field an argument error names.
	argument := map[string]string{
		"completed-unknown":      "ReplyOptions.Effect",
		"failed-partial-no-refs": "ReplyOptions.Refs",
		"failed-none-with-refs":  "ReplyOptions.Effect",
		"failed-unknown":         "ReplyOptions.Effect",
	}
	// allowed[state][request] = the state recorded afterwards.
	allowed := map[state.State]map[string]state.State{
		"":              {"accepted": state.Accepted, "rejected": state.Rejected, "completed": state.Completed, "failed-none": state.Failed, "failed-partial": state.Failed},
		state.Accepted:  {"completed": state.Completed, "failed-none": state.Failed, "failed-partial": state.Failed},
		state.Rejected:  {},
		state.Completed: {},
		state.Failed:    {},
	}
	for from, get := range reach {
		for name, r := range reqs {
			t.Run(string(from)+"/"+name, func(t *testing.T) {
				p := newPair(t)
				get(t, p)
				s, err := p.dte.Reply(ctx, p.in, r.state, r.opt)
				want, ok := allowed[from][name]
				if !ok {
					if field, bad := argument[name]; bad {
						// Options that contradict the state asked for, in
						// every state: an argument error naming the field.
						require.ErrorIs(t, err, ErrArgument)
						assert.NotErrorIs(t, err, ErrState)
						assert.Contains(t, err.Error(), field)
					} else {
						require.ErrorIs(t, err, ErrState)
					}
					assert.True(t, len(s.Octets) == 0, "nothing is sent")
					return
				}
				require.NoError(t, err)
				st, err := OpenStatus(s, p.w.trust, Limits{})
				require.NoError(t, err)
				assert.Equal(t, r.state, st.State)
				assert.True(t, st.Offer.Equal(p.out.Digest), "status.offer names the offer")
				// The status is the hop's last status, resent identically
				// to a retransmission from the authenticated delegator.
				b, _ := p.out.Handoff.Encode(JSON)
				re := receive(t, p.dte, b, Host{Peer: idA})
				require.True(t, re.Retransmission())
				last, ok := re.LastStatus()
				require.True(t, ok)
				assert.Equal(t, s.Octets, last.Octets)
				rec, ok, err := p.dte.cfg.Store.Get(ctx, replayKey(p.in.Offer()))
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, string(want), rec.State, "the state recorded")
				// Not to anyone else (HC-39).
				re = receive(t, p.dte, b, Host{Peer: "spiffe://x.example/other"})
				_, ok = re.LastStatus()
				assert.False(t, ok)
			})
		}
	}
}

func replayKey(o *Offer) replay.Key { return replay.Key{Iss: string(o.Iss), Hop: string(o.Hop)} }

// HC-39: a delegate that took the work but sent nothing owes "accepted".
func TestLifecycle_HC39_OwesAccepted(t *testing.T) {
	ctx := context.Background()
	p := newPair(t)
	b, _ := p.out.Handoff.Encode(JSON)
	re := receive(t, p.dte, b, Host{Peer: idA})
	assert.True(t, re.Retransmission())
	assert.False(t, re.OwesAccepted(), "undecided: nothing yet")
	require.NoError(t, p.dte.Take(ctx, p.in))
	re = receive(t, p.dte, b, Host{Peer: idA})
	assert.True(t, re.OwesAccepted())
	s, err := p.dte.Reply(ctx, re, state.Accepted, ReplyOptions{})
	require.NoError(t, err)
	re = receive(t, p.dte, b, Host{Peer: idA})
	last, ok := re.LastStatus()
	require.True(t, ok)
	assert.Equal(t, s.Octets, last.Octets)
}

// The delegator's table: every (hop state, incoming status) pair.
func TestLifecycle_DelegatorTable(t *testing.T) {
	ctx := context.Background()
	type in struct {
		state  state.State
		reason reason.Code
	}
	statuses := map[string]in{
		"accepted":  {state.Accepted, ""},
		"rejected":  {state.Rejected, reason.Policy},
		"stale":     {state.Rejected, reason.Stale},
		"replay":    {state.Rejected, reason.Replay},
		"completed": {state.Completed, ""},
		"failed":    {state.Failed, reason.Equivocation},
	}
	type want struct {
		state    state.State
		conflict bool
	}
	// from the hop state reached by the first status (or none) to the
	// result of the second.
	table := map[string]map[string]want{
		"offered": {"accepted": {state.Accepted, false}, "rejected": {state.Rejected, false}, "stale": {state.Offered, false},
			"replay": {state.Offered, false}, "completed": {state.Completed, false}, "failed": {state.Failed, false}},
		"accepted": {"accepted": {state.Accepted, false}, "rejected": {state.Accepted, true}, "stale": {state.Accepted, false},
			"replay": {state.Accepted, false}, "completed": {state.Completed, false}, "failed": {state.Failed, false}},
		"rejected": {"accepted": {state.Rejected, false}, "rejected": {state.Rejected, false}, "stale": {state.Rejected, false},
			"replay": {state.Rejected, false}, "completed": {state.Rejected, true}, "failed": {state.Rejected, true}},
		"completed": {"accepted": {state.Completed, false}, "rejected": {state.Completed, true}, "stale": {state.Completed, false},
			"replay": {state.Completed, false}, "completed": {state.Completed, false}, "failed": {state.Completed, true}},
		"failed": {"accepted": {state.Failed, false}, "rejected": {state.Failed, true}, "stale": {state.Failed, false},
			"replay": {state.Failed, false}, "completed": {state.Failed, true}, "failed": {state.Failed, false}},
	}
	for from, row := range table {
		for name, w := range row {
			t.Run(from+"/"+name, func(t *testing.T) {
				p := newPair(t)
				send := func(s in) *StatusResult {
					st := signStatus(t, p.w, &Status{Hop: p.out.Offer.Hop, Offer: p.out.Digest, Iss: idB, Aud: idA,
						Iat: TimeOf(p.w.clock.Now()), State: s.state, Reason: s.reason})
					res, err := statusErr(p.dtor.HandleStatus(ctx, st.Octets))
					require.NoError(t, err)
					return res
				}
				if from != "offered" {
					send(statuses[from])
				}
				res := send(statuses[name])
				assert.Equal(t, w.state, res.State)
				assert.Equal(t, w.conflict, res.Conflict)
				h, _, _ := p.dtor.Hop(context.Background(), p.out.Offer.Hop)
				wantResolved := w.state == state.Completed || w.state == state.Failed || w.state == state.Rejected
				assert.Equal(t, wantResolved, h.Resolved, "HC-41")
				if w.conflict {
					assert.Contains(t, p.log.kinds(), ConflictStatus, "HC-56: flagged")
				}
			})
		}
	}
}

// HC-55: statuses that fail verification change nothing.
func TestLifecycle_HC55_StatusVerification(t *testing.T) {
	ctx := context.Background()
	p := newPair(t)
	w := newWorld(t, JWS, "spiffe://x.example/mallory")
	other := w.signers["spiffe://x.example/mallory"]
	good := &Status{Hop: p.out.Offer.Hop, Offer: p.out.Digest, Iss: idB, Aud: idA, Iat: TimeOf(p.w.clock.Now()), State: state.Completed}
	cases := map[string]func() []byte{
		"wrong offer digest": func() []byte {
			s := *good
			s.Offer = digest.SHA256([]byte("another offer"))
			return signStatus(t, p.w, &s).Octets
		},
		"wrong aud": func() []byte {
			s := *good
			s.Aud = idB
			return signStatus(t, p.w, &s).Octets
		},
		"iss is not the delegate": func() []byte {
			s := *good
			s.Iss = idA
			return signStatus(t, p.w, &s).Octets
		},
		"untrusted signer": func() []byte {
			sig, err := other.SignStatus(good)
			require.NoError(t, err)
			return sig.Octets
		},
		"an offer instead of a status": func() []byte { return p.out.Handoff.Offer.Octets },
		"garbage":                      func() []byte { return []byte("not a status") },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := statusErr(p.dtor.HandleStatus(ctx, mk()))
			require.Error(t, err)
			assert.Nil(t, res)
			assert.NotEmpty(t, ReasonOf(err))
			h, _, _ := p.dtor.Hop(context.Background(), p.out.Offer.Hop)
			assert.Equal(t, state.Offered, h.State)
		})
	}
}

// HC-27, HC-40: expiry is local and provisional; a missing status is never
// "failed"; a later verified status still counts.
func TestLifecycle_HC27_ExpiryProvisional(t *testing.T) {
	ctx := context.Background()
	p := newPair(t)
	require.NoError(t, p.dte.Take(ctx, p.in)) // taken; no status reaches the delegator
	p.w.clock.Add(3 * time.Minute)
	h, _, _ := p.dtor.Hop(context.Background(), p.out.Offer.Hop)
	assert.Equal(t, state.Expired, h.State)
	assert.False(t, h.Resolved)
	assert.Len(t, unresolvedOf(p.dtor), 1)
	s, err := p.dte.Reply(ctx, p.in, state.Completed, ReplyOptions{Effect: state.EffectFull})
	require.NoError(t, err)
	res, err := statusErr(p.dtor.HandleStatus(ctx, s.Octets))
	require.NoError(t, err)
	assert.Equal(t, state.Completed, res.State)
	assert.Empty(t, unresolvedOf(p.dtor))
}

// HC-42: no new offer for the same work while a hop is unresolved, unless
// the work is safe to repeat; an abandoned unresolved hop is flagged.
func TestLifecycle_HC42_NoNewOfferWhileUnresolved(t *testing.T) {
	ctx := context.Background()
	p := newPair(t)
	_, err := p.dtor.Offer(ctx, OfferParams{To: idB, Dialog: "d", Work: "job"})
	require.ErrorIs(t, err, ErrState)
	_, err = p.dtor.Offer(ctx, OfferParams{To: idB, Dialog: "d", Work: "job", SafeToRepeat: true})
	require.NoError(t, err)
	// Stale rejections leave the hop unresolved (HC-41).
	st := signStatus(t, p.w, &Status{Hop: p.out.Offer.Hop, Offer: p.out.Digest, Iss: idB, Aud: idA,
		Iat: TimeOf(p.w.clock.Now()), State: state.Rejected, Reason: reason.Stale})
	_, err = statusErr(p.dtor.HandleStatus(ctx, st.Octets))
	require.NoError(t, err)
	_, err = p.dtor.Offer(ctx, OfferParams{To: idB, Dialog: "d", Work: "job"})
	require.ErrorIs(t, err, ErrState)
	// An authoritative observation of no effect resolves it.
	require.NoError(t, p.dtor.ObservedNoEffect(context.Background(), p.out.Offer.Hop))
	require.NoError(t, p.dtor.Abandon(context.Background(), p.out.Offer.Hop))
	assert.NotContains(t, p.log.kinds(), ConflictUnresolved)
	out, err := p.dtor.Offer(ctx, OfferParams{To: idB, Dialog: "d", Work: "other"})
	require.NoError(t, err)
	require.NoError(t, p.dtor.Abandon(context.Background(), out.Offer.Hop))
	assert.Contains(t, p.log.kinds(), ConflictUnresolved, "HC-42: flagged")
}

// HC-54: the equivocation flows end to end.
func TestLifecycle_HC54_Equivocation(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		before func(t *testing.T, p *pair)
		answer state.Answer
		send   state.State
		reason reason.Code
	}{
		{"not yet answered", func(*testing.T, *pair) {}, state.AnswerRejectFirst, state.Rejected, reason.Equivocation},
		{"taken", func(t *testing.T, p *pair) { require.NoError(t, p.dte.Take(ctx, p.in)) }, state.AnswerFinishFirst, state.Failed, reason.Equivocation},
		{"accepted, finished", func(t *testing.T, p *pair) {
			_, err := p.dte.Reply(ctx, p.in, state.Accepted, ReplyOptions{})
			require.NoError(t, err)
		}, state.AnswerFinishFirst, state.Completed, ""},
		{"already terminal", func(t *testing.T, p *pair) {
			_, err := p.dte.Reply(ctx, p.in, state.Completed, ReplyOptions{Effect: state.EffectFull})
			require.NoError(t, err)
		}, state.AnswerNone, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t)
			c.before(t, p)
			// The delegator's key signs a second offer with the same hop.
			second := *p.out.Offer
			second.Task = "something else"
			s, err := p.w.signers[idA].SignOffer(&second)
			require.NoError(t, err)
			in := receive(t, p.dte, encodeHandoff(t, &Handoff{Offer: s}, JSON), Host{Peer: idA})
			assert.False(t, in.Accepted())
			assert.Equal(t, reason.Equivocation, in.Reason())
			assert.Equal(t, c.answer, in.Equivocation())
			assert.False(t, in.StatusDue(), "HC-53: no status for the second")
			assert.True(t, in.First().Equal(p.out.Digest))
			assert.Contains(t, p.log.kinds(), ConflictEquivocation)
			if c.answer == state.AnswerNone {
				_, err := p.dte.Reply(ctx, in, state.Failed, ReplyOptions{Reason: reason.Equivocation, Effect: state.EffectNone})
				require.ErrorIs(t, err, ErrState)
				return
			}
			opt := ReplyOptions{Reason: c.reason, Effect: state.EffectFull}
			if c.send == state.Failed {
				opt.Effect = state.EffectNone
			}
			if c.send == state.Rejected {
				opt.Effect = state.EffectUnknown
			}
			st, err := p.dte.Reply(ctx, in, c.send, opt)
			require.NoError(t, err)
			res, err := statusErr(p.dtor.HandleStatus(ctx, st.Octets))
			require.NoError(t, err, "status.offer names the first offer")
			assert.Equal(t, c.send, res.State)
		})
	}
}

// HC-29: the A2A TaskState mapping.
// HC-51, HC-63: fan-out from one received hop, with and without the chain.
func TestLifecycle_HC51_FanOut(t *testing.T) {
	ctx := context.Background()
	ids := []AgentID{"spiffe://x/a", "spiffe://x/b", "spiffe://x/c", "spiffe://x/d"}
	w := newWorld(t, COSE, ids...)
	a, b := w.agent(ids[0]), w.agent(ids[1])
	out, err := a.Offer(ctx, OfferParams{To: ids[1], Dialog: "d"})
	require.NoError(t, err)
	in := receive(t, b, encodeHandoff(t, out.Handoff, CBOR), Host{})
	require.True(t, in.Accepted())
	o1, err := b.Offer(ctx, OfferParams{To: ids[2], From: in})
	require.NoError(t, err)
	o2, err := b.Offer(ctx, OfferParams{To: ids[3], From: in, OmitChain: true})
	require.NoError(t, err)
	assert.NotEqual(t, o1.Offer.Hop, o2.Offer.Hop, "each with its own hop")
	assert.True(t, o1.Offer.Prev.Equal(in.Digest()))
	assert.True(t, o2.Offer.Prev.Equal(in.Digest()))
	in1 := receive(t, w.agent(ids[2]), encodeHandoff(t, o1.Handoff, CBOR), Host{})
	in2 := receive(t, w.agent(ids[3]), encodeHandoff(t, o2.Handoff, CBOR), Host{})
	assert.Equal(t, ChainFull, in1.Chain())
	assert.Equal(t, ChainAbsent, in2.Chain(), "HC-63: chain omitted")
}

// HC-25, HC-45: an outcome that cannot be established is never guessed: no
// terminal status, the hop stays "accepted", and the operator is told.
func TestLifecycle_HC45_UnknownOutcomeFlagged(t *testing.T) {
	ctx := context.Background()
	p := newPair(t)
	_, err := p.dte.Reply(ctx, p.in, state.Accepted, ReplyOptions{})
	require.NoError(t, err)
	_, err = p.dte.Reply(ctx, p.in, state.Completed, ReplyOptions{Effect: state.EffectUnknown})
	require.ErrorIs(t, err, ErrArgument, "the option contradicts the state asked for")
	assert.Contains(t, err.Error(), "ReplyOptions.Effect")
	assert.Contains(t, p.log.kinds(), ConflictUnresolved)
	rec, ok, err := p.dte.cfg.Store.Get(ctx, replayKey(p.in.Offer()))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, string(state.Accepted), rec.State)
	assert.True(t, rec.Expires.IsZero(), "HC-34: kept until resolved")
}

// HC-55 as a standalone check, for both directions of a hop.
func TestVerifyStatus_HC55(t *testing.T) {
	p := newPair(t)
	mk := func(mod func(*Status)) Signed {
		s := &Status{Hop: p.out.Offer.Hop, Offer: p.out.Digest, Iss: idB, Aud: idA, Iat: TimeOf(p.w.clock.Now()), State: state.Completed}
		mod(s)
		return signStatus(t, p.w, s)
	}
	ok := func(s Signed) error {
		_, err := VerifyStatus(s, p.out.Handoff.Offer, p.w.trust, Limits{})
		return err
	}
	assert.NoError(t, ok(mk(func(*Status) {})))
	assert.NoError(t, ok(mk(func(s *Status) { s.State, s.Iss, s.Aud = state.Canceled, idA, idB })), "canceled comes from offer.iss")
	for name, mod := range map[string]func(*Status){
		"canceled from the delegate":   func(s *Status) { s.State = state.Canceled },
		"completed from the delegator": func(s *Status) { s.Iss, s.Aud = idA, idB },
		"wrong aud":                    func(s *Status) { s.Aud = idB },
		"wrong hop":                    func(s *Status) { s.Hop = "AAAAAAAAAAAAAAAAAAAAAA" },
		"wrong offer digest":           func(s *Status) { s.Offer = digest.SHA256(nil) },
	} {
		err := ok(mk(mod))
		assert.ErrorIs(t, err, ErrRejected, name)
		assert.Equal(t, reason.Policy, ReasonOf(err), name)
	}
}

// A delegator forgets resolved hops once their retention has passed, and
// keeps unresolved ones (HC-42).
func TestLifecycle_DelegatorRecordsBounded(t *testing.T) {
	ctx := context.Background()
	p := newPair(t)
	s, err := p.dte.Reply(ctx, p.in, state.Completed, ReplyOptions{Effect: state.EffectFull})
	require.NoError(t, err)
	_, err = statusErr(p.dtor.HandleStatus(ctx, s.Octets))
	require.NoError(t, err)
	open, err := p.dtor.Offer(ctx, OfferParams{To: idB, Dialog: "d"})
	require.NoError(t, err)
	p.w.clock.Add(25 * time.Hour)
	_, err = p.dtor.Offer(ctx, OfferParams{To: idB, Dialog: "d"})
	require.NoError(t, err)
	_, ok, _ := p.dtor.Hop(context.Background(), p.out.Offer.Hop)
	assert.False(t, ok, "resolved and past retention: forgotten")
	_, ok, _ = p.dtor.Hop(context.Background(), open.Offer.Hop)
	assert.True(t, ok, "unresolved: kept")
}

// HC-23 under concurrency: of many simultaneous replies for one hop on one
// Agent, exactly one "accepted" is signed.
func TestLifecycle_HC23_ConcurrentReplies(t *testing.T) {
	ctx := context.Background()
	p := newPair(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.dte.Reply(ctx, p.in, state.Accepted, ReplyOptions{}); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			} else {
				assert.ErrorIs(t, err, ErrState)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, ok)
}
