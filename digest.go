package handoff

import (
	"fmt"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/internal/b64u"
)

// Section 3.3 of the draft: Digests as members of offers and statuses.
// The Digest value itself is package digest's.

// newDigest validates the wire members of a Digest (HC-06, HC-07). Any
// text is an alg, the empty text included: the CDDL's alg is
// "sha-256" / text, and the draft makes an alg the receiver does not
// implement a failed check for prev and grant and an unverifiable
// reference (HC-08), never a malformed offer. "" is such an alg.
func newDigest(alg, val string) (digest.Digest, error) {
	v, err := b64u.DigestVal(alg, val)
	if err != nil {
		return digest.Digest{}, malformed("%v", err)
	}
	return digest.Digest{Alg: alg, Val: v}, nil
}

// digestFrom reads a decoded Digest map (HC-06: closed, alg and val only).
func digestFrom(v any, path string) (digest.Digest, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return digest.Digest{}, malformed("%s: Digest must be a map, got %s", path, typeName(v))
	}
	for k := range m { // HC-06: Digest is closed
		if k != "alg" && k != "val" {
			return digest.Digest{}, malformed("%s: Digest is closed, unexpected member %q", path, k)
		}
	}
	var text [2]string
	for i, name := range [...]string{"alg", "val"} {
		v, ok := m[name]
		if !ok {
			return digest.Digest{}, malformed("%s.%s: required member missing", path, name)
		}
		if text[i], ok = v.(string); !ok {
			return digest.Digest{}, malformed("%s.%s: want text, got %s", path, name, typeName(v))
		}
	}
	d, err := newDigest(text[0], text[1])
	if err != nil {
		return digest.Digest{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}
