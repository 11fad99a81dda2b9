package jws

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The protected-header parser as it was before it moved to jsontext:
// encoding/json's token stream walked for duplicate names, then the
// members unmarshalled. FuzzParseHeader holds the two to one answer.

func parseHeaderReference(b []byte, strict bool) (*protected, error) {
	if !utf8.Valid(b) {
		return nil, malformed("protected header is not valid UTF-8")
	}
	if loneSurrogate(b) {
		return nil, malformed("protected header has an escaped lone surrogate (RFC 7493 section 2.1)")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed("protected header: %v", err)
	}
	if tok != json.Delim('{') {
		return nil, malformed("protected header is not a JSON object")
	}
	if err := walkObjectReference(dec, strict); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("protected header: data after the JSON object")
	}

	var members map[string]json.RawMessage
	p := &protected{}
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, malformed("protected header: %v", err)
	}
	for name, dst := range map[string]*string{"alg": &p.alg, "kid": &p.kid, "typ": &p.typ} {
		raw, ok := members[name]
		if !ok {
			continue
		}
		if len(raw) == 0 || raw[0] != '"' {
			return nil, malformed("protected header: %s is not a string", name)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return nil, malformed("protected header: %s: %v", name, err)
		}
	}
	for name := range members {
		if i := slices.Index(registered, name); i >= 0 {
			p.members |= 1 << i
		}
	}
	return p, nil
}

// walkObject reads the members of an object whose '{' has been read, up to
// and including its '}', refusing duplicate names. With caseVariants, it
// refuses a name that differs from a registered one only in case.
func walkObjectReference(dec *json.Decoder, caseVariants bool) error {
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed("protected header: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return malformed("protected header: member name is not a string")
		}
		if seen[name] {
			return malformed("protected header: duplicate member %q", name)
		}
		seen[name] = true
		if caseVariants {
			for _, r := range registered {
				if name != r && strings.EqualFold(name, r) {
					return malformed("protected header: member %q differs from %q only in case (strict profile)", name, r)
				}
			}
		}
		if err := walkValueReference(dec); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return malformed("protected header: %v", err)
	}
	return nil
}

func walkValueReference(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return malformed("protected header: %v", err)
	}
	switch tok {
	case json.Delim('{'):
		return walkObjectReference(dec, false)
	case json.Delim('['):
		for dec.More() {
			if err := walkValueReference(dec); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return malformed("protected header: %v", err)
		}
	}
	return nil
}

// parseHeader accepts and refuses exactly what the reference parser does,
// and reads the same alg, kid, typ and member names, in both profiles.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{
		`{"alg":"ES256","kid":"k","typ":"agent-handoff+jwt"}`,
		`{"alg":"ES256","alg":"ES256"}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"b":1,"b":2}]}`, `{"a":"x","\u0061":"y"}`,
		`{"alg":1}`, `{"kid":null,"typ":"x"}`, `{"typ":["x"]}`, `{"ALG":"x","alg":"ES256"}`, `{"Kid":"k"}`,
		`{"alg":"\ud800"}`, `{"alg":"\ud83d\ude00"}`, `{"alg":"\u00e9"}`, "{\"alg\":\"\xff\"}", `{}`, `[]`, `"x"`, ``,
		`{"alg":"ES256"} `, `{"alg":"ES256"}x`, `{"alg":"ES256"}{}`, `{"a":1e999999,"b":-0.0e-5}`, `{"a":01}`,
		`{"a":"\x01"}`, `{"a":tru}`, `{"x5t#S256":"a","X5T#s256":"b"}`, `{"a":{"b":{"c":{"d":[1,2,{"e":{}}]}}}}`,
		` {"alg" : "ES256" , "kid":"k" } `, `{"alg":"ES256",}`, `{,"alg":"ES256"}`, `{"alg":"ES256""kid":"k"}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, strict bool) {
		want, wantErr := parseHeaderReference(b, strict)
		got, err := parseHeader(b, strict)
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("%q strict=%v: reference error %v, parseHeader error %v", b, strict, wantErr, err)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%q: error %v is not ErrMalformed", b, err)
			}
			return
		}
		if got.alg != want.alg || got.kid != want.kid || got.typ != want.typ || got.members != want.members {
			t.Fatalf("%q: parseHeader %+v, reference %+v", b, got, want)
		}
	})
}

// loneSurrogate reports whether the JSON text b, already known to be valid
// UTF-8, has a \u escape of a surrogate that is not part of a high-low pair.
// encoding/json would decode it to U+FFFD, so that two distinct names could
// compare equal. b need not be valid JSON: only string contents are looked
// at, and a malformed escape is left for the JSON decoder to refuse.
func loneSurrogate(b []byte) bool {
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(b) && b[i+1] != 'u' {
				i++ // a two-character escape
				continue
			}
			r, ok := hex4(b, i+2)
			if !ok {
				continue
			}
			switch {
			case 0xDC00 <= r && r <= 0xDFFF:
				return true // low surrogate without a high one before it
			case 0xD800 <= r && r <= 0xDBFF:
				if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
					return true
				}
				lo, ok := hex4(b, i+8)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return true
				}
				i += 11 // both escapes
			default:
				i += 5
			}
		}
	}
	return false
}

// hex4 reads four hexadecimal digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
