package evidence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"
)

// This file is where the package meets the root's Agent: acknowledgement
// as the hop's status, the disposition kept in the delegate's store, and
// the return-to-sender path.

// ReasonEvidence is the reason of a rejection for a package that failed the
// check. It is the draft's "policy" (HC-04: prefer the defined reasons);
// the status detail names the failing finding codes and paths.
const ReasonEvidence = reason.Policy

// Acknowledge maps a report to the receiver's acknowledgement: "accepted"
// when the package passed against its offer (Report.Acceptable), else
// "rejected" with reason "policy" and the failing finding codes (a report
// made without an offer is never accepted).
func Acknowledge(rep *Report) Acknowledgement {
	if rep == nil {
		return Acknowledgement{Decision: DecisionRejected, Reason: string(ReasonEvidence), Findings: []string{string(CodeUnbound)}}
	}
	if rep.Acceptable() {
		return Acknowledgement{Decision: DecisionAccepted}
	}
	var codes []string
	for _, c := range rep.Codes() {
		codes = append(codes, string(c))
	}
	if rep.unbound {
		codes = append(codes, string(CodeUnbound))
	}
	return Acknowledgement{Decision: DecisionRejected, Reason: string(ReasonEvidence), Findings: codes}
}

// PackageRef returns the reference that binds the acknowledged package: the
// offer's reference when it verified, else a plain reference to the
// package digest.
func (r *Report) PackageRef() ref.Ref {
	if r.binding != nil && r.binding.Outcome == ref.Verified {
		return r.Binding().Ref
	}
	return ref.Ref{Kind: Kind, Dig: r.Digest()}
}

// maxDetailFindings bounds how many findings a status detail names, so
// that a status stays far below the receivers' element size limit.
const maxDetailFindings = 16

// Detail names the failing findings by code and path, never by value, for
// the status detail of a rejection (HC-05: for people). At most 16 are
// named; the rest are counted.
func (r *Report) Detail() string {
	var parts []string
	more := 0
	for _, f := range r.findings {
		if f.Advisory {
			continue
		}
		if len(parts) == maxDetailFindings {
			more++
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s", f.Code, truncate(f.Path, 128)))
	}
	d := "evidence: " + strings.Join(parts, "; ")
	if more > 0 {
		d += fmt.Sprintf("; and %d more", more)
	}
	return d
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// Reply signs the receiver's acknowledgement as the hop's status through
// the agent's lifecycle rules: "accepted" when the package passed against
// in's offer,
// "rejected" with reason "policy" and a detail naming the findings
// otherwise. Either way the status refs carry the package reference, so
// the acknowledged package digest is kept with the hop's last status in the
// agent's store (a durable store keeps it across a restart).
func Reply(ctx context.Context, a *handoff.Agent, in *handoff.Received, rep *Report) (handoff.Signed, error) {
	if o := receivedOffer(in); o == nil || rep == nil || !rep.checked || rep.unbound || rep.offerIss != o.Iss || rep.offerHop != o.Hop {
		return handoff.Signed{}, fmt.Errorf("%w: the report was not made against this offer", ErrNotPassed)
	}
	r := rep.PackageRef()
	if rep.Acceptable() {
		return a.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{Refs: []ref.Ref{r}})
	}
	return a.Reply(ctx, in, state.Rejected, handoff.ReplyOptions{
		Reason: ReasonEvidence, Detail: rep.Detail(), Refs: []ref.Ref{r}})
}

// ReturnResult is the specialist's return to the sender: a "completed"
// status whose refs name the result artifacts by digest, followed by the
// package reference so that the final record still names the package.
func ReturnResult(ctx context.Context, a *handoff.Agent, in *handoff.Received, rep *Report, results []ref.Ref) (handoff.Signed, error) {
	p := rep.Package()
	if p == nil {
		return handoff.Signed{}, ErrNotPassed
	}
	if p.Control != SpecialistReturnsResult {
		return handoff.Signed{}, fmt.Errorf("%w: control mode is %q", ErrNotReturn, p.Control)
	}
	if len(results) == 0 {
		return handoff.Signed{}, fmt.Errorf("%w: no result artifacts", ErrNotReturn)
	}
	refs := append(append([]ref.Ref(nil), results...), rep.PackageRef())
	return a.Reply(ctx, in, state.Completed, handoff.ReplyOptions{Effect: state.EffectFull, Refs: refs})
}

// ErrNotReturn: the package does not ask for a result back, or none was
// given.
var ErrNotReturn = errors.New("evidence: not a return-to-sender handoff")

// ErrResult: a returned result does not check out.
var ErrResult = errors.New("evidence: result not verified")

// CheckResult is the delegator's check of a "completed" status returned
// under "specialist returns result": the status must name the package the
// delegator sent (sent, the reference put in the offer), and at least one
// result artifact, every one of which must verify against the object src
// provides (HC-11). It returns each result's outcome.
func CheckResult(ctx context.Context, st *handoff.Status, sent ref.Ref, src ref.Source) ([]ref.Result, error) {
	if st.State != state.Completed {
		return nil, fmt.Errorf("%w: status is %q, not completed", ErrResult, st.State)
	}
	named := false
	var out []ref.Result
	for _, r := range st.Refs {
		if IsRef(r) {
			named = named || (r.Kind == sent.Kind && r.Dig.Equal(sent.Dig))
			continue
		}
		res := ref.Result{Ref: r, Outcome: ref.Unverifiable, Detail: "no source"}
		if src != nil {
			if obj, err := src(ctx, r); err != nil {
				res.Detail = err.Error()
			} else {
				res = ref.Check(r, obj)
			}
		}
		out = append(out, res)
	}
	if !named {
		return out, fmt.Errorf("%w: the status does not name the package sent", ErrResult)
	}
	if len(out) == 0 {
		return out, fmt.Errorf("%w: no result artifacts", ErrResult)
	}
	for i, r := range out {
		if r.Outcome != ref.Verified {
			return out, fmt.Errorf("%w: result %d is %s", ErrResult, i, r.Outcome)
		}
	}
	return out, nil
}

// Disposition is what the delegate's store keeps of a hop: its state and
// the last status it sent, with the package that status names.
type Disposition struct {
	State  state.State
	Status *handoff.Status // nil when no status was sent
	// Package is the package reference in the last status, if any: the
	// acknowledgement ("accepted", "rejected") names the package it
	// acknowledged, and a terminal status names it only when its refs do
	// (a specialist's "completed" that returns its result with the
	// package, ReturnResult); "failed" never does, its refs naming what
	// took effect (HC-44). Once the hop ended, the acknowledged package
	// is in the authority ledger, beside the final disposition
	// (authority.Ledger.Hop: Ack.Package and Final), which an audit
	// after the fact reads.
	Package *ref.Ref
}

// Final reports whether the disposition is terminal.
func (d Disposition) Final() bool {
	return d.Status != nil && d.Status.Terminal() || d.State == state.Canceled
}

// Recorded reads a hop's disposition from the delegate's store: the
// system of record. The last status is verified against trust, which must
// bind the delegate's own key. ok is false when the store does not
// remember the hop.
func Recorded(ctx context.Context, store replay.Store, iss handoff.AgentID, hop handoff.HopID, trust *handoff.Trust, lim handoff.Limits) (d Disposition, ok bool, err error) {
	rec, ok, err := store.Get(ctx, replay.Key{Iss: string(iss), Hop: string(hop)})
	if err != nil || !ok {
		return Disposition{}, ok, err
	}
	d.State = state.State(rec.State)
	if len(rec.Status) == 0 {
		return d, true, nil
	}
	s, err := handoff.ParseSigned(rec.Status, handoff.Limits{MaxElementSize: len(rec.Status)})
	if err != nil {
		return Disposition{}, true, err
	}
	st, err := handoff.OpenStatus(s, trust, lim)
	if err != nil {
		return Disposition{}, true, err
	}
	d.Status = st
	for _, ref := range st.Refs {
		if IsRef(ref) {
			r := ref
			d.Package = &r
			break
		}
	}
	return d, true, nil
}
