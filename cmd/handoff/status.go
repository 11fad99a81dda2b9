package main

import (
	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

func runStatus(e *env, args []string) int {
	fset := newFlagSet("status")
	keyPath := fset.String("key", "", "private JWK of the signer (`KEY.jwk`; required)")
	iss := fset.String("iss", "", "AgentId of the signer (default: the offer's aud; the offer's iss for \"canceled\")")
	aud := fset.String("aud", "", "AgentId of the other party (default: the offer's iss; the offer's aud for \"canceled\")")
	offerPath := fset.String("offer", "", "the Handoff (`HANDOFF_FILE`) or single signed offer the status answers (required)")
	st2 := fset.String("state", "", "accepted, rejected, completed, failed or canceled (required)")
	why := fset.String("reason", "", "reason code (required with \"rejected\"), e.g. stale, policy, equivocation")
	detail := fset.String("detail", "", "text for people (HC-05); leave it out across trust boundaries")
	var refs listFlag
	fset.Var(&refs, "ref", "a \"digest\" reference over FILE's octets, e.g. a result, with loc LOC if given (`FILE[=LOC]`, repeatable)")
	format := fset.String("format", "", "signed form: jws or cose (default: the offer's)")
	now := &unixFlag{}
	fset.Var(now, "now", "iat in `UNIX` seconds (default: the clock)")
	out := fset.String("out", "", "write the signed status to `FILE` (default stdout)")
	usage := func() string {
		return usageText(fset, `Usage: handoff status --key KEY.jwk --offer HANDOFF_FILE --state STATE [--iss ID] [--aud ID]
                      [--reason R] [--detail TEXT] [--ref FILE[=LOC]]...
                      [--format jws|cose] [--now UNIX] [--out FILE]

Signs a status for the offer in HANDOFF_FILE: its offer member is the
handoff digest of that offer and its hop the offer's hop. The status is in
the offer's signed form unless --format says otherwise. The output is the
signed octets exactly (JWS compact text, no newline, or COSE_Sign1 bytes).

A delegate answers with accepted, rejected, completed or failed; the
delegator sends canceled. This command does not track the hop's state: the
lifecycle rules (one of accepted/rejected, one of completed/failed, HC-23)
are the signer's to keep.`, `  handoff status --key coder.jwk --iss spiffe://b.example/agent/coder \
      --aud spiffe://a.example/agent/planner --offer h.json --state accepted > accepted.jws
  handoff status --key coder.jwk --offer h.json --state completed --ref result.txt --out done.jws
  handoff status --key coder.jwk --offer h.json --state rejected --reason policy --out no.jws
  handoff status --key planner.jwk --offer h.json --state canceled --out cancel.jws`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "status"
	st := state.State(*st2)
	switch {
	case len(pos) > 0:
		return e.usagef(cmd, "unexpected argument %q", pos[0])
	case *keyPath == "":
		return e.usagef(cmd, "--key KEY.jwk is required")
	case *offerPath == "":
		return e.usagef(cmd, "--offer HANDOFF_FILE is required")
	case *st2 == "":
		return e.usagef(cmd, "--state is required")
	case !st.Wire():
		return e.usagef(cmd, "--state %q: want accepted, rejected, completed, failed or canceled", *st2)
	case st == state.Rejected && *why == "":
		return e.usagef(cmd, "--state rejected needs --reason")
	}
	if *why != "" && !reason.Code(*why).Defined() {
		e.warnf(cmd, "--reason %q is not one of the draft's reason codes (HC-04)", *why)
	}
	var f handoff.Format
	if *format != "" {
		var err error
		if f, err = parseFormat(*format); err != nil {
			return e.usagef(cmd, "%v", err)
		}
	}
	data, err := e.readInput(*offerPath)
	if err != nil {
		return e.failf(cmd, "--offer: %v", err)
	}
	in, err := parseInput(data)
	if err != nil {
		return e.failf(cmd, "--offer %s: %v", *offerPath, err)
	}
	elem := in.offerElement()
	o, _, err := handoff.InspectUnverified(elem, handoff.Limits{})
	if err != nil {
		return e.failf(cmd, "--offer %s: %v", *offerPath, err)
	}
	if o == nil {
		return e.failf(cmd, "--offer %s: holds a status, not an offer", *offerPath)
	}
	if f == 0 {
		f = elem.Format // a status in the offer's own form
	}
	signer, warn, err := loadSigner(*keyPath, f)
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	if warn != "" {
		e.warnf(cmd, "%s", warn)
	}
	// The parties follow from the offer: the delegate answers the
	// delegator; "canceled" goes the other way (HC-55).
	defIss, defAud := o.Aud, o.Iss
	if st == state.Canceled {
		defIss, defAud = o.Iss, o.Aud
	}
	s := &handoff.Status{
		Hop: o.Hop, Offer: elem.Digest(), Iss: handoff.AgentID(*iss), Aud: handoff.AgentID(*aud),
		Iat: handoff.TimeOf(now.clock()()), State: st, Reason: reason.Code(*why), Detail: *detail,
	}
	if s.Iss == "" {
		s.Iss = defIss
	}
	if s.Aud == "" {
		s.Aud = defAud
	}
	if s.Iss != defIss || s.Aud != defAud {
		e.warnf(cmd, "a %q status for this offer goes from %q to %q; verify-status will find it invalid (HC-55)", st, defIss, defAud)
	}
	if s.Refs, err = e.buildRefs(cmd, refs, false); err != nil {
		return e.failf(cmd, "%v", err)
	}
	signed, err := signer.SignStatus(s)
	if err != nil {
		return e.failf(cmd, "sign: %v", err)
	}
	if err := e.writeOutput(*out, signed.Octets); err != nil {
		return e.failf(cmd, "%v", err)
	}
	return exitOK
}
