package handofftest

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
)

// Attack names a class of hostile input. Each BadInput belongs to one.
type Attack string

// The attack classes of BadInputs, from the draft's checks (section 5.1,
// 5.3) and its security considerations.
const (
	AttackTamperedPayload  Attack = "tampered-payload"        // HC-13: payload changed under a valid signature
	AttackWrongKey         Attack = "wrong-key"               // HC-21: signed by a key bound to no one
	AttackEmbeddedKey      Attack = "embedded-key"            // HC-21: the signer's own key carried in the header
	AttackAlgNone          Attack = "alg-none"                // HC-15: JWS alg "none" (JWS only)
	AttackHMACConfusion    Attack = "hmac-confusion"          // HC-15, HC-22: HMAC keyed with the trusted public key
	AttackWrongAudience    Attack = "wrong-audience"          // check 2
	AttackExpired          Attack = "expired"                 // HC-31
	AttackFutureDated      Attack = "future-dated"            // HC-31
	AttackOverLongLifetime Attack = "over-long-lifetime"      // HC-32
	AttackReplay           Attack = "replay"                  // HC-35, HC-38: the same octets again
	AttackEquivocation     Attack = "equivocation"            // HC-53: one (iss, hop), other content
	AttackHighSTwin        Attack = "high-s-twin"             // HC-53, HC-20: one offer, the other ECDSA form
	AttackWrongDialog      Attack = "wrong-dialog"            // check 5
	AttackBrokenChain      Attack = "broken-chain"            // HC-47: prev names another offer
	AttackReorderedChain   Attack = "reordered-chain"         // HC-47
	AttackTruncatedChain   Attack = "truncated-chain"         // HC-48, HC-36: the start dropped, under a full-chain policy
	AttackCyclicChain      Attack = "cyclic-chain"            // HC-49
	AttackTooDeepChain     Attack = "too-deep-chain"          // HC-50
	AttackForgedBehind     Attack = "forged-behind-untrusted" // HC-46: forged element behind an unverifiable one
	AttackRefMismatch      Attack = "ref-mismatch"            // HC-11, check 7
	AttackUnverifiableRef  Attack = "unverifiable-ref"        // HC-11, check 7
	AttackOversize         Attack = "oversize"                // HC-61
	AttackMalformedJSON    Attack = "malformed-json"          // RFC 8259
	AttackMalformedCBOR    Attack = "malformed-cbor"          // RFC 8949
)

// Attacks lists every attack class, in the order BadInputs returns them.
func Attacks() []Attack {
	return []Attack{AttackTamperedPayload, AttackWrongKey, AttackEmbeddedKey, AttackAlgNone, AttackHMACConfusion,
		AttackWrongAudience, AttackExpired, AttackFutureDated, AttackOverLongLifetime,
		AttackReplay, AttackEquivocation, AttackHighSTwin, AttackWrongDialog,
		AttackBrokenChain, AttackReorderedChain, AttackTruncatedChain, AttackCyclicChain, AttackTooDeepChain,
		AttackForgedBehind, AttackRefMismatch, AttackUnverifiableRef, AttackOversize,
		AttackMalformedJSON, AttackMalformedCBOR}
}

// BadInput is a Handoff object a receiver must refuse, and what the draft
// says the refusal is.
//
// To use one, make a fresh receiver configured with Configure, deliver each
// of Prior to it in order (each is a good offer and is accepted), then
// deliver Data with Host. The outcome must be a refusal with Reason,
// decided by Check, with an error that wraps Class; for a replay, it is a
// retransmission: not accepted, not processed again, Reason empty.
type BadInput struct {
	// Name is "<format>/<attack>" ("<format>-in-<encoding>/<attack>" from
	// a World that Encoded), unique in a BadInputs list.
	Name   string
	Attack Attack
	// Format is the signed form of the offer; Encoding that of the
	// Handoff object Data holds.
	Format   handoff.Format
	Encoding handoff.Encoding

	// Prior are Handoff objects to deliver first, to the same receiver:
	// the first offer of a replay or an equivocation. Each is accepted.
	Prior [][]byte
	// Data is the Handoff object, as a host protocol carries it.
	Data []byte
	// Offer is the signed offer Data carries, for checking the status a
	// service sends in answer (AssertStatus); zero when Data does not
	// parse.
	Offer handoff.Signed
	// Host is what the host protocol says about the message carrying
	// Data: the dialog of the World.
	Host handoff.Host
	// Configure, when not nil, is the receiver configuration the refusal
	// depends on (a chain or reference policy); pass it to World.Agent or
	// apply it to the Config of the receiver under test. Nil means the
	// default configuration refuses Data.
	Configure func(*handoff.Config)

	// Reason is the draft's reason code the refusal carries; empty for a
	// retransmission.
	Reason reason.Code
	// Check is the check of section 5.1 that decides.
	Check handoff.Check
	// Class is the failure class the refusal's error wraps (errors.Is):
	// handoff.ErrSignature, ErrUntrustedKey, ErrMalformed, ErrTooLarge or
	// ErrRejected. Nil for a retransmission, which is no error.
	Class error
	// Retransmission is true for a replay: the exact octets of an offer
	// already received (HC-35, HC-38).
	Retransmission bool
	// Rule says, for people, which rule of the draft Data breaks.
	Rule string
}

// StatusDue reports whether the draft asks the receiver to answer with a
// "rejected" status carrying Reason (HC-30): a check from 2 to 7 failed.
// Nothing is sent for an offer whose signature did not verify, for the
// second of two equivocating offers (HC-53), or for a retransmission,
// which is answered with the last status sent, if any (HC-39).
func (b BadInput) StatusDue() bool {
	return b.Check > handoff.CheckSignature && !b.Retransmission && b.Reason != reason.Equivocation
}

// Verify reports how in, the outcome of delivering Data to a receiver
// prepared as BadInput says, differs from what the draft requires: nil when
// it is exactly the refusal claimed.
func (b BadInput) Verify(in *handoff.Received) error {
	if in == nil {
		return fmt.Errorf("%s: no outcome", b.Name)
	}
	var diffs []string
	if in.Accepted() {
		diffs = append(diffs, "accepted")
	}
	if in.Retransmission() != b.Retransmission {
		diffs = append(diffs, fmt.Sprintf("retransmission %v, want %v", in.Retransmission(), b.Retransmission))
	}
	if in.Reason() != b.Reason {
		diffs = append(diffs, fmt.Sprintf("reason %q, want %q", in.Reason(), b.Reason))
	}
	if in.Check() != b.Check {
		diffs = append(diffs, fmt.Sprintf("decided by check %v, want %v", in.Check(), b.Check))
	}
	err := in.Err()
	switch {
	case b.Class == nil && err != nil:
		diffs = append(diffs, fmt.Sprintf("error %v, want none", err))
	case b.Class != nil && !errors.Is(err, b.Class):
		diffs = append(diffs, fmt.Sprintf("error %v, want one wrapping %v", err, b.Class))
	}
	if b.Reason != "" && handoff.ReasonOf(err) != b.Reason {
		diffs = append(diffs, fmt.Sprintf("error carries reason %q, want %q", handoff.ReasonOf(err), b.Reason))
	}
	if in.StatusDue() != b.StatusDue() {
		diffs = append(diffs, fmt.Sprintf("status due %v, want %v", in.StatusDue(), b.StatusDue()))
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (detail: %s)", b.Name, strings.Join(diffs, "; "), in.Detail())
}

// BadInputs returns one bad input per attack class for the receiver to,
// in JWS and in COSE wherever the attack applies to the form (alg "none"
// is JWS's alone); from a World that In made, in its format alone
// (World.In(handoff.COSE).BadInputs gives COSE inputs only). Each Handoff
// object is in the World's encoding if
// Encoded chose one, else JSON for JWS and CBOR for COSE; malformed JSON
// is listed for each JSON one and malformed CBOR for each CBOR one. to
// must be one of the agents named to NewWorld. The offers are signed by
// the first other agent named to NewWorld (Relay(0) when there is none),
// and by relay agents for chains, issued now by the World's clock: deliver
// them before moving the clock more than a few seconds.
//
// The default profile and the strict one (Limits.Strict) refuse each with
// the same reason.
func (w *World) BadInputs(to handoff.AgentID) []BadInput {
	w.t.Helper()
	if !slices.Contains(w.ids, to) {
		w.t.Fatalf("handofftest: BadInputs: %q is not an agent named to NewWorld", to)
	}
	if w.chosen {
		return w.badInputs(to)
	}
	var out []BadInput
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		out = append(out, w.In(f).badInputs(to)...)
	}
	return out
}

// name is "<format>/<attack>", with the encoding when it is not the one
// that goes with the format.
func (w *World) name(a Attack) string {
	n := w.format.String()
	if w.enc != 0 {
		n += "-in-" + w.enc.String()
	}
	return n + "/" + string(a)
}

// sender is the agent that signs the single offers of BadInputs.
func (w *World) sender(to handoff.AgentID) handoff.AgentID {
	for _, id := range w.ids {
		if id != to {
			return id
		}
	}
	return Relay(0)
}

func (w *World) badInputs(to handoff.AgentID) []BadInput {
	w.t.Helper()
	from := w.sender(to)
	sig, rej := handoff.CheckSignature, handoff.ErrRejected
	var out []BadInput
	add := func(a Attack, data []byte, reason reason.Code, check handoff.Check, class error, rule string) *BadInput {
		out = append(out, BadInput{Name: w.name(a), Attack: a, Format: w.format,
			Encoding: w.Encoding(), Data: data, Host: w.Host(), Reason: reason, Check: check, Class: class, Rule: rule})
		if h, _, err := handoff.ParseHandoff(data, handoff.Limits{}); err == nil {
			out[len(out)-1].Offer = h.Offer
		}
		return &out[len(out)-1]
	}
	offer := func(mod func(*handoff.Offer)) handoff.Signed { return w.Offer(from, to, mod) }

	add(AttackTamperedPayload, w.carry(w.tamper(offer(nil))), reason.BadSignature, sig, handoff.ErrSignature,
		"HC-13: the payload was changed after it was signed; the signature no longer verifies")
	add(AttackWrongKey, w.carry(w.Sign(Outsider, w.Draft(from, to))), reason.UntrustedKey, sig, handoff.ErrUntrustedKey,
		"HC-21: signed by a key the trust configuration binds to no agent, with that key's kid")
	add(AttackEmbeddedKey, w.carry(w.embeddedKey(from, to)), reason.BadSignature, sig, handoff.ErrSignature,
		"HC-21: signed by an attacker who carries its own key in the header and names iss's kid; "+
			"the carried key is never used, and the signature fails under iss's key")
	if w.format == handoff.JWS {
		add(AttackAlgNone, w.carry(w.algNone(from, to)), reason.BadSignature, sig, handoff.ErrMalformed,
			`HC-15: JWS with alg "none" and no signature`)
	}
	add(AttackHMACConfusion, w.carry(w.hmacConfusion(from, to)), reason.BadSignature, sig, handoff.ErrSignature,
		"HC-15, HC-22: MAC (HS256, COSE alg 5) keyed with the octets of iss's trusted public key")

	add(AttackWrongAudience, w.carry(w.Offer(from, w.other(from, to), nil)), reason.WrongAudience, handoff.CheckAudience, rej,
		"section 5.1 check 2: aud names another agent")
	add(AttackExpired, w.carry(offer(func(o *handoff.Offer) { o.Iat, o.Exp = o.Iat-300, o.Iat-120 })), reason.Stale, handoff.CheckFreshness, rej,
		"HC-31: exp passed two minutes ago")
	add(AttackFutureDated, w.carry(offer(func(o *handoff.Offer) { o.Iat, o.Exp = o.Iat+300, o.Iat+420 })), reason.Stale, handoff.CheckFreshness, rej,
		"HC-31: iat five minutes ahead, beyond the skew")
	add(AttackOverLongLifetime, w.carry(offer(func(o *handoff.Offer) {
		o.Exp = o.Iat + handoff.Time((MaxLifetime+time.Minute)/time.Second)
	})), reason.Stale, handoff.CheckFreshness, rej,
		"HC-32: exp - iat is a minute over the maximum lifetime (300 s)")

	orig := offer(nil)
	r := add(AttackReplay, w.carry(orig), "", handoff.CheckMemory, nil,
		"HC-35, HC-38: the exact octets of an offer already received: a retransmission, not processed again")
	r.Prior, r.Retransmission = [][]byte{w.carry(orig)}, true

	orig = offer(nil)
	eq := w.reissue(orig, from)
	r = add(AttackEquivocation, w.carry(eq), reason.Equivocation, handoff.CheckMemory, rej,
		"HC-53: a second offer with the (iss, hop) of one already received and another task")
	r.Prior = [][]byte{w.carry(orig)}

	orig = offer(nil)
	r = add(AttackHighSTwin, w.carry(w.twin(orig)), reason.Equivocation, handoff.CheckMemory, rej,
		"HC-53, HC-20: the same offer with the other valid ECDSA signature (r, n-s): other octets under one (iss, hop)")
	r.Prior = [][]byte{w.carry(orig)}

	add(AttackWrongDialog, w.carry(offer(func(o *handoff.Offer) { o.Dialog = "another-dialog" })), reason.Policy, handoff.CheckDialog, rej,
		"section 5.1 check 5: the offer's dialog is not the host message's")

	chain := handoff.CheckChain
	zero := digest.Digest{Alg: digest.SHA256Alg, Val: make([]byte, 32)}
	add(AttackBrokenChain, w.Encode(w.Path(func(i int, o *handoff.Offer) {
		if i == 1 {
			o.Prev = &zero
		}
	}, Relay(0), Relay(1), to)...), reason.BrokenChain, chain, rej,
		"HC-47: the offer's prev names another offer than the chain's last element")
	e := w.Path(nil, Relay(0), Relay(1), Relay(2), to)
	add(AttackReorderedChain, w.Encode(e[1], e[0], e[2]), reason.BrokenChain, chain, rej,
		"HC-47: the chain's elements out of order")
	e = w.Path(nil, Relay(0), Relay(1), Relay(2), to)
	r = add(AttackTruncatedChain, w.Encode(e[1:]...), reason.Policy, chain, rej,
		"HC-48, HC-36: the chain's first element dropped, so it does not reach the start, under a policy that requires a full chain")
	r.Configure = func(c *handoff.Config) { c.Chain.RequireFull = true }
	add(AttackCyclicChain, w.Encode(w.Path(nil, Relay(0), Relay(1), Relay(0), to)...), reason.Cycle, chain, rej,
		"HC-49: one agent is iss of two elements")
	add(AttackTooDeepChain, w.Encode(w.Chain(to, MaxChain+2)...), reason.TooDeep, chain, rej,
		"HC-50: a chain one element longer than the default limit of 16")
	add(AttackForgedBehind, w.Encode(w.forgedBehind(to)...), reason.BadSignature, chain, handoff.ErrSignature,
		"HC-46: an element of a trusted iss whose payload was changed, behind an element of an untrusted iss")

	const loc = "urn:handofftest:object"
	r2 := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("the object the delegator named")), Loc: loc}
	r = add(AttackRefMismatch, w.carry(offer(func(o *handoff.Offer) { o.Refs = []ref.Ref{r2} })), reason.RefMismatch, handoff.CheckRefs, rej,
		"HC-11: the object delivered for a reference has another digest, under a policy that checks references")
	r.Configure = func(c *handoff.Config) {
		c.Refs = ref.CheckAvailable
		c.RefSource = ref.ByLoc(map[string]ref.Object{loc: {Octets: []byte("another object")}})
	}
	r = add(AttackUnverifiableRef, w.carry(offer(func(o *handoff.Offer) { o.Refs = []ref.Ref{r2} })), reason.UnverifiableRef, handoff.CheckRefs, rej,
		"HC-11: no object can be had for a reference, under a policy that requires every reference to verify")
	r.Configure = func(c *handoff.Config) {
		c.Refs = ref.CheckRequired
		c.RefSource = ref.ByLoc(nil)
	}

	add(AttackOversize, w.carryPadded(offer(nil), MaxHandoffSize), reason.BadSignature, sig, handoff.ErrTooLarge,
		"HC-61: a Handoff object over the default size limit (512 KiB), refused before it is parsed")
	good := w.carry(offer(nil))
	if w.Encoding() == handoff.JSON {
		add(AttackMalformedJSON, good[:len(good)-1], reason.BadSignature, sig, handoff.ErrMalformed,
			"RFC 8259: a JSON Handoff object missing its closing brace")
	} else {
		add(AttackMalformedCBOR, good[:len(good)-1], reason.BadSignature, sig, handoff.ErrMalformed,
			"RFC 8949: a CBOR Handoff object cut short by one octet")
	}
	return out
}

// other is a trusted agent that is neither from nor to.
func (w *World) other(from, to handoff.AgentID) handoff.AgentID {
	for i := range relays {
		if id := Relay(i); id != from && id != to {
			return id
		}
	}
	panic("unreachable: there are more relays than two")
}

// carry returns the Handoff object carrying s alone, in the World's
// encoding, written here so that any octets can be carried, well formed or
// not.
func (w *World) carry(s handoff.Signed) []byte { return w.carryPadded(s, 0) }

// carryPadded is carry with an unknown member of pad octets, which a
// receiver ignores (HC-01) once the size allows.
func (w *World) carryPadded(s handoff.Signed, pad int) []byte {
	w.t.Helper()
	m := map[string]any{}
	switch {
	case s.Format == handoff.JWS:
		m["offer"] = string(s.Octets)
	case w.Encoding() == handoff.JSON:
		m["offer"] = base64.RawURLEncoding.EncodeToString(s.Octets)
	default:
		m["offer"] = s.Octets
	}
	if pad > 0 {
		m["x-handofftest-padding"] = strings.Repeat("A", pad)
	}
	var b []byte
	var err error
	if w.Encoding() == handoff.JSON {
		b, err = json.Marshal(m)
	} else {
		b, err = cborMode.Marshal(m)
	}
	if err != nil {
		w.t.Fatalf("handofftest: carry: %v", err)
	}
	return b
}

var cborMode = func() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err) // constant options
	}
	return em
}()

// payload returns o's payload in the World's form.
func (w *World) payload(o *handoff.Offer) []byte {
	w.t.Helper()
	enc := handoff.JSON
	if w.format == handoff.COSE {
		enc = handoff.CBOR
	}
	p, err := o.Payload(enc)
	if err != nil {
		w.t.Fatalf("handofftest: payload: %v", err)
	}
	return p
}

// kid is the kid the library's signer writes for id's key.
func (w *World) kid(id handoff.AgentID) string {
	w.t.Helper()
	k, err := jws.Thumbprint(w.Key(id).Public())
	if err != nil {
		w.t.Fatalf("handofftest: thumbprint: %v", err)
	}
	return k
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// sign1 is a COSE_Sign1: the four members of the array under tag 18.
type sign1 struct {
	_           struct{} `cbor:",toarray"`
	Protected   []byte
	Unprotected map[any]any
	Payload     []byte
	Signature   []byte
}

func (w *World) openCOSE(s handoff.Signed) sign1 {
	w.t.Helper()
	var tag cbor.RawTag
	var m sign1
	if err := cbor.Unmarshal(s.Octets, &tag); err != nil {
		w.t.Fatalf("handofftest: COSE: %v", err)
	}
	if err := cbor.Unmarshal(tag.Content, &m); err != nil {
		w.t.Fatalf("handofftest: COSE: %v", err)
	}
	return m
}

func (w *World) sealCOSE(m sign1) handoff.Signed {
	w.t.Helper()
	if m.Unprotected == nil {
		m.Unprotected = map[any]any{}
	}
	b, err := cborMode.Marshal(cbor.Tag{Number: cose.Tag, Content: m})
	if err != nil {
		w.t.Fatalf("handofftest: COSE: %v", err)
	}
	return handoff.Signed{Format: handoff.COSE, Octets: b}
}

// tbs is the COSE Sig_structure of a COSE_Sign1 with empty external AAD.
func (w *World) tbs(protected, payload []byte) []byte {
	w.t.Helper()
	b, err := cborMode.Marshal([]any{"Signature1", protected, []byte{}, payload})
	if err != nil {
		w.t.Fatalf("handofftest: COSE: %v", err)
	}
	return b
}

// protected is a COSE protected header: {1: alg, 3: content type, 4: kid}
// and the extra labels given.
func (w *World) protected(alg int64, kid string, extra map[int64]any) []byte {
	w.t.Helper()
	h := map[int64]any{1: alg, 3: cose.ContentType, 4: []byte(kid)}
	for k, v := range extra {
		h[k] = v
	}
	b, err := cborMode.Marshal(h)
	if err != nil {
		w.t.Fatalf("handofftest: COSE: %v", err)
	}
	return b
}

// es256 signs msg with id's key: raw r||s, low S.
func (w *World) es256(id handoff.AgentID, msg []byte) []byte {
	w.t.Helper()
	sig, err := ecsig.Sign(rand.Reader, w.Key(id), ecsig.ES256, msg)
	if err != nil {
		w.t.Fatalf("handofftest: sign: %v", err)
	}
	return sig
}

// tamper returns s with its payload replaced by that of the same offer
// with another task, under s's header and signature.
func (w *World) tamper(s handoff.Signed) handoff.Signed {
	w.t.Helper()
	o, _, err := handoff.InspectUnverified(s, handoff.Limits{})
	if err != nil {
		w.t.Fatalf("handofftest: tamper: %v", err)
	}
	o.Task = "tampered"
	p := w.payload(o)
	if s.Format == handoff.JWS {
		seg := strings.Split(string(s.Octets), ".")
		seg[1] = b64(p)
		return handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(seg, "."))}
	}
	m := w.openCOSE(s)
	m.Payload = p
	return w.sealCOSE(m)
}

// reissue signs s's offer again with another task: one (iss, hop), other
// octets.
func (w *World) reissue(s handoff.Signed, from handoff.AgentID) handoff.Signed {
	w.t.Helper()
	o, _, err := handoff.InspectUnverified(s, handoff.Limits{})
	if err != nil {
		w.t.Fatalf("handofftest: reissue: %v", err)
	}
	o.Task = "another task"
	return w.Sign(from, o)
}

// twin returns s with its ES256 signature (r, s) replaced by (r, n-s),
// which verifies too.
func (w *World) twin(s handoff.Signed) handoff.Signed {
	w.t.Helper()
	if s.Format == handoff.JWS {
		i := bytes.LastIndexByte(s.Octets, '.')
		sig, err := base64.RawURLEncoding.DecodeString(string(s.Octets[i+1:]))
		if err != nil {
			w.t.Fatalf("handofftest: twin: %v", err)
		}
		tw, err := ecsig.Twin(ecsig.ES256, sig)
		if err != nil {
			w.t.Fatalf("handofftest: twin: %v", err)
		}
		return handoff.Signed{Format: handoff.JWS, Octets: append(bytes.Clone(s.Octets[:i+1]), b64(tw)...)}
	}
	m := w.openCOSE(s)
	tw, err := ecsig.Twin(ecsig.ES256, m.Signature)
	if err != nil {
		w.t.Fatalf("handofftest: twin: %v", err)
	}
	m.Signature = tw
	return w.sealCOSE(m)
}

// embeddedKey is an offer from iss to aud signed by the Outsider's key,
// with that key in the header (a JWK in JWS, a certificate in COSE
// x5chain, RFC 9360) and the kid of iss's key.
func (w *World) embeddedKey(iss, aud handoff.AgentID) handoff.Signed {
	w.t.Helper()
	p := w.payload(w.Draft(iss, aud))
	if w.format == handoff.JWS {
		jwk, err := keyset.PublicJWK(handoff.TrustedKey{Public: w.Key(Outsider).Public(), Alg: handoff.ES256})
		if err != nil {
			w.t.Fatalf("handofftest: JWK: %v", err)
		}
		hdr := `{"alg":"ES256","jwk":` + string(jwk) + `,"kid":"` + w.kid(iss) + `","typ":"agent-handoff+jwt"}`
		in := b64([]byte(hdr)) + "." + b64(p)
		return handoff.Signed{Format: handoff.JWS, Octets: []byte(in + "." + b64(w.es256(Outsider, []byte(in))))}
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: string(iss)},
		NotBefore: w.Now().Add(-time.Hour), NotAfter: w.Now().Add(time.Hour)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, w.Key(Outsider).Public(), w.Key(Outsider))
	if err != nil {
		w.t.Fatalf("handofftest: certificate: %v", err)
	}
	prot := w.protected(-7, w.kid(iss), map[int64]any{33: cert})
	return w.sealCOSE(sign1{Protected: prot, Payload: p, Signature: w.es256(Outsider, w.tbs(prot, p))})
}

// algNone is a JWS from iss to aud with alg "none" and an empty signature.
func (w *World) algNone(iss, aud handoff.AgentID) handoff.Signed {
	w.t.Helper()
	hdr := `{"alg":"none","kid":"` + w.kid(iss) + `","typ":"agent-handoff+jwt"}`
	return handoff.Signed{Format: handoff.JWS, Octets: []byte(b64([]byte(hdr)) + "." + b64(w.payload(w.Draft(iss, aud))) + ".")}
}

// hmacConfusion is an offer from iss to aud "signed" with HMAC SHA-256
// keyed with the DER (PKIX) form of iss's trusted public key: HS256 in
// JWS, alg 5 (HMAC 256/256) in COSE.
func (w *World) hmacConfusion(iss, aud handoff.AgentID) handoff.Signed {
	w.t.Helper()
	key, err := x509.MarshalPKIXPublicKey(w.Key(iss).Public())
	if err != nil {
		w.t.Fatalf("handofftest: public key: %v", err)
	}
	mac := func(msg []byte) []byte { m := hmac.New(sha256.New, key); m.Write(msg); return m.Sum(nil) }
	p := w.payload(w.Draft(iss, aud))
	if w.format == handoff.JWS {
		hdr := `{"alg":"HS256","kid":"` + w.kid(iss) + `","typ":"agent-handoff+jwt"}`
		in := b64([]byte(hdr)) + "." + b64(p)
		return handoff.Signed{Format: handoff.JWS, Octets: []byte(in + "." + b64(mac([]byte(in))))}
	}
	prot := w.protected(5, w.kid(iss), nil)
	return w.sealCOSE(sign1{Protected: prot, Payload: p, Signature: mac(w.tbs(prot, p))})
}

// forgedBehind is a path Relay(0), Outsider, Relay(1), to whose first
// element's payload is changed after signing: the Outsider's element is
// unverifiable, and the first element, of a trusted iss, must still be
// verified (section 5.3, check 1).
func (w *World) forgedBehind(to handoff.AgentID) []handoff.Signed {
	w.t.Helper()
	e0 := w.tamper(w.Offer(Relay(0), Outsider, nil))
	o1 := w.Draft(Outsider, Relay(1))
	d0 := e0.Digest()
	o1.Prev = &d0
	e1 := w.Sign(Outsider, o1)
	o2 := w.Draft(Relay(1), to)
	d1 := e1.Digest()
	o2.Prev = &d1
	return []handoff.Signed{e0, e1, w.Sign(Relay(1), o2)}
}
