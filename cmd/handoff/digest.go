package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentproto/handoff/digest"
)

func runDigest(e *env, args []string) int {
	fset := newFlagSet("digest")
	raw := fset.Bool("raw", false, "print the SHA-256 digest of the file's octets as they are: the dig of a \"digest\" reference, or a grant")
	usage := func() string {
		return usageText(fset, `Usage: handoff digest [--raw] FILE|-

Prints the handoff digest (SHA-256 over the signed octets exactly as sent,
HC-20; base64url without padding) of a signed element, or of each element
of a Handoff object, labelled: chain[0], chain[1]... oldest first, then
offer. A status's "offer" and an offer's "prev" name these values.

Exit status: 0 printed, 1 the input is neither a Handoff object nor a
signed element, 2 usage or I/O error.`, `  handoff digest handoff.json
  handoff digest accepted.jws
  handoff digest --raw credential.txt`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "digest"
	if len(pos) != 1 {
		return e.usagef(cmd, "one FILE (or - for stdin) expected")
	}
	data, err := e.readInput(pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	if *raw {
		fmt.Fprintln(e.stdout, digest.SHA256(data).B64())
		return exitOK
	}
	in, err := parseInput(data)
	if err != nil {
		fmt.Fprintf(e.stderr, "handoff %s: %s: %v\n", cmd, displayName(pos[0]), err)
		return exitNo
	}
	if in.handoff == nil {
		fmt.Fprintln(e.stdout, in.single.Digest().B64())
		return exitOK
	}
	var b strings.Builder
	for i, s := range in.handoff.Chain {
		fmt.Fprintf(&b, "%-10s %s\n", "chain["+strconv.Itoa(i)+"]", s.Digest().B64())
	}
	fmt.Fprintf(&b, "%-10s %s\n", "offer", in.handoff.Offer.Digest().B64())
	fmt.Fprint(e.stdout, b.String())
	return exitOK
}
