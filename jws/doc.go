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
// # Profiles
//
// [Open] and [OpenWith] with the zero [Options] apply the default profile:
// exactly what the draft and the RFCs it builds on (RFC 7515, RFC 7518,
// RFC 8725, RFC 7493) accept. Options.Strict selects the strict profile,
// which refuses some inputs the text allows; each is marked "strict" below,
// with its reason. The strict profile opens nothing the default does not.
//
// # What Open checks, in order
//
//  1. Size: more than the size limit is [ErrTooLarge], before any parsing.
//  2. Form ([ErrMalformed]): exactly two '.', three non-empty segments, each
//     base64url without padding and canonical: re-encoding the decoded
//     octets gives the same characters, so the unused low bits of the last
//     character are zero ("the decoder MAY chose to reject an encoding if
//     the pad bits have not been set to zero", RFC 4648 section 3.5). No
//     whitespace or other characters anywhere (RFC 7515 section 2,
//     Base64url Encoding: "without the inclusion of any line breaks,
//     whitespace, or other additional characters"). Both profiles.
//  3. Protected header ([ErrMalformed]): one JSON object (RFC 7515 section
//     4), valid UTF-8 with no escaped lone surrogate ("\ud800"), which
//     would decode to U+FFFD so that two distinct names compare equal (RFC
//     7493 section 2.1, RFC 8259 section 8.2), no duplicate member names at
//     any depth ("JWS parsers MUST either reject JWSs with duplicate Header
//     Parameter names or ...", RFC 7515 section 4; RFC 7493 section 2.3),
//     and string values for alg, kid and typ (RFC 7515 sections 4.1.1,
//     4.1.4, 4.1.9). Strict: a member whose name differs from a registered
//     one only in case ("ALG", "Kid") is refused, a classic way to make two
//     parsers read two headers; by default it is an unknown member, ignored
//     (names are case-sensitive, RFC 7515 section 4).
//  4. typ names the media type application/agent-handoff+jwt (HC-14,
//     HC-60), else [ErrType]. It is compared as RFC 7515 section 4.1.9
//     says: "application/" may be omitted ("A recipient using the media
//     type value MUST treat it as if 'application/' were prepended to any
//     'typ' value not containing a '/'") and media type names are
//     case-insensitive (RFC 2045, RFC 6838 section 4.2; ASCII letters only).
//     A missing typ, "JWT", another type or media type parameters ("; v=1")
//     are refused. Strict: typ is exactly "agent-handoff+jwt", the string
//     the draft writes.
//  5. No crit (HC-14: "It MUST NOT contain crit"): [ErrCrit]. The b64
//     parameter of RFC 7797 is [ErrCrit] too: with crit it is refused as crit, and without
//     it RFC 7797 section 6 is broken ("the 'crit' Header Parameter MUST be
//     included with 'b64' in its set of values"), and a reader that does
//     not know b64 would verify other octets than one that does.
//  6. Any other parameter is ignored, never parsed further and never used:
//     jwk, jku, x5c, x5u, x5t, x5t#S256, cty, nonce and unknown members with
//     any JSON value, numbers beyond float64 included (RFC 7515 section 4:
//     parameters not understood "MUST be ignored"; the draft forbids only
//     crit). A key or certificate in the message proves nothing (HC-21): it
//     is not even decoded, so an invalid certificate cannot make a valid
//     message fail. Strict: jwk, jku, x5c, x5u, x5t and x5t#S256 are
//     [ErrEmbeddedKey], so that no component that might trust them sees
//     such a message.
//  7. alg is ES256, ES384 or EdDSA (HC-15): "none", the HMAC algorithms and
//     every other value are [ErrAlg] (RFC 8725 section 3.1). alg is
//     case-sensitive (RFC 7515 section 4.1.1).
//  8. kid is present (HC-14: "MUST contain alg, kid, and typ"), else
//     [ErrMalformed]. Its value is any string, the empty one included: the
//     draft makes the thumbprint a SHOULD (HC-16). Strict: kid is not empty.
//  9. The [Lookup] is called with the header and the (still unverified)
//     payload, so that the caller can read iss and return the keys its trust
//     configuration binds to it (HC-21), the key the kid names first. No
//     keys is [ErrNoKey]; an error of the lookup is returned wrapped.
//  10. Only keys pinned to the header's alg are tried (HC-22): a key pinned
//     to ES384 is never used for an ES256 message. None is [ErrAlg].
//  11. The keys are tried in the order the lookup returned them, and the
//     first that verifies wins; none is [ErrSignature]. The signature is
//     over the JWS Signing Input exactly as sent (RFC 7515 section 5.2,
//     step 8) and is checked by the function the cose package uses, which calls
//     crypto/ecdsa or crypto/ed25519 and is run against the Wycheproof
//     vectors in testdata. The signature must be the raw fixed-width form
//     (RFC 7518 section 3.4): an ASN.1 DER ECDSA signature is
//     [ErrSignature].
//
// Open returns the payload as the exact octets that were signed, the
// base64url decoding of the middle segment. On any error it returns a nil
// payload and a zero Header.
//
// # go-jose
//
// [Sign] and [Thumbprint] use go-jose. Open does not hand the message to
// go-jose's parser: that parser decodes x5c certificates and jwk keys and
// fails when they are invalid, and fails on an unknown member whose number
// does not fit a float64, so it would refuse messages that step 6 above
// must accept. Everything go-jose did in Open is done here as strictly or
// more: the compact form and base64url (step 2), the header (step 3), and
// the signing input, which is the first two segments as sent. The signature
// itself was already checked by the shared function above, handed to
// go-jose as an OpaqueVerifier; it still is the only signature check.
//
// # Malleability
//
// A signed handoff is named by the SHA-256 of its octets (the handoff digest,
// HC-20). Every octet of a compact JWS but the signature is covered by the
// signature, and base64url is accepted only in its canonical form with
// exactly two dots, so the only other octets that verify for one signed
// header and payload are another valid signature. ECDSA signatures have two
// valid forms, (r, s) and (r, n-s). [Sign] always emits the low-S form (s <=
// n/2). Open accepts both, because the draft does not require low-S and other
// signers do not normalise; the handoff digest therefore names the octets as
// sent, and a forwarder must forward them unchanged.
package jws
