// Package hopcheck is what every host's delegate shares about the handoff
// package that travels beside an offer (evidence.HostConfig): it is read
// from the host's metadata after the offer passed the receive checks,
// checked against the verified offer before any work (evidence.
// CheckReceived), and gives the hop's guard (evidence.NewGuard); the
// system of record's copy of the hop's acknowledgement and final
// disposition (Acknowledge, Finish); and, with or without a package,
// which source gives a hop its guard, which refusals of the guard end
// the hop with "failed" (Closes), and how a refusal of the idempotency
// key contract travels (Idempotent).
package hopcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/internal/pause"
)

// Config is where a delegate finds the guard of a hop: the package carried
// beside the offer (Evidence), or the application's callback
// (Approvals.Guard). One of them at most.
type Config struct {
	Evidence *evidence.HostConfig
	Guard    func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error)
}

// Validate refuses a HostConfig without a ledger, two sources of the
// guard, and Approvals (approvals true) with none.
func (c Config) Validate(approvals bool) error {
	switch {
	case c.Evidence != nil && c.Evidence.Guard.Ledger == nil:
		return fmt.Errorf("%w: ServerConfig.Evidence needs Guard.Ledger, the authority ledger of the hops' guards", handoff.ErrConfig)
	case c.Evidence != nil && c.Guard != nil:
		return fmt.Errorf("%w: the hop's guard comes from ServerConfig.Evidence or from Approvals.Guard, not both", handoff.ErrConfig)
	case approvals && c.Evidence == nil && c.Guard == nil:
		return fmt.Errorf("%w: Approvals needs a Guard, or ServerConfig.Evidence to build each hop's guard from its package", handoff.ErrConfig)
	}
	return nil
}

// Checked is the outcome of the check of the package that came with an
// offer.
type Checked struct {
	// Guard is the hop's guard; nil when the host checks no packages, or
	// lets an offer without one through (AllowNoPackage).
	Guard *evidence.Guard
	// Refs name the package checked, for the status that answers the offer
	// (evidence.Report.PackageRef).
	Refs []ref.Ref
	// Refused: the offer is answered "rejected", reason "policy", with
	// Detail (the failing findings), and no work runs.
	Refused bool
	Detail  string

	rep *evidence.Report // the report, when the package was checked
}

// Check checks obj, the package that came beside in's offer (read is how
// reading it from the host's metadata failed: carriage.ErrAbsent when
// none came), against that offer, which passed the receive checks or is
// the hop's work resumed (Agent.Resume). The error is one the delegate
// cannot answer for: the ledger or the store did not answer, or ctx
// ended; the offer is then not decided (fail closed).
func (c Config) Check(ctx context.Context, in *handoff.Received, obj ref.Object, read error) (Checked, error) {
	h := c.Evidence
	if h == nil {
		return Checked{}, nil
	}
	o := in.Offer()
	if o == nil {
		return Checked{}, fmt.Errorf("%w: no accepted offer to check a package against", handoff.ErrArgument)
	}
	named := evidence.Refs(o.Refs)
	switch {
	case errors.Is(read, carriage.ErrAbsent) && len(named) == 0 && h.AllowNoPackage:
		return Checked{}, nil
	case errors.Is(read, carriage.ErrAbsent) && len(named) == 0:
		return refused("evidence: no handoff package came with the offer, which names none"), nil
	case errors.Is(read, carriage.ErrAbsent):
		return refused("evidence: the handoff package the offer names did not come with it"), nil
	case read != nil:
		return refused("evidence: the handoff package beside the offer is not one: " + read.Error()), nil
	}
	rep, err := evidence.CheckReceived(ctx, in, evidence.Delivered{Package: obj.Octets, Salt: obj.Salt}, h.Check)
	switch {
	case errors.Is(err, evidence.ErrOfferNotVerified):
		return Checked{}, err
	case err != nil:
		return refused("evidence: " + err.Error()), nil // it does not decode, or is too large
	case !rep.Acceptable():
		ch := refused(rep.Detail())
		ch.Refs, ch.rep = []ref.Ref{rep.PackageRef()}, rep
		return ch, nil
	}
	g, err := evidence.NewGuard(ctx, rep, h.Guard)
	if err != nil {
		return Checked{}, fmt.Errorf("handoff: no evidence guard for the hop: %w", err)
	}
	return Checked{Guard: g, Refs: []ref.Ref{rep.PackageRef()}, rep: rep}, nil
}

// Acknowledge records in the authority ledger, the system of record, the
// acknowledgement of the hop whose package ch checked, as the delegate
// answers the offer: "accepted", or "rejected" with the finding codes
// (evidence.RecordAcknowledgement); for a rejected one, also its final
// disposition, "rejected". A hop acknowledged already the same way, by
// this process or a replica, is left as it is. It records nothing for an
// offer whose package was not checked (none came, or it did not decode).
// The error is the ledger's: the offer is then not decided.
func (c Config) Acknowledge(ctx context.Context, ch Checked) error {
	if c.Evidence == nil || ch.rep == nil {
		return nil
	}
	l, now := c.Evidence.Guard.Ledger, c.now()
	err := evidence.RecordAcknowledgement(ctx, l, ch.rep, now)
	if err == nil && ch.Refused {
		err = l.Finish(ctx, ch.rep.OfferDigest().String(), authority.Final{State: string(state.Rejected), Detail: ch.Detail, At: now})
	}
	if errors.Is(err, authority.ErrConflict) {
		return nil // acknowledged first by a replica: its record stands
	}
	return err
}

// Finish records the final disposition of a hop in the authority ledger:
// the hop's first terminal state, which stops every guard of the hop and
// refuses every later effect (Perform: authority.ErrFinished). It is the
// terminal status the delegate signed ("completed", "failed",
// "rejected"), through g (evidence.Guard.Finish), or the delegator's
// verified "canceled", the revocation of the hop, recorded as it is
// applied, with no guard at hand, in the ledger of ServerConfig.Evidence
// under the hop's offer digest. A hop finished already is left as it is:
// its first disposition stands, as each party of a hop keeps the first
// terminal state it verified (draft section 5.5). The delegate's outcome
// signed after a "canceled" ("failed" with no refs when the hop took no
// effect) is the hop's last status in the delegate's store, and the
// ledger's effects (authority.HopRecord.Effects, the records of the
// hop's scope) say what took effect.
func (c Config) Finish(ctx context.Context, g *evidence.Guard, offer digest.Digest, s state.State, detail string) error {
	var err error
	switch {
	case g != nil:
		err = g.Finish(ctx, s, detail)
	case c.Evidence != nil && !offer.IsZero():
		err = c.Evidence.Guard.Ledger.Finish(ctx, offer.String(), authority.Final{State: string(s), Detail: detail, At: c.now()})
	}
	if errors.Is(err, authority.ErrConflict) {
		return nil
	}
	return err
}

// NoEffect reports whether the authority ledger knows that the hop whose
// offer has the handoff digest offer took no effect
// (authority.HopRecord.Effects false): asked through g, the hop's guard,
// when it is at hand, else the ledger of ServerConfig.Evidence. It is
// false, the outcome unknown, when neither is, and when the ledger
// cannot answer. The caller makes sure that no effect of the hop can be
// taken any more: its final disposition ("canceled") is recorded, or
// its work ended with the host's terminal state. The knowledge is that of
// the effects asked of the hop's guards: a host's delegate runs every
// effect under them (mcphop: each tool call; adkhop: each tool call; an
// A2A executor: each effect it asks the guard for, under a name).
func (c Config) NoEffect(ctx context.Context, g *evidence.Guard, offer digest.Digest) bool {
	switch {
	case g != nil:
		took, err := g.Effects(ctx)
		return err == nil && !took
	case c.Evidence != nil && !offer.IsZero():
		h, err := c.Evidence.Guard.Ledger.Hop(ctx, offer.String())
		return err == nil && !h.Effects
	}
	return false
}

// None is the outcome of a hop's work known to have taken no effect, with
// no refusal to name: "failed", no refs, no reason (section 4: '"failed"
// with no refs tells the delegator that the work took no effect').
var None = hopwork.Outcome{Effect: state.EffectNone}

func (c Config) now() time.Time {
	if c.Evidence != nil && c.Evidence.Guard.Now != nil {
		return c.Evidence.Guard.Now()
	}
	return time.Now()
}

func refused(detail string) Checked { return Checked{Refused: true, Detail: detail} }

// Rejected is the "rejected" a refused package gets: reason "policy"
// (evidence.ReasonEvidence), the findings in the detail, the package's
// reference in the refs when it was checked.
func (ch Checked) Rejected() handoff.ReplyOptions {
	return handoff.ReplyOptions{Reason: evidence.ReasonEvidence, Detail: ch.Detail, Refs: ch.Refs}
}

// GuardOf returns the guard of the hop of in: the one the package gave
// (checked), else the application's (Config.Guard), else none.
func (c Config) GuardOf(ctx context.Context, in *handoff.Received, checked *evidence.Guard) (*evidence.Guard, error) {
	switch {
	case checked != nil:
		return checked, nil
	case c.Guard != nil:
		g, err := c.Guard(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("handoff: no evidence guard for the hop: %w", err)
		}
		return g, nil
	}
	return nil, nil
}

// Closes reports whether err, a refusal that came before any effect of
// the hop's work, ends the hop: a refusal of the hop's guard (denied,
// unlisted, already performed, approval required and not asked for, the
// offer expired, the hop finished), an approval declined, or an approval
// asked for and no longer answerable because the offer expired. Such a hop
// took no effect, and the draft's "failed" with no refs says exactly that
// (section 4: '"failed" with no refs tells the delegator that the work
// took no effect', HC-44); "rejected" is not for a hop taken (HC-24).
//
// A refusal of the idempotency key contract (Idempotent: the same call
// replayed, in flight, or its operation used by another call) does not:
// the hop's work ran, or runs, under that key, and its outcome is the
// hop's. Neither does an answer for another call than the one that paused
// (evidence.ErrApprovalMismatch): the pause still waits for its own; nor
// a refusal because the hop's final disposition is recorded
// (evidence.ErrFinished, Ended): it ended, here or on a replica.
func Closes(err error) bool {
	var r *evidence.Refusal
	switch {
	case errors.Is(err, evidence.ErrInFlight), errors.Is(err, evidence.ErrReplayed),
		errors.Is(err, evidence.ErrIdempotencyConflict), errors.Is(err, evidence.ErrApprovalMismatch),
		Ended(err):
		return false
	}
	return errors.As(err, &r) || errors.Is(err, pause.ErrDeclined) || errors.Is(err, pause.ErrExpired)
}

// The outcomes of the idempotency key contract, as every host names them
// in the answer it gives instead of running the work again (the
// agentic-commerce protocol's Idempotent-Replayed, idempotency_in_flight
// and idempotency_conflict).
const (
	Replayed = "replayed"
	InFlight = "in_flight"
	Conflict = "conflict"
)

// Idempotent returns the answer to a call the idempotency key contract
// refused (err wraps evidence.ErrReplayed, ErrInFlight or
// ErrIdempotencyConflict), as every host carries it: a JSON object with
// "outcome" (Replayed, InFlight or Conflict), "key" (the call's key,
// evidence.Call.Key) and, for a replay, "result", the outcome recorded
// the first time (a JSON value as the host recorded it), and "error", the
// error it ended with, if any; "error" says why for the other two. It
// reports false for any other error.
func Idempotent(err error, key digest.Digest) (map[string]any, bool) {
	var r *evidence.Refusal
	m := map[string]any{}
	if !key.IsZero() {
		m["key"] = key.String()
	}
	switch {
	case errors.Is(err, evidence.ErrReplayed):
		m["outcome"] = Replayed
		if errors.As(err, &r) && r.Outcome != nil {
			var v any
			if len(r.Outcome.Result) > 0 && json.Unmarshal(r.Outcome.Result, &v) == nil {
				m["result"] = v
			} else if len(r.Outcome.Result) > 0 {
				m["result"] = string(r.Outcome.Result)
			}
			if r.Outcome.Error != "" {
				m["error"] = r.Outcome.Error
			}
		}
	case errors.Is(err, evidence.ErrInFlight):
		m["outcome"], m["error"] = InFlight, "the same call is in flight: retry later"
	case errors.Is(err, evidence.ErrIdempotencyConflict):
		m["outcome"], m["error"] = Conflict, "the operation was used by another call (other arguments, action or tool)"
	default:
		return nil, false
	}
	return m, true
}

// Ended reports whether err is a refusal because the hop's final
// disposition is recorded in the authority ledger (evidence.ErrFinished):
// the hop ended, here or on a replica sharing the ledger, and the answer
// changes nothing of it.
func Ended(err error) bool { return errors.Is(err, evidence.ErrFinished) }

// Closed is the outcome of a hop's work ended by a refusal before any
// effect: "failed", no refs, reason "policy".
var Closed = hopwork.Outcome{Effect: state.EffectNone, Reason: reason.Policy}
