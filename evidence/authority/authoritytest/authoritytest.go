// Package authoritytest is the conformance suite for authority.Ledger
// implementations. Every ledger, in this repository or outside it, is
// expected to pass Run; the contract it checks is the one written in the
// documentation of package authority.
//
//	func TestLedger(t *testing.T) {
//		authoritytest.Run(t, func(t *testing.T) authority.Ledger {
//			return myledger.New(...)
//		}, authoritytest.Options{})
//	}
package authoritytest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/evidence/authority"
)

// OpenFunc returns a new, empty ledger.
type OpenFunc func(t *testing.T) authority.Ledger

// Options adapt the suite to a backend.
type Options struct {
	// Reopen, when set, closes l and opens it again on the same storage:
	// the suite then checks that every record survives, a claim whose
	// process stopped between the claim and its outcome included.
	Reopen func(t *testing.T, l authority.Ledger) authority.Ledger
	// Replica, when set, opens a second ledger on the storage of l, as a
	// second process of the same agent would: the suite then checks that
	// the two refuse each other's effects, answer each other's calls
	// presented again, and share one approval's uses.
	Replica func(t *testing.T, l authority.Ledger) authority.Ledger
	// Where, when set, names the storage of l for another process (a
	// file, a key prefix, a table name), which opens it with the function
	// the test binary's TestMain gives ChildMain: the suite then claims a
	// call in that process, kills it (SIGKILL) between the claim and the
	// record of its outcome, and checks that l answers the call "in
	// flight" and never lets it be performed again.
	Where func(l authority.Ledger) string
}

// childEnv names, in a child process of the suite, the storage it opens.
const childEnv = "HANDOFF_AUTHORITYTEST_CHILD"

// lostCall is the call a child claims before it is killed.
func lostCall() authority.Effect {
	return call(hopC, []string{hopA, hopB}, "op-killed", "sha-256:k-killed", "sha-256:args")
}

// ChildMain makes the test binary, started by the suite as a child
// process (Options.Where), claim lostCall on the ledger open returns for
// the storage named, say so on stdout, and wait to be killed; in any other
// process it returns at once. Call it first in TestMain.
func ChildMain(open func(where string) (authority.Ledger, error)) {
	where, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	l, err := open(where)
	if err == nil {
		err = l.Perform(context.Background(), lostCall())
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("claimed")
	select {} // killed here, between the claim and its outcome
}

var t0 = time.Unix(1793000000, 0).UTC()

// Hops: A, B and C form one chain (A outermost, C at depth 3); X came
// through another.
const hopA, hopB, hopC, hopX = "sha-256:hopA", "sha-256:hopB", "sha-256:hopC", "sha-256:hopX"

func effect(action, op, key string) authority.Effect {
	return authority.Effect{Hop: hopA, Action: action, OperationID: op, IdempotencyKey: key, At: t0}
}

// call is a claim of a call of refund.issue keyed k, as evidence.Guard.Do
// makes it.
func call(hop string, chain []string, op, key, args string) authority.Effect {
	return authority.Effect{Hop: hop, Chain: chain, Action: "refund.issue", Tool: "refund", OperationID: op,
		Key: key, Args: args, Claim: true, At: t0}
}

func approval(id, action string) authority.Approval {
	return authority.Approval{ID: id, Hop: hopA, Action: action, Approver: "finance-lead",
		Issued: t0.Add(-time.Minute), Expires: t0.Add(time.Hour), Source: authority.SourceOperator}
}

func lookup(t *testing.T, l authority.Ledger, name string) []authority.Record {
	t.Helper()
	rs, err := l.Lookup(context.Background(), name)
	require.NoError(t, err)
	return rs
}

// refusal returns the *authority.Refusal err is, requiring one.
func refusal(t *testing.T, err error, want error) *authority.Refusal {
	t.Helper()
	require.ErrorIs(t, err, want)
	var r *authority.Refusal
	require.True(t, errors.As(err, &r), "%v", err)
	return r
}

// Run runs the suite.
func Run(t *testing.T, open OpenFunc, opt Options) {
	ctx := context.Background()
	t.Run("EffectRecordedOnce", func(t *testing.T) {
		l := open(t)
		require.NoError(t, l.Perform(ctx, effect("refund.issue", "op-1", "")))
		err := l.Perform(ctx, effect("refund.issue", "op-1", ""))
		r := refusal(t, err, authority.ErrRepeated)
		require.Equal(t, authority.Record{Name: "op-1", Hop: hopA, Action: "refund.issue", At: t0}, r.Held)
		e := effect("ledger.read", "op-1", "")
		require.ErrorIs(t, l.Perform(ctx, e), authority.ErrRepeated, "another action: the same effect")
		require.Equal(t, []authority.Record{{Name: "op-1", Hop: hopA, Action: "refund.issue", At: t0}}, lookup(t, l, "op-1"))
		require.Empty(t, lookup(t, l, "op-2"))
	})
	// Finding 1 of issue 33: an operation id names an effect only within
	// the scope that could have done it. A name recorded on a hop of
	// another chain does not refuse the same name here, and is not shown;
	// one recorded by an earlier hop of the effect's own chain refuses it,
	// showing that hop and the name only.
	t.Run("ScopedByHop", func(t *testing.T) {
		l := open(t)
		require.NoError(t, l.Perform(ctx, effect("refund.issue", "op-1", "")))
		other := effect("refund.issue", "op-1", "")
		other.Hop = hopX
		require.NoError(t, l.Perform(ctx, other), "another chain's hop: another effect")
		require.ErrorIs(t, l.Perform(ctx, other), authority.ErrRepeated)
		below := effect("refund.issue", "", "op-1")
		below.Hop, below.Chain = hopC, []string{hopA, hopB}
		r := refusal(t, l.Perform(ctx, below), authority.ErrRepeated)
		require.Equal(t, authority.Record{Name: "op-1", Hop: hopA}, r.Held, "an earlier hop's record: its hop and the name only")
		require.NotErrorIs(t, r, authority.ErrReplayed)
		// A hop below X's is refused by X's record, never by A's.
		belowX := below
		belowX.Chain = []string{hopX}
		r = refusal(t, l.Perform(ctx, belowX), authority.ErrRepeated)
		require.Equal(t, hopX, r.Held.Hop)
		// A hop whose chain holds neither performs it.
		alone := below
		alone.Chain = []string{hopB}
		require.NoError(t, l.Perform(ctx, alone))
		rs := lookup(t, l, "op-1")
		require.Len(t, rs, 3)
		require.Equal(t, []string{hopA, hopC, hopX}, []string{rs[0].Hop, rs[1].Hop, rs[2].Hop})
		require.Equal(t, []string{hopB}, rs[1].Chain)
	})
	t.Run("NamesCompareExactlyInOneNamespace", func(t *testing.T) {
		l := open(t)
		require.NoError(t, l.Perform(ctx, effect("a", "op-1", "")))
		// The same value as the other kind of name is the same effect.
		require.ErrorIs(t, l.Perform(ctx, effect("a", "", "op-1")), authority.ErrRepeated)
		require.NoError(t, l.Perform(ctx, effect("a", "", "key-1")))
		require.ErrorIs(t, l.Perform(ctx, effect("a", "key-1", "")), authority.ErrRepeated)
		// Other octets are other effects: no case folding, no trimming.
		require.NoError(t, l.Perform(ctx, effect("a", "OP-1", "")))
		require.NoError(t, l.Perform(ctx, effect("a", "op-1 ", "")))
		require.NoError(t, l.Perform(ctx, effect("a", "\u00e9", "")))
		require.NoError(t, l.Perform(ctx, effect("a", "e\u0301", "")))
	})
	t.Run("TwoNamesAllOrNothing", func(t *testing.T) {
		l := open(t)
		require.NoError(t, l.Perform(ctx, effect("a", "op-1", "key-1")))
		for _, n := range []string{"op-1", "key-1"} {
			require.Len(t, lookup(t, l, n), 1, n)
		}
		// One name recorded: refused, and the other is not recorded.
		require.ErrorIs(t, l.Perform(ctx, effect("a", "op-2", "key-1")), authority.ErrRepeated)
		require.Empty(t, lookup(t, l, "op-2"))
		require.NoError(t, l.Perform(ctx, effect("a", "op-2", "op-2")))
	})
	t.Run("ConcurrentOneWins", func(t *testing.T) {
		l := open(t)
		raceOne(t, []authority.Ledger{l}, func(i int) authority.Effect { return effect("a", "op-race", "") }, authority.ErrRepeated)
	})
	t.Run("Invalid", func(t *testing.T) {
		l := open(t)
		for _, e := range []authority.Effect{{Action: "a", OperationID: "x"}, {Hop: hopA, OperationID: "x"}, {Hop: hopA, Action: "a"},
			{Hop: hopA, Action: "a", OperationID: "x", Claim: true}, {Hop: hopA, Action: "a", OperationID: "x", Chain: []string{""}},
			{Hop: hopA, Action: "a", OperationID: "x", Chain: []string{hopA}}} {
			require.ErrorIs(t, l.Perform(ctx, e), authority.ErrInvalid)
		}
		bad := approval("ap", "a")
		bad.Expires = bad.Issued
		require.ErrorIs(t, l.Grant(ctx, bad), authority.ErrInvalid)
		bad = approval("ap", "a")
		bad.OperationID, bad.Uses = "op-1", 2
		require.ErrorIs(t, l.Grant(ctx, bad), authority.ErrInvalid)
		bad = approval("", "a")
		require.ErrorIs(t, l.Grant(ctx, bad), authority.ErrInvalid)
		require.ErrorIs(t, l.Settle(ctx, effect("a", "op-1", ""), authority.Outcome{At: t0}), authority.ErrInvalid, "no key")
	})
	// The idempotency key contract: the same call presented again is in
	// flight until settled, then replayed with its outcome, and counted;
	// the name under another call is a conflict.
	t.Run("KeyedCallInFlightReplayedConflict", func(t *testing.T) {
		l := open(t)
		first := call(hopA, nil, "op-1", "sha-256:k1", "sha-256:args1")
		require.NoError(t, l.Perform(ctx, first))
		r := refusal(t, l.Perform(ctx, first), authority.ErrInFlight)
		require.True(t, r.Held.InFlight)
		require.ErrorIs(t, r, authority.ErrRepeated)
		other := call(hopA, nil, "op-1", "sha-256:k2", "sha-256:args2")
		r = refusal(t, l.Perform(ctx, other), authority.ErrKeyConflict)
		require.Nil(t, r.Held.Outcome)
		out := authority.Outcome{Result: []byte(`{"refund":"re_1"}`), At: t0.Add(time.Second)}
		require.NoError(t, l.Settle(ctx, first, out))
		require.NoError(t, l.Settle(ctx, first, out), "the same outcome again")
		require.ErrorIs(t, l.Settle(ctx, first, authority.Outcome{Error: "boom", At: t0}), authority.ErrConflict)
		require.ErrorIs(t, l.Settle(ctx, other, out), authority.ErrConflict, "not this call's claim")
		r = refusal(t, l.Perform(ctx, first), authority.ErrReplayed)
		require.False(t, r.Held.InFlight)
		require.Equal(t, out.Result, r.Held.Outcome.Result)
		require.True(t, out.At.Equal(r.Held.Outcome.At))
		// Presented unclaimed (evidence.Guard.Authorize): replayed too.
		plain := first
		plain.Claim = false
		refusal(t, l.Perform(ctx, plain), authority.ErrReplayed)
		refusal(t, l.Perform(ctx, other), authority.ErrKeyConflict)
		rs := lookup(t, l, "op-1")
		require.Len(t, rs, 1)
		require.Equal(t, 3, rs[0].Replays, "three retries suppressed, one effect")
		require.Equal(t, "sha-256:k1", rs[0].Key)
		require.Equal(t, "sha-256:args1", rs[0].Args)
		require.Equal(t, "refund", rs[0].Tool)
		// A name recorded without a key is plain repeated, as is the key of
		// an earlier hop's call.
		require.NoError(t, l.Perform(ctx, effect("refund.issue", "op-2", "")))
		r = refusal(t, l.Perform(ctx, call(hopA, nil, "op-2", "sha-256:k3", "")), authority.ErrRepeated)
		require.NotErrorIs(t, r, authority.ErrReplayed)
		require.NotErrorIs(t, r, authority.ErrKeyConflict)
		r = refusal(t, l.Perform(ctx, call(hopB, []string{hopA}, "op-1", "sha-256:k1", "sha-256:args1")), authority.ErrRepeated)
		require.NotErrorIs(t, r, authority.ErrReplayed)
		require.Nil(t, r.Held.Outcome)
		require.Equal(t, 3, lookup(t, l, "op-1")[0].Replays)
	})
	t.Run("SettleAllNamesAtOnce", func(t *testing.T) {
		l := open(t)
		c := call(hopA, []string{hopX}, "op-1", "sha-256:k1", "")
		c.IdempotencyKey = "idem-1"
		require.NoError(t, l.Perform(ctx, c))
		out := authority.Outcome{Error: "gateway timeout", At: t0}
		require.NoError(t, l.Settle(ctx, c, out))
		for _, n := range []string{"op-1", "idem-1"} {
			rs := lookup(t, l, n)
			require.Len(t, rs, 1)
			require.False(t, rs[0].InFlight)
			require.Equal(t, "gateway timeout", rs[0].Outcome.Error)
			require.Equal(t, []string{hopX}, rs[0].Chain)
		}
		// A claim of one name does not settle another's record.
		require.NoError(t, l.Perform(ctx, effect("a", "op-2", "")))
		c2 := call(hopA, nil, "op-3", "sha-256:k2", "")
		c2.IdempotencyKey = "op-2"
		require.ErrorIs(t, l.Perform(ctx, c2), authority.ErrRepeated)
		require.ErrorIs(t, l.Settle(ctx, c2, out), authority.ErrConflict)
		require.Empty(t, lookup(t, l, "op-3"), "nothing settled, nothing recorded")
		require.Nil(t, lookup(t, l, "op-2")[0].Outcome)
	})
	t.Run("ApprovalUsedOnce", func(t *testing.T) {
		l := open(t)
		e := effect("refund.issue", "op-1", "")
		e.NeedsApproval = true
		require.ErrorIs(t, l.Perform(ctx, e), authority.ErrNoApproval)
		require.NoError(t, l.Grant(ctx, approval("ap-1", "refund.issue")))
		require.NoError(t, l.Perform(ctx, e))
		require.Equal(t, "ap-1", lookup(t, l, "op-1")[0].Approval)
		e.OperationID = "op-2"
		require.ErrorIs(t, l.Perform(ctx, e), authority.ErrNoApproval, "one use")
		as, err := l.Approvals(ctx, hopA)
		require.NoError(t, err)
		require.Len(t, as, 1)
		require.Equal(t, 1, as[0].Uses)
		require.Equal(t, 0, as[0].Remaining)
	})
	t.Run("ApprovalCountAndBinding", func(t *testing.T) {
		l := open(t)
		two := approval("ap-2", "refund.issue")
		two.Uses = 2
		require.NoError(t, l.Grant(ctx, two))
		op := approval("ap-op", "refund.issue")
		op.OperationID = "op-9"
		require.NoError(t, l.Grant(ctx, op))
		need := func(hop, action, opid string, at time.Time) authority.Effect {
			return authority.Effect{Hop: hop, Action: action, OperationID: opid, NeedsApproval: true, At: at}
		}
		// Not on another hop or action, not before it is issued nor once
		// it has expired.
		require.ErrorIs(t, l.Perform(ctx, need(hopB, "refund.issue", "x1", t0)), authority.ErrNoApproval)
		require.ErrorIs(t, l.Perform(ctx, need(hopA, "card.charge", "x2", t0)), authority.ErrNoApproval)
		require.ErrorIs(t, l.Perform(ctx, need(hopA, "refund.issue", "x3", t0.Add(-2*time.Minute))), authority.ErrNoApproval)
		require.ErrorIs(t, l.Perform(ctx, need(hopA, "refund.issue", "x4", t0.Add(time.Hour))), authority.ErrNoApproval)
		// The approval naming the operation is used for it first.
		require.NoError(t, l.Perform(ctx, need(hopA, "refund.issue", "op-9", t0)))
		require.Equal(t, "ap-op", lookup(t, l, "op-9")[0].Approval)
		// A repeated effect consumes nothing.
		require.ErrorIs(t, l.Perform(ctx, need(hopA, "refund.issue", "op-9", t0)), authority.ErrRepeated)
		require.NoError(t, l.Perform(ctx, need(hopA, "refund.issue", "y1", t0)))
		require.NoError(t, l.Perform(ctx, need(hopA, "refund.issue", "y2", t0)))
		require.ErrorIs(t, l.Perform(ctx, need(hopA, "refund.issue", "y3", t0)), authority.ErrNoApproval)
		as, err := l.Approvals(ctx, hopA)
		require.NoError(t, err)
		require.Len(t, as, 2)
		require.Equal(t, "ap-2", as[0].ID)
		require.Equal(t, 0, as[0].Remaining)
		require.Equal(t, "ap-op", as[1].ID)
		require.Equal(t, 0, as[1].Remaining)
		// An approval of one operation is not spent on another.
		op2 := approval("ap-op2", "refund.issue")
		op2.OperationID = "op-10"
		require.NoError(t, l.Grant(ctx, op2))
		require.ErrorIs(t, l.Perform(ctx, need(hopA, "refund.issue", "op-11", t0)), authority.ErrNoApproval)
		require.NoError(t, l.Perform(ctx, authority.Effect{Hop: hopA, Action: "refund.issue", IdempotencyKey: "op-10", NeedsApproval: true, At: t0}))
	})
	// An approval bound to a call (tool and arguments' digest) allows that
	// call only; another call of its operation is refused as a mismatch,
	// changing nothing, and the bound call still passes.
	t.Run("ApprovalBoundToTheCall", func(t *testing.T) {
		l := open(t)
		a := approval("ap-call", "refund.issue")
		a.OperationID, a.Tool, a.Args, a.Chain = "op-1", "refund", "sha-256:args10", []string{hopX}
		require.NoError(t, l.Grant(ctx, a))
		for _, c := range []authority.Effect{
			call(hopA, nil, "op-1", "sha-256:k-big", "sha-256:args1000000"),
			{Hop: hopA, Action: "refund.issue", Tool: "wire", OperationID: "op-1", Key: "sha-256:k-wire", Args: "sha-256:args10", Claim: true, At: t0},
		} {
			c.NeedsApproval = true
			err := l.Perform(ctx, c)
			require.ErrorIs(t, err, authority.ErrApprovalMismatch)
			require.ErrorIs(t, err, authority.ErrNoApproval)
		}
		require.Empty(t, lookup(t, l, "op-1"))
		unbound := call(hopA, nil, "op-2", "sha-256:k2", "sha-256:args10")
		unbound.NeedsApproval = true
		err := l.Perform(ctx, unbound)
		require.ErrorIs(t, err, authority.ErrNoApproval)
		require.NotErrorIs(t, err, authority.ErrApprovalMismatch, "no approval names op-2")
		c := call(hopA, nil, "op-1", "sha-256:k10", "sha-256:args10")
		c.NeedsApproval = true
		require.NoError(t, l.Perform(ctx, c))
		require.Equal(t, "ap-call", lookup(t, l, "op-1")[0].Approval)
		as, err := l.Approvals(ctx, hopA)
		require.NoError(t, err)
		require.Len(t, as, 1)
		require.Equal(t, "refund", as[0].Tool)
		require.Equal(t, "sha-256:args10", as[0].Args)
		require.Equal(t, []string{hopX}, as[0].Chain)
		require.Equal(t, 0, as[0].Remaining)
	})
	t.Run("GrantOnce", func(t *testing.T) {
		l := open(t)
		a := approval("ap-1", "refund.issue")
		a.Source, a.Evidence = authority.SourceSigned, []byte("signed statement")
		require.NoError(t, l.Grant(ctx, a))
		require.NoError(t, l.Grant(ctx, a), "the same grant again")
		e := effect("refund.issue", "op-1", "")
		e.NeedsApproval = true
		require.NoError(t, l.Perform(ctx, e))
		require.NoError(t, l.Grant(ctx, a), "granting again does not restore its use")
		// Finding 2 of issue 33: another encoding or signature of the same
		// statement is the same grant, and restores nothing either.
		twin := a
		twin.Evidence = []byte("the same statement, signed again")
		require.NoError(t, l.Grant(ctx, twin))
		e.OperationID = "op-2"
		require.ErrorIs(t, l.Perform(ctx, e), authority.ErrNoApproval)
		b := a
		b.Uses = 5
		require.ErrorIs(t, l.Grant(ctx, b), authority.ErrConflict)
		b = a
		b.Args = "sha-256:other"
		require.ErrorIs(t, l.Grant(ctx, b), authority.ErrConflict)
		as, err := l.Approvals(ctx, hopA)
		require.NoError(t, err)
		require.Len(t, as, 1)
		require.Equal(t, []byte("signed statement"), as[0].Evidence, "the first presentation is kept")
		require.Equal(t, authority.SourceSigned, as[0].Source)
		require.True(t, as[0].Issued.Equal(a.Issued))
	})
	t.Run("ConcurrentApprovalOneUse", func(t *testing.T) {
		l := open(t)
		require.NoError(t, l.Grant(ctx, approval("ap-1", "refund.issue")))
		raceOne(t, []authority.Ledger{l}, func(i int) authority.Effect {
			e := effect("refund.issue", fmt.Sprintf("op-%d", i), "")
			e.NeedsApproval = true
			return e
		}, authority.ErrNoApproval)
	})
	t.Run("ConcurrentSameCallOneEffect", func(t *testing.T) {
		l := open(t)
		raceCall(t, []authority.Ledger{l})
	})
	// The audit of an effect performed at depth 3: the hop, the chain it
	// came through, and who approved it.
	t.Run("AuditNamesChainAndApprover", func(t *testing.T) {
		l := open(t)
		chain := []string{hopA, hopB}
		a := authority.Approval{ID: "ap-c", Hop: hopC, Chain: chain, Action: "refund.issue", OperationID: "op-1",
			Tool: "refund", Args: "sha-256:args", Approver: "finance-lead", Issued: t0.Add(-time.Minute),
			Expires: t0.Add(time.Hour), Source: authority.SourceSigned, Evidence: []byte("jws")}
		require.NoError(t, l.Grant(ctx, a))
		c := call(hopC, chain, "op-1", "sha-256:k", "sha-256:args")
		c.NeedsApproval = true
		require.NoError(t, l.Perform(ctx, c))
		require.NoError(t, l.Settle(ctx, c, authority.Outcome{Result: []byte("ok"), At: t0}))
		require.NoError(t, l.Perform(ctx, call(hopX, nil, "op-1", "sha-256:kx", "")))
		trails, err := authority.Audit(ctx, l, "op-1")
		require.NoError(t, err)
		require.Len(t, trails, 2)
		got := trails[0]
		require.Equal(t, hopC, got.Record.Hop)
		require.Equal(t, chain, got.Record.Chain)
		require.Equal(t, "ap-c", got.Record.Approval)
		require.NotNil(t, got.Approval)
		require.Equal(t, "finance-lead", got.Approval.Approver)
		require.Equal(t, chain, got.Approval.Chain)
		require.Equal(t, []byte("jws"), got.Approval.Evidence)
		require.Equal(t, []byte("ok"), got.Record.Outcome.Result)
		require.Equal(t, hopX, trails[1].Record.Hop)
		require.True(t, trails[1].Record.InFlight)
		require.Nil(t, trails[1].Approval)
	})
	t.Run("HopDisposition", func(t *testing.T) {
		l := open(t)
		h, err := l.Hop(ctx, hopA)
		require.NoError(t, err)
		require.Nil(t, h.Ack)
		require.Nil(t, h.Final)
		ack := authority.Ack{Decision: authority.Accepted, Package: "sha-256:pkg", At: t0}
		require.NoError(t, l.Acknowledge(ctx, hopA, ack))
		require.NoError(t, l.Acknowledge(ctx, hopA, ack))
		require.ErrorIs(t, l.Acknowledge(ctx, hopA, authority.Ack{Decision: authority.Rejected, Reason: "policy", At: t0}), authority.ErrConflict)
		require.NoError(t, l.Perform(ctx, effect("a", "op-1", "")))
		c := call(hopA, nil, "op-c", "sha-256:kc", "")
		require.NoError(t, l.Perform(ctx, c))
		fin := authority.Final{State: "completed", Detail: "refund settled", At: t0.Add(time.Minute)}
		require.NoError(t, l.Finish(ctx, hopA, fin))
		require.NoError(t, l.Finish(ctx, hopA, fin))
		require.ErrorIs(t, l.Finish(ctx, hopA, authority.Final{State: "failed", At: t0}), authority.ErrConflict)
		require.ErrorIs(t, l.Perform(ctx, effect("a", "op-2", "")), authority.ErrFinished)
		require.NoError(t, l.Settle(ctx, c, authority.Outcome{At: t0}), "a claim in flight is settled after its hop finished")
		h, err = l.Hop(ctx, hopA)
		require.NoError(t, err)
		require.Equal(t, authority.Accepted, h.Ack.Decision)
		require.Equal(t, "sha-256:pkg", h.Ack.Package)
		require.Equal(t, "completed", h.Final.State)
		require.True(t, h.Final.At.Equal(fin.At))
		require.ErrorIs(t, l.Acknowledge(ctx, "", ack), authority.ErrInvalid)
		require.ErrorIs(t, l.Finish(ctx, hopA, authority.Final{}), authority.ErrInvalid)
	})
	// What the ledger knows of a hop's outcome: an effect recorded in the
	// hop's own scope sets HopRecord.Effects, in the same step; a marker
	// (a package's completed action, a host's unit of work), a refused
	// effect and an effect of a later hop of the chain do not; after
	// Finish nothing changes it.
	t.Run("HopEffects", func(t *testing.T) {
		l := open(t)
		effects := func(hop string) bool {
			t.Helper()
			h, err := l.Hop(ctx, hop)
			require.NoError(t, err)
			return h.Effects
		}
		require.False(t, effects(hopA), "a hop the ledger never saw")
		marker := effect("notify", "", "done-before")
		marker.Marker = true
		require.NoError(t, l.Perform(ctx, marker))
		unit := call(hopA, nil, "", "sha-256:unit", "")
		unit.IdempotencyKey, unit.Marker = unit.Key, true
		require.NoError(t, l.Perform(ctx, unit))
		require.ErrorIs(t, l.Perform(ctx, effect("notify", "done-before", "")), authority.ErrRepeated)
		needs := effect("refund.issue", "op-ask", "")
		needs.NeedsApproval = true
		require.ErrorIs(t, l.Perform(ctx, needs), authority.ErrNoApproval)
		require.NoError(t, l.Acknowledge(ctx, hopA, authority.Ack{Decision: authority.Accepted, At: t0}))
		require.False(t, effects(hopA), "markers and refusals are no effect")
		require.NoError(t, l.Perform(ctx, call(hopB, []string{hopA}, "op-b", "sha-256:kb", "")))
		require.False(t, effects(hopA), "an effect of a later hop is its own")
		require.True(t, effects(hopB), "a claim in flight is an effect")
		require.NoError(t, l.Perform(ctx, effect("ledger.read", "op-1", "")))
		require.True(t, effects(hopA))
		require.NoError(t, l.Finish(ctx, hopA, authority.Final{State: "canceled", At: t0}))
		h, err := l.Hop(ctx, hopA)
		require.NoError(t, err)
		require.True(t, h.Effects && h.Ack != nil && h.Final != nil, "%+v", h)

		require.NoError(t, l.Finish(ctx, hopC, authority.Final{State: "canceled", At: t0}))
		c := call(hopC, nil, "op-c", "sha-256:kc", "")
		require.ErrorIs(t, l.Perform(ctx, c), authority.ErrFinished)
		require.False(t, effects(hopC), "a finished hop takes no effect, and says so for good")
	})
	t.Run("CanceledContext", func(t *testing.T) {
		l := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.Error(t, l.Perform(cctx, effect("a", "op-1", "")))
		require.Empty(t, lookup(t, l, "op-1"))
	})
	if opt.Reopen != nil {
		t.Run("SurvivesReopen", func(t *testing.T) {
			l := open(t)
			require.NoError(t, l.Perform(ctx, effect("a", "op-1", "key-1")))
			require.NoError(t, l.Grant(ctx, approval("ap-1", "refund.issue")))
			two := approval("ap-2", "refund.issue")
			two.Uses = 2
			require.NoError(t, l.Grant(ctx, two))
			e := effect("refund.issue", "op-2", "")
			e.NeedsApproval = true
			require.NoError(t, l.Perform(ctx, e))
			require.NoError(t, l.Acknowledge(ctx, hopA, authority.Ack{Decision: authority.Accepted, At: t0}))
			require.NoError(t, l.Finish(ctx, hopB, authority.Final{State: "canceled", At: t0}))
			// A claim whose process stops before its outcome is recorded.
			lost := call(hopC, []string{hopA}, "op-lost", "sha-256:lost", "sha-256:args")
			require.NoError(t, l.Perform(ctx, lost))
			l = opt.Reopen(t, l)
			require.ErrorIs(t, l.Perform(ctx, effect("a", "", "op-1")), authority.ErrRepeated)
			require.ErrorIs(t, l.Perform(ctx, effect("a", "key-1", "")), authority.ErrRepeated)
			e.OperationID = "op-3"
			require.NoError(t, l.Perform(ctx, e))
			e.OperationID = "op-4"
			require.NoError(t, l.Perform(ctx, e))
			e.OperationID = "op-5"
			require.ErrorIs(t, l.Perform(ctx, e), authority.ErrNoApproval, "the uses spent before the restart stay spent")
			h, err := l.Hop(ctx, hopA)
			require.NoError(t, err)
			require.Equal(t, authority.Accepted, h.Ack.Decision)
			b := effect("a", "op-6", "")
			b.Hop = hopB
			require.ErrorIs(t, l.Perform(ctx, b), authority.ErrFinished)
			// The lost claim stays in flight: never performed again, until
			// an operator settles it.
			for range 2 {
				refusal(t, l.Perform(ctx, lost), authority.ErrInFlight)
			}
			rs := lookup(t, l, "op-lost")
			require.Len(t, rs, 1)
			require.True(t, rs[0].InFlight)
			require.Equal(t, []string{hopA}, rs[0].Chain)
			require.Equal(t, 2, rs[0].Replays)
			require.NoError(t, l.Settle(ctx, lost, authority.Outcome{Error: "reconciled: refund re_9 found in the gateway", At: t0}))
			r := refusal(t, l.Perform(ctx, lost), authority.ErrReplayed)
			require.Equal(t, "reconciled: refund re_9 found in the gateway", r.Held.Outcome.Error)
		})
	}
	if opt.Where != nil {
		t.Run("KilledBetweenClaimAndOutcome", func(t *testing.T) {
			l := open(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+opt.Where(l))
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			line := bufio.NewScanner(out)
			require.True(t, line.Scan())
			require.Equal(t, "claimed", line.Text(), "the child claims (its TestMain calls authoritytest.ChildMain)")
			require.NoError(t, cmd.Process.Kill())
			require.Error(t, cmd.Wait(), "killed")
			c := lostCall()
			for range 2 {
				r := refusal(t, l.Perform(ctx, c), authority.ErrInFlight)
				require.Nil(t, r.Held.Outcome)
			}
			other := c
			other.Key, other.Args = "sha-256:k-other", "sha-256:other-args"
			refusal(t, l.Perform(ctx, other), authority.ErrKeyConflict)
			rs := lookup(t, l, c.OperationID)
			require.Len(t, rs, 1, "one effect")
			require.True(t, rs[0].InFlight)
			require.Equal(t, c.Chain, rs[0].Chain)
			require.Equal(t, 2, rs[0].Replays)
		})
	}
	if opt.Replica != nil {
		t.Run("ReplicasOneWins", func(t *testing.T) {
			l := open(t)
			r := opt.Replica(t, l)
			raceOne(t, []authority.Ledger{l, r}, func(i int) authority.Effect { return effect("a", "op-race", "") }, authority.ErrRepeated)
			require.NoError(t, l.Grant(ctx, approval("ap-1", "refund.issue")))
			raceOne(t, []authority.Ledger{l, r}, func(i int) authority.Effect {
				e := effect("refund.issue", fmt.Sprintf("op-%d", i), "")
				e.NeedsApproval = true
				return e
			}, authority.ErrNoApproval)
		})
		// Two replicas racing one call: one effect, every other
		// presentation in flight or replayed with its outcome; racing one
		// operation with other arguments: one effect, every other a
		// conflict.
		t.Run("ReplicasSameKey", func(t *testing.T) {
			l := open(t)
			raceCall(t, []authority.Ledger{l, opt.Replica(t, l)})
		})
		t.Run("ReplicasOtherArguments", func(t *testing.T) {
			l := open(t)
			raceOne(t, []authority.Ledger{l, opt.Replica(t, l)}, func(i int) authority.Effect {
				return call(hopA, nil, "op-1", fmt.Sprintf("sha-256:k%d", i), fmt.Sprintf("sha-256:args%d", i))
			}, authority.ErrKeyConflict)
		})
		// A claim made through one replica and never settled (its
		// process gone) is in flight for the other.
		t.Run("ReplicaSeesLostClaim", func(t *testing.T) {
			l := open(t)
			r := opt.Replica(t, l)
			c := call(hopA, nil, "op-1", "sha-256:k", "")
			require.NoError(t, l.Perform(ctx, c))
			refusal(t, r.Perform(ctx, c), authority.ErrInFlight)
			require.NoError(t, r.Settle(ctx, c, authority.Outcome{Result: []byte("ok"), At: t0}))
			require.Equal(t, []byte("ok"), refusal(t, l.Perform(ctx, c), authority.ErrReplayed).Held.Outcome.Result)
		})
	}
}

// race runs do 16 times at once, the i-th on ls[i%len(ls)], and returns
// what each returned.
func race(ls []authority.Ledger, do func(i int, l authority.Ledger) error) []error {
	errs := make([]error, 16)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = do(i, ls[i%len(ls)])
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// raceOne presents 16 effects at once, spread over the ledgers, and
// requires that exactly one succeeds and every other is refused with
// refused.
func raceOne(t *testing.T, ls []authority.Ledger, e func(int) authority.Effect, refused error) {
	t.Helper()
	errs := race(ls, func(i int, l authority.Ledger) error { return l.Perform(context.Background(), e(i)) })
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, refused)
	}
	require.Equal(t, 1, ok)
}

// raceCall presents one call 16 times at once, spread over the ledgers, as
// evidence.Guard.Do does (claim, then settle): exactly one claim succeeds,
// every other presentation is in flight or replayed, and, once settled,
// the call presented again is replayed with the winner's outcome; the
// record counts every suppressed retry.
func raceCall(t *testing.T, ls []authority.Ledger) {
	t.Helper()
	c := call(hopA, nil, "op-1", "sha-256:k", "sha-256:args")
	var won atomic.Int32
	errs := race(ls, func(i int, l authority.Ledger) error {
		if err := l.Perform(context.Background(), c); err != nil {
			return err
		}
		won.Add(1)
		return l.Settle(context.Background(), c, authority.Outcome{Result: []byte(fmt.Sprint("effect ", i)), At: t0})
	})
	require.Equal(t, int32(1), won.Load())
	winner := -1
	for i, err := range errs {
		if err == nil {
			winner = i
			continue
		}
		var r *authority.Refusal
		require.True(t, errors.As(err, &r), "%v", err)
		require.True(t, errors.Is(err, authority.ErrInFlight) || errors.Is(err, authority.ErrReplayed), "%v", err)
	}
	require.GreaterOrEqual(t, winner, 0)
	for _, l := range ls {
		var r *authority.Refusal
		require.True(t, errors.As(l.Perform(context.Background(), c), &r))
		require.ErrorIs(t, r, authority.ErrReplayed)
		require.Equal(t, fmt.Sprint("effect ", winner), string(r.Held.Outcome.Result))
	}
	rs := lookup(t, ls[0], "op-1")
	require.Len(t, rs, 1)
	require.Equal(t, len(errs)-1+len(ls), rs[0].Replays)
}
