package main

import (
	"fmt"
	"os"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

// statusOutput is the one JSON object verify-status prints. "reason" and
// "detail" say why the status is not valid; the status's own reason and
// detail members are "status_reason" and "status_detail".
type statusOutput struct {
	Valid         bool     `json:"valid"`
	Verified      bool     `json:"status_verified"`
	Reason        string   `json:"reason"`
	Detail        string   `json:"detail"`
	State         string   `json:"state"`
	StatusReason  string   `json:"status_reason"`
	StatusDetail  string   `json:"status_detail"`
	Terminal      bool     `json:"terminal"`
	Iss           string   `json:"iss"`
	Aud           string   `json:"aud"`
	Hop           string   `json:"hop"`
	Iat           *uint64  `json:"iat"`
	Offer         string   `json:"offer"`
	OfferDigest   string   `json:"offer_digest"`
	OfferVerified bool     `json:"offer_verified"`
	StatusDigest  string   `json:"status_digest"`
	Refs          []refOut `json:"refs"`
}

func runVerifyStatus(e *env, args []string) int {
	fset := newFlagSet("verify-status")
	trustPath := fset.String("trust", "", "trust file binding the status signer's AgentId to its keys (`TRUST.json`, required)")
	offerPath := fset.String("offer", "", "the Handoff (`HANDOFF_FILE`) or single signed offer the status should answer (required)")
	usage := func() string {
		return usageText(fset, `Usage: handoff verify-status --trust TRUST.json --offer HANDOFF_FILE STATUS_FILE|-

Checks a signed status against the offer it answers (HC-55): signed by a
key TRUST.json binds to status.iss, type "status", status.iss is the
offer's aud (the offer's iss for "canceled"), status.aud the other party,
status.offer the handoff digest of the offer, status.hop its hop.

The offer is the caller's own (typically the delegator's) and is matched by
its digest; its signature is checked only when TRUST.json holds its
iss ("offer_verified" reports it; it does not decide validity).

Prints exactly one JSON object: "valid", "reason" and "detail" (why it is
not valid, the draft's reason code; "" when valid), "state",
"status_reason", "status_detail", "iss", "aud", "hop" and more (see
docs/cli.md). Exit status: 0 valid, 1 not valid, 2 usage or I/O error.`, `  handoff verify-status --trust trust.json --offer h.json accepted.jws
  handoff status --key coder.jwk --offer h.json --state completed | \
      handoff verify-status --trust trust.json --offer h.json -`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "verify-status"
	switch {
	case len(pos) == 0:
		return e.usagef(cmd, "STATUS_FILE (or - for stdin) is required")
	case len(pos) > 1:
		return e.usagef(cmd, "one STATUS_FILE expected, got %d arguments", len(pos))
	case *trustPath == "":
		return e.usagef(cmd, "--trust is required")
	case *offerPath == "":
		return e.usagef(cmd, "--offer is required")
	}
	trustDoc, err := os.ReadFile(*trustPath)
	if err != nil {
		return e.failf(cmd, "--trust: %v", err)
	}
	trust, err := keyset.ParseTrust(trustDoc)
	if err != nil {
		return e.failf(cmd, "--trust %s: %v", *trustPath, err)
	}
	offerData, err := e.readInput(*offerPath)
	if err != nil {
		return e.failf(cmd, "--offer: %v", err)
	}
	in, err := parseInput(offerData)
	if err != nil {
		return e.failf(cmd, "--offer %s: %v", *offerPath, err)
	}
	elem := in.offerElement()
	offer, _, err := handoff.InspectUnverified(elem, handoff.Limits{})
	if err != nil {
		return e.failf(cmd, "--offer %s: %v", *offerPath, err)
	}
	if offer == nil {
		return e.failf(cmd, "--offer %s: holds a status, not an offer", *offerPath)
	}
	statusData, err := e.readInput(pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	res := checkStatus(statusData, elem, offer, trust)
	if err := e.printJSON(res); err != nil {
		return e.failf(cmd, "%v", err)
	}
	if res.Valid {
		return exitOK
	}
	return exitNo
}

// checkStatus is HC-55 for one status and the offer it should answer.
func checkStatus(data []byte, elem handoff.Signed, offer *handoff.Offer, trust *handoff.Trust) *statusOutput {
	out := &statusOutput{OfferDigest: elem.Digest().B64(), Refs: []refOut{}}
	_, err := handoff.OpenOffer(elem, trust, handoff.Limits{})
	out.OfferVerified = err == nil
	fail := func(r reason.Code, format string, args ...any) *statusOutput {
		out.Valid, out.Reason, out.Detail = false, string(r), fmt.Sprintf(format, args...)
		return out
	}
	signed, err := parseSigned(data)
	if err != nil {
		return fail(reason.BadSignature, "%v", err)
	}
	out.StatusDigest = signed.Digest().B64()
	st, err := handoff.OpenStatus(signed, trust, handoff.Limits{})
	if err != nil {
		why := handoff.ReasonOf(err)
		if why == "" {
			why = reason.BadSignature
		}
		// Show what the status claims, for diagnosis only.
		if _, u, _ := handoff.InspectUnverified(signed, handoff.Limits{}); u != nil {
			fillStatus(out, u)
		}
		return fail(why, "%v", err)
	}
	fillStatus(out, st)
	out.Verified = true
	wantIss, wantAud := offer.Aud, offer.Iss
	if st.State == state.Canceled {
		wantIss, wantAud = offer.Iss, offer.Aud
	}
	switch {
	case !st.Offer.Equal(elem.Digest()):
		return fail(reason.Policy, "status.offer %s is not the digest %s of the offer", digestOut(st.Offer), elem.Digest().B64())
	case st.Hop != offer.Hop:
		return fail(reason.Policy, "status.hop %q is not the offer's hop %q", st.Hop, offer.Hop)
	case st.Iss != wantIss:
		return fail(reason.Policy, "a %q status must come from %q, not %q (HC-55)", st.State, wantIss, st.Iss)
	case st.Aud != wantAud:
		return fail(reason.WrongAudience, "a %q status must be addressed to %q, not %q (HC-55)", st.State, wantAud, st.Aud)
	}
	out.Valid = true
	return out
}

func fillStatus(out *statusOutput, st *handoff.Status) {
	out.State, out.StatusReason, out.StatusDetail = string(st.State), string(st.Reason), st.Detail
	out.Terminal = st.Terminal()
	out.Iss, out.Aud, out.Hop = string(st.Iss), string(st.Aud), string(st.Hop)
	iat := uint64(st.Iat)
	out.Iat = &iat
	out.Offer = digestOut(st.Offer)
	out.Refs = refsOut(notChecked(st.Refs))
}
