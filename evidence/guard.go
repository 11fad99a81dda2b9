package evidence

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/state"
)

// Guard refusals. Every error Authorize returns is a *Refusal wrapping one
// of these.
var (
	// ErrDenied: the action is in "denied".
	ErrDenied = errors.New("evidence: action denied")
	// ErrApprovalRequired: the action is "must ask" and no unused approval
	// matches it in the ledger. The Refusal carries the pending approval
	// to show (Refusal.Pending).
	ErrApprovalRequired = errors.New("evidence: approval required")
	// ErrUnlisted: the action is in no list; anything unlisted is refused.
	ErrUnlisted = errors.New("evidence: action not in the package's authority")
	// ErrRepeated: the operation id or idempotency key names an effect
	// already recorded in the ledger: a completed action of the package,
	// or a call authorized before, by this guard, an earlier one for the
	// same hop, or a replica sharing the ledger.
	ErrRepeated = errors.New("evidence: operation already performed")
	// ErrUnnamed: a "must ask" call carries neither an operation id nor an
	// idempotency key, so its approval could not be bound to one effect.
	ErrUnnamed = errors.New("evidence: a must-ask call needs an operation id or idempotency key")
	// ErrOtherHop: the call is for another hop than the guard's.
	ErrOtherHop = errors.New("evidence: the guard answers for another hop")
	// ErrStopped: the guard was stopped, or its hop's final disposition is
	// recorded in the ledger (hop canceled, rejected or done).
	ErrStopped = errors.New("evidence: guard stopped")
	// ErrLedger: the ledger could not answer; the call is refused.
	ErrLedger = errors.New("evidence: authority ledger unavailable")
	// ErrNotPassed: a guard is built, and a package accepted, only on a
	// report that passed against the offer (Report.Acceptable).
	ErrNotPassed = errors.New("evidence: package did not pass the check")
	// ErrNotApprover: the approver is not the owner the package names for
	// the action's pending approval, or the action is not "must ask".
	ErrNotApprover = errors.New("evidence: not the approval's owner")
)

// Refusal is a refused call.
type Refusal struct {
	Action string
	// Key is the operation id or idempotency key refused as repeated.
	Key string
	// Pending, for ErrApprovalRequired, is the approval the host must
	// obtain: show it to its owner (A2A input-required, an MCP input
	// request, a tool confirmation).
	Pending *ApprovalRequest
	Err     error
}

func (r *Refusal) Error() string {
	if r.Key != "" {
		return fmt.Sprintf("%v: %q (key %q)", r.Err, r.Action, r.Key)
	}
	return fmt.Sprintf("%v: %q", r.Err, r.Action)
}

func (r *Refusal) Unwrap() error { return r.Err }

// ApprovalRequest is a "must ask" approval not yet given, as a value a host
// can show and act on: the action, the owner who must approve it, the hop
// (the offer's handoff digest) and the operation it would unlock.
type ApprovalRequest struct {
	Action string
	Owner  string
	Hop    digest.Digest
	// OperationID and IdempotencyKey name the effect waiting for it; both
	// are empty in the list Guard.Pending returns.
	OperationID    string
	IdempotencyKey string
	// Item is the package's description of the pending approval.
	Item string
}

// Call is one tool call or mutation the receiving agent is about to make.
type Call struct {
	// Hop is the handoff digest of the offer the call is made under
	// (Received.Digest): the guard answers only for its own hop.
	Hop    digest.Digest
	Action string
	// OperationID and IdempotencyKey, when set, name the effect: a value
	// already recorded in the ledger, as either kind, is refused (see
	// authority for the matching rule: exact, one namespace).
	OperationID    string
	IdempotencyKey string
}

// GuardConfig is what a guard needs besides its report.
type GuardConfig struct {
	// Ledger is the system of record of effects and approvals. Share one
	// between every guard of the agent, and make it durable (bbolt) or
	// shared (Redis) for the guard's memory to survive restarts and span
	// replicas: a guard only refuses what its ledger holds. Required.
	Ledger authority.Ledger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Trust verifies signed approvals (ApproveSigned): it binds each
	// approver's AgentId to its keys. Nil refuses signed approvals.
	Trust *handoff.Trust
}

// ErrNoLedger: NewGuard was given no ledger.
var ErrNoLedger = errors.New("evidence: a guard needs an authority ledger")

// class is an action's place in the package's authority.
type class uint8

const (
	unlisted class = iota
	allowed
	mustAsk
	denied
)

// Guard enforces a verified package's authority at run time for one hop:
// the receiving agent consults it before each tool call or mutation. Its
// memory of effects and approvals is its ledger's. It is safe for
// concurrent use and runs no caller code under a lock.
type Guard struct {
	hop     digest.Digest
	hopKey  string
	exp     time.Time // the offer's exp: no authority outlives it
	actions map[string]class
	pending map[string]Pending // must-ask action -> its pending approval
	mustAsk []string           // the must-ask actions, in package order
	ledger  authority.Ledger
	now     func() time.Time
	trust   *handoff.Trust

	stopOnce sync.Once
	stopped  chan struct{}
	reason   error
}

// NewGuard builds the guard of a package that passed the check against its
// offer (rep from CheckReceived, Acceptable), for that offer's hop. The
// package's completed actions are recorded in the ledger as performed, so
// that their operation ids and idempotency keys are refused. A hop whose
// final disposition the ledger holds gets a stopped guard.
func NewGuard(ctx context.Context, rep *Report, cfg GuardConfig) (*Guard, error) {
	if rep == nil || !rep.Acceptable() {
		return nil, ErrNotPassed
	}
	if rep.offerDig.IsZero() {
		return nil, fmt.Errorf("%w: the report names no offer digest (use CheckReceived)", ErrNotPassed)
	}
	if cfg.Ledger == nil {
		return nil, ErrNoLedger
	}
	p := rep.unverified
	g := &Guard{
		hop: rep.OfferDigest(), hopKey: rep.offerDig.String(), exp: rep.offerTime.Std(),
		actions: make(map[string]class, len(p.Authority.Allowed)+len(p.Authority.MustAsk)+len(p.Authority.Denied)),
		pending: map[string]Pending{}, ledger: cfg.Ledger, now: cfg.Now, trust: cfg.Trust,
		stopped: make(chan struct{}),
	}
	if g.now == nil {
		g.now = time.Now
	}
	// Denied wins over must-ask, which wins over allowed (the check
	// refuses a package that lists an action twice; this is the order a
	// guard would take if it did not).
	for _, list := range []struct {
		names []string
		c     class
	}{{p.Authority.Allowed, allowed}, {p.Authority.MustAsk, mustAsk}, {p.Authority.Denied, denied}} {
		for _, a := range list.names {
			g.actions[a] = list.c
		}
	}
	for _, a := range p.Authority.MustAsk {
		if g.actions[a] == mustAsk {
			g.mustAsk = append(g.mustAsk, a)
		}
	}
	for _, q := range p.Pending {
		if q.Kind == PendingApproval && q.Action != "" && g.actions[q.Action] == mustAsk {
			if _, ok := g.pending[q.Action]; !ok {
				g.pending[q.Action] = q
			}
		}
	}
	h, err := cfg.Ledger.Hop(ctx, g.hopKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLedger, err)
	}
	if h.Final != nil {
		g.stop(fmt.Errorf("%w: hop finished %s", ErrStopped, h.Final.State))
		return g, nil
	}
	for _, a := range p.Completed {
		e := authority.Effect{Hop: g.hopKey, Action: a.Action, OperationID: a.OperationID, IdempotencyKey: a.IdempotencyKey, At: p.Handoff.Time}
		if e.Validate() != nil {
			continue
		}
		if err := cfg.Ledger.Perform(ctx, e); err != nil && !errors.Is(err, authority.ErrRepeated) {
			return nil, fmt.Errorf("%w: %w", ErrLedger, err)
		}
	}
	return g, nil
}

// Hop returns the handoff digest of the guard's offer.
func (g *Guard) Hop() digest.Digest { return cloneDigest(g.hop) }

// Authorize decides a call, for the guard's hop only (ErrOtherHop): an
// action in "denied" is refused, one in "allowed" passes, one in "must
// ask" passes only by consuming one use of a matching approval in the
// ledger, and anything unlisted is refused. A call that names an effect
// (operation id or idempotency key) passes only if the ledger records it
// now, atomically, for the first time; a must-ask call must name one.
// Nothing passes once the guard is stopped or the offer has expired.
func (g *Guard) Authorize(ctx context.Context, c Call) error {
	if !c.Hop.Equal(g.hop) {
		return &Refusal{Action: c.Action, Err: ErrOtherHop}
	}
	select {
	case <-g.stopped:
		return &Refusal{Action: c.Action, Err: g.reason}
	default:
	}
	now := g.now()
	if !now.Before(g.exp) {
		return &Refusal{Action: c.Action, Err: fmt.Errorf("%w: the offer expired at %s", ErrStopped, g.exp.Format(time.RFC3339))}
	}
	cl := g.actions[c.Action]
	switch cl {
	case denied:
		return &Refusal{Action: c.Action, Err: ErrDenied}
	case unlisted:
		return &Refusal{Action: c.Action, Err: ErrUnlisted}
	case mustAsk:
		if c.OperationID == "" && c.IdempotencyKey == "" {
			return &Refusal{Action: c.Action, Err: ErrUnnamed}
		}
	}
	if c.OperationID == "" && c.IdempotencyKey == "" {
		return nil
	}
	err := g.ledger.Perform(ctx, authority.Effect{Hop: g.hopKey, Action: c.Action, OperationID: c.OperationID,
		IdempotencyKey: c.IdempotencyKey, NeedsApproval: cl == mustAsk, At: now})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, authority.ErrRepeated):
		key := c.OperationID
		var r *authority.Refusal
		if errors.As(err, &r) {
			key = r.Held.Name
		}
		return &Refusal{Action: c.Action, Key: key, Err: ErrRepeated}
	case errors.Is(err, authority.ErrNoApproval):
		p := g.pendingFor(c)
		return &Refusal{Action: c.Action, Pending: &p, Err: ErrApprovalRequired}
	case errors.Is(err, authority.ErrFinished):
		g.stop(fmt.Errorf("%w: %v", ErrStopped, err))
		return &Refusal{Action: c.Action, Err: g.reason}
	default:
		return &Refusal{Action: c.Action, Err: fmt.Errorf("%w: %w", ErrLedger, err)}
	}
}

func (g *Guard) pendingFor(c Call) ApprovalRequest {
	q := g.pending[c.Action]
	return ApprovalRequest{Action: c.Action, Owner: q.Owner, Hop: g.Hop(), OperationID: c.OperationID,
		IdempotencyKey: c.IdempotencyKey, Item: q.Item}
}

// Pending returns the package's must-ask actions with the approvals they
// wait for, in the order of the package's authority, each with no uses
// left in the ledger: what a host shows as awaiting approval.
func (g *Guard) Pending(ctx context.Context) ([]ApprovalRequest, error) {
	as, err := g.ledger.Approvals(ctx, g.hopKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLedger, err)
	}
	now := g.now()
	var out []ApprovalRequest
	for _, a := range g.mustAsk {
		live := false
		for _, ap := range as {
			live = live || (ap.Action == a && ap.OperationID == "" && ap.Remaining > 0 && !now.Before(ap.Issued) && now.Before(ap.Expires))
		}
		if !live {
			out = append(out, g.pendingFor(Call{Action: a}))
		}
	}
	return out, nil
}

// Grant is an approval of a "must ask" action on the guard's hop.
type Grant struct {
	Action string
	// OperationID, when set, approves that one effect only; else Uses
	// effects (1 when zero).
	OperationID string
	Uses        int
	// Approver is who approves: it must be the owner the package's
	// pending approval for Action names.
	Approver string
	// Expires ends the approval; zero means the offer's exp. It never
	// outlives the offer.
	Expires time.Time
}

// ApproveLocal records an approval given by a local operator whom the host
// has authenticated (operator names that session, for the record): the
// ledger's record is its only evidence (authority.SourceOperator).
func (g *Guard) ApproveLocal(ctx context.Context, gr Grant, operator string) (authority.Approval, error) {
	if operator == "" {
		return authority.Approval{}, fmt.Errorf("%w: a local approval names the authenticated operator", ErrNotApprover)
	}
	return g.grant(ctx, gr, authority.SourceOperator, []byte(operator), g.now())
}

func (g *Guard) grant(ctx context.Context, gr Grant, src authority.Source, evidence []byte, issued time.Time) (authority.Approval, error) {
	q, ok := g.pending[gr.Action]
	if g.actions[gr.Action] != mustAsk || !ok || q.Owner == "" {
		return authority.Approval{}, fmt.Errorf("%w: %q has no pending approval", ErrNotApprover, gr.Action)
	}
	if gr.Approver != q.Owner {
		return authority.Approval{}, fmt.Errorf("%w: %q is approved by %q, not %q", ErrNotApprover, gr.Action, q.Owner, gr.Approver)
	}
	exp := gr.Expires
	if exp.IsZero() || exp.After(g.exp) {
		exp = g.exp
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return authority.Approval{}, err
	}
	a := authority.Approval{ID: base64.RawURLEncoding.EncodeToString(id[:]), Hop: g.hopKey, Action: gr.Action,
		OperationID: gr.OperationID, Uses: gr.Uses, Approver: gr.Approver, Issued: issued, Expires: exp,
		Source: src, Evidence: evidence}
	if src == authority.SourceSigned {
		// One statement is one grant, however often it is presented.
		a.ID = digest.SHA256(evidence).B64()
	}
	a, err := a.Normalized()
	if err != nil {
		return authority.Approval{}, err
	}
	if err := g.ledger.Grant(ctx, a); err != nil {
		return authority.Approval{}, fmt.Errorf("%w: %w", ErrLedger, err)
	}
	return a, nil
}

// Stop refuses every later call of this guard, with reason wrapped in
// ErrStopped. It records nothing; Finish also records the hop's final
// disposition in the ledger, after which every guard of the hop, in every
// process sharing the ledger, refuses every effect (a call naming an
// operation id or idempotency key, which the ledger sees), and a guard
// built for the hop later starts stopped.
func (g *Guard) Stop(reason string) { g.stop(fmt.Errorf("%w: %s", ErrStopped, reason)) }

func (g *Guard) stop(err error) {
	g.stopOnce.Do(func() {
		g.reason = err
		close(g.stopped)
	})
}

// Finish records the hop's final disposition (its terminal state and a
// detail for people) in the ledger and stops the guard.
func (g *Guard) Finish(ctx context.Context, state state.State, detail string) error {
	if err := g.ledger.Finish(ctx, g.hopKey, authority.Final{State: string(state), Detail: detail, At: g.now()}); err != nil {
		return fmt.Errorf("%w: %w", ErrLedger, err)
	}
	g.Stop("hop finished " + string(state))
	return nil
}

// Do authorizes c and, if it passes, runs f outside any lock: wrap tool
// dispatch with it.
func (g *Guard) Do(ctx context.Context, c Call, f func(context.Context) error) error {
	if err := g.Authorize(ctx, c); err != nil {
		return err
	}
	return f(ctx)
}

type guardKey struct{}

// ContextWithGuard returns ctx carrying g: a host's middleware puts the
// guard of the hop it has verified in the context it serves that hop
// with, and the tools take it from there (GuardFromContext), calling
// Authorize with the hop's digest.
func ContextWithGuard(ctx context.Context, g *Guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// GuardFromContext returns the guard ctx carries, or nil.
func GuardFromContext(ctx context.Context) *Guard {
	g, _ := ctx.Value(guardKey{}).(*Guard)
	return g
}

// RecordAcknowledgement keeps the receiver's acknowledgement of a package
// (Acknowledge: accepted, or rejected with the finding codes) in the
// ledger, under the hop of the offer rep was made against (rep from
// CheckReceived), with the acknowledged package digest: the system of
// record's copy of what Reply signed. A second call with the same
// acknowledgement is a no-op; another is authority.ErrConflict.
func RecordAcknowledgement(ctx context.Context, l authority.Ledger, rep *Report, at time.Time) error {
	if rep == nil || !rep.checked || rep.offerDig.IsZero() {
		return fmt.Errorf("%w: the report names no offer digest (use CheckReceived)", ErrNotPassed)
	}
	ack := Acknowledge(rep)
	return l.Acknowledge(ctx, rep.offerDig.String(), authority.Ack{Decision: authority.Decision(ack.Decision), Reason: ack.Reason,
		Findings: ack.Findings, Package: rep.PackageRef().Dig.String(), At: at})
}
