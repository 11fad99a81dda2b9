// Package cose signs and opens the COSE form of a signed handoff (section 3.2
// of draft-handoff): a tagged COSE_Sign1 message (RFC 9052) whose payload is
// the CBOR form of an offer or status. The package knows nothing of offers or
// statuses: it turns payload octets into signed octets and back, and the
// caller pins the keys and their algorithms.
//
// # Wire format
//
//	18([                                  ; tag 18, COSE_Sign1
//	  << {                                ; protected header, a bstr
//	    1: alg,                           ; -7 ES256, -35 ES384, -8 EdDSA
//	    3: "application/agent-handoff+cbor",
//	    4: kid                            ; bstr
//	  } >>,
//	  {},                                 ; unprotected header: Sign leaves it empty
//	  payload,                            ; bstr, embedded
//	  signature                           ; bstr
//	])
//
// [Sign] writes exactly this, with core deterministic encoding (RFC 8949
// section 4.2: minimal heads, sorted map keys, definite lengths). An ECDSA
// signature is r||s, each big-endian and padded to the size of the curve
// order (RFC 9053 section 2.1). The signature covers the Sig_structure
// ["Signature1", protected, empty bstr, payload]: external AAD is always
// empty. [Key] and [Header] name algorithms with their JOSE names, as the
// jws package does, so one trust configuration serves both forms.
//
// # Profiles
//
// [Open] and [OpenWith] with the zero [Options] apply the default profile:
// exactly what the draft and the RFCs it builds on (RFC 9052, RFC 9053, RFC
// 8949) accept. Options.Strict selects the strict profile, which refuses
// some inputs the text allows; each is marked "strict" below, with its
// reason. The strict profile opens nothing the default does not.
//
// # What Open checks, in order
//
//  1. Size: more than the size limit is [ErrTooLarge], before any parsing.
//  2. Well-formed CBOR ([ErrMalformed]): one data item and nothing after
//     it, the protected bstr's content included (RFC 8949 section 3).
//     Heads of any length and indefinite lengths are accepted: both are
//     valid CBOR (RFC 8949 sections 3 and 3.2.2), and RFC 9052 section 9
//     restricts only the encoding of the Sig_structure, which the verifier
//     builds itself. Nesting and item counts are bounded by the size limit
//     alone, up to the CBOR library's largest bounds. What makes an item
//     invalid rather than ill formed (RFC 8949 section 5.3: invalid UTF-8,
//     duplicate map keys, a tag on content it does not fit) is checked
//     where the checks below read, and in every other header value once
//     the signature has verified (step 13). Strict: preferred
//     serialization only (RFC 8949 section 4.1: every head as short as
//     possible, definite lengths), for the message and for the octets
//     inside the protected bstr, and no tag but the outer one; so that one
//     signed message has one encoding.
//  3. The outer tag is 18 (HC-17: "a COSE_Sign1 message with tag 18"); an
//     untagged COSE_Sign1, a COSE_Mac0 (17), tag 18 twice or any other tag
//     is [ErrMalformed]. Its content is an array of exactly four elements
//     (RFC 9052 section 4.2): a bstr, a map, a non-empty bstr (a detached,
//     nil payload is refused: the draft's payload is the element itself)
//     and a non-empty bstr. A tag on any of the four is refused.
//  4. Both headers are maps whose labels are ints (of any 64-bit
//     argument) or text strings in valid UTF-8, no label twice in one
//     header however it is encoded (RFC 8949 section 5.6; RFC 9052 section
//     3: "Applications MUST NOT ... parse and process messages with the
//     same label used twice") and none in both (RFC 9052 section 3:
//     "Labels ... MUST NOT occur in both the protected and unprotected
//     headers"), else [ErrMalformed]. The protected header is the empty
//     bstr or a bstr holding a map. The headers are read in place, their
//     labels counted and compared without building a map, and only the
//     values of labels 1 to 4 looked at: a header of thousands of labels
//     costs what a string of its size costs.
//  5. The unprotected header may hold any parameters (RFC 9052 section 3).
//     Only the protected alg and content type count (HC-17); unknown labels
//     and values are ignored, never used. Strict: the unprotected header is
//     empty, because anything in it could be added, changed or removed on
//     the path without breaking the signature; the handoff digest, over the
//     octets as sent (HC-20), changes with it, so by default such a copy is
//     another element with the same (iss, hop): equivocation, not a second
//     acceptance. The draft applies the same reasoning to SCITT Signed
//     Statements (Appendix A, HC-68).
//  6. The protected content type (label 3) names the media type
//     application/agent-handoff+cbor (HC-17, HC-60), else [ErrType]: a text
//     string compared with ASCII letters folded, since media type names are
//     case-insensitive (RFC 6838 section 4.2). A CoAP Content-Format number,
//     media type parameters, or a content type only in the unprotected
//     header are refused. Strict: exactly "application/agent-handoff+cbor".
//  7. No crit (label 2) in either header ([ErrCrit]), mirroring HC-14.
//  8. The protected alg (label 1) is -7, -35 or -8 (HC-15, HC-17), else
//     [ErrAlg]; an alg only in the unprotected header is a missing alg.
//  9. kid (label 4) is a bstr wherever it is (RFC 9052 section 3.1), else
//     [ErrMalformed]. It is optional (HC-18 makes it a SHOULD) and may be in
//     either header. [Header] reports its raw octets and where it came from:
//     KID for the protected header, UnprotectedKID for the other, which is
//     only a hint of which trusted key to try first.
//  10. The [Lookup] is called with the header and the (still unverified)
//     payload, so that the caller can read iss and return the keys its
//     trust configuration binds to it (HC-21), the key the kid names first.
//     No keys is [ErrNoKey]; an error of the lookup is returned wrapped.
//  11. Only keys pinned to the protected alg are tried (HC-22); none is
//     [ErrAlg].
//  12. The keys are tried in the order the lookup returned them, and the
//     first that verifies wins; none is [ErrSignature]. The signature is
//     verified by go-cose (Sign1Message.Verify, with a verifier for the
//     pinned algorithm and key, and empty external AAD) over the
//     Sig_structure ["Signature1", protected, empty bstr, payload], where
//     protected is the protected header's octets as sent, in a bstr with a
//     definite, shortest head (RFC 9052 sections 4.4 and 9) however the
//     message wrote that bstr. The verifier calls crypto/ecdsa or
//     crypto/ed25519 through the same function the jws package uses, run
//     against the Wycheproof vectors in testdata. The signature must be the
//     raw fixed-width form (RFC 9053 section 2.1): an ASN.1 DER ECDSA
//     signature is [ErrSignature].
//  13. Every header value the checks above did not decode is decoded, so
//     that a message holding an invalid one (RFC 8949 section 5.3) is
//     [ErrMalformed]: after the signature, since decoding a value costs up
//     to many times its size.
//
// Open returns the payload as the exact octets that were signed. On any
// error it returns a nil payload and a zero Header.
//
// # Malleability
//
// A signed handoff is named by the SHA-256 of its octets (HC-20). In COSE
// the signature does not cover the unprotected header nor how the heads of
// the outer structure are written, so by default one signed message has
// many encodings that verify: each is a different element to the root
// package, and a forwarder must forward the octets it received unchanged.
// The strict profile admits exactly one encoding per signed message: the
// preferred serialization with an empty unprotected header, which is what
// [Sign] writes. ECDSA signatures have two valid forms, (r, s) and (r,
// n-s). [Sign] always emits the low-S form (s <= n/2); Open accepts both, in
// both profiles, because the draft does not require low-S and other signers
// do not normalise.
package cose
