package jws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// registered lists the header parameter names whose case variants are
// refused: a member "ALG" or "Kid" beside (or instead of) "alg" or "kid" is a
// classic way to make two parsers read two different headers.
var registered = []string{
	"alg", "kid", "typ", "cty", "crit", "b64",
	"jwk", "jku", "x5c", "x5u", "x5t", "x5t#S256",
}

// embeddedKey lists the header parameters that carry or point to a key.
var embeddedKey = []string{"jwk", "jku", "x5c", "x5u", "x5t", "x5t#S256"}

// protected is a protected header as parsed by parseHeader.
type protected struct {
	members map[string]json.RawMessage
	alg     string
	kid     string
	typ     string
}

func (p *protected) has(name string) bool {
	_, ok := p.members[name]
	return ok
}

// parseHeader parses the decoded protected header strictly: a single JSON
// object in valid UTF-8, no duplicate member names at any depth, no case
// variant of a registered name, string values for alg, kid and typ. It does
// not judge the values; see check.
func parseHeader(b []byte) (*protected, error) {
	if !utf8.Valid(b) {
		return nil, malformed("protected header is not valid UTF-8")
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
	if err := walkObject(dec, true); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("protected header: data after the JSON object")
	}

	p := &protected{}
	if err := json.Unmarshal(b, &p.members); err != nil {
		return nil, malformed("protected header: %v", err)
	}
	for name, dst := range map[string]*string{"alg": &p.alg, "kid": &p.kid, "typ": &p.typ} {
		raw, ok := p.members[name]
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
	return p, nil
}

// walkObject reads the members of an object whose '{' has been read, up to
// and including its '}', refusing duplicate names (and, at the top level,
// case variants of registered names).
func walkObject(dec *json.Decoder, top bool) error {
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
		if top {
			for _, r := range registered {
				if name != r && strings.EqualFold(name, r) {
					return malformed("protected header: member %q differs from %q only in case", name, r)
				}
			}
		}
		if err := walkValue(dec); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return malformed("protected header: %v", err)
	}
	return nil
}

func walkValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return malformed("protected header: %v", err)
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, false)
	case json.Delim('['):
		for dec.More() {
			if err := walkValue(dec); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return malformed("protected header: %v", err)
		}
	}
	return nil
}

// check applies the draft's rules to a parsed header, in the order the
// package documentation gives (HC-14, HC-15, HC-21, HC-60).
func (p *protected) check() error {
	switch {
	case !p.has("typ"):
		return fmt.Errorf("%w: typ is missing, want %q", ErrType, Type)
	case p.typ != Type:
		return fmt.Errorf("%w: typ %q, want %q", ErrType, p.typ, Type)
	case p.has("crit"):
		return fmt.Errorf("%w: crit is not allowed in a signed handoff", ErrCrit)
	case p.has("b64"):
		return fmt.Errorf("%w: b64 (RFC 7797) is not allowed in a signed handoff", ErrCrit)
	}
	for _, name := range embeddedKey {
		if p.has(name) {
			return fmt.Errorf("%w: %s in the protected header", ErrEmbeddedKey, name)
		}
	}
	switch {
	case !p.has("alg"):
		return fmt.Errorf("%w: alg is missing", ErrAlg)
	case !supported(p.alg):
		return fmt.Errorf("%w: alg %q is not an accepted asymmetric algorithm", ErrAlg, p.alg)
	case p.kid == "":
		return malformed("kid is missing or empty")
	}
	return nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
