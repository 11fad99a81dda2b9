package agentcard

import (
	"crypto"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
)

// ErrUnsigned: the card has no "signatures" member, or an empty one.
var ErrUnsigned = errors.New("agentcard: card has no signature")

// SignOptions adjusts Sign. The zero value names the key by its RFC 7638
// thumbprint, as a handoff.Signer does (HC-16), and uses crypto/rand.
type SignOptions struct {
	// KID is the kid of the protected header; empty means the key's RFC
	// 7638 thumbprint. A verifier uses it only to choose which of the
	// agent's trusted keys to try first.
	KID string
	// JKU, when set, is written as the protected header's jku: the URL of
	// the JWK Set that holds the key (keyset.Publisher serves one), for
	// verifiers that fetch keys by it. Verify never fetches it.
	JKU string
	// Rand is passed to the key's Sign; nil means crypto/rand.
	Rand io.Reader
	// DropEmpty removes from the card, before signing it, every member and
	// array element whose value is null, "", [] or {}, recursively (the
	// normalization of VerifyOptions.AllowDroppedEmpty), so that verifiers
	// that drop them, such as @a2a-js/sdk's, rebuild the payload signed.
	// In the A2A 1.0 schema such a member means what its absence means,
	// except inside a free-form value (an extension's params, metadata),
	// where it is removed too. A card whose earlier signatures cover
	// members it would remove is refused.
	DropEmpty bool
}

// Sign signs an AgentCard (section 8.4 of A2A 1.0) with key and returns the
// card with the new signature last in its "signatures" member, after those
// it had. The card is JSON octets, read as strictly as Verify reads them;
// the signature covers the RFC 8785 (JCS) form of the card without
// "signatures" (section 8.4.1). The card returned is itself in JCS form, so
// that its served octets are the octets verifiers rebuild.
//
// key is the agent's handoff key: a P-256, P-384 or Ed25519 private key,
// whose alg (ES256, ES384, EdDSA) follows from it (HC-15), so that a peer
// whose handoff.Trust binds the key to the agent verifies the card with
// that same Trust. ECDSA signatures are low-S. A card larger than
// DefaultMaxSize once signed is refused: Verify would refuse it.
func Sign(card []byte, key crypto.Signer, opts SignOptions) ([]byte, error) {
	if key == nil {
		return nil, fail(handoff.ErrArgument, "nil signing key")
	}
	// The handoff Signer checks the key and names its alg and thumbprint
	// exactly as the agent's offers and statuses name them.
	hs, err := handoff.NewSigner(key, handoff.JWS, opts.Rand)
	if err != nil {
		return nil, fail(handoff.ErrArgument, "signing key: %v", unprefixed{err})
	}
	tk := hs.Key()
	kid := opts.KID
	if kid == "" {
		kid = tk.KID
	}
	rnd := opts.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	c, err := parseCard(card, DefaultMaxSize)
	if err != nil {
		return nil, err
	}
	p, err := c.payload()
	if err != nil {
		return nil, err
	}
	if opts.DropEmpty {
		if p, err = c.dropEmpty(p); err != nil {
			return nil, err
		}
	}
	prot, sig, err := signDetached(p, key, tk.Alg, kid, opts.JKU, rnd)
	if err != nil {
		return nil, fmt.Errorf("agentcard: sign: %w", err)
	}
	el, err := json.Marshal(struct {
		Protected string `json:"protected"`
		Signature string `json:"signature"`
	}{prot, sig})
	if err != nil {
		return nil, fmt.Errorf("agentcard: %w", err)
	}
	if c.members[signaturesMember], err = json.Marshal(append(c.sigs, el)); err != nil {
		return nil, fmt.Errorf("agentcard: %w", err)
	}
	b, err := json.Marshal(c.members)
	if err != nil {
		return nil, fmt.Errorf("agentcard: %w", err)
	}
	out, err := canonical(b)
	if err != nil {
		return nil, err
	}
	if len(out) > DefaultMaxSize {
		return nil, fail(handoff.ErrTooLarge, "signed card: %d octets, limit %d", len(out), DefaultMaxSize)
	}
	return out, nil
}

// VerifyOptions adjusts Verify. The zero value verifies each signature
// over the JCS form of the card as served, without its "signatures"
// member, within DefaultMaxSize.
type VerifyOptions struct {
	// MaxSize is the size limit in octets; <= 0 means DefaultMaxSize.
	MaxSize int
	// AllowDroppedEmpty also accepts a signature over the card with every
	// member and array element whose value is null, "", [] or {} removed,
	// recursively: how @a2a-js/sdk 1.3.0 canonicalizes a card before JCS,
	// its reading of section 8.4.1's rule on default values. It loosens
	// the check: members with such values are then not covered by the
	// signature, and one may be added to or removed from the card without
	// the signature failing. See the package documentation, "Two readings".
	AllowDroppedEmpty bool
}

// Signature is what Verify found of one element of a card's "signatures".
type Signature struct {
	// Index is the element's position in "signatures".
	Index int
	// Alg and KID are the protected header's alg and kid, as sent; empty
	// when the element was too malformed to read them.
	Alg, KID string
	// Key is the trusted key that verified the signature; zero when Err
	// is set.
	Key handoff.TrustedKey
	// DroppedEmpty reports that the signature verified over the card with
	// its empty members dropped (VerifyOptions.AllowDroppedEmpty), and not
	// over the card as served.
	DroppedEmpty bool
	// Err is why the signature did not verify, nil when it did. It wraps
	// handoff.ErrMalformed (the element or its headers), handoff.
	// ErrUntrustedKey (no key the Trust binds to the agent, pinned to the
	// element's alg, could have made it: another signer's signature) or
	// handoff.ErrSignature (a key of the agent's that the kid names, or an
	// element without kid, does not verify: the card was altered after it
	// was signed, or the signature is forged).
	Err error
}

// Verified is a card at least one of whose signatures verified with a key
// the Trust binds to the agent. Only Verify makes one.
type Verified struct {
	agent   handoff.AgentID
	payload []byte
	sigs    []Signature
}

// Agent returns the AgentID the card was verified for: the one the caller
// passed to Verify.
func (v *Verified) Agent() handoff.AgentID { return v.agent }

// Payload returns the octets the signatures were verified over: the JCS
// form of the card without "signatures". For a signature whose
// DroppedEmpty is set, the octets were those with the empty members
// dropped.
func (v *Verified) Payload() []byte { return slices.Clone(v.payload) }

// Signatures returns what Verify found of each element of "signatures",
// in order: those with a nil Err verified.
func (v *Verified) Signatures() []Signature { return slices.Clone(v.sigs) }

// UnverifiedError is Verify's answer for a card that has signatures, none
// of which verifies for the agent. errors.Is finds in it the failure
// class of each signature (handoff.ErrMalformed, handoff.ErrUntrustedKey,
// handoff.ErrSignature).
type UnverifiedError struct {
	Agent      handoff.AgentID
	Signatures []Signature
}

// maxListed bounds the signatures an UnverifiedError's text lists.
const maxListed = 4

func (e *UnverifiedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agentcard: no signature of the card verifies for %q", e.Agent)
	for i, s := range e.Signatures {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(e.Signatures)-maxListed)
			break
		}
		fmt.Fprintf(&b, "; signature %d: %s", s.Index, strings.TrimPrefix(s.Err.Error(), "agentcard: "))
	}
	return b.String()
}

// Unwrap returns the error of each signature.
func (e *UnverifiedError) Unwrap() []error {
	errs := make([]error, len(e.Signatures))
	for i, s := range e.Signatures {
		errs[i] = s.Err
	}
	return errs
}

// Verify checks the signatures of card, an AgentCard as the JSON octets
// served for agent, against the keys trust binds to agent (section 8.4
// of A2A 1.0, with the trust decision of section 3.4 of the draft: keys
// from the trust configuration only, each pinned to its alg, HC-21,
// HC-22).
//
// agent is the AgentID the caller fetched the card for: a card does not
// name its own agent, and nothing it says (its name, URL, provider, a kid,
// a jku) selects or fetches a key.
//
// The keys are trust.Keys(agent), read once: the Trust's OnUnknownKey
// hook is not called, so a card signed by a key a keyset.Source has not
// fetched yet verifies once the Source has refreshed, not before.
//
// The card verifies when at least one signature does; every signature is
// checked and reported. It returns a nil *Verified and an error otherwise:
// handoff.ErrTooLarge or handoff.ErrMalformed for the card, ErrUnsigned,
// or an *UnverifiedError with each signature's reason. handoff.ErrArgument
// for a nil trust or an empty agent.
func Verify(card []byte, trust *handoff.Trust, agent handoff.AgentID, opts VerifyOptions) (*Verified, error) {
	switch {
	case trust == nil:
		return nil, fail(handoff.ErrArgument, "no trust configuration")
	case agent == "":
		return nil, fail(handoff.ErrArgument, "empty AgentID")
	}
	c, err := parseCard(card, opts.MaxSize)
	if err != nil {
		return nil, err
	}
	if len(c.sigs) == 0 {
		return nil, ErrUnsigned
	}
	p, err := c.payload()
	if err != nil {
		return nil, err
	}
	v := &verifier{agent: agent, payload: p, allowDropped: opts.AllowDroppedEmpty}
	if err := v.bind(trust); err != nil {
		return nil, err
	}
	sigs := make([]Signature, len(c.sigs))
	ok := false
	for i, raw := range c.sigs {
		if len(v.tried) == 2*len(v.keys) && len(v.keys) > 0 {
			// Every key was tried both ways (see check): no signature left
			// can be checked, so none is even parsed.
			sigs[i] = Signature{Index: i, Err: fail(handoff.ErrSignature,
				"not checked: every key the trust configuration binds to %q was tried on an earlier signature of the card", agent)}
			continue
		}
		sigs[i] = v.check(i, raw)
		ok = ok || sigs[i].Err == nil
	}
	if !ok {
		return nil, &UnverifiedError{Agent: agent, Signatures: sigs}
	}
	return &Verified{agent: agent, payload: p, sigs: sigs}, nil
}

// verifier holds what every signature of one card is checked against.
type verifier struct {
	agent   handoff.AgentID
	payload []byte
	keys    []boundKey
	// withheld is why the Trust withholds the agent's keys, if it does.
	withheld     string
	allowDropped bool
	dropped      []byte // the payload with empty members dropped, once made
	droppedErr   error
	// tried holds the thumbprints of the keys a signature of the card was
	// checked with: each key is tried once per card (see check).
	tried map[string]bool
}

// boundKey is a key the Trust binds to the agent, with its thumbprint, by
// which a kid may name it as well as by its KID.
type boundKey struct {
	handoff.TrustedKey
	thumb string
}

func (v *verifier) bind(trust *handoff.Trust) error {
	for _, k := range trust.Keys(v.agent) {
		thumb, err := jws.Thumbprint(k.Public)
		if err != nil {
			return fmt.Errorf("agentcard: trusted key of %q: %w", v.agent, err)
		}
		v.keys = append(v.keys, boundKey{TrustedKey: k, thumb: thumb})
	}
	v.withheld, _ = trust.Withheld(v.agent)
	return nil
}

// check verifies one element of "signatures".
func (v *verifier) check(i int, raw jsontext.Value) Signature {
	r := Signature{Index: i}
	s, err := parseSig(raw)
	r.Alg, r.KID = s.alg, s.kid
	if err != nil {
		r.Err = err
		return r
	}
	keys, named, err := v.candidates(s.alg, s.kid)
	if err != nil {
		r.Err = err
		return r
	}
	// Each trusted key is tried at most twice per card: once for a
	// signature whose kid names it, once for a signature whose kid names
	// no key of the agent. A card's cost is so bounded by the agent's keys,
	// not by how many signatures a stranger appends; a key signs a card
	// once, and the signer's kid names its key (Sign names it by its
	// thumbprint). A signature that could be checked only with keys tried
	// already in its way is not checked. Whoever can append signatures to
	// a card can also remove them: this lets nothing unverified through.
	way := func(k boundKey) string {
		if s.kid != "" && (s.kid == k.KID || s.kid == k.thumb) {
			return "named:" + k.thumb
		}
		return "other:" + k.thumb
	}
	keys = slices.DeleteFunc(keys, func(k boundKey) bool { return v.tried[way(k)] })
	if len(keys) == 0 {
		const why = "each trusted key is tried once for a kid that names it and once for a kid that does not"
		if s.kid != "" && !named {
			r.Err = fail(handoff.ErrUntrustedKey, "kid %q names no key the trust configuration binds to %q, whose key(s) pinned to %s "+
				"were tried on an earlier signature of the card (%s)", s.kid, v.agent, s.alg, why)
			return r
		}
		r.Err = fail(handoff.ErrSignature, "every key of %q that this signature may name (kid %q, %s) was tried in its way on an earlier signature of the card (%s)",
			v.agent, s.kid, s.alg, why)
		return r
	}
	if v.tried == nil {
		v.tried = map[string]bool{}
	}
	for _, k := range keys {
		v.tried[way(k)] = true
	}
	if err := s.open(); err != nil {
		r.Err = err
		return r
	}
	if k, ok := verifyWith(s, v.payload, keys); ok {
		r.Key = k
		return r
	}
	if v.allowDropped {
		if v.dropped == nil && v.droppedErr == nil {
			v.dropped, v.droppedErr = droppedEmpty(v.payload)
		}
		if v.droppedErr != nil {
			r.Err = v.droppedErr
			return r
		}
		if k, ok := verifyWith(s, v.dropped, keys); ok {
			r.Key, r.DroppedEmpty = k, true
			return r
		}
	}
	if s.kid != "" && !named {
		r.Err = fail(handoff.ErrUntrustedKey, "kid %q names no key the trust configuration binds to %q, and none of its %d key(s) pinned to %s "+
			"verifies the signature: the signer is not a key trusted for that agent (HC-21)", s.kid, v.agent, len(keys), s.alg)
		return r
	}
	r.Err = fail(handoff.ErrSignature, "the signature does not verify over the card's RFC 8785 form with the key(s) of %q pinned to %s "+
		"that its kid %q names: the card was altered after it was signed, or the signature is forged", v.agent, s.alg, s.kid)
	return r
}

// candidates returns the agent's keys pinned to alg (HC-22), those kid
// names first, and whether kid names a key of the agent. kid only orders
// keys already bound to the agent (HC-21): a kid that names none leaves
// every key pinned to alg to try.
func (v *verifier) candidates(alg, kid string) (keys []boundKey, named bool, err error) {
	if len(v.keys) == 0 {
		detail := ""
		if v.withheld != "" {
			detail = ": " + v.withheld
		}
		return nil, false, fail(handoff.ErrUntrustedKey, "the trust configuration binds no key to %q%s", v.agent, detail)
	}
	names := func(k boundKey) bool { return kid != "" && (kid == k.KID || kid == k.thumb) }
	var algs []string
	for _, k := range v.keys {
		named = named || names(k)
		if k.Alg == alg && names(k) {
			keys = append(keys, k)
		}
		if !slices.Contains(algs, k.Alg) {
			algs = append(algs, k.Alg)
		}
	}
	for _, k := range v.keys {
		if k.Alg == alg && !names(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		why := ""
		if !ecsig.Supported(alg) {
			why = "; a trust configuration holds ES256, ES384 and EdDSA keys only (HC-15)"
		}
		return nil, named, fail(handoff.ErrUntrustedKey, "the trust configuration pins the key(s) of %q to %s, but the signature is %s (HC-22)%s",
			v.agent, strings.Join(algs, ", "), alg, why)
	}
	return keys, named, nil
}

// verifyWith tries keys in order and returns the first that verifies s
// over payload.
func verifyWith(s jwsSig, payload []byte, keys []boundKey) (handoff.TrustedKey, bool) {
	for _, k := range keys {
		if s.obj.DetachedVerify(payload, &opaqueKey{pub: k.Public, alg: k.Alg}) == nil {
			return k.TrustedKey, true
		}
	}
	return handoff.TrustedKey{}, false
}
