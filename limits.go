package handoff

import "time"

// Limits bounds the work a receiver does on untrusted input (HC-50, HC-61),
// and chooses its profile. Every limit is checked before the work it
// protects: sizes before parsing, the chain length before any chain
// signature is verified.
//
// The zero value of each size field means its default; MaxChain is a
// pointer so that a limit of zero (no chain at all) can be said:
// Limits{MaxChain: new(0)}.
type Limits struct {
	// MaxElementSize bounds one signed handoff, in octets. Default 16 KiB.
	MaxElementSize int
	// MaxHandoffSize bounds a whole Handoff object, in octets.
	// Default 512 KiB.
	MaxHandoffSize int
	// MaxChain is the longest chain accepted (HC-50). Nil means 16, as the
	// draft recommends. A longer chain is rejected with reason "too-deep".
	MaxChain *int
	// MaxDepth bounds the nesting of JSON and CBOR values. Default 16.
	MaxDepth int
	// MaxMembers bounds the members of one map or elements of one array.
	// Default 256.
	MaxMembers int

	// Strict selects the hardening profile, which refuses input the draft
	// allows: CBOR not in preferred serialization (RFC 8949 section
	// 4.2.1), a COSE unprotected header that is not empty, a typ or content
	// type that is not written exactly as the draft writes it, and member
	// names that differ from the draft's only in case. Off by default: the
	// default accepts exactly what the draft accepts. See CONFORMANCE.md,
	// "Profiles".
	Strict bool
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
	// DefaultRetention is how long a delegate keeps a hop after its last
	// terminal status, and a delegator a resolved hop (HC-34, HC-65).
	DefaultRetention = 24 * time.Hour
	// DefaultTTL is the lifetime of an offer made without OfferParams.TTL.
	DefaultTTL = 2 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.MaxElementSize <= 0 {
		l.MaxElementSize = DefaultMaxElementSize
	}
	if l.MaxHandoffSize <= 0 {
		l.MaxHandoffSize = DefaultMaxHandoffSize
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultMaxMembers
	}
	return l
}

func (l Limits) maxChain() int {
	if l.MaxChain == nil {
		return DefaultMaxChain
	}
	return max(*l.MaxChain, 0)
}

// durationOr returns *d, or def when d is nil.
func durationOr(d *time.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return *d
}

// profileOf returns the decoding profile lim selects.
func profileOf(lim Limits) Profile {
	if lim.Strict {
		return ProfileStrict
	}
	return ProfileExact
}
