package evidence

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
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
	// already recorded in the ledger, on this hop or an earlier hop of its
	// verified chain: a completed action of the package, or a call
	// authorized before, by this guard, an earlier one for the same hop,
	// or a replica sharing the ledger. The three errors below wrap it and
	// say more when the ledger knows the call that recorded it.
	ErrRepeated = errors.New("evidence: operation already performed")
	// ErrInFlight: the same call (its key: Call.Key) was claimed on this
	// hop and its outcome is not recorded yet. Answer "in flight, retry
	// later": agentic commerce's idempotency_in_flight, HTTP 409 with
	// Retry-After. A claim whose process died before recording the outcome
	// stays in flight until an operator, having consulted the system of
	// record, settles it (authority.Ledger.Settle): the effect is never run
	// a second time (HC-38). Wraps ErrRepeated.
	ErrInFlight = fmt.Errorf("%w: the same call is in flight", ErrRepeated)
	// ErrReplayed: the same call was performed on this hop; the effect does
	// not run again. Refusal.Outcome is the outcome recorded for it (nil
	// for a call recorded by Authorize, whose outcome the ledger never
	// saw): answer with it, marked as a replay (agentic commerce's
	// Idempotent-Replayed: true). Wraps ErrRepeated.
	ErrReplayed = fmt.Errorf("%w: the same call, replayed", ErrRepeated)
	// ErrIdempotencyConflict: the operation id or idempotency key was used
	// on this hop by another call: other arguments, another action or
	// another tool (agentic commerce's idempotency_conflict, HTTP 422).
	// Wraps ErrRepeated.
	ErrIdempotencyConflict = fmt.Errorf("%w: by another call", ErrRepeated)
	// ErrApprovalMismatch: the call's operation has an approval, given for
	// another call (another tool or other arguments): a resumption that is
	// not the call that paused. The call is refused; Refusal.Pending is
	// the approval this call would need.
	ErrApprovalMismatch = errors.New("evidence: the approval is for another call")
	// ErrUnsettled: Do ran the effect but could not record its outcome;
	// the result Do returns with it is the effect's. The claim stays in
	// flight (ErrInFlight) until it is settled.
	ErrUnsettled = errors.New("evidence: the effect ran; its outcome is not recorded")
	// ErrUnnamed: a "must ask" call given to Authorize carries neither an
	// operation id nor an idempotency key, so its approval could not be
	// bound to one effect. (Do names such a call by its key.)
	ErrUnnamed = errors.New("evidence: a must-ask call needs an operation id or idempotency key")
	// ErrOtherHop: the call is for another hop than the guard's.
	ErrOtherHop = errors.New("evidence: the guard answers for another hop")
	// ErrStopped: the guard was stopped, or its hop's final disposition is
	// recorded in the ledger (hop canceled, rejected or done: ErrFinished),
	// or the offer expired.
	ErrStopped = errors.New("evidence: guard stopped")
	// ErrFinished: the hop's final disposition is recorded in the ledger,
	// by this process or another sharing it: the hop takes no more
	// effects. A call claimed on the hop before it finished and presented
	// again is still answered by the contract (ErrReplayed, ErrInFlight,
	// ErrIdempotencyConflict). Wraps ErrStopped.
	ErrFinished = fmt.Errorf("%w: the hop's final disposition is recorded", ErrStopped)
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
	// Key is the name refused as repeated: the operation id or
	// idempotency key, or for a call Do named by its key, that key.
	Key string
	// Pending, for ErrApprovalRequired and ErrApprovalMismatch, is the
	// approval the call needs: show it to its owner (A2A input-required,
	// an MCP input request, a tool confirmation).
	Pending *ApprovalRequest
	// Outcome, for ErrReplayed, is the outcome recorded for the call the
	// first time, when the ledger holds one.
	Outcome *authority.Outcome
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
// (the offer's handoff digest) and the call it would unlock. Grant and
// Statement return the approval of exactly that call.
type ApprovalRequest struct {
	Action string
	Owner  string
	Hop    digest.Digest
	// OperationID and IdempotencyKey name the effect waiting for it; both
	// are empty in the list Guard.Pending returns.
	OperationID    string
	IdempotencyKey string
	// Tool is the call's tool, Args the digest of its canonical arguments
	// (ArgsDigest), Arguments the arguments as the call carried them
	// (nil when it carried none), and Key the call's key (Call.Key): what
	// the owner is shown and what the approval binds. Args and Key are
	// zero in the list Guard.Pending returns.
	Tool      string
	Args      digest.Digest
	Arguments []byte
	Key       digest.Digest
	// Item is the package's description of the pending approval.
	Item string
}

// operation is the name the approval of r binds: the operation id, else
// the idempotency key, else the call's key (the name Do gives a call that
// has neither).
func (r ApprovalRequest) operation() string {
	switch {
	case r.OperationID != "":
		return r.OperationID
	case r.IdempotencyKey != "":
		return r.IdempotencyKey
	case !r.Key.IsZero():
		return r.Key.String()
	}
	return ""
}

// Grant returns the approval of exactly the call r waits for: its action,
// its operation, its tool and its arguments' digest, by the owner r names,
// for one use. Record it with Guard.ApproveLocal; a resumed call that
// differs is refused (ErrApprovalMismatch).
func (r ApprovalRequest) Grant() Grant {
	return Grant{Action: r.Action, OperationID: r.operation(), Tool: r.Tool, Args: r.Args.Clone(), Approver: r.Owner}
}

// Statement returns the statement the owner signs (SignApproval) to approve
// exactly the call r waits for, from iat until exp.
func (r ApprovalRequest) Statement(iat, exp time.Time) ApprovalStatement {
	st := ApprovalStatement{Type: ApprovalType, Hop: r.Hop.String(), Action: r.Action, OperationID: r.operation(),
		Tool: r.Tool, Approver: r.Owner, Iat: iat.Unix(), Exp: exp.Unix()}
	if !r.Args.IsZero() {
		st.Args = r.Args.String()
	}
	return st
}

// Call is one tool call or mutation the receiving agent is about to make.
type Call struct {
	// Hop is the handoff digest of the offer the call is made under
	// (Received.Digest): the guard answers only for its own hop.
	Hop    digest.Digest
	Action string
	// Tool is the name of the tool the host runs for Action, when it has
	// one; it is part of the call's key and of its approval.
	Tool string
	// Args are the call's arguments as the host received them: one JSON
	// value (RFC 8259, I-JSON), or nil for none. The guard canonicalizes
	// them (RFC 8785) and binds their digest (ArgsDigest) to the call's
	// key and to its approval.
	Args []byte
	// OperationID and IdempotencyKey, when set, name the effect: a value
	// already recorded in the ledger, on this hop or an earlier hop of its
	// verified chain, as either kind, is refused (see authority for the
	// matching rule: exact, one namespace per hop).
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
	chain   []string  // the earlier hops of the verified chain, outermost first
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
// package's completed actions are recorded in the ledger as performed, each
// in the scope of the hop that performed it (CompletedAction.Hop: this hop,
// or an earlier hop of its verified chain), so that their operation ids
// and idempotency keys are refused; a completed action that names a hop
// outside that chain is not recorded (the check reports it,
// "effect-out-of-scope"). A hop whose final disposition the ledger holds
// gets a stopped guard.
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
		hop: rep.OfferDigest(), hopKey: rep.offerDig.String(), chain: rep.chainKeys(), exp: rep.offerTime.Std(),
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
		g.stop(fmt.Errorf("%w: hop finished %s", ErrFinished, h.Final.State))
		return g, nil
	}
	for _, a := range p.Completed {
		hop, chain, ok := g.scope(a.Hop)
		if !ok {
			continue // outside the verified chain: never recorded
		}
		e := authority.Effect{Hop: hop, Chain: chain, Action: a.Action, OperationID: a.OperationID, IdempotencyKey: a.IdempotencyKey,
			Marker: true, At: p.Handoff.Time}
		if e.Validate() != nil {
			continue
		}
		if err := cfg.Ledger.Perform(ctx, e); err != nil && !errors.Is(err, authority.ErrRepeated) && !errors.Is(err, authority.ErrFinished) {
			return nil, fmt.Errorf("%w: %w", ErrLedger, err)
		}
	}
	return g, nil
}

// scope returns the scope a completed action naming hop was performed in,
// with the chain before it: the guard's hop when hop is empty (or is
// it), an earlier hop of the verified chain, or false.
func (g *Guard) scope(hop string) (string, []string, bool) {
	if hop == "" || hop == g.hopKey {
		return g.hopKey, g.chain, true
	}
	for i, h := range g.chain {
		if h == hop {
			return h, g.chain[:i:i], true
		}
	}
	return "", nil, false
}

// Hop returns the handoff digest of the guard's offer.
func (g *Guard) Hop() digest.Digest { return cloneDigest(g.hop) }

// Effects reports whether the ledger holds an effect taken under the
// guard's hop, by any guard of the hop in any process sharing the ledger
// (authority.HopRecord.Effects): a call Authorize recorded (one that names
// an effect), or Do or Claim claimed, whatever became of it. The
// package's completed actions and the units of work of Once are not
// effects. False, once no effect of the hop can be taken any more (its
// final disposition recorded, or the offer expired), shows that the hop's
// work took no effect through its guards: what a host that ran every
// effect of the hop under them knows of its outcome (draft section 4,
// "Knowing the Outcome"). An effect taken without asking the guard, or
// asked with Authorize under no name, the ledger cannot know of.
func (g *Guard) Effects(ctx context.Context) (bool, error) {
	h, err := g.ledger.Hop(ctx, g.hopKey)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrLedger, err)
	}
	return h.Effects, nil
}

// Authorize decides a call, for the guard's hop only (ErrOtherHop): an
// action in "denied" is refused, one in "allowed" passes, one in "must
// ask" passes only by consuming one use of a matching approval in the
// ledger, and anything unlisted is refused. A call that names an effect
// (operation id or idempotency key) passes only if the ledger records it
// now, atomically, for the first time; a must-ask call must name one. A
// call that carries its arguments or its tool is recorded with its key
// (Call.Key): presented again it is ErrReplayed (with no Outcome: the
// effect is recorded as performed when Authorize returns, and the ledger
// never learns how it ended), and its operation under another call is
// ErrIdempotencyConflict; a call that carries neither is recorded without
// a key, and presented again is ErrRepeated. Use Do to run the effect
// under the idempotency key contract. Nothing passes once the guard is
// stopped or the offer has expired.
func (g *Guard) Authorize(ctx context.Context, c Call) error {
	cl, now, err := g.decide(c)
	if err != nil {
		return err
	}
	if c.OperationID == "" && c.IdempotencyKey == "" {
		if cl == mustAsk {
			return &Refusal{Action: c.Action, Err: ErrUnnamed}
		}
		return nil
	}
	var b binding
	if c.Args != nil || c.Tool != "" {
		if b, err = c.bind(g.hopKey); err != nil {
			return &Refusal{Action: c.Action, Err: err}
		}
	}
	return g.perform(ctx, c, g.effect(c, cl, b, now), b)
}

// Do runs f, the effect of call c, under the idempotency key contract: it
// decides c as Authorize does, claims it in the ledger under its key
// (Call.Key) atomically, runs f once, outside any lock, and records what f
// returned as the call's outcome. A call that names no operation id or
// idempotency key is named by its key: the same tool with the same
// arguments on the same hop is one effect (use Authorize, or an operation
// id of its own, for a call that must run again with the same arguments,
// such as a read that must see fresh state).
//
// The same call presented again, in this process or another sharing the
// ledger, after a retransmission, a retry or a resumption, never runs f:
// it is refused with ErrInFlight while the first is running (or if its
// process died before recording the outcome), and with ErrReplayed, whose
// Refusal carries the recorded outcome, once it is recorded. The same
// operation under another call is ErrIdempotencyConflict. f's result and
// error are returned as they are; the outcome is recorded with a context
// that outlives ctx's cancellation, and if it cannot be recorded Do
// returns f's result with an error wrapping ErrUnsettled. If f panics, the
// claim stays in flight.
func (g *Guard) Do(ctx context.Context, c Call, f func(context.Context) ([]byte, error)) ([]byte, error) {
	cl, err := g.Claim(ctx, c)
	if err != nil {
		return nil, err
	}
	return cl.run(ctx, f)
}

// Claim is Do in two steps, for a host whose framework runs the effect
// between two callbacks of its own (ADK's before- and after-tool
// callbacks): it decides c as Do does and claims it in the ledger under
// its key, with the same refusals; the effect then runs, and
// Claim.Settle records its outcome. A claim never settled stays in
// flight: the call never runs again (ErrInFlight) until an operator
// settles it from the system of record (authority.Ledger.Settle).
func (g *Guard) Claim(ctx context.Context, c Call) (*Claim, error) {
	cl, now, err := g.decide(c)
	if err != nil {
		return nil, g.finished(ctx, c, err)
	}
	return g.claim(ctx, c, cl, now, false)
}

// Once runs f, one execution of a host's unit of work, once per call c,
// under the idempotency key contract as Do runs an effect: the same call
// again, in this process or another sharing the ledger, gets ErrInFlight
// or ErrReplayed with the recorded outcome, and the same name under
// another call ErrIdempotencyConflict; f never runs twice. Unlike Do it
// decides nothing of c's action, which need not be in the package's
// authority: a unit of work is not an effect the package authorizes (the
// execution of an A2A task for one message, the resumption of paused work
// by one answer), and each effect it makes asks the guard as it comes
// (Authorize, Do, Claim). Nothing runs for another hop, once the guard is
// stopped or its hop finished, or after the offer's exp. A call that
// names no operation id or idempotency key is named by its key.
func (g *Guard) Once(ctx context.Context, c Call, f func(context.Context) ([]byte, error)) ([]byte, error) {
	now, err := g.live(c)
	if err != nil {
		return nil, g.finished(ctx, c, err)
	}
	cl, err := g.claim(ctx, c, allowed, now, true)
	if err != nil {
		return nil, err
	}
	return cl.run(ctx, f)
}

// claim claims c, of class cl, decided at now: an effect, or a host's
// unit of work (unit), which the ledger records as a marker.
func (g *Guard) claim(ctx context.Context, c Call, cl class, now time.Time, unit bool) (*Claim, error) {
	b, err := c.bind(g.hopKey)
	if err != nil {
		return nil, &Refusal{Action: c.Action, Err: err}
	}
	e := g.effect(c, cl, b, now)
	e.Claim, e.Marker = true, unit
	if e.OperationID == "" && e.IdempotencyKey == "" {
		e.IdempotencyKey = b.keyS
	}
	if err := g.perform(ctx, c, e, b); err != nil {
		return nil, g.finished(ctx, c, err)
	}
	return &Claim{g: g, e: e, key: b.key}, nil
}

// finished answers a claim of c refused with err because its hop finished
// (ErrFinished) as the contract does before: the same call, claimed on
// this hop before it finished, is ErrReplayed with its outcome (or
// ErrInFlight), and a name this hop used for another call
// ErrIdempotencyConflict, so that a retry after the hop's end still gets
// the recorded outcome. It reads the ledger's records of the call's names
// made for a call on this hop only (authority.Ledger.Lookup); otherwise,
// and for any other err, err is returned as it is.
func (g *Guard) finished(ctx context.Context, c Call, err error) error {
	if !errors.Is(err, ErrFinished) {
		return err
	}
	b, berr := c.bind(g.hopKey)
	if berr != nil {
		return err
	}
	e := g.effect(c, allowed, b, time.Time{})
	if e.OperationID == "" && e.IdempotencyKey == "" {
		e.IdempotencyKey = b.keyS
	}
	for _, n := range e.Names() {
		recs, lerr := g.ledger.Lookup(ctx, n)
		if lerr != nil {
			return err
		}
		for _, r := range recs {
			if r.Hop != g.hopKey || r.Key == "" {
				continue // another hop's, or recorded without a call
			}
			return g.repeated(c, e.Refuse(r))
		}
	}
	return err
}

// Claim is a call claimed in the ledger under its key whose outcome is
// not recorded yet (Guard.Claim).
type Claim struct {
	g   *Guard
	e   authority.Effect
	key digest.Digest
}

// Key returns the claimed call's key (Call.Key).
func (c *Claim) Key() digest.Digest { return cloneDigest(c.key) }

// Settle records the claimed call's outcome: result, the effect's result
// in the host's encoding, and the text of err when the effect failed. The
// same outcome again is a no-op. When the ledger cannot record it, Settle
// returns an error wrapping ErrUnsettled and the claim stays in flight.
// It records with a context that outlives ctx's cancellation.
func (c *Claim) Settle(ctx context.Context, result []byte, err error) error {
	o := authority.Outcome{Result: result, At: c.g.now()}
	if err != nil {
		o.Error = err.Error()
	}
	if serr := c.g.ledger.Settle(context.WithoutCancel(ctx), c.e, o); serr != nil {
		return fmt.Errorf("%w: %w", ErrUnsettled, serr)
	}
	return nil
}

// run runs f, the claimed call's effect, and settles the claim with what
// it returned.
func (c *Claim) run(ctx context.Context, f func(context.Context) ([]byte, error)) ([]byte, error) {
	res, ferr := f(ctx)
	if err := c.Settle(ctx, res, ferr); err != nil {
		return res, errors.Join(ferr, err)
	}
	return res, ferr
}

// decide applies the guard's policy to c: its hop, the guard's state, the
// offer's expiry and the action's class. It returns the class and the
// time of the decision.
func (g *Guard) decide(c Call) (class, time.Time, error) {
	now, err := g.live(c)
	if err != nil {
		return unlisted, now, err
	}
	cl := g.actions[c.Action]
	switch cl {
	case denied:
		return cl, now, &Refusal{Action: c.Action, Err: ErrDenied}
	case unlisted:
		return cl, now, &Refusal{Action: c.Action, Err: ErrUnlisted}
	}
	return cl, now, nil
}

// live refuses c when it is for another hop, the guard is stopped or the
// offer has expired; it returns the time of the decision.
func (g *Guard) live(c Call) (time.Time, error) {
	if !c.Hop.Equal(g.hop) {
		return time.Time{}, &Refusal{Action: c.Action, Err: ErrOtherHop}
	}
	select {
	case <-g.stopped:
		return time.Time{}, &Refusal{Action: c.Action, Err: g.reason}
	default:
	}
	now := g.now()
	if !now.Before(g.exp) {
		return now, &Refusal{Action: c.Action, Err: fmt.Errorf("%w: the offer expired at %s", ErrStopped, g.exp.Format(time.RFC3339))}
	}
	return now, nil
}

// effect is the ledger's effect of c, bound by b.
func (g *Guard) effect(c Call, cl class, b binding, now time.Time) authority.Effect {
	return authority.Effect{Hop: g.hopKey, Chain: g.chain, Action: c.Action, Tool: c.Tool, OperationID: c.OperationID,
		IdempotencyKey: c.IdempotencyKey, Key: b.keyS, Args: b.argsS, NeedsApproval: cl == mustAsk, At: now}
}

// perform records e in the ledger and answers c with the ledger's
// refusal, if any, as a Refusal.
func (g *Guard) perform(ctx context.Context, c Call, e authority.Effect, b binding) error {
	err := g.ledger.Perform(ctx, e)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, authority.ErrRepeated):
		return g.repeated(c, err)
	case errors.Is(err, authority.ErrApprovalMismatch):
		p := g.pendingFor(c, b)
		return &Refusal{Action: c.Action, Pending: &p, Err: ErrApprovalMismatch}
	case errors.Is(err, authority.ErrNoApproval):
		p := g.pendingFor(c, b)
		return &Refusal{Action: c.Action, Pending: &p, Err: ErrApprovalRequired}
	case errors.Is(err, authority.ErrFinished):
		g.stop(fmt.Errorf("%w: %v", ErrFinished, err))
		return &Refusal{Action: c.Action, Err: g.reason}
	default:
		return &Refusal{Action: c.Action, Err: fmt.Errorf("%w: %w", ErrLedger, err)}
	}
}

// repeated is the refusal of c for err, the ledger's refusal of one of
// its names (authority.ErrRepeated and the errors that wrap it).
func (g *Guard) repeated(c Call, err error) *Refusal {
	r := &Refusal{Action: c.Action, Key: c.OperationID, Err: ErrRepeated}
	var held *authority.Refusal
	if errors.As(err, &held) {
		r.Key = held.Held.Name
	}
	switch {
	case errors.Is(err, authority.ErrInFlight):
		r.Err = ErrInFlight
	case errors.Is(err, authority.ErrReplayed) && held != nil:
		r.Err, r.Outcome = ErrReplayed, held.Held.Outcome
	case errors.Is(err, authority.ErrKeyConflict):
		r.Err = ErrIdempotencyConflict
	}
	return r
}

// pendingFor is the approval c, bound by b, waits for.
func (g *Guard) pendingFor(c Call, b binding) ApprovalRequest {
	q := g.pending[c.Action]
	return ApprovalRequest{Action: c.Action, Owner: q.Owner, Hop: g.Hop(), OperationID: c.OperationID,
		IdempotencyKey: c.IdempotencyKey, Tool: c.Tool, Args: b.args, Arguments: slices.Clone(c.Args), Key: b.key, Item: q.Item}
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
			q := g.pending[a]
			out = append(out, ApprovalRequest{Action: a, Owner: q.Owner, Hop: g.Hop(), Item: q.Item})
		}
	}
	return out, nil
}

// Grant is an approval of a "must ask" action on the guard's hop.
// ApprovalRequest.Grant returns the one that approves exactly the call
// that waits.
type Grant struct {
	Action string
	// OperationID, when set, approves that one effect only; else Uses
	// effects (1 when zero).
	OperationID string
	Uses        int
	// Tool and Args, when set, approve only a call of that tool whose
	// arguments have that digest (ArgsDigest).
	Tool string
	Args digest.Digest
	// Approver is who approves: it must be the owner the package's
	// pending approval for Action names.
	Approver string
	// Expires ends the approval; zero means the offer's exp. It never
	// outlives the offer.
	Expires time.Time
}

// ApproveLocal records an approval given by a local operator whom the host
// has authenticated (operator names that session, for the record): the
// ledger's record is its only evidence (authority.SourceOperator). A guard
// stopped, or whose offer expired, refuses it (a *Refusal wrapping
// ErrStopped): no approval can be used any more.
func (g *Guard) ApproveLocal(ctx context.Context, gr Grant, operator string) (authority.Approval, error) {
	if operator == "" {
		return authority.Approval{}, fmt.Errorf("%w: a local approval names the authenticated operator", ErrNotApprover)
	}
	return g.grant(ctx, gr, authority.SourceOperator, []byte(operator), "", g.now())
}

func (g *Guard) grant(ctx context.Context, gr Grant, src authority.Source, evidence []byte, stmtID string, issued time.Time) (authority.Approval, error) {
	if _, err := g.live(Call{Hop: g.hop, Action: gr.Action}); err != nil {
		// Stopped, or the offer expired: no approval can be used any more.
		return authority.Approval{}, err
	}
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
	a := authority.Approval{ID: base64.RawURLEncoding.EncodeToString(id[:]), Hop: g.hopKey, Chain: g.chain, Action: gr.Action,
		OperationID: gr.OperationID, Tool: gr.Tool, Uses: gr.Uses, Approver: gr.Approver, Issued: issued, Expires: exp,
		Source: src, Evidence: evidence}
	if !gr.Args.IsZero() {
		a.Args = gr.Args.String()
	}
	if stmtID != "" {
		// One statement is one grant, however often, and however
		// encoded or signed, it is presented.
		a.ID = stmtID
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
	g.stop(fmt.Errorf("%w: hop finished %s", ErrFinished, state))
	return nil
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
