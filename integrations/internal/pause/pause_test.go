package pause_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"

	"github.com/agentproto/handoff/integrations/internal/pause"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func sealed(t *testing.T, hop digest.Digest, exp time.Time) string {
	t.Helper()
	s, err := pause.Seal(key, pause.BoundOf(evidence.ApprovalRequest{Action: "refund_issue", Owner: "finance-lead", Hop: hop, OperationID: "op-1"}, hop, exp))
	require.NoError(t, err)
	return s
}

// A sealed state opens only for its hop, under its key, before its exp,
// unaltered.
func TestSealOpen(t *testing.T) {
	now := time.Now()
	hop, other := digest.SHA256([]byte("offer A")), digest.SHA256([]byte("offer B"))
	s := sealed(t, hop, now.Add(time.Minute))
	b, err := pause.Open(key, s, hop, now)
	require.NoError(t, err)
	require.Equal(t, "op-1", b.OperationID)
	id := b.ID()
	require.NotEmpty(t, id, "an opened state has its identity")
	b2, err := pause.Open(key, s, hop, now)
	require.NoError(t, err)
	require.Equal(t, id, b2.ID(), "the same state, the same pause")
	require.NotEqual(t, id, pause.Bound{}.ID())

	_, err = pause.Open(key, s, other, now)
	require.ErrorIs(t, err, pause.ErrState, "another hop")
	_, err = pause.Open(key, s, hop, now.Add(time.Minute))
	require.ErrorIs(t, err, pause.ErrState, "expired")
	_, err = pause.Open([]byte(strings.Repeat("k", 32)), s, hop, now)
	require.ErrorIs(t, err, pause.ErrState, "another key")

	// The payload rewritten for the other hop, the tag kept.
	p64, tag, _ := strings.Cut(strings.TrimPrefix(s, "hs1."), ".")
	payload, err := base64.RawURLEncoding.DecodeString(p64)
	require.NoError(t, err)
	forged := strings.Replace(string(payload), hop.String(), other.String(), 1)
	_, err = pause.Open(key, "hs1."+base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+tag, other, now)
	require.ErrorIs(t, err, pause.ErrState, "a rewritten payload")
	for _, bad := range []string{"", "hs1.", "hs1.x", "hs1.!.!", "hs2." + p64 + "." + tag} {
		_, err = pause.Open(key, bad, hop, now)
		require.ErrorIs(t, err, pause.ErrState, "%q", bad)
	}
	_, err = pause.Seal(key[:31], pause.Bound{})
	require.ErrorIs(t, err, pause.ErrKey)
	_, err = pause.Open(key[:31], s, hop, now)
	require.ErrorIs(t, err, pause.ErrKey)
}

// Only an approval request refusal is one; answers read as written.
func TestRequestedAndAnswerOf(t *testing.T) {
	_, ok := pause.Requested(&evidence.Refusal{Action: "x", Err: evidence.ErrDenied})
	require.False(t, ok)
	_, ok = pause.Requested(&evidence.Refusal{Action: "x", Err: evidence.ErrApprovalRequired})
	require.False(t, ok, "no pending approval")
	r, ok := pause.Requested(&evidence.Refusal{Action: "x", Err: evidence.ErrApprovalRequired, Pending: &evidence.ApprovalRequest{Action: "x", Owner: "o"}})
	require.True(t, ok)
	require.Equal(t, "o", r.Owner)

	require.Equal(t, pause.Answer{Approve: true}, pause.AnswerOf(map[string]any{"decision": "approve"}))
	require.Equal(t, pause.Answer{}, pause.AnswerOf(map[string]any{"decision": "deny"}))
	require.Equal(t, pause.Answer{}, pause.AnswerOf(map[string]any{"decision": true}))
	require.Equal(t, pause.Answer{Signed: []byte("a.b.c")}, pause.AnswerOf(map[string]any{"approval": "a.b.c"}))
}

// A state binds the paused call: the same call, its arguments encoded
// otherwise, matches; other arguments, another tool or operation do not,
// and the refusal is a mismatch naming the approval the pause asked for.
func TestBoundMatchesThePausedCall(t *testing.T) {
	hop := digest.SHA256([]byte("offer A"))
	call := evidence.Call{Hop: hop, Action: "refund_issue", Tool: "refund", Args: []byte(`{"amount":10,"invoice":"INV-1"}`), OperationID: "op-1"}
	args, err := evidence.ArgsDigest(call.Args)
	require.NoError(t, err)
	k, err := call.Key()
	require.NoError(t, err)
	req := evidence.ApprovalRequest{Action: "refund_issue", Owner: "finance-lead", Hop: hop, OperationID: "op-1", Tool: "refund", Args: args, Key: k}
	now := time.Now()
	s, err := pause.Seal(key, pause.BoundOf(req, hop, now.Add(time.Minute)))
	require.NoError(t, err)
	b, err := pause.Open(key, s, hop, now)
	require.NoError(t, err)
	got, err := b.Request()
	require.NoError(t, err)
	require.Equal(t, req.Grant(), got.Grant(), "the approval of exactly the paused call")

	same := call
	same.Args = []byte(` { "invoice" : "INV-1", "amount" : 1e1 } `)
	require.NoError(t, b.Matches(same), "the same arguments, encoded otherwise")
	for name, c := range map[string]evidence.Call{
		"OtherArguments": {Hop: hop, Action: "refund_issue", Tool: "refund", Args: []byte(`{"amount":1000000,"invoice":"INV-1"}`), OperationID: "op-1"},
		"OtherTool":      {Hop: hop, Action: "refund_issue", Tool: "wire", Args: call.Args, OperationID: "op-1"},
		"OtherOperation": {Hop: hop, Action: "refund_issue", Tool: "refund", Args: call.Args, OperationID: "op-2"},
		"Malformed":      {Hop: hop, Action: "refund_issue", Tool: "refund", Args: []byte(`{"amount":`), OperationID: "op-1"},
	} {
		err := b.Matches(c)
		require.ErrorIs(t, err, evidence.ErrApprovalMismatch, name)
		var r *evidence.Refusal
		require.ErrorAs(t, err, &r, name)
		require.Equal(t, req.Key, r.Pending.Key, name)
	}
	// A state sealed before the call was bound (no key) matches nothing.
	s, err = pause.Seal(key, pause.BoundOf(evidence.ApprovalRequest{Action: "refund_issue", Owner: "finance-lead", Hop: hop, OperationID: "op-1"}, hop, now.Add(time.Minute)))
	require.NoError(t, err)
	b, err = pause.Open(key, s, hop, now)
	require.NoError(t, err)
	require.ErrorIs(t, b.Matches(call), evidence.ErrApprovalMismatch)
}
