// Package agentcard signs and verifies A2A AgentCards (A2A 1.0, section
// 8.4) with an agent's handoff key, so that a peer that trusts the key for
// the agent's handoffs checks, with the same handoff.Trust, that a card it
// fetched is that agent's. It knows no A2A SDK: a card is JSON octets, as
// served at /.well-known/agent-card.json, so that programs on either
// a2a-go line and the handoff gateway use it alike.
//
// # Wire format
//
// A signed card carries "signatures", an array of JWS objects (RFC 7515
// section 7.2.2, the flattened JSON Serialization) without "payload":
//
//	"signatures": [{"protected": BASE64URL(header), "signature": BASE64URL(sig)}]
//
// with an optional "header" object of unprotected parameters. The payload
// is detached: it is the RFC 8785 (JCS) form of the card without its
// "signatures" member (section 8.4.1), and the JWS Signing Input is
// BASE64URL(header) "." BASE64URL(payload) (RFC 7515 section 5.1). [Sign]
// writes the protected header
//
//	{"alg":"ES256","kid":"<RFC 7638 thumbprint>","typ":"JOSE"}
//
// (with "jku" when SignOptions.JKU is set): alg follows from the agent's
// key (ES256, ES384 or EdDSA, HC-15), the kid is the thumbprint a
// handoff.Signer writes (HC-16), typ is "JOSE" as section 8.4
// recommends. This is what @a2a-js/sdk 1.3.0 makes
// (generateAgentCardSignature: jose's FlattenedSign over the canonical
// card, payload base64url-encoded, "protected", "signature" and "header"
// kept) and what its verifyAgentCardSignature checks; the a2a-go SDK
// (v2.4.0) has the AgentCardSignature type and neither signs nor
// verifies.
//
// # What is trusted
//
// The caller names the agent: [Verify] takes the AgentID the caller
// fetched the card for. A card does not name its agent (its name, URL and
// provider are its own claims), so nothing in it selects a key: the keys
// tried are those the handoff.Trust binds to that AgentID, each pinned to
// its alg (HC-21, HC-22). A kid only orders them (the one it names first,
// by KID or by RFC 7638 thumbprint); a jku, jwk, x5u or x5c in a header is
// never fetched nor used. A signature the Trust's keys for the agent do
// not verify proves nothing about the card, whoever made it.
//
// # What Verify checks, in order
//
//  1. Size: more than VerifyOptions.MaxSize octets (DefaultMaxSize) is
//     handoff.ErrTooLarge, before any parsing.
//  2. The card is one JSON object, valid UTF-8 without lone surrogate
//     escapes and with unique member names at every depth (RFC 8259, RFC
//     7493 sections 2.1 and 2.3), as the module reads all JSON; "signatures"
//     is an array, null or absent. Else handoff.ErrMalformed.
//  3. No signature (absent, null or []): [ErrUnsigned].
//  4. The payload: the JCS form of the card without "signatures". A card
//     with a number outside the IEEE 754 double range has none (RFC 8785
//     section 3.2.2.3): handoff.ErrMalformed.
//  5. Each element of "signatures", independently (handoff.ErrMalformed
//     for that element): a JSON object whose "protected" and "signature"
//     are canonical base64url without padding and whose "header", if
//     present, is an object; a protected header that is a JSON object (read
//     as strictly as the card) holding "alg", "kid" and "typ" as strings
//     (section 8.4 requires the three; typ's value is not checked); no
//     name in both headers (RFC 7515 section 7.2.1); "crit" only in the
//     protected header, naming only "b64", which must be there (RFC 7515
//     section 4.1.11, RFC 7797 section 6); "b64" a protected boolean. Then
//     go-jose parses the element, with the header's alg as the one allowed.
//  6. The keys the Trust binds to the agent and pins to the alg: none is
//     handoff.ErrUntrustedKey (so is an alg no Trust can pin, such as
//     RS256).
//  7. The signature, over the payload (base64url-encoded in the signing
//     input, or as is under "b64": false, RFC 7797), with each of those
//     keys in turn, by the function the jws and cose packages use. If none
//     verifies: handoff.ErrUntrustedKey when the kid names no key of the
//     agent (another signer's signature), else handoff.ErrSignature (the
//     card was altered after it was signed, or the signature is forged).
//
// The card verifies when one signature does ([Verified]); every one is
// checked and reported ([Signature]). When none does, the error is an
// [*UnverifiedError] listing each, and errors.Is finds each one's class.
//
// # Served octets and JCS
//
// Verification is over the JCS form of the card as parsed, never over the
// octets as served: a card served with other member order, whitespace,
// escapes or number spellings verifies as long as its JCS form is the one
// signed. [Sign] returns the card in its JCS form, so that what is served
// is what is signed.
//
// # Two readings
//
// Section 8.4.1, as @a2a-js/sdk cites it, removes default values before
// JCS: a member a ProtoJSON serializer would omit (an unset optional
// field, an empty list, a proto3 default) is not signed. Where the
// serializer that wrote the card applied the rule, the card as served is
// that form, and both readings below sign the same octets. A verifier of
// JSON octets has no schema and cannot apply the rule itself, and
// serializers do not all apply it (a2a-go v2.4.0 writes "capabilities",
// "skills" and "tags" even when empty, and a nil list as null), so this
// package and the SDK differ where a card carries such members:
//
//   - This package, by default: the payload is the JCS form of the card as
//     served, every member covered. A card signed by an SDK that dropped
//     some of its members before signing does not verify.
//   - @a2a-js/sdk 1.3.0 (canonicalizeAgentCard): the card is first passed
//     through the v1.0 protobuf schema (members outside it are dropped,
//     and with them any signature over them; proto3 defaults such as a
//     non-optional false are dropped), then every null, "", [] and {} is
//     dropped, recursively, then JCS. VerifyOptions.AllowDroppedEmpty
//     accepts a signature over the second of these steps: the one that
//     needs no schema. A card whose SDK signature depends on the first
//     step does not verify here under either reading.
//
// A card signed by [Sign] verifies with the SDK when it has no member
// outside the v1.0 schema, no empty value and no proto3 default: then the
// readings agree. SignOptions.DropEmpty removes the empty values before
// signing, so that a card from a serializer that writes them (the
// gateway's upstream) verifies under both readings. The vectors in
// testdata/agentcard hold cards of each kind.
//
// # Cost
//
// A card's cost is bounded by the agent's keys, not by its signatures:
// each key the trust configuration binds to the agent is tried at most
// once for a signature whose kid names it and once for one whose kid names
// no key of the agent (twice each with AllowDroppedEmpty, over the two
// readings). A later signature that could be checked only with keys tried
// already in its way is reported unchecked, and once every key was tried
// both ways the rest are not even parsed; go-jose parses a signature only
// when a key is to be tried with it. A signer signs a card once per key,
// and whoever can append signatures to a card could as well remove them,
// so this refuses nothing an honest card holds. A stranger's card of
// DefaultMaxSize holding 1,162 signatures under the agent's kid costs
// reading it plus one signature verification (BenchmarkVerifyHostile
// against BenchmarkVerify).
//
// # go-jose
//
// go-jose builds the JWS in [Sign] and parses and checks the JWS in
// [Verify] (the signing input, crit and b64, the alg allowed); the
// signature itself is made and checked by the module's ECDSA and Ed25519
// functions (low-S ECDSA signing, Wycheproof-tested verification), handed
// to go-jose as an opaque signer and verifier. go-jose decodes a
// header's "jwk" and "x5c" and refuses a private or invalid one, and
// refuses a header member whose number a float64 cannot hold: such an
// element is handoff.ErrMalformed (RFC 7515 section 4.1.6 has a recipient
// validate an x5c chain; the others are go-jose's limits, not the
// RFC's).
package agentcard
