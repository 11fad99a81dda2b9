package handoff

import (
	"bytes"
	"encoding/base64"
	"fmt"

	"github.com/agentproto/handoff/internal/cborhead"
	"github.com/go-json-experiment/json/jsontext"
)

// One element of a Handoff object as read from JSON or CBOR (section 2.1),
// and the tests of its octets that tell its signed form (section 3): the
// COSE tag, canonical base64url.

// wireElement is one element as read: text or a byte string, its octets
// (for text, its UTF-8 octets), or neither (kind then names what was there
// instead). The octets are private to the Handoff unless view is set: they
// are then the input's own, until handoffWire.own copies or decodes them.
type wireElement struct {
	octets  []byte
	isText  bool
	isBytes bool
	kind    string
	view    bool
	// b64: text without a period, already decoded from base64url into
	// octets (handoffWire.own), as elementFrom would decode it.
	b64 bool
}

// jsonElement reads one element, checked by jsoncheck, as written: a
// string, or the kind of the value found instead. A string without
// escapes is its own text, and its octets are a view of raw.
func jsonElement(raw []byte) (wireElement, error) {
	if raw[0] != '"' {
		return wireElement{kind: jsonKind(raw[0])}, nil
	}
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 {
		return wireElement{octets: body[:len(body):len(body)], isText: true, view: true}, nil
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return wireElement{}, malformed("JSON string: %v", err)
	}
	return wireElement{octets: b, isText: true}, nil
}

// jsonKind names the kind of a JSON value, from its first octet, as
// typeName names it decoded.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "map"
	case '[':
		return "array"
	case '"':
		return "text"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// cborElement reads one element: a text or byte string, read in place but
// for an indefinite length, or the kind of the item found instead.
func cborElement(raw []byte) (wireElement, error) {
	switch cborhead.Major(raw) {
	case cborhead.Text:
		if !cborhead.ValidText(raw) {
			return wireElement{}, malformed("CBOR: invalid UTF-8 string")
		}
		b, _ := cborhead.String(raw)
		return wireElement{octets: b, isText: true}, nil
	case cborhead.Bytes:
		b, _ := cborhead.String(raw) // an indefinite length: its chunks joined
		return wireElement{octets: b, isBytes: true}, nil
	}
	return wireElement{kind: cborKind(raw)}, nil
}

// cborKind names the kind of a well-formed item from its initial octet, as
// typeName names the decoded value.
func cborKind(raw []byte) string {
	switch raw[0] >> 5 {
	case 0:
		return "unsigned integer"
	case 1:
		return "negative integer"
	case 4:
		return "array"
	case 5:
		return "map"
	case 6:
		return "tag"
	}
	switch raw[0] {
	case 0xf4, 0xf5:
		return "bool"
	case 0xf6, 0xf7:
		return "null"
	case 0xf9, 0xfa, 0xfb:
		return "float"
	}
	return "simple value"
}

// decodeB64uOctets is decodeB64u for text held as octets, so that a COSE
// element in JSON is decoded straight from the input: the same canonical
// base64url without padding, CR and LF refused.
func decodeB64uOctets(t []byte) ([]byte, error) {
	return decodeB64uInto(make([]byte, base64.RawURLEncoding.DecodedLen(len(t))), t)
}

// decodeB64uInto is decodeB64uOctets into dst, of DecodedLen(len(t))
// octets: it returns the decoded prefix of dst.
func decodeB64uInto(dst, t []byte) ([]byte, error) {
	if len(t) == 0 {
		return nil, fmt.Errorf("empty base64url")
	}
	if bytes.IndexByte(t, '\r') >= 0 || bytes.IndexByte(t, '\n') >= 0 {
		return nil, fmt.Errorf("not canonical base64url without padding")
	}
	n, err := base64.RawURLEncoding.Strict().Decode(dst, t)
	if err != nil {
		return nil, fmt.Errorf("not canonical base64url without padding")
	}
	return dst[:n:n], nil
}

// coseTagLen reports whether b starts with the head of tag 18, a
// COSE_Sign1 (HC-17), in any of the lengths RFC 8949 allows (0xd2, or
// 0xd8 0x12, ...), and the length of that head.
func coseTagLen(b []byte) (int, bool) {
	if len(b) == 0 || b[0]>>5 != 6 {
		return 0, false
	}
	v, rest, ok := cborhead.Head(b)
	return len(b) - len(rest), ok && v == 18
}
