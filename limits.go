package handoff

import "time"

// Limits bounds the work a receiver does on untrusted input (HC-50, HC-61).
// Every limit is checked before the work it protects: sizes before parsing,
// the chain length before any chain signature is verified.
//
// The zero value of each field means its default.
type Limits struct {
	// MaxElementSize bounds one signed handoff, in octets. Default 16 KiB.
	MaxElementSize int
	// MaxHandoffSize bounds a whole Handoff object, in octets.
	// Default 512 KiB.
	MaxHandoffSize int
	// MaxChain is the longest chain accepted (HC-50). Default 16, as the
	// draft recommends. A longer chain is rejected with reason "too-deep".
	MaxChain int
	// MaxDepth bounds the nesting of JSON and CBOR values. Default 16.
	MaxDepth int
	// MaxMembers bounds the members of one map or elements of one array.
	// Default 256.
	MaxMembers int
}

// Default limits.
const (
	DefaultMaxElementSize = 16 << 10
	DefaultMaxHandoffSize = 512 << 10
	DefaultMaxChain       = 16
	DefaultMaxDepth       = 16
	DefaultMaxMembers     = 256

	// DefaultSkew is the clock skew allowed in freshness and chain timing
	// checks (HC-31: no more than 60 s is recommended).
	DefaultSkew = 60 * time.Second
	// DefaultMaxLifetime bounds exp - iat (HC-32: 300 s is recommended).
	DefaultMaxLifetime = 300 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxElementSize <= 0 {
		l.MaxElementSize = DefaultMaxElementSize
	}
	if l.MaxHandoffSize <= 0 {
		l.MaxHandoffSize = DefaultMaxHandoffSize
	}
	if l.MaxChain <= 0 {
		l.MaxChain = DefaultMaxChain
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultMaxMembers
	}
	return l
}
