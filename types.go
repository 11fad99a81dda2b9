package handoff

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"math"
	"regexp"
	"time"
)

// AgentID names an agent (HC-02). It is a string, recommended to be a URI,
// that a receiver's trust configuration maps to keys.
type AgentID string

// HopID names one hop. It matches [A-Za-z0-9_-]{22,64} and carries at least
// 128 random bits (HC-12). It is the nonce of replay detection.
type HopID string

var hopPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{22,64}$`)

// Valid reports whether h matches the draft's HopId pattern.
func (h HopID) Valid() bool { return hopPattern.MatchString(string(h)) }

// NewHopID returns a fresh hop identifier: 16 octets (128 bits) from r, or
// from crypto/rand when r is nil, in base64url without padding (HC-12).
func NewHopID(r io.Reader) (HopID, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", err
	}
	return HopID(base64.RawURLEncoding.EncodeToString(b[:])), nil
}

// Time is seconds since 1970-01-01T00:00:00Z, ignoring leap seconds, as an
// unsigned integer (HC-12). The CDDL says Time = uint: decoders accept every
// value up to MaxTime.
type Time uint64

// MaxTime is the largest Time accepted: 2^64 - 1, the largest CBOR uint
// (major type 0). In JSON, every integer literal that parses exactly up to
// that bound is a Time.
const MaxTime Time = math.MaxUint64

// TimeOf returns t as a Time, rounded down to the second. Times before 1970
// give 0.
func TimeOf(t time.Time) Time {
	if s := t.Unix(); s > 0 {
		return Time(s)
	}
	return 0
}

// Std returns t as a time.Time in UTC. A Time past 2^62 seconds (beyond
// any date time.Time computes with safely) gives 2^62 seconds.
func (t Time) Std() time.Time { return time.Unix(int64(min(t, maxStdTime)), 0).UTC() }

const maxStdTime Time = 1 << 62

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

// Terminal reports whether s ends the hop (a "rejected" is terminal only
// with a reason other than stale or replay; see Status.Terminal).
func (s State) Terminal() bool {
	switch s {
	case Rejected, Completed, Failed, Canceled:
		return true
	}
	return false
}

// A2ATaskState returns the nearest A2A TaskState for s (HC-29, draft table
// "Mapping to A2A task states"), or "" for Expired, which has none.
func (s State) A2ATaskState() string {
	switch s {
	case Offered:
		return "TASK_STATE_SUBMITTED"
	case Accepted:
		return "TASK_STATE_WORKING"
	case Rejected:
		return "TASK_STATE_REJECTED"
	case Completed:
		return "TASK_STATE_COMPLETED"
	case Failed:
		return "TASK_STATE_FAILED"
	case Canceled:
		return "TASK_STATE_CANCELED"
	}
	return ""
}

// Reason says why an offer was rejected or work failed (section 2). Values
// outside the list below are permitted but should be avoided (HC-04).
type Reason string

const (
	ReasonBadSignature    Reason = "bad-signature"
	ReasonUntrustedKey    Reason = "untrusted-key"
	ReasonWrongAudience   Reason = "wrong-audience"
	ReasonStale           Reason = "stale"
	ReasonReplay          Reason = "replay"
	ReasonEquivocation    Reason = "equivocation"
	ReasonBrokenChain     Reason = "broken-chain"
	ReasonCycle           Reason = "cycle"
	ReasonTooDeep         Reason = "too-deep"
	ReasonUnverifiableRef Reason = "unverifiable-ref"
	ReasonRefMismatch     Reason = "ref-mismatch"
	ReasonPolicy          Reason = "policy"
)

// Reasons lists the reason codes the draft defines, in its order.
func Reasons() []Reason {
	return []Reason{
		ReasonBadSignature, ReasonUntrustedKey, ReasonWrongAudience,
		ReasonStale, ReasonReplay, ReasonEquivocation, ReasonBrokenChain,
		ReasonCycle, ReasonTooDeep, ReasonUnverifiableRef,
		ReasonRefMismatch, ReasonPolicy,
	}
}

// Defined reports whether r is one of the draft's reason codes.
func (r Reason) Defined() bool {
	for _, d := range Reasons() {
		if r == d {
			return true
		}
	}
	return false
}

// Principal names the principal on whose behalf the root of a chain acted
// (obo, section 5.5). It is informational: no access control decision may
// rest on it (HC-57).
type Principal struct {
	Sub string
	Iss string // optional: the issuer in whose namespace Sub is unique
	// Extra holds members this version does not define, kept as decoded.
	Extra map[string]any
}

// Reference kinds defined by the draft (section 2.2). Any other kind must be
// an absolute URI (HC-10).
const (
	KindDigest       = "digest"
	KindSaltedDigest = "salted-digest"
	KindSCITTReceipt = "scitt-receipt"
	KindLearnlogHead = "learnlog-head"
)

// ContextRef names prior context by digest (section 2.2).
type ContextRef struct {
	Kind  string
	Dig   Digest
	Loc   string // optional URI where the object can be fetched
	Proof any    // optional kind-specific material, as decoded
	Extra map[string]any
}

// Offer is a handoff offer (HandoffOffer, section 2). Its v is 1 and its
// type "offer"; both are implied by the Go type.
type Offer struct {
	Hop    HopID
	Dialog string
	Task   string // optional
	Iss    AgentID
	Aud    AgentID
	Iat    Time
	Exp    Time
	Obo    *Principal   // optional
	Grant  *Digest      // optional: digest of the credential's octets (HC-03)
	Prev   *Digest      // optional: handoff digest of the offer passed on
	Refs   []ContextRef // optional; when present, at least one
	// Extra holds members this version does not define (HC-01), as decoded.
	Extra map[string]any
}

// Status is a handoff status (HandoffStatus, section 2). Its v is 1 and its
// type "status".
type Status struct {
	Hop    HopID
	Offer  Digest // handoff digest of the offer this status answers
	Iss    AgentID
	Aud    AgentID
	Iat    Time
	State  State
	Reason Reason // optional
	Detail string // optional; for people only (HC-05)
	Refs   []ContextRef
	Extra  map[string]any
}

// Terminal reports whether s ends its hop: "completed", "failed",
// "canceled", or "rejected" with a reason other than "stale" or "replay"
// (HC-24, HC-41).
func (s *Status) Terminal() bool {
	if s.State == Rejected {
		return s.Reason != ReasonStale && s.Reason != ReasonReplay
	}
	return s.State.Terminal()
}
