// Package hopcheck is what every host's delegate shares about the handoff
// package that travels beside an offer (evidence.HostConfig): it is read
// from the host's metadata after the offer passed the receive checks,
// checked against the verified offer before any work (evidence.
// CheckReceived), and gives the hop's guard (evidence.NewGuard); and,
// with or without a package, which source gives a hop its guard, and
// which refusals of the guard end the hop with "failed" (Closes).
package hopcheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
	"github.com/agentproto/handoff/evidence"
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
		ch.Refs = []ref.Ref{rep.PackageRef()}
		return ch, nil
	}
	g, err := evidence.NewGuard(ctx, rep, h.Guard)
	if err != nil {
		return Checked{}, fmt.Errorf("handoff: no evidence guard for the hop: %w", err)
	}
	return Checked{Guard: g, Refs: []ref.Ref{rep.PackageRef()}}, nil
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
func Closes(err error) bool {
	var r *evidence.Refusal
	return errors.As(err, &r) || errors.Is(err, pause.ErrDeclined) || errors.Is(err, pause.ErrExpired)
}

// Closed is the outcome of a hop's work ended by a refusal before any
// effect: "failed", no refs, reason "policy".
var Closed = hopwork.Outcome{Effect: state.EffectNone, Reason: reason.Policy}
