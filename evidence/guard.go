package evidence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Guard refusals. Every error Authorize returns is a *Refusal wrapping one
// of these.
var (
	// ErrDenied: the action is in "denied".
	ErrDenied = errors.New("evidence: action denied")
	// ErrApprovalRequired: the action is "must ask" and no approval is
	// recorded for it.
	ErrApprovalRequired = errors.New("evidence: approval required")
	// ErrUnlisted: the action is in no list; anything unlisted is refused.
	ErrUnlisted = errors.New("evidence: action not in the package's authority")
	// ErrRepeated: the operation id or idempotency key was already used,
	// by a completed action of the package or a call this guard authorized.
	ErrRepeated = errors.New("evidence: operation already performed")
	// ErrStopped: the guard was stopped (hop canceled, rejected or done).
	ErrStopped = errors.New("evidence: guard stopped")
	// ErrNotPassed: a guard is built, and a package accepted, only on a
	// report that passed against the offer (Report.Acceptable).
	ErrNotPassed = errors.New("evidence: package did not pass the check")
)

// Refusal is a refused call.
type Refusal struct {
	Action string
	// Key is the operation id or idempotency key refused as repeated.
	Key string
	Err error
}

func (r *Refusal) Error() string {
	if r.Key != "" {
		return fmt.Sprintf("%v: %q (key %q)", r.Err, r.Action, r.Key)
	}
	return fmt.Sprintf("%v: %q", r.Err, r.Action)
}

func (r *Refusal) Unwrap() error { return r.Err }

// Call is one tool call or mutation the receiving agent is about to make.
type Call struct {
	Action string
	// OperationID and IdempotencyKey, when set, identify the effect: a
	// value already used is refused.
	OperationID    string
	IdempotencyKey string
}

// Guard enforces a verified package's authority at run time: the receiving
// agent consults it before each tool call or mutation. It is safe for
// concurrent use and runs no caller code under its lock.
type Guard struct {
	allowed, mustAsk, denied []string
	owners                   map[string]string // must-ask action -> approval owner

	mu       sync.Mutex
	approved map[string]bool
	used     map[string]string // "op:" or "key:" + value -> action
	stopped  error
}

// NewGuard builds the guard of a package that passed the check against its
// offer (rep from Check, Acceptable). The completed actions' operation ids
// and idempotency keys are taken as used. The set of used ids and keys
// grows with the calls authorized, for the guard's life (one hop).
func NewGuard(rep *Report) (*Guard, error) {
	if rep == nil || !rep.Acceptable() {
		return nil, ErrNotPassed
	}
	p := rep.Package()
	g := &Guard{
		allowed: slices.Clone(p.Authority.Allowed),
		mustAsk: slices.Clone(p.Authority.MustAsk),
		denied:  slices.Clone(p.Authority.Denied),
		owners:  map[string]string{}, approved: map[string]bool{}, used: map[string]string{},
	}
	for _, q := range p.Pending {
		if q.Kind == PendingApproval && q.Action != "" {
			g.owners[q.Action] = q.Owner
		}
	}
	for _, a := range p.Completed {
		if a.OperationID != "" {
			g.used["op:"+a.OperationID] = a.Action
		}
		if a.IdempotencyKey != "" {
			g.used["key:"+a.IdempotencyKey] = a.Action
		}
	}
	return g, nil
}

// Authorize decides a call: an action in "denied" is refused, one in "must
// ask" is refused until Approve recorded its approval, one in "allowed"
// passes, and anything unlisted is refused. A call whose operation id or
// idempotency key was used before is refused; a call that passes reserves
// its id and key, so that a second call with them is refused even while the
// first runs.
func (g *Guard) Authorize(c Call) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped != nil {
		return &Refusal{Action: c.Action, Err: g.stopped}
	}
	switch {
	case slices.Contains(g.denied, c.Action):
		return &Refusal{Action: c.Action, Err: ErrDenied}
	case slices.Contains(g.mustAsk, c.Action):
		if !g.approved[c.Action] {
			return &Refusal{Action: c.Action, Err: ErrApprovalRequired}
		}
	case slices.Contains(g.allowed, c.Action):
	default:
		return &Refusal{Action: c.Action, Err: ErrUnlisted}
	}
	keys := callKeys(c)
	for _, k := range keys {
		if _, dup := g.used[k.slot]; dup {
			return &Refusal{Action: c.Action, Key: k.value, Err: ErrRepeated}
		}
	}
	for _, k := range keys {
		g.used[k.slot] = c.Action
	}
	return nil
}

type callKey struct{ slot, value string }

// callKeys returns the slots c's operation id and idempotency key take in
// the used set; ids and keys are separate namespaces.
func callKeys(c Call) []callKey {
	var out []callKey
	if c.OperationID != "" {
		out = append(out, callKey{"op:" + c.OperationID, c.OperationID})
	}
	if c.IdempotencyKey != "" {
		out = append(out, callKey{"key:" + c.IdempotencyKey, c.IdempotencyKey})
	}
	return out
}

// Approve records the approval of a "must ask" action by its owner, the
// owner the package's pending approval names. It is an error for an action
// that is not "must ask", or an approver who is not the owner.
func (g *Guard) Approve(action, approver string) error {
	owner, ok := g.owners[action]
	if !slices.Contains(g.mustAsk, action) || !ok {
		return fmt.Errorf("%w: %q has no pending approval", ErrUnlisted, action)
	}
	if approver != owner {
		return fmt.Errorf("%w: %q is approved by %q, not %q", ErrApprovalRequired, action, owner, approver)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.approved[action] = true
	return nil
}

// Stop refuses every later call, with reason wrapped in ErrStopped: call it
// when the hop is canceled or ends.
func (g *Guard) Stop(reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped == nil {
		g.stopped = fmt.Errorf("%w: %s", ErrStopped, reason)
	}
}

// Do authorizes c and, if it passes, runs f outside the guard's lock:
// wrap tool dispatch with it.
func (g *Guard) Do(ctx context.Context, c Call, f func(context.Context) error) error {
	if err := g.Authorize(c); err != nil {
		return err
	}
	return f(ctx)
}
