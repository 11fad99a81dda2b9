// Package evidence implements the handoff package of the Agent Handoff
// Evidence Contract: what state the work is in, what was already done, what
// the receiver may and may not do, and what to do next, bound by digest to
// the signed offer it rides with.
//
// The offer proves who handed work to whom, when and through which agents.
// The package says what was handed. The delegator builds it (NewBuilder,
// Build), which binds it to the offer (its id is the hop, its sender and
// receiver are the offer's iss and aud, its time falls inside [iat, exp])
// and refuses, naming each field to set (IncompleteError), a package that
// leaves out what the delegate's check requires (Template marks those
// fields "required"). It returns the ref.Ref to put in the offer's
// refs: kind Kind or KindSalted (absolute URIs naming this definition,
// HC-10), digest SHA-256 over the package's RFC 8785 (JCS) form, plain or
// salted (HC-64, HC-09).
// The JCS form is made in one pass (see Cost below); it is the one
// github.com/gowebpki/jcs makes, byte for byte, which a test and a fuzz
// target hold.
//
// The delegate, with no hidden session history, checks the package it
// received (CheckReceived, or Check) against the verified offer, using nothing but the
// package, the offer, its clock and its resolvers, and gets findings with
// stable codes (Code) and JSON Pointer paths. It acknowledges through the
// hop's status (Reply): "accepted" when the package passed, "rejected" with
// reason "policy" and a detail naming the findings otherwise; the status
// refs carry the package reference. The authority ledger keeps the
// acknowledged digest with the hop's final disposition
// (RecordAcknowledgement, authority.Ledger.Hop): the record an audit
// reads once the hop ended. The delegate's store keeps the last status
// only (Recorded), which names the package while it is the
// acknowledgement, and no longer once "completed" or "failed" replaced it
// ("failed" refs name what took effect, HC-44). A package that passed against
// its offer (Report.Acceptable, from CheckReceived) yields a Guard for that
// hop, which the receiving agent consults before every tool call or
// mutation, and whose memory of effects and approvals is an
// authority.Ledger (package evidence/authority) shared by every guard of
// the agent, durable (bbolt) or shared by replicas (Redis). Under "specialist returns result", the delegate
// returns its result as a "completed" status whose refs name the result
// artifacts (ReturnResult), which the delegator checks (CheckResult).
//
// # Decoding
//
// Decode is strict: one JSON object, I-JSON (RFC 7493): duplicate member
// names, invalid UTF-8 and lone surrogate escapes are refused with
// ErrDuplicateName and ErrInvalidUTF8, input over DecodeOptions.MaxSize
// with ErrTooLarge. Member names compare exactly. It uses
// github.com/go-json-experiment/json, which refuses duplicates and invalid
// UTF-8 by default. Unknown members are kept at every level (Extra) and
// covered by the digest. On Go 1.27 and later that module is an alias of
// the standard library's encoding/json/v2, which spells the option that
// keeps unknown members the same ("embed"); the package's vectors
// (testdata/vectors) hold the same digests under both, and CI runs them
// with the minimum Go and the current one.
//
// # Restricted data
//
// Build refuses, and Check reports as "restricted-data", a package in which
// a detector finds credential-like data (HC-62). The scan shows every
// member name and every value of the package, once, to each Detector;
// DefaultDetectors is the built-in set, and a deployment adds its own
// (BuildOptions.Detectors, CheckConfig.Detectors). The built-in set finds:
//
//   - pem-private-key: "-----BEGIN ... PRIVATE KEY-----" in any case (RSA,
//     EC, DSA, OPENSSH, ENCRYPTED, PKCS#8, "PGP PRIVATE KEY BLOCK")
//   - encoded-private-key: the base64 of a PEM private key (its "-----BEGIN"
//     or "PRIVATE KEY" at any of the three alignments), and PKCS#8, PKCS#1
//     and SEC 1 DER in base64
//   - putty-private-key: "PuTTY-User-Key-File-N:"
//   - jwk-private-key: an object with "kty" and a private member (d, p, q,
//     dp, dq, qi, or k of a symmetric key)
//   - jwt: eyJ<base64url>.eyJ<base64url>.<base64url>, each part possibly the
//     base64url of a JSON object with white space ("eyA", "ewo"...), the
//     periods possibly percent-encoded ("%2E")
//   - bearer-token: "Bearer <16+ token chars>" (a space, "%20" or "+"
//     between), "Basic <16+ base64 chars>", an Authorization header with
//     any scheme ("Token") and a credential that looks generated (letters
//     and digits, or 20 mixed-case characters)
//   - aws-access-key-id: AKIA, ASIA, ABIA or ACCA followed by 16 of [0-9A-Z],
//     and no letter after (a digit may follow)
//   - aws-secret-key: aws_secret_access_key, aws_secret_key or
//     SecretAccessKey (any case, _ optional) = or : <20+ chars>
//   - gcp-api-key: AIza followed by 35 of [0-9A-Za-z_-]
//   - azure-key: AccountKey=<80+ base64>, SharedAccessSignature=, sig=<30+> in a query
//   - github-token: ghp_, gho_, ghu_, ghs_, ghr_ + 36 alphanumerics;
//     github_pat_...; a 40-hex token assigned to a name starting "github"
//     or "gh_" that says token, pat, key, secret, pass, auth or cred
//     (GITHUB_TOKEN="...", "github token: ..."; not GITHUB_SHA=<commit>)
//   - gitlab-token: glpat-, glrt-, gldt-, gloas- + 20
//   - openai-key: sk-proj-, sk-svcacct-, sk-admin- + 20; sk- + 32 alphanumerics
//   - anthropic-key: sk-ant-api03-..., sk-ant-admin01-...
//   - npm-token: npm_ + 36
//   - slack-token: xoxa-, xoxb-, xoxp-, xoxo-, xoxs-, xoxr-, xoxe-, xoxe.xoxp-,
//     xapp- tokens; hooks.slack.com/services/T.../B.../...
//   - stripe-key: sk_live_, sk_test_, rk_live_, rk_test_, whsec_ + 16
//   - password-field: a member named like a credential with a value that is
//     a non-empty string, a number, or a non-empty object or array; a passed
//     context item so named with a value; in text, a value assigned to
//     password (also inside a name: PGPASSWORD=...), passwd, passphrase,
//     pwd, client_secret, api_key or api-key, secret_key, access_token, and
//     "the password is <a word with a digit or a symbol>". A name is a
//     credential's when its ASCII letters and digits, lower-cased, are
//     "pass", contain password, passwd or passphrase, or end with pwd,
//     secret, apikey, apisecret, accesstoken, refreshtoken, idtoken,
//     authtoken, token, privatekey, secretkey, sessiontoken, credential(s),
//     authorization, accesskey or signingkey: "db_password", "userPassword",
//     "x-api-key", "PASS" and "Password " all are.
//   - url-credentials: scheme://user:password@host, the user possibly empty
//   - session-cookie: "Cookie:", "Set-Cookie:" or "cookie" then
//     name=<value that looks generated>
//
// A token is found after any character that is not a letter or a digit, so
// "AWS_KEY_AKIA..." and "token_ghp_..." are caught. Build also refuses the
// value of any item declared withheld (Withhold) wherever it appears, as a
// substring of any string; Check cannot know withheld values and reports
// instead an item both withheld and passed. At most 32 places are reported
// one by one; any more are counted in one last hit.
//
// The patterns are written here rather than taken from a detector library:
// the Go detectors available either pull a large dependency tree into
// every importer or have no tagged release. The built-in detectors read
// each string once between them: one automaton finds the fixed part of
// every shape in one pass, and each shape reads a bounded window around
// it, so that a string costs a few nanoseconds per octet whatever it holds
// (BenchmarkScanString; issue 35 measured a string of "eyJ" fragments at
// 8 µs per octet in the regular expression this replaced).
//
// The scan is a safety net, not a proof. It catches what one value shows
// on its own. It cannot catch a secret of no known shape (a bare
// 40-character AWS secret key is 40 characters of base64, as many hashes
// are), a secret disguised (a zero-width character inside it, a Cyrillic
// letter for a Latin one, another encoding than base64 of a key, base64 of
// "user:password" without "Basic", compression, encryption), nor one split
// across fields or strings (a JWT or an AWS key in two or three members):
// every detector sees one string at a time, and undoing every disguise or
// joining neighbouring values would flag ordinary data
// (TestScan_WhatOneValueCannotShow). A member name it does not know,
// holding a plain password, passes it.
//
// # Cost
//
// Check spends on a package a small multiple of its size whatever its
// shape, before it trusts anything in it (issue 20). The text is decoded
// once (jsontext validates it without state per level; the canonical form
// is built from a flat array of 16-octet nodes, members sorted by
// relinking, each output octet written once), and the package is decoded
// once into its struct. The binding to the offer is checked next; only a
// package bound to its offer is scanned and has its artifacts resolved.
// The scan walks the tree once, keeping the current JSON Pointer as a stack.
// Before the struct is decoded its lists are sized from the tree, and a
// package whose entries would decode to more than 6 times its size is
// refused as too large (ErrTooLarge): that takes thousands of near-empty
// entries or unknown members, since every entry of a valid package has
// required members. A report lists at most 64 findings and counts the rest
// ("more-findings", failing when any of them fails). A package within
// DefaultMaxSize allocates at most 16 times its size, plus a constant for
// the report, nested 10,000 deep or flat, whatever its lists
// (TestCheck_DeepPackageAllocationBounded,
// TestCheck_DensestShapesAllocationBounded,
// TestCheck_DenseListsAllocationBounded, BenchmarkCheckDeepVsFlat).
//
// # Authority along the chain
//
// CheckReceived compares the package with the package of every earlier hop
// whose offer, in the received chain, references one (CheckConfig.Ancestors
// obtains them; each is checked against its digest): every allowed action
// must be allowed by the ancestor, every must-ask action allowed or
// must-ask for it, every action it denied denied ("authority-widened"
// otherwise), and the guard refuses once the earliest exp of the offer and
// its ancestors has passed. A chain that names packages checked without
// CheckConfig.Ancestors fails with "ancestors-not-supplied": without the
// packages no widening can be shown absent, and the contract asks that
// "the next action cannot silently exceed scope"; a finding rather than an
// error keeps the rest of the report for the caller, who supplies
// Ancestors and checks again. An ancestor the resolver cannot obtain is
// "ancestor-unverifiable", advisory unless CheckConfig.RequireAncestors.
// The builder refuses to widen the authority its delegator received
// (BuildOptions.Within). See Widen.
//
// # What the checks prove, and what they cannot
//
// A package that passed is bound to the verified offer, is internally
// consistent (its next action is allowed, its must-ask actions have
// approval owners, its external effects can be deduplicated, its state is
// recent enough and not claimed as of the future, no two authority entries
// collide under trimming, simple case folding and NFC), stays within the
// authority of its ancestors' packages, and every artifact it cites
// resolved to the octets its digest names. The check cannot prove that the
// sender told the truth, nor that the package is complete: a claim is only
// as good as the evidence it cites, and a claim that cites none is
// reported "claim-unsupported" and must be treated as an untrusted claim.
//
// The Guard makes the package's authority the receiving agent's runtime
// policy, for its own hop only (Call.Hop, the offer's handoff digest). An
// effect's operation id and idempotency key compare exactly and, within a
// scope, share one namespace; one already recorded in the ledger in one
// of the call's scopes is refused, whichever guard, process or replica
// recorded it. A must-ask action needs one unused approval per effect,
// bound to the hop, the action and an operation or a count (and, when
// given from a pause, to the call's tool and arguments), given by the
// owner the package names, signed by the approver's key (ApproveSigned) or
// recorded for an authenticated local operator (ApproveLocal). It does not
// protect tools the agent calls without consulting it, nor effects named
// differently, and it remembers only what its ledger keeps.
//
// # The scope of an effect
//
// An operation id or idempotency key names an effect only within the
// scope that could have performed it: its hop, and for the hops below it
// in one chain, that hop too. The guard of a hop refuses a name recorded
// on its hop or on an earlier hop of its verified chain (Report.Chain),
// and nothing recorded elsewhere; a refusal names the call's own name and
// never shows another hop's record. A package may mark as done
// (CompletedAction) only what its own hop, or an earlier hop of its
// verified chain, could have done (CompletedAction.Hop); a claim outside
// that scope is reported "effect-out-of-scope" and NewGuard does not
// record it. The reason: a name recorded in any scope would let one
// trusted delegator have another delegator's real effect refused as
// "already performed", and read that hop's record in the refusal.
//
// # The idempotency key contract
//
// A call is keyed by its hop, its action and tool, its operation id and
// idempotency key, and the SHA-256 of its arguments' RFC 8785 (JCS) form
// (Call.Key, ArgsDigest): the key is the same across retransmission, retry
// and resumption, and changes with the arguments or the authority. Guard.Do
// claims the call under its key, runs the effect once, and records its
// outcome; the same call presented again gets the recorded outcome and the
// effect never runs again (HC-38). The three answers, each a *Refusal,
// take the names of the agentic-commerce protocol's idempotency proposal:
//
//   - ErrReplayed: the same key with the same arguments; Refusal.Outcome is
//     the first call's outcome (Idempotent-Replayed: true).
//   - ErrIdempotencyConflict: the operation used by another call (other
//     arguments, action or tool): idempotency_conflict, HTTP 422.
//   - ErrInFlight: the same call still running, or whose process died
//     before its outcome was recorded: idempotency_in_flight, HTTP 409
//     with Retry-After. A claim is durable and is never released: after a
//     crash the call stays in flight, never runs again, until an operator
//     settles it from the system of record (authority.Ledger.Settle).
//
// All three wrap ErrRepeated. The ledger counts the retries it suppressed
// (authority.Record.Replays), so that an audit tells a suppressed retry
// from a second action. A call claimed before its hop finished and
// presented again after it is still answered so; any other call on a
// finished hop is refused with ErrFinished.
//
// Guard.Claim and Claim.Settle are Do in two steps, for a host whose
// framework runs the effect between two callbacks of its own (ADK's
// before- and after-tool callbacks). Guard.Once runs a host's unit of
// work once per call under the same contract without deciding its action:
// a unit is not an effect the package authorizes, and each effect it
// makes asks the guard as it comes.
//
// The hosts' middlewares derive each call and carry its key themselves
// (integrations/mcphop, a2a1hop, a2a03hop, adkhop), so that a tool handler
// or an executor written from their docs computes nothing: an MCP
// tools/call and an ADK tool call are each one call, run with Do (Claim);
// an A2A execution is a unit, run with Once, once per message, and the
// answer to a pause once per pause.
//
// # Approvals bound to what they allow
//
// A refused must-ask call carries the approval it needs
// (Refusal.Pending): the hop, the action, the operation, the tool, the
// digest of the call's canonical arguments and the arguments themselves,
// for the owner to see. ApprovalRequest.Grant (for ApproveLocal) and
// ApprovalRequest.Statement (for SignApproval) approve exactly that call:
// a resumption with other arguments or another tool is refused
// (ErrApprovalMismatch). An approval is identified by what it says, never
// by the octets that carried it: two encodings or signatures of one signed
// statement, its ECDSA (r, n-s) twin among them, are one grant. Its uses
// are spent atomically, once, across every replica sharing the ledger.
//
// # Who authorized this
//
// The ledger records, with each effect and each approval, the hop and the
// chain it came through (the handoff digests of the verified chain,
// outermost first). authority.Audit answers, for an operation, which
// delegation authorized the effect, through which chain, how it ended and
// who approved it; "handoff evidence audit" prints it from a bbolt ledger.
package evidence
