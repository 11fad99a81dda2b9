// Package pause is what the A2A and MCP delegates share about a must-ask
// call that waits for its owner: the pending approval as the host shows
// it (action, owner, hop, operation, tool, the arguments and their
// digest), the approver's answer, and the state a host hands out with the
// pause and takes back with the answer, sealed to the paused call (the
// hop's offer digest, the action, the operation, the tool, the digest of
// the call's canonical arguments and the call's key), so that it resumes
// nothing else.
//
// An answer is used once (Resume): the host claims the pause in the
// hop's authority ledger (evidence.Guard.Once, under a name the sealed
// state alone gives), atomically across replicas, before the answer is
// recorded and the work resumed; the same answer again, or another answer
// to the same pause, gets the recorded outcome (evidence.ErrReplayed), or
// "in flight" while the first runs, and never resumes the work a second
// time. The answer only ever records an approval of exactly the paused
// call in the guard's ledger (evidence.Guard.ApproveLocal with
// ApprovalRequest.Grant, ApproveSigned): the guard decides, when the work
// asks it again, and consumes the approval once.
package pause

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
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
	"github.com/agentproto/handoff/evidence/authority"
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
// it to the approver (A2A status metadata, an MCP elicitation's _meta, an
// ADK confirmation's payload): what the approval would allow.
type Pending struct {
	Action         string `json:"action"`
	Owner          string `json:"owner"`
	Hop            string `json:"hop"` // handoff.Digest.String of the offer
	OperationID    string `json:"operation_id,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Item           string `json:"item,omitempty"`
	// Tool, Args (the digest of the call's canonical arguments,
	// evidence.ArgsDigest), Arguments (as the call carried them) and Key
	// (the call's key, evidence.Call.Key): the call the approval binds.
	Tool      string `json:"tool,omitempty"`
	Args      string `json:"args,omitempty"`
	Arguments []byte `json:"-"`
	Key       string `json:"key,omitempty"`
}

// Of returns the wire form of an approval request.
func Of(r evidence.ApprovalRequest) Pending {
	p := Pending{Action: r.Action, Owner: r.Owner, Hop: r.Hop.String(), OperationID: r.OperationID,
		IdempotencyKey: r.IdempotencyKey, Item: r.Item, Tool: r.Tool, Arguments: r.Arguments}
	if !r.Args.IsZero() {
		p.Args = r.Args.String()
	}
	if !r.Key.IsZero() {
		p.Key = r.Key.String()
	}
	return p
}

// Map returns p as a JSON object value, for metadata maps: the members
// set, and "arguments", the call's arguments as a JSON value, when they
// are one.
func (p Pending) Map() map[string]any {
	m := map[string]any{"action": p.Action, "owner": p.Owner, "hop": p.Hop}
	for k, v := range map[string]string{"operation_id": p.OperationID, "idempotency_key": p.IdempotencyKey, "item": p.Item,
		"tool": p.Tool, "args": p.Args, "key": p.Key} {
		if v != "" {
			m[k] = v
		}
	}
	var args any
	if len(p.Arguments) > 0 && json.Unmarshal(p.Arguments, &args) == nil {
		m["arguments"] = args
	}
	return m
}

// Requested returns the approval request err carries: a *evidence.Refusal
// wrapping evidence.ErrApprovalRequired, or evidence.ErrApprovalMismatch
// (the operation's approval is for another call: this one needs its own),
// with its Pending.
func Requested(err error) (evidence.ApprovalRequest, bool) {
	var r *evidence.Refusal
	if !errors.As(err, &r) || !(errors.Is(err, evidence.ErrApprovalRequired) || errors.Is(err, evidence.ErrApprovalMismatch)) || r.Pending == nil {
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

// Record records the answer a, given inside the call that paused (an
// older MCP client's, asked on the same request), to the pause of b in the
// ledger of g: a signed approval as given (the guard checks whose it is
// and what it allows), or a local one of exactly the paused call
// (evidence.ApprovalRequest.Grant: its action, operation, tool and
// arguments' digest, one use, by its owner), under operator, whom the host
// authenticated. A declined answer records nothing (ErrDeclined), and a
// local approval with no operator neither (ErrNoOperator).
func Record(ctx context.Context, g *evidence.Guard, b Bound, a Answer, operator string) error {
	if err := precheck(ctx, g, nil, a, operator); err != nil {
		return err
	}
	return grant(ctx, g, b, a, operator)
}

// precheck records a signed approval (ApproveSigned: one statement is one
// grant however often, and however encoded or signed, it is presented)
// and refuses it, recorded, when it does not approve the paused call of
// b (when b is set); and it refuses a local approval without an operator:
// what can be refused before the pause is claimed, so that an unusable
// answer leaves the pause waiting for a usable one.
func precheck(ctx context.Context, g *evidence.Guard, b *Bound, a Answer, operator string) error {
	switch {
	case len(a.Signed) > 0:
		ap, err := g.ApproveSigned(ctx, a.Signed)
		if err != nil || b == nil {
			return err
		}
		e := authority.Effect{Hop: b.Hop, Action: b.Action, OperationID: b.OperationID, IdempotencyKey: b.IdempotencyKey,
			Tool: b.Tool, Args: b.Args, At: ap.Issued}
		if e.OperationID == "" && e.IdempotencyKey == "" {
			e.IdempotencyKey = b.Call // the name a call without one is given (evidence.Guard.Do)
		}
		if !ap.Matches(e) {
			return fmt.Errorf("%w: the signed approval does not approve the call that paused", evidence.ErrApprovalMismatch)
		}
	case a.Approve && operator == "":
		return ErrNoOperator
	}
	return nil
}

// grant records a local approval of exactly the paused call, or refuses a
// declined answer; a signed one is recorded already (precheck).
func grant(ctx context.Context, g *evidence.Guard, b Bound, a Answer, operator string) error {
	switch {
	case len(a.Signed) > 0:
		return nil
	case !a.Approve:
		return ErrDeclined
	}
	req, err := b.Request()
	if err != nil {
		return err
	}
	_, err = g.ApproveLocal(ctx, req.Grant(), operator)
	return err
}

// Take uses the answer a to the pause b (from Open) once and resumes the
// work, f: a signed approval is recorded first (a statement the guard
// refuses, and a local approval with no operator, leave the pause
// waiting, untaken); then the pause is claimed (Resume) and, by the one
// answer that claims it, a local approval of exactly the paused call is
// recorded under operator, or a declined answer refused (ErrDeclined),
// before f runs. Every other answer to the pause gets evidence.ErrInFlight
// or evidence.ErrReplayed with what the one that took it ended with.
func Take(ctx context.Context, g *evidence.Guard, b Bound, a Answer, operator string, f func(context.Context) ([]byte, error)) ([]byte, error) {
	if err := precheck(ctx, g, &b, a, operator); err != nil {
		return nil, err
	}
	return Resume(ctx, g, b, func(ctx context.Context) ([]byte, error) {
		if err := grant(ctx, g, b, a, operator); err != nil {
			return nil, err
		}
		return f(ctx)
	})
}

// Bound is what a request state binds: the paused call (the offer's
// handoff digest, the action, its owner, the operation, the tool, the
// digest of the call's canonical arguments and the call's key), the
// offer's exp, and a nonce that makes each pause one of its own.
type Bound struct {
	Hop            string `json:"hop"`
	Action         string `json:"action"`
	Owner          string `json:"owner"`
	OperationID    string `json:"op,omitempty"`
	IdempotencyKey string `json:"key,omitempty"`
	Tool           string `json:"tool,omitempty"`
	Args           string `json:"args,omitempty"`
	Call           string `json:"call,omitempty"`
	Exp            int64  `json:"exp"`
	Nonce          string `json:"n,omitempty"`

	id string // the SHA-256 of the sealed payload, once opened
}

// BoundOf returns the binding of a pending approval on the hop whose offer
// has the handoff digest hop and expires at exp.
func BoundOf(r evidence.ApprovalRequest, hop digest.Digest, exp time.Time) Bound {
	b := Bound{Hop: hop.String(), Action: r.Action, Owner: r.Owner, OperationID: r.OperationID,
		IdempotencyKey: r.IdempotencyKey, Tool: r.Tool, Exp: exp.Unix()}
	if !r.Args.IsZero() {
		b.Args = r.Args.String()
	}
	if !r.Key.IsZero() {
		b.Call = r.Key.String()
	}
	return b
}

// Request returns the approval request b binds: the one the pause showed,
// without its arguments (the digest binds them) and its item.
func (b Bound) Request() (evidence.ApprovalRequest, error) {
	hop, err := digest.Parse(b.Hop)
	if err != nil {
		return evidence.ApprovalRequest{}, fmt.Errorf("%w: hop: %v", ErrState, err)
	}
	r := evidence.ApprovalRequest{Action: b.Action, Owner: b.Owner, Hop: hop, OperationID: b.OperationID,
		IdempotencyKey: b.IdempotencyKey, Tool: b.Tool}
	if b.Args != "" {
		if r.Args, err = digest.Parse(b.Args); err != nil {
			return evidence.ApprovalRequest{}, fmt.Errorf("%w: args: %v", ErrState, err)
		}
	}
	if b.Call != "" {
		if r.Key, err = digest.Parse(b.Call); err != nil {
			return evidence.ApprovalRequest{}, fmt.Errorf("%w: call: %v", ErrState, err)
		}
	}
	return r, nil
}

// Matches refuses c, the call a resumption makes, unless it is the paused
// call: its key (evidence.Call.Key, which covers the hop, the action, the
// tool, the operation and the arguments' digest) is the one sealed. The
// refusal is an *evidence.Refusal wrapping evidence.ErrApprovalMismatch,
// with the approval the pause asked for.
func (b Bound) Matches(c evidence.Call) error {
	k, err := c.Key()
	if err == nil && b.Call != "" && k.String() == b.Call {
		return nil
	}
	req, rerr := b.Request()
	if rerr != nil {
		return rerr
	}
	return &evidence.Refusal{Action: c.Action, Pending: &req, Err: fmt.Errorf("%w: the call that resumes is not the call that paused", evidence.ErrApprovalMismatch)}
}

// Resume runs f, the work b's answer resumes, once per pause: under
// evidence.Guard.Once, named by the sealed state, so that of any number
// of answers to one pause, replayed or concurrent, on any replica sharing
// the ledger, exactly one runs f; the others get evidence.ErrInFlight
// while it runs and evidence.ErrReplayed with its recorded outcome once
// it ran. b must come from Open.
func Resume(ctx context.Context, g *evidence.Guard, b Bound, f func(context.Context) ([]byte, error)) ([]byte, error) {
	hop, err := digest.Parse(b.Hop)
	if err != nil || b.id == "" {
		return nil, fmt.Errorf("%w: not an opened state", ErrState)
	}
	return g.Once(ctx, evidence.Call{Hop: hop, Action: b.Action, Tool: b.Tool, IdempotencyKey: "pause " + b.id}, f)
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
	b.id = digest.SHA256(payload).String()
	return b, nil
}

// ID returns the pause's identity: the SHA-256 of its sealed payload
// (empty for a Bound that Open did not return).
func (b Bound) ID() string { return b.id }

// Ask returns the approval request err carries for the hop in runs, and
// the request state that binds its answer to that call until the offer's
// exp. It reports false for any other error, or a request of another hop.
func Ask(key []byte, in *handoff.Received, err error) (evidence.ApprovalRequest, string, bool) {
	req, ok := Requested(err)
	if !ok || in == nil || hopwork.Verified(in) == nil || !req.Hop.Equal(in.Digest()) {
		return evidence.ApprovalRequest{}, "", false
	}
	b := BoundOf(req, in.Digest(), hopwork.Verified(in).Exp.Std())
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return evidence.ApprovalRequest{}, "", false
	}
	b.Nonce = base64.RawURLEncoding.EncodeToString(n[:])
	state, serr := Seal(key, b)
	if serr != nil {
		return evidence.ApprovalRequest{}, "", false
	}
	return req, state, true
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
