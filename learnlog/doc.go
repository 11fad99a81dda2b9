// Package learnlog checks references of kind "learnlog-head" (appendix B
// of the handoff draft, HC-69): a context reference (ref.Ref) whose proof is a Learnlog
// SignedHead and whose dig is the SHA-256 digest of that object's JSON
// Canonicalization Scheme form (RFC 8785).
//
// # The SignedHead object
//
// A Learnlog head names the latest entry of a record: record_hash, seq,
// entry_hash and time. The SignedHead this package reads is one JSON
// object (or the same data model in CBOR) holding those four members and a
// "jws" member:
//
//	{"entry_hash":"...","jws":"<JWS Compact Serialization>","record_hash":"...","seq":41,"time":...}
//
// The JWS is signed by the record's producer. Its protected header names
// the algorithm (ES256 is mandatory to implement) and a kid that is the
// signing key's JWK Thumbprint (RFC 7638, SHA-256, base64url). Its payload
// is the JSON object of the head's members other than "jws", and must be
// the same JSON value as those members (compared in their JCS forms).
// record_hash and entry_hash are text, seq a non-negative integer; time is
// required and kept as it comes. Other members are allowed, covered by dig,
// and must be in the signed payload too. This layout is this package's
// reading of Learnlog (draft-srivastava-learnlog-03); parseHead is the one
// place that knows it.
//
// # What the checker does
//
// Checker.CheckRef, in order: computes dig over the JCS form of proof with
// github.com/gowebpki/jcs and compares it (a Digest alg other than sha-256
// is unverifiable, HC-08; a different digest is mismatch); then verifies the
// head's JWS with go-jose against Checker.Keys, the keys the caller trusts
// for the record's producer, each pinned to one algorithm: the kid must be
// the JWK Thumbprint of one of them, the header alg must be that key's alg,
// and the signature must verify; then checks that the signed payload is the
// head. Anything else is unverifiable. The digest is over the JCS form of
// the head as decoded, not over the octets received: a head sent with its
// members in another order, other white space or another spelling of a
// number has the same dig.
//
// The head alone is enough: no object is fetched from loc. A caller that
// holds a copy of the record can check it against a verified head with
// Learnlog's own verification; this package does not.
//
// # What a verified head shows, and what it does not
//
// It shows that a key the caller trusts for the producer committed to the
// record up to the named entry (record_hash, seq, entry_hash, time). It
// does not show:
//
//   - that the record is complete: a holder could remove a later head along
//     with the entries it covers, and a verified head says nothing of
//     entries after it;
//   - that the entries are true, or that the record's subject is who it
//     says;
//   - that the head is recent: time is the producer's claim, and nothing
//     here checks it against a clock.
//
// # Cross-protocol confusion
//
// Learnlog does not require a typ in a head's JWS, and neither does this
// checker: it cannot tell a head from another JWS signed with the same key
// whose payload happens to hold the head's members. Handoff receivers check
// typ on offers and statuses (draft section on cross-protocol confusion),
// which protects them; it does not protect a Learnlog head verifier. A
// producer should sign heads with a key it uses for nothing else, and a
// caller should trust for heads only keys meant for heads.
//
// A Learnlog record about a learner is personal data: pass a head only to
// agents entitled to see that the record exists.
package learnlog
