package evidence

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
)

// Issue 33: operations and approvals bound to exactly what they allow.

const (
	refunds handoff.AgentID = "spiffe://shop.example/agent/refunds-bot"
	outside handoff.AgentID = "spiffe://partner.example/agent/claims"
)

// chainWorld is triage, payments, the refunds bot and a partner's agent,
// trusting each other, on one clock: hops of one chain (triage to payments
// to the bot) and of another (the partner to the bot).
type chainWorld struct {
	t      testing.TB
	clock  *clock
	trust  *handoff.Trust
	agents map[handoff.AgentID]*handoff.Agent
	sent   map[string][]byte // packages by digest: the ancestors' resolver
}

func newChainWorld(t testing.TB) *chainWorld {
	t.Helper()
	cw := &chainWorld{t: t, clock: &clock{t: time.Unix(t0, 0)}, agents: map[handoff.AgentID]*handoff.Agent{}, sent: map[string][]byte{}}
	ids := []handoff.AgentID{triage, payments, refunds, outside}
	signers := map[handoff.AgentID]*handoff.Signer{}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range ids {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		s, err := handoff.NewSigner(k, handoff.JWS, nil)
		require.NoError(t, err)
		signers[id], keys[id] = s, []handoff.TrustedKey{s.Key()}
	}
	var err error
	cw.trust, err = handoff.NewTrust(keys)
	require.NoError(t, err)
	for _, id := range ids {
		cw.agents[id], err = handoff.NewAgent(handoff.Config{ID: id, Signer: signers[id], Trust: cw.trust, Now: cw.clock.Now,
			Store: replay.NewMemory(replay.MemoryOptions{Now: cw.clock.Now})})
		require.NoError(t, err)
	}
	return cw
}

// hand offers p from one agent to another, passing on in (nil: the start
// of a chain), and checks it as the receiver does.
func (cw *chainWorld) hand(from, to handoff.AgentID, in *handoff.Received, p Package) (*handoff.Received, *Report) {
	cw.t.Helper()
	ctx := context.Background()
	var enc []byte
	out, err := cw.agents[from].Offer(ctx, handoff.OfferParams{To: to, Dialog: "case-77", From: in, Prepare: func(o *handoff.Offer) error {
		built, err := NewBuilder(p).Build(BindingOf(o), BuildOptions{})
		if err != nil {
			return err
		}
		enc, cw.sent[built.Ref.Dig.B64()] = built.Encoded, built.Encoded
		o.Refs = append(o.Refs, built.Ref)
		return nil
	}})
	require.NoError(cw.t, err)
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(cw.t, err)
	got, err := cw.agents[to].Receive(ctx, data, handoff.Host{Dialog: "case-77"})
	require.NoError(cw.t, err)
	require.True(cw.t, got.Accepted(), "receive: %v", got.Err())
	ancestors := func(_ context.Context, r ref.Ref) (ref.Object, error) {
		if b, ok := cw.sent[r.Dig.B64()]; ok {
			return ref.Object{Octets: b}, nil
		}
		return ref.Object{}, ref.ErrUnavailable
	}
	rep, err := CheckReceived(ctx, got, Delivered{Package: enc}, CheckConfig{Now: cw.clock.Now, Artifacts: artifactSource(), Ancestors: ancestors})
	require.NoError(cw.t, err)
	return got, rep
}

// guard builds the guard of a passed report on ledger.
func (cw *chainWorld) guard(rep *Report, ledger authority.Ledger) *Guard {
	cw.t.Helper()
	require.True(cw.t, rep.Acceptable(), "findings: %+v", rep.Findings())
	g, err := NewGuard(context.Background(), rep, GuardConfig{Ledger: ledger, Now: cw.clock.Now, Trust: cw.trust})
	require.NoError(cw.t, err)
	return g
}

// Finding 1: operation ids shared one namespace across all hops. A
// delegator listed as completed an operation id of another delegator's
// hop, whose real effect was then refused as "already performed", and the
// refusal showed the other hop's record. Now an operation id names an
// effect only within its hop and the hops below it.
func TestScope_AnotherChainsCompletedActionRefusesNothing(t *testing.T) {
	ctx := context.Background()
	cw := newChainWorld(t)
	ledger := authority.NewMemory() // the refunds bot's, shared by every hop it serves
	// The partner hands the bot a package that lists "pay-7" as done.
	p := refundPackage()
	p.Completed = append(p.Completed, CompletedAction{Action: "refund.issue", External: true, OperationID: "pay-7",
		Postcondition: "refund sent", Evidence: []string{"email-receipt"}})
	_, partnerRep := cw.hand(outside, refunds, nil, p)
	cw.guard(partnerRep, ledger)
	// Payments hands the bot its own refund: its real effect "pay-7".
	atPayments, _ := cw.hand(triage, payments, nil, refundPackage())
	atBot, rep := cw.hand(payments, refunds, atPayments, refundPackage())
	g := cw.guard(rep, ledger)
	call := Call{Hop: atBot.Digest(), Action: "ledger.read", OperationID: "pay-7"}
	require.NoError(t, g.Authorize(ctx, call), "another chain's claim refuses nothing")
	err := g.Authorize(ctx, call)
	require.ErrorIs(t, err, ErrRepeated, "its own record does")
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.Equal(t, &Refusal{Action: "ledger.read", Key: "pay-7", Err: ErrRepeated}, r, "the refusal names the call's own name only")
}

// A package may mark as done only what its own hop, or an earlier hop of
// its verified chain, could have done: a completed action naming another
// hop is reported (advisory) and not recorded; one naming an earlier hop
// of the chain is recorded in that hop's scope, and refuses the effect
// below it, and nowhere else.
func TestScope_CompletedActionsWithinTheChain(t *testing.T) {
	ctx := context.Background()
	cw := newChainWorld(t)
	ledger := authority.NewMemory()
	atPayments, _ := cw.hand(triage, payments, nil, refundPackage())
	// The partner's hop: another chain.
	atPartner, _ := cw.hand(outside, refunds, nil, refundPackage())
	p := refundPackage()
	p.Completed = append(p.Completed,
		CompletedAction{Action: "refund.issue", External: true, OperationID: "pay-1", Hop: atPayments.Digest().String(),
			Postcondition: "refund sent", Evidence: []string{"email-receipt"}},
		CompletedAction{Action: "refund.issue", External: true, OperationID: "pay-2", Hop: atPartner.Digest().String(),
			Postcondition: "refund sent", Evidence: []string{"email-receipt"}})
	atBot, rep := cw.hand(payments, refunds, atPayments, p)
	require.True(t, rep.Acceptable())
	require.True(t, rep.Has(CodeOutOfScope, "/completed/2/hop"))
	require.False(t, rep.Has(CodeOutOfScope, "/completed/1/hop"))
	require.Equal(t, []digest.Digest{atPayments.Digest()}, rep.Chain())
	g := cw.guard(rep, ledger)
	require.ErrorIs(t, g.Authorize(ctx, Call{Hop: atBot.Digest(), Action: "ledger.read", OperationID: "pay-1"}), ErrRepeated)
	require.NoError(t, g.Authorize(ctx, Call{Hop: atBot.Digest(), Action: "ledger.read", OperationID: "pay-2"}), "not recorded")
	rs, err := ledger.Lookup(ctx, "pay-1")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, atPayments.Digest().String(), rs[0].Hop, "recorded in the scope of the hop that did it")
	rs, err = ledger.Lookup(ctx, "pay-2")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, atBot.Digest().String(), rs[0].Hop, "only the bot's own effect")
	// The partner's hop performs "pay-1": the payments chain's record is
	// not its business.
	partnerRep := func() *Report { _, r := cw.hand(outside, refunds, nil, refundPackage()); return r }()
	other := cw.guard(partnerRep, ledger)
	require.NoError(t, other.Authorize(ctx, Call{Hop: other.Hop(), Action: "ledger.read", OperationID: "pay-1"}))

	// Check, without the chain, cannot place a hop: advisory.
	built, bind := newWorld(t, handoff.JWS, nil).build(p, BuildOptions{})
	_ = bind
	plain, err := Check(ctx, nil, Delivered{Package: built.Encoded}, CheckConfig{Now: cw.clock.Now, Artifacts: artifactSource(), Unbound: true})
	require.NoError(t, err)
	require.True(t, plain.Passed())
	require.True(t, plain.Has(CodeOutOfScope, "/completed/1/hop"))
	require.True(t, plain.Has(CodeOutOfScope, "/completed/2/hop"))
}

// The key of a call is the SHA-256 of the JCS form of its hop, action,
// tool, names and arguments' digest, computed here independently (the
// gowebpki/jcs library over a map): stable across encodings of the same
// arguments, changed by anything else.
func TestCallKey(t *testing.T) {
	hop := digest.SHA256([]byte("an offer"))
	c := Call{Hop: hop, Action: "refund.issue", Tool: "refund", Args: []byte(`{"invoice":"INV-1042","amount":640}`), OperationID: "op-1"}
	want := func(c Call, args string) digest.Digest {
		m := map[string]string{"action": c.Action, "args": args, "hop": c.Hop.String(), "idempotency_key": c.IdempotencyKey,
			"operation_id": c.OperationID, "tool": c.Tool}
		enc, err := json.Marshal(m)
		require.NoError(t, err)
		canon, err := jcs.Transform(enc)
		require.NoError(t, err)
		return digest.SHA256(canon)
	}
	argsCanon, err := jcs.Transform(c.Args)
	require.NoError(t, err)
	k, err := c.Key()
	require.NoError(t, err)
	require.Equal(t, want(c, digest.SHA256(argsCanon).String()), k)
	// Another encoding of the same arguments: the same key.
	same := c
	same.Args = []byte(" {\"amount\": 6.4e2 , \"invoice\" : \"INV-\\u0031042\"}\n")
	k2, err := same.Key()
	require.NoError(t, err)
	require.Equal(t, k, k2)
	// Anything else: another key.
	for name, mut := range map[string]func(*Call){
		"args":   func(c *Call) { c.Args = []byte(`{"invoice":"INV-1042","amount":1000000}`) },
		"tool":   func(c *Call) { c.Tool = "wire" },
		"action": func(c *Call) { c.Action = "refund.void" },
		"op":     func(c *Call) { c.OperationID = "op-2" },
		"key":    func(c *Call) { c.IdempotencyKey = "op-1" },
		"hop":    func(c *Call) { c.Hop = digest.SHA256([]byte("another offer")) },
		"none":   func(c *Call) { c.Args = nil },
		"null":   func(c *Call) { c.Args = []byte("null") },
	} {
		o := c
		mut(&o)
		ko, err := o.Key()
		require.NoError(t, err, name)
		require.NotEqual(t, k, ko, name)
	}
	none, err := ArgsDigest(nil)
	require.NoError(t, err)
	require.Equal(t, digest.SHA256(nil), none, "no arguments: the digest of no octets")
	for _, bad := range [][]byte{[]byte(`{"a":1,"a":2}`), []byte("{\"a\":\"\xff\"}"), []byte(`{"a":`), bytes.Repeat([]byte(" "), MaxArgsSize+1)} {
		_, err := Call{Hop: hop, Action: "a", Args: bad}.Key()
		require.ErrorIs(t, err, ErrMalformedCall)
	}
	_, err = Call{Hop: hop, Action: "a\xff"}.Key()
	require.ErrorIs(t, err, ErrMalformedCall)
}

// doGuard is a guard of the refund package on its own ledger, and a tool
// that counts its runs.
type doGuard struct {
	hopGuard
	runs atomic.Int32
}

func newDoGuard(t *testing.T, ledger authority.Ledger) *doGuard {
	t.Helper()
	return &doGuard{hopGuard: newHopGuard(t, newWorld(t, handoff.JWS, nil), refundPackage(), ledger)}
}

func (d *doGuard) refund(args string) Call {
	return Call{Hop: d.in.Digest(), Action: "refund.issue", Tool: "refund", Args: []byte(args), OperationID: "refund-INV-1042"}
}

// tool is the effect: it counts its runs and answers with its arguments.
func (d *doGuard) tool(c Call) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		d.runs.Add(1)
		return append([]byte("refunded "), c.Args...), nil
	}
}

// The idempotency key contract: one effect; the same call again gets the
// recorded outcome (replayed), never a second run; the same operation with
// other arguments is a conflict; a call in flight is "in flight".
func TestDo_KeyContract(t *testing.T) {
	ctx := context.Background()
	d := newDoGuard(t, authority.NewMemory())
	read := Call{Hop: d.in.Digest(), Action: "ledger.read", Tool: "ledger", Args: []byte(`{"invoice":"INV-1042"}`)}
	res, err := d.Do(ctx, read, d.tool(read))
	require.NoError(t, err)
	require.Equal(t, `refunded {"invoice":"INV-1042"}`, string(res))
	// Retransmitted, retried: replayed with the first outcome.
	for range 3 {
		_, err = d.Do(ctx, read, d.tool(read))
		require.ErrorIs(t, err, ErrReplayed)
		require.ErrorIs(t, err, ErrRepeated)
		var r *Refusal
		require.True(t, errors.As(err, &r))
		require.Equal(t, res, r.Outcome.Result)
		require.Empty(t, r.Outcome.Error)
	}
	require.Equal(t, int32(1), d.runs.Load(), "one effect")
	// Other arguments, no operation id: another call.
	other := read
	other.Args = []byte(`{"invoice":"INV-1043"}`)
	_, err = d.Do(ctx, other, d.tool(other))
	require.NoError(t, err)
	require.Equal(t, int32(2), d.runs.Load())
	// The same operation id with other arguments: a conflict.
	named := read
	named.OperationID = "read-1"
	_, err = d.Do(ctx, named, d.tool(named))
	require.NoError(t, err)
	named.Args = []byte(`{"invoice":"INV-9999"}`)
	_, err = d.Do(ctx, named, d.tool(named))
	require.ErrorIs(t, err, ErrIdempotencyConflict)
	require.NotErrorIs(t, err, ErrReplayed)
	// A call in flight: the second presentation waits for nothing and runs
	// nothing.
	slow := read
	slow.OperationID = "read-slow"
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := d.Do(ctx, slow, func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte("slow"), nil
		})
		done <- err
	}()
	<-started
	_, err = d.Do(ctx, slow, d.tool(slow))
	require.ErrorIs(t, err, ErrInFlight)
	close(release)
	require.NoError(t, <-done)
	_, err = d.Do(ctx, slow, d.tool(slow))
	require.ErrorIs(t, err, ErrReplayed)
	require.Equal(t, int32(3), d.runs.Load())
	// Audit tells the suppressed retries from the effects.
	rs, err := d.ledger.Lookup(ctx, "read-slow")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, 2, rs[0].Replays)
	require.Equal(t, "slow", string(rs[0].Outcome.Result))
	// Authorize of the same call: the effect is recorded, and replayed.
	plain := read
	plain.OperationID = "read-plain"
	require.NoError(t, d.Authorize(ctx, plain))
	_, err = d.Do(ctx, plain, d.tool(plain))
	require.ErrorIs(t, err, ErrReplayed)
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.Nil(t, r.Outcome, "Authorize records no outcome")
	// Malformed arguments: refused, nothing runs.
	bad := read
	bad.Args = []byte(`{"invoice":`)
	_, err = d.Do(ctx, bad, d.tool(bad))
	require.ErrorIs(t, err, ErrMalformedCall)
	require.Equal(t, int32(3), d.runs.Load())
}

// What the effect ended with is its outcome, an error included; the
// outcome is recorded even when the caller's context ended meanwhile.
func TestDo_OutcomeRecorded(t *testing.T) {
	d := newDoGuard(t, authority.NewMemory())
	c := Call{Hop: d.in.Digest(), Action: "ledger.read", Args: []byte(`{}`)}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := d.Do(ctx, c, func(context.Context) ([]byte, error) {
		cancel() // the client went away while the effect ran
		return nil, errors.New("gateway declined: over limit")
	})
	require.EqualError(t, err, "gateway declined: over limit")
	_, err = d.Do(context.Background(), c, d.tool(c))
	require.ErrorIs(t, err, ErrReplayed)
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.Equal(t, "gateway declined: over limit", r.Outcome.Error)
	require.Equal(t, int32(0), d.runs.Load())
}

// failingSettle is a ledger that loses every outcome: its process dies
// between the claim and the record, as far as the ledger can tell.
type failingSettle struct{ authority.Ledger }

func (failingSettle) Settle(context.Context, authority.Effect, authority.Outcome) error {
	return authority.ErrUnavailable
}

// A crash between the claim and the record never allows a second effect:
// the claim is durable, and after a restart the call whose outcome is
// unknown stays "in flight" and never runs again.
func TestDo_CrashBetweenClaimAndRecord(t *testing.T) {
	ctx := context.Background()
	ledger := authority.NewMemory()
	d := newDoGuard(t, failingSettle{ledger})
	c := d.refund(`{"amount":640}`)
	c.Action = "ledger.read" // allowed: no approval needed here
	res, err := d.Do(ctx, c, d.tool(c))
	require.ErrorIs(t, err, ErrUnsettled)
	require.Equal(t, `refunded {"amount":640}`, string(res), "the effect's result, which ran")
	// A panic in the tool: the claim stays too.
	p := c
	p.OperationID = "refund-INV-1043"
	require.Panics(t, func() {
		_, _ = d.Do(ctx, p, func(context.Context) ([]byte, error) { panic("tool crashed") })
	})
	// Restarted: a new guard on the same ledger.
	again, err := NewGuard(ctx, d.rep, GuardConfig{Ledger: ledger, Now: d.w.clock.Now})
	require.NoError(t, err)
	for _, call := range []Call{c, p} {
		for range 3 {
			_, err = again.Do(ctx, call, d.tool(call))
			require.ErrorIs(t, err, ErrInFlight)
		}
	}
	require.Equal(t, int32(1), d.runs.Load(), "one effect, never a second")
	rs, err := ledger.Lookup(ctx, "refund-INV-1042")
	require.NoError(t, err)
	require.True(t, rs[0].InFlight)
}

// Two replicas racing one call: one effect, every other presentation in
// flight or replayed with its outcome. Racing one operation with other
// arguments: one effect, every other a conflict.
func TestDo_ReplicasRace(t *testing.T) {
	ctx := context.Background()
	ledger := authority.NewMemory()
	d := newDoGuard(t, ledger)
	replica, err := NewGuard(ctx, d.rep, GuardConfig{Ledger: ledger, Now: d.w.clock.Now})
	require.NoError(t, err)
	guards := []*Guard{d.Guard, replica}
	race := func(call func(i int) Call) []error {
		errs := make([]error, 16)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range errs {
			wg.Go(func() {
				<-start
				c := call(i)
				_, errs[i] = guards[i%2].Do(ctx, c, d.tool(c))
			})
		}
		close(start)
		wg.Wait()
		return errs
	}
	read := func(op string, args string) Call {
		return Call{Hop: d.in.Digest(), Action: "ledger.read", Tool: "ledger", Args: []byte(args), OperationID: op}
	}
	errs := race(func(int) Call { return read("read-1", `{"invoice":"INV-1042"}`) })
	require.Equal(t, int32(1), d.runs.Load())
	for _, err := range errs {
		if err != nil {
			require.True(t, errors.Is(err, ErrInFlight) || errors.Is(err, ErrReplayed), "%v", err)
		}
	}
	errs = race(func(i int) Call { return read("read-2", `{"invoice":"INV-`+string(rune('A'+i))+`"}`) })
	require.Equal(t, int32(2), d.runs.Load())
	n := 0
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, ErrIdempotencyConflict)
			n++
		}
	}
	require.Equal(t, 15, n)
}

// Finding 4 and the resumptions of finding 3, in the guard: an approval
// binds the hop, the action, the operation, the tool and the digest of the
// paused call's arguments. A resumption that differs is refused; the call
// that paused runs once, however often and however concurrently it is
// resumed.
func TestDo_ApprovalBoundToTheCall(t *testing.T) {
	ctx := context.Background()
	d := newDoGuard(t, authority.NewMemory())
	c := d.refund(`{"invoice":"INV-1042","amount":10}`)
	_, err := d.Do(ctx, c, d.tool(c))
	require.ErrorIs(t, err, ErrApprovalRequired)
	var r *Refusal
	require.True(t, errors.As(err, &r))
	req := *r.Pending
	argsD, err := ArgsDigest(c.Args)
	require.NoError(t, err)
	key, err := c.Key()
	require.NoError(t, err)
	require.Equal(t, "refund", req.Tool)
	require.Equal(t, argsD, req.Args, "the owner is shown the arguments' digest")
	require.Equal(t, c.Args, req.Arguments, "and the arguments")
	require.Equal(t, key, req.Key)
	_, err = d.ApproveLocal(ctx, req.Grant(), "console:finance-lead")
	require.NoError(t, err)
	// Resumed as a refund of 1,000,000, or as another tool: refused.
	big := d.refund(`{"invoice":"INV-1042","amount":1000000}`)
	wire := c
	wire.Tool = "wire"
	for _, other := range []Call{big, wire} {
		_, err = d.Do(ctx, other, d.tool(other))
		require.ErrorIs(t, err, ErrApprovalMismatch)
		require.NotErrorIs(t, err, ErrApprovalRequired)
	}
	// Resumed as itself, 8 times at once and then again: one run.
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 8 {
		wg.Go(func() {
			if _, err := d.Do(ctx, c, d.tool(c)); err == nil {
				ok.Add(1)
			} else if !errors.Is(err, ErrInFlight) && !errors.Is(err, ErrReplayed) {
				t.Errorf("resumption: %v", err)
			}
		})
	}
	wg.Wait()
	_, err = d.Do(ctx, c, d.tool(c))
	require.ErrorIs(t, err, ErrReplayed)
	require.Equal(t, int32(1), ok.Load())
	require.Equal(t, int32(1), d.runs.Load())
	as, err := d.ledger.Approvals(ctx, d.hopKey)
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Equal(t, 0, as[0].Remaining, "used once")
	require.Equal(t, argsD.String(), as[0].Args)
	require.Equal(t, "refund", as[0].Tool)
}

// A call without an operation id is named by its key: it pauses, and its
// approval binds that key.
func TestDo_UnnamedMustAskBoundByKey(t *testing.T) {
	ctx := context.Background()
	d := newDoGuard(t, authority.NewMemory())
	c := d.refund(`{"amount":10}`)
	c.OperationID = ""
	_, err := d.Do(ctx, c, d.tool(c))
	var r *Refusal
	require.True(t, errors.As(err, &r))
	require.ErrorIs(t, err, ErrApprovalRequired)
	key, err := c.Key()
	require.NoError(t, err)
	require.Equal(t, key.String(), r.Pending.Grant().OperationID)
	_, err = d.ApproveLocal(ctx, r.Pending.Grant(), "console:finance-lead")
	require.NoError(t, err)
	other := d.refund(`{"amount":11}`)
	other.OperationID = ""
	_, err = d.Do(ctx, other, d.tool(other))
	require.ErrorIs(t, err, ErrApprovalRequired, "another key: another operation, not approved")
	_, err = d.Do(ctx, c, d.tool(c))
	require.NoError(t, err)
	_, err = d.Do(ctx, c, d.tool(c))
	require.ErrorIs(t, err, ErrReplayed)
	require.Equal(t, int32(1), d.runs.Load())
}

// signedWorld is a guard whose Trust binds finance-lead to key.
func signedWorld(t *testing.T) (*doGuard, *ecdsa.PrivateKey) {
	t.Helper()
	w := newWorld(t, handoff.JWS, nil)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	trust := map[handoff.AgentID][]handoff.TrustedKey{"finance-lead": {{Public: key.Public(), Alg: jws.ES256}}}
	for id, s := range w.signers {
		trust[id] = []handoff.TrustedKey{s.Key()}
	}
	w.trust, err = handoff.NewTrust(trust)
	require.NoError(t, err)
	return &doGuard{hopGuard: newHopGuard(t, w, refundPackage(), authority.NewMemory())}, key
}

// Finding 2: one signed approval was used twice. Its id was the SHA-256 of
// its octets, and its ECDSA high-S twin (r, n-s), which anyone relaying it
// can make without a key, verified and was recorded as a second grant.
// Now an approval is what it says: the twin, a second signature and a
// re-encoding of one statement are one grant, with one use.
func TestApproveSigned_OneStatementOneGrant(t *testing.T) {
	ctx := context.Background()
	d, key := signedWorld(t)
	now := d.w.clock.Now()
	st := ApprovalStatement{Type: ApprovalType, Hop: d.in.Digest().String(), Action: "refund.issue", Uses: 1,
		Approver: "finance-lead", Iat: now.Unix(), Exp: now.Unix() + 60}
	signed, err := SignApproval(st, key, jws.ES256)
	require.NoError(t, err)
	parts := strings.Split(string(signed), ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	twinSig, err := ecsig.Twin(jws.ES256, sig)
	require.NoError(t, err)
	twin := []byte(parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(twinSig))
	require.NotEqual(t, signed, twin)
	// The same statement signed again (another nonce), and re-encoded:
	// members in another order, white space, an escape, uses left out.
	kid, err := jws.Thumbprint(key.Public())
	require.NoError(t, err)
	payload, err := json.Marshal(st)
	require.NoError(t, err)
	again, err := jws.Sign(payload, key, jws.ES256, kid, rand.Reader)
	require.NoError(t, err)
	reencoded, err := jws.Sign([]byte(` { "exp": `+itoa(st.Exp)+`, "approver":"finance-lead", "action":"refund\u002eissue",
		"hop":"`+st.Hop+`", "iat":`+itoa(st.Iat)+`, "type":"approval" } `), key, jws.ES256, kid, nil)
	require.NoError(t, err)
	var ids []string
	for _, s := range [][]byte{signed, twin, again, reencoded} {
		a, err := d.ApproveSigned(ctx, s)
		require.NoError(t, err)
		ids = append(ids, a.ID)
	}
	require.Equal(t, []string{ids[0], ids[0], ids[0], ids[0]}, ids, "one grant")
	require.NoError(t, d.authorize("refund.issue", "op-1", ""))
	require.ErrorIs(t, d.authorize("refund.issue", "op-2", ""), ErrApprovalRequired, "one use")
	for _, s := range [][]byte{twin, again, reencoded} {
		_, err := d.ApproveSigned(ctx, s)
		require.NoError(t, err)
		require.ErrorIs(t, d.authorize("refund.issue", "op-3", ""), ErrApprovalRequired, "presented again restores nothing")
	}
	as, err := d.ledger.Approvals(ctx, d.hopKey)
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Equal(t, signed, as[0].Evidence, "the first presentation is the evidence")
	// A statement with a member named twice is refused.
	dup, err := jws.Sign([]byte(`{"type":"approval","hop":"`+st.Hop+`","action":"refund.issue","action":"card.charge","approver":"finance-lead","iat":`+
		itoa(st.Iat)+`,"exp":`+itoa(st.Exp)+`}`), key, jws.ES256, kid, nil)
	require.NoError(t, err)
	_, err = d.ApproveSigned(ctx, dup)
	require.ErrorIs(t, err, ErrApproval)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A signed approval of one call (ApprovalRequest.Statement) binds its tool
// and its arguments' digest as a local one does.
func TestApproveSigned_BoundToTheCall(t *testing.T) {
	ctx := context.Background()
	d, key := signedWorld(t)
	c := d.refund(`{"amount":10}`)
	_, err := d.Do(ctx, c, d.tool(c))
	var r *Refusal
	require.True(t, errors.As(err, &r))
	now := d.w.clock.Now()
	signed, err := SignApproval(r.Pending.Statement(now, now.Add(time.Minute)), key, jws.ES256)
	require.NoError(t, err)
	_, err = d.ApproveSigned(ctx, signed)
	require.NoError(t, err)
	big := d.refund(`{"amount":1000000}`)
	_, err = d.Do(ctx, big, d.tool(big))
	require.ErrorIs(t, err, ErrApprovalMismatch)
	_, err = d.Do(ctx, c, d.tool(c))
	require.NoError(t, err)
	require.Equal(t, int32(1), d.runs.Load())
}

// Who authorized this: the ledger records, with an effect done at depth
// 3, the hop and the chain it came through, and who approved it; one
// query answers.
func TestAudit_Depth3(t *testing.T) {
	ctx := context.Background()
	cw := newChainWorld(t)
	ledger := authority.NewMemory()
	atPayments, _ := cw.hand(triage, payments, nil, refundPackage())
	atBot, _ := cw.hand(payments, refunds, atPayments, refundPackage())
	atPartner, rep := cw.hand(refunds, outside, atBot, refundPackage())
	g := cw.guard(rep, ledger)
	c := Call{Hop: atPartner.Digest(), Action: "refund.issue", Tool: "refund", Args: []byte(`{"amount":640}`), OperationID: "re-1042"}
	_, err := g.Do(ctx, c, func(context.Context) ([]byte, error) { return nil, nil })
	var r *Refusal
	require.True(t, errors.As(err, &r))
	_, err = g.ApproveLocal(ctx, r.Pending.Grant(), "console:finance-lead")
	require.NoError(t, err)
	_, err = g.Do(ctx, c, func(context.Context) ([]byte, error) { return []byte("re_77"), nil })
	require.NoError(t, err)
	trails, err := authority.Audit(ctx, ledger, "re-1042")
	require.NoError(t, err)
	require.Len(t, trails, 1)
	got := trails[0]
	wantChain := []string{atPayments.Digest().String(), atBot.Digest().String()}
	require.Equal(t, atPartner.Digest().String(), got.Record.Hop)
	require.Equal(t, wantChain, got.Record.Chain)
	require.NotNil(t, got.Approval)
	require.Equal(t, "finance-lead", got.Approval.Approver)
	require.Equal(t, []byte("console:finance-lead"), got.Approval.Evidence)
	require.Equal(t, wantChain, got.Approval.Chain)
	require.Equal(t, "re_77", string(got.Record.Outcome.Result))
	key, err := c.Key()
	require.NoError(t, err)
	require.Equal(t, key.String(), got.Record.Key)
	sum := sha256.Sum256([]byte(`{"amount":640}`))
	require.Equal(t, digest.Digest{Alg: digest.SHA256Alg, Val: sum[:]}.String(), got.Record.Args)
}
