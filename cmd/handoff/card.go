package main

import (
	"errors"
	"strings"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
)

// cardCommands are the subcommands of "handoff card".
func cardCommands() []command {
	return []command{
		{"sign", "sign an AgentCard with an agent's key; the signed card on stdout", runCardSign},
		{"verify", "verify an AgentCard's signatures for an agent (JSON answer)", runCardVerify},
	}
}

func cardUsage() string {
	return groupUsage(`Usage: handoff card SUBCOMMAND [flags] [arguments]

Signed A2A AgentCards (A2A 1.0, section 8.4): a JWS with a detached payload,
the RFC 8785 (JCS) form of the card without its "signatures" member, made
with the agent's handoff key and checked with the same trust file as its
handoffs.
`, cardCommands(), `
Run "handoff card SUBCOMMAND -h" for its flags and examples.

Exit status: 0 success (signed, verified), 1 a negative answer (the card
does not verify), 2 usage or I/O error.

Examples:
  handoff card sign --key coder.jwk card.json > signed.json
  handoff card verify --trust trust.json --agent spiffe://b.example/agent/coder signed.json
`)
}

func runCard(e *env, args []string) int {
	return e.runGroup("card", cardCommands(), cardUsage, args)
}

func runCardSign(e *env, args []string) int {
	fset := newFlagSet("card sign")
	keyPath := fset.String("key", "", "the agent's private JWK, as keygen writes it (`KEY.jwk`, required)")
	kid := fset.String("kid", "", "the protected header's `KID` (default: the key's RFC 7638 thumbprint, as offers name it)")
	jku := fset.String("jku", "", "write `URL`, where the agent publishes its JWK Set, as the protected header's jku (never used by verify)")
	dropEmpty := fset.Bool("drop-empty", false, "remove every member whose value is null, \"\", [] or {} before signing, so that verifiers that "+
		"drop them (@a2a-js/sdk) rebuild the payload signed")
	out := fset.String("out", "", "write the signed card to `FILE` (default stdout)")
	usage := func() string {
		return usageText(fset, `Usage: handoff card sign --key KEY.jwk [--kid KID] [--jku URL] [--drop-empty] [--out FILE] CARD|-

Signs an A2A AgentCard (JSON; "-" reads stdin) with the agent's handoff key
and writes the card with the new signature last in "signatures", after any
it had, in its RFC 8785 (JCS) form: the octets to serve. The signature is a
JWS over the JCS form of the card without "signatures", its protected header
{"alg", "kid", "typ": "JOSE"}; alg follows from the key (ES256, ES384,
EdDSA). Exit status: 0 signed, 2 usage or I/O error, or a card that is not
a JSON object.`, `  handoff card sign --key coder.jwk card.json > signed.json
  curl -s https://b.example/.well-known/agent-card.json | handoff card sign --key coder.jwk --drop-empty -`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "card sign"
	switch {
	case len(pos) != 1:
		return e.usagef(cmd, "one CARD (or - for stdin) expected")
	case *keyPath == "":
		return e.usagef(cmd, "--key is required")
	}
	key, warn, err := loadKey(*keyPath)
	if err != nil {
		return e.failf(cmd, "--key: %v", err)
	}
	if warn != "" && *kid == "" {
		e.warnf(cmd, "%s", warn)
	}
	card, err := e.readInput(pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	signed, err := agentcard.Sign(card, key, agentcard.SignOptions{KID: *kid, JKU: *jku, DropEmpty: *dropEmpty})
	if err != nil {
		return e.failf(cmd, "%s: %v", displayName(pos[0]), err)
	}
	if err := e.writeOutput(*out, signed); err != nil {
		return e.failf(cmd, "%v", err)
	}
	return exitOK
}

// cardOutput is the one JSON object card verify prints. Its classes are
// those of the vectors in testdata/agentcard.
type cardOutput struct {
	Verified   bool         `json:"verified"`
	Agent      string       `json:"agent"`
	Error      string       `json:"error"`
	Detail     string       `json:"detail"`
	Signatures []cardSigOut `json:"signatures"`
}

type cardSigOut struct {
	Index        int    `json:"index"`
	Verified     bool   `json:"verified"`
	Alg          string `json:"alg"`
	KID          string `json:"kid"`
	Key          string `json:"key"`
	DroppedEmpty bool   `json:"dropped_empty"`
	Error        string `json:"error"`
	Detail       string `json:"detail"`
}

func runCardVerify(e *env, args []string) int {
	fset := newFlagSet("card verify")
	agent := fset.String("agent", "", "the `AGENTID` the card was fetched for: only the keys the trust binds to it are tried (required)")
	trustFlags := addTrustFlags(fset)
	dropped := fset.Bool("allow-dropped-empty", false, "also accept a signature over the card with its null, \"\", [] and {} members "+
		"dropped, as @a2a-js/sdk signs; such members are then not covered by the signature")
	maxSize := fset.Int("max-size", agentcard.DefaultMaxSize, "largest card accepted, in `OCTETS`")
	usage := func() string {
		return usageText(fset, `Usage: handoff card verify --agent AGENTID --trust TRUST.json
                           [--trust-url AGENT=URL]... [--trust-doc-url URL] [--trust-cache FILE]
                           [--allow-dropped-empty] [--max-size OCTETS] CARD|-

Checks the signatures of an A2A AgentCard (JSON; "-" reads stdin) fetched
for AGENTID: each over the RFC 8785 (JCS) form of the card without
"signatures" (whatever the member order, whitespace and escapes it was
served with), with the keys TRUST.json binds to AGENTID, each pinned to
its alg. The card names no agent and no key that is used: a kid only says
which of the agent's keys to try first, and a jku is never fetched.

Prints exactly one JSON object: "verified", "agent", "error" (""; or
"too-large", "malformed", "unsigned", "unverified"), "detail", and
"signatures", one object per signature: "index", "verified", "alg", "kid",
"key" (the kid of the trusted key that verified it), "dropped_empty",
"error" ("malformed", "untrusted-key" or "bad-signature") and "detail".
The card verifies when one signature does.

Exit status: 0 verified; 1 not verified; 2 usage or I/O error (message on
stderr, nothing on stdout).`, `  handoff card verify --trust trust.json --agent spiffe://b.example/agent/coder signed.json
  curl -s https://b.example/.well-known/agent-card.json | \
      handoff card verify --trust-url spiffe://b.example/agent/coder=https://b.example/jwks.json \
      --agent spiffe://b.example/agent/coder -`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "card verify"
	switch {
	case len(pos) != 1:
		return e.usagef(cmd, "one CARD (or - for stdin) expected")
	case *agent == "":
		return e.usagef(cmd, "--agent is required")
	case trustFlags.problem() != "":
		return e.usagef(cmd, "%s", trustFlags.problem())
	case *maxSize <= 0:
		return e.usagef(cmd, "--max-size must be positive")
	}
	trust, done, code, ok := trustFlags.load(e, cmd)
	if !ok {
		return code
	}
	defer done()
	card, err := e.readInput(pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	v, err := agentcard.Verify(card, trust, handoff.AgentID(*agent), agentcard.VerifyOptions{MaxSize: *maxSize, AllowDroppedEmpty: *dropped})
	res := cardResult(*agent, v, err)
	if err := e.printJSON(res); err != nil {
		return e.failf(cmd, "%v", err)
	}
	if res.Verified {
		return exitOK
	}
	return exitNo
}

// cardResult is Verify's answer as card verify prints it.
func cardResult(agent string, v *agentcard.Verified, err error) *cardOutput {
	out := &cardOutput{Verified: v != nil, Agent: agent, Signatures: []cardSigOut{}}
	var sigs []agentcard.Signature
	var ue *agentcard.UnverifiedError
	switch {
	case v != nil:
		sigs = v.Signatures()
	case errors.As(err, &ue):
		out.Error, sigs = "unverified", ue.Signatures
	case errors.Is(err, handoff.ErrTooLarge):
		out.Error = "too-large"
	case errors.Is(err, agentcard.ErrUnsigned):
		out.Error = "unsigned"
	default:
		out.Error = "malformed"
	}
	if err != nil {
		out.Detail = strings.TrimPrefix(err.Error(), "agentcard: ")
	}
	for _, s := range sigs {
		o := cardSigOut{Index: s.Index, Verified: s.Err == nil, Alg: s.Alg, KID: s.KID, Key: s.Key.KID, DroppedEmpty: s.DroppedEmpty}
		switch {
		case s.Err == nil:
		case errors.Is(s.Err, handoff.ErrMalformed):
			o.Error = "malformed"
		case errors.Is(s.Err, handoff.ErrUntrustedKey):
			o.Error = "untrusted-key"
		default:
			o.Error = "bad-signature"
		}
		if s.Err != nil {
			o.Detail = strings.TrimPrefix(s.Err.Error(), "agentcard: ")
		}
		out.Signatures = append(out.Signatures, o)
	}
	return out
}
