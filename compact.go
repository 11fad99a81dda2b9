package handoff

import (
	"bytes"
	"strings"
)

// jwsCompact tells a JWS Compact Serialization by its form: three
// non-empty runs of base64url characters separated by two periods, the
// JwsCompact rule of the CDDL (text .regexp
// "[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+", matched against the
// whole text). It is the same test as the regular expression
// ^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$, made with one pass
// over the octets: it runs on every element of every chain received, and
// the regular expression cost more than the rest of parsing a seen chain.
// TestJWSCompactForm holds the two to one answer.
var jwsCompact compactForm

type compactForm struct{}

// Match reports whether b has the JwsCompact form.
func (compactForm) Match(b []byte) bool { return bytes.IndexByte(b, '.') > 0 && isCompact(b) }

// MatchString reports whether s has the JwsCompact form. A text without a
// period (a COSE element in base64url) is told apart at the speed of
// IndexByte, before the scan.
func (compactForm) MatchString(s string) bool { return strings.IndexByte(s, '.') > 0 && isCompact(s) }

// b64url marks the 64 characters of base64url.
var b64url = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
		t[c] = true
	}
	return t
}()

func isCompact[T string | []byte](b T) bool {
	dots, run := 0, 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case b64url[c]:
			run++
		case c == '.' && run > 0 && dots < 2:
			dots, run = dots+1, 0
		default:
			return false
		}
	}
	return dots == 2 && run > 0
}

// allB64url reports whether every octet of s is a base64url character: with
// the length bounds of HopID.Valid, the regular expression
// ^[A-Za-z0-9_-]{22,64}$ of a hop identifier, in one pass.
func allB64url(s string) bool {
	for i := 0; i < len(s); i++ {
		if !b64url[s[i]] {
			return false
		}
	}
	return true
}
