// Package hopwork is what the A2A and MCP delegates share about the work of
// an accepted hop: the outcome the work reports ("Knowing the Outcome" in
// the draft), the terminal status it asks for (HC-25, HC-45, HC-54), the
// executions running by hop, stopped when the delegator equivocates, and
// the delegator's view of a delivery once it ended.
package hopwork

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// ErrEquivocated is the cause of the context of a hop's work stopped
// because its delegator signed another offer under the same hop (HC-54).
var ErrEquivocated = errors.New("handoff: the delegator signed another offer under this hop")

// Outcome is what the work knows of its effect.
type Outcome struct {
	Effect state.Effect
	Reason reason.Code
	Refs   []ref.Ref
}

// Box holds the outcome one execution reported. It is safe for concurrent
// use.
type Box struct {
	mu          sync.Mutex
	o           *Outcome
	equivocated bool
	refused     bool
	guard       *evidence.Guard // the guard that refused, when known
}

// Refuse notes that g, the hop's guard (nil when not at hand), refused
// one of the execution's calls before any effect (a tool call adkhop's
// plugin refused).
func (b *Box) Refuse(g *evidence.Guard) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refused = true
	if g != nil {
		b.guard = g
	}
}

// Refused reports whether Refuse was called, with the guard it named.
func (b *Box) Refused() (bool, *evidence.Guard) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refused, b.guard
}

// Report records o as the execution's outcome.
func (b *Box) Report(o Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.o = &o
}

// Reported returns the outcome the execution reported, if it did.
func (b *Box) Reported() (Outcome, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.o == nil {
		return Outcome{}, false
	}
	return *b.o, true
}

// TookEffect reports whether the execution reported an effect, whole or
// partial: a hop's work that did is not paused (a pause answered "no"
// ends the hop with "failed" and no refs, which would say it took none).
func (b *Box) TookEffect() bool {
	o, ok := b.Reported()
	return ok && (o.Effect == state.EffectFull || o.Effect == state.EffectPartial)
}

// Final returns the terminal state the work's outcome asks for, and the
// outcome to sign it with: "completed" for EffectFull, "failed" for
// EffectNone and EffectPartial (with the reason "equivocation" when the
// work was stopped for it and reported none, HC-54), and no state for an
// unknown effect (HC-45). otherwise is the outcome when none was reported.
func (b *Box) Final(otherwise Outcome) (state.State, Outcome) {
	b.mu.Lock()
	o := otherwise
	if b.o != nil {
		o = *b.o
	}
	equivocated := b.equivocated
	b.mu.Unlock()
	switch o.Effect {
	case state.EffectFull:
		return state.Completed, o
	case state.EffectNone, state.EffectPartial:
		if equivocated && o.Reason == "" {
			o.Reason = reason.Equivocation
		}
		return state.Failed, o
	}
	return "", o
}

type key struct {
	iss handoff.AgentID
	hop handoff.HopID
}

type execution struct {
	cancel context.CancelCauseFunc
	box    *Box
}

// Running is the executions of accepted hops that run now. It is safe for
// concurrent use.
type Running struct {
	mu sync.Mutex
	m  map[key]*execution
}

// Start registers the execution of in's hop: it returns the context to
// run it in, whose values carry what ctx carries, its Box, and done, to
// call once the execution returned.
func (r *Running) Start(ctx context.Context, in *handoff.Received) (context.Context, *Box, func()) {
	box := &Box{}
	wctx, cancel := context.WithCancelCause(ctx)
	o := Verified(in)
	k := key{o.Iss, o.Hop}
	x := &execution{cancel: cancel, box: box}
	r.mu.Lock()
	if r.m == nil {
		r.m = map[key]*execution{}
	}
	r.m[k] = x
	r.mu.Unlock()
	return wctx, box, func() {
		r.mu.Lock()
		if r.m[k] == x {
			delete(r.m, k)
		}
		r.mu.Unlock()
		cancel(nil)
	}
}

// Runs reports whether an execution of the hop (iss, hop) runs now.
func (r *Running) Runs(iss handoff.AgentID, hop handoff.HopID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[key{iss, hop}]
	return ok
}

// Stop ends the execution of the hop (iss, hop), if one runs, with
// ErrEquivocated as its context's cause.
func (r *Running) Stop(iss handoff.AgentID, hop handoff.HopID) {
	r.mu.Lock()
	x := r.m[key{iss, hop}]
	r.mu.Unlock()
	if x == nil {
		return
	}
	x.box.mu.Lock()
	x.box.equivocated = true
	x.box.mu.Unlock()
	x.cancel(ErrEquivocated)
}

// Settled is the delegator's view of a hop once a delivery ended.
type Settled struct {
	// State is the hop's state in the delegator's table: handoff.Offered
	// while no verified status came back.
	State state.State
	// Refused reports a verified "rejected"; Reason is its reason code.
	Refused bool
	Reason  reason.Code
}

// Settle reads the delegator's table for hop.
func Settle(ctx context.Context, a *handoff.Agent, hop handoff.HopID) (Settled, error) {
	info, ok, err := a.Hop(ctx, hop)
	if err != nil || !ok {
		return Settled{}, err
	}
	s := Settled{State: info.State}
	if info.State == state.Rejected {
		s.Refused, s.Reason = true, info.Reason
	}
	return s, nil
}

// Verified is in's offer whose signature verified, accepted or not: the
// accepted offer (Received.Offer), or one not accepted (Received.Refused),
// such as a retransmission of an accepted one, whose hop a resumed or
// answered execution names. Nil when the signature did not verify.
func Verified(in *handoff.Received) *handoff.Offer {
	if o := in.Offer(); o != nil {
		return o
	}
	return in.Refused()
}

// LogReceived logs, with l, the outcome of a delivery's Receive: the
// Received as its LogValue gives it (whose members are the offer's only
// once its signature verified), or the error. A nil l is silent.
func LogReceived(ctx context.Context, l *slog.Logger, transport string, in *handoff.Received, err error) {
	switch {
	case l == nil:
	case err != nil:
		l.LogAttrs(ctx, slog.LevelError, "handoff: delivery not decided", slog.String("transport", transport), slog.String("error", err.Error()))
	default:
		level := slog.LevelInfo
		if !in.Accepted() && !in.Retransmission() {
			level = slog.LevelWarn
		}
		l.LogAttrs(ctx, level, "handoff: delivery", slog.String("transport", transport), slog.Any("received", in))
	}
}

// LogStatus logs, with l, the outcome of a status handled: the
// StatusResult as its LogValue gives it, or the error. A nil l is silent.
func LogStatus(ctx context.Context, l *slog.Logger, transport string, res *handoff.StatusResult, err error) {
	switch {
	case l == nil:
	case err != nil:
		l.LogAttrs(ctx, slog.LevelError, "handoff: status not decided", slog.String("transport", transport), slog.String("error", err.Error()))
	default:
		level := slog.LevelInfo
		if res.Err() != nil || res.Conflict {
			level = slog.LevelWarn
		}
		l.LogAttrs(ctx, level, "handoff: status", slog.String("transport", transport), slog.Any("status", res))
	}
}

// Packages is what a delegator's middleware keeps of the hops it sent:
// the object each offer named by digest and carries beside its Handoff
// (OfferParams.Deliver), for every retransmission of the hop, until the
// hop is resolved. It is safe for concurrent use.
type Packages struct {
	mu sync.Mutex
	m  map[handoff.HopID]ref.Object
}

// Keep keeps obj, when not nil, for hop.
func (p *Packages) Keep(hop handoff.HopID, obj *ref.Object) {
	if obj == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[handoff.HopID]ref.Object{}
	}
	p.m[hop] = *obj
}

// Of returns the object kept for hop, nil when none.
func (p *Packages) Of(hop handoff.HopID) *ref.Object {
	p.mu.Lock()
	defer p.mu.Unlock()
	obj, ok := p.m[hop]
	if !ok {
		return nil
	}
	return &obj
}

// Settle forgets the object of hop once a's table has it resolved
// (HC-41): no retransmission of it is needed any more.
func (p *Packages) Settle(ctx context.Context, a *handoff.Agent, hop handoff.HopID) {
	if p.Of(hop) == nil {
		return
	}
	if info, ok, err := a.Hop(ctx, hop); err == nil && (!ok || info.Resolved) {
		p.mu.Lock()
		delete(p.m, hop)
		p.mu.Unlock()
	}
}
