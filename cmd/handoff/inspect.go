package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/ref"
)

func runInspect(e *env, args []string) int {
	fset := newFlagSet("inspect")
	now := &unixFlag{}
	fset.Var(now, "now", "show times relative to this `UNIX` time (default: the clock)")
	usage := func() string {
		return usageText(fset, `Usage: handoff inspect [--now UNIX] FILE|-

Shows a Handoff object (JSON or CBOR) or a single signed element (JWS
compact or COSE_Sign1, offer or status) WITHOUT verifying anything: no
signature is checked and no key is trusted. The output starts with
UNVERIFIED and is for reading and diagnosis only; "handoff verify" decides.

The chain is drawn as a tree, oldest offer first, each passed on to the
next: hop, iss -> aud, iat and exp in UTC and relative to now, signed form,
handoff digest, and whether each link holds: prev names the digest of the
element before ("intact" or "BROKEN"), iss is the aud of the element before,
and iat falls within its lifetime. A chain of more than 16 elements is
drawn in part: its first 8 and last 8 elements, and one line that counts
the elements between and what their checks found.

Exit status: 0 decoded, 1 the input or one of its elements does not decode,
2 usage or I/O error.`, `  handoff inspect handoff.json
  handoff inspect --now 1793000003 handoff.json
  handoff inspect accepted.jws`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "inspect"
	if len(pos) != 1 {
		return e.usagef(cmd, "one FILE (or - for stdin) expected")
	}
	data, err := e.readInput(pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	// The output is written as it is made, never held whole: its size is
	// linear in the input's, whatever the chain (see inspectChain).
	b := bufio.NewWriter(e.stdout)
	defer b.Flush()
	b.WriteString("UNVERIFIED: decoded without checking any signature or trusting any key.\n")
	b.WriteString("Nothing below shows who signed it; run \"handoff verify\" to decide.\n\n")
	in, err := parseInput(data)
	if err != nil {
		fmt.Fprintf(b, "%s: %v\n", displayName(pos[0]), err)
		return exitNo
	}
	t := now.clock()()
	nowNote := "the clock"
	if now.set {
		nowNote = "--now"
	}
	var clean bool
	if in.handoff == nil {
		fmt.Fprintf(b, "Signed element; times relative to %s (%s)\n\n", utc(t), nowNote)
		clean = inspectSingle(b, in.single, t)
	} else {
		n := len(in.handoff.Chain)
		switch n {
		case 0:
			fmt.Fprintf(b, "Handoff object (%s): an offer, no chain\n", in.enc)
		case 1:
			fmt.Fprintf(b, "Handoff object (%s): an offer and a chain of 1 element\n", in.enc)
		default:
			fmt.Fprintf(b, "Handoff object (%s): an offer and a chain of %d elements, oldest first\n", in.enc, n)
		}
		if len(in.handoff.Extra) > 0 {
			fmt.Fprintf(b, "Unsigned extra members: %s\n", safe(strings.Join(sortedKeys(in.handoff.Extra), ", ")))
		}
		fmt.Fprintf(b, "Times relative to %s (%s)\n\n", utc(t), nowNote)
		clean = inspectChain(b, in.handoff, t)
	}
	if !clean {
		return exitNo
	}
	return exitOK
}

// inspectSingle writes one element; it reports whether it decoded.
func inspectSingle(b io.Writer, s handoff.Signed, now time.Time) bool {
	o, st, err := handoff.InspectUnverified(s, handoff.Limits{})
	switch {
	case err != nil:
		fmt.Fprintf(b, "UNDECODABLE %s element: %v\n", s.Format, err)
		fmt.Fprintf(b, "    digest  %s\n", s.Digest().B64())
		return false
	case st != nil:
		fmt.Fprintf(b, "status %s  %s -> %s\n", safe(string(st.State)), safe(string(st.Iss)), safe(string(st.Aud)))
		w := func(k, format string, args ...any) { fmt.Fprintf(b, "    %-7s %s\n", k, fmt.Sprintf(format, args...)) }
		w("hop", "%s", st.Hop)
		w("offer", "%s (the digest of the offer it answers)", digestOut(st.Offer))
		if st.Reason != "" {
			w("reason", "%s", safe(string(st.Reason)))
		}
		if st.Detail != "" {
			w("detail", "%q", st.Detail)
		}
		w("iat", "%s (%s)", utc(st.Iat.Std()), rel(st.Iat.Std(), now))
		w("format", "%s", formatLine(s))
		w("digest", "%s", s.Digest().B64())
		for i, r := range st.Refs {
			w("ref", "[%d] %s", i, refLine(r))
		}
		if len(st.Extra) > 0 {
			w("extra", "%s", safe(strings.Join(sortedKeys(st.Extra), ", ")))
		}
		return true
	default:
		writeOffer(b, o, s, "offer", "", "    ", now)
		if o.Prev != nil {
			fmt.Fprintf(b, "    %-7s %s: names an offer not given here\n", "prev", digestOut(*o.Prev))
		} else {
			fmt.Fprintf(b, "    %-7s none: the start of a chain\n", "prev")
		}
		return true
	}
}

// What inspect draws of a long chain. A chain of at most inspectHead +
// inspectTail elements (16, the draft's recommended bound) is drawn whole;
// of a longer one, the first inspectHead and the last inspectTail, and one
// line for the elements between, whose links are still checked and
// counted. The tree is indented at most inspectIndent levels: deeper
// elements are drawn at that level. So the output stays a bounded size per
// element drawn, and the time and memory of inspect are linear in the
// input, whatever the chain.
const (
	inspectHead   = 8
	inspectTail   = 8
	inspectIndent = 8
)

// inspectChain writes the chain and the offer as a tree, each element
// under the one it passes on. It reports whether every element decoded.
func inspectChain(b io.Writer, h *handoff.Handoff, now time.Time) bool {
	n := len(h.Chain)
	elem := func(i int) handoff.Signed {
		if i == n {
			return h.Offer
		}
		return h.Chain[i]
	}
	drawn := func(i int) bool { return n <= inspectHead+inspectTail || i < inspectHead || i >= n-inspectTail }
	var (
		prev        *handoff.Offer // the element before, when it decoded
		clean       = true
		broken      = 0
		hidden      = 0 // elements not drawn
		hiddenBad   = 0 // of which undecodable
		hiddenLinks = 0 // BROKEN link checks among them
	)
	skew := handoff.Time(defaultSkew / time.Second)
	for i := 0; i <= n; i++ {
		s := elem(i)
		label := "chain[" + strconv.Itoa(i) + "]"
		if i == n {
			label = "offer"
		}
		depth := min(i, inspectIndent)
		head, body := "", strings.Repeat("    ", depth)
		if depth > 0 {
			head = strings.Repeat("    ", depth-1) + "└── "
		}
		if i < n {
			body += "│   "
		} else {
			body += "    "
		}
		if drawn(i) && hidden > 0 {
			gap := strings.Repeat("    ", min(inspectHead-1, inspectIndent))
			fmt.Fprintf(b, "%s┆   chain[%d] to chain[%d]: %d elements not drawn (inspect draws %d of a chain); %d do not decode, %d BROKEN link check(s) among them\n",
				gap, inspectHead, i-1, hidden, inspectHead+inspectTail, hiddenBad, hiddenLinks)
			fmt.Fprintf(b, "%s┆\n", gap)
			hidden = 0
		}
		o, st, err := handoff.InspectUnverified(s, handoff.Limits{})
		if err == nil && o == nil {
			err = fmt.Errorf("a %q status, not an offer", st.State)
		}
		if err != nil {
			clean = false
			if drawn(i) {
				fmt.Fprintf(b, "%s%s  UNDECODABLE: %v\n", head, label, err)
				fmt.Fprintf(b, "%s%-7s %s\n", body, "digest", s.Digest().B64())
				if i < n {
					fmt.Fprintf(b, "%s\n", strings.TrimRight(body, " "))
				}
			} else {
				hidden++
				hiddenBad++
			}
			prev = nil
			continue
		}
		var lines []linkLine
		prevLabel := "chain[" + strconv.Itoa(i-1) + "]"
		switch {
		case i == 0 && o.Prev == nil:
			lines = append(lines, linkLine{"prev", "none: the start of the chain", false})
		case i == 0 && n == 0:
			lines = append(lines, linkLine{"prev", digestOut(*o.Prev) + ": no chain carried (absent)", false})
		case i == 0:
			lines = append(lines, linkLine{"prev", digestOut(*o.Prev) + ": names an offer not carried (the chain is partial)", false})
		case prev == nil:
			lines = append(lines, linkLine{"prev", "unknown: " + prevLabel + " does not decode", false})
		default:
			p := prev
			want := elem(i - 1).Digest()
			switch {
			case o.Prev == nil:
				lines = append(lines, linkLine{"prev", "BROKEN: missing, but " + prevLabel + " comes before", true})
			case o.Prev.Equal(want):
				lines = append(lines, linkLine{"prev", digestOut(*o.Prev) + " = digest of " + prevLabel + ": intact", false})
			default:
				lines = append(lines, linkLine{"prev", fmt.Sprintf("BROKEN: %s is not the digest of %s (%s)", digestOut(*o.Prev), prevLabel, want.B64()), true})
			}
			if o.Iss == p.Aud {
				lines = append(lines, linkLine{"link", "iss is the aud of " + prevLabel + ": intact", false})
			} else {
				lines = append(lines, linkLine{"link", fmt.Sprintf("BROKEN: iss %s is not the aud %s of %s", safe(string(o.Iss)), safe(string(p.Aud)), prevLabel), true})
			}
			if p.Iat <= o.Iat && o.Iat <= p.Exp+skew {
				lines = append(lines, linkLine{"timing", "issued within the lifetime of " + prevLabel + ": intact", false})
			} else {
				lines = append(lines, linkLine{"timing", fmt.Sprintf("BROKEN: iat %d outside [%d, %d + %ds skew] of %s", o.Iat, p.Iat, p.Exp, skew, prevLabel), true})
			}
		}
		prev = o
		for _, l := range lines {
			if l.broken {
				broken++
				if !drawn(i) {
					hiddenLinks++
				}
			}
		}
		if !drawn(i) {
			hidden++
			continue
		}
		writeOffer(b, o, s, label, head, body, now)
		for _, l := range lines {
			fmt.Fprintf(b, "%s%-7s %s\n", body, l.key, l.text)
		}
		if i < n {
			fmt.Fprintf(b, "%s\n", strings.TrimRight(body, " "))
		}
	}
	fmt.Fprintln(b)
	switch {
	case !clean:
		fmt.Fprintln(b, "Summary: some elements do not decode.")
	case broken > 0:
		fmt.Fprintf(b, "Summary: %d BROKEN link check(s); a receiver rejects this chain (broken-chain).\n", broken)
	case n == 0:
		fmt.Fprintln(b, "Summary: no chain carried.")
	default:
		fmt.Fprintf(b, "Summary: every link intact (%d). Signatures NOT checked.\n", n)
	}
	if n > defaultMaxChain {
		fmt.Fprintf(b, "The chain has %d elements: a receiver with the draft's recommended bound (%d) refuses it (too-deep).\n", n, defaultMaxChain)
	}
	return clean
}

// linkLine is one link check of an element against the one before it.
type linkLine struct {
	key, text string
	broken    bool
}

// writeOffer writes the title line and the fields of one offer.
func writeOffer(b io.Writer, o *handoff.Offer, s handoff.Signed, label, head, body string, now time.Time) {
	fmt.Fprintf(b, "%s%s  %s -> %s\n", head, label, safe(string(o.Iss)), safe(string(o.Aud)))
	w := func(k, format string, args ...any) {
		fmt.Fprintf(b, "%s%-7s %s\n", body, k, fmt.Sprintf(format, args...))
	}
	w("hop", "%s", o.Hop)
	w("dialog", "%s", safe(o.Dialog))
	if o.Task != "" {
		w("task", "%s", safe(o.Task))
	}
	w("iat", "%s (%s)", utc(o.Iat.Std()), rel(o.Iat.Std(), now))
	exp := rel(o.Exp.Std(), now)
	if !o.Exp.Std().After(now) {
		exp += ", expired"
	}
	w("exp", "%s (%s; lifetime %ds)", utc(o.Exp.Std()), exp, int64(o.Exp)-int64(o.Iat))
	if o.Obo != nil {
		if o.Obo.Iss != "" {
			w("obo", "%s (iss %s)", safe(o.Obo.Sub), safe(o.Obo.Iss))
		} else {
			w("obo", "%s", safe(o.Obo.Sub))
		}
	}
	if o.Grant != nil {
		w("grant", "%s:%s", o.Grant.Alg, o.Grant.B64())
	}
	for i, r := range o.Refs {
		w("ref", "[%d] %s", i, refLine(r))
	}
	if len(o.Extra) > 0 {
		w("extra", "%s", safe(strings.Join(sortedKeys(o.Extra), ", ")))
	}
	w("format", "%s", formatLine(s))
	w("digest", "%s", s.Digest().B64())
}

func refLine(r ref.Ref) string {
	s := safe(r.Kind) + " " + r.Dig.Alg + ":" + r.Dig.B64()
	if r.Loc != "" {
		s += " loc " + safe(r.Loc)
	}
	return s
}

// formatLine names the signed form and what its protected header claims.
func formatLine(s handoff.Signed) string {
	alg, kid := peekHeader(s)
	line := s.Format.String() + ", " + strconv.Itoa(len(s.Octets)) + " octets"
	if alg != "" {
		line += ", alg " + alg
	}
	if kid != "" {
		line += ", kid " + kid
	}
	return line
}

// peekHeader reads alg and kid from the protected header, unverified, for
// display; it returns empty strings for what it cannot read.
func peekHeader(s handoff.Signed) (alg, kid string) {
	switch s.Format {
	case handoff.JWS:
		seg, _, _ := bytes.Cut(s.Octets, []byte{'.'})
		raw, err := base64.RawURLEncoding.DecodeString(string(seg))
		if err != nil {
			return "", ""
		}
		var h map[string]any
		if json.Unmarshal(raw, &h) != nil {
			return "", ""
		}
		alg, _ = h["alg"].(string)
		kid, _ = h["kid"].(string)
		return printable(alg), printable(kid)
	case handoff.COSE:
		var tag cbor.Tag
		if cbor.Unmarshal(s.Octets, &tag) != nil {
			return "", ""
		}
		arr, ok := tag.Content.([]any)
		if !ok || len(arr) != 4 {
			return "", ""
		}
		prot, ok := arr[0].([]byte)
		if !ok {
			return "", ""
		}
		var h map[int64]any
		if cbor.Unmarshal(prot, &h) != nil {
			return "", ""
		}
		switch v := h[1].(type) {
		case int64:
			alg = coseAlgName(v)
		case uint64:
			alg = strconv.FormatUint(v, 10)
		}
		if k, ok := h[4].([]byte); ok {
			kid = printable(string(k))
			if kid == "" && len(k) > 0 {
				kid = base64.RawURLEncoding.EncodeToString(k)
			}
		}
	}
	return alg, kid
}

func coseAlgName(v int64) string {
	switch v {
	case -7:
		return "ES256"
	case -35:
		return "ES384"
	case -8:
		return "EdDSA"
	}
	return strconv.FormatInt(v, 10)
}

// printable returns s when it is short printable text, else "".
func printable(s string) string {
	if len(s) > 128 {
		return ""
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return ""
		}
	}
	return s
}

// safe returns text from an unverified element as it is when every rune
// is printable, else quoted, so that no control character reaches the
// terminal.
func safe(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

func utc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// rel says how far t is from now: "in 1m47s", "13s ago", "now".
func rel(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d == 0:
		return "now"
	case d > 0:
		return "in " + human(d)
	}
	return human(-d) + " ago"
}

func human(d time.Duration) string {
	if d >= 48*time.Hour {
		days := d / (24 * time.Hour)
		return fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour)/time.Hour)
	}
	return d.String()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
