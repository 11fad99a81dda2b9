// Package handoff implements the IETF draft "Signed Handoff Context for
// Agentic Dialogs" (draft-handoff-01): a signed offer that hands work from
// one agent (the delegator) to another (the delegate), a signed status
// reply, and the chain of earlier offers linked by SHA-256 digests, in
// JSON/JWS and CBOR/COSE.
//
// # Wire format
//
// An offer is a JSON or CBOR map signed by its iss:
//
//	{"v":1,"type":"offer","hop":"q3Zl0v8bVfQmJm2c4bq1Ww","dialog":"ctx-7c1e",
//	 "iss":"spiffe://a.example/agent/planner","aud":"spiffe://b.example/agent/coder",
//	 "iat":1793000000,"exp":1793000120,
//	 "prev":{"alg":"sha-256","val":"M-OyKnHLAGKpiZKw7sNqAsNKmtfRQ7DUFhtKAL3Slmg"}}
//
// In JSON it is the payload of a JWS Compact Serialization with protected
// header {alg, kid, typ: "agent-handoff+jwt"}; in CBOR, of a tagged
// COSE_Sign1 with protected {alg, content type
// "application/agent-handoff+cbor", kid}. The signed octets are a Signed
// value; its handoff digest is SHA-256 over those octets exactly as sent
// (HC-20). What a host protocol carries is a Handoff: {"offer": signed,
// "chain": [earlier signed offers, oldest first]}. Each offer's prev is the
// digest of the one before it, so the chain needs no signature of its own.
//
// # Receiving
//
// An Agent's Receive runs the draft's seven checks in order (section 5.1):
// signature with a key the Trust binds to iss, audience, freshness, (iss,
// hop) memory, dialog, chain, references. The first failure ends processing
// and the result carries the draft's reason code. Rejections are values:
// Received.Reason, or errors.Is / errors.As on Received.Err.
//
// # Keys and trust
//
// Only keys that the Trust binds to an AgentID are ever used, each with
// exactly one algorithm (HC-21, HC-22). A key carried in a message proves
// nothing and is refused outright. Do not build a Trust from keys that
// arrived with the messages it is to check.
//
// # Memory
//
// Replay protection is only as good as the receiver's memory of (iss, hop)
// pairs (package replay). An in-memory store is lost on restart: set
// Config.MemoryLostAt, or use a durable store, so that offers issued before
// the loss are refused as "replay" (HC-59). Several replicas of one agent
// must share one store, or an offer replayed to a second replica is
// accepted twice.
//
// # What a signature does not show
//
// A verified offer shows that the holder of a trusted key signed it. It
// grants no authority: never make an access control decision on obo or the
// chain alone (HC-57); bind the hop to a credential with grant and check it
// with VerifyGrant.
package handoff
