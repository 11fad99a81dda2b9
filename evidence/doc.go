// Package evidence implements the handoff package of the Agent Handoff
// Evidence Contract: what state the work is in, what was already done, what
// the receiver may and may not do, and what to do next, bound by digest to
// the signed offer it rides with.
//
// The offer proves who handed work to whom, when and through which agents.
// The package says what was handed. The delegator builds it (NewBuilder,
// Build), which binds it to the offer (its id is the hop, its sender and
// receiver are the offer's iss and aud, its time falls inside [iat, exp])
// and returns the ContextRef to put in the offer's refs: kind Kind or
// KindSalted (absolute URIs naming this definition, HC-10), digest SHA-256
// over the package's RFC 8785 (JCS) form, plain or salted (HC-64, HC-09).
// The JCS form is computed by github.com/gowebpki/jcs.
//
// The delegate, with no hidden session history, checks the package it
// received (CheckReceived, or Check) against the verified offer, using nothing but the
// package, the offer, its clock and its resolvers, and gets findings with
// stable codes (Code) and JSON Pointer paths. It acknowledges through the
// hop's status (Reply): "accepted" when the package passed, "rejected" with
// reason "policy" and a detail naming the findings otherwise; the status
// refs carry the package reference, so the acknowledged digest is kept with
// the hop's last status in the delegate's store (Recorded). A package that
// passed against its offer (Report.Acceptable) yields a Guard, which the receiving agent consults before every
// tool call or mutation. Under "specialist returns result", the delegate
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
// covered by the digest. The package does not build under
// GOEXPERIMENT=jsonv2, where that module aliases the standard library's
// experimental encoding/json/v2, whose struct tag for unknown members is
// spelled differently.
//
// # Restricted data
//
// Build refuses, and Check reports as "restricted-data", a package in which
// any JSON string (member value or member name) matches one of these
// patterns (HC-62):
//
//   - pem-private-key: "-----BEGIN [RSA |EC |DSA |OPENSSH |ENCRYPTED ]PRIVATE KEY-----",
//     "-----BEGIN PGP PRIVATE KEY BLOCK-----"
//   - jwt: eyJ<base64url>.eyJ<base64url>.<base64url>
//   - bearer-token: "Bearer <16+ token chars>", "Basic <16+ base64 chars>"
//   - aws-access-key-id: AKIA, ASIA, ABIA or ACCA followed by 16 of [0-9A-Z]
//   - aws-secret-key: aws_secret_access_key (any case, _ optional) = <20+ chars>
//   - gcp-api-key: AIza followed by 35 of [0-9A-Za-z_-]
//   - azure-key: AccountKey=<80+ base64>, SharedAccessSignature=, sig=<30+> in a query
//   - github-token: ghp_, gho_, ghu_, ghs_, ghr_ followed by 36+ alphanumerics; github_pat_...
//   - slack-token: xoxa-, xoxb-, xoxp-, xoxo-, xoxs-, xoxr-, xapp- tokens; hooks.slack.com/services/T.../B.../...
//   - stripe-key: sk_live_, sk_test_, rk_live_, rk_test_, whsec_ followed by 16+ alphanumerics
//   - password-field: a member named password, passwd, pwd, passphrase,
//     secret, client_secret, api_key, api_secret, access_token,
//     refresh_token, id_token, auth_token, token, private_key, secret_key,
//     session_token, credential(s) or authorization (case, "-" and "_"
//     ignored) with a non-empty string value, a passed context item so
//     named with a value, or "password=..." / "api_key: ..." in text
//   - url-credentials: scheme://user:password@host
//
// Build also refuses the value of any item declared withheld (Withhold)
// wherever it appears, as a substring of any string; Check cannot know
// withheld values and reports instead an item both withheld and passed.
// The patterns are written here rather than taken from a detector library:
// the Go detectors available either pull a large dependency tree into
// every importer or have no tagged release, while these shapes are few,
// documented above and each tested. The scan is a safety net, not a proof:
// a secret of no known shape passes it.
//
// # What the checks prove, and what they cannot
//
// A package that passed is bound to the verified offer, is internally
// consistent (its next action is allowed, its must-ask actions have
// approval owners, its external effects can be deduplicated, its state is
// recent enough), and every artifact it cites resolved to the octets its
// digest names. The check cannot prove that the sender told the truth, nor
// that the package is complete: a claim is only as good as the evidence it
// cites, and a claim that cites none is reported "claim-unsupported" and
// must be treated as an untrusted claim. The Guard makes the package's
// authority the receiving agent's runtime policy; it does not protect
// tools the agent calls without consulting it, nor later hops.
package evidence
