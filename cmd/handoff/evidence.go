package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/ref"
)

// evidenceCommands are the subcommands of "handoff evidence".
func evidenceCommands() []command {
	return []command{
		{"template", "print an annotated empty handoff package", runEvidenceTemplate},
		{"check", "check a handoff package against its offer (JSON findings)", runEvidenceCheck},
		{"digest", "print the package digest: SHA-256 over its JCS form", runEvidenceDigest},
		{"audit", "which delegation authorized an effect, and who approved it", runEvidenceAudit},
	}
}

func evidenceUsage() string {
	return groupUsage(`Usage: handoff evidence SUBCOMMAND [flags] [arguments]

Handoff packages of the Agent Handoff Evidence Contract: what was handed
over (state, completed actions, authority, next action), bound by digest to
the signed offer it rides with.
`, evidenceCommands(), `
Run "handoff evidence SUBCOMMAND -h" for its flags and examples.

Exit status: 0 success (the package passed), 1 a negative answer (findings,
or a package that does not decode), 2 usage or I/O error.

Examples:
  handoff evidence template > package.json
  handoff evidence digest package.json
  handoff evidence check --offer handoff.json --trust trust.json package.json
  handoff evidence audit --ledger authority.db refund-INV-1042
`)
}

func runEvidence(e *env, args []string) int {
	return e.runGroup("evidence", evidenceCommands(), evidenceUsage, args)
}

func runEvidenceTemplate(e *env, args []string) int {
	fset := newFlagSet("evidence template")
	out := fset.String("out", "", "write the template to `FILE` (default stdout)")
	usage := func() string {
		return usageText(fset, `Usage: handoff evidence template [--out FILE]

Prints an annotated empty handoff package: every member of the contract's
template, each value describing in angle brackets what goes there. Fill it
in (times in RFC 3339), then check it with "handoff evidence check".`, `  handoff evidence template > package.json`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return e.usagef("evidence template", "no arguments expected")
	}
	if err := e.writeOutput(*out, evidence.Template()); err != nil {
		return e.failf("evidence template", "%v", err)
	}
	return exitOK
}

func runEvidenceDigest(e *env, args []string) int {
	fset := newFlagSet("evidence digest")
	salt := fset.String("salt", "", "the base64url `SALT` of a salted reference: print SHA-256 over salt || JCS form")
	canonical := fset.Bool("canonical", false, "print the package's JCS form (RFC 8785) instead of its digest")
	usage := func() string {
		return usageText(fset, `Usage: handoff evidence digest [--salt SALT | --canonical] PACKAGE|-

Prints the package digest in base64url without padding: SHA-256 over the
package's RFC 8785 (JCS) form, the dig of the offer's reference to it. The
package is decoded strictly first (no duplicate names, valid UTF-8).

Exit status: 0 printed, 1 the package does not decode, 2 usage or I/O error.`,
			`  handoff evidence digest package.json
  handoff evidence digest --salt 7bq9M2... package.json
  handoff evidence digest --canonical package.json`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "evidence digest"
	if len(pos) != 1 {
		return e.usagef(cmd, "one PACKAGE (or - for stdin) expected")
	}
	if *salt != "" && *canonical {
		return e.usagef(cmd, "--salt and --canonical exclude each other")
	}
	var saltB []byte
	if *salt != "" {
		var err error
		if saltB, err = base64.RawURLEncoding.DecodeString(*salt); err != nil || len(saltB) < digest.MinSaltSize {
			return e.usagef(cmd, "--salt: want base64url without padding, at least %d octets", digest.MinSaltSize)
		}
	}
	data, err := e.readInput(pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	c, err := evidence.Canonical(data, evidence.DecodeOptions{})
	if err != nil {
		fmt.Fprintf(e.stderr, "handoff %s: %s: %v\n", cmd, displayName(pos[0]), err)
		return exitNo
	}
	switch {
	case *canonical:
		_, err = e.stdout.Write(append(c, '\n'))
	case saltB != nil:
		_, err = fmt.Fprintln(e.stdout, saltedDigest(saltB, c).B64())
	default:
		_, err = fmt.Fprintln(e.stdout, digest.SHA256(c).B64())
	}
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	return exitOK
}

// saltedDigest is the "salted-digest" value for a given salt: SHA-256 over
// salt || octets (draft section 2.2), as Digest.MatchesSalted checks it.
func saltedDigest(salt, octets []byte) digest.Digest {
	return digest.SHA256(append(append([]byte(nil), salt...), octets...))
}

// evidenceOutput is the one JSON object "evidence check" prints.
type evidenceOutput struct {
	Passed    bool                      `json:"passed"`
	Error     string                    `json:"error,omitempty"`
	Digest    string                    `json:"digest"`
	Binding   *refOut                   `json:"binding"`
	Artifacts []evidence.ArtifactResult `json:"artifacts"`
	Findings  []evidence.Finding        `json:"findings"`
	Ack       *ackOut                   `json:"acknowledgement"`
}

type ackOut struct {
	Decision string   `json:"decision"`
	Reason   string   `json:"reason,omitempty"`
	Findings []string `json:"findings,omitempty"`
}

func runEvidenceCheck(e *env, args []string) int {
	fset := newFlagSet("evidence check")
	offerPath := fset.String("offer", "", "the Handoff object or signed offer (`HANDOFF_FILE`) the package rides with; its signature is verified against --trust")
	trustPath := fset.String("trust", "", "trust file (`TRUST.json`), required with --offer")
	salt := fset.String("salt", "", "the base64url `SALT` delivered with the package, for a salted reference")
	unbound := fset.Bool("unbound", false, "check the package on its own, without --offer: nothing is said of its binding")
	now := &unixFlag{}
	fset.Var(now, "now", "evaluation time in `UNIX` seconds (default: the clock)")
	maxAge := &secondsFlag{d: evidence.DefaultMaxStateAge}
	fset.Var(maxAge, "max-state-age", "oldest \"as of\" accepted for a state, in `SECONDS` (at least 1)")
	var refObjects, refSalts listFlag
	fset.Var(&refObjects, "ref-object", "FILE holds the object of the artifacts whose loc is LOC (`LOC=FILE`, repeatable)")
	fset.Var(&refSalts, "ref-salt", "SALT is the base64url salt of the artifact at LOC (`LOC=SALT`, repeatable)")
	usage := func() string {
		return usageText(fset, `Usage: handoff evidence check (--offer HANDOFF_FILE --trust TRUST.json | --unbound)
                              [--salt SALT] [--now UNIX] [--max-state-age 900]
                              [--ref-object LOC=FILE]... PACKAGE|-

Checks a handoff package as its receiver does, with no other history: its
binding to the offer (hop, iss, aud, time, and the offer's reference to the
package's digest), required fields, restricted data, the authority and the
next action, pending approvals and owners, idempotency of completed
external actions, the age of every state, and each artifact against the
object --ref-object supplies (an artifact with none is unverifiable). The
offer's signature is verified; its freshness is not ("handoff verify" does
that).

Prints one JSON object: "passed", "digest", "binding", "artifacts",
"findings" (each with a stable "code" and the JSON Pointer "path" of the
field; "advisory" ones do not fail the check) and the "acknowledgement" the
receiver would send.

Exit status: 0 passed; 1 not passed, or the package does not decode
("error" says why); 2 usage or I/O error.`,
			`  handoff evidence check --offer handoff.json --trust trust.json \
      --ref-object urn:shop:ledger:INV-1042=ledger.json package.json
  handoff evidence check --unbound --now 1793000000 package.json`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "evidence check"
	switch {
	case len(pos) != 1:
		return e.usagef(cmd, "one PACKAGE (or - for stdin) expected")
	case *offerPath == "" && !*unbound:
		return e.usagef(cmd, "--offer (with --trust) or --unbound is required")
	case *offerPath != "" && *unbound:
		return e.usagef(cmd, "--offer and --unbound exclude each other")
	case *offerPath != "" && *trustPath == "":
		return e.usagef(cmd, "--trust is required with --offer")
	case maxAge.d < time.Second:
		return e.usagef(cmd, "--max-state-age must be at least 1 second")
	}
	var saltB []byte
	if *salt != "" {
		var err error
		if saltB, err = base64.RawURLEncoding.DecodeString(*salt); err != nil {
			return e.usagef(cmd, "--salt: not base64url without padding")
		}
	}
	objects, err := refObjectsFrom(refObjects, refSalts)
	if err != nil {
		return e.usagef(cmd, "%v", err)
	}
	var offer *handoff.Offer
	if *offerPath != "" {
		trustDoc, err := os.ReadFile(*trustPath)
		if err != nil {
			return e.failf(cmd, "--trust: %v", err)
		}
		trust, err := keyset.ParseTrust(trustDoc)
		if err != nil {
			return e.failf(cmd, "--trust %s: %v", *trustPath, err)
		}
		data, err := e.readInput(*offerPath)
		if err != nil {
			return e.failf(cmd, "%v", err)
		}
		in, err := parseInput(data)
		if err != nil {
			return e.answer(cmd, &evidenceOutput{Error: "offer: " + err.Error()})
		}
		if offer, err = handoff.OpenOffer(in.offerElement(), trust, handoff.Limits{}); err != nil {
			return e.answer(cmd, &evidenceOutput{Error: "offer: " + err.Error()})
		}
	}
	pkg, err := e.readInput(pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	rep, err := evidence.Check(context.Background(), offer, evidence.Delivered{Package: pkg, Salt: saltB}, evidence.CheckConfig{
		Now: now.clock(), MaxStateAge: maxAge.d, Artifacts: ref.ByLoc(objects), Unbound: *unbound,
	})
	if err != nil {
		return e.answer(cmd, &evidenceOutput{Error: "package: " + err.Error()})
	}
	out := &evidenceOutput{Passed: rep.Passed(), Digest: rep.Digest().B64(), Artifacts: rep.Artifacts(), Findings: rep.Findings()}
	if out.Artifacts == nil {
		out.Artifacts = []evidence.ArtifactResult{}
	}
	if out.Findings == nil {
		out.Findings = []evidence.Finding{}
	}
	if b := rep.Binding(); b != nil {
		r := refsOut([]ref.Result{*b})[0]
		out.Binding = &r
	}
	ack := evidence.Acknowledge(rep)
	out.Ack = &ackOut{Decision: string(ack.Decision), Reason: ack.Reason, Findings: ack.Findings}
	return e.answer(cmd, out)
}

// answer prints out and returns its exit status.
func (e *env) answer(cmd string, out *evidenceOutput) int {
	if out.Findings == nil {
		out.Findings = []evidence.Finding{}
	}
	if out.Artifacts == nil {
		out.Artifacts = []evidence.ArtifactResult{}
	}
	if err := e.printJSON(out); err != nil {
		return e.failf(cmd, "%v", err)
	}
	if out.Passed {
		return exitOK
	}
	return exitNo
}
