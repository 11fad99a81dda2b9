package handoff

import (
	"math"
	"time"
)

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
	// MaxDepth, when above zero, bounds the nesting of JSON and CBOR
	// values in a payload. Zero, the default, bounds nesting by the size
	// bound alone, as the draft does (HC-61 bounds element size, and a
	// receiver MUST ignore members it does not understand, HC-01), up to
	// the decoders' own limits: 10000 levels for JSON (RFC 8259 section 9
	// lets an implementation limit nesting; a JWS payload within the
	// default element size cannot nest deeper than 6144) and 65535 for
	// CBOR. A bound is an opt-in hardening: it refuses valid offers.
	MaxDepth int
	// MaxMembers, when above zero, bounds the members of one map or the
	// elements of one array in a payload. Zero, the default, bounds them
	// by the size bound alone: a value can hold no more items than it has
	// octets. Like MaxDepth, a bound is an opt-in hardening that refuses
	// valid offers. The chain's length is bounded by MaxChain, not by this.
	MaxMembers int

	// Strict selects the hardening profile, which refuses input the draft
	// allows: CBOR not in preferred serialization (RFC 8949 section
	// 4.2.1), a COSE unprotected header that is not empty, a typ or content
	// type that is not written exactly as the draft writes it, and member
	// names that differ from the draft's only in case. Off by default: the
	// default accepts exactly what the draft accepts, within the size
	// bounds above, which refuse valid input beyond them. See
	// CONFORMANCE.md, "Profiles".
	Strict bool
}

// Default limits.
const (
	defaultMaxElementSize = 16 << 10
	defaultMaxHandoffSize = 512 << 10
	defaultMaxChain       = 16

	// defaultSkew is the clock skew allowed in freshness and chain timing
	// checks (HC-31: no more than 60 s is recommended).
	defaultSkew = 60 * time.Second
	// defaultMaxLifetime bounds exp - iat (HC-32: 300 s is recommended).
	defaultMaxLifetime = 300 * time.Second
	// defaultRetention is how long a delegate keeps a hop after its last
	// terminal status, and a delegator a resolved hop (HC-34, HC-65).
	defaultRetention = 24 * time.Hour
	// defaultTTL is the lifetime of an offer made without OfferParams.TTL.
	defaultTTL = 2 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.MaxElementSize <= 0 {
		l.MaxElementSize = defaultMaxElementSize
	}
	if l.MaxHandoffSize <= 0 {
		l.MaxHandoffSize = defaultMaxHandoffSize
	}
	if l.MaxDepth <= 0 || l.MaxDepth > maxNesting {
		l.MaxDepth = maxNesting
	}
	if l.MaxMembers <= 0 || l.MaxMembers > maxItems {
		l.MaxMembers = maxItems
	}
	return l
}

// The decoders' own bounds, which the defaults take: the CBOR library's
// largest nesting and item counts. jsontext refuses JSON nested deeper
// than 10000 levels whatever the bound.
const (
	maxNesting = 65535
	maxItems   = math.MaxInt32
)

func (l Limits) maxChain() int {
	if l.MaxChain == nil {
		return defaultMaxChain
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
func profileOf(lim Limits) profile {
	if lim.Strict {
		return profileStrict
	}
	return profileExact
}
