// Package reason holds the draft's reason codes (section 2): why an offer
// was rejected or work failed, as a status carries it and as a receiver
// reports a refusal.
package reason

// Code says why an offer was rejected or work failed (section 2). Values
// outside the list below are permitted but should be avoided (HC-04).
type Code string

const (
	BadSignature    Code = "bad-signature"
	UntrustedKey    Code = "untrusted-key"
	WrongAudience   Code = "wrong-audience"
	Stale           Code = "stale"
	Replay          Code = "replay"
	Equivocation    Code = "equivocation"
	BrokenChain     Code = "broken-chain"
	Cycle           Code = "cycle"
	TooDeep         Code = "too-deep"
	UnverifiableRef Code = "unverifiable-ref"
	RefMismatch     Code = "ref-mismatch"
	Policy          Code = "policy"
)

// All lists the reason codes the draft defines, in its order.
func All() []Code {
	return []Code{
		BadSignature, UntrustedKey, WrongAudience,
		Stale, Replay, Equivocation, BrokenChain,
		Cycle, TooDeep, UnverifiableRef,
		RefMismatch, Policy,
	}
}

// Defined reports whether r is one of the draft's reason codes.
func (r Code) Defined() bool {
	for _, d := range All() {
		if r == d {
			return true
		}
	}
	return false
}
