package jws

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentproto/handoff/internal/jsoncheck"
)

// registered lists the header parameter names whose case variants the
// strict profile refuses: a member "ALG" or "Kid" beside (or instead of)
// "alg" or "kid" is a classic way to make two parsers read two different
// headers. By default such a member is an unknown one, and ignored (RFC 7515
// section 4: names are case-sensitive, and parameters not understood MUST be
// ignored).
var registered = []string{
	"alg", "kid", "typ", "cty", "crit", "b64",
	"jwk", "jku", "x5c", "x5u", "x5t", "x5t#S256",
}

// embeddedKey lists the header parameters that carry or point to a key. By
// default they are ignored; the strict profile refuses them.
var embeddedKey = []string{"jwk", "jku", "x5c", "x5u", "x5t", "x5t#S256"}

// protected is a protected header as parsed by parseHeader.
type protected struct {
	members uint16 // the registered names present, one bit per index in registered
	alg     string
	kid     string
	typ     string
}

// has reports whether the header has the member name, one of registered.
func (p *protected) has(name string) bool {
	i := slices.Index(registered, name)
	return i >= 0 && p.members&(1<<i) != 0
}

// parseHeader parses the decoded protected header: a single JSON object in
// valid UTF-8 with no escaped lone surrogate (RFC 7493 section 2.1), no
// duplicate member names at any depth (RFC 7515 section 4, RFC 7493 section
// 2.3), and string values for alg, kid and typ (RFC 7515 sections 4.1.1,
// 4.1.4, 4.1.9). In the strict profile, a case variant of a registered name
// is refused too. It does not judge the values; see check. Only the
// registered names present are recorded: no other name is ever looked at.
func parseHeader(b []byte, strict bool) (*protected, error) {
	// jsoncheck checks the header as jsontext reads it and refuses
	// duplicate names at any depth, compared unescaped ("The Header
	// Parameter names within the JOSE Header MUST be unique; JWS parsers
	// MUST either reject JWSs with duplicate Header Parameter names or use
	// a JSON parser that returns only the lexically last duplicate member
	// name", RFC 7515 section 4; RFC 7493 section 2.3), at a cost bounded
	// by the header's size whatever its shape, and in the same pass hands
	// over the members as written. A value the checks do not read is never
	// built. jsontext refusing duplicates itself keeps a copy of every name
	// and past a few dozen a map, per object, and skipping token by token
	// keeps a state per level: a member nested 5000 deep or 1500 members
	// cost eleven times the header or more.
	p := &protected{}
	var nonString []string // alg, kid or typ with a value that is no string
	var buf [32]byte       // a name or value unescaped, when it is short
	err := jsoncheck.Walk(b, jsoncheck.Fields{Member: func(raw, v []byte) error {
		name, err := unquote(buf[:0], raw)
		if err != nil {
			return err
		}
		reg := -1
		for i, r := range registered {
			switch {
			case string(name) == r:
				reg = i
			case strict && bytes.EqualFold(name, registeredOctets[i]):
				return malformed("protected header: member %q differs from %q only in case (strict profile)", string(name), r)
			}
		}
		if reg < 0 {
			return nil // ignored (RFC 7515 section 4: "MUST be ignored")
		}
		p.members |= 1 << reg
		var dst *string
		switch registered[reg] {
		case "alg":
			dst = &p.alg
		case "kid":
			dst = &p.kid
		case "typ":
			dst = &p.typ
		default:
			return nil
		}
		if v[0] != '"' {
			nonString = append(nonString, registered[reg])
			return nil
		}
		s, err := unquote(buf[:0], v)
		if err != nil {
			return err
		}
		*dst = known(s)
		return nil
	}})
	switch {
	case errors.Is(err, ErrMalformed):
		return nil, err
	case err != nil:
		return nil, malformed("protected header: %v", err)
	case b[len(b)-len(bytes.TrimLeft(b, " \t\r\n"))] != '{':
		return nil, malformed("protected header is not a JSON object")
	case len(nonString) > 0:
		return nil, malformed("protected header: %s is not a string", nonString[0])
	}
	return p, nil
}

// registeredOctets is registered as octets, for the strict profile's
// case-insensitive comparison.
var registeredOctets = func() [][]byte {
	out := make([][]byte, len(registered))
	for i, r := range registered {
		out[i] = []byte(r)
	}
	return out
}()

// unquote returns the content of the JSON string raw, which jsoncheck
// checked: the octets between its quotes when it has no escape, else the
// string unescaped by jsontext into buf.
func unquote(buf, raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], nil
	}
	return jsontext.AppendUnquote(buf, raw)
}

// known returns s as a string: the constant itself when s is one of the
// values a signed handoff's header carries, so that reading it allocates
// nothing, and a copy otherwise.
func known(s []byte) string {
	for _, k := range [...]string{ES256, ES384, EdDSA, Type} {
		if string(s) == k {
			return k
		}
	}
	return string(s)
}

// typeMatches reports whether typ names the media type of a signed handoff
// in JWS form as RFC 7515 section 4.1.9 compares media types: "application/"
// may be omitted when no other '/' appears, and type and subtype names are
// case-insensitive (RFC 2045, RFC 6838 section 4.2). Only ASCII letters fold,
// as media type names are ASCII: no other character stands for one. Media
// type parameters are not part of the type the draft names, so
// "agent-handoff+jwt; v=1" does not match.
func typeMatches(typ string) bool {
	t := asciiLower(typ)
	if !strings.Contains(t, "/") {
		t = "application/" + t
	}
	return t == "application/"+Type
}

// asciiLower maps A-Z to a-z and leaves every other octet as it is.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// check applies the draft's rules to a parsed header, in the order the
// package documentation gives (HC-14, HC-15, HC-21, HC-60).
func (p *protected) check(strict bool) error {
	switch {
	case !p.has("typ"):
		return fmt.Errorf("%w: missing, want %q", ErrType, Type)
	case strict && p.typ != Type:
		return fmt.Errorf("%w: %q, want exactly %q (strict profile)", ErrType, p.typ, Type)
	case !typeMatches(p.typ):
		return fmt.Errorf("%w: %q, want %q", ErrType, p.typ, Type)
	case p.has("crit"):
		return fmt.Errorf("%w: crit is not allowed in a signed handoff", ErrCrit)
	case p.has("b64"):
		return fmt.Errorf("%w: b64 (RFC 7797) without crit, which RFC 7797 section 6 requires with it", ErrCrit)
	}
	if strict {
		for _, name := range embeddedKey {
			if p.has(name) {
				return fmt.Errorf("%w: %s in the protected header (strict profile)", ErrEmbeddedKey, name)
			}
		}
	}
	switch {
	case !p.has("alg"):
		return fmt.Errorf("%w: alg is missing", ErrAlg)
	case !supported(p.alg):
		return fmt.Errorf("%w: alg %q is not an accepted asymmetric algorithm", ErrAlg, p.alg)
	case !p.has("kid"):
		return malformed("kid is missing (HC-14)")
	case strict && p.kid == "":
		return malformed("kid is empty (strict profile)")
	}
	return nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
