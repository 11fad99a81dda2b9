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
	"context"
	"errors"
	"fmt"
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
	// the suite then checks that every record survives.
	Reopen func(t *testing.T, l authority.Ledger) authority.Ledger
	// Replica, when set, opens a second ledger on the storage of l, as a
	// second process of the same agent would: the suite then checks that
	// the two refuse each other's effects and share one approval's uses.
	Replica func(t *testing.T, l authority.Ledger) authority.Ledger
}

var t0 = time.Unix(1793000000, 0).UTC()

const hopA, hopB = "sha-256:hopA", "sha-256:hopB"

func effect(action, op, key string) authority.Effect {
	return authority.Effect{Hop: hopA, Action: action, OperationID: op, IdempotencyKey: key, At: t0}
}

func approval(id, action string) authority.Approval {
	return authority.Approval{ID: id, Hop: hopA, Action: action, Approver: "finance-lead",
		Issued: t0.Add(-time.Minute), Expires: t0.Add(time.Hour), Source: authority.SourceOperator}
}

// Run runs the suite.
func Run(t *testing.T, open OpenFunc, opt Options) {
	ctx := context.Background()
	t.Run("EffectRecordedOnce", func(t *testing.T) {
		l := open(t)
		require.NoError(t, l.Perform(ctx, effect("refund.issue", "op-1", "")))
		err := l.Perform(ctx, effect("refund.issue", "op-1", ""))
		require.ErrorIs(t, err, authority.ErrRepeated)
		var r *authority.Refusal
		require.True(t, errors.As(err, &r))
		require.Equal(t, authority.Record{Name: "op-1", Hop: hopA, Action: "refund.issue", At: t0}, r.Held)
		// Another hop, another action: the effect is the same.
		e := effect("ledger.read", "op-1", "")
		e.Hop = hopB
		require.ErrorIs(t, l.Perform(ctx, e), authority.ErrRepeated)
		rec, ok, err := l.Lookup(ctx, "op-1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "refund.issue", rec.Action)
		_, ok, err = l.Lookup(ctx, "op-2")
		require.NoError(t, err)
		require.False(t, ok)
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
			_, ok, err := l.Lookup(ctx, n)
			require.NoError(t, err)
			require.True(t, ok, n)
		}
		// One name recorded: refused, and the other is not recorded.
		require.ErrorIs(t, l.Perform(ctx, effect("a", "op-2", "key-1")), authority.ErrRepeated)
		_, ok, err := l.Lookup(ctx, "op-2")
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, l.Perform(ctx, effect("a", "op-2", "op-2")))
	})
	t.Run("ConcurrentOneWins", func(t *testing.T) {
		l := open(t)
		raceOne(t, []authority.Ledger{l}, func(i int) authority.Effect { return effect("a", "op-race", "") }, authority.ErrRepeated)
	})
	t.Run("Invalid", func(t *testing.T) {
		l := open(t)
		for _, e := range []authority.Effect{{Action: "a", OperationID: "x"}, {Hop: hopA, OperationID: "x"}, {Hop: hopA, Action: "a"}} {
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
	})
	t.Run("ApprovalUsedOnce", func(t *testing.T) {
		l := open(t)
		e := effect("refund.issue", "op-1", "")
		e.NeedsApproval = true
		require.ErrorIs(t, l.Perform(ctx, e), authority.ErrNoApproval)
		require.NoError(t, l.Grant(ctx, approval("ap-1", "refund.issue")))
		require.NoError(t, l.Perform(ctx, e))
		rec, _, err := l.Lookup(ctx, "op-1")
		require.NoError(t, err)
		require.Equal(t, "ap-1", rec.Approval)
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
		rec, _, err := l.Lookup(ctx, "op-9")
		require.NoError(t, err)
		require.Equal(t, "ap-op", rec.Approval)
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
		e.OperationID = "op-2"
		require.ErrorIs(t, l.Perform(ctx, e), authority.ErrNoApproval)
		b := a
		b.Uses = 5
		require.ErrorIs(t, l.Grant(ctx, b), authority.ErrConflict)
		as, err := l.Approvals(ctx, hopA)
		require.NoError(t, err)
		require.Len(t, as, 1)
		require.Equal(t, []byte("signed statement"), as[0].Evidence)
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
		fin := authority.Final{State: "completed", Detail: "refund settled", At: t0.Add(time.Minute)}
		require.NoError(t, l.Finish(ctx, hopA, fin))
		require.NoError(t, l.Finish(ctx, hopA, fin))
		require.ErrorIs(t, l.Finish(ctx, hopA, authority.Final{State: "failed", At: t0}), authority.ErrConflict)
		require.ErrorIs(t, l.Perform(ctx, effect("a", "op-2", "")), authority.ErrFinished)
		h, err = l.Hop(ctx, hopA)
		require.NoError(t, err)
		require.Equal(t, authority.Accepted, h.Ack.Decision)
		require.Equal(t, "sha-256:pkg", h.Ack.Package)
		require.Equal(t, "completed", h.Final.State)
		require.True(t, h.Final.At.Equal(fin.At))
		require.ErrorIs(t, l.Acknowledge(ctx, "", ack), authority.ErrInvalid)
		require.ErrorIs(t, l.Finish(ctx, hopA, authority.Final{}), authority.ErrInvalid)
	})
	t.Run("CanceledContext", func(t *testing.T) {
		l := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.Error(t, l.Perform(cctx, effect("a", "op-1", "")))
		_, _, err := l.Lookup(ctx, "op-1")
		require.NoError(t, err)
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
	}
}

// raceOne presents 16 effects at once, spread over the ledgers, and
// requires that exactly one succeeds and every other is refused with
// refused.
func raceOne(t *testing.T, ls []authority.Ledger, e func(int) authority.Effect, refused error) {
	t.Helper()
	const n = 16
	var ok atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := ls[i%len(ls)].Perform(context.Background(), e(i)); err != nil {
				errs[i] = err
				return
			}
			ok.Add(1)
		}()
	}
	close(start)
	wg.Wait()
	require.Equal(t, int32(1), ok.Load())
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, refused)
		}
	}
}
