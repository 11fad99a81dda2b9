package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/ref"
)

// Times. Every vector's receiver runs its clock at now unless it says
// otherwise; offers are issued a little before.
const (
	t0  int64 = 1793000000
	now int64 = t0 + 60
)

// dialog is the host dialog of the vectors' offers and receivers.
const dialog = "ctx-vectors"

var b64 = base64.RawURLEncoding

// builder builds the elements of one case. Hop identifiers are derived
// from the case's slug and a counter, so that they are fixed.
type builder struct {
	slug string
	hops int
}

func (b *builder) hop() handoff.HopID {
	b.hops++
	sum := sha256.Sum256([]byte(fmt.Sprintf("hop %s %d", b.slug, b.hops)))
	return handoff.HopID(b64.EncodeToString(sum[:16]))
}

// opt adjusts an offer before it is signed.
type opt func(*handoff.Offer)

// after makes the offer pass on s: its prev is the handoff digest of s.
func after(s handoff.Signed) opt {
	return func(o *handoff.Offer) { d := s.Digest(); o.Prev = &d }
}

// prevDigest sets prev to d.
func prevDigest(d digest.Digest) opt { return func(o *handoff.Offer) { o.Prev = &d } }

// lifetime sets exp to iat + s.
func lifetime(s int64) opt {
	return func(o *handoff.Offer) { o.Exp = o.Iat + handoff.Time(s) }
}

func task(t string) opt { return func(o *handoff.Offer) { o.Task = t } }

func inDialog(d string) opt { return func(o *handoff.Offer) { o.Dialog = d } }

func withRefs(refs ...ref.Ref) opt {
	return func(o *handoff.Offer) { o.Refs = refs }
}

// offer returns an unsigned offer from iss to aud issued at iat, valid for
// 120 s, in the vectors' dialog.
func (b *builder) offer(iss, aud *agent, iat int64, opts ...opt) *handoff.Offer {
	o := &handoff.Offer{
		Hop: b.hop(), Dialog: dialog, Iss: iss.id, Aud: aud.id,
		Iat: handoff.Time(iat), Exp: handoff.Time(iat + 120),
	}
	for _, f := range opts {
		f(o)
	}
	return o
}

// sign signs o with its iss's key in format f, through the library's
// Signer.
func sign(f handoff.Format, o *handoff.Offer) handoff.Signed {
	a := agentByID(o.Iss)
	s, err := a.signer(f).SignOffer(o)
	if err != nil {
		panic(fmt.Sprintf("sign %s: %v", o.Hop, err))
	}
	return s
}

// signed builds and signs an offer in one step.
func (b *builder) signed(f handoff.Format, iss, aud *agent, iat int64, opts ...opt) handoff.Signed {
	return sign(f, b.offer(iss, aud, iat, opts...))
}

var registry = map[handoff.AgentID]*agent{}

func register(as ...*agent) {
	for _, a := range as {
		registry[a.id] = a
	}
}

func init() {
	register(baseTrust...)
	register(mallory)
}

func agentByID(id handoff.AgentID) *agent {
	a, ok := registry[id]
	if !ok {
		panic("no agent " + string(id))
	}
	return a
}

// encodeHandoff returns the Handoff object {offer, chain} in enc.
func encodeHandoff(enc handoff.Encoding, offer handoff.Signed, chain ...handoff.Signed) []byte {
	return encodeHandoffExtra(enc, nil, offer, chain...)
}

func encodeHandoffExtra(enc handoff.Encoding, extra map[string]any, offer handoff.Signed, chain ...handoff.Signed) []byte {
	h := &handoff.Handoff{Offer: offer, Chain: chain, Extra: extra}
	b, err := h.Encode(enc)
	if err != nil {
		panic(err)
	}
	return b
}

// chainOf signs a chain along agents: agents[0] offers to agents[1], which
// passes it on to agents[2], and so on; the first offer is issued at iat
// and each next one a second later. It returns the signed offers, oldest
// first.
func (b *builder) chainOf(f handoff.Format, iat int64, agents ...*agent) []handoff.Signed {
	var out []handoff.Signed
	for i := 0; i+1 < len(agents); i++ {
		var opts []opt
		if i > 0 {
			opts = append(opts, after(out[i-1]))
		}
		out = append(out, b.signed(f, agents[i], agents[i+1], iat+int64(i), opts...))
	}
	return out
}

// Hand-crafted elements, for what the library's Signer refuses to make.

// jsonPayload returns o's JSON payload, with edit applied to its members.
func jsonPayload(o *handoff.Offer, edit func(map[string]any)) []byte {
	p, err := o.Payload(handoff.JSON)
	if err != nil {
		panic(err)
	}
	if edit == nil {
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		panic(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return out
}

var cborDet = func() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return em
}()

// cborPayload returns o's CBOR payload, with edit applied to its members.
func cborPayload(o *handoff.Offer, edit func(map[any]any)) []byte {
	p, err := o.Payload(handoff.CBOR)
	if err != nil {
		panic(err)
	}
	if edit == nil {
		return p
	}
	var m map[any]any
	if err := cbor.Unmarshal(p, &m); err != nil {
		panic(err)
	}
	edit(m)
	out, err := cborDet.Marshal(m)
	if err != nil {
		panic(err)
	}
	return out
}

// jwsHeader is the header the library writes, as JSON text.
func jwsHeader(alg, kid string) string {
	return fmt.Sprintf(`{"alg":%q,"kid":%q,"typ":"agent-handoff+jwt"}`, alg, kid)
}

// rawJWS signs payload under the given protected header text with a's key
// and algorithm (whatever alg the header names).
func rawJWS(a *agent, header string, payload []byte) handoff.Signed {
	input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString(payload)
	sig, err := ecsig.Sign(nil, a.key, a.alg, []byte(input))
	if err != nil {
		panic(err)
	}
	return handoff.Signed{Format: handoff.JWS, Octets: []byte(input + "." + b64.EncodeToString(sig))}
}

// hmacJWS "signs" payload with HMAC-SHA256 keyed with key: a MAC, which a
// signed handoff never uses (HC-15).
func hmacJWS(header string, payload, key []byte) handoff.Signed {
	input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString(payload)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(input))
	return handoff.Signed{Format: handoff.JWS, Octets: []byte(input + "." + b64.EncodeToString(m.Sum(nil)))}
}

// COSE header labels and algorithm identifiers.
const (
	labelAlg         = int64(1)
	labelContentType = int64(3)
	labelKID         = int64(4)
	coseES256        = int64(-7)
	contentType      = "application/agent-handoff+cbor"
)

// coseHeader is the protected header the library writes.
func coseHeader(a *agent) map[int64]any {
	return map[int64]any{labelAlg: coseES256, labelContentType: contentType, labelKID: []byte(a.kid)}
}

// rawCOSE signs payload as a COSE_Sign1 with the given protected header and
// a's key. tagged false leaves out tag 18.
func rawCOSE(a *agent, protected map[int64]any, payload []byte, tagged bool) handoff.Signed {
	prot, err := cborDet.Marshal(protected)
	if err != nil {
		panic(err)
	}
	tbs, err := cborDet.Marshal([]any{"Signature1", prot, []byte{}, payload})
	if err != nil {
		panic(err)
	}
	sig, err := ecsig.Sign(nil, a.key, a.alg, tbs)
	if err != nil {
		panic(err)
	}
	var msg any = []any{prot, map[int64]any{}, payload, sig}
	if tagged {
		msg = cbor.Tag{Number: 18, Content: msg}
	}
	out, err := cborDet.Marshal(msg)
	if err != nil {
		panic(err)
	}
	return handoff.Signed{Format: handoff.COSE, Octets: out}
}

// Tweaks of signed elements.

// alterJWSSignature flips one bit in the middle of the signature.
func alterJWSSignature(s handoff.Signed) handoff.Signed {
	parts := strings.Split(string(s.Octets), ".")
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		panic(err)
	}
	sig[len(sig)/2+3] ^= 0x01
	parts[2] = b64.EncodeToString(sig)
	return handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(parts, "."))}
}

// replaceJWSPayload puts payload in place of the signed one, keeping the
// header and signature.
func replaceJWSPayload(s handoff.Signed, payload []byte) handoff.Signed {
	parts := strings.Split(string(s.Octets), ".")
	parts[1] = b64.EncodeToString(payload)
	return handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(parts, "."))}
}

// twinJWS returns s with its ECDSA signature (r, s) replaced by (r, n-s):
// another valid signature over the same octets, so another element.
func twinJWS(s handoff.Signed, alg string) handoff.Signed {
	parts := strings.Split(string(s.Octets), ".")
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		panic(err)
	}
	tw, err := ecsig.Twin(alg, sig)
	if err != nil {
		panic(err)
	}
	parts[2] = b64.EncodeToString(tw)
	return handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(parts, "."))}
}

// alterCOSESignature flips one bit of the signature, the message's last
// octets.
func alterCOSESignature(s handoff.Signed) handoff.Signed {
	out := bytes.Clone(s.Octets)
	out[len(out)-5] ^= 0x01
	return handoff.Signed{Format: handoff.COSE, Octets: out}
}

// sha512Digest is a Digest with an alg the draft does not define, over
// octets (HC-08).
func sha512Digest(octets []byte) digest.Digest {
	sum := sha512.Sum512(octets)
	return digest.Digest{Alg: "sha-512", Val: sum[:]}
}

// saltedDigest is sha-256 over salt || octets ("salted-digest").
func saltedDigest(salt, octets []byte) digest.Digest {
	return digest.SHA256(append(bytes.Clone(salt), octets...))
}

// fixedBytes derives n octets from label.
func fixedBytes(label string, n int) []byte {
	sum := sha256.Sum256([]byte("github.com/agentproto/handoff testdata/vectors: " + label))
	return bytes.Clone(sum[:n])
}
