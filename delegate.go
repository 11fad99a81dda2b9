package handoff

import (
	"context"
	"fmt"
	"time"

	"github.com/agentproto/handoff/replay"
)

// Effect is what a delegate knows of its work's effect when it reports an
// outcome (draft -01, "Knowing the Outcome").
type Effect uint8

const (
	// EffectUnknown: the outcome could not be established. No "completed"
	// or "failed" may be sent; the hop stays "accepted" (HC-25, HC-45).
	EffectUnknown Effect = iota
	// EffectNone: the work took no effect. "failed" without refs says so.
	EffectNone
	// EffectPartial: part of the work took effect. "failed" must list in
	// refs what took effect (HC-44).
	EffectPartial
	// EffectFull: the work took full effect: "completed".
	EffectFull
)

// ReplyOptions are the optional members of a status and what the delegate
// knows of the work.
type ReplyOptions struct {
	Reason Reason
	// Detail is for people (HC-05); leave it empty across trust boundaries
	// (HC-65).
	Detail string
	// Refs: for "completed", the result; for "failed", every part of the
	// work that took effect (HC-44).
	Refs []ContextRef
	// Effect is required for "completed" (EffectFull) and "failed"
	// (EffectNone or EffectPartial).
	Effect Effect
}

// Reply signs the delegate's status for a received offer and records it as
// the hop's last status, so that a retransmission is answered with the
// identical octets (HC-34, HC-39). It enforces the lifecycle rules:
//
//   - at most one of accepted/rejected and one of completed/failed per hop
//     (HC-23); no "rejected" for a hop taken (HC-24); "rejected" with reason
//     stale or replay only for a hop not remembered, and it sets no state;
//   - "completed" only with EffectFull, "failed" only with EffectNone (no
//     refs) or EffectPartial (refs required); an unknown effect is refused
//     and the hop stays "accepted" (HC-25, HC-44, HC-45);
//   - "completed"/"failed" may come without "accepted" (HC-26);
//   - for an equivocating offer, the status answers the FIRST offer, as
//     in.Equivocation allows (HC-54); the second never gets one (HC-53).
//
// A delegate never sends "canceled" for an offer it received; see Cancel.
func (a *Agent) Reply(ctx context.Context, in *Received, state State, opt ReplyOptions) (Signed, error) {
	if in == nil || in.Offer == nil || in.Handoff == nil || isSignatureFailure(in.Reason()) {
		return Signed{}, fmt.Errorf("%w: no verified offer to answer", ErrState)
	}
	o := in.Offer
	target := in.Digest
	if in.Equivocation != "" {
		target = in.First
		if err := checkEquivocationReply(in.Equivocation, state, opt); err != nil {
			return Signed{}, err
		}
	}
	if err := checkEffect(state, opt); err != nil {
		if (state == Completed || state == Failed) && opt.Effect == EffectUnknown {
			// HC-45: never guess; the hop stays "accepted", flagged.
			a.flag(Conflict{Kind: ConflictUnresolved, Iss: o.Iss, Hop: o.Hop, First: target,
				Detail: "outcome of the work could not be established; the hop stays accepted"})
		}
		return Signed{}, err
	}
	defer a.lockHop(o.Iss, o.Hop)()
	key := replay.Key{Iss: string(o.Iss), Hop: string(o.Hop)}
	rec, remembered, err := a.cfg.Store.Get(ctx, key)
	if err != nil {
		return Signed{}, storeErr(err)
	}
	if remembered && !(Digest{Alg: SHA256Alg, Val: rec.Digest}).Equal(target) {
		return Signed{}, fmt.Errorf("%w: the hop holds another offer", ErrState)
	}
	cur := State(rec.State)
	if !remembered {
		cur = ""
	}
	notRemembered := state == Rejected && (opt.Reason == ReasonStale || opt.Reason == ReasonReplay)
	if err := delegateMay(cur, remembered, state, notRemembered, in); err != nil {
		return Signed{}, err
	}
	st := &Status{
		Hop: o.Hop, Offer: target, Iss: a.cfg.ID, Aud: o.Iss, Iat: TimeOf(a.now()),
		State: state, Reason: opt.Reason, Detail: opt.Detail, Refs: opt.Refs,
	}
	signed, err := a.cfg.Signer.SignStatus(st)
	if err != nil {
		return Signed{}, err
	}
	if !remembered || notRemembered {
		return signed, nil // sets no state (HC-24)
	}
	rec.State, rec.Status = string(state), signed.Octets
	rec.Expires = a.now().Add(a.cfg.Retention)
	if state == Accepted {
		rec.Expires = time.Time{} // kept until resolved (HC-34)
	}
	if err := a.cfg.Store.Update(ctx, key, rec); err != nil {
		return Signed{}, storeErr(err)
	}
	return signed, nil
}

// Take records that the delegate has taken the work of an accepted offer
// without sending a status yet: a retransmission is then told it owes
// "accepted" (HC-39).
func (a *Agent) Take(ctx context.Context, in *Received) error {
	if in == nil || !in.Accepted() {
		return fmt.Errorf("%w: only an accepted offer can be taken", ErrState)
	}
	defer a.lockHop(in.Offer.Iss, in.Offer.Hop)()
	key := replay.Key{Iss: string(in.Offer.Iss), Hop: string(in.Offer.Hop)}
	rec, ok, err := a.cfg.Store.Get(ctx, key)
	if err != nil {
		return storeErr(err)
	}
	if !ok {
		return fmt.Errorf("%w: the hop is no longer remembered", ErrState)
	}
	if rec.State != "" {
		return fmt.Errorf("%w: the hop is already %s", ErrState, rec.State)
	}
	rec.State, rec.Expires = string(Accepted), time.Time{}
	if err := a.cfg.Store.Update(ctx, key, rec); err != nil {
		return storeErr(err)
	}
	return nil
}

// delegateMay is the delegate's transition table (section 4, HC-23..HC-26).
// cur is the hop's recorded state ("" when remembered only).
func delegateMay(cur State, remembered bool, next State, notRemembered bool, in *Received) error {
	if notRemembered {
		if remembered {
			return fmt.Errorf("%w: \"rejected\" with reason stale or replay is only for a hop not remembered (HC-24)", ErrState)
		}
		return nil
	}
	if !remembered {
		// Checks 2 and 3 come before the hop is remembered: their
		// rejections set no state.
		if next == Rejected && in.rejection != nil {
			return nil
		}
		return fmt.Errorf("%w: the hop is not remembered", ErrState)
	}
	switch next {
	case Accepted:
		if in.Equivocation != "" || (!in.Accepted() && !in.OwesAccepted()) {
			return fmt.Errorf("%w: the offer was not accepted by the checks", ErrState)
		}
		if cur != "" && !(cur == Accepted && in.OwesAccepted()) {
			return fmt.Errorf("%w: hop already %s (HC-23)", ErrState, cur)
		}
	case Rejected:
		if cur != "" {
			return fmt.Errorf("%w: hop already %s; no \"rejected\" for a hop taken or answered (HC-23, HC-24)", ErrState, cur)
		}
	case Completed, Failed:
		switch cur {
		case "", Accepted, Canceled:
		default:
			return fmt.Errorf("%w: hop already %s (HC-23)", ErrState, cur)
		}
		if cur == "" && in.Equivocation == "" && !in.Accepted() {
			return fmt.Errorf("%w: the offer was not accepted by the checks", ErrState)
		}
	default:
		return fmt.Errorf("%w: a delegate does not send %q", ErrState, next)
	}
	return nil
}

func checkEffect(state State, opt ReplyOptions) error {
	switch state {
	case Completed:
		if opt.Effect != EffectFull {
			return fmt.Errorf("%w: \"completed\" needs the work to have taken full effect (HC-25)", ErrState)
		}
	case Failed:
		switch opt.Effect {
		case EffectNone:
			if len(opt.Refs) > 0 {
				return fmt.Errorf("%w: \"failed\" with refs says part of the work took effect; use EffectPartial (HC-44)", ErrState)
			}
		case EffectPartial:
			if len(opt.Refs) == 0 {
				return fmt.Errorf("%w: \"failed\" after partial effect must list in refs what took effect (HC-44)", ErrState)
			}
		default:
			return fmt.Errorf("%w: \"failed\" needs a known effect; while it is unknown the hop stays \"accepted\" (HC-25, HC-45)", ErrState)
		}
	case Rejected:
		if opt.Reason == "" {
			return fmt.Errorf("%w: \"rejected\" needs a reason", ErrState)
		}
	}
	return nil
}

func checkEquivocationReply(ans EquivocationAnswer, state State, opt ReplyOptions) error {
	switch ans {
	case AnswerRejectFirst:
		if state == Rejected && opt.Reason == ReasonEquivocation {
			return nil
		}
	case AnswerFinishFirst:
		if state == Completed || (state == Failed && opt.Reason == ReasonEquivocation) {
			return nil
		}
	}
	return fmt.Errorf("%w: equivocation allows %s, not %q (HC-54)", ErrState, ans, state)
}

func isSignatureFailure(r Reason) bool {
	return r == ReasonBadSignature || r == ReasonUntrustedKey
}
