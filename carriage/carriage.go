// Package carriage puts a Handoff or a signed status into a host protocol's
// JSON metadata map and takes it out again, and, by this project's
// convention, the object an offer names by digest and the delegate
// receives with the task (a handoff package, with its salt). The a2a and
// mcp packages name the keys; this package does the work they share.
package carriage

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/ref"
)

// ErrAbsent is returned when the metadata holds nothing under the key.
var ErrAbsent = errors.New("handoff: no handoff element in metadata")

// PutHandoff stores h, as the JSON Handoff object, under key.
func PutHandoff(meta map[string]any, key string, h *handoff.Handoff) error {
	b, err := h.Encode(handoff.JSON)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	meta[key] = v
	return nil
}

// Handoff returns the JSON Handoff object held under key, as octets to give
// to Agent.Receive. Element octets are carried as text, so they come back
// exactly.
func Handoff(meta map[string]any, key string) ([]byte, error) {
	v, ok := meta[key]
	if !ok {
		return nil, ErrAbsent
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%w: metadata %q is not a Handoff object", handoff.ErrMalformed, key)
	}
	return json.Marshal(v)
}

// PutStatus stores a signed status under key: a JWS as its compact text, a
// COSE_Sign1 as base64url text (HC-19).
func PutStatus(meta map[string]any, key string, s handoff.Signed) {
	if s.Format == handoff.COSE {
		meta[key] = base64.RawURLEncoding.EncodeToString(s.Octets)
		return
	}
	meta[key] = string(s.Octets)
}

// Status returns the signed status octets held under key.
func Status(meta map[string]any, key string) ([]byte, error) {
	v, ok := meta[key]
	if !ok {
		return nil, ErrAbsent
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%w: metadata %q is not a signed status", handoff.ErrMalformed, key)
	}
	// A COSE status travels as base64url text, with a tag 18 head of any
	// length (RFC 8949); a JWS is its compact text, which holds periods and
	// so never decodes as base64url.
	if b, err := base64.RawURLEncoding.Strict().DecodeString(s); err == nil {
		if sg, err := handoff.ParseSigned(b, handoff.Limits{MaxElementSize: max(len(b), 1)}); err == nil && sg.Format == handoff.COSE {
			return b, nil
		}
	}
	return []byte(s), nil
}

// PutObject stores obj under key as a JSON object: "octets", the object's
// octets as sent, and "salt", when it has one, each as base64url text
// without padding. Text survives any re-serialization of the map by an
// SDK, so the receiver checks exactly the octets the reference's digest
// covers.
func PutObject(meta map[string]any, key string, obj ref.Object) {
	v := map[string]any{"octets": base64.RawURLEncoding.EncodeToString(obj.Octets)}
	if len(obj.Salt) > 0 {
		v["salt"] = base64.RawURLEncoding.EncodeToString(obj.Salt)
	}
	meta[key] = v
}

// Object returns the object PutObject stored under key: ErrAbsent when
// there is none, and an error wrapping handoff.ErrMalformed when the
// value is not such an object.
func Object(meta map[string]any, key string) (ref.Object, error) {
	v, ok := meta[key]
	if !ok {
		return ref.Object{}, ErrAbsent
	}
	m, ok := v.(map[string]any)
	if !ok {
		return ref.Object{}, fmt.Errorf("%w: metadata %q is not an object with its octets", handoff.ErrMalformed, key)
	}
	var obj ref.Object
	for name, dst := range map[string]*[]byte{"octets": &obj.Octets, "salt": &obj.Salt} {
		t, present := m[name]
		if !present {
			continue
		}
		s, ok := t.(string)
		b, err := base64.RawURLEncoding.Strict().DecodeString(s)
		if !ok || err != nil {
			return ref.Object{}, fmt.Errorf("%w: metadata %q: %q is not base64url text without padding", handoff.ErrMalformed, key, name)
		}
		*dst = b
	}
	if obj.Octets == nil {
		return ref.Object{}, fmt.Errorf("%w: metadata %q has no \"octets\"", handoff.ErrMalformed, key)
	}
	return obj, nil
}
