package evidence

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Extra holds the members of an object that this version does not define,
// kept as received (their JSON text) so that re-encoding keeps them and the
// digest still covers them.
type Extra = map[string]jsontext.Value

// ControlMode says whether the receiver becomes the owner of the work or
// remains a bounded specialist that hands a result back (contract:
// "Control mode").
type ControlMode string

const (
	// TransferOwnership: the receiver becomes the user-facing owner.
	TransferOwnership ControlMode = "transfer-ownership"
	// SpecialistReturnsResult: the receiver does the bounded work and
	// returns its result to the sender as a "completed" status whose refs
	// name the result artifacts (the return-to-sender path).
	SpecialistReturnsResult ControlMode = "specialist-returns-result"
)

// Valid reports whether m is one of the two modes.
func (m ControlMode) Valid() bool { return m == TransferOwnership || m == SpecialistReturnsResult }

// Package is the handoff package of the evidence contract: one member per
// line of the contract's template, each as structured data. It travels
// beside the signed offer, which names it by digest (see Ref).
//
// Members a receiver does not understand are kept in Extra, at every level,
// and are covered by the digest.
type Package struct {
	// Handoff: "Handoff ID and time". ID is the hop of the offer the
	// package rides with.
	Handoff Header `json:"handoff"`
	// Sender and Receiver: "Sender / receiver" (ROLE -> ROLE), each bound
	// to the offer's iss and aud.
	Sender   Party `json:"sender"`
	Receiver Party `json:"receiver"`
	// Control: "Control mode".
	Control ControlMode `json:"control"`
	// Outcome: "Outcome and done condition".
	Outcome Outcome `json:"outcome"`
	// Authority: "Authority and permissions" (allowed, must ask, denied).
	Authority Authority `json:"authority"`
	// State: "Verified current state" (system of record -> state, as of).
	State []StateClaim `json:"state"`
	// Completed: "Completed actions" (action, operation id, postcondition).
	Completed []CompletedAction `json:"completed"`
	// Artifacts: "Artifacts and evidence" (ref -> what it proves).
	Artifacts []Artifact `json:"artifacts"`
	// Passed: "Context passed" (minimum data).
	Passed []ContextItem `json:"context_passed"`
	// Withheld: "Context withheld/redacted" (data -> reason). Only the
	// item's name and the reason travel, never its value.
	Withheld []Withheld `json:"context_withheld"`
	// Assumptions: "Assumptions and unknowns" (item -> validation).
	Assumptions []Assumption `json:"assumptions"`
	// Attempts: "Rejected/failed attempts" (attempt -> result).
	Attempts []Attempt `json:"attempts"`
	// Pending: "Pending approvals or side effects" (item -> owner).
	Pending []Pending `json:"pending"`
	// Next: "Next bounded action": exactly one.
	Next NextAction `json:"next_action"`
	// Verification: "Verification after next action".
	Verification Verification `json:"verification"`
	// Timeouts: "Timeout/escalation" (condition -> owner).
	Timeouts []Timeout `json:"timeouts"`
	// Rollback: "Rollback/recovery".
	Rollback Rollback `json:"rollback"`
	// Ack: "Receiver acknowledgement". The sender leaves it out; the
	// receiver's acknowledgement travels as the hop's status (see
	// Acknowledge), and a record copy may carry it here. The digest of a
	// package is that of the package as sent, without Ack.
	Ack *Acknowledgement `json:"acknowledgement,omitzero"`

	Extra Extra `json:",embed"`
}

// Header is the handoff id and time.
type Header struct {
	// ID is the hop (HopId) of the offer this package rides with.
	ID string `json:"id"`
	// Time is when the package was made, RFC 3339; it falls inside the
	// offer's [iat, exp] window.
	Time  time.Time `json:"time"`
	Extra Extra     `json:",embed"`
}

// Party is one side of the handoff: its role and its AgentId.
type Party struct {
	Role  string `json:"role"`
	Agent string `json:"agent"`
	Extra Extra  `json:",embed"`
}

// Outcome is the exact result wanted and the condition under which it is
// done.
type Outcome struct {
	Result   string `json:"result"`
	DoneWhen string `json:"done_when"`
	Extra    Extra  `json:",embed"`
}

// Authority is the permission boundary: action names (tool or operation
// identifiers, compared exactly) the receiver may take, may take only after
// an approval, and may never take. Anything unlisted is refused by the
// Guard.
type Authority struct {
	Allowed []string `json:"allowed"`
	MustAsk []string `json:"must_ask"`
	Denied  []string `json:"denied"`
	Extra   Extra    `json:",embed"`
}

// StateClaim is one verified current state: the system of record, the
// state it holds, and when that was observed. Evidence lists the ids of the
// artifacts that support the claim; a claim without verified evidence is
// reported as unsupported.
type StateClaim struct {
	System   string    `json:"system"`
	State    string    `json:"state"`
	AsOf     time.Time `json:"as_of"`
	Evidence []string  `json:"evidence"`
	Extra    Extra     `json:",embed"`
}

// CompletedAction is an action already taken. External is true when it had
// an effect outside the sender (a payment, an email): such an action needs
// an operation id or an idempotency key, so that the receiver does not
// repeat it after an ambiguous response.
//
// Hop names the hop under which it was performed, as the handoff digest
// of its offer (Digest.String): an earlier hop of the offer's verified
// chain, or, when absent, the hop this package rides with. Its operation
// id and idempotency key name an effect of that hop only (see Guard); a
// hop outside the chain is reported "effect-out-of-scope" and the action
// is not recorded.
type CompletedAction struct {
	Action         string   `json:"action"`
	External       bool     `json:"external"`
	OperationID    string   `json:"operation_id,omitzero"`
	IdempotencyKey string   `json:"idempotency_key,omitzero"`
	Hop            string   `json:"hop,omitzero"`
	Postcondition  string   `json:"postcondition"`
	Evidence       []string `json:"evidence"`
	Extra          Extra    `json:",embed"`
}

// Artifact is a piece of evidence: a reference by digest and what it
// proves. ID is how claims cite it.
type Artifact struct {
	ID     string  `json:"id"`
	Ref    WireRef `json:"ref"`
	Proves string  `json:"proves"`
	Extra  Extra   `json:",embed"`
}

// WireRef is a context reference (ref.Ref) in the package: kind, digest, and optional loc
// (draft section 2.2). Kind is "digest" or "salted-digest" for an artifact
// the receiver checks; the salt of a salted digest travels with the object,
// never here (HC-09).
type WireRef struct {
	Kind  string     `json:"kind"`
	Dig   WireDigest `json:"dig"`
	Loc   string     `json:"loc,omitzero"`
	Extra Extra      `json:",embed"`
}

// WireDigest is a Digest in the package: alg and base64url value.
type WireDigest struct {
	Alg string `json:"alg"`
	Val string `json:"val"`
}

// ContextItem is one piece of context passed: its name and value. Pass
// only what the receiver's role needs.
type ContextItem struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Extra Extra  `json:",embed"`
}

// Withheld names an item of context left out or redacted, and why. Its
// value never travels.
type Withheld struct {
	Item   string `json:"item"`
	Reason string `json:"reason"`
	Extra  Extra  `json:",embed"`
}

// Assumption is an assumption or unknown, and how to validate it.
type Assumption struct {
	Item       string `json:"item"`
	Validation string `json:"validation"`
	Extra      Extra  `json:",embed"`
}

// Attempt is a rejected or failed attempt and its result.
type Attempt struct {
	Attempt  string   `json:"attempt"`
	Result   string   `json:"result"`
	Evidence []string `json:"evidence"`
	Extra    Extra    `json:",embed"`
}

// PendingKind says whether a pending item is an approval or a side effect.
type PendingKind string

const (
	PendingApproval   PendingKind = "approval"
	PendingSideEffect PendingKind = "side-effect"
)

// Pending is an approval or side effect not yet settled, and who owns it.
// Action, for an approval, names the "must ask" action it would unlock.
type Pending struct {
	Kind   PendingKind `json:"kind"`
	Item   string      `json:"item"`
	Action string      `json:"action,omitzero"`
	Owner  string      `json:"owner"`
	Extra  Extra       `json:",embed"`
}

// NextAction is the one next bounded action.
type NextAction struct {
	Action      string `json:"action"`
	Description string `json:"description"`
	Extra       Extra  `json:",embed"`
}

// Verification is the check to run after the next action.
type Verification struct {
	Check string `json:"check"`
	Extra Extra  `json:",embed"`
}

// Timeout is a condition for escalation and who owns it.
type Timeout struct {
	Condition string `json:"condition"`
	Owner     string `json:"owner"`
	// At, when set, is the time at which the condition holds.
	At    time.Time `json:"at,omitzero"`
	Extra Extra     `json:",embed"`
}

// Rollback is how to recover or undo.
type Rollback struct {
	Method string `json:"method"`
	Extra  Extra  `json:",embed"`
}

// Decision is the receiver's acknowledgement.
type Decision string

const (
	DecisionAccepted Decision = "accepted"
	DecisionRejected Decision = "rejected"
)

// Acknowledgement is the receiver's answer: accepted, or rejected with a
// reason and the finding codes behind it.
type Acknowledgement struct {
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason,omitzero"`
	Findings []string `json:"findings,omitzero"`
	Extra    Extra    `json:",embed"`
}

// DefaultMaxSize bounds an encoded package: 256 KiB.
const DefaultMaxSize = 256 << 10

// Decoding errors. Every error Decode returns wraps ErrMalformed or
// ErrTooLarge, and the more precise class when there is one.
var (
	ErrMalformed = errors.New("evidence: malformed package")
	ErrTooLarge  = errors.New("evidence: package too large")
	// ErrDuplicateName: an object has two members of one name (RFC 8259
	// leaves the outcome undefined; I-JSON, RFC 7493, forbids it).
	ErrDuplicateName = errors.New("evidence: duplicate member name")
	// ErrInvalidUTF8: the text is not UTF-8 (RFC 8259 section 8.1), or a
	// string escapes a lone surrogate (RFC 7493 section 2.1).
	ErrInvalidUTF8 = errors.New("evidence: invalid UTF-8 or lone surrogate")
)

// DecodeOptions bound decoding.
type DecodeOptions struct {
	// MaxSize is the largest input accepted, in octets. Zero means
	// DefaultMaxSize.
	MaxSize int
}

// Decode parses an encoded package strictly: one JSON object (RFC 8259)
// that is I-JSON (RFC 7493): no duplicate member names, valid UTF-8, no
// lone surrogate escapes, no trailing data, at most MaxSize octets. Member
// names compare exactly (case-sensitive). Unknown members are kept.
func Decode(data []byte, opt DecodeOptions) (*Package, error) {
	p, _, _, err := parse(data, opt)
	return p, err
}

// parse decodes data strictly (see Decode) and returns the package with its
// JCS form, in one pass over the text and one decoding of it (see
// canonicalize for the cost).
func parse(data []byte, opt DecodeOptions) (*Package, *canon, []byte, error) {
	max := opt.MaxSize
	if max <= 0 {
		max = DefaultMaxSize
	}
	if len(data) > max {
		return nil, nil, nil, fmt.Errorf("%w: %d octets, at most %d accepted", ErrTooLarge, len(data), max)
	}
	if !utf8.Valid(data) {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrMalformed, ErrInvalidUTF8)
	}
	if k := firstKind(data); k != '{' {
		return nil, nil, nil, fmt.Errorf("%w: a package is a JSON object", ErrMalformed)
	}
	// canonicalize refuses duplicate names, so the decoder need not track
	// them (its tracking costs hundreds of octets per nested object).
	tree, c, err := canonicalize(data)
	if err != nil {
		return nil, nil, nil, err
	}
	var p Package
	if err := presize(&p, tree, len(data)); err != nil {
		return nil, nil, nil, err
	}
	if err := json.Unmarshal(data, &p, jsontext.AllowDuplicateNames(true)); err != nil {
		return nil, nil, nil, classify(err, data)
	}
	return &p, tree, c, nil
}

// classify maps a decoding error to the package's error classes, by the
// decoder's exported error for duplicates, and for UTF-8 by asking whether
// the text is valid JSON once invalid UTF-8 is allowed.
func classify(err error, data []byte) error {
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return fmt.Errorf("%w: %w: %v", ErrMalformed, ErrDuplicateName, err)
	case data != nil && !jsontext.Value(data).IsValid(jsontext.AllowDuplicateNames(true)) &&
		jsontext.Value(data).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)):
		return fmt.Errorf("%w: %w: %v", ErrMalformed, ErrInvalidUTF8, err)
	}
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}

func firstKind(data []byte) byte {
	for _, c := range data {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// Encode returns p as JSON: the members in the order of the template, then
// unknown members. Its JCS form (RFC 8785) is what the digest covers.
func (p *Package) Encode() ([]byte, error) {
	return json.Marshal(p, json.Deterministic(true))
}

// Overdue returns the timeouts whose time has come at now: the conditions
// to escalate, each with its owner. Timeouts without a time are left to
// the caller's own reading of their condition.
func (p *Package) Overdue(now time.Time) []Timeout {
	var out []Timeout
	for _, t := range p.Timeouts {
		if !t.At.IsZero() && !now.Before(t.At) {
			out = append(out, t)
		}
	}
	return out
}
