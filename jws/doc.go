// Package jws signs and opens the JWS form of a signed handoff (section 3.1
// of draft-handoff): a JWS Compact Serialization (RFC 7515) whose payload is
// the JSON form of an offer or status. The package knows nothing of offers or
// statuses: it turns payload octets into signed octets and back, and the
// caller pins the keys and their algorithms.
//
// # Wire format
//
//	BASE64URL(header) "." BASE64URL(payload) "." BASE64URL(signature)
//
// with the protected header, as [Sign] writes it, exactly
//
//	{"alg":"ES256","kid":"<RFC 7638 thumbprint>","typ":"agent-handoff+jwt"}
//
// alg is ES256 (required by the draft), ES384 or EdDSA (Ed25519). An ECDSA
// signature is r||s, each big-endian and padded to the size of the curve
// order (RFC 7518 section 3.4). The worked example of the draft (section 2.3)
// is in this package's tests.
//
// # What Open checks, in order
//
//  1. Size: more than maxSize octets is [ErrTooLarge], before any parsing.
//  2. Form ([ErrMalformed]): exactly two '.', three non-empty segments, each
//     strict base64url without padding, canonical (re-encoding the decoded
//     octets gives the same characters, so the unused low bits of the last
//     character are zero), no whitespace or other characters anywhere.
//  3. Protected header, parsed strictly ([ErrMalformed]): one JSON object,
//     valid UTF-8, no duplicate member names at any depth, no member whose
//     name differs only in case from a registered one ("ALG", "Kid"), and
//     string values for alg, kid and typ.
//  4. typ is exactly "agent-handoff+jwt" (HC-14, HC-60), else [ErrType]: a
//     missing typ, "JWT", another case or media type parameters are refused.
//  5. No crit, and no b64 (RFC 7797, which only works through crit) (HC-14):
//     [ErrCrit].
//  6. No key or certificate in the header: jwk, jku, x5c, x5u, x5t and
//     x5t#S256 are refused with [ErrEmbeddedKey] (HC-21). A key carried in
//     the message proves nothing, so it is not even looked at.
//  7. alg is ES256, ES384 or EdDSA (HC-15): "none", the HMAC algorithms and
//     every other value are [ErrAlg].
//  8. kid is present and non-empty (HC-14), else [ErrMalformed].
//  9. The [Lookup] is called with the header and the (still unverified)
//     payload, so that the caller can read iss and return the keys its trust
//     configuration binds to it (HC-21). No keys is [ErrNoKey]; an error of
//     the lookup is returned wrapped.
//  10. Only keys pinned to the header's alg are tried (HC-22): a key pinned
//     to ES384 is never used for an ES256 message. None is [ErrAlg].
//  11. The signature is verified by go-jose, parsing with the single pinned
//     algorithm, over the exact header and payload segments; go-jose hands
//     the signing input and signature to a verifier bound to the pinned key,
//     which calls crypto/ecdsa or crypto/ed25519 (the same function the cose
//     package uses, run against the Wycheproof vectors in testdata). The
//     signature must be the raw fixed-width form: an ASN.1 DER ECDSA
//     signature is [ErrSignature].
//
// Open returns the payload as the exact octets that were signed, the
// base64url decoding of the middle segment. On any error it returns a nil
// payload and a zero Header.
//
// # Malleability
//
// A signed handoff is named by the SHA-256 of its octets (the handoff digest,
// HC-20), so one signed message must have one encoding. Base64url is accepted
// only in its canonical form and the compact form only with exactly two dots;
// go-jose on its own would accept unused low bits set, line breaks and
// surrounding whitespace, all of which give other octets for the same
// signature. ECDSA signatures have two valid forms, (r, s) and (r, n-s).
// [Sign] always emits the low-S form (s <= n/2). Open accepts both, because
// the draft does not require low-S and other signers do not normalise; the
// handoff digest therefore names the octets as sent, and a forwarder must
// forward them unchanged.
package jws
