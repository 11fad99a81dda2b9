package main

import (
	"encoding/json"
	"fmt"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
)

// The exactness suite: for each rule of the draft that a receiver could
// apply too strictly or too loosely, a case that a verifier stricter (or
// looser) than the text gets wrong. Each description names the sentence
// (of the draft, or of the RFC the draft builds on where it is silent)
// that decides the outcome.

func init() { cases = append(cases, exactCases...) }

// trustAs binds a's key to the AgentId id as well, in the vector's trust.
func (c *Case) trustAs(id string, a *agent) {
	if c.TrustJWK == nil {
		c.TrustJWK = map[string][]json.RawMessage{}
	}
	c.TrustJWK[id] = append(c.TrustJWK[id], a.jwk())
}

// jwkWithKID is a's public JWK with another kid.
func jwkWithKID(a *agent, kid string) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(a.jwk(), &m); err != nil {
		panic(err)
	}
	m["kid"] = kid
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// jwsRaw signs the JSON payload p for a under a protected header with alg,
// kid and typ as the library writes them, plus the members in extra
// (JSON text, written as is after typ).
func jwsRaw(a *agent, p []byte, extra string) handoff.Signed {
	h := fmt.Sprintf(`{"alg":%q,"kid":%q,"typ":"agent-handoff+jwt"`, a.alg, a.kid)
	if extra != "" {
		h += "," + extra
	}
	return rawJWS(a, h+"}", p)
}

// coseRaw signs the CBOR payload p for a with the library's protected
// header and an empty unprotected header, in preferred serialization.
func coseRaw(a *agent, p []byte) handoff.Signed {
	return signCOSE(a, protOf(coseHeader(a)), emptyMap, p).preferred()
}

// coseNoKID is a's protected header without kid.
func coseNoKID(a *agent) []byte {
	return protOf(map[int64]any{labelAlg: coseAlg(a), labelContentType: contentType})
}

func coseAlg(a *agent) int64 {
	switch a.alg {
	case handoff.ES384:
		return -35
	case handoff.EdDSA:
		return -8
	}
	return coseES256
}

// unprotKID is an unprotected header holding only kid.
func unprotKID(kid []byte) []byte { return cborItem(map[int64]any{labelKID: kid}) }

// malformedJSON is a chain element of a JSON Handoff that is not a signed
// handoff: base64url text (so, in JSON, a COSE element) whose octets are
// not a COSE_Sign1.
const malformedJSON = "not-a-signed-element"

// malformedOctets are the octets malformedJSON carries.
var malformedOctets = func() []byte {
	b, err := b64.DecodeString(malformedJSON)
	if err != nil {
		panic(err)
	}
	return b
}()

// malformedCBOR is a chain element of a CBOR Handoff that is not a signed
// handoff: a byte string holding a CBOR map, not a tagged COSE_Sign1.
var malformedCBOR = cborItem(map[string]any{"not": "a COSE_Sign1"})

// handoffJSONRaw writes a JSON Handoff object from member text.
func handoffJSONRaw(members string) []byte { return []byte("{" + members + "}") }

const (
	replacement = "\uFFFD"
	// bigNow is a clock beyond 2^53 - 1 seconds.
	bigNow int64 = 1<<53 + 1000
	// hugeNow is a clock 808 s before 2^63 seconds.
	hugeNow int64 = 1<<63 - 1 - 807
)

var exactCases = []caseDef{
	// Issue point 1: lone surrogates (RFC 8259 section 8.2, RFC 7493
	// section 2.1) and invalid UTF-8 (RFC 8949 section 3.1) are malformed.
	{"lone-surrogate-aud-jws", func(b *builder, c *Case) {
		c.Description = "The offer's aud is written with a lone low surrogate escape, \"...coder\\udc00\"; the receiver's AgentId ends in U+FFFD. A string with an unpaired surrogate is not a sequence of Unicode characters (RFC 8259 section 8.2; I-JSON, RFC 7493 section 2.1, forbids it): the payload is malformed, a signed-form failure at step 1. A decoder that replaces the escape with U+FFFD would find aud equal to the receiver's AgentId and accept: two distinct names must never compare equal."
		c.HC = hc("HC-13", "HC-30")
		c.Receiver.Self = string(coder.id) + replacement
		o := b.offer(planner, coder, now-5)
		p := jsonSetRaw(offerJSON(o), "aud", `"spiffe://r.example/agent/coder\udc00"`)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"lone-surrogate-iss-jws", func(b *builder, c *Case) {
		c.Description = "The offer's iss ends in a lone high surrogate escape, \"...planner\\ud800\", and is signed with the planner's key, which the trust configuration also binds to \"...planner\" followed by U+FFFD. The payload is malformed (RFC 8259 section 8.2): bad-signature. A lossy decoder would look up the U+FFFD name and accept."
		c.HC = hc("HC-13", "HC-21")
		c.trustAs(string(planner.id)+replacement, planner)
		o := b.offer(planner, coder, now-5)
		p := jsonSetRaw(offerJSON(o), "iss", `"spiffe://p.example/agent/planner\ud800"`)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"lone-surrogate-dialog-jws", func(b *builder, c *Case) {
		c.Description = "The offer's dialog ends in a lone low surrogate escape; the host message's dialog ends in U+FFFD. The payload is malformed (RFC 8259 section 8.2): bad-signature at step 1, never a dialog match at step 5."
		c.HC = hc("HC-13", "HC-36")
		c.Receiver.Dialog = dialog + replacement
		o := b.offer(planner, coder, now-5)
		p := jsonSetRaw(offerJSON(o), "dialog", `"ctx-vectors\udc00"`)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"lone-surrogate-hop-jws", func(b *builder, c *Case) {
		c.Description = "The offer's hop ends in a lone high surrogate escape. Not a string of Unicode characters, and not a HopId either: bad-signature."
		c.HC = hc("HC-12", "HC-13")
		o := b.offer(planner, coder, now-5)
		p := jsonSetRaw(offerJSON(o), "hop", `"`+string(o.Hop)+`\ud800"`)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"invalid-utf8-aud-cose", func(b *builder, c *Case) {
		c.Description = "The COSE counterpart of lone-surrogate-aud-jws: the CBOR text string of aud ends in the octets ED B3 80, the CESU-style encoding of the surrogate U+DCC0, which is not UTF-8. A CBOR text string must be valid UTF-8 (RFC 8949 sections 3.1 and 5.3.1): the payload is invalid, bad-signature. The receiver's AgentId ends in U+FFFD, which a lossy decoder would produce."
		c.HC = hc("HC-13", "HC-17")
		c.Receiver.Self = string(coder.id) + replacement
		o := b.offer(planner, coder, now-5)
		o.Aud = coder.id + "XYZ"
		p := offerCBOR(o)
		p = []byte(replaceOnce(string(p), string(coder.id)+"XYZ", string(coder.id)+"\xed\xb3\x80"))
		c.Input = encodeHandoff(CBOR, coseRaw(planner, p))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"surrogate-pair-aud-jws", func(b *builder, c *Case) {
		c.Description = "The other side of the surrogate rule: aud is written with a valid surrogate pair escape, \"...coder-\\ud83d\\ude00\", which is U+1F600, and the receiver's AgentId ends in that character. A decoder that refuses every surrogate escape refuses a valid JSON string (RFC 8259 section 7). Accepted."
		c.HC = hc("HC-30")
		c.Receiver.Self = string(coder.id) + "-\U0001F600"
		o := b.offer(planner, coder, now-5)
		p := jsonSetRaw(offerJSON(o), "aud", `"spiffe://r.example/agent/coder-\ud83d\ude00"`)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""))
		c.Expected = accepted(full)
	}},

	// Issue point 2: members a receiver does not understand are ignored.
	{"unknown-members-case-variants-jws", func(b *builder, c *Case) {
		c.Description = "The offer's payload has AUD (another agent), Task and Iss (mallory) beside the defined aud, task and iss. Member names are case-sensitive (RFC 8259 section 4 compares them as strings), so these are members this receiver does not understand, and \"a receiver MUST ignore members it does not understand\" (section 2). A decoder that folds case, as some JSON libraries do, reads the wrong aud or refuses. Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5, task("task-1"))
		p := jsonInsert(offerJSON(o), `"AUD":"spiffe://x.example/agent/researcher","Task":"task-other","Iss":"spiffe://m.example/agent/mallory"`)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""))
		c.Expected = accepted(full)
	}},
	{"unknown-members-case-variants-cose", func(b *builder, c *Case) {
		c.Description = "The COSE counterpart: the CBOR payload has AUD, Task and Iss beside aud, task and iss. Unknown members, ignored (section 2). Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5, task("task-1"))
		p := cborAppend(offerCBOR(o), cborItem("AUD"), cborItem(string(researcher.id)),
			cborItem("Task"), cborItem("task-other"), cborItem("Iss"), cborItem(string(mallory.id)))
		c.Input = encodeHandoff(CBOR, coseRaw(planner, p))
		c.Expected = accepted(full)
	}},
	{"handoff-json-case-variant-members", func(b *builder, c *Case) {
		c.Description = "A JSON Handoff object with members Chain (an array holding text that is no signed handoff), Offer and CHAIN beside offer. They are not offer or chain: unknown members of the Handoff object, ignored (section 2). The offer has no prev and no chain is carried. Accepted, full."
		c.HC = hc("HC-01")
		s := b.signed(JWS, planner, coder, now-5)
		c.Input = handoffJSONRaw(`"offer":` + elementJSON(s) + `,"Chain":["` + malformedJSON + `"],"Offer":"x","CHAIN":7`)
		c.Expected = accepted(full)
	}},
	{"handoff-cbor-case-variant-members", func(b *builder, c *Case) {
		c.Description = "The CBOR counterpart: a CBOR Handoff object with Chain (an array holding a byte string that is no COSE_Sign1) and Offer beside offer. Unknown members, ignored. Accepted, full."
		c.HC = hc("HC-01")
		s := b.signed(COSE, planner, coder, now-5)
		c.Input = handoffCBORRaw(cborItem("offer"), elementItem(s), cborItem("Chain"), append([]byte{0x81}, cborItem(malformedOctets)...),
			cborItem("Offer"), cborItem(42))
		c.Expected = accepted(full)
	}},
	{"jws-header-case-variant-typ", func(b *builder, c *Case) {
		c.Description = "The JWS protected header has typ \"agent-handoff+jwt\" and also Typ \"JWT\". Header Parameter names are case-sensitive (RFC 7515 section 4); Typ is a parameter this receiver does not understand and ignores (RFC 7515 section 4: unknown parameters that are not in crit are ignored). Accepted."
		c.HC = hc("HC-01", "HC-14")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, offerJSON(o), `"Typ":"JWT"`))
		c.Expected = accepted(full)
	}},
	{"jws-header-case-variant-alg-kid-crit", func(b *builder, c *Case) {
		c.Description = "The JWS protected header has Alg \"none\", Kid and Crit beside alg, kid and typ. None of them is alg, kid or crit: unknown parameters, ignored (RFC 7515 section 4). A parser that folds case takes alg to be none, or sees crit. Accepted."
		c.HC = hc("HC-01", "HC-14", "HC-15")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, offerJSON(o), `"Alg":"none","Kid":"mallory","Crit":["exp"]`))
		c.Expected = accepted(full)
	}},
	{"unknown-member-cbor-tags", func(b *builder, c *Case) {
		c.Description = "The COSE payload has two members this version does not define whose values are tagged: 1(...) (an epoch time, RFC 8949 section 3.4.2) and tag 4711, which no registry assigns. CDDL's \"* text => any\" admits any value, and a tag a receiver does not know is still valid CBOR (RFC 8949 section 3.4). Ignored. Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5)
		p := cborAppend(offerCBOR(o), cborItem("x-when"), cborTagEpoch, cborItem("x-opaque"), cborTagUnknown)
		c.Input = encodeHandoff(CBOR, coseRaw(planner, p))
		c.Expected = accepted(full)
	}},
	{"unknown-member-cbor-nan", func(b *builder, c *Case) {
		c.Description = "The COSE payload has an unknown member whose value is a half-precision NaN (F9 7E 00), a valid CBOR float (RFC 8949 section 3.3). Ignored. Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, coseRaw(planner, cborAppend(offerCBOR(o), cborItem("x-score"), cborNaN)))
		c.Expected = accepted(full)
	}},
	{"unknown-member-cbor-infinities", func(b *builder, c *Case) {
		c.Description = "The COSE payload has two unknown members whose values are +Infinity and -Infinity (F9 7C 00, F9 FC 00), valid CBOR floats. Ignored. Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5)
		p := cborAppend(offerCBOR(o), cborItem("x-max"), cborPosInf, cborItem("x-min"), cborNegInf)
		c.Input = encodeHandoff(CBOR, coseRaw(planner, p))
		c.Expected = accepted(full)
	}},
	{"unknown-member-cbor-integer-keyed-map", func(b *builder, c *Case) {
		c.Description = "The COSE payload has an unknown member whose value is a map with integer keys, {1: 2, -1: \"x\", -2147483648: null}. Only the payload's own members are \"text =>\"; the value of an unknown member is any. Ignored. Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, coseRaw(planner, cborAppend(offerCBOR(o), cborItem("x-labels"), cborIntKeyMap)))
		c.Expected = accepted(full)
	}},
	{"unknown-member-cbor-large-negative-integer", func(b *builder, c *Case) {
		c.Description = "The COSE payload has an unknown member whose value is -18446744073709551616 (-2^64, 3B FF FF FF FF FF FF FF FF), the most negative integer of major type 1, which no signed 64-bit type holds. Ignored. Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, coseRaw(planner, cborAppend(offerCBOR(o), cborItem("x-offset"), cborMinNeg64)))
		c.Expected = accepted(full)
	}},
	{"unknown-member-cbor-undefined", func(b *builder, c *Case) {
		c.Description = "The COSE payload has an unknown member whose value is undefined (F7), a simple value CBOR defines (RFC 8949 section 3.3) and CDDL's any admits. Ignored. Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, coseRaw(planner, cborAppend(offerCBOR(o), cborItem("x-unset"), cborUndefined)))
		c.Expected = accepted(full)
	}},
	{"handoff-cbor-unknown-unusual-values", func(b *builder, c *Case) {
		c.Description = "A CBOR Handoff object with unknown members beside offer whose values are NaN, a tag no registry assigns, a map with integer keys, -2^64 and +Infinity. Members of the Handoff object are not signed, and unknown ones are ignored (section 2). Accepted."
		c.HC = hc("HC-01")
		s := b.signed(COSE, planner, coder, now-5)
		c.Input = handoffCBORRaw(cborItem("offer"), elementItem(s), cborItem("x-nan"), cborNaN, cborItem("x-tag"), cborTagUnknown,
			cborItem("x-map"), cborIntKeyMap, cborItem("x-neg"), cborMinNeg64, cborItem("x-inf"), cborPosInf)
		c.Expected = accepted(full)
	}},
	{"unknown-member-json-unusual-values", func(b *builder, c *Case) {
		c.Description = "The JWS payload has unknown members whose values are 123456789012345678901234567890 (beyond 64 bits), 1e400 (beyond IEEE double range), -1e-400, a nested object and null. All valid JSON (RFC 8259 section 6 lets an implementation limit the range and precision of numbers it uses, not of numbers it ignores). Ignored. Accepted."
		c.HC = hc("HC-01")
		o := b.offer(planner, coder, now-5)
		p := jsonInsert(offerJSON(o), `"x-big":123456789012345678901234567890,"x-huge":1e400,"x-tiny":-1e-400,"x-nested":{"a":[null,true,{"b":{}}]},"x-null":null`)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""))
		c.Expected = accepted(full)
	}},
	{"handoff-json-unknown-unusual-values", func(b *builder, c *Case) {
		c.Description = "A JSON Handoff object with unknown members whose values are 1e400, a number beyond 64 bits and a nested object. Ignored. Accepted."
		c.HC = hc("HC-01")
		s := b.signed(JWS, planner, coder, now-5)
		c.Input = handoffJSONRaw(`"offer":` + elementJSON(s) + `,"x-huge":1e400,"x-big":-123456789012345678901234567890,"x-nested":{"1":[{}]}`)
		c.Expected = accepted(full)
	}},
	{"unknown-members-nested", func(b *builder, c *Case) {
		c.Description = "Unknown members inside obo (a Principal) and inside a reference (a ContextRef, whose CDDL ends in \"* text => any\"), in a COSE offer. Only Digest is closed. Ignored. Accepted; the reference is not checked."
		c.HC = hc("HC-01", "HC-57")
		ref := digestRef(refLoc1, refObj1)
		ref.Extra = map[string]any{"media-type": "application/json"}
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, withRefs(ref), func(o *handoff.Offer) {
			o.Obo = &handoff.Principal{Sub: "u-8f2a", Extra: map[string]any{"acr": "phr"}}
		}))
		c.Expected = accepted(full, notChecked)
	}},
	{"chain-element-unknown-members", func(b *builder, c *Case) {
		c.Description = "chain[0] carries a member this version does not define, covered by its signature, which its forwarder passed on unchanged (a forwarder MUST NOT remove members, section 2). Ignored. Full, accepted."
		c.HC = hc("HC-01", "HC-20")
		c0 := b.signed(JWS, assistant, planner, t0+30, func(o *handoff.Offer) {
			o.Extra = map[string]any{"https://example.com/ext/budget": map[string]any{"tokens": 4000}}
		})
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = accepted(full)
	}},
	{"prev-digest-not-closed", func(b *builder, c *Case) {
		c.Description = "The other side of the unknown-member rule: the offer's prev is a Digest with a third member. \"Digest is a closed map: it has exactly the two members shown\" (section 2), the one exception to ignoring unknown members, so the payload does not match its CDDL: bad-signature."
		c.HC = hc("HC-01", "HC-06")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		o := b.offer(planner, coder, now-5, after(c0))
		p := jsonPayload(o, func(m map[string]any) {
			m["prev"] = map[string]any{"alg": "sha-256", "val": c0.Digest().B64(), "note": "x"}
		})
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""), c0)
		c.Expected = rejected(reason.BadSignature, "")
	}},

	// Issue point 3: valid CBOR that is not in preferred serialization.
	{"cose-payload-not-preferred", func(b *builder, c *Case) {
		c.Description = "The COSE payload is valid CBOR that is not in preferred serialization: an indefinite-length map whose integers and string lengths all use eight-octet heads. The draft asks for no deterministic or preferred encoding, and RFC 8949 section 4.1 makes preferred serialization a recommendation for encoders only; the signature covers these octets. Accepted."
		c.HC = hc("HC-17", "HC-20")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, coseRaw(planner, widePayload(offerCBOR(o))))
		c.Expected = accepted(full)
	}},
	{"cose-envelope-not-preferred", func(b *builder, c *Case) {
		c.Description = "The COSE_Sign1 envelope is valid CBOR that is not preferred: tag 18 in a two-octet head (D8 12), the array head in two octets, and the byte strings' lengths in five. The signature is over the Sig_structure, which encodes the protected header and payload afresh, so it still verifies. Accepted."
		c.HC = hc("HC-17", "HC-20")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, signCOSE(planner, protOf(coseHeader(planner)), emptyMap, offerCBOR(o)).wide())
		c.Expected = accepted(full)
	}},
	{"cose-protected-header-not-preferred", func(b *builder, c *Case) {
		c.Description = "The COSE protected header map is valid CBOR in eight-octet heads (alg -7 as 3B 00 00 00 00 00 00 00 06). The protected header is signed as these octets. Accepted."
		c.HC = hc("HC-17")
		o := b.offer(planner, coder, now-5)
		prot := wide(map[any]any{labelAlg: coseES256, labelContentType: contentType, labelKID: []byte(planner.kid)}, false)
		c.Input = encodeHandoff(CBOR, signCOSE(planner, prot, emptyMap, offerCBOR(o)).preferred())
		c.Expected = accepted(full)
	}},
	{"handoff-cbor-not-preferred", func(b *builder, c *Case) {
		c.Description = "The CBOR Handoff object is an indefinite-length map whose key and byte string use eight-octet heads; the COSE element inside is unchanged. Valid CBOR (RFC 8949 section 3.2.2 for indefinite lengths). Accepted."
		c.HC = hc("HC-19")
		s := b.signed(COSE, planner, coder, now-5)
		c.Input = wide(map[any]any{"offer": s.Octets}, true)
		c.Expected = accepted(full)
	}},
	{"handoff-json-whitespace-and-order", func(b *builder, c *Case) {
		c.Description = "A JSON Handoff object with chain before offer, spaces around the colons and a line break after each member. Member order and insignificant whitespace carry no meaning in JSON (RFC 8259 sections 2 and 4). Full, accepted."
		c.HC = hc("HC-19")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		s := b.signed(JWS, planner, coder, now-5, after(c0))
		c.Input = []byte("{\n  \"chain\" : [ " + elementJSON(c0) + " ],\n  \"offer\" : " + elementJSON(s) + "\n}\n")
		c.Expected = accepted(full)
	}},
	{"retransmission-handoff-cbor-re-encoded", func(b *builder, c *Case) {
		c.Description = "The same COSE element first arrived in a preferred CBOR Handoff and now arrives in a non-preferred one (indefinite-length map, long heads). The handoff digest is over the element's octets only, which are unchanged: a retransmission."
		c.HC = hc("HC-20", "HC-35", "HC-38")
		s := b.signed(COSE, planner, coder, now-5)
		c.Prior = [][]byte{encodeHandoff(CBOR, s)}
		c.Input = wide(map[any]any{"offer": s.Octets}, true)
		c.Expected = retransmission()
	}},
	{"equivocation-cose-envelope-re-encoded", func(b *builder, c *Case) {
		c.Description = "The receiver took a COSE offer; the same COSE_Sign1 now arrives with its envelope re-encoded in long heads. Its signature still verifies, but the octets differ, so the handoff digest differs (HC-20: the digest is over the octets as sent): same (iss, hop), another digest, equivocation. A receiver that accepts non-preferred CBOR must not accept the hop twice."
		c.HC = hc("HC-20", "HC-35", "HC-53")
		o := b.offer(planner, coder, now-5)
		parts := signCOSE(planner, protOf(coseHeader(planner)), emptyMap, offerCBOR(o))
		c.Prior = [][]byte{encodeHandoff(CBOR, parts.preferred())}
		c.Input = encodeHandoff(CBOR, parts.wide())
		c.Expected = rejected(reason.Equivocation, "")
	}},
	{"equivocation-cose-payload-re-encoded", func(b *builder, c *Case) {
		c.Description = "The planner signed the same offer twice, once over a preferred CBOR payload (received first) and once over a non-preferred encoding of the same members. Two elements, one (iss, hop): equivocation, never a second acceptance."
		c.HC = hc("HC-20", "HC-52", "HC-53")
		o := b.offer(planner, coder, now-5)
		c.Prior = [][]byte{encodeHandoff(CBOR, coseRaw(planner, offerCBOR(o)))}
		c.Input = encodeHandoff(CBOR, coseRaw(planner, widePayload(offerCBOR(o))))
		c.Expected = rejected(reason.Equivocation, "")
	}},

	// Issue point 4: the COSE unprotected header.
	{"cose-kid-in-unprotected-header", func(b *builder, c *Case) {
		c.Description = "A COSE_Sign1 whose protected header has alg and content type, and whose unprotected header has kid, as many COSE libraries write it. The draft requires alg and content type in the protected header and makes kid a SHOULD there (section 3.2); it forbids no unprotected parameter (RFC 9052 section 3). kid only selects which key of iss to try. Accepted."
		c.HC = hc("HC-17", "HC-18")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, signCOSE(planner, coseNoKID(planner), unprotKID([]byte(planner.kid)), offerCBOR(o)).preferred())
		c.Expected = accepted(full)
	}},
	{"cose-kid-in-unprotected-header-names-another-key", func(b *builder, c *Case) {
		c.Description = "The unprotected kid names the researcher's key, but the message is signed with the planner's, and iss is the planner. An unprotected parameter decides nothing but which trusted key to try first: the keys bound to iss are tried, and the planner's verifies. Accepted."
		c.HC = hc("HC-17", "HC-21")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(CBOR, signCOSE(planner, coseNoKID(planner), unprotKID([]byte(researcher.kid)), offerCBOR(o)).preferred())
		c.Expected = accepted(full)
	}},
	{"equivocation-cose-unprotected-header-changed", func(b *builder, c *Case) {
		c.Description = "The receiver took a COSE offer whose unprotected header holds kid; the same message now arrives with an empty unprotected header. The signature still verifies (the unprotected header is not signed), but the octets differ: same (iss, hop), another digest, equivocation, not a second acceptance."
		c.HC = hc("HC-20", "HC-53")
		o := b.offer(planner, coder, now-5)
		first := signCOSE(planner, coseNoKID(planner), unprotKID([]byte(planner.kid)), offerCBOR(o))
		second := first
		second.unprot = emptyMap
		c.Prior = [][]byte{encodeHandoff(CBOR, first.preferred())}
		c.Input = encodeHandoff(CBOR, second.preferred())
		c.Expected = rejected(reason.Equivocation, "")
	}},
	{"chain-element-kid-in-unprotected-header", func(b *builder, c *Case) {
		c.Description = "chain[0] is a COSE_Sign1 with its kid in the unprotected header. Each chain element is checked as in step 1, which allows it. Full, accepted."
		c.HC = hc("HC-17", "HC-46")
		c0o := b.offer(assistant, planner, t0+30)
		c0 := signCOSE(assistant, coseNoKID(assistant), unprotKID([]byte(assistant.kid)), offerCBOR(c0o)).preferred()
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, after(c0)), c0)
		c.Expected = accepted(full)
	}},

	// Issue point 5: JWS header parameters the draft does not forbid.
	{"jws-header-jwk-of-signer", func(b *builder, c *Case) {
		c.Description = "The JWS protected header carries jwk, the signer's own public key, as some JOSE libraries add by default. Only crit is forbidden (section 3.1); \"a key carried inside the message itself ... shows nothing about who signed\" (section 3.4), so it is ignored, never used. The planner's trusted key verifies. Accepted."
		c.HC = hc("HC-14", "HC-21")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, offerJSON(o), `"jwk":`+string(planner.jwk())))
		c.Expected = accepted(full)
	}},
	{"jws-header-jwk-of-attacker", func(b *builder, c *Case) {
		c.Description = "mallory signs an offer whose iss is the planner, and puts its own public key in the header's jwk, with its own thumbprint as kid. A verifier that uses the embedded key accepts. The draft: a key is used only if the trust configuration binds it to iss (section 3.4). kid names no key of the planner; no key bound to the planner verifies: untrusted-key."
		c.HC = hc("HC-21")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, jwsRaw(mallory, offerJSON(o), `"jwk":`+string(mallory.jwk())))
		c.Expected = rejected(reason.UntrustedKey, "")
	}},
	{"jws-header-x509-and-jku", func(b *builder, c *Case) {
		c.Description = "The JWS protected header carries x5c (a certificate that is not even valid DER), x5t, x5t#S256, x5u and jku. The draft forbids only crit; these parameters are ignored and never fetched or used (section 3.4: a key is used only if the trust configuration binds it to iss). Accepted."
		c.HC = hc("HC-14", "HC-21")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, offerJSON(o),
			`"x5c":["TUlJQm5vdGFjZXJ0aWZpY2F0ZQ=="],"x5t":"bm90LWEtdGh1bWJwcmludA","x5t#S256":"bm90LWEtdGh1bWJwcmludC1laXRoZXI","x5u":"https://m.example/cert.pem","jku":"https://m.example/jwks.json"`))
		c.Expected = accepted(full)
	}},
	{"jws-header-unknown-large-numbers", func(b *builder, c *Case) {
		c.Description = "The JWS protected header has unknown parameters whose values are 123456789012345678901234567890 and 1e400. Unknown parameters not listed in crit are ignored (RFC 7515 section 4), whatever their value. Accepted."
		c.HC = hc("HC-01", "HC-14")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, offerJSON(o), `"x-serial":123456789012345678901234567890,"x-limit":1e400`))
		c.Expected = accepted(full)
	}},
	{"jws-header-b64-without-crit", func(b *builder, c *Case) {
		c.Description = "The JWS protected header has b64 false without crit (the payload is in fact base64url-encoded and signed as usual). RFC 7797 section 6 requires b64 to be listed in crit whenever it is used, and the draft forbids crit: such a header is not a valid signed handoff. bad-signature."
		c.HC = hc("HC-14")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, jwsRaw(planner, offerJSON(o), `"b64":false`))
		c.Expected = rejected(reason.BadSignature, "")
	}},

	// typ, compared as RFC 7515 section 4.1.9 says.
	{"jws-typ-with-application-prefix", func(b *builder, c *Case) {
		c.Description = "typ is \"application/agent-handoff+jwt\", the full media type. RFC 7515 section 4.1.9: \"application/\" may be omitted from typ, and a recipient using the media type value must treat it as if \"application/\" were prepended to a value without a slash. Both spellings name application/agent-handoff+jwt. Accepted."
		c.HC = hc("HC-14", "HC-60")
		o := b.offer(planner, coder, now-5)
		h := fmt.Sprintf(`{"alg":"ES256","kid":%q,"typ":"application/agent-handoff+jwt"}`, planner.kid)
		c.Input = encodeHandoff(JSON, rawJWS(planner, h, offerJSON(o)))
		c.Expected = accepted(full)
	}},
	{"jws-typ-case-insensitive", func(b *builder, c *Case) {
		c.Description = "typ is \"Agent-Handoff+JWT\". Media type names are case-insensitive (RFC 7515 section 4.1.9 refers to RFC 2045; RFC 6838 section 4.2). Accepted."
		c.HC = hc("HC-14", "HC-60")
		o := b.offer(planner, coder, now-5)
		h := fmt.Sprintf(`{"alg":"ES256","kid":%q,"typ":"Agent-Handoff+JWT"}`, planner.kid)
		c.Input = encodeHandoff(JSON, rawJWS(planner, h, offerJSON(o)))
		c.Expected = accepted(full)
	}},
	{"jws-typ-prefix-in-capitals", func(b *builder, c *Case) {
		c.Description = "typ is \"APPLICATION/agent-handoff+jwt\": the full media type, with the type name in capitals. Accepted."
		c.HC = hc("HC-14", "HC-60")
		o := b.offer(planner, coder, now-5)
		h := fmt.Sprintf(`{"alg":"ES256","kid":%q,"typ":"APPLICATION/agent-handoff+jwt"}`, planner.kid)
		c.Input = encodeHandoff(JSON, rawJWS(planner, h, offerJSON(o)))
		c.Expected = accepted(full)
	}},
	{"jws-typ-other-media-type", func(b *builder, c *Case) {
		c.Description = "The other side of the typ rule: typ is \"application/agent-handoff+cbor\", the COSE payload's media type, which is not application/agent-handoff+jwt. A verifier that matches a prefix or ignores the suffix accepts. bad-signature."
		c.HC = hc("HC-14", "HC-60")
		o := b.offer(planner, coder, now-5)
		h := fmt.Sprintf(`{"alg":"ES256","kid":%q,"typ":"application/agent-handoff+cbor"}`, planner.kid)
		c.Input = encodeHandoff(JSON, rawJWS(planner, h, offerJSON(o)))
		c.Expected = rejected(reason.BadSignature, "")
	}},

	// Issue point 6: a malformed chain element is a step-6 failure.
	{"order-wrong-audience-before-malformed-chain-element", func(b *builder, c *Case) {
		c.Description = "An offer to the researcher, received by the coder, whose JSON Handoff carries a chain element that is not a signed handoff (base64url text whose octets are no COSE_Sign1). The chain is checked at step 6; step 2 fails first: wrong-audience."
		c.HC = hc("HC-30", "HC-46")
		s := b.signed(JWS, planner, researcher, now-5, prevDigest(digest.SHA256(malformedOctets)))
		c.Input = handoffJSONRaw(`"offer":` + elementJSON(s) + `,"chain":["` + malformedJSON + `"]`)
		c.Expected = rejected(reason.WrongAudience, "")
	}},
	{"order-wrong-audience-before-malformed-chain-element-cbor", func(b *builder, c *Case) {
		c.Description = "The CBOR counterpart: a COSE offer to the researcher in a CBOR Handoff whose chain element is a byte string holding a CBOR map, not a COSE_Sign1. Step 2 fails first: wrong-audience."
		c.HC = hc("HC-30", "HC-46")
		s := b.signed(COSE, planner, researcher, now-5, prevDigest(digest.SHA256(malformedCBOR)))
		c.Input = handoffCBORRaw(cborItem("offer"), elementItem(s), cborItem("chain"), append([]byte{0x81}, cborItem(malformedCBOR)...))
		c.Expected = rejected(reason.WrongAudience, "")
	}},
	{"order-untrusted-key-before-malformed-chain-element", func(b *builder, c *Case) {
		c.Description = "An offer from mallory, whom the receiver does not trust, with a malformed chain element. Step 1 on the offer fails first: untrusted-key."
		c.HC = hc("HC-21", "HC-30")
		s := b.signed(JWS, mallory, coder, now-5, prevDigest(digest.SHA256(malformedOctets)))
		c.Input = handoffJSONRaw(`"offer":` + elementJSON(s) + `,"chain":["` + malformedJSON + `"]`)
		c.Expected = rejected(reason.UntrustedKey, "")
	}},
	{"order-stale-before-malformed-chain-element", func(b *builder, c *Case) {
		c.Description = "An expired offer with a malformed chain element: step 3 fails before step 6. stale."
		c.HC = hc("HC-30", "HC-31")
		s := b.signed(JWS, planner, coder, now-130, prevDigest(digest.SHA256(malformedOctets)))
		c.Input = handoffJSONRaw(`"offer":` + elementJSON(s) + `,"chain":["` + malformedJSON + `"]`)
		c.Expected = rejected(reason.Stale, "")
	}},
	{"order-dialog-before-malformed-chain-element", func(b *builder, c *Case) {
		c.Description = "An offer in another dialog with a malformed chain element: step 5 fails before step 6. policy."
		c.HC = hc("HC-30", "HC-36")
		s := b.signed(JWS, planner, coder, now-5, prevDigest(digest.SHA256(malformedOctets)), inDialog("ctx-elsewhere"))
		c.Input = handoffJSONRaw(`"offer":` + elementJSON(s) + `,"chain":["` + malformedJSON + `"]`)
		c.Expected = rejected(reason.Policy, "")
	}},
	{"order-equivocation-before-malformed-chain-element", func(b *builder, c *Case) {
		c.Description = "The receiver took an offer; a second offer with the same (iss, hop) and other content arrives with a malformed chain element. Step 4 fails before step 6: equivocation."
		c.HC = hc("HC-30", "HC-53")
		o1 := b.offer(planner, coder, now-5, task("task-a"))
		o2 := *o1
		o2.Task = "task-b"
		o2.Prev = &digest.Digest{}
		*o2.Prev = digest.SHA256(malformedOctets)
		c.Prior = [][]byte{encodeHandoff(JSON, sign(JWS, o1))}
		c.Input = handoffJSONRaw(`"offer":` + elementJSON(sign(JWS, &o2)) + `,"chain":["` + malformedJSON + `"]`)
		c.Expected = rejected(reason.Equivocation, "")
	}},
	{"retransmission-with-malformed-chain-element", func(b *builder, c *Case) {
		c.Description = "The receiver took an offer with its chain; the same offer octets arrive again, this time with a damaged chain element. Step 4 recognises the retransmission before the chain is looked at: a retransmission, not processed again."
		c.HC = hc("HC-30", "HC-35", "HC-38")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		s := b.signed(JWS, planner, coder, now-5, after(c0))
		c.Prior = [][]byte{encodeHandoff(JSON, s, c0)}
		c.Input = handoffJSONRaw(`"offer":` + elementJSON(s) + `,"chain":["` + malformedJSON + `"]`)
		c.Expected = retransmission()
	}},
	{"retransmission-after-malformed-chain-element", func(b *builder, c *Case) {
		c.Description = "The offer first arrived with a damaged chain element: it passed steps 1-3 and was remembered, then step 6 rejected it (bad-signature, on the chain element). It now arrives with the right chain: a retransmission, not processed again (HC-33: every offer that passed steps 1-3 is remembered)."
		c.HC = hc("HC-33", "HC-35", "HC-38")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		s := b.signed(JWS, planner, coder, now-5, after(c0))
		c.Prior = [][]byte{handoffJSONRaw(`"offer":` + elementJSON(s) + `,"chain":["` + malformedJSON + `"]`)}
		c.Input = encodeHandoff(JSON, s, c0)
		c.Expected = retransmission()
	}},
	{"malformed-chain-element-at-step-6", func(b *builder, c *Case) {
		c.Description = "A valid offer in a CBOR Handoff whose chain element is text shaped like a JWS (three base64url segments) that is not one: its header is not JSON. Steps 1-5 pass; step 6 checks each chain element as in step 1, and this one fails its signed form: bad-signature, with no chain state."
		c.HC = hc("HC-30", "HC-46")
		bogus := "bm90.anNvbg.c2ln"
		s := b.signed(COSE, planner, coder, now-5, prevDigest(digest.SHA256([]byte(bogus))))
		c.Input = handoffCBORRaw(cborItem("offer"), elementItem(s), cborItem("chain"), append([]byte{0x81}, cborItem(bogus)...))
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"order-wrong-audience-before-too-deep", func(b *builder, c *Case) {
		c.Description = "A chain of 17 elements, one more than the receiver's maximum, on an offer to the researcher. The length bound may be enforced before any element is parsed, but its reason, too-deep, is a step-6 reason, and step 2 fails first: wrong-audience."
		c.HC = hc("HC-30", "HC-50")
		hops := hopAgents(17)
		register(hops...)
		c.Trust = append(append([]*agent{}, baseTrust...), hops...)
		ch := b.chainOf(JWS, t0, append(hops, planner)...)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, researcher, now-5, after(ch[len(ch)-1])), ch...)
		c.Expected = rejected(reason.WrongAudience, "")
	}},

	// Issue point 7: a forged element behind an untrusted one.
	{"bad-signature-trusted-element-behind-untrusted", func(b *builder, c *Case) {
		c.Description = "chain[0] names the assistant, a trusted issuer, as iss, and its signature is bad; chain[1] is signed by mallory, whom the receiver does not trust; the offer is valid. Step 1 of the chain check (section 5.3) checks each C[i], its signature included; an untrusted key makes the chain unverifiable from that point back, but a trusted issuer's bad signature is a failure wherever it sits: bad-signature, not an unverifiable chain."
		c.HC = hc("HC-46")
		c0 := alterJWSSignature(b.signed(JWS, assistant, mallory, t0+20))
		c1 := b.signed(JWS, mallory, planner, t0+21, after(c0))
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c1)), c0, c1)
		c.Expected = rejected(reason.BadSignature, "")
	}},
	{"bad-signature-trusted-element-behind-untrusted-cose", func(b *builder, c *Case) {
		c.Description = "The COSE counterpart: chain[0] (the assistant's, bad signature) behind chain[1] (mallory's), in a CBOR Handoff. bad-signature."
		c.HC = hc("HC-46")
		c0 := alterCOSESignature(b.signed(COSE, assistant, mallory, t0+20))
		c1 := b.signed(COSE, mallory, planner, t0+21, after(c0))
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, after(c1)), c0, c1)
		c.Expected = rejected(reason.BadSignature, "")
	}},

	// Issue point 8: zero is a valid bound.
	{"zero-skew-iat-now", func(b *builder, c *Case) {
		c.Description = "The receiver allows no clock skew (skew 0): the draft bounds skew only from above (section 5.2). iat equals now, which is not later than now + 0. Accepted. A verifier that cannot be configured with a zero skew fails this vector."
		c.HC = hc("HC-31")
		c.Receiver.Skew = 0
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now))
		c.Expected = accepted(full)
	}},
	{"zero-skew-iat-one-second-ahead", func(b *builder, c *Case) {
		c.Description = "skew 0; iat is one second after now: later than now + skew. stale. A verifier that reads a zero skew as \"the default\" accepts."
		c.HC = hc("HC-31")
		c.Receiver.Skew = 0
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now+1))
		c.Expected = rejected(reason.Stale, "")
	}},
	{"zero-skew-chain-timing", func(b *builder, c *Case) {
		c.Description = "skew 0; chain[0] expired at 1792999980 and the offer was issued one second later: C[1].iat is later than C[0].exp plus the skew (section 5.3, check 4). broken-chain."
		c.HC = hc("HC-47")
		c.Receiver.Skew = 0
		c0 := b.signed(JWS, assistant, planner, t0-100, lifetime(80))
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, t0-19, after(c0)), c0)
		c.Expected = rejected(reason.BrokenChain, "")
	}},
	{"zero-skew-chain-timing-at-exp", func(b *builder, c *Case) {
		c.Description = "skew 0; the offer was issued at the second chain[0] expired, which is not later than C[0].exp plus 0. Full, accepted."
		c.HC = hc("HC-47")
		c.Receiver.Skew = 0
		c0 := b.signed(JWS, assistant, planner, t0-100, lifetime(80))
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, t0-20, after(c0)), c0)
		c.Expected = accepted(full)
	}},
	{"zero-max-lifetime", func(b *builder, c *Case) {
		c.Description = "The receiver's maximum lifetime is 0. Every offer has exp later than iat, so its lifetime exceeds 0: stale (section 5.2). A verifier that reads 0 as \"the default\" accepts this 120 s offer."
		c.HC = hc("HC-32")
		c.Receiver.MaxLifetime = 0
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5))
		c.Expected = rejected(reason.Stale, "")
	}},
	{"zero-max-chain-with-chain", func(b *builder, c *Case) {
		c.Description = "The receiver's maximum chain length is 0: any carried chain is too long. One element: too-deep."
		c.HC = hc("HC-50")
		c.Receiver.MaxChain = 0
		c0 := b.signed(JWS, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.TooDeep, "")
	}},
	{"zero-max-chain-without-chain", func(b *builder, c *Case) {
		c.Description = "The receiver's maximum chain length is 0; the offer names a prev and no chain is carried. Nothing exceeds the bound: absent, accepted by the default policy."
		c.HC = hc("HC-50")
		c.Receiver.MaxChain = 0
		c0 := b.signed(JWS, assistant, planner, t0+30)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)))
		c.Expected = accepted(absent)
	}},

	// Issue point 9: Time = uint.
	{"time-above-2-53-jws", func(b *builder, c *Case) {
		c.Description = "The receiver's clock reads 9007199254741992, past 2^53 - 1 seconds; the JWS offer's iat and exp are just as large and written as JSON integers, which parse exactly. The CDDL's Time is uint. Accepted. (The README states the bound: an implementation must read every JSON integer up to 2^63 - 1 exactly.)"
		c.HC = hc("HC-12", "HC-31")
		c.Receiver.Now = bigNow
		o := b.offer(planner, coder, now)
		p := jsonPayload(o, func(m map[string]any) {
			m["iat"] = json.Number(fmt.Sprint(bigNow - 5))
			m["exp"] = json.Number(fmt.Sprint(bigNow + 115))
		})
		c.Input = encodeHandoff(JSON, jwsRaw(planner, p, ""))
		c.Expected = accepted(full)
	}},
	{"time-above-2-53-cose", func(b *builder, c *Case) {
		c.Description = "The COSE counterpart: clock, iat and exp past 2^53 - 1, as CBOR unsigned integers. Accepted."
		c.HC = hc("HC-12", "HC-31")
		c.Receiver.Now = bigNow
		o := b.offer(planner, coder, now)
		p := cborPayload(o, func(m map[any]any) {
			m["iat"] = uint64(bigNow - 5)
			m["exp"] = uint64(bigNow + 115)
		})
		c.Input = encodeHandoff(CBOR, coseRaw(planner, p))
		c.Expected = accepted(full)
	}},
	{"time-above-2-63-cose", func(b *builder, c *Case) {
		c.Description = "The receiver's clock reads 9223372036854775000, 808 s before 2^63; the COSE offer was issued 5 s ago and its exp, 9223372036854775908, is above 2^63 - 1: a uint that no signed 64-bit type holds, which CBOR carries as a major type 0 integer. Lifetime 913 s, within the receiver's maximum of 1000. Accepted."
		c.HC = hc("HC-12", "HC-31", "HC-32")
		c.Receiver.Now = hugeNow
		c.Receiver.MaxLifetime = 1000
		o := b.offer(planner, coder, now)
		p := cborPayload(o, func(m map[any]any) {
			m["iat"] = uint64(hugeNow - 5)
			m["exp"] = uint64(1<<63 + 100)
		})
		c.Input = encodeHandoff(CBOR, coseRaw(planner, p))
		c.Expected = accepted(full)
	}},

	// Issue point 10: kid is a hint among the keys bound to iss.
	{"cose-kid-raw-thumbprint", func(b *builder, c *Case) {
		c.Description = "The COSE kid is the planner key's RFC 7638 thumbprint as its 32 raw octets, not as base64url text. The draft fixes no encoding for a COSE kid (section 3.2), and RFC 9052 makes kid a byte string. It names the planner's key. Accepted."
		c.HC = hc("HC-18", "HC-21")
		o := b.offer(planner, coder, now-5)
		prot := protOf(map[int64]any{labelAlg: coseES256, labelContentType: contentType, labelKID: thumbprintOctets(planner)})
		c.Input = encodeHandoff(CBOR, signCOSE(planner, prot, emptyMap, offerCBOR(o)).preferred())
		c.Expected = accepted(full)
	}},
	{"cose-kid-names-no-key", func(b *builder, c *Case) {
		c.Description = "The COSE kid is \"planner-key-2024\", which names none of the keys the receiver binds to the planner. kid is a hint that selects among the keys bound to iss; when it matches none, the receiver tries them in turn, and the planner's verifies. Accepted."
		c.HC = hc("HC-18", "HC-21")
		o := b.offer(planner, coder, now-5)
		prot := protOf(map[int64]any{labelAlg: coseES256, labelContentType: contentType, labelKID: []byte("planner-key-2024")})
		c.Input = encodeHandoff(CBOR, signCOSE(planner, prot, emptyMap, offerCBOR(o)).preferred())
		c.Expected = accepted(full)
	}},
	{"jws-kid-of-another-agent-signed-by-iss", func(b *builder, c *Case) {
		c.Description = "The JWS kid is the researcher's thumbprint, but the offer is the planner's and is signed with the planner's key. The kid names no key bound to iss; the keys bound to iss are tried, and the planner's verifies. Accepted. (Compare untrusted-key-kid-of-another-agent, where the researcher's key did sign: no key of iss verifies, untrusted-key.)"
		c.HC = hc("HC-16", "HC-21")
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, rawJWS(planner, jwsHeader("ES256", researcher.kid), offerJSON(o)))
		c.Expected = accepted(full)
	}},
	{"chain-element-kid-names-no-key", func(b *builder, c *Case) {
		c.Description = "chain[0], the assistant's, has kid \"assistant-old-key\", which names no key bound to the assistant; the assistant's trusted key verifies it. The element is verified, not unverifiable. Full, accepted."
		c.HC = hc("HC-21", "HC-46")
		c0o := b.offer(assistant, planner, t0+30)
		c0 := rawJWS(assistant, jwsHeader("ES256", "assistant-old-key"), offerJSON(c0o))
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(c0)), c0)
		c.Expected = accepted(full)
	}},

	// A case for each SHOULD, MAY and RECOMMENDED that a receiver could
	// wrongly enforce as a MUST.
	{"agent-ids-not-uris", func(b *builder, c *Case) {
		c.Description = "iss is \"planner-7\" and aud \"coder-3\": AgentIds that are not URIs. An AgentId is a string, RECOMMENDED to be a URI (section 2); the trust configuration binds \"planner-7\" to the planner's key. Accepted."
		c.HC = hc("HC-02")
		c.Receiver.Self = "coder-3"
		c.trustAs("planner-7", planner)
		o := b.offer(planner, coder, now-5)
		o.Iss, o.Aud = "planner-7", "coder-3"
		s, err := planner.jws.SignOffer(o)
		if err != nil {
			panic(err)
		}
		c.Input = encodeHandoff(JSON, s)
		c.Expected = accepted(full)
	}},
	{"hop-64-characters", func(b *builder, c *Case) {
		c.Description = "The hop is 64 base64url characters (384 bits), the longest the HopId pattern admits; \"at least 128 bits\" sets no fixed length. Accepted."
		c.HC = hc("HC-12")
		o := b.offer(planner, coder, now-5)
		o.Hop = handoff.HopID(b64.EncodeToString(append(fixedBytes("long hop a", 32), fixedBytes("long hop b", 16)...)))
		c.Input = encodeHandoff(CBOR, sign(COSE, o))
		c.Expected = accepted(full)
	}},
	{"jws-kid-not-thumbprint", func(b *builder, c *Case) {
		c.Description = "The JWS kid is \"planner-2026\", which is how the receiver's trust configuration names the planner's key, not its thumbprint. kid SHOULD be the thumbprint (section 3.1), not MUST. Accepted."
		c.HC = hc("HC-16")
		c.Trust = nil
		for _, a := range baseTrust {
			if a != planner {
				c.trustAs(string(a.id), a)
			}
		}
		c.TrustJWK[string(planner.id)] = []json.RawMessage{jwkWithKID(planner, "planner-2026")}
		o := b.offer(planner, coder, now-5)
		c.Input = encodeHandoff(JSON, rawJWS(planner, jwsHeader("ES256", "planner-2026"), offerJSON(o)))
		c.Expected = accepted(full)
	}},
	{"skew-above-recommended", func(b *builder, c *Case) {
		c.Description = "The receiver allows 120 s of skew, more than the RECOMMENDED 60 (section 5.2); iat is 100 s ahead of its clock. A verifier that caps skew at 60 s rejects. Accepted."
		c.HC = hc("HC-31")
		c.Receiver.Skew = 120
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now+100))
		c.Expected = accepted(full)
	}},
	{"max-lifetime-above-recommended", func(b *builder, c *Case) {
		c.Description = "The receiver's maximum lifetime is 3600 s, more than the 300 s RECOMMENDED for interactive use (section 5.2); the offer lives 1000 s. Accepted."
		c.HC = hc("HC-32")
		c.Receiver.MaxLifetime = 3600
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, lifetime(1000)))
		c.Expected = accepted(full)
	}},
	{"max-chain-above-recommended", func(b *builder, c *Case) {
		c.Description = "The receiver's maximum chain length is 20, more than the RECOMMENDED 16 (section 5.3); the chain has 17 elements. A verifier with a hard limit of 16 rejects it as too-deep. Full, accepted."
		c.HC = hc("HC-50")
		c.Receiver.MaxChain = 20
		hops := hopAgents(17)
		register(hops...)
		c.Trust = append(append([]*agent{}, baseTrust...), hops...)
		ch := b.chainOf(JWS, t0, append(hops, planner)...)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(ch[len(ch)-1])), ch...)
		c.Expected = accepted(full)
	}},
	{"reentry-of-receiver-allowed", func(b *builder, c *Case) {
		c.Description = "The assistant offered work to the coder (chain[0]), the coder called the planner (chain[1]), and the planner now hands the result back to the coder: a callback. The receiver is aud of chain[0] and iss of chain[1], a cycle unless policy admits it; \"local policy MAY admit a known re-entry, such as a callback\" (section 5.3), and allow_reentry lists the coder. Full, accepted."
		c.HC = hc("HC-49")
		c.Receiver.AllowReentry = ids(coder)
		ch := b.chainOf(JWS, t0+20, assistant, coder, planner)
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, after(ch[1])), ch...)
		c.Expected = accepted(full)
	}},
	{"fan-out-same-prev", func(b *builder, c *Case) {
		c.Description = "The planner split the assistant's task in two and offered both parts to the coder: two offers with the same prev (chain[0]), each with its own hop. The receiver took the first. Fan-out is allowed (section 5.4: a delegator MAY issue several offers with the same prev); a shared prev is neither equivocation nor a cycle. Full, accepted."
		c.HC = hc("HC-51")
		c0 := b.signed(JWS, assistant, planner, t0+30)
		first := b.signed(JWS, planner, coder, now-6, after(c0), task("part-1"))
		second := b.signed(JWS, planner, coder, now-5, after(c0), task("part-2"))
		c.Prior = [][]byte{encodeHandoff(JSON, first, c0)}
		c.Input = encodeHandoff(JSON, second, c0)
		c.Expected = accepted(full)
	}},
	{"ref-kind-scitt-receipt-not-checked", func(b *builder, c *Case) {
		c.Description = "The offer has a reference of kind scitt-receipt, whose support is OPTIONAL (section 2.2), under the policy not-checked. A receiver that does not implement a kind does not refuse the offer for it. Accepted; the reference is not checked."
		c.HC = hc("HC-10", "HC-11", "HC-68")
		ref := ref.Ref{Kind: ref.KindSCITTReceipt, Dig: digest.SHA256(refObj1), Loc: refLoc1}
		c.Input = encodeHandoff(JSON, b.signed(JWS, planner, coder, now-5, withRefs(ref)))
		c.Expected = accepted(full, notChecked)
	}},
	{"ref-kind-learnlog-head-check-available", func(b *builder, c *Case) {
		c.Description = "A reference of kind learnlog-head (OPTIONAL) under the policy check-available, its object available. The vectors' receiver does not implement the kind, so the reference is unverifiable, which this policy reports without rejecting (it is never verified without the check, HC-11). Accepted."
		c.HC = hc("HC-11", "HC-69")
		c.Receiver.RefsPolicy = "check-available"
		c.object(refLoc1, refObj1, nil)
		ref := ref.Ref{Kind: ref.KindLearnlogHead, Dig: digest.SHA256(refObj1), Loc: refLoc1}
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, withRefs(ref)))
		c.Expected = accepted(full, unverifiable)
	}},

	// COSE and CBOR counterparts of cases above, added last so that the
	// numbers of the others stay put.
	{"zero-skew-iat-one-second-ahead-cose", func(b *builder, c *Case) {
		c.Description = "The COSE counterpart of zero-skew-iat-one-second-ahead: skew 0, a COSE offer in a CBOR Handoff issued one second after now. stale."
		c.HC = hc("HC-31")
		c.Receiver.Skew = 0
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now+1))
		c.Expected = rejected(reason.Stale, "")
	}},
	{"zero-max-chain-with-chain-cose", func(b *builder, c *Case) {
		c.Description = "The COSE counterpart of zero-max-chain-with-chain: max_chain 0, a COSE offer with one COSE chain element in a CBOR Handoff. too-deep."
		c.HC = hc("HC-50")
		c.Receiver.MaxChain = 0
		c0 := b.signed(COSE, assistant, planner, t0+30)
		c.Input = encodeHandoff(CBOR, b.signed(COSE, planner, coder, now-5, after(c0)), c0)
		c.Expected = rejected(reason.TooDeep, "")
	}},
	{"retransmission-with-malformed-chain-element-cbor", func(b *builder, c *Case) {
		c.Description = "The CBOR counterpart of retransmission-with-malformed-chain-element: the receiver took a COSE offer with its chain; the same offer octets arrive again in a CBOR Handoff whose chain element is a byte string that is no COSE_Sign1. Step 4 recognises the retransmission first."
		c.HC = hc("HC-30", "HC-35", "HC-38")
		c0 := b.signed(COSE, assistant, planner, t0+30)
		s := b.signed(COSE, planner, coder, now-5, after(c0))
		c.Prior = [][]byte{encodeHandoff(CBOR, s, c0)}
		c.Input = handoffCBORRaw(cborItem("offer"), elementItem(s), cborItem("chain"), append([]byte{0x81}, cborItem(malformedCBOR)...))
		c.Expected = retransmission()
	}},
}

func replaceOnce(s, old, repl string) string {
	i := indexOnce(s, old)
	return s[:i] + repl + s[i+len(old):]
}

func indexOnce(s, sub string) int {
	first, count := -1, 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	if count != 1 {
		panic(fmt.Sprintf("%q found %d times", sub, count))
	}
	return first
}
