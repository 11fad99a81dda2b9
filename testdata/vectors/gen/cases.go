package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// Case is one scenario before rendering.
type Case struct {
	Slug        string
	Description string
	HC          []string
	Input       []byte   // the Handoff octets
	Prior       [][]byte // Handoffs received before Input, in order
	Trust       []*agent
	TrustJWK    map[string][]json.RawMessage // keys given as JWKs (the draft's)
	Receiver    Receiver
	Expected    Expected
	// Level is set when the case is rendered (suite.go).
	Level string
}

func defaultReceiver() Receiver {
	return Receiver{
		Self: string(coder.id), Now: now, Dialog: dialog, Skew: 60, MaxLifetime: 300, MaxChain: 16,
		TrustedOrigins: []string{}, AllowReentry: []string{}, RefsPolicy: "not-checked",
		RefObjects: map[string]RefObject{},
	}
}

func accepted(chain string, refs ...string) Expected {
	return Expected{Accepted: true, Chain: chain, Refs: refs}
}

func rejected(reason reason.Code, chain string, refs ...string) Expected {
	return Expected{Reason: string(reason), Chain: chain, Refs: refs}
}

func retransmission(refs ...string) Expected {
	return Expected{Retransmission: true, Refs: refs}
}

func hc(ids ...string) []string { return ids }

func ids(as ...*agent) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a.id)
	}
	return out
}

// Referenced objects.
var (
	refLoc1  = "https://p.example/ctx/1"
	refLoc2  = "https://p.example/ctx/2"
	refObj1  = []byte(`{"notes":"what the planner collected for this task","items":3}`)
	refObj2  = []byte(`{"prompt":"summarise the open issues of the repository"}`)
	refSalt2 = fixedBytes("salt of ref 2", 32)
)

func digestRef(loc string, octets []byte) ref.Ref {
	return ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(octets), Loc: loc}
}

func saltedRef(loc string, salt, octets []byte) ref.Ref {
	return ref.Ref{Kind: ref.KindSaltedDigest, Dig: saltedDigest(salt, octets), Loc: loc}
}

func (c *Case) object(loc string, octets, salt []byte) {
	o := RefObject{OctetsB64: b64.EncodeToString(octets)}
	if salt != nil {
		o.SaltB64 = b64.EncodeToString(salt)
	}
	c.Receiver.RefObjects[loc] = o
}

// Outcomes of references, as the vectors spell them.
const (
	verified     = string(ref.Verified)
	mismatch     = string(ref.Mismatch)
	unverifiable = string(ref.Unverifiable)
	notChecked   = string(ref.NotChecked)
)

// Chain states.
const (
	absent  = string(handoff.ChainAbsent)
	partial = string(handoff.ChainPartial)
	full    = string(handoff.ChainFull)
	unverif = string(handoff.ChainUnverifiable)
)

const (
	JWS  = handoff.JWS
	COSE = handoff.COSE
	JSON = handoff.JSON
	CBOR = handoff.CBOR
)

type caseDef struct {
	slug  string
	build func(b *builder, c *Case)
}

// draft00 is the directory of the draft-00 worked example; set by main.
var draft00 = filepath.Join("testdata", "draft-00")

func readDraft00(name string) []byte {
	b, err := os.ReadFile(filepath.Join(draft00, name))
	if err != nil {
		panic(err)
	}
	return b
}

// The draft-00 example's agents.
const (
	draftAssistant = "spiffe://u.example/agent/assistant"
	draftPlanner   = "spiffe://a.example/agent/planner"
	draftCoder     = "spiffe://b.example/agent/coder"
	draftNow       = 1793000003
	draftDialog    = "ctx-7c1e"
	draftRefLoc    = "https://a.example/ctx/9"
)

// draftCase sets c up as the draft's coder receiving the draft's Handoff.
func draftCase(c *Case) {
	c.Trust = nil
	c.TrustJWK = map[string][]json.RawMessage{}
	for id, file := range map[string]string{draftAssistant: "assistant.jwk", draftPlanner: "planner.jwk"} {
		k, err := keyset.ParseJWK(readDraft00(file))
		if err != nil {
			panic(err)
		}
		j, err := keyset.PublicJWK(k) // with alg and the thumbprint as kid
		if err != nil {
			panic(err)
		}
		c.TrustJWK[id] = []json.RawMessage{j}
	}
	c.Receiver.Self, c.Receiver.Now, c.Receiver.Dialog = draftCoder, draftNow, draftDialog
	c.Input = readDraft00("handoff.json")
}

var cases = []caseDef{
	// Accepted offers, in each format and encoding.
	{"accept-jws-json", func(b *builder, c *Case) {
		c.Description = "An offer from the planner to the coder, signed as a JWS (ES256) and carried in a JSON Handoff, without prev: it starts its own chain, which is therefore full. Every check passes."
		c.HC = hc("HC-13", "HC-14", "HC-16", "HC-20", "HC-21", "HC-30", "HC-31", "HC-33")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, task("task-1")))
		c.Expected = accepted(full)
	}},
	{"accept-cose-cbor", func(b *builder, c *Case) {
		c.Description = "The same kind of offer signed as a tagged COSE_Sign1 (ES256, alg -7) and carried as a byte string in a CBOR Handoff. Accepted."
		c.HC = hc("HC-13", "HC-17", "HC-18", "HC-19", "HC-20", "HC-21")
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, task("task-1")))
		c.Expected = accepted(full)
	}},
	{"accept-eddsa-jws", func(b *builder, c *Case) {
		c.Description = "An offer from the reviewer, whose trusted key is Ed25519 pinned to EdDSA, signed as a JWS with alg EdDSA. Accepted."
		c.HC = hc("HC-15", "HC-21", "HC-22")
		c.Input = encodeHandoff(JSON, b.signed(JWS, reviewer, coder, now-5))
		c.Expected = accepted(full)
	}},
	{"accept-es384-cose", func(b *builder, c *Case) {
		c.Description = "An offer from the auditor, whose trusted key is P-384 pinned to ES384, signed as a COSE_Sign1 with alg -35. Accepted."
		c.HC = hc("HC-15", "HC-17", "HC-22")
		c.Input = encodeHandoff(CBOR, b.signed(COSE, auditor, coder, now-5))
		c.Expected = accepted(full)
	}},
	{"accept-cose-without-kid", func(b *builder, c *Case) {
		c.Description = "A COSE_Sign1 offer whose protected header has alg and content type but no kid, which is allowed (kid is a SHOULD). The receiver tries the keys bound to iss. Accepted."
		c.HC = hc("HC-17", "HC-18", "HC-21")
		o := b.offer(planner, coder, now-5)
		prot := map[int64]any{labelAlg: coseES256, labelContentType: contentType}
		c.Input = encodeHandoff(CBOR, rawCOSE(planner, prot, cborPayload(o, nil), true))
		c.Expected = accepted(full)
	}},
	{"accept-unknown-members", func(b *builder, c *Case) {
		c.Description = "An offer with obo, grant and a member this version does not define, in a Handoff object with an unknown member of its own. Unknown members are ignored; obo and grant are informational for the receive checks. Accepted."
		c.HC = hc("HC-01", "HC-03", "HC-57")
		grant := digest.SHA256([]byte("Bearer example-credential-for-test-vectors"))
		s := b.signed(JWS, planner, coder, now-5, func(o *handoff.Offer) {
			o.Obo = &handoff.Principal{Sub: "u-8f2a", Iss: "https://idp.u.example"}
			o.Grant = &grant
			o.Extra = map[string]any{"https://example.com/ext/priority": "high"}
		})
		c.Input = encodeHandoffExtra(JSON, map[string]any{"trace": "4bf92f3577b34da6a3ce929d0e0e4736"}, s)
		c.Expected = accepted(full)
	}},
	{"accept-iat-within-skew", func(b *builder, c *Case) {
		c.Description = "iat is exactly now + skew (60 s ahead of the receiver's clock): not later than now + skew, so fresh. Accepted."
		c.HC = hc("HC-31")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now+60))
		c.Expected = accepted(full)
	}},
	{"accept-issued-at-memory-loss", func(b *builder, c *Case) {
		c.Description = "The receiver lost its hop memory 10 s ago (memory_lost_at); the offer was issued at that very second, not before it, so it cannot be a replay of a forgotten offer. Accepted."
		c.HC = hc("HC-59")
		c.Receiver.MemoryLostAt = now - 10
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-10))
		c.Expected = accepted(full)
	}},

	// Chain states.
	{"chain-full-jws-json", func(b *builder, c *Case) {
		c.Description = "The assistant handed work to the planner (chain[0]), which passes part of it on to the coder: prev is the handoff digest of chain[0], chain[0].aud is the offer's iss, and the offer was issued while chain[0] was live. chain[0] has no prev, so the chain is full."
		c.HC = hc("HC-20", "HC-46", "HC-47")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = accepted(full)
	}},
	{"chain-full-mixed-formats-json", func(b *builder, c *Case) {
		c.Description = "A mixed chain in a JSON Handoff: chain[0] is a COSE_Sign1 (base64url text), the offer a JWS. prev is the digest of the COSE octets. Full."
		c.HC = hc("HC-19", "HC-20", "HC-46", "HC-47")
		c0 := b.signed(COSE, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = accepted(full)
	}},
	{"chain-full-mixed-formats-cbor", func(b *builder, c *Case) {
		c.Description = "A mixed chain in a CBOR Handoff: chain[0] is a JWS (text string), chain[1] a COSE_Sign1 (byte string), the offer a JWS. Full."
		c.HC = hc("HC-19", "HC-20", "HC-46", "HC-47")
		c0 := b.signed(JWS, assistant, researcher, t0+20)
		c1 := b.signed(COSE, researcher, planner, t0+21, after(c0))
		c.Input = encodeHandoff(CBOR, b.signed(JWS, planner, coder, now-5, after(c1)), c0, c1)
		c.Expected = accepted(full)
	}},
	{"chain-absent", func(b *builder, c *Case) {
		c.Description = "The offer names a prev, but the Handoff carries no chain: the chain is absent, which the default policy accepts."
		c.HC = hc("HC-36", "HC-63")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)))
		c.Expected = accepted(absent)
	}},
	{"chain-partial", func(b *builder, c *Case) {
		c.Description = "The chain carries only the researcher's offer to the planner, whose own prev names an earlier offer that is not carried: the chain verifies but does not reach the start. Partial, accepted by the default policy."
		c.HC = hc("HC-47", "HC-48")
		ch := b.chainOf(JWS, t0+20, assistant, researcher, planner)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(ch[1])), ch[1])
		c.Expected = accepted(partial)
	}},
	{"chain-unverifiable", func(b *builder, c *Case) {
		c.Description = "chain[0] is signed by an agent (mallory) that the receiver's trust configuration does not know. The chain is unverifiable from that element back; the default policy accepts it."
		c.HC = hc("HC-46")
		c0 := b.signed(JWS, mallory, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = accepted(unverif)
	}},
	{"chain-unverifiable-from-that-point-back", func(b *builder, c *Case) {
		c.Description = "chain[1] is signed by an untrusted agent; chain[0], before it, by the trusted assistant. The chain is unverifiable from chain[1] back, chain[0] included, whatever its signature."
		c.HC = hc("HC-46")
		ch := b.chainOf(JWS, t0+20, assistant, mallory, planner)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(ch[1])), ch...)
		c.Expected = accepted(unverif)
	}},
	{"chain-timing-at-skew-boundary", func(b *builder, c *Case) {
		c.Description = "chain[0] expired at 1792999980; the offer was issued at 1793000040, exactly chain[0].exp plus the 60 s skew, which is not later than it. Earlier offers are history and may have expired by now. Full, accepted."
		c.HC = hc("HC-47")
		c0 := b.signed(JWS, assistant, planner, t0-100, lifetime(80))
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, t0+40, after(c0)), c0)
		c.Expected = accepted(full)
	}},
	{"chain-at-maximum-length", func(b *builder, c *Case) {
		c.Description = "A chain of 16 elements through 16 distinct agents, the receiver's maximum (max_chain 16). Full, accepted."
		c.HC = hc("HC-47", "HC-50", "HC-61")
		hops := hopAgents(16)
		register(hops...)
		c.Trust = append(append([]*agent{}, baseTrust...), hops...)
		ch := b.chainOf(JWS, t0, append(hops, planner)...)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(ch[len(ch)-1])), ch...)
		c.Expected = accepted(full)
	}},
	{"chain-reentry-allowed", func(b *builder, c *Case) {
		c.Description = "The assistant handed work to the planner, which called back to the assistant, which now offers to the coder: the assistant is iss of chain[0] and of the offer. The receiver's policy admits the assistant's re-entry (allow_reentry), so this is not a cycle. Full, accepted."
		c.HC = hc("HC-49")
		c.Receiver.AllowReentry = ids(assistant)
		ch := b.chainOf(JWS, t0+20, assistant, planner, assistant)
		c.Input = encodeHandoff(JSON, b.signed(JWS, assistant, coder, now-5, after(ch[1])), ch...)
		c.Expected = accepted(full)
	}},
	{"trusted-origin-offer-without-prev", func(b *builder, c *Case) {
		c.Description = "An offer without prev is its own origin: the assistant, a trusted origin, offers directly to the coder. Full, accepted."
		c.HC = hc("HC-58")
		c.Receiver.RequireFullChain = true
		c.Receiver.TrustedOrigins = ids(assistant)
		c.Input = encodeHandoff(CBOR, b.signed(COSE, assistant, coder, now-5))
		c.Expected = accepted(full)
	}},

	// References.
	{"refs-check-available-verified", func(b *builder, c *Case) {
		c.Description = "Two references, a digest and a salted-digest, whose objects (and the salt, delivered with the object, never in the element) the receiver has. Policy check-available: both verify. Accepted."
		c.HC = hc("HC-09", "HC-11", "HC-36", "HC-64")
		c.Receiver.RefsPolicy = "check-available"
		c.object(refLoc1, refObj1, nil)
		c.object(refLoc2, refObj2, refSalt2)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5,
			withRefs(digestRef(refLoc1, refObj1), saltedRef(refLoc2, refSalt2, refObj2))))
		c.Expected = accepted(full, verified, verified)
	}},
	{"refs-check-available-unverifiable", func(b *builder, c *Case) {
		c.Description = "A reference whose object the receiver cannot obtain (no ref_objects). Policy check-available: the reference is unverifiable, which this policy reports without rejecting. Accepted."
		c.HC = hc("HC-11")
		c.Receiver.RefsPolicy = "check-available"
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, withRefs(digestRef(refLoc1, refObj1))))
		c.Expected = accepted(full, unverifiable)
	}},

	// The draft-00 worked example.
	{"draft-00-example", func(b *builder, c *Case) {
		c.Description = "The worked example of draft-handoff-00 section 2.3, byte for byte (testdata/draft-00/handoff.json): the planner's offer to the coder with the assistant's offer as chain[0], received by the coder at 1793000003 in dialog ctx-7c1e. Full, accepted; its reference is not checked."
		c.HC = hc("HC-11", "HC-16", "HC-20", "HC-46", "HC-47")
		draftCase(c)
		c.Expected = accepted(full, notChecked)
	}},
	{"draft-00-example-strict-policy", func(b *builder, c *Case) {
		c.Description = "The draft-00 example under a strict receiver: a full chain from the trusted origin (the assistant) is required, and every reference must verify; the receiver has the 65 octets the reference names (testdata/draft-00/ref-object.json). Accepted, reference verified."
		c.HC = hc("HC-11", "HC-36", "HC-58")
		draftCase(c)
		c.Receiver.RequireFullChain = true
		c.Receiver.TrustedOrigins = []string{draftAssistant}
		c.Receiver.RefsPolicy = "required"
		c.object(draftRefLoc, readDraft00("ref-object.json"), nil)
		c.Expected = accepted(full, verified)
	}},

	// Retransmission.
	{"retransmission-identical", func(b *builder, c *Case) {
		c.Description = "The receiver already received these exact octets (prior). Same (iss, hop), same handoff digest: a retransmission. It is not processed again and not accepted a second time; no reason applies."
		c.HC = hc("HC-35", "HC-38", "HC-52")
		h := encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5))
		c.Prior = [][]byte{h}
		c.Input = h
		c.Expected = retransmission()
	}},
	{"retransmission-other-handoff-encoding", func(b *builder, c *Case) {
		c.Description = "The same signed offer (a JWS) first arrived in a JSON Handoff and now arrives in a CBOR Handoff. The handoff digest is over the element's octets, which are unchanged: a retransmission."
		c.HC = hc("HC-19", "HC-20", "HC-35", "HC-38")
		s := b.signed(JWS, planner, coder, now-5)
		c.Prior = [][]byte{encodeHandoff(JSON, s)}
		c.Input = encodeHandoff(CBOR, s)
		c.Expected = retransmission()
	}},
	{"retransmission-after-rejected-chain", func(b *builder, c *Case) {
		c.Description = "The offer first arrived with a chain that does not connect (rejected broken-chain at step 6); it had passed steps 1-3, so its (iss, hop) was remembered. It now arrives with the right chain: a retransmission, not processed again."
		c.HC = hc("HC-33", "HC-35", "HC-38")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		other := b.signed(JWS, assistant, planner, t0+31)
		o := b.signed(JWS, planner, coder, now-5, after(c0))
		c.Prior = [][]byte{encodeHandoff(JSON, o, other)}
		c.Input = encodeHandoff(JSON, o, c0)
		c.Expected = retransmission()
	}},

	// Equivocation.
	{"equivocation-different-payload", func(b *builder, c *Case) {
		c.Description = "The planner signed two different offers with the same hop. The receiver got the first (prior); the second has the same (iss, hop) and a different digest: equivocation. It is never accepted."
		c.HC = hc("HC-35", "HC-53")
		o1 := b.offer(planner, coder, now-5, task("task-a"))
		o2 := *o1
		o2.Task = "task-b"
		c.Prior = [][]byte{encodeHandoff(JSON, sign(JWS, o1))}
		c.Input = encodeHandoff(JSON, sign(JWS, &o2))
		c.Expected = rejected(reason.Equivocation, "")
	}},
	{"equivocation-signature-only", func(b *builder, c *Case) {
		c.Description = "The second offer has the same header and payload as the first and a different, also valid, ECDSA signature ((r, n-s) for (r, s)). Different octets, different digest: equivocation, not a retransmission."
		c.HC = hc("HC-20", "HC-52", "HC-53")
		s := b.signed(JWS, planner, coder, now-5)
		c.Prior = [][]byte{encodeHandoff(JSON, s)}
		c.Input = encodeHandoff(JSON, twinJWS(s, planner.alg))
		c.Expected = rejected(reason.Equivocation, "")
	}},
	{"equivocation-second-offer-expired", func(b *builder, c *Case) {
		c.Description = "The second offer with a remembered (iss, hop) has already expired. The freshness check is skipped for a remembered pair, so it is reported as equivocation, not stale."
		c.HC = hc("HC-31", "HC-53")
		o1 := b.offer(planner, coder, now-5)
		o2 := *o1
		o2.Iat, o2.Exp = handoff.Time(now-200), handoff.Time(now-80)
		c.Prior = [][]byte{encodeHandoff(JSON, sign(JWS, o1))}
		c.Input = encodeHandoff(JSON, sign(JWS, &o2))
		c.Expected = rejected(reason.Equivocation, "")
	}},
	{"equivocation-other-format", func(b *builder, c *Case) {
		c.Description = "The same offer content signed once as a JWS (received first, in JSON) and once as a COSE_Sign1 (now, in CBOR). A hop is signed once: two signed forms are two elements with different digests, so equivocation."
		c.HC = hc("HC-20", "HC-52", "HC-53")
		o := b.offer(planner, coder, now-5)
		c.Prior = [][]byte{encodeHandoff(JSON, sign(JWS, o))}
		c.Input = encodeHandoff(CBOR, sign(COSE, o))
		c.Expected = rejected(reason.Equivocation, "")
	}},

	{"same-hop-other-issuer", func(b *builder, c *Case) {
		c.Description = "The receiver already accepted an offer from the planner; this offer, from the researcher, uses the same hop. Memory is keyed by the pair (iss, hop), so this is neither a retransmission nor equivocation. Accepted."
		c.HC = hc("HC-33", "HC-35")
		o1 := b.offer(planner, coder, now-5)
		o2 := b.offer(researcher, coder, now-4)
		o2.Hop = o1.Hop
		c.Prior = [][]byte{encodeHandoff(JSON, sign(JWS, o1))}
		c.Input = encodeHandoff(JSON, sign(JWS, o2))
		c.Expected = accepted(full)
	}},

	// bad-signature.
	{"bad-signature-jws-signature-altered", func(b *builder, c *Case) {
		c.Description = "One bit of the JWS signature is flipped. The key bound to iss does not verify it."
		c.HC = hc("HC-13", "HC-21")
		c.Input = encodeHandoff(JSON, alterJWSSignature(b.signed(JWS, planner, coder, now-5)))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-cose-signature-altered", func(b *builder, c *Case) {
		c.Description = "One bit of the COSE_Sign1 signature is flipped."
		c.HC = hc("HC-13", "HC-17")
		c.Input = encodeHandoff(CBOR, alterCOSESignature(b.signed(COSE, planner, coder, now-5)))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-jws-payload-altered", func(b *builder, c *Case) {
		c.Description = "The JWS payload is replaced by one whose exp is 60 s later, keeping the header and signature: the signature no longer covers the payload."
		c.HC = hc("HC-13", "HC-20")
		o := b.offer(planner, coder, now-5)
		s := sign(JWS, o)
		c.Input = encodeHandoff(JSON, replaceJWSPayload(s, jsonPayload(o, func(m map[string]any) {
			m["exp"] = json.Number(fmt.Sprint(uint64(o.Exp) + 60))
		})))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-jws-typ-jwt", func(b *builder, c *Case) {
		c.Description = "A correctly signed JWS whose typ is \"JWT\" instead of \"agent-handoff+jwt\": another kind of JWT must not be taken for a signed handoff."
		c.HC = hc("HC-14", "HC-60")
		o := b.offer(planner, coder, now-5)
		h := fmt.Sprintf(`{"alg":"ES256","kid":%q,"typ":"JWT"}`, planner.kid)
		c.Input = encodeHandoff(JSON, rawJWS(planner, h, jsonPayload(o, nil)))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-cose-content-type", func(b *builder, c *Case) {
		c.Description = "A correctly signed COSE_Sign1 whose content type (label 3) is \"application/cbor\" instead of \"application/agent-handoff+cbor\"."
		c.HC = hc("HC-17", "HC-60")
		o := b.offer(planner, coder, now-5)
		prot := coseHeader(planner)
		prot[labelContentType] = "application/cbor"
		c.Input = encodeHandoff(CBOR, rawCOSE(planner, prot, cborPayload(o, nil), true))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-cose-untagged", func(b *builder, c *Case) {
		c.Description = "A correctly signed COSE_Sign1 without tag 18. The signed form requires the tag."
		c.HC = hc("HC-17")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, rawCOSE(planner, coseHeader(planner), cborPayload(o, nil), false))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-jws-crit", func(b *builder, c *Case) {
		c.Description = "A correctly signed JWS whose protected header has crit. A signed handoff's header must not contain crit."
		c.HC = hc("HC-14")
		o := b.offer(planner, coder, now-5)
		h := fmt.Sprintf(`{"alg":"ES256","crit":["exp"],"exp":%d,"kid":%q,"typ":"agent-handoff+jwt"}`, o.Exp, planner.kid)
		c.Input = encodeHandoff(JSON, rawJWS(planner, h, jsonPayload(o, nil)))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-jws-hmac", func(b *builder, c *Case) {
		c.Description = "A JWS with alg HS256, a MAC keyed with the octets of the planner's public JWK (the algorithm-confusion attack). MAC algorithms are never accepted."
		c.HC = hc("HC-15", "HC-22")
		o := b.offer(planner, coder, now-5)
		h := fmt.Sprintf(`{"alg":"HS256","kid":%q,"typ":"agent-handoff+jwt"}`, planner.kid)
		c.Input = encodeHandoff(JSON, hmacJWS(h, jsonPayload(o, nil), planner.jwk()))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-alg-not-pinned", func(b *builder, c *Case) {
		c.Description = "The header says ES384 while the planner's key is trusted for ES256 only (the signature is in fact an ES256 one). Each trusted key is accepted with exactly one algorithm, so the header's alg does not match it."
		c.HC = hc("HC-22")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, rawJWS(planner, jwsHeader("ES384", planner.kid), jsonPayload(o, nil)))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-status-as-offer", func(b *builder, c *Case) {
		c.Description = "A correctly signed status (type \"status\", state canceled) carried where the offer belongs. Step 1 requires type \"offer\"."
		c.HC = hc("HC-55", "HC-60")
		first := b.signed(JWS, planner, coder, now-30)
		st := &handoff.Status{Hop: b.hop(), Offer: first.Digest(), Iss: planner.id, Aud: coder.id,
			Iat: handoff.Time(now - 5), State: state.Canceled}
		s, err := planner.jws.SignStatus(st)
		if err != nil {
			panic(err)
		}
		c.Input = encodeHandoff(JSON, s)
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-chain-element-altered", func(b *builder, c *Case) {
		c.Description = "The offer is valid, and its prev names chain[0] as carried, but one bit of chain[0]'s signature is flipped. Each chain element is checked as in step 1, with the same reasons."
		c.HC = hc("HC-46")
		c0 := alterJWSSignature(b.signed(JWS, assistant, planner, t0+30))
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.BadSignature, "")
	}},

	// untrusted-key.
	{"untrusted-key-unknown-issuer", func(b *builder, c *Case) {
		c.Description = "A correctly signed COSE offer from an agent (mallory) that the receiver's trust configuration does not know. No key is bound to iss."
		c.HC = hc("HC-21")
		c.Input = encodeHandoff(CBOR, b.signed(COSE, mallory, coder, now-5))
		c.Expected = rejected(reason.UntrustedKey, "")
	}},
	{"untrusted-key-kid-of-another-agent", func(b *builder, c *Case) {
		c.Description = "The payload says iss is the planner, but the JWS is signed with the researcher's key and names it by its kid. That key is trusted, but not for the planner: no key bound to iss matches."
		c.HC = hc("HC-21")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, rawJWS(researcher, jwsHeader("ES256", researcher.kid), jsonPayload(o, nil)))
		c.Expected = rejected(reason.UntrustedKey, "")
	}},

	// wrong-audience.
	{"wrong-audience", func(b *builder, c *Case) {
		c.Description = "A valid COSE offer, with a chain, copied to another agent than its aud. Step 2 fails before the chain is looked at."
		c.HC = hc("HC-30")
		c0 := b.signed(COSE, assistant, planner, t0+30)
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, researcher, now-5, after(c0)), c0)
		c.Expected = rejected(reason.WrongAudience, "")
	}},

	// stale.
	{"stale-expired", func(b *builder, c *Case) {
		c.Description = "The offer expired 10 s ago and its (iss, hop) is not remembered."
		c.HC = hc("HC-31")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-130))
		c.Expected = rejected(reason.Stale, "")
	}},
	{"stale-exp-equals-now", func(b *builder, c *Case) {
		c.Description = "exp equals the receiver's current time: exp is not later than now, so the offer is stale (no skew applies to exp)."
		c.HC = hc("HC-31")
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-120))
		c.Expected = rejected(reason.Stale, "")
	}},
	{"stale-iat-beyond-skew", func(b *builder, c *Case) {
		c.Description = "iat is 61 s ahead of the receiver's clock, beyond the 60 s skew."
		c.HC = hc("HC-31")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now+61))
		c.Expected = rejected(reason.Stale, "")
	}},
	{"stale-exp-not-after-iat", func(b *builder, c *Case) {
		c.Description = "exp equals iat. An offer's exp must be later than its iat."
		c.HC = hc("HC-31")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, lifetime(0)))
		c.Expected = rejected(reason.Stale, "")
	}},
	{"stale-lifetime-exceeds-maximum", func(b *builder, c *Case) {
		c.Description = "exp - iat is 301 s, one more than the receiver's maximum lifetime of 300 s."
		c.HC = hc("HC-32")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, lifetime(301)))
		c.Expected = rejected(reason.Stale, "")
	}},

	{"stale-lifetime-overflow", func(b *builder, c *Case) {
		c.Description = "exp - iat is 9223372037 s (about 292 years): in nanoseconds it exceeds 2^63, so an implementation that compares lifetimes in a signed 64-bit nanosecond type sees a negative lifetime. It exceeds the maximum of 300 s."
		c.HC = hc("HC-32")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, lifetime(9223372037)))
		c.Expected = rejected(reason.Stale, "")
	}},

	// replay.
	{"replay-issued-before-memory-loss", func(b *builder, c *Case) {
		c.Description = "The receiver lost its hop memory 10 s ago (a restart with an in-memory store). A fresh offer issued 20 s ago, before the loss, may be one it already processed and forgot: rejected as replay until the maximum lifetime plus skew has passed since the loss."
		c.HC = hc("HC-59")
		c.Receiver.MemoryLostAt = now - 10
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-20))
		c.Expected = rejected(reason.Replay, "")
	}},

	// broken-chain.
	{"broken-chain-intermediate-removed", func(b *builder, c *Case) {
		c.Description = "The history is assistant, researcher, planner; the carried chain drops the researcher's offer (chain[1]). The offer's prev names the removed element, not the carried one."
		c.HC = hc("HC-47")
		ch := b.chainOf(JWS, t0+20, assistant, researcher, planner)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(ch[1])), ch[0])
		c.Expected = rejected(reason.BrokenChain, "")
	}},
	{"broken-chain-continuity", func(b *builder, c *Case) {
		c.Description = "prev names chain[0], but chain[0] was an offer to the researcher, not to the planner who now passes it on: chain[0].aud is not the offer's iss."
		c.HC = hc("HC-47")
		c0 := b.signed(JWS, assistant, researcher, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.BrokenChain, "")
	}},
	{"broken-chain-iat-before-previous", func(b *builder, c *Case) {
		c.Description = "The offer was issued 3 s before chain[0], the offer it passes on."
		c.HC = hc("HC-47")
		c0 := b.signed(JWS, assistant, planner, now-2)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.BrokenChain, "")
	}},
	{"broken-chain-iat-after-previous-exp", func(b *builder, c *Case) {
		c.Description = "chain[0] expired at 1792999980; the offer was issued at 1793000041, one second later than chain[0].exp plus the skew: the planner passed on an offer that was no longer live."
		c.HC = hc("HC-47")
		c0 := b.signed(JWS, assistant, planner, t0-100, lifetime(80))
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, t0+41, after(c0)), c0)
		c.Expected = rejected(reason.BrokenChain, "")
	}},
	{"broken-chain-reordered", func(b *builder, c *Case) {
		c.Description = "The two chain elements are carried newest first instead of oldest first."
		c.HC = hc("HC-47")
		ch := b.chainOf(COSE, t0+20, assistant, researcher, planner)
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, after(ch[1])), ch[1], ch[0])
		c.Expected = rejected(reason.BrokenChain, "")
	}},
	{"broken-chain-element-re-signed", func(b *builder, c *Case) {
		c.Description = "chain[0] is carried with another valid signature over the same header and payload ((r, n-s) for (r, s)). The octets changed, so their digest is not the offer's prev: forwarders must forward the octets unchanged."
		c.HC = hc("HC-20", "HC-47")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), twinJWS(c0, assistant.alg))
		c.Expected = rejected(reason.BrokenChain, "")
	}},
	{"broken-chain-offer-without-prev", func(b *builder, c *Case) {
		c.Description = "A chain is carried, but the offer has no prev: the chain does not connect to the offer."
		c.HC = hc("HC-47")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5), c0)
		c.Expected = rejected(reason.BrokenChain, "")
	}},
	{"broken-chain-prev-unsupported-alg", func(b *builder, c *Case) {
		c.Description = "The offer's prev is a Digest with alg \"sha-512\" (the SHA-512 of chain[0]), an alg this document does not define. A receiver that does not implement a Digest's alg treats the prev check as failed."
		c.HC = hc("HC-06", "HC-08", "HC-47")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, prevDigest(sha512Digest(c0.Octets))), c0)
		c.Expected = rejected(reason.BrokenChain, "")
	}},

	// cycle.
	{"cycle-repeated-issuer", func(b *builder, c *Case) {
		c.Description = "The assistant handed work to the planner, which handed it back to the assistant, which now offers it to the coder: the assistant is iss of chain[0] and of the offer. No re-entry is allowed."
		c.HC = hc("HC-49")
		ch := b.chainOf(JWS, t0+20, assistant, planner, assistant)
		c.Input = encodeHandoff(JSON, b.signed(JWS, assistant, coder, now-5, after(ch[1])), ch...)
		c.Expected = rejected(reason.Cycle, "")
	}},
	{"cycle-receiver-was-issuer", func(b *builder, c *Case) {
		c.Description = "chain[0] is an offer the coder itself made to the planner; the planner now hands the work back to the coder. The receiver appears as iss of an earlier element."
		c.HC = hc("HC-49")
		c0 := b.signed(COSE, coder, planner, t0+30)
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.Cycle, "")
	}},
	{"cycle-receiver-was-audience", func(b *builder, c *Case) {
		c.Description = "chain[0] is the assistant's offer to the coder; the coder now offers to itself. No AgentId is iss twice, but the receiver appears as aud of an earlier element."
		c.HC = hc("HC-49")
		c0 := b.signed(JWS, assistant, coder, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, coder, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.Cycle, "")
	}},

	// too-deep.
	{"too-deep", func(b *builder, c *Case) {
		c.Description = "A chain of 17 COSE elements through 17 distinct agents, otherwise valid, to a receiver whose maximum is 16."
		c.HC = hc("HC-50", "HC-61")
		hops := hopAgents(17)
		register(hops...)
		c.Trust = append(append([]*agent{}, baseTrust...), hops...)
		ch := b.chainOf(COSE, t0, append(hops, planner)...)
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, after(ch[len(ch)-1])), ch...)
		c.Expected = rejected(reason.TooDeep, "")
	}},

	// unverifiable-ref.
	{"unverifiable-ref-object-missing", func(b *builder, c *Case) {
		c.Description = "Policy requires every reference to verify; the receiver cannot obtain the object the reference names."
		c.HC = hc("HC-11", "HC-36")
		c.Receiver.RefsPolicy = "required"
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, withRefs(digestRef(refLoc1, refObj1))))
		c.Expected = rejected(reason.UnverifiableRef, full, unverifiable)
	}},
	{"unverifiable-ref-unsupported-alg", func(b *builder, c *Case) {
		c.Description = "Policy requires every reference to verify; the reference's dig has alg \"sha-512\", which the receiver does not implement (the object is available). Unverifiable for refs, not a mismatch."
		c.HC = hc("HC-06", "HC-08", "HC-11")
		c.Receiver.RefsPolicy = "required"
		c.object(refLoc1, refObj1, nil)
		ref := ref.Ref{Kind: ref.KindDigest, Dig: sha512Digest(refObj1), Loc: refLoc1}
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, withRefs(ref)))
		c.Expected = rejected(reason.UnverifiableRef, full, unverifiable)
	}},
	{"unverifiable-ref-unknown-kind", func(b *builder, c *Case) {
		c.Description = "Policy requires every reference to verify; the reference's kind is an absolute URI naming a definition the receiver does not implement, so it cannot be checked (the object is available)."
		c.HC = hc("HC-10", "HC-11")
		c.Receiver.RefsPolicy = "required"
		c.object(refLoc1, refObj1, nil)
		ref := ref.Ref{Kind: "https://example.com/ref-kinds/blob", Dig: digest.SHA256(refObj1), Loc: refLoc1}
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, withRefs(ref)))
		c.Expected = rejected(reason.UnverifiableRef, full, unverifiable)
	}},

	// ref-mismatch.
	{"ref-mismatch-digest", func(b *builder, c *Case) {
		c.Description = "Policy check-available; the object the receiver obtained for the reference has a different digest."
		c.HC = hc("HC-11", "HC-36")
		c.Receiver.RefsPolicy = "check-available"
		c.object(refLoc1, refObj2, nil)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, withRefs(digestRef(refLoc1, refObj1))))
		c.Expected = rejected(reason.RefMismatch, full, mismatch)
	}},
	{"ref-mismatch-salted-digest", func(b *builder, c *Case) {
		c.Description = "Policy required; two references. The first (digest) verifies; the second (salted-digest) comes with the right octets but another salt, so salt || octets has another digest."
		c.HC = hc("HC-09", "HC-11")
		c.Receiver.RefsPolicy = "required"
		c.object(refLoc1, refObj1, nil)
		c.object(refLoc2, refObj2, fixedBytes("another salt", 32))
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5,
			withRefs(digestRef(refLoc1, refObj1), saltedRef(refLoc2, refSalt2, refObj2))))
		c.Expected = rejected(reason.RefMismatch, full, verified, mismatch)
	}},

	// policy.
	{"policy-dialog-mismatch", func(b *builder, c *Case) {
		c.Description = "The host message's dialog is ctx-vectors; the offer's dialog is ctx-elsewhere."
		c.HC = hc("HC-36")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, inDialog("ctx-elsewhere")))
		c.Expected = rejected(reason.Policy, "")
	}},
	{"policy-full-chain-required-absent", func(b *builder, c *Case) {
		c.Description = "The receiver requires a full, verified chain; the offer names a prev and no chain is carried."
		c.HC = hc("HC-36")
		c.Receiver.RequireFullChain = true
		c0 := b.signed(JWS, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)))
		c.Expected = rejected(reason.Policy, absent)
	}},
	{"policy-full-chain-required-partial", func(b *builder, c *Case) {
		c.Description = "The receiver requires a full, verified chain; the chain verifies but its first element has a prev."
		c.HC = hc("HC-36", "HC-48")
		c.Receiver.RequireFullChain = true
		ch := b.chainOf(COSE, t0+20, assistant, researcher, planner)
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, after(ch[1])), ch[1])
		c.Expected = rejected(reason.Policy, partial)
	}},
	{"policy-full-chain-required-unverifiable", func(b *builder, c *Case) {
		c.Description = "The receiver requires a full, verified chain; chain[0] is signed by an agent it does not trust."
		c.HC = hc("HC-36", "HC-46")
		c.Receiver.RequireFullChain = true
		c0 := b.signed(JWS, mallory, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.Policy, unverif)
	}},
	{"policy-origin-not-trusted", func(b *builder, c *Case) {
		c.Description = "The receiver requires a chain from a trusted origin, the assistant. The chain is full, but it starts at the researcher."
		c.HC = hc("HC-58")
		c.Receiver.RequireFullChain = true
		c.Receiver.TrustedOrigins = ids(assistant)
		c0 := b.signed(JWS, researcher, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.Policy, full)
	}},
	{"policy-trusted-origin-needs-full-chain", func(b *builder, c *Case) {
		c.Description = "The receiver needs the origin (trusted_origins lists the assistant) without setting require_full_chain. Knowing the origin takes a full chain; this one is partial."
		c.HC = hc("HC-48", "HC-58")
		c.Receiver.TrustedOrigins = ids(assistant)
		ch := b.chainOf(JWS, t0+20, assistant, researcher, planner)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(ch[1])), ch[1])
		c.Expected = rejected(reason.Policy, partial)
	}},

	// The order of the checks.
	{"order-audience-before-freshness", func(b *builder, c *Case) {
		c.Description = "An expired offer to another agent: step 2 (wrong-audience) fails before step 3 (stale)."
		c.HC = hc("HC-30")
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, researcher, now-130))
		c.Expected = rejected(reason.WrongAudience, "")
	}},
	{"order-dialog-before-chain", func(b *builder, c *Case) {
		c.Description = "An offer in another dialog whose chain does not connect (continuity): step 5 (policy) fails before step 6, which does not run."
		c.HC = hc("HC-30", "HC-36")
		c0 := b.signed(JWS, assistant, researcher, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0), inDialog("ctx-elsewhere")), c0)
		c.Expected = rejected(reason.Policy, "")
	}},
	{"order-chain-before-refs", func(b *builder, c *Case) {
		c.Description = "A chain that does not connect (continuity) and a reference whose object does not match, under policy required: step 6 (broken-chain) fails first, and step 7 does not run, so the reference stays \"not checked\"."
		c.HC = hc("HC-11", "HC-30")
		c.Receiver.RefsPolicy = "required"
		c.object(refLoc1, refObj2, nil)
		c0 := b.signed(JWS, assistant, researcher, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0), withRefs(digestRef(refLoc1, refObj1))), c0)
		c.Expected = rejected(reason.BrokenChain, "", notChecked)
	}},
	{"order-equivocation-before-dialog", func(b *builder, c *Case) {
		c.Description = "Two offers with one (iss, hop) and different octets, the second in another dialog: step 4 (equivocation) comes before step 5, so the dialog is not what is reported."
		c.HC = hc("HC-30", "HC-53")
		o1 := b.offer(planner, coder, now-5)
		o2 := *o1
		o2.Dialog = "ctx-elsewhere"
		c.Prior = [][]byte{encodeHandoff(CBOR, sign(COSE, o1))}
		c.Input = encodeHandoff(CBOR, sign(COSE, &o2))
		c.Expected = rejected(reason.Equivocation, "")
	}},
}
