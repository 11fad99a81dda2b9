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
//	  {},                                 ; unprotected header: always empty
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
// # What Open checks, in order
//
//  1. Size: more than maxSize octets is [ErrTooLarge], before any parsing.
//  2. Strict CBOR ([ErrMalformed]): one well-formed data item and nothing
//     after it; definite lengths only; bounded nesting; valid UTF-8; no
//     duplicate map keys; no tag other than the outer one.
//  3. The outer tag is 18 (HC-17); an untagged COSE_Sign1, a COSE_Mac0
//     (17) or any other tag is [ErrMalformed]. Its content is an array of
//     exactly four elements: a bstr, a map, a non-empty bstr (a detached,
//     nil payload is refused) and a non-empty bstr.
//  4. The unprotected header is the empty map ([ErrMalformed] otherwise). It
//     is not covered by the signature, so anything in it could be added,
//     changed or removed by anyone on the path without breaking the
//     signature, and the handoff digest, taken over the octets as sent
//     (HC-20), would change with it. This is the same rule the draft applies
//     to SCITT Signed Statements (Appendix A, HC-68).
//  5. Canonical outer form ([ErrMalformed]): re-encoding the decoded
//     structure gives the input octets exactly. go-cose alone accepts
//     non-minimal length heads, such as a payload length written in two
//     octets where one would do, which verify but are other octets.
//  6. Protected header, parsed strictly ([ErrMalformed]): a map with int or
//     text labels, no duplicate labels, no tags. Content type (label 3) is
//     present and exactly the text "application/agent-handoff+cbor" (HC-17,
//     HC-60), else [ErrType]. No crit (label 2) ([ErrCrit]). alg (label 1)
//     is -7, -35 or -8 (HC-15, HC-17), else [ErrAlg]. kid (label 4), when
//     present, is a bstr (HC-18 makes it a SHOULD, so it may be absent).
//  7. The [Lookup] is called with the header and the (still unverified)
//     payload, so that the caller can read iss and return the keys its
//     trust configuration binds to it (HC-21). No keys is [ErrNoKey]; an
//     error of the lookup is returned wrapped.
//  8. Only keys pinned to the header's alg are tried (HC-22); none is
//     [ErrAlg].
//  9. The signature is verified by go-cose (Sign1Message.Verify, with a
//     verifier for the pinned algorithm and key, and empty external AAD).
//     The verifier calls crypto/ecdsa or crypto/ed25519 through the same
//     function the jws package uses, run against the Wycheproof vectors in
//     testdata. The signature must be the raw fixed-width form: an ASN.1 DER
//     ECDSA signature is [ErrSignature].
//
// Open returns the payload as the exact octets that were signed. On any
// error it returns a nil payload and a zero Header.
//
// # Malleability
//
// A signed handoff is named by the SHA-256 of its octets (HC-20), so one
// signed message must have one encoding: hence the canonical outer form and
// the empty unprotected header. The bytes inside the protected header bstr
// are taken as they are; they are covered by the signature. ECDSA signatures
// have two valid forms, (r, s) and (r, n-s). [Sign] always emits the low-S
// form (s <= n/2); Open accepts both, because the draft does not require
// low-S and other signers do not normalise. A forwarder must forward the
// octets unchanged.
package cose
