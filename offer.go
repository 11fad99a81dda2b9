package handoff

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"math"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

// Section 2 of the draft: the offer and the members it shares with the
// status. The decoders check the CDDL; unknown members are kept (HC-01).

// AgentID names an agent (HC-02). It is a string, recommended to be a URI,
// that a receiver's trust configuration maps to keys. Two AgentIDs are the
// same agent only when their strings are identical: no case folding, no
// normalisation.
type AgentID string

// HopID names one hop. It matches [A-Za-z0-9_-]{22,64} and carries at least
// 128 random bits (HC-12). It is the nonce of replay detection.
type HopID string

// Valid reports whether h matches the draft's HopId pattern.
func (h HopID) Valid() bool { return len(h) >= 22 && len(h) <= 64 && allB64url(string(h)) }

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
// unsigned integer (HC-12, CDDL "Time = uint"). Every value CBOR's uint can
// carry is accepted, 0 to 2^64-1; in JSON, every integer literal in that
// range (RFC 8259 section 6 leaves the range to the implementation: this
// one states 2^64-1). Arithmetic on Time saturates instead of wrapping.
type Time uint64

// timeMax is the largest Time: 2^64-1, the largest CBOR uint.
const timeMax Time = math.MaxUint64

// maxUnix is the largest Time that Std represents exactly; later times are
// clamped to it (2^62 seconds: beyond any date time.Time computes with
// safely), which no comparison with a real clock can tell apart.
const maxUnix = 1 << 62

// TimeOf returns t as a Time, rounded down to the second. Times before 1970
// give 0.
func TimeOf(t time.Time) Time {
	if s := t.Unix(); s > 0 {
		return Time(s)
	}
	return 0
}

// Std returns t as a time.Time in UTC, clamped to 2^62 seconds.
func (t Time) Std() time.Time { return time.Unix(int64(min(t, maxUnix)), 0).UTC() }

// keepUntil returns the expiry of a record that must be kept at least
// until t, as the stores take it: t, or the zero time ("kept until
// updated") when t is past 2^62 seconds, where Std clamps and time.Time
// arithmetic ends. A record is so kept longer than asked, never shorter:
// none is ever stored already expired, whatever the clock reads.
func keepUntil(t Time) time.Time {
	if t > maxUnix {
		return time.Time{}
	}
	return t.Std()
}

// before reports whether t is earlier than u, exactly, whatever u's date
// (Std clamps t past 2^62 seconds).
func (t Time) before(u time.Time) bool {
	s := u.Unix()
	switch {
	case s < 0:
		return false
	case uint64(t) != uint64(s):
		return uint64(t) < uint64(s)
	}
	return u.Nanosecond() > 0
}

// plus returns t + d seconds, saturating at the largest Time.
func (t Time) plus(d Time) Time {
	if t > math.MaxUint64-d {
		return math.MaxUint64
	}
	return t + d
}

// seconds converts a non-negative duration to whole seconds.
func seconds(d time.Duration) Time { return Time(d / time.Second) }

// Principal names the principal on whose behalf the root of a chain acted
// (obo, section 5.5). It is informational: no access control decision may
// rest on it (HC-57).
type Principal struct {
	Sub string
	Iss string // optional: the issuer in whose namespace Sub is unique
	// Extra holds members this version does not define, kept as decoded.
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
	Obo    *Principal     // optional
	Grant  *digest.Digest // optional: digest of the credential's octets (HC-03)
	Prev   *digest.Digest // optional: handoff digest of the offer passed on
	Refs   []ref.Ref      // optional; when present, at least one
	// Extra holds members this version does not define (HC-01), as decoded.
	Extra map[string]any
}

// not UTF-8: no decoded text equals it

// offerFrom maps a decoded payload to an Offer, checking the CDDL.
func offerFrom(m map[string]any, strict bool) (*Offer, error) {
	f := fields{m: m, strict: strict}
	if err := f.version(); err != nil {
		return nil, err
	}
	if err := f.typ("offer"); err != nil {
		return nil, err
	}
	var o Offer
	var err error
	if o.Hop, err = f.hop(); err != nil {
		return nil, err
	}
	if o.Dialog, err = f.text("dialog", true); err != nil {
		return nil, err
	}
	if o.Task, err = f.text("task", false); err != nil {
		return nil, err
	}
	if o.Iss, err = f.agent("iss"); err != nil {
		return nil, err
	}
	if o.Aud, err = f.agent("aud"); err != nil {
		return nil, err
	}
	if o.Iat, err = f.time("iat"); err != nil {
		return nil, err
	}
	if o.Exp, err = f.time("exp"); err != nil {
		return nil, err
	}
	if v, ok := m["obo"]; ok {
		if o.Obo, err = principalFrom(v, "obo", strict); err != nil {
			return nil, err
		}
	}
	if o.Grant, err = f.digest("grant", false); err != nil {
		return nil, err
	}
	if o.Prev, err = f.digest("prev", false); err != nil {
		return nil, err
	}
	if o.Refs, err = f.refs(); err != nil {
		return nil, err
	}
	if o.Extra, err = extraMembers(f, offerMembers); err != nil {
		return nil, err
	}
	return &o, nil
}

func principalFrom(v any, path string, strict bool) (*Principal, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("%s: Principal must be a map, got %s", path, typeName(v))
	}
	f := fields{m: m, path: path + ".", strict: strict}
	sub, err := f.text("sub", true)
	if err != nil {
		return nil, err
	}
	iss, err := f.text("iss", false)
	if err != nil {
		return nil, err
	}
	extra, err := extraMembers(f, principalMembers)
	if err != nil {
		return nil, err
	}
	return &Principal{Sub: sub, Iss: iss, Extra: extra}, nil
}

// members lists o's members in the draft's order, then extensions sorted.
func (o *Offer) members() []member {
	ms := []member{{"v", uint64(1)}, {"type", "offer"}, {"hop", string(o.Hop)}, {"dialog", o.Dialog}}
	if o.Task != "" {
		ms = append(ms, member{"task", o.Task})
	}
	ms = append(ms, member{"iss", string(o.Iss)}, member{"aud", string(o.Aud)},
		member{"iat", uint64(o.Iat)}, member{"exp", uint64(o.Exp)})
	if o.Obo != nil {
		p := map[string]any{"sub": o.Obo.Sub}
		if o.Obo.Iss != "" {
			p["iss"] = o.Obo.Iss
		}
		for k, v := range o.Obo.Extra {
			if !contains(principalMembers, k) {
				p[k] = v
			}
		}
		ms = append(ms, member{"obo", p})
	}
	if o.Grant != nil {
		ms = append(ms, member{"grant", digestValue(*o.Grant)})
	}
	if o.Prev != nil {
		ms = append(ms, member{"prev", digestValue(*o.Prev)})
	}
	if len(o.Refs) > 0 {
		ms = append(ms, member{"refs", refsValue(o.Refs)})
	}
	return appendExtra(ms, o.Extra, offerMembers)
}

// encode returns o's payload: JSON for a JWS, CBOR for a COSE_Sign1
// (section 3).
func (o *Offer) encode(enc Encoding) ([]byte, error) { return encodeMembers(o.members(), enc) }

// clone returns a deep copy of o: it shares nothing mutable with o, the
// decoded values of unknown members included, so that a caller who
// changes a returned offer changes nothing that a later receive reports.
func (o *Offer) clone() *Offer {
	if o == nil {
		return nil
	}
	c := *o
	c.Obo = o.Obo.clone()
	if o.Grant != nil {
		g := o.Grant.Clone()
		c.Grant = &g
	}
	if o.Prev != nil {
		p := o.Prev.Clone()
		c.Prev = &p
	}
	c.Refs = cloneRefs(o.Refs)
	c.Extra = cloneMembers(o.Extra)
	return &c
}

func (p *Principal) clone() *Principal {
	if p == nil {
		return nil
	}
	c := *p
	c.Extra = cloneMembers(p.Extra)
	return &c
}

func cloneRef(r ref.Ref) ref.Ref {
	r.Dig = r.Dig.Clone()
	r.Proof = cloneValue(r.Proof)
	r.Extra = cloneMembers(r.Extra)
	return r
}

func cloneRefs(refs []ref.Ref) []ref.Ref {
	if refs == nil {
		return nil
	}
	c := make([]ref.Ref, len(refs))
	for i, r := range refs {
		c[i] = cloneRef(r)
	}
	return c
}

func (f fields) agent(name string) (AgentID, error) {
	s, err := f.text(name, true)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", malformed("%s%s: empty AgentId", f.path, name)
	}
	return AgentID(s), nil
}

func (f fields) hop() (HopID, error) {
	s, err := f.text("hop", true)
	if err != nil {
		return "", err
	}
	if !HopID(s).Valid() {
		return "", malformed("%shop: %q does not match [A-Za-z0-9_-]{22,64}", f.path, s)
	}
	return HopID(s), nil
}
