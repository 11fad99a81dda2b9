// Package pause is what the A2A and MCP delegates share about a must-ask
// action that waits for its owner: the pending approval as the host shows
// it (action, owner, hop, operation), the approver's answer, and the state
// a host hands out with the pause and takes back with the answer, bound to
// the hop's offer digest and the operation so that it cannot be replayed
// onto another hop or operation.
//
// The answer only ever records an approval in the guard's authority ledger
// (evidence.Guard.ApproveLocal, ApproveSigned): the guard decides, when the
// work asks it again, and consumes the approval once.
package pause

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/state"
)

// Errors of a pause's answer.
var (
	// ErrState: the request state is not one this host sealed, or it is
	// bound to another hop or operation, or it expired with the offer.
	ErrState = errors.New("handoff: the approval's request state does not hold")
	// ErrDeclined: the approver declined, or answered nothing usable; no
	// approval is recorded and the action never runs.
	ErrDeclined = errors.New("handoff: the approval was declined")
	// ErrNoOperator: a local approval arrived with no operator the host
	// authenticated; it is not recorded.
	ErrNoOperator = errors.New("handoff: a local approval needs an authenticated operator")
	// ErrKey: the sealing key is shorter than 32 bytes.
	ErrKey = errors.New("handoff: the request state key needs at least 32 bytes")
	// ErrExpired: the request state expired with the offer, so that the
	// pause can no longer be answered; it wraps ErrState too.
	ErrExpired = errors.New("the offer expired")
)

// MinKey is the least length of a sealing key.
const MinKey = 32

// Pending is the wire form of an evidence.ApprovalRequest, as a host shows
// it to the approver (A2A status metadata, an MCP elicitation's _meta).
type Pending struct {
	Action         string `json:"action"`
	Owner          string `json:"owner"`
	Hop            string `json:"hop"` // handoff.Digest.String of the offer
	OperationID    string `json:"operation_id,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Item           string `json:"item,omitempty"`
}

// Of returns the wire form of an approval request.
func Of(r evidence.ApprovalRequest) Pending {
	return Pending{Action: r.Action, Owner: r.Owner, Hop: r.Hop.String(), OperationID: r.OperationID,
		IdempotencyKey: r.IdempotencyKey, Item: r.Item}
}

// Map returns p as a JSON object value, for metadata maps.
func (p Pending) Map() map[string]any {
	m := map[string]any{"action": p.Action, "owner": p.Owner, "hop": p.Hop}
	for k, v := range map[string]string{"operation_id": p.OperationID, "idempotency_key": p.IdempotencyKey, "item": p.Item} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// Requested returns the approval request err carries: a *evidence.Refusal
// wrapping evidence.ErrApprovalRequired with its Pending.
func Requested(err error) (evidence.ApprovalRequest, bool) {
	var r *evidence.Refusal
	if !errors.As(err, &r) || !errors.Is(err, evidence.ErrApprovalRequired) || r.Pending == nil {
		return evidence.ApprovalRequest{}, false
	}
	return *r.Pending, true
}

// Answer is the approver's answer to a pause.
type Answer struct {
	// Approve is a local operator's approval, recorded by the host with
	// evidence.Guard.ApproveLocal under the operator it authenticated.
	Approve bool
	// Signed is a signed approval statement (evidence.SignApproval),
	// recorded with evidence.Guard.ApproveSigned; it wins over Approve.
	Signed []byte
}

// AnswerOf reads an answer from a JSON object: "decision" ("approve" or
// anything else) and "approval" (a signed approval, compact JWS). A value of
// another type declines.
func AnswerOf(m map[string]any) Answer {
	var a Answer
	if s, ok := m["approval"].(string); ok && s != "" {
		a.Signed = []byte(s)
	}
	d, _ := m["decision"].(string)
	a.Approve = d == "approve"
	return a
}

// Record records the answer to the pause of req in the ledger of g: a
// signed approval as given, a local one for req's operation only, by req's
// owner, under operator (who the host authenticated). A declined answer records nothing (ErrDeclined).
func Record(ctx context.Context, g *evidence.Guard, req Bound, a Answer, operator string) error {
	switch {
	case len(a.Signed) > 0:
		_, err := g.ApproveSigned(ctx, a.Signed)
		return err
	case !a.Approve:
		return ErrDeclined
	case operator == "":
		return ErrNoOperator
	}
	// One effect only: the operation id, or the idempotency key (an
	// approval's operation id matches either, authority.Approval.Matches),
	// which the ledger lets pass once: an answer presented again can
	// record another grant but never unlock a second effect.
	op := req.OperationID
	if op == "" {
		op = req.IdempotencyKey
	}
	gr := evidence.Grant{Action: req.Action, OperationID: op, Approver: req.Owner}
	_, err := g.ApproveLocal(ctx, gr, operator)
	return err
}

// Bound is what a request state binds: the offer's handoff digest, the
// action, its owner, the operation and the offer's exp.
type Bound struct {
	Hop            string `json:"hop"`
	Action         string `json:"action"`
	Owner          string `json:"owner"`
	OperationID    string `json:"op,omitempty"`
	IdempotencyKey string `json:"key,omitempty"`
	Exp            int64  `json:"exp"`
}

// BoundOf returns the binding of a pending approval on the hop whose offer
// has the handoff digest hop and expires at exp.
func BoundOf(r evidence.ApprovalRequest, hop digest.Digest, exp time.Time) Bound {
	return Bound{Hop: hop.String(), Action: r.Action, Owner: r.Owner, OperationID: r.OperationID,
		IdempotencyKey: r.IdempotencyKey, Exp: exp.Unix()}
}

const sealPrefix = "hs1."

// Seal returns the request state of b: its JSON and an HMAC-SHA256 of it
// under key (RFC 2104), base64url. The state is opaque to the client and
// readable by it; it holds no secret.
func Seal(key []byte, b Bound) (string, error) {
	if len(key) < MinKey {
		return "", ErrKey
	}
	payload, err := json.Marshal(b)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sealPrefix))
	m.Write(payload)
	enc := base64.RawURLEncoding
	return sealPrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(m.Sum(nil)), nil
}

// Open checks a request state sealed under key for the hop whose offer has
// the handoff digest hop, at now: a state sealed elsewhere, altered, for
// another hop or expired is ErrState.
func Open(key []byte, state string, hop digest.Digest, now time.Time) (Bound, error) {
	if len(key) < MinKey {
		return Bound{}, ErrKey
	}
	rest, ok := strings.CutPrefix(state, sealPrefix)
	p64, t64, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || len(state) > 4<<10 {
		return Bound{}, fmt.Errorf("%w: not a sealed state", ErrState)
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p64)
	tag, err2 := enc.DecodeString(t64)
	if err1 != nil || err2 != nil {
		return Bound{}, fmt.Errorf("%w: not a sealed state", ErrState)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sealPrefix))
	m.Write(payload)
	if !hmac.Equal(tag, m.Sum(nil)) {
		return Bound{}, fmt.Errorf("%w: the state was not sealed by this host", ErrState)
	}
	var b Bound
	if err := json.Unmarshal(payload, &b); err != nil {
		return Bound{}, fmt.Errorf("%w: %v", ErrState, err)
	}
	if b.Hop != hop.String() {
		return Bound{}, fmt.Errorf("%w: it is bound to hop %s, not this one", ErrState, b.Hop)
	}
	if !now.Before(time.Unix(b.Exp, 0)) {
		return Bound{}, fmt.Errorf("%w: %w", ErrState, ErrExpired)
	}
	return b, nil
}

// Ask returns the approval request err carries for the hop in runs, and
// the request state that binds its answer to that hop and operation until
// the offer's exp. It reports false for any other error, or a request of
// another hop.
func Ask(key []byte, in *handoff.Received, err error) (evidence.ApprovalRequest, string, bool) {
	req, ok := Requested(err)
	if !ok || in == nil || hopwork.Verified(in) == nil || !req.Hop.Equal(in.Digest()) {
		return evidence.ApprovalRequest{}, "", false
	}
	state, serr := Seal(key, BoundOf(req, in.Digest(), hopwork.Verified(in).Exp.Std()))
	if serr != nil {
		return evidence.ApprovalRequest{}, "", false
	}
	return req, state, true
}

// Take checks the request state of an answer against the hop in runs and
// records the answer in the ledger of g (Record).
func Take(ctx context.Context, key []byte, state string, in *handoff.Received, now time.Time, g *evidence.Guard, a Answer, operator string) error {
	b, err := Open(key, state, in.Digest(), now)
	if err != nil {
		return err
	}
	return Record(ctx, g, b, a, operator)
}

// Accepted returns the last status of a retransmitted hop when it is
// "accepted": the hop's work may resume; a hop that ended never does.
func Accepted(in *handoff.Received) (handoff.Signed, bool) {
	last, ok := in.LastStatus()
	if !ok {
		return handoff.Signed{}, false
	}
	_, st, err := handoff.InspectUnverified(last, handoff.Limits{})
	if err != nil || st == nil || st.State != state.Accepted {
		return handoff.Signed{}, false
	}
	return last, true
}

// Config is what a host's Approvals share: the sealing key and the clock.
// The guard of a hop comes from the package carried with its offer, or
// from Approvals.Guard (hopcheck.Config).
type Config struct {
	Key []byte
	Now func() time.Time
}

// Validate refuses a key shorter than MinKey.
func (c Config) Validate() error {
	if len(c.Key) < MinKey {
		return fmt.Errorf("%w: Approvals needs a Key of %d bytes or more", handoff.ErrConfig, MinKey)
	}
	return nil
}

// Time returns the clock's now.
func (c Config) Time() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
