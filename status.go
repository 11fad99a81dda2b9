package handoff

import (
	"log/slog"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// Sections 2 and 4 of the draft: the status, the wire states of a hop and
// the reason codes; section 5.4: verifying a status against its offer.

// Status is a handoff status (HandoffStatus, section 2). Its v is 1 and its
// type "status".
type Status struct {
	Hop    HopID
	Offer  digest.Digest // handoff digest of the offer this status answers
	Iss    AgentID
	Aud    AgentID
	Iat    Time
	State  state.State
	Reason reason.Code // optional
	Detail string      // optional; for people only (HC-05)
	Refs   []ref.Ref
	Extra  map[string]any
}

// Terminal reports whether s ends its hop: "completed", "failed",
// "canceled", or "rejected" with a reason other than "stale" or "replay"
// (HC-24, HC-41).
func (s *Status) Terminal() bool {
	switch s.State {
	case state.Rejected:
		return s.Reason != reason.Stale && s.Reason != reason.Replay
	case state.Completed, state.Failed, state.Canceled:
		return true
	}
	return false
}

// decodeStatus decodes a status payload strictly, as decodeOffer does.
func decodeStatus(payload []byte, enc Encoding, lim Limits) (*Status, error) {
	m, err := decodePayload(payload, enc, lim)
	if err != nil {
		return nil, err
	}
	return statusFrom(m, lim.Strict)
}

// statusFrom maps a decoded payload to a Status, checking the CDDL.
func statusFrom(m map[string]any, strict bool) (*Status, error) {
	f := fields{m: m, strict: strict}
	if err := f.version(); err != nil {
		return nil, err
	}
	if err := f.typ("status"); err != nil {
		return nil, err
	}
	var s Status
	var err error
	if s.Hop, err = f.hop(); err != nil {
		return nil, err
	}
	d, err := f.digest("offer", true)
	if err != nil {
		return nil, err
	}
	s.Offer = *d
	if s.Iss, err = f.agent("iss"); err != nil {
		return nil, err
	}
	if s.Aud, err = f.agent("aud"); err != nil {
		return nil, err
	}
	if s.Iat, err = f.time("iat"); err != nil {
		return nil, err
	}
	st, err := f.text("state", true)
	if err != nil {
		return nil, err
	}
	s.State = state.State(st)
	if !s.State.Wire() {
		return nil, malformed("state: %q is not a status state", st)
	}
	r, err := f.text("reason", false)
	if err != nil {
		return nil, err
	}
	s.Reason = reason.Code(r)
	if s.Detail, err = f.text("detail", false); err != nil {
		return nil, err
	}
	if s.Refs, err = f.refs(); err != nil {
		return nil, err
	}
	if s.Extra, err = extraMembers(f, statusMembers); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Status) members() []member {
	ms := []member{{"v", uint64(1)}, {"type", "status"}, {"hop", string(s.Hop)},
		{"offer", digestValue(s.Offer)}, {"iss", string(s.Iss)}, {"aud", string(s.Aud)},
		{"iat", uint64(s.Iat)}, {"state", string(s.State)}}
	if s.Reason != "" {
		ms = append(ms, member{"reason", string(s.Reason)})
	}
	if s.Detail != "" {
		ms = append(ms, member{"detail", s.Detail})
	}
	if len(s.Refs) > 0 {
		ms = append(ms, member{"refs", refsValue(s.Refs)})
	}
	return appendExtra(ms, s.Extra, statusMembers)
}

func (s *Status) encode(enc Encoding) ([]byte, error) { return encodeMembers(s.members(), enc) }

func (s *Status) validate() error {
	p, err := s.encode(CBOR)
	if err != nil {
		return err
	}
	_, err = decodeStatus(p, CBOR, Limits{})
	return err
}

// statusAnswers is the part of HC-55 that relates a verified status to its
// offer.
func statusAnswers(st *Status, offer *Offer, offerDigest digest.Digest) error {
	if !st.Offer.Equal(offerDigest) {
		return reject(reason.Policy, ErrRejected, "status.offer does not name the offer's digest (HC-55)")
	}
	if st.Hop != offer.Hop {
		return reject(reason.Policy, ErrRejected, "status.hop %q is not the offer's hop %q", st.Hop, offer.Hop)
	}
	from, to := offer.Aud, offer.Iss
	if st.State == state.Canceled {
		from, to = offer.Iss, offer.Aud
	}
	if st.Iss != from {
		return reject(reason.Policy, ErrRejected, "a %q status must come from the hop's %s %q, not %q (HC-55)", st.State, party(st.State, true), from, st.Iss)
	}
	if st.Aud != to {
		return reject(reason.Policy, ErrRejected, "a %q status must be addressed to the hop's %s %q, not %q (HC-55)", st.State, party(st.State, false), to, st.Aud)
	}
	return nil
}

func party(s state.State, sender bool) string {
	if (s == state.Canceled) == sender {
		return "delegator"
	}
	return "delegate"
}

// Payload returns s's payload octets in enc, as Offer.Payload does.
func (s *Status) Payload(enc Encoding) ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s.encode(enc)
}

// StatusResult is the outcome of HandleStatus. Like Received, it carries a
// rejection as a value: Err, Reason.
type StatusResult struct {
	// Status is the status once it verified (HC-55), else nil.
	Status *Status
	// State is the hop's state after the status, for the side it concerns.
	State state.State
	// Changed reports that the status set the hop's state.
	Changed bool
	// Conflict reports that the status contradicts the first verified
	// terminal state: it was flagged and ignored (HC-56).
	Conflict bool
	// Notices are the "canceled" statuses this agent signed for the offers
	// it issued from a hop that was just canceled (HC-28): send each to its
	// delegate, so that the cancel walks down the chain.
	Notices []Notice

	rejection *Rejection
}

// LogValue is r for log/slog: the decision, the hop's state, and the
// status's state, iss and hop once it verified, or the reason it was
// refused and why. A status that did not verify is named by its reason
// alone: its members are claims no signature backs.
func (r *StatusResult) LogValue() slog.Value { return slog.GroupValue(r.logAttrs()...) }

func (r *StatusResult) logAttrs() []slog.Attr {
	attrs := []slog.Attr{slog.String("decision", r.decision())}
	if r.State != "" {
		attrs = append(attrs, slog.String("state", string(r.State)))
	}
	if st := r.Status; st != nil {
		attrs = append(attrs, slog.String("status", string(st.State)), slog.String("iss", string(st.Iss)), slog.String("hop", string(st.Hop)))
	}
	if rj := r.rejection; rj != nil {
		attrs = append(attrs, slog.String("reason", string(rj.Reason)), slog.String("detail", rj.Detail))
	}
	return attrs
}

// decision names the outcome in one word, for logs.
func (r *StatusResult) decision() string {
	switch {
	case r.rejection != nil:
		return "refused"
	case r.Conflict:
		return "conflict"
	case r.Changed:
		return "applied"
	}
	return "unchanged"
}

// Err returns why the status was refused (a *Rejection), or nil.
func (r *StatusResult) Err() error {
	if r.rejection == nil {
		return nil
	}
	return r.rejection
}

// Reason returns the reason code of a refusal, or "".
func (r *StatusResult) Reason() reason.Code {
	if r.rejection == nil {
		return ""
	}
	return r.rejection.Reason
}
