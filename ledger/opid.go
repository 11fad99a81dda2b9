package ledger

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
)

// opIDDomain separates the hash input of OperationID from any other use of
// SHA-256 over the same octets.
const opIDDomain = "agent-handoff op\x00"

// OperationID returns the operation identifier of the hop (iss, hop): an
// identifier a delegate hands to an external system, as an idempotency key
// or request identifier, so that it can later look up that system's record
// of the attempt and learn its outcome (draft -01, "Knowing the Outcome").
//
// The identifier is deterministic: the same pair always yields the same
// identifier, across processes and restarts, so a delegate that lost its own
// state can still ask the other system about the hop. It is
//
//	"hop-" || BASE64URL(SHA-256("agent-handoff op" || 0x00 ||
//	         UINT64BE(len(iss)) || iss || UINT64BE(len(hop)) || hop))
//
// where lengths count octets and BASE64URL is the URL-safe alphabet without
// padding. Each field is prefixed with its length, so distinct pairs whose
// concatenations coincide, such as ("a", "bc") and ("ab", "c"), yield
// distinct identifiers. The result is 47 characters of [A-Za-z0-9_-], safe in
// URLs, HTTP headers and file names.
//
// The identifier names the hop, not the offer octets: a delegate that sees
// equivocation (two digests under one pair) must not rely on it to tell the
// two attempts apart, and accepts only the first (HC-35).
func OperationID(iss, hop string) string {
	h := sha256.New()
	h.Write([]byte(opIDDomain))
	writeField(h, iss)
	writeField(h, hop)
	return "hop-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
