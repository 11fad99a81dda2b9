package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

// input is a file read as a Handoff object or as one signed element.
type input struct {
	handoff *handoff.Handoff // nil for a single element
	enc     handoff.Encoding // of the Handoff object
	single  handoff.Signed   // the element, when handoff is nil
}

// parseSigned reads data as one signed element. A COSE_Sign1, binary,
// is taken exactly as it is, whatever the length of its tag's head: its
// digest is over its octets. A JWS compact serialization, text, is taken
// without the white space around it (written with a trailing newline,
// say); trimming never makes a COSE element out of other octets.
func parseSigned(data []byte) (handoff.Signed, error) {
	s, err := handoff.ParseSigned(data, handoff.Limits{})
	if err == nil {
		return s, nil
	}
	if t, terr := handoff.ParseSigned(bytes.TrimSpace(data), handoff.Limits{}); terr == nil && t.Format == handoff.JWS {
		return t, nil
	}
	return handoff.Signed{}, err
}

// parseInput reads data as a single signed element (JWS compact or tagged
// COSE_Sign1) or else as a Handoff object (JSON or CBOR).
func parseInput(data []byte) (*input, error) {
	if s, err := parseSigned(data); err == nil {
		return &input{single: s}, nil
	}
	h, enc, err := handoff.ParseHandoff(data, handoff.Limits{})
	if err != nil {
		return nil, fmt.Errorf("neither a Handoff object nor a signed element: %w", err)
	}
	return &input{handoff: h, enc: enc}, nil
}

// offerElement returns the offer an input names: the Handoff's offer, or
// the single element.
func (in *input) offerElement() handoff.Signed {
	if in.handoff != nil {
		return in.handoff.Offer
	}
	return in.single
}

// b64 is base64url without padding, the wire form of digests.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// digestOut is a Digest value in output: its val in base64url, or "" for
// none.
func digestOut(d digest.Digest) string {
	if d.IsZero() {
		return ""
	}
	return d.B64()
}

// refOut is one reference in JSON output.
type refOut struct {
	Kind    string `json:"kind"`
	Alg     string `json:"alg"`
	Dig     string `json:"dig"`
	Loc     string `json:"loc"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

func refsOut(rs []ref.Result) []refOut {
	out := make([]refOut, 0, len(rs))
	for _, r := range rs {
		out = append(out, refOut{Kind: r.Ref.Kind, Alg: r.Ref.Dig.Alg, Dig: r.Ref.Dig.B64(), Loc: r.Ref.Loc,
			Outcome: string(r.Outcome), Detail: r.Detail})
	}
	return out
}

func notChecked(refs []ref.Ref) []ref.Result {
	out := make([]ref.Result, len(refs))
	for i, r := range refs {
		out[i] = ref.Result{Ref: r, Outcome: ref.NotChecked}
	}
	return out
}

// cutSpec splits "A=B" at the first "=".
func cutSpec(s string) (a, b string, hasB bool) {
	a, b, hasB = strings.Cut(s, "=")
	return a, b, hasB
}
