package main

import (
	"fmt"
	"os"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/ref"
)

func runOffer(e *env, args []string) int {
	fset := newFlagSet("offer")
	keyPath := fset.String("key", "", "private JWK of the delegator (`KEY.jwk`, from keygen; required)")
	iss := fset.String("iss", "", "AgentId of the delegator, the signer (required)")
	aud := fset.String("aud", "", "AgentId of the delegate (required)")
	dialog := fset.String("dialog", "", "host dialog id (required without --from; default: the --from offer's)")
	task := fset.String("task", "", "task id (optional)")
	ttl := &secondsFlag{d: 120 * time.Second}
	fset.Var(ttl, "ttl", "lifetime exp - iat: `SECONDS` or a duration (receivers refuse more than their maximum, 300s by default)")
	from := fset.String("from", "", "the Handoff (`HANDOFF_FILE`, or a single signed offer) received by --iss whose work this offer passes on: sets prev and the chain")
	omitChain := fset.Bool("omit-chain", false, "with --from: keep prev but leave the chain out (HC-63); the next hop sees an absent chain")
	oboSub := fset.String("obo-sub", "", "obo.sub: the principal on whose behalf the work is done (default: the --from offer's obo)")
	oboIss := fset.String("obo-iss", "", "obo.iss: the issuer in whose namespace --obo-sub is unique")
	grantFile := fset.String("grant-credential-file", "", "a credential `FILE`; grant is the digest of its exact octets (the credential is not put in the offer)")
	var refs listFlag
	fset.Var(&refs, "ref", "a \"digest\" reference over FILE's octets, with loc LOC if given (`FILE[=LOC]`, repeatable)")
	salted := fset.Bool("salted", false, "make every --ref a \"salted-digest\" with a fresh salt, and the --package reference salted, printed on stderr (never put in the offer)")
	pkgPath := fset.String("package", "", "an evidence package (`PACKAGE`, JSON, or - for stdin) to bind to this offer and name in its refs by digest (HC-64); needs --package-out")
	pkgOut := fset.String("package-out", "", "write the package bound to the offer to `FILE`: the octets its reference names, which travel beside the Handoff")
	format := fset.String("format", "jws", "signed form: jws or cose")
	encoding := fset.String("encoding", "json", "encoding of the Handoff object: json or cbor")
	now := &unixFlag{}
	fset.Var(now, "now", "issue time iat in `UNIX` seconds (default: the clock)")
	out := fset.String("out", "", "write the Handoff object to `FILE` (default stdout)")
	hop := fset.String("hop", "", "use this HopId instead of a fresh random one: for building test vectors only; "+
		"a hop signed twice with different content is equivocation")
	usage := func() string {
		return usageText(fset, `Usage: handoff offer --key KEY.jwk --iss ID --aud ID --dialog ID [--task T]
                     [--ttl 120s] [--from HANDOFF_FILE [--omit-chain]]
                     [--obo-sub S [--obo-iss I]] [--grant-credential-file F]
                     [--ref FILE[=LOC]]... [--salted] [--format jws|cose]
                     [--package PACKAGE --package-out FILE]
                     [--encoding json|cbor] [--now UNIX] [--out FILE]

Signs an offer from --iss to --aud with a fresh hop and writes the Handoff
object that carries it: {"offer": ..., "chain": [...]}.

With --package, the evidence package (a template from "handoff evidence
template", filled in) is bound to the offer (its id is the hop, its
sender and receiver the --iss and --aud, its time the offer's iat),
checked as the receiver's check requires (a missing field is named), and
named in the offer's refs by its digest; the bound package is written to
--package-out, to travel beside the Handoff. "handoff evidence check
--offer" then checks that file against the offer.

With --from, the offer passes on the work of an offer --iss received: prev
is the handoff digest of that offer and the chain is its chain followed by
its offer (draft section 2.1). The --from file is not verified here: verify
it first with "handoff verify".`, `  handoff offer --key planner.jwk --iss spiffe://a.example/agent/planner \
      --aud spiffe://b.example/agent/coder --dialog ctx-7c1e --task task-42 > h1.json
  # pass on the work received in h1.json, with the chain:
  handoff offer --key coder.jwk --iss spiffe://b.example/agent/coder \
      --aud spiffe://c.example/agent/tester --from h1.json --out h2.json
  # a reference to a file by digest, and a credential bound by grant:
  handoff offer --key planner.jwk --iss A --aud B --dialog d1 \
      --ref issue.json=https://a.example/ctx/9 --grant-credential-file token.txt
  # an evidence package named by the offer, checked against it:
  handoff offer --key planner.jwk --iss A --aud B --dialog d1 \
      --package refund.json --package-out refund.bound.json --out h.json
  handoff evidence check --offer h.json --trust trust.json refund.bound.json
  # COSE elements in a CBOR Handoff object:
  handoff offer --key planner.jwk --iss A --aud B --dialog d1 --format cose --encoding cbor --out h.cbor`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "offer"
	switch {
	case len(pos) > 0:
		return e.usagef(cmd, "unexpected argument %q", pos[0])
	case *keyPath == "":
		return e.usagef(cmd, "--key KEY.jwk is required")
	case *iss == "":
		return e.usagef(cmd, "--iss is required")
	case *aud == "":
		return e.usagef(cmd, "--aud is required")
	case *dialog == "" && *from == "":
		return e.usagef(cmd, "--dialog is required (or --from, whose dialog is then used)")
	case *oboIss != "" && *oboSub == "":
		return e.usagef(cmd, "--obo-iss needs --obo-sub")
	case *omitChain && *from == "":
		return e.usagef(cmd, "--omit-chain needs --from")
	case ttl.d < time.Second:
		return e.usagef(cmd, "--ttl must be at least 1s")
	case *hop != "" && !handoff.HopID(*hop).Valid():
		return e.usagef(cmd, "--hop %q does not match [A-Za-z0-9_-]{22,64}", *hop)
	case (*pkgPath == "") != (*pkgOut == ""):
		return e.usagef(cmd, "--package and --package-out go together")
	}
	f, err := parseFormat(*format)
	if err != nil {
		return e.usagef(cmd, "%v", err)
	}
	enc, err := parseEncoding(*encoding)
	if err != nil {
		return e.usagef(cmd, "%v", err)
	}
	signer, warn, err := loadSigner(*keyPath, f)
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	if warn != "" {
		e.warnf(cmd, "%s", warn)
	}
	if ttl.d > defaultMaxLifetime {
		e.warnf(cmd, "--ttl %s exceeds the recommended maximum lifetime %s: receivers using it refuse the offer as stale", ttl.d, defaultMaxLifetime)
	}

	iat := handoff.TimeOf(now.clock()())
	h := &handoff.Handoff{}
	o := &handoff.Offer{
		Hop: handoff.HopID(*hop), Dialog: *dialog, Task: *task,
		Iss: handoff.AgentID(*iss), Aud: handoff.AgentID(*aud),
		Iat: iat, Exp: iat + handoff.Time(ttl.d/time.Second),
	}
	if o.Hop == "" {
		if o.Hop, err = handoff.NewHopID(nil); err != nil {
			return e.failf(cmd, "hop: %v", err)
		}
	}
	if *oboSub != "" {
		o.Obo = &handoff.Principal{Sub: *oboSub, Iss: *oboIss}
	}
	if *from != "" {
		if code := e.passOn(cmd, *from, o, h, *omitChain); code != exitOK {
			return code
		}
	}
	if *grantFile != "" {
		cred, err := os.ReadFile(*grantFile)
		if err != nil {
			return e.failf(cmd, "--grant-credential-file: %v", err)
		}
		g := digest.SHA256(cred)
		o.Grant = &g
	}
	if o.Refs, err = e.buildRefs(cmd, refs, *salted); err != nil {
		return e.failf(cmd, "%v", err)
	}
	var bound []byte
	if *pkgPath != "" {
		r, octets, code := e.bindPackage(cmd, *pkgPath, o, *salted)
		if code != exitOK {
			return code
		}
		o.Refs, bound = append(o.Refs, r), octets
	}
	signed, err := signer.SignOffer(o)
	if err != nil {
		return e.failf(cmd, "sign: %v", err)
	}
	h.Offer = signed
	data, err := h.Encode(enc)
	if err != nil {
		return e.failf(cmd, "encode: %v", err)
	}
	if enc == handoff.JSON {
		data = append(data, '\n')
	}
	if bound != nil {
		if err := os.WriteFile(*pkgOut, bound, 0o644); err != nil {
			return e.failf(cmd, "--package-out: %v", err)
		}
	}
	if err := e.writeOutput(*out, data); err != nil {
		return e.failf(cmd, "%v", err)
	}
	return exitOK
}

// bindPackage reads the package at path and binds it to o
// (evidence.Builder.Build with evidence.BindingOf): it returns the
// reference for the offer's refs and the bound package's octets. A salted
// reference's salt goes to stderr, never into the offer (HC-09).
func (e *env) bindPackage(cmd, path string, o *handoff.Offer, salted bool) (ref.Ref, []byte, int) {
	data, err := e.readInput(path)
	if err != nil {
		return ref.Ref{}, nil, e.failf(cmd, "--package: %v", err)
	}
	p, err := evidence.Decode(data, evidence.DecodeOptions{})
	if err != nil {
		return ref.Ref{}, nil, e.failf(cmd, "--package %s: %v", path, err)
	}
	built, err := evidence.NewBuilder(*p).Build(evidence.BindingOf(o), evidence.BuildOptions{Salted: salted})
	if err != nil {
		return ref.Ref{}, nil, e.failf(cmd, "--package %s: %v", path, err)
	}
	if salted {
		fmt.Fprintf(e.stderr, "handoff %s: package %s salt %s\n", cmd, path, b64(built.Salt))
	}
	return built.Ref, built.Encoded, exitOK
}

// passOn sets prev, the chain, and the defaults of o from the Handoff in
// path, as Agent.Offer does with From (section 2.1).
func (e *env) passOn(cmd, path string, o *handoff.Offer, h *handoff.Handoff, omitChain bool) int {
	data, err := e.readInput(path)
	if err != nil {
		return e.failf(cmd, "--from: %v", err)
	}
	parsed, err := parseInput(data)
	if err != nil {
		return e.failf(cmd, "--from %s: %v", path, err)
	}
	in := parsed.handoff
	if in == nil { // a single signed offer: no chain before it
		in = &handoff.Handoff{Offer: parsed.single}
	}
	prev, st, err := handoff.InspectUnverified(in.Offer, handoff.Limits{})
	if err != nil {
		return e.failf(cmd, "--from %s: %v", path, err)
	}
	if prev == nil {
		return e.failf(cmd, "--from %s: the element is a %s, not an offer", path, st.State)
	}
	if prev.Aud != o.Iss {
		return e.failf(cmd, "--from %s: that offer is addressed to %q, not to --iss %q; passing it on would break the chain", path, prev.Aud, o.Iss)
	}
	d := in.Offer.Digest()
	o.Prev = &d
	if o.Dialog == "" {
		o.Dialog = prev.Dialog
	}
	if o.Obo == nil {
		o.Obo = prev.Obo
	}
	if !omitChain {
		h.Chain = append(append([]handoff.Signed(nil), in.Chain...), in.Offer)
		if len(h.Chain) > defaultMaxChain {
			return e.failf(cmd, "the chain would have %d elements, over the limit of %d receivers apply by default (HC-50); use --omit-chain", len(h.Chain), defaultMaxChain)
		}
	}
	skew := handoff.Time(defaultSkew / time.Second)
	switch {
	case o.Iat < prev.Iat:
		e.warnf(cmd, "iat %d is before the --from offer's iat %d: receivers will find the chain broken", o.Iat, prev.Iat)
	case o.Iat > prev.Exp+skew:
		e.warnf(cmd, "iat %d is after the --from offer's exp %d plus the skew: receivers will find the chain broken", o.Iat, prev.Exp)
	}
	return exitOK
}

// buildRefs makes a reference for each FILE[=LOC]: "digest" over the
// file's octets, or "salted-digest" with a fresh salt, which goes to
// stderr and never into the element (HC-09).
func (e *env) buildRefs(cmd string, specs []string, salted bool) ([]ref.Ref, error) {
	var refs []ref.Ref
	for i, spec := range specs {
		file, loc, _ := cutSpec(spec)
		if file == "" {
			return nil, fmt.Errorf("--ref %q: want FILE[=LOC]", spec)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--ref: %v", err)
		}
		r := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(b), Loc: loc}
		if salted {
			salt, d, err := digest.Salted(nil, b)
			if err != nil {
				return nil, fmt.Errorf("--ref %s: salt: %v", file, err)
			}
			r.Kind, r.Dig = ref.KindSaltedDigest, d
			fmt.Fprintf(e.stderr, "handoff %s: refs[%d] %s salt %s\n", cmd, i, file, b64(salt))
		}
		refs = append(refs, r)
	}
	return refs, nil
}
