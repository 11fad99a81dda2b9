// Package state names the states of a hop (section 4 of the draft), as
// statuses carry them and as a delegator holds them, and what a delegate
// knows of its work's effect when it reports an outcome ("Knowing the
// Outcome"). The rules that move a hop from one state to the next are the
// root package's (lifecycle.go).
package state

// State is the state of a hop (section 4). The first five are sent in
// statuses; Offered and Expired are held locally by a delegator only.
type State string

const (
	Offered   State = "offered"
	Accepted  State = "accepted"
	Rejected  State = "rejected"
	Completed State = "completed"
	Failed    State = "failed"
	Canceled  State = "canceled"
	// Expired is local and provisional at the delegator (HC-27): no message
	// carries it, and a later verified status replaces it.
	Expired State = "expired"
)

// Wire reports whether s may appear in a status.
func (s State) Wire() bool {
	switch s {
	case Accepted, Rejected, Completed, Failed, Canceled:
		return true
	}
	return false
}

// Effect is what a delegate knows of its work's effect when it reports an
// outcome ("Knowing the Outcome").
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

// Answer says what status, if any, the rules let the receiver
// send for the FIRST of two offers with one (iss, hop) (HC-54). The second
// offer never gets a status (HC-53).
type Answer string

const (
	// AnswerRejectFirst: the first offer was neither taken nor answered:
	// send "rejected" with reason "equivocation" for it.
	AnswerRejectFirst Answer = "reject-first"
	// AnswerFinishFirst: the work of the first offer was taken (or the hop
	// canceled by its delegator) and this delegate sent no terminal status:
	// stop the work if possible, then, once the outcome is known, send
	// "completed" if it took full effect, else "failed" with reason
	// "equivocation" and refs of any effect.
	AnswerFinishFirst Answer = "finish-first"
	// AnswerNone: this delegate rejected the first offer or sent a terminal
	// status for it: no further status may be sent.
	AnswerNone Answer = "none"
)
