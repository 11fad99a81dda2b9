package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// What each vector says about conformance, beside the verdict this project
// reaches (expected): the outcomes the text accepts, the sentence they rest
// on, the level of that sentence, and the optional features a receiver
// needs to run the vector at all. The runner (handoff conformance) grades
// another implementation by these members, never by expected alone.

// suiteVersion is the version of the suite's format and contents. It
// changes whenever a vector's acceptable outcomes, level or requirements
// change, or a vector is added; another project pins it.
const suiteVersion = "2.0.0"

// Outcome is one verdict a conforming receiver may reach.
type Outcome struct {
	// Verdict is "accepted", "refused" or "retransmission".
	Verdict string `json:"verdict"`
	// Reasons: for "refused", the reason codes the text allows.
	Reasons []string `json:"reasons,omitempty"`
	// Chain: for "accepted", the chain states the text allows; absent
	// when the text does not determine it.
	Chain []string `json:"chain,omitempty"`
	// Refs: the outcome of each reference, in order; absent when no
	// reference was checked (refs_policy not-checked, or a rejection that
	// is not about references).
	Refs *[]string `json:"refs,omitempty"`
}

// Basis is a sentence a vector rests on: a quote of its source, or, for
// an RFC, what the section provides in our words.
type Basis struct {
	Source string `json:"source"`
	Text   string `json:"text"`
	Quote  bool   `json:"quote"`
}

// Levels of a vector.
const (
	levelMust   = "MUST"
	levelShould = "SHOULD"
	levelMay    = "MAY"
	levelOpen   = "open"
)

// The sentences of draft-handoff-01 the vectors rest on, quoted as the
// draft writes them (cross-references, which the text form leaves empty,
// are left out).
const draft = "draft-handoff-01"

var (
	sAccept = Basis{Source: draft + ", section 5.1", Text: `A delegate that receives an offer performs these checks. The first failure ends processing. [...] If all checks pass and the delegate takes the work, it sends "accepted".`, Quote: true}
	sFirst  = Basis{Source: draft + ", section 5.1", Text: `A delegate that receives an offer performs these checks. The first failure ends processing.`, Quote: true}
	sAbsent = Basis{Source: draft + ", section 2.1", Text: `A chain that does not connect to the offer fails [...]; a chain that was removed is simply absent, which the receiver's policy treats as it would any missing chain.`, Quote: true}
	sStep1  = Basis{Source: draft + ", section 5.1, step 1", Text: `Check the signed form [...]: the JWS typ or the COSE content type, and v equal to 1 and type equal to "offer" in the payload. Then verify the signature with a key that its trust configuration binds to iss [...]. Reasons: bad-signature, untrusted-key.`, Quote: true}
	sSigned = Basis{Source: draft + ", section 3", Text: `Every offer and status MUST be signed by its iss. An unsigned element MUST be treated as absent.`, Quote: true}
	sJWS    = Basis{Source: draft + ", section 3.1", Text: `The protected header MUST contain alg, kid, and typ, with typ set to "agent-handoff+jwt", the short form of the media type application/agent-handoff+jwt [...]. It MUST NOT contain crit.`, Quote: true}
	sAlg    = Basis{Source: draft + ", section 3.1", Text: `alg MUST name an asymmetric signature algorithm. "none" and MAC algorithms MUST NOT be used. Implementations MUST support ES256.`, Quote: true}
	sCOSE   = Basis{Source: draft + ", section 3.2", Text: `The signed handoff is a COSE_Sign1 message with tag 18. [...] The protected header MUST contain alg and content type (label 3), with content type set to "application/agent-handoff+cbor". It SHOULD contain kid.`, Quote: true}
	sKeys   = Basis{Source: draft + ", section 3.4", Text: `A receiver MUST use a key only if its own trust configuration binds that key to the iss of the message [...] A receiver MUST accept each trusted key with exactly one algorithm.`, Quote: true}
	sIgnore = Basis{Source: draft + ", section 2", Text: `Except in Digest, which is closed, a receiver MUST ignore members it does not understand [...]`, Quote: true}
	sAud    = Basis{Source: draft + ", section 5.1, step 2", Text: `Check that aud equals its own AgentId. Reason: wrong-audience.`, Quote: true}
	sFresh  = Basis{Source: draft + ", section 5.2", Text: `A receiver MUST reject an offer whose exp is not later than its iat, or whose iat is later than the current time plus a configured skew. It MUST also reject an offer whose exp is not later than the current time, unless it remembers the offer's (iss, hop) pair. [...] A receiver MUST reject an offer whose exp minus iat exceeds its configured maximum lifetime.`, Quote: true}
	sMemory = Basis{Source: draft + ", section 5.2", Text: `A receiver MUST remember each (iss, hop) pair that passed steps 1 through 3 [...] with the handoff digest, at least until exp plus the skew. [...] A second offer with the same pair and the same digest is an exact copy, whether retransmitted or replayed [...]; with a different digest, it is equivocation [...]. Neither is accepted a second time.`, Quote: true}
	sRetx   = Basis{Source: draft + ", section 5.1, step 4", Text: `An offer with a remembered pair and the same handoff digest is a retransmission: it is not processed again.`, Quote: true}
	sEquiv  = Basis{Source: draft + ", section 5.4", Text: `Two signed offers with the same iss and hop but different octets are equivocation. A receiver that sees the second MUST NOT accept it and MUST NOT send a status for it, whether or not it has expired.`, Quote: true}
	sDialog = Basis{Source: draft + ", section 5.1, step 5", Text: `If the host protocol message carries a dialog identifier, check that dialog equals it. Reason: policy.`, Quote: true}
	sStep6  = Basis{Source: draft + ", section 5.1, step 6", Text: `If the Handoff carries a chain, check it [...]. Reasons: broken-chain, cycle, too-deep. If local policy requires a full, verified chain and the chain is absent, partial, or unverifiable, reject. Reason: policy.`, Quote: true}
	sOrigin = Basis{Source: draft + ", section 8.3 (Truncated Chains)", Text: `A delegator can omit prev and the chain and present itself as the start. The offer is still valid. A receiver that needs to know the origin MUST require a full chain whose first element is signed by an origin it trusts.`, Quote: true}
	sChain1 = Basis{Source: draft + ", section 5.3, check 1", Text: `Check each C[i] as in step 1 [...]: its signed form, v and type, and its signature. A receiver that does not trust a key for some C[i].iss MUST treat the chain as unverifiable from that point back; its policy for a partial chain then applies [...].`, Quote: true}
	sLinks  = Basis{Source: draft + ", section 5.3, checks 2 to 4", Text: `Check that for each i from 1 to n, C[i].prev equals the handoff digest of C[i-1]. [...] Check continuity: for each i from 1 to n, C[i-1].aud equals C[i].iss. [...] Check timing: for each i from 1 to n, C[i-1].iat is not later than C[i].iat, and C[i].iat is not later than C[i-1].exp plus the skew. [...] Failures of checks 2 through 4 use reason "broken-chain".`, Quote: true}
	sPart   = Basis{Source: draft + ", section 5.3, check 5", Text: `If C[0] has a prev member, the chain is partial: it does not reach the start.`, Quote: true}
	sCycle  = Basis{Source: draft + ", section 5.3, check 6", Text: `If any AgentId appears as iss of more than one of C[0..n], or the receiver's own AgentId appears as iss or aud of any C[i] with i less than n, the chain contains a cycle, and the receiver SHOULD reject with reason "cycle".`, Quote: true}
	sReent  = Basis{Source: draft + ", section 5.3, check 6", Text: `This document departs from B3-7 in one respect: local policy MAY admit a known re-entry, such as a callback to the original requester.`, Quote: true}
	sDeep   = Basis{Source: draft + ", section 5.3, check 7", Text: `A receiver MUST enforce a maximum chain length. A limit of 16 is RECOMMENDED. Reason: too-deep.`, Quote: true}
	sRefs   = Basis{Source: draft + ", section 5.1, step 7", Text: `Check any references that local policy requires [...]. Reasons: unverifiable-ref, ref-mismatch.`, Quote: true}
	sRefOut = Basis{Source: draft + ", section 2.2", Text: `A receiver that checks a reference reports one of four outcomes: verified (digest matched and any proof checked against a key it trusts), mismatch, unverifiable (it could not obtain or check the object), or not checked. A receiver MUST NOT report a reference as verified unless it performed the check.`, Quote: true}
	sDigAlg = Basis{Source: draft + ", section 2", Text: `A receiver that does not implement the alg of a Digest MUST treat a check that depends on it as failed for prev and grant, and as unverifiable for refs.`, Quote: true}
	sLost   = Basis{Source: draft + ", section 8.4 (Replay and Freshness)", Text: `A receiver that loses its cache, for example after a restart, SHOULD reject offers with iat before the restart until the maximum lifetime has passed, with reason "replay", since it cannot tell whether it has already seen them.`, Quote: true}
	sTime   = Basis{Source: draft + ", section 2", Text: `Time is seconds since 1970-01-01T00:00:00Z, ignoring leap seconds, as an integer.`, Quote: true}
)

// basisByReason is the sentence a refusal with a reason rests on, when the
// case names none of its own.
var basisByReason = map[string][]Basis{
	"bad-signature":    {sStep1, sSigned},
	"untrusted-key":    {sStep1, sKeys},
	"wrong-audience":   {sAud},
	"stale":            {sFresh},
	"replay":           {sLost},
	"equivocation":     {sEquiv, sMemory},
	"broken-chain":     {sLinks},
	"cycle":            {sCycle},
	"too-deep":         {sDeep},
	"unverifiable-ref": {sRefs, sRefOut},
	"ref-mismatch":     {sRefs, sRefOut},
	"policy":           {sDialog, sStep6},
}

// basisByHC adds the sentence of each checklist item a vector exercises.
var basisByHC = map[string]Basis{
	"HC-01": sIgnore, "HC-08": sDigAlg, "HC-11": sRefOut, "HC-12": sTime, "HC-13": sSigned,
	"HC-14": sJWS, "HC-15": sAlg, "HC-17": sCOSE, "HC-18": sCOSE, "HC-21": sKeys, "HC-22": sKeys,
	"HC-30": sFirst, "HC-31": sFresh, "HC-32": sFresh, "HC-33": sMemory, "HC-35": sRetx,
	"HC-46": sChain1, "HC-47": sLinks, "HC-48": sPart, "HC-49": sCycle, "HC-50": sDeep,
	"HC-53": sEquiv, "HC-58": sOrigin, "HC-59": sLost, "HC-60": sStep1,
}

// basisBySlug names the sentences of cases that rest on a more particular
// one than their outcome's.
var basisBySlug = map[string][]Basis{
	"bad-signature-jws-typ-jwt":                           {sJWS, sStep1},
	"bad-signature-cose-content-type":                     {sCOSE, sStep1},
	"bad-signature-cose-untagged":                         {sCOSE, sStep1},
	"bad-signature-jws-crit":                              {sJWS, sStep1},
	"bad-signature-jws-hmac":                              {sAlg, sStep1},
	"bad-signature-alg-not-pinned":                        {sKeys, sStep1},
	"jws-typ-other-media-type":                            {sJWS, sStep1},
	"accept-eddsa-jws":                                    {sAlg, sKeys, sAccept},
	"accept-es384-cose":                                   {sCOSE, sKeys, sAccept},
	"accept-cose-without-kid":                             {sCOSE, sAccept},
	"accept-unknown-members":                              {sIgnore, sAccept},
	"chain-absent":                                        {sAbsent, sStep6, sAccept},
	"zero-max-chain-without-chain":                        {sAbsent, sDeep, sAccept},
	"chain-partial":                                       {sPart, sAccept},
	"chain-unverifiable":                                  {sChain1, sAccept},
	"chain-unverifiable-from-that-point-back":             {sChain1, sAccept},
	"chain-reentry-allowed":                               {sReent, sAccept},
	"reentry-of-receiver-allowed":                         {sReent, sAccept},
	"trusted-origin-offer-without-prev":                   {sOrigin, sStep6},
	"policy-origin-not-trusted":                           {sOrigin, sStep6},
	"policy-trusted-origin-needs-full-chain":              {sOrigin, sStep6},
	"policy-full-chain-required-absent":                   {sAbsent, sStep6},
	"policy-full-chain-required-partial":                  {sStep6, sPart},
	"policy-full-chain-required-unverifiable":             {sStep6, sChain1},
	"broken-chain-prev-unsupported-alg":                   {sDigAlg, sLinks},
	"unverifiable-ref-unsupported-alg":                    {sDigAlg, sRefs},
	"accept-issued-at-memory-loss":                        {sLost, sAccept},
	"malformed-chain-element-at-step-6":                   {sChain1, sStep6},
	"bad-signature-chain-element-altered":                 {sChain1},
	"bad-signature-trusted-element-behind-untrusted":      {sChain1},
	"bad-signature-trusted-element-behind-untrusted-cose": {sChain1},
	"time-above-2-53-cose":                                {sTime, sAccept},
	"time-above-2-63-cose":                                {sTime, sAccept},
	"zero-max-chain-with-chain":                           {sDeep},
	"zero-max-chain-with-chain-cose":                      {sDeep},
	"retransmission-identical":                            {sRetx, sMemory},
}

// openChoice widens a vector whose verdict the text leaves open: the
// other answers a conforming receiver may give, and why.
type openChoice struct {
	also  []Outcome
	why   string
	basis []Basis
}

func refused(reasons ...string) Outcome { return Outcome{Verdict: "refused", Reasons: reasons} }

func acceptedAs(chain ...string) Outcome { return Outcome{Verdict: "accepted", Chain: chain} }

// RFC sentences the open choices cite. Quotes are marked as such; the
// others say in our words what the section provides.
var (
	rfc7515Params = Basis{Source: "RFC 7515, section 4.1.11 and 4", Text: `Unless listed as a critical Header Parameter, per Section 4.1.11, all Header Parameters not defined by this specification MUST be ignored when not understood.`, Quote: true}
	rfc7797Crit   = Basis{Source: "RFC 7797, section 6", Text: `the "crit" Header Parameter MUST be included with "b64" in its set of values`, Quote: true}
	rfc7515Typ    = Basis{Source: "RFC 7515, section 4.1.9", Text: `A recipient using the media type value MUST treat it as if "application/" were prepended to any "typ" value not containing a '/'.`, Quote: true}
	rfc6838Case   = Basis{Source: "RFC 6838, section 4.2", Text: "Media type names are compared without regard to case."}
	rfc8949Indef  = Basis{Source: "RFC 8949, sections 3.2 and 5", Text: "Arrays, maps, byte strings and text strings may be encoded with an indefinite length, and such items are well-formed and valid; a decoder may nonetheless be limited to what its protocol needs, for example refuse indefinite-length items, since the choice of what a decoder accepts is left to the protocol, which here makes none."}
	rfc8949Heads  = Basis{Source: "RFC 8949, sections 3 and 4.1", Text: "The argument of a data item may be encoded in a longer head than its value needs; such an item is well-formed and valid. Preferred serialization, the shortest head, is what encoders are asked to produce; what a decoder accepts beyond it is left to the protocol, which here says nothing."}
	rfc7515Kid    = Basis{Source: "RFC 7515, section 4.1.4", Text: `The "kid" (key ID) Header Parameter is a hint indicating which key was used to secure the JWS.`, Quote: true}
	rfc9052Kid    = Basis{Source: "RFC 9052, section 3.1", Text: "kid identifies a key as a byte string whose structure is not defined; it is a hint for finding the key, which may be carried in either header bucket."}
	rfc8259Surr   = Basis{Source: "RFC 8259, section 8.2", Text: `The behavior of software that receives JSON texts containing such values is unpredictable`, Quote: true}
	rfc8949UTF8   = Basis{Source: "RFC 8949, section 5.3.1", Text: "A text string holding invalid UTF-8 is well-formed but invalid CBOR; what a decoder does with an invalid item is left to the application."}
	rfc8259Num    = Basis{Source: "RFC 8259, section 6", Text: `This specification allows implementations to set limits on the range and precision of numbers accepted.`, Quote: true}
)

const (
	whyKidRule = "The draft says which keys may be used (those bound to iss), not what a kid that names none of them means. This project tries every key of iss (CONFORMANCE.md, choices where the draft is silent); a receiver that takes a kid naming no key of iss to mean an untrusted signer, and refuses with untrusted-key, contradicts no sentence."
	whyKid     = "The kid names no key the receiver binds to iss. " + whyKidRule
	whyTyp     = "The draft names the exact value \"agent-handoff+jwt\". RFC 7515 section 4.1.9 lets a recipient compare media types without regard to case and with \"application/\" prepended; this project does. A receiver that compares the draft's value exactly and refuses (bad-signature, step 1) contradicts no MUST either."
	whyIndef   = "The draft asks for no particular CBOR serialization, and RFC 8949 makes indefinite-length items valid, so this project accepts them. RFC 8949 section 5.1 also lets a decoder refuse them; a receiver that does refuses at step 1 (bad-signature). Either answer is defensible."
	whyHeads   = "The draft asks for no particular CBOR serialization, and RFC 8949 makes an argument in a longer head than needed well-formed and valid; this project accepts it. Preferred serialization binds encoders only, but a decoder built for one serialization (many COSE libraries are) refuses anything else, and no sentence of the draft forbids refusing: such a receiver refuses at step 1 (bad-signature). Either answer is defensible."
	whySurr    = "RFC 8259 section 8.2 calls the behaviour of a receiver of an unpaired surrogate unpredictable. This project reads JSON as RFC 7493 (I-JSON) says and refuses the element (bad-signature). A receiver that keeps the string as it decodes (or replaces the surrogate with U+FFFD) reads another value, which then fails a later check; it is still a refusal, with that check's reason."
)

// openChoices are the vectors whose verdict the text leaves open.
var openChoices = map[string]openChoice{
	"jws-header-b64-without-crit": {
		also:  []Outcome{acceptedAs(full)},
		why:   "The draft forbids crit and says nothing of b64. RFC 7797 section 6 requires b64 to be listed in crit, so this project refuses a header with b64 and no crit (bad-signature). But RFC 7515 section 4 makes a receiver that does not implement RFC 7797 ignore b64 as an unknown parameter; the payload here is base64url-encoded as usual, so such a receiver verifies the signature and accepts. Either answer is defensible.",
		basis: []Basis{sJWS, rfc7797Crit, rfc7515Params},
	},
	"jws-typ-with-application-prefix":                  {also: []Outcome{refused("bad-signature")}, why: whyTyp, basis: []Basis{sJWS, rfc7515Typ, rfc6838Case}},
	"jws-typ-case-insensitive":                         {also: []Outcome{refused("bad-signature")}, why: whyTyp, basis: []Basis{sJWS, rfc7515Typ, rfc6838Case}},
	"jws-typ-prefix-in-capitals":                       {also: []Outcome{refused("bad-signature")}, why: whyTyp, basis: []Basis{sJWS, rfc7515Typ, rfc6838Case}},
	"cose-kid-names-no-key":                            {also: []Outcome{refused("untrusted-key")}, why: whyKid, basis: []Basis{sCOSE, sKeys, rfc9052Kid}},
	"jws-kid-of-another-agent-signed-by-iss":           {also: []Outcome{refused("untrusted-key")}, why: whyKid, basis: []Basis{sKeys, rfc7515Kid}},
	"cose-kid-in-unprotected-header-names-another-key": {also: []Outcome{refused("untrusted-key")}, why: whyKid, basis: []Basis{sCOSE, sKeys, rfc9052Kid}},
	"cose-kid-raw-thumbprint": {
		also:  []Outcome{refused("untrusted-key")},
		why:   "The draft fixes no encoding for a COSE kid. This project takes the 32 raw octets of the thumbprint to name the key, as well as its base64url text; a receiver that matches only the text form finds that the kid names no key of iss. " + whyKidRule,
		basis: []Basis{sCOSE, sKeys, rfc9052Kid},
	},
	"chain-element-kid-names-no-key": {
		also:  []Outcome{acceptedAs(unverif)},
		why:   "The chain element's kid names no key of its iss. This project tries the keys of iss and the element verifies (full). A receiver that takes such a kid to mean an untrusted signer treats the element as one it does not trust a key for, which makes the chain unverifiable from that point back (section 5.3, check 1), and the default policy still accepts. Either answer is defensible.",
		basis: []Basis{sChain1, sKeys},
	},
	"cose-envelope-not-preferred":         {also: []Outcome{refused("bad-signature")}, why: whyHeads, basis: []Basis{sCOSE, rfc8949Heads}},
	"cose-protected-header-not-preferred": {also: []Outcome{refused("bad-signature")}, why: whyHeads, basis: []Basis{sCOSE, rfc8949Heads}},
	"equivocation-cose-envelope-re-encoded": {
		also:  []Outcome{refused("bad-signature")},
		why:   "Built on cose-envelope-not-preferred: the second message's envelope is in longer heads than needed. A receiver that accepts them sees the remembered (iss, hop) with another digest (equivocation); one that requires preferred serialization refuses the element at step 1 (bad-signature). Neither accepts it.",
		basis: []Basis{sEquiv, rfc8949Heads},
	},
	"cose-payload-not-preferred": {also: []Outcome{refused("bad-signature")}, why: whyIndef, basis: []Basis{sCOSE, rfc8949Indef}},
	"handoff-cbor-not-preferred": {also: []Outcome{refused("bad-signature")}, why: whyIndef + " The Handoff object itself is indefinite-length here; a receiver that cannot read it has no signed element to check and refuses at step 1.", basis: []Basis{rfc8949Indef}},
	"retransmission-handoff-cbor-re-encoded": {
		also:  []Outcome{refused("bad-signature")},
		why:   "Built on handoff-cbor-not-preferred: the retransmission arrives in an indefinite-length CBOR Handoff. A receiver that accepts such items recognises the retransmission; one that refuses them (RFC 8949 section 5.1) refuses this Handoff at step 1 before looking at its offer. Either answer is defensible.",
		basis: []Basis{sRetx, rfc8949Indef},
	},
	"equivocation-cose-payload-re-encoded": {
		also:  []Outcome{refused("bad-signature")},
		why:   "Built on cose-payload-not-preferred: the second offer's payload is an indefinite-length map. A receiver that accepts such items sees the remembered (iss, hop) with another digest (equivocation); one that refuses them refuses the element at step 1 (bad-signature). Neither accepts it.",
		basis: []Basis{sEquiv, rfc8949Indef},
	},
	"lone-surrogate-aud-jws":    {also: []Outcome{refused("wrong-audience")}, why: whySurr, basis: []Basis{sStep1, sAud, rfc8259Surr}},
	"lone-surrogate-iss-jws":    {also: []Outcome{refused("untrusted-key")}, why: whySurr, basis: []Basis{sStep1, sKeys, rfc8259Surr}},
	"lone-surrogate-dialog-jws": {also: []Outcome{refused("policy")}, why: whySurr, basis: []Basis{sStep1, sDialog, rfc8259Surr}},
	"invalid-utf8-aud-cose": {
		also:  []Outcome{refused("wrong-audience")},
		why:   "RFC 8949 makes a text string with invalid UTF-8 invalid but leaves what a decoder does with it to the application. This project refuses the element (bad-signature); a decoder that replaces the invalid octets reads another aud, which fails step 2 (wrong-audience). Either is a refusal.",
		basis: []Basis{sStep1, sAud, rfc8949UTF8},
	},
	"time-above-2-53-jws": {
		also:  []Outcome{refused("bad-signature")},
		why:   "The CDDL's Time is uint, and this project reads every JSON integer up to 2^64 - 1 exactly. RFC 8259 section 6 lets an implementation limit the range of numbers it accepts, and many JSON parsers stop at 2^53; such a receiver cannot read iat and refuses the element (bad-signature). Either answer is defensible.",
		basis: []Basis{sTime, rfc8259Num},
	},
}

// noPrevNoChainWhy explains why an offer with neither prev nor chain may
// be reported with either chain state.
const noPrevNoChainWhy = "The offer has no prev and the Handoff no chain. This project reports the chain as full (the offer starts its own chain: section 8, \"present itself as the start\"); a receiver that reports it absent (step 6: the Handoff carries no chain) reads the text as well, and under a policy that requires a full chain it refuses with policy."

// annotate fills in what the vector says about conformance.
func annotate(c *Case, v *Vector, offerHasPrev bool, algs []string) error {
	e := c.Expected
	checked := c.Receiver.RefsPolicy != "not-checked"
	var main Outcome
	switch {
	case e.Retransmission:
		main = Outcome{Verdict: "retransmission"}
	case e.Accepted:
		main = acceptedAs(e.Chain)
		if checked {
			refs := append([]string{}, e.Refs...)
			main.Refs = &refs
		}
	default:
		main = refused(e.Reason)
		if checked && (e.Reason == "unverifiable-ref" || e.Reason == "ref-mismatch") {
			refs := append([]string{}, e.Refs...)
			main.Refs = &refs
		}
	}
	v.Acceptable = []Outcome{main}
	v.Level = levelMust
	switch {
	case e.Reason == "cycle":
		v.Level = levelShould
	case c.Receiver.MemoryLostAt != 0:
		v.Level = levelShould
	case len(c.Receiver.AllowReentry) > 0:
		v.Level = levelMay
	}
	v.Basis = basisBySlug[c.Slug]
	if v.Basis == nil {
		if e.Accepted || e.Retransmission {
			v.Basis = []Basis{sAccept}
			if e.Retransmission {
				v.Basis = []Basis{sRetx, sMemory}
			}
		} else {
			v.Basis = basisByReason[e.Reason]
		}
	}
	if len(v.Basis) == 0 {
		return fmt.Errorf("%s: no basis", c.Slug)
	}
	var why []string
	if oc, ok := openChoices[c.Slug]; ok {
		v.Acceptable = append(v.Acceptable, oc.also...)
		why = append(why, oc.why)
		v.Basis = oc.basis
	}
	// An offer with neither prev nor chain: full or absent.
	if !offerHasPrev && len(v.Input.Decoded.Chain) == 0 {
		anyAccepted := false
		for i := range v.Acceptable {
			if o := &v.Acceptable[i]; o.Verdict == "accepted" {
				o.Chain = []string{absent, full}
				anyAccepted = true
			}
		}
		if anyAccepted && (c.Receiver.RequireFullChain || len(c.Receiver.TrustedOrigins) > 0) {
			v.Acceptable = append(v.Acceptable, refused("policy"))
			why = append(why, noPrevNoChainWhy)
		}
	}
	for _, id := range c.HC {
		if b, ok := basisByHC[id]; ok && !slices.Contains(v.Basis, b) {
			v.Basis = append(v.Basis, b)
		}
	}
	if (strings.HasPrefix(c.Slug, "order-") || strings.Contains(c.Slug, "malformed-chain-element")) && !slices.Contains(v.Basis, sFirst) {
		v.Basis = append(v.Basis, sFirst)
	}
	if len(why) > 0 {
		v.Level = levelOpen
		v.WhyOpen = joinWhy(why)
	}
	v.Acceptable = mergeOutcomes(v.Acceptable)

	// Features beyond the core a receiver needs for this vector.
	req := map[string]bool{}
	for _, a := range algs {
		if a != "ES256" {
			req["alg:"+a] = true
		}
	}
	if checked {
		req["refs:"+c.Receiver.RefsPolicy] = true
	}
	if len(c.Receiver.TrustedOrigins) > 0 {
		req["flag:trusted-origin"] = true
	}
	if len(c.Receiver.AllowReentry) > 0 {
		req["flag:allow-reentry"] = true
	}
	if c.Receiver.MemoryLostAt != 0 {
		req["flag:memory-lost-at"] = true
	}
	v.Requires = []string{}
	for r := range req {
		v.Requires = append(v.Requires, r)
	}
	sort.Strings(v.Requires)
	return nil
}

func joinWhy(parts []string) string {
	var b bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(p)
	}
	return b.String()
}

// mergeOutcomes joins the outcomes of one verdict that compare no
// references: the reasons of refusals, the chain states of acceptances.
func mergeOutcomes(in []Outcome) []Outcome {
	var out []Outcome
	at := map[string]int{}
	for _, o := range in {
		if i, ok := at[o.Verdict]; ok && o.Refs == nil && out[i].Refs == nil {
			for _, r := range o.Reasons {
				if !contains(out[i].Reasons, r) {
					out[i].Reasons = append(out[i].Reasons, r)
				}
			}
			for _, st := range o.Chain {
				if !contains(out[i].Chain, st) {
					out[i].Chain = append(out[i].Chain, st)
				}
			}
			continue
		}
		if _, ok := at[o.Verdict]; !ok {
			at[o.Verdict] = len(out)
		}
		out = append(out, o)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// signedAlgs returns the algorithms of the elements of a Handoff that a
// key the vector trusts is pinned to: the algorithms a receiver must
// implement to verify them as the vector does.
func signedAlgs(trust map[string]JWKSet, elems []Element) []string {
	seen := map[string]bool{}
	for _, e := range elems {
		alg, iss := elementAlgIss(e)
		if alg == "" || iss == "" {
			continue
		}
		for _, k := range trust[iss].Keys {
			var jwk struct {
				Alg string `json:"alg"`
			}
			if json.Unmarshal(k, &jwk) == nil && jwk.Alg == alg {
				seen[alg] = true
			}
		}
	}
	var out []string
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

var coseAlgNames = map[int64]string{-7: "ES256", -35: "ES384", -8: "EdDSA"}

// elementAlgIss reads the alg and iss of an element's unverified view.
func elementAlgIss(e Element) (alg, iss string) {
	switch p := e.Protected.(type) {
	case json.RawMessage:
		var h struct {
			Alg string `json:"alg"`
		}
		_ = json.Unmarshal(p, &h)
		alg = h.Alg
	case map[string]any:
		switch n := p["alg (1)"].(type) {
		case int64:
			alg = coseAlgNames[n]
		case uint64:
			alg = coseAlgNames[int64(n)]
		}
	}
	switch p := e.Payload.(type) {
	case json.RawMessage:
		var m struct {
			Iss string `json:"iss"`
		}
		_ = json.Unmarshal(p, &m)
		iss = m.Iss
	case map[string]any:
		iss, _ = p["iss"].(string)
	}
	return alg, iss
}

// payloadHasPrev says whether an element's unverified payload has prev.
func payloadHasPrev(e Element) bool {
	switch p := e.Payload.(type) {
	case json.RawMessage:
		var m map[string]json.RawMessage
		if json.Unmarshal(p, &m) == nil {
			_, ok := m["prev"]
			return ok
		}
	case map[string]any:
		_, ok := p["prev"]
		return ok
	}
	return false
}
