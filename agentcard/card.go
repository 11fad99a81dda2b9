package agentcard

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"

	"github.com/agentproto/handoff"
)

// DefaultMaxSize bounds a card, in octets, when VerifyOptions.MaxSize is
// zero; Sign refuses to make a larger card, which Verify would refuse. A
// card lists its interfaces and skills: real ones are a few KiB.
const DefaultMaxSize = 256 << 10

// signaturesMember is the member a card's signatures are in, which no
// signature covers (section 8.4.1).
const signaturesMember = "signatures"

// card is an AgentCard read strictly: its members but "signatures", as
// sent, and the elements of "signatures".
type card struct {
	members map[string]jsontext.Value
	sigs    []jsontext.Value
}

// parseCard reads b as one JSON object (RFC 8259) under the rules the
// module's JSON follows: valid UTF-8, no lone surrogate escape, no two
// members of one object named alike once unescaped (RFC 7493 sections 2.1
// and 2.3), at any depth. The size is checked first. "signatures" may be
// absent or null (no signature: ProtoJSON writes an empty repeated field
// as either), else it is an array.
func parseCard(b []byte, maxSize int) (*card, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if len(b) > maxSize {
		return nil, fail(handoff.ErrTooLarge, "card: %d octets, limit %d", len(b), maxSize)
	}
	var m map[string]jsontext.Value
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, malformed("card: %v", err)
	}
	if m == nil {
		return nil, malformed("card: null, not a JSON object")
	}
	c := &card{members: m}
	raw, ok := m[signaturesMember]
	delete(m, signaturesMember)
	switch {
	case !ok || raw.Kind() == 'n':
	case raw.Kind() == '[':
		if err := json.Unmarshal(raw, &c.sigs); err != nil {
			return nil, malformed("card: signatures: %v", err)
		}
	default:
		return nil, malformed("card: signatures is a JSON %s, not an array", kindName(raw.Kind()))
	}
	return c, nil
}

// payload returns the octets a signature of the card covers: the RFC 8785
// (JCS) form of the card without its "signatures" member (section 8.4.1).
// A number outside the range of an IEEE 754 double has no JCS form (RFC
// 8785 section 3.2.2.3): such a card can be neither signed nor verified.
func (c *card) payload() ([]byte, error) {
	b, err := json.Marshal(c.members)
	if err != nil {
		return nil, malformed("card: %v", err)
	}
	return canonical(b)
}

// canonical returns the JCS form of JSON text the package has read
// strictly.
func canonical(b []byte) ([]byte, error) {
	out, err := jcs.Transform(b)
	if err != nil {
		return nil, malformed("card has no RFC 8785 form: %v", err)
	}
	return out, nil
}

// dropEmpty removes the empty members of the card whose payload is p, as
// droppedEmpty does, and returns the new payload. A card whose signatures
// cover members it would remove is refused.
func (c *card) dropEmpty(p []byte) ([]byte, error) {
	d, err := droppedEmpty(p)
	if err != nil || bytes.Equal(d, p) {
		return p, err
	}
	if len(c.sigs) > 0 {
		return nil, fail(handoff.ErrArgument, "the card has empty members, which its %d earlier signature(s) cover: dropping them would break them", len(c.sigs))
	}
	c.members = nil
	if err := json.Unmarshal(d, &c.members); err != nil {
		return nil, malformed("card: %v", err)
	}
	return d, nil
}

// droppedEmpty returns the JCS form of the JSON text p (a payload) after
// the normalization @a2a-js/sdk 1.3.0 applies before JCS (its
// canonicalizeAgentCard, its reading of section 8.4.1's default values):
// every object member and array element whose value is null, "", [] or
// {} is removed, innermost first, so that a container left empty goes
// too; a card left with nothing is {}. false and 0 are kept, as the SDK
// keeps them.
func droppedEmpty(p []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(p, &v); err != nil {
		return nil, malformed("card: %v", err)
	}
	v, keep := dropEmpty(v)
	if !keep {
		v = map[string]any{}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, malformed("card: %v", err)
	}
	return canonical(b)
}

// dropEmpty is the SDK's cleanEmpty over the JSON value model: v without
// its empty parts, and whether anything is left of it.
func dropEmpty(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case string:
		return x, x != ""
	case []any:
		out := x[:0]
		for _, e := range x {
			if e, keep := dropEmpty(e); keep {
				out = append(out, e)
			}
		}
		return out, len(out) > 0
	case map[string]any:
		for k, e := range x {
			if e, keep := dropEmpty(e); keep {
				x[k] = e
			} else {
				delete(x, k)
			}
		}
		return x, len(x) > 0
	}
	return v, true
}

// kindName names a JSON kind for a message.
func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "value"
}

func malformed(format string, args ...any) error {
	return fail(handoff.ErrMalformed, format, args...)
}

// fail is an error of failure class class, a sentinel of the root package,
// said after this package's prefix without the root's own.
func fail(class error, format string, args ...any) error {
	return fmt.Errorf("agentcard: %w: %s", unprefixed{class}, fmt.Sprintf(format, args...))
}

// unprefixed is err without the root package's "handoff: ". errors.Is and
// errors.As see err.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), "handoff: ") }
func (u unprefixed) Unwrap() error { return u.err }
