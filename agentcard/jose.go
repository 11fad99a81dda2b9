package agentcard

import (
	"crypto"
	"fmt"
	"io"
	"slices"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentproto/handoff/internal/b64u"
	"github.com/agentproto/handoff/internal/ecsig"
)

// typJOSE is the typ Sign writes in the protected header, as section 8.4
// recommends for a card's JWS.
const typJOSE = "JOSE"

// sigObject is one element of a card's "signatures": the JWS JSON
// Serialization of RFC 7515 section 7.2 with the payload detached (section
// 8.4). Other members are ignored (RFC 7515 section 7.2.1: "if not
// understood by implementations encountering them, they MUST be ignored"),
// a "payload" member among them: the payload is always the card's.
type sigObject struct {
	Protected *string        `json:"protected"`
	Signature *string        `json:"signature"`
	Header    jsontext.Value `json:"header"`
}

// jwsSig is a signature element whose form and headers were checked, as
// far as needed before a key is looked up.
type jwsSig struct {
	alg, kid string
	// element is the signature as go-jose takes it (with an empty payload
	// member), parsed by open only when a key is to be tried with it.
	element []byte
	// obj is the element as go-jose parsed it, ready for DetachedVerify.
	obj *jose.JSONWebSignature
}

// open parses the element with go-jose, once: only a signature that some
// key is tried with pays for it (see verifier.check).
func (s *jwsSig) open() error {
	if s.obj != nil {
		return nil
	}
	obj, err := jose.ParseSignedJSON(string(s.element), []jose.SignatureAlgorithm{jose.SignatureAlgorithm(s.alg)})
	if err != nil {
		return malformed("%v", err)
	}
	s.obj = obj
	return nil
}

// parseSig checks one element of "signatures" and its headers:
//
//   - a JSON object with "protected" and "signature", strings in canonical
//     base64url without padding (RFC 7515 sections 2 and 7.2.1), and, if
//     present, "header", a JSON object;
//   - the protected header is a JSON object read as strictly as the card,
//     with "alg", "kid" and "typ", each a string (section 8.4: the
//     protected header MUST include them; typ SHOULD be "JOSE", which is
//     not checked), in the protected header itself;
//   - the two headers share no name (RFC 7515 section 7.2.1);
//   - "crit" is only in the protected header (RFC 7515 section 4.1.11), a
//     non-empty array of names present in that header, each one this
//     verifier understands: "b64" (RFC 7797) and nothing else;
//   - "b64", if present, is a boolean in the protected header and crit
//     names it (RFC 7797 sections 3 and 6).
//
// Then go-jose parses the element with the header's alg as the one
// algorithm allowed. An error wraps handoff.ErrMalformed; alg and kid are
// returned as soon as they are read, for the report.
func parseSig(raw jsontext.Value) (s jwsSig, err error) {
	var o sigObject
	if raw.Kind() != '{' {
		return s, malformed("a JSON %s, not a JWS object", kindName(raw.Kind()))
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return s, malformed("%v", err)
	}
	switch {
	case o.Protected == nil:
		return s, malformed(`no "protected" (section 8.4: required)`)
	case o.Signature == nil:
		return s, malformed(`no "signature" (section 8.4: required)`)
	}
	hb, err := b64u.Decode(*o.Protected)
	if err != nil {
		return s, malformed("protected: %v", err)
	}
	if _, err := b64u.Decode(*o.Signature); err != nil {
		return s, malformed("signature: %v", err)
	}
	prot, err := headerObject(hb, "protected header")
	if err != nil {
		return s, err
	}
	if s.alg, err = headerString(prot, "alg"); err != nil {
		return s, err
	}
	if s.kid, err = headerString(prot, "kid"); err != nil {
		return s, err
	}
	if _, err = headerString(prot, "typ"); err != nil {
		return s, err
	}
	if len(o.Header) > 0 {
		unprot, err := headerObject(o.Header, "header")
		if err != nil {
			return s, err
		}
		for name := range unprot {
			if _, dup := prot[name]; dup {
				return s, malformed("%q is in both the protected header and header (RFC 7515 section 7.2.1: disjoint)", name)
			}
			if name == "crit" || name == "b64" {
				return s, malformed("%q must be integrity protected, not in header (RFC 7515 section 4.1.11, RFC 7797 section 3)", name)
			}
		}
	}
	if err := checkCrit(prot); err != nil {
		return s, err
	}
	if !ecsig.Supported(s.alg) {
		return s, nil // no key can be pinned to it: the caller says so
	}
	// go-jose takes the element with its payload member; the payload it
	// verifies is the one DetachedVerify is given.
	el := struct {
		Protected string         `json:"protected"`
		Header    jsontext.Value `json:"header,omitzero"`
		Payload   string         `json:"payload"`
		Signature string         `json:"signature"`
	}{*o.Protected, o.Header, "", *o.Signature}
	if s.element, err = json.Marshal(el); err != nil {
		return s, malformed("%v", err)
	}
	return s, nil
}

// headerObject reads a JOSE header as a JSON object, as strictly as the
// card (RFC 7515 section 4: names unique).
func headerObject(b []byte, what string) (map[string]jsontext.Value, error) {
	var h map[string]jsontext.Value
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, malformed("%s: %v", what, err)
	}
	if h == nil {
		return nil, malformed("%s: null, not a JSON object", what)
	}
	return h, nil
}

// headerString returns the string value of a member of the protected
// header that section 8.4 requires there.
func headerString(h map[string]jsontext.Value, name string) (string, error) {
	v, ok := h[name]
	if !ok {
		return "", malformed("protected header: no %q (section 8.4: alg, kid and typ are required)", name)
	}
	var s string
	if v.Kind() != '"' || json.Unmarshal(v, &s) != nil {
		return "", malformed("protected header: %q is a JSON %s, not a string", name, kindName(v.Kind()))
	}
	return s, nil
}

// checkCrit applies RFC 7515 section 4.1.11 and RFC 7797 section 6 to the
// protected header: the extensions a verifier must understand are named
// in crit, and this one understands b64 only.
func checkCrit(prot map[string]jsontext.Value) error {
	var crit []string
	if v, ok := prot["crit"]; ok {
		if err := json.Unmarshal(v, &crit); err != nil || v.Kind() != '[' || len(crit) == 0 {
			return malformed("protected header: crit is not a non-empty array of names (RFC 7515 section 4.1.11)")
		}
		for _, name := range crit {
			if name != "b64" {
				return malformed("protected header: crit names %q, an extension this verifier does not understand (RFC 7515 section 4.1.11)", name)
			}
			if _, ok := prot[name]; !ok {
				return malformed("protected header: crit names %q, which the header lacks (RFC 7515 section 4.1.11)", name)
			}
		}
	}
	if v, ok := prot["b64"]; ok {
		if v.Kind() != 't' && v.Kind() != 'f' {
			return malformed("protected header: b64 is a JSON %s, not a boolean (RFC 7797 section 3)", kindName(v.Kind()))
		}
		if !slices.Contains(crit, "b64") {
			return malformed(`protected header: b64 without "b64" in crit (RFC 7797 section 6)`)
		}
	}
	return nil
}

// signDetached signs payload with key under alg as a JWS whose protected
// header is {"alg", "jku" (when given), "kid", "typ": "JOSE"}, and returns
// the protected header and the signature as base64url text: the members
// of a card's signature element. go-jose builds the JWS; the signature is
// ecsig's, low-S for ECDSA, as every signature of the module.
func signDetached(payload []byte, key crypto.Signer, alg, kid, jku string, rand io.Reader) (protected, signature string, err error) {
	opts := (&jose.SignerOptions{}).WithType(typJOSE)
	if jku != "" {
		opts = opts.WithHeader("jku", jku)
	}
	signer, err := jose.NewSigner(jose.SigningKey{
		Algorithm: jose.SignatureAlgorithm(alg),
		Key:       &opaqueKey{key: key, alg: alg, kid: kid, rand: rand},
	}, opts)
	if err != nil {
		return "", "", err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return "", "", err
	}
	compact, err := obj.DetachedCompactSerialize()
	if err != nil {
		return "", "", err
	}
	protected, signature, _ = strings.Cut(compact, "..")
	return protected, signature, nil
}

// opaqueKey lets go-jose build and check the JWS while ecsig makes and
// checks the signature: the function the jws and cose packages use, run
// against the Wycheproof vectors.
type opaqueKey struct {
	key  crypto.Signer
	pub  crypto.PublicKey
	alg  string
	kid  string
	rand io.Reader
}

var (
	_ jose.OpaqueSigner   = (*opaqueKey)(nil)
	_ jose.OpaqueVerifier = (*opaqueKey)(nil)
)

func (k *opaqueKey) Public() *jose.JSONWebKey {
	return &jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: k.alg}
}

func (k *opaqueKey) Algs() []jose.SignatureAlgorithm {
	return []jose.SignatureAlgorithm{jose.SignatureAlgorithm(k.alg)}
}

func (k *opaqueKey) SignPayload(payload []byte, _ jose.SignatureAlgorithm) ([]byte, error) {
	return ecsig.Sign(k.rand, k.key, k.alg, payload)
}

func (k *opaqueKey) VerifyPayload(payload, signature []byte, alg jose.SignatureAlgorithm) error {
	if string(alg) != k.alg {
		return fmt.Errorf("agentcard: a key pinned to %s asked to verify %s", k.alg, alg) // HC-22
	}
	return ecsig.Verify(k.pub, k.alg, payload, signature)
}
