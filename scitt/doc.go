// Package scitt checks references of kind "scitt-receipt" (appendix A of
// the handoff draft, HC-68): a context reference (ref.Ref) whose dig names a SCITT Signed
// Statement and whose proof is a COSE Receipt of that statement's inclusion
// in a transparency service's log.
//
// # The reference
//
//   - dig is the SHA-256 digest of the encoded, tagged COSE_Sign1 Signed
//     Statement with its unprotected header set to the empty map
//     (StatementDigest). Receipts carried in the unprotected header (label
//     394) and any other unprotected parameter do not change the digest;
//     Receipts carried in the protected header do.
//   - proof is the Receipt: a byte string in CBOR, base64url text without
//     padding in JSON (ReceiptFromProof).
//   - The Signed Statement itself is the object of the reference: it comes
//     from the ref.Source, delivered with the task or fetched from loc
//     by the caller. This package never fetches anything.
//
// # What the checker does
//
// Checker.CheckRef, in order: obtains the statement (otherwise
// unverifiable); computes its digest and compares it with dig (a Digest alg
// other than sha-256 is unverifiable, HC-08; a different digest is
// mismatch); then verifies the Receipt (VerifyReceipt): a COSE_Sign1 whose
// protected header names verifiable data structure 1, RFC9162_SHA256, and
// whose unprotected header carries inclusion proofs (vdp, label 396, key
// -1), each [tree-size, leaf-index, inclusion-path]. For each proof it
// recomputes the Merkle tree root over the statement's entry with
// github.com/transparency-dev/merkle (RFC 9162 hashing), attaches that root
// as the detached payload, and verifies the signature with a
// transparency-service key the caller configured in Checker.Keys, each
// pinned to one algorithm. A receipt that is missing, malformed, names
// another data structure, is signed by no trusted key, or whose inclusion
// path does not lead to the signed root is unverifiable. Only when all of
// that succeeds is the reference verified.
//
// # What a verified reference shows, and what it does not
//
// It shows that a transparency service whose key the caller trusts
// registered this exact Signed Statement (up to its unprotected header) in
// its log at the stated position. As the draft says, it says nothing about
// whether the statement is true. It also does not show:
//
//   - that the statement's issuer signed it: the issuer's signature is the
//     transparency service's registration policy, not this check; a caller
//     that needs it verifies the statement with the issuer's key;
//   - that the log is consistent or append-only over time (no consistency
//     proof is checked), or that the receipt is recent;
//   - the tree size or leaf index the receipt states: the receipt signs
//     only the root, and another size or index that gives the same path
//     and root (for leaf 4, sizes 7 and 8) verifies too. The entry's
//     inclusion under the signed root is what is proven;
//   - anything about the delegator beyond what its own signature on the
//     offer shows.
//
// # The log entry
//
// The COSE Receipts draft proves inclusion of an entry's octets; which
// octets a SCITT transparency service enters is its own profile. By default
// the entry is the statement as the digest covers it (tagged, unprotected
// header emptied), so that a receipt binds the same octets dig names.
// Checker.Entry replaces that rule for a service that enters something
// else.
package scitt
