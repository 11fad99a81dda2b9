package ledger

import "strconv"

// Outcome is what a lookup in the ledger shows about one hop. The zero value
// is Unknown, so that an outcome never set is never taken for a result.
type Outcome int

const (
	// Unknown: the lookup shows nothing. The lookup failed or timed out, or
	// the record is absent while the step that would write it may still
	// complete. The delegate keeps the hop "accepted" and does not guess
	// (HC-45).
	Unknown Outcome = iota
	// TookEffect: the record is present with the digest asked about. The
	// effect written in the same transaction took place.
	TookEffect
	// NoEffect: the record is absent and the caller stated that the step
	// cannot still complete. The effect did not take place.
	NoEffect
	// Conflict: a record is present for the pair with another digest. Work
	// was done for a different offer under the same (iss, hop); the offer
	// asked about must not be accepted (equivocation, HC-35).
	Conflict
)

// String returns "unknown", "took-effect", "no-effect" or "conflict".
func (o Outcome) String() string {
	switch o {
	case Unknown:
		return "unknown"
	case TookEffect:
		return "took-effect"
	case NoEffect:
		return "no-effect"
	case Conflict:
		return "conflict"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}
