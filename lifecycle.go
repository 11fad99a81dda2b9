package handoff

import (
	"fmt"

	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

// Section 4 of the draft (the hop's states), "Asking Again" and "Knowing
// the Outcome": the lifecycle of a hop as two pure transition tables, one
// for each role. They take plain values and return the next state or the
// rule that forbids the step; the Agent applies them around storage, locks
// and signing.

// equivocationAnswer is HC-54 for a hop in state held ("" when only
// remembered).
func equivocationAnswer(held state.State) state.Answer {
	switch held {
	case "":
		return state.AnswerRejectFirst
	case state.Accepted, state.Canceled:
		// A hop the delegator canceled has no terminal status from this
		// delegate, which may still report the outcome (HC-54, HC-56).
		return state.AnswerFinishFirst
	}
	return state.AnswerNone
}

// ruleError is a refusal of the lifecycle tables: it wraps ErrState and
// says the rule in words, the HC-ID after it.
type ruleError struct {
	rule string
	hc   string
}

func (e *ruleError) Error() string {
	if e.hc == "" {
		return "handoff: not allowed in this state: " + e.rule
	}
	return fmt.Sprintf("handoff: not allowed in this state: %s (%s)", e.rule, e.hc)
}

func (e *ruleError) Unwrap() error { return ErrState }

func rule(hc, format string, args ...any) error {
	return &ruleError{rule: fmt.Sprintf(format, args...), hc: hc}
}

// argError is a status request whose options contradict the state asked
// for, whatever the hop's state: it wraps ErrArgument, names the field of
// ReplyOptions to set, and says the rule, the HC-ID after it.
type argError struct {
	field string // the ReplyOptions field to set
	rule  string
	hc    string
}

func (e *argError) Error() string {
	if e.hc == "" {
		return fmt.Sprintf("handoff: invalid argument: ReplyOptions.%s: %s", e.field, e.rule)
	}
	return fmt.Sprintf("handoff: invalid argument: ReplyOptions.%s: %s (%s)", e.field, e.rule, e.hc)
}

func (e *argError) Unwrap() error { return ErrArgument }

func optionErr(field, hc, format string, args ...any) error {
	return &argError{field: field, rule: fmt.Sprintf(format, args...), hc: hc}
}

// delegateHop is what a delegate knows of a hop when it is about to send a
// status for it.
type delegateHop struct {
	// Remembered: the (iss, hop) pair is in the delegate's memory.
	Remembered bool
	// State is the hop's recorded state: "" while only remembered.
	State state.State
	// Sent: a status was sent for the hop (its last status is recorded).
	Sent bool
	// Verdict is how the checks of section 5.1 judged the offer being
	// answered.
	Verdict verdict
}

// verdict is what the receive pipeline concluded about one delivery.
type verdict uint8

const (
	verdictAccepted     verdict = iota + 1 // every check passed
	verdictRejected                        // a check failed (steps 2 to 7)
	verdictRetransmit                      // a remembered pair, the same digest
	verdictEquivocation                    // a remembered pair, another digest
)

// delegateSend is the status a delegate wants to send.
type delegateSend struct {
	State  state.State
	Reason reason.Code
	Effect state.Effect
	Refs   int // number of refs
	// OwesAccepted: the hop was taken and no status was sent yet (HC-39).
	OwesAccepted bool
	// Equivocation: the answer HC-54 allows for the first offer.
	Equivocation state.Answer
}

// delegateStep is the delegate's transition table (section 4, HC-23 to
// HC-26, HC-44, HC-45, HC-53, HC-54). It returns the state the hop is in
// after the status is sent, and whether sending it records that state; a
// "rejected" with reason stale or replay for a hop not remembered, and a
// rejection by checks 2 or 3 (before the pair is remembered), set none.
func delegateStep(h delegateHop, s delegateSend) (next state.State, records bool, err error) {
	if err := effectRule(s); err != nil {
		return "", false, err
	}
	forgotten := s.State == state.Rejected && (s.Reason == reason.Stale || s.Reason == reason.Replay)
	if forgotten {
		if h.Remembered {
			return "", false, rule("HC-24", "a \"rejected\" with reason stale or replay is only for a hop this delegate does not remember")
		}
		return h.State, false, nil
	}
	if h.Verdict == verdictEquivocation {
		if err := equivocationRule(s); err != nil {
			return "", false, err
		}
	}
	if !h.Remembered {
		if s.State == state.Rejected && h.Verdict == verdictRejected {
			return "", false, nil // checks 2 and 3 come before the pair is remembered
		}
		return "", false, rule("", "the hop is not remembered")
	}
	switch s.State {
	case state.Accepted:
		switch {
		case h.Verdict == verdictAccepted && h.State == "":
		case h.State == state.Accepted && !h.Sent && (h.Verdict == verdictAccepted || h.Verdict == verdictRetransmit):
			// Taken (Take) and no status sent yet: "accepted" is owed
			// (HC-39), once.
		case h.Verdict != verdictAccepted && h.Verdict != verdictRetransmit:
			return "", false, rule("", "the offer did not pass the checks of section 5.1")
		default:
			return "", false, rule("HC-23", "the hop is already %s; a delegate answers an offer at most once", h.State)
		}
	case state.Rejected:
		if h.State != "" {
			return "", false, rule("HC-23, HC-24", "the hop is already %s; a delegate never rejects a hop it has taken or answered", h.State)
		}
	case state.Completed, state.Failed:
		switch h.State {
		case "", state.Accepted, state.Canceled:
		default:
			return "", false, rule("HC-23", "the hop is already %s; a delegate reports the outcome at most once", h.State)
		}
		if h.State == "" && h.Verdict != verdictAccepted && h.Verdict != verdictEquivocation {
			return "", false, rule("", "the offer did not pass the checks of section 5.1")
		}
	default:
		return "", false, rule("", "a delegate does not send %q; only the delegator cancels", s.State)
	}
	return s.State, true, nil
}

// effectRule is "Knowing the Outcome": "completed" only when the work took
// full effect, "failed" only when its effect is known, with refs exactly
// when part of it took effect (HC-25, HC-44, HC-45), and "rejected" only
// with a reason. These hold in every state, so a breach is an argument
// error (ErrArgument) naming the ReplyOptions field, not a state error.
func effectRule(s delegateSend) error {
	switch s.State {
	case state.Completed:
		if s.Effect != state.EffectFull {
			return optionErr("Effect", "HC-25", "\"completed\" is sent only when the work took full effect: set Effect to EffectFull; "+
				"if it did not, send \"failed\" with EffectNone or EffectPartial")
		}
	case state.Failed:
		switch s.Effect {
		case state.EffectNone:
			if s.Refs > 0 {
				return optionErr("Effect", "HC-44", "\"failed\" with Refs says part of the work took effect: set Effect to EffectPartial, or leave Refs empty")
			}
		case state.EffectPartial:
			if s.Refs == 0 {
				return optionErr("Refs", "HC-44", "\"failed\" with EffectPartial must list in Refs what took effect")
			}
		case state.EffectFull:
			return optionErr("Effect", "HC-25", "the work took full effect: send \"completed\", not \"failed\"")
		default:
			return optionErr("Effect", "HC-25, HC-45", "\"failed\" is sent only when the work's effect is known: set Effect to EffectNone or EffectPartial; "+
				"until it is known, send nothing (the hop stays \"accepted\")")
		}
	case state.Rejected:
		if s.Reason == "" {
			return optionErr("Reason", "", "\"rejected\" needs a reason: set Reason to the draft's reason code (Reasons lists them)")
		}
	}
	return nil
}

// equivocationRule is HC-54: what may be sent for the first of two offers
// with one (iss, hop).
func equivocationRule(s delegateSend) error {
	switch s.Equivocation {
	case state.AnswerRejectFirst:
		if s.State == state.Rejected && s.Reason == reason.Equivocation {
			return nil
		}
	case state.AnswerFinishFirst:
		if s.State == state.Completed || (s.State == state.Failed && s.Reason == reason.Equivocation) {
			return nil
		}
	}
	return rule("HC-54", "after equivocation the first offer may get %s, not %q", s.Equivocation, s.State)
}

// delegatorHop is what a delegator holds for a hop it offered.
type delegatorHop struct {
	State    state.State // Offered, or the state a verified status set
	Reason   reason.Code
	Canceled bool // this delegator canceled it
	Observed bool // an authoritative observation of no effect (HC-41)
}

// delegatorStep is the delegator's transition table for a verified status
// that answers one of its offers (section 4, HC-24, HC-26, HC-27, HC-56):
// the first verified terminal state stands; "accepted" is implied by
// "completed" and "failed"; a "rejected" with reason stale or replay never
// sets the state and is never a conflict; a later status that contradicts
// the state is a conflict, flagged and ignored.
func delegatorStep(h delegatorHop, s *Status) (next delegatorHop, changed, conflict bool) {
	next = h
	switch {
	case s.State == state.Rejected && (s.Reason == reason.Stale || s.Reason == reason.Replay):
		// Says only that the delegate does not remember the hop (HC-24).
	case h.State == state.Offered:
		next.State, next.Reason, changed = s.State, s.Reason, true
	case h.State == state.Accepted && s.State != state.Accepted:
		if s.State == state.Rejected {
			conflict = true // a delegate may not reject a hop it took
		} else {
			next.State, next.Reason, changed = s.State, s.Reason, true
		}
	case s.State == state.Accepted:
		// Implied by a terminal state already held.
	case h.State == s.State && h.Reason == s.Reason:
		// The same answer again, e.g. a resent status.
	default:
		conflict = true
	}
	return next, changed, conflict
}

// resolved is HC-41: a verified "completed" or "failed", a verified
// "rejected" with a reason other than stale or replay, or an authoritative
// observation that the work did not take effect. An expired hop and a hop
// this delegator canceled are unresolved: the delegate may have done the
// work.
func (h delegatorHop) resolved() bool {
	switch h.State {
	case state.Completed, state.Failed:
		return true
	case state.Rejected:
		return h.Reason != reason.Stale && h.Reason != reason.Replay
	}
	return h.Observed
}

// localState is the state a delegator shows for a hop: Expired once an
// offer with no status passed its exp (local and provisional, HC-27).
func (h delegatorHop) localState(exp, now Time) state.State {
	if h.State == state.Offered && now >= exp {
		return state.Expired
	}
	return h.State
}
