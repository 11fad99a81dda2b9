package hopcheck_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/internal/hopcheck"
	"github.com/agentproto/handoff/integrations/internal/pause"
)

const (
	planner = handoff.AgentID("spiffe://a.example/planner")
	coder   = handoff.AgentID("spiffe://b.example/coder")
)

// received is the coder's accepted delivery of an offer made with p, and
// the package p.Deliver made, if any.
func received(t *testing.T, p handoff.OfferParams) (*handoff.Received, ref.Object) {
	t.Helper()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	p.To, p.Dialog, p.TTL = coder, "d-1", time.Minute
	out, err := ps[planner].Agent.Offer(context.Background(), p)
	require.NoError(t, err)
	wire, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := ps[coder].Agent.Receive(context.Background(), wire, handoff.Host{Dialog: "d-1"})
	require.NoError(t, err)
	require.True(t, in.Accepted())
	var obj ref.Object
	if out.Delivered != nil {
		obj = *out.Delivered
	}
	return in, obj
}

// checked is the check of a package that passes, by a host over a ledger
// of its own.
func checked(t *testing.T) (*agenttest.Evidence, hopcheck.Config, *handoff.Received, hopcheck.Checked) {
	t.Helper()
	e := agenttest.NewEvidence(t)
	cfg := hopcheck.Config{Evidence: e.Host()}
	in, obj := received(t, handoff.OfferParams{Deliver: agenttest.Deliver})
	ch, err := cfg.Check(context.Background(), in, obj, nil)
	require.NoError(t, err)
	return e, cfg, in, ch
}

// Each way a package can come with an offer, or not, and what the check
// makes of it: a guard, a refusal with the findings, or nothing to check.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	e, _, in, ch := checked(t)
	require.False(t, ch.Refused, ch.Detail)
	require.NotNil(t, ch.Guard)
	require.True(t, ch.Guard.Hop().Equal(in.Digest()))
	require.Len(t, ch.Refs, 1)

	absent := carriage.ErrAbsent
	for name, c := range map[string]struct {
		p      handoff.OfferParams
		obj    ref.Object
		read   error
		allow  bool
		refuse bool
		detail string
	}{
		"none, none named":            {read: absent, refuse: true, detail: "names none"},
		"none, none named, allowed":   {read: absent, allow: true},
		"named, not carried":          {p: handoff.OfferParams{Prepare: e.Prepare}, read: absent, refuse: true, detail: "did not come with it"},
		"named, not carried, allowed": {p: handoff.OfferParams{Prepare: e.Prepare}, read: absent, allow: true, refuse: true, detail: "did not come with it"},
		"malformed carriage":          {p: handoff.OfferParams{Deliver: agenttest.Deliver}, read: handoff.ErrMalformed, refuse: true, detail: "not one"},
		"not a package":               {p: handoff.OfferParams{Deliver: agenttest.Deliver}, obj: ref.Object{Octets: []byte("[]")}, refuse: true, detail: "evidence"},
	} {
		in, _ := received(t, c.p)
		h := *e.Host()
		h.AllowNoPackage = c.allow
		ch, err := hopcheck.Config{Evidence: &h}.Check(ctx, in, c.obj, c.read)
		require.NoError(t, err, name)
		assert.Equal(t, c.refuse, ch.Refused, name)
		assert.Contains(t, ch.Detail, c.detail, name)
		assert.Nil(t, ch.Guard, name)
		if c.refuse {
			assert.Equal(t, evidence.ReasonEvidence, ch.Rejected().Reason, name)
		}
	}
	ch, err := hopcheck.Config{}.Check(ctx, in, ref.Object{}, absent)
	require.NoError(t, err)
	assert.Equal(t, hopcheck.Checked{}, ch, "a host that checks no package")
}

// One source of a hop's guard at most, a ledger for the package's, and
// Approvals with one.
func TestValidate(t *testing.T) {
	g := func(context.Context, *handoff.Received) (*evidence.Guard, error) { return nil, errors.New("x") }
	e := agenttest.NewEvidence(t)
	require.NoError(t, hopcheck.Config{}.Validate(false))
	require.NoError(t, hopcheck.Config{Guard: g}.Validate(true))
	require.NoError(t, hopcheck.Config{Evidence: e.Host()}.Validate(true))
	require.ErrorIs(t, hopcheck.Config{}.Validate(true), handoff.ErrConfig)
	require.ErrorIs(t, hopcheck.Config{Evidence: e.Host(), Guard: g}.Validate(true), handoff.ErrConfig)
	require.ErrorIs(t, hopcheck.Config{Evidence: &evidence.HostConfig{}}.Validate(false), handoff.ErrConfig)
}

// The refusals that close a hop: the guard's, an approval declined, an
// approval no longer answerable; not a state sealed elsewhere.
func TestCloses(t *testing.T) {
	assert.True(t, hopcheck.Closes(&evidence.Refusal{Action: "a", Err: evidence.ErrDenied}))
	assert.True(t, hopcheck.Closes(errors.Join(errors.New("wrapped"), &evidence.Refusal{Err: evidence.ErrRepeated})))
	assert.True(t, hopcheck.Closes(pause.ErrDeclined))
	key, hop := []byte("0123456789abcdef0123456789abcdef"), digest.SHA256([]byte("an offer"))
	_, err := pause.Open(key, "hs1.x.y", hop, time.Now())
	assert.False(t, hopcheck.Closes(err), "a state not sealed here")
	sealed, err := pause.Seal(key, pause.Bound{Hop: hop.String(), Action: "a", Exp: time.Now().Add(-time.Second).Unix()})
	require.NoError(t, err)
	_, err = pause.Open(key, sealed, hop, time.Now())
	assert.ErrorIs(t, err, pause.ErrState)
	assert.True(t, hopcheck.Closes(err), "a pause the offer's expiry ended")
	assert.False(t, hopcheck.Closes(errors.New("other")))
	assert.False(t, hopcheck.Closes(nil))
	// The idempotency key contract's answers, an answer for another call,
	// and a hop finished (by a replica) close nothing.
	for _, e := range []error{evidence.ErrReplayed, evidence.ErrInFlight, evidence.ErrIdempotencyConflict, evidence.ErrApprovalMismatch, evidence.ErrFinished} {
		assert.False(t, hopcheck.Closes(&evidence.Refusal{Action: "a", Err: e}), "%v", e)
	}
	assert.True(t, hopcheck.Ended(&evidence.Refusal{Action: "a", Err: evidence.ErrFinished}))
	assert.False(t, hopcheck.Ended(&evidence.Refusal{Action: "a", Err: evidence.ErrStopped}), "stopped, not finished")
}

// The idempotency key contract's answer, as every host carries it.
func TestIdempotent(t *testing.T) {
	key := digest.SHA256([]byte("a call"))
	m, ok := hopcheck.Idempotent(&evidence.Refusal{Action: "a", Err: evidence.ErrReplayed,
		Outcome: &authority.Outcome{Result: []byte(`{"refund":"re_1"}`), Error: "partial"}}, key)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"outcome": hopcheck.Replayed, "key": key.String(), "result": map[string]any{"refund": "re_1"}, "error": "partial"}, m)
	m, ok = hopcheck.Idempotent(&evidence.Refusal{Action: "a", Err: evidence.ErrReplayed, Outcome: &authority.Outcome{Result: []byte("not json")}}, digest.Digest{})
	require.True(t, ok)
	assert.Equal(t, map[string]any{"outcome": hopcheck.Replayed, "result": "not json"}, m)
	m, ok = hopcheck.Idempotent(&evidence.Refusal{Action: "a", Err: evidence.ErrInFlight}, key)
	require.True(t, ok)
	assert.Equal(t, hopcheck.InFlight, m["outcome"])
	m, ok = hopcheck.Idempotent(&evidence.Refusal{Action: "a", Err: evidence.ErrIdempotencyConflict}, key)
	require.True(t, ok)
	assert.Equal(t, hopcheck.Conflict, m["outcome"])
	for _, err := range []error{nil, &evidence.Refusal{Action: "a", Err: evidence.ErrRepeated}, &evidence.Refusal{Action: "a", Err: evidence.ErrDenied}} {
		_, ok := hopcheck.Idempotent(err, key)
		assert.False(t, ok, "%v", err)
	}
}

// The acknowledgement and the final disposition go to the ledger, the
// system of record: accepted, or rejected (with its findings, and final);
// once, the first standing; nothing for a package never checked.
func TestAcknowledgeAndFinish(t *testing.T) {
	ctx := context.Background()
	e, cfg, in, ch := checked(t)
	require.NoError(t, cfg.Acknowledge(ctx, ch))
	require.NoError(t, cfg.Acknowledge(ctx, ch), "again: the first stands")
	h, err := e.Ledger.Hop(ctx, in.Digest().String())
	require.NoError(t, err)
	require.NotNil(t, h.Ack)
	assert.Equal(t, authority.Accepted, h.Ack.Decision)
	assert.Nil(t, h.Final)
	require.NoError(t, cfg.Finish(ctx, ch.Guard, in.Digest(), state.Completed, ""))
	require.NoError(t, cfg.Finish(ctx, nil, in.Digest(), state.Failed, ""), "the first disposition stands")
	h, err = e.Ledger.Hop(ctx, in.Digest().String())
	require.NoError(t, err)
	assert.Equal(t, string(state.Completed), h.Final.State)
	require.ErrorIs(t, ch.Guard.Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: agenttest.Allowed}), evidence.ErrFinished)

	_, other := received(t, handoff.OfferParams{Deliver: agenttest.Deliver}) // a package bound to another offer
	in, _ = received(t, handoff.OfferParams{Deliver: agenttest.Deliver})
	ch, err = cfg.Check(ctx, in, other, nil)
	require.NoError(t, err)
	require.True(t, ch.Refused)
	require.NoError(t, cfg.Acknowledge(ctx, ch))
	h, err = e.Ledger.Hop(ctx, in.Digest().String())
	require.NoError(t, err)
	assert.Equal(t, authority.Rejected, h.Ack.Decision)
	assert.Equal(t, string(state.Rejected), h.Final.State)

	in, _ = received(t, handoff.OfferParams{})
	ch, err = cfg.Check(ctx, in, ref.Object{}, carriage.ErrAbsent)
	require.NoError(t, err)
	require.NoError(t, cfg.Acknowledge(ctx, ch))
	h, err = e.Ledger.Hop(ctx, in.Digest().String())
	require.NoError(t, err)
	assert.Nil(t, h.Ack, "no package checked, nothing acknowledged in the ledger")
	require.NoError(t, cfg.Finish(ctx, nil, in.Digest(), state.Canceled, "canceled"))
	h, err = e.Ledger.Hop(ctx, in.Digest().String())
	require.NoError(t, err)
	assert.Equal(t, string(state.Canceled), h.Final.State, "a cancel with no guard at hand, by the offer's digest")
	require.NoError(t, hopcheck.Config{}.Finish(ctx, nil, in.Digest(), state.Canceled, ""), "no ledger: nothing to record")
}
