package handoff

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// decodeJSONItem decodes one JSON value that was kept undecoded (a
// json.RawMessage) into the value model, checked as a payload's members
// are, with the bounds of the default Limits.
func decodeJSONItem(raw []byte) (any, error) {
	d := jsonDecoders.Get().(*jsontext.Decoder)
	defer func() {
		d.Reset(bytes.NewBuffer(nil))
		jsonDecoders.Put(d)
	}()
	d.Reset(bytes.NewBuffer(raw))
	v, err := jsonValue(d, Limits{}.withDefaults(), 1)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, malformed("trailing data after JSON value")
	}
	return v, nil
}

// decodeJSON parses one JSON object strictly (RFC 8259 and RFC 7493): the
// text must be valid UTF-8 and every string valid Unicode, so a lone
// surrogate escape such as "\udc00" is refused instead of read as U+FFFD
// (RFC 7493 section 2.1, RFC 8259 section 8.2); member names are unique
// once unescaped ("a" and "\u0061" are the same name, RFC 7493 section
// 2.3); nesting and members are bounded by lim; nothing may follow the
// object. Names that differ only in case are distinct names here; the
// model decides what to do with them.
//
// The decoder is jsontext, which checks the grammar, UTF-8, surrogates and
// duplicate names in the same single pass that builds the value.
func decodeJSON(data []byte, lim Limits) (map[string]any, error) {
	d := jsonDecoders.Get().(*jsontext.Decoder)
	defer func() {
		d.Reset(bytes.NewBuffer(nil)) // keep no reference to data
		jsonDecoders.Put(d)
	}()
	d.Reset(bytes.NewBuffer(data)) // a bytes.Buffer is parsed in place, not copied
	if k := d.PeekKind(); k != '{' {
		if k == 0 {
			_, err := d.ReadToken()
			return nil, jsonErr(err)
		}
		return nil, malformed("JSON value is not an object")
	}
	v, err := jsonObject(d, lim, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, malformed("trailing data after JSON value")
	}
	return v, nil
}

// jsonDecoders recycles decoders, whose buffers and name sets are the
// larger part of a decode's allocations. A decoder carries nothing from
// one use to the next: Reset clears it before each.
var jsonDecoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewBuffer(nil)) }}

func jsonErr(err error) error {
	if err == io.EOF || err == nil {
		err = io.ErrUnexpectedEOF
	}
	return malformed("JSON: %v", err)
}

func jsonObject(d *jsontext.Decoder, lim Limits, depth int) (map[string]any, error) {
	if depth >= lim.MaxDepth {
		return nil, malformed("nesting deeper than %d", lim.MaxDepth)
	}
	if _, err := d.ReadToken(); err != nil { // '{'
		return nil, jsonErr(err)
	}
	var m map[string]any
	if depth == 0 {
		m = make(map[string]any, 16) // an offer has up to 13 defined members
	} else {
		m = map[string]any{}
	}
	for {
		switch d.PeekKind() {
		case '}':
			if _, err := d.ReadToken(); err != nil {
				return nil, jsonErr(err)
			}
			return m, nil
		case '"':
		default:
			_, err := d.ReadToken()
			return nil, jsonErr(err)
		}
		if len(m) >= lim.MaxMembers {
			return nil, malformed("map of more than %d members", lim.MaxMembers)
		}
		raw, err := d.ReadValue() // the name; jsontext refuses a duplicate
		if err != nil {
			return nil, jsonErr(err)
		}
		k, err := jsonText(raw, true)
		if err != nil {
			return nil, err
		}
		v, err := jsonValue(d, lim, depth+1)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
}

func jsonValue(d *jsontext.Decoder, lim Limits, depth int) (any, error) {
	switch d.PeekKind() {
	case '{':
		return jsonObject(d, lim, depth)
	case '[':
		if depth >= lim.MaxDepth {
			return nil, malformed("nesting deeper than %d", lim.MaxDepth)
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, jsonErr(err)
		}
		a := []any{}
		for d.PeekKind() != ']' {
			if len(a) >= lim.MaxMembers {
				return nil, malformed("array of more than %d elements", lim.MaxMembers)
			}
			v, err := jsonValue(d, lim, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, jsonErr(err)
		}
		return a, nil
	case '"', '0', 't', 'f', 'n':
		raw, err := d.ReadValue()
		if err != nil {
			return nil, jsonErr(err)
		}
		return jsonScalar(raw)
	}
	_, err := d.ReadToken()
	return nil, jsonErr(err)
}

// jsonName returns the content of a valid JSON string as written, quotes
// included: a view of raw when it has no escape, else unescaped into a
// new slice.
func jsonName(raw []byte) ([]byte, error) {
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 {
		return body, nil
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return nil, malformed("JSON string: %v", err)
	}
	return b, nil
}

// jsonScalar decodes a valid JSON string, number, true, false or null as
// written, as jsonValue decodes it.
func jsonScalar(raw []byte) (any, error) {
	switch raw[0] {
	case '"':
		return jsonText(raw, false)
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	return jsonNumber(raw), nil
}

// jsonText returns the text of a JSON string that jsontext has validated.
// A string without escapes is its own text; the draft's member names are
// interned so that decoding them allocates nothing.
func jsonText(raw jsontext.Value, name bool) (string, error) {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		if name {
			if s, ok := internName(body); ok {
				return s, nil
			}
		}
		return string(body), nil
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return "", malformed("JSON string: %v", err)
	}
	return string(b), nil
}

func internName(b []byte) (string, bool) {
	switch string(b) {
	case "v":
		return "v", true
	case "type":
		return "type", true
	case "hop":
		return "hop", true
	case "dialog":
		return "dialog", true
	case "task":
		return "task", true
	case "iss":
		return "iss", true
	case "aud":
		return "aud", true
	case "iat":
		return "iat", true
	case "exp":
		return "exp", true
	case "obo":
		return "obo", true
	case "grant":
		return "grant", true
	case "prev":
		return "prev", true
	case "refs":
		return "refs", true
	case "offer":
		return "offer", true
	case "chain":
		return "chain", true
	case "state":
		return "state", true
	case "reason":
		return "reason", true
	case "detail":
		return "detail", true
	case "alg":
		return "alg", true
	case "val":
		return "val", true
	case "kind":
		return "kind", true
	case "dig":
		return "dig", true
	case "loc":
		return "loc", true
	case "sub":
		return "sub", true
	}
	return "", false
}

// jsonNumber keeps an integer literal that parses exactly as uint64 (0 to
// 2^64-1) or int64 (-2^63 to -1), and every other number as json.Number,
// exactly as written, so that a Time can refuse fractions, exponents and
// -0 and an unknown member keeps them.
func jsonNumber(raw []byte) any {
	integer := true
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			integer = false
			break
		}
	}
	if integer {
		if raw[0] == '-' {
			if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil && i != 0 {
				return i
			}
		} else if u, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
			return u
		}
	}
	return json.Number(raw)
}
