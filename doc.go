// Package handoff implements the IETF draft "Signed Handoff Context for
// Agentic Dialogs" (draft-handoff-01): a signed offer that hands work from
// one agent (the delegator) to another (the delegate), a signed status
// reply, and the chain of earlier offers linked by SHA-256 digests, in
// JSON/JWS and CBOR/COSE.
//
// # Where each section lives
//
// The package reads like the draft, one file per section:
//
//	handoff.go    2.1   Signed, Handoff, ParseHandoff, Handoff.Encode
//	compact.go    2.1   the JwsCompact form, tested in one pass
//	offer.go      2     Offer and its members (AgentID, HopID, Time, Principal,
//	                    ContextRef); the CDDL checks; unknown members kept
//	status.go     2, 4  Status, State, Reason; VerifyStatus (5.4, HC-55)
//	digest.go     3.3   Digest over the octets as sent, salted digests
//	refs.go       2.2   reference checkers: digest, salted-digest, and any
//	                    kind registered (scitt/, learnlog/, evidence/)
//	verify.go     3     the signed form, the signature, the trust lookup;
//	                    InspectUnverified for diagnosis
//	trust.go      3.4   Trust, TrustedKey, ParseTrust
//	sign.go       3     Signer
//	receive.go    5.1   Agent.Receive: the seven checks in order; Received; Check
//	chain.go      5.3   check 1 (signatures, cached) apart from checks 2-7 (pure)
//	lifecycle.go  4     the two roles' transition tables; Asking Again;
//	                    Knowing the Outcome
//	agent.go            Config, Agent, and the role verbs that apply the
//	                    tables around storage, locks and signing
//	codec.go            strict JSON (RFC 7493) and CBOR (RFC 8949) decoding
//	limits.go           every bound and default, and the strict profile
//	errors.go           the failure classes; Rejection
//	cache.go            the verified-element cache
//
// Beside the root: jws/ and cose/ turn payload octets into signed octets
// and back and know nothing of offers; replay/ holds the delegate's memory
// (Store) and the delegator's records (OfferStore), with durable and
// distributed backends in nested modules; a2a/ and mcp/ carry handoffs in
// host metadata; cmd/handoff is the command line.
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
// and the result carries the draft's reason code and the Check that
// decided. Rejections are values: Received.Reason, or errors.Is /
// errors.As on Received.Err. A Received hands out its offer only once the
// offer's signature verified; Unverified is the one way to see it before.
// The work starts only after Take, or Reply with "accepted", has recorded
// that the hop was taken.
//
// # Exactness and the strict profile
//
// By default the package accepts exactly what the draft accepts: unknown
// members are ignored and kept, any valid CBOR is read, a COSE unprotected
// header is used at most as a key hint, JWS header parameters other than
// crit are ignored. Limits.Strict selects a hardening profile that refuses
// some of that; CONFORMANCE.md lists each rule with the text that allows
// it.
//
// # Keys and trust
//
// Only keys that the Trust binds to an AgentID are ever used, each with
// exactly one algorithm (HC-21, HC-22). A kid only orders the keys bound to
// iss. A key carried in a message is never used. Do not build a Trust from
// keys that arrived with the messages it is to check.
//
// # Memory
//
// Replay protection is only as good as the receiver's memory of (iss, hop)
// pairs (package replay). An in-memory store is lost on restart: set
// Config.MemoryLostAt, or use a durable store, so that offers issued before
// the loss are refused as "replay" (HC-59). Several replicas of one agent
// must share one store, or an offer replayed to a second replica is
// accepted twice. The delegator's records (Config.Offers) must be durable
// too for Retransmit, Cancel and HC-42 to survive a restart.
//
// # What a signature does not show
//
// A verified offer shows that the holder of a trusted key signed it. It
// grants no authority: never make an access control decision on obo or the
// chain alone (HC-57); bind the hop to a credential with grant and check it
// with VerifyGrant.
package handoff
