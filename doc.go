// Package handoff implements the IETF draft "Signed Handoff Context for
// Agentic Dialogs" (draft-handoff-01): a signed offer that hands work from
// one agent (the delegator) to another (the delegate), a signed status
// reply, and the chain of earlier offers linked by SHA-256 digests, in
// JSON/JWS and CBOR/COSE.
//
// # Where each section lives
//
// The package reads like the draft, one file per section, in layers: a
// file calls only the files below it (TestLayers_CallsGoDown holds this),
// so that a shared helper sits below its callers.
//
//	delegate.go        4, 5.2  the delegate's verbs: Reply, ReplyHop, Take,
//	                           Resume, Untaken, Release
//	delegator.go       4, 5.4  the delegator's verbs: Offer, Retransmit,
//	                           Cancel, HandleStatus, Hop, Unresolved
//	receive.go         5.1     Agent.Receive: the seven checks in order;
//	                           Received; Check
//	agent.go                   Config, Agent, NewAgent; conflicts; logging
//	chain.go           5.3     step 6: check 1 on each element (signatures,
//	                           cached) apart from checks 2-7 (pure)
//	refs.go            2.2     step 7 under Config.Refs (package ref holds
//	                           the references and their checkers)
//	cache.go                   the verified-element cache
//	lifecycle.go       4       the two roles' transition tables; Asking
//	                           Again; Knowing the Outcome
//	hoplock.go                 one lock per received hop
//	verify.go          3, 5.4  the signature and the trust lookup: OpenOffer,
//	                           OpenStatus, VerifyStatus; InspectUnverified
//	handoff.go         2.1     Signed, Handoff, ParseHandoff, Handoff.Encode
//	wire.go            2.1     the Handoff object read in place: its
//	                           elements located, their forms checked
//	forms.go           2.1, 3  one element as read from JSON or CBOR; the
//	                           tests of its octets that tell its form
//	peek.go            3       what step 1 reads of a payload before its
//	                           signature verifies
//	sign.go            3       Signer
//	trust.go           3.4     Trust, TrustedKey (package keyset reads
//	                           trust documents)
//	status.go          2, 4    Status; how a status answers its offer;
//	                           StatusResult
//	payload.go         2       an offer's payload decoded: the typed fast
//	                           path and the general one; Offer.Payload
//	offer.go           2       Offer and its members (AgentID, HopID, Time,
//	                           Principal); unknown members kept
//	members.go         2       the members offers and statuses share, read
//	                           and written; the CDDL's checks
//	digest.go          3.3     Digests as members (package digest holds
//	                           the value)
//	compact.go         2.1     the JwsCompact form, tested in one pass
//	cbor.go                    strict CBOR decoding (RFC 8949)
//	json.go                    strict JSON decoding (RFC 8259, RFC 7493)
//	codec.go                   encodings, the profile, deep copies
//	limits.go                  every bound and default, and the strict profile
//	errors.go                  the failure classes; Rejection
//
// Beside the root, below it: package digest (the Digest value), ref
// (context references and their checkers), reason (the reason codes) and
// state (the hop's states, effects and equivocation answers); jws/ and
// cose/, which turn payload octets into signed octets and back and know
// nothing of offers; replay/, the delegate's memory (Store) and the
// delegator's records (OfferStore), with durable and distributed backends
// in nested modules. Above it: keyset (trust documents, published and
// fetched key sets), a2a/ and mcp/ (handoffs in host metadata), and
// cmd/handoff, the command line.
//
// # An offer's route through Receive
//
// The offer's bytes go down the layers once: the envelope, the signature,
// the payload, then the rules. A chain element takes the same route at
// step 6.
//
//  1. receive.go, Agent.Receive: the input's size is checked, and then
//     handoff.go reads the Handoff object in place (wire.go): the offer
//     and at most Limits.MaxChain + 1 of the chain's elements as signed
//     octets (Signed), the rest of the chain counted, the object's
//     unknown members kept as its octets; the offer's handoff digest is
//     SHA-256 over its octets (HC-20).
//  2. verify.go, OpenOffer (check 1): the envelope is opened by jws/ or
//     cose/ with the keys the Trust binds to the payload's iss, which
//     peek.go reads before the signature verifies.
//  3. payload.go, decodeOffer, once the signature verified: the payload is
//     read on the typed fast path, or decoded (json.go or cbor.go, under
//     limits.go) and checked against the CDDL by offer.go, offerFrom,
//     reading its members through members.go and digest.go.
//  4. receive.go: checks 2 to 5 (audience, freshness, the (iss, hop)
//     memory in replay/, dialog) on the decoded offer; lifecycle.go names
//     what an equivocation may still be answered with.
//  5. chain.go, checkChain (step 6): each element not in cache.go's
//     verified cache takes steps 2 and 3 (verify.go, then payload.go), and
//     then the chain's structure is checked on the decoded elements.
//  6. refs.go, checkRefs (step 7): each reference goes to the checker of
//     its kind (package ref) under Config.Refs.
//  7. receive.go: the Received is returned and the decision logged
//     (Config.Logger); the work starts only after delegate.go's Take, or
//     Reply with "accepted", has recorded that the hop was taken.
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
// errors.As on Received.Err. Received.Offer is the offer only when it was
// accepted, or when the hop's work resumes on a retransmission
// (Agent.Resume: a hop taken and still "accepted", paused in the host
// protocol and continued by its delegator); Refused is a verified offer
// that was not, and Unverified the one way to see an offer whose
// signature did not verify.
// The work starts only after Take, or Reply with "accepted", has recorded
// that the hop was taken.
//
// # Exactness and the strict profile
//
// By default the package accepts exactly what the draft accepts, within
// the size bounds of Limits (the element size and chain length the draft
// asks a receiver to bound, and the size of a whole Handoff), which refuse
// valid input beyond them: unknown members are ignored and kept, any valid
// CBOR is read, a COSE unprotected header is used at most as a key hint, a
// JWS header parameter the draft does not name is ignored, except b64,
// which is refused (RFC 7797 requires it to be listed in crit, which the
// draft forbids). Limits.Strict selects a hardening profile that refuses
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
