package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/boltauthority"
)

// auditWait bounds the wait for a process that holds the ledger's file
// open for writing (bbolt's lock).
const auditWait = 5 * time.Second

func runEvidenceAudit(e *env, args []string) int {
	fset := newFlagSet("evidence audit")
	ledgerPath := fset.String("ledger", "", "the authority ledger: a bbolt `FILE` of evidence/authority/boltauthority (required)")
	jsonOut := fset.Bool("json", false, "print the records as one JSON array instead of the text")
	usage := func() string {
		return usageText(fset, `Usage: handoff evidence audit --ledger FILE [--json] OPERATION

Answers "which delegation authorized this effect, and who approved it"
from a receiving agent's authority ledger. For each effect recorded under
OPERATION (an operation id, an idempotency key, or the key of a call that
named neither), in the scope of every hop, it prints the hop that performed
it, the chain of delegations that hop came through (handoff digests,
outermost first, then the hop), the call (action, tool, key, arguments'
digest), when, how it ended (its outcome, "in flight" for a call claimed
whose outcome was never recorded), how many retries of the same call the
ledger refused, and the approval it consumed with who gave it.

The file is opened read-only. A process holding it open for writing makes
the command wait up to 5 seconds.

Exit status: 0 printed, 1 nothing recorded under OPERATION, 2 usage or
I/O error.`, `  handoff evidence audit --ledger authority.db refund-INV-1042
  handoff evidence audit --ledger authority.db --json refund-INV-1042`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "evidence audit"
	switch {
	case *ledgerPath == "":
		return e.usagef(cmd, "--ledger FILE is required")
	case len(pos) != 1 || pos[0] == "":
		return e.usagef(cmd, "one OPERATION expected")
	}
	l, err := boltauthority.Open(*ledgerPath, boltauthority.Options{ReadOnly: true, LockTimeout: auditWait})
	if err != nil {
		return e.failf(cmd, "--ledger: %v", err)
	}
	defer l.Close()
	trails, err := authority.Audit(context.Background(), l, pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	if *jsonOut {
		if trails == nil {
			trails = []authority.Trail{}
		}
		err = e.printJSON(trails)
	} else {
		err = writeTrails(e.stdout, pos[0], trails)
	}
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	if len(trails) == 0 {
		return exitNo
	}
	return exitOK
}

// writeTrails prints what the ledger holds of the effects named name.
func writeTrails(w io.Writer, name string, trails []authority.Trail) error {
	var b strings.Builder
	if len(trails) == 0 {
		fmt.Fprintf(&b, "no effect recorded under %q\n", name)
	}
	for i, t := range trails {
		r := t.Record
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "effect %q\n", r.Name)
		fmt.Fprintf(&b, "  hop       %s\n", r.Hop)
		fmt.Fprintf(&b, "  chain     %s\n", strings.Join(append(append([]string(nil), r.Chain...), r.Hop+" (this hop)"), " > "))
		action := r.Action
		if r.Tool != "" {
			action += " (tool " + r.Tool + ")"
		}
		fmt.Fprintf(&b, "  action    %s\n", action)
		if r.Key != "" {
			fmt.Fprintf(&b, "  key       %s\n", r.Key)
		}
		if r.Args != "" {
			fmt.Fprintf(&b, "  arguments %s\n", r.Args)
		}
		fmt.Fprintf(&b, "  at        %s\n", r.At.UTC().Format(time.RFC3339Nano))
		switch {
		case r.InFlight:
			b.WriteString("  state     in flight: claimed, outcome not recorded (running, or its process died)\n")
		case r.Outcome != nil:
			fmt.Fprintf(&b, "  state     done, outcome recorded %s\n", r.Outcome.At.UTC().Format(time.RFC3339Nano))
			if r.Outcome.Error != "" {
				fmt.Fprintf(&b, "  error     %q\n", r.Outcome.Error)
			}
			if r.Outcome.Result != nil {
				fmt.Fprintf(&b, "  result    %d octets: %q\n", len(r.Outcome.Result), truncate(r.Outcome.Result, 200))
			}
		default:
			b.WriteString("  state     performed, outcome not kept by the ledger\n")
		}
		fmt.Fprintf(&b, "  retries   %d refused as the same call (suppressed, not performed)\n", r.Replays)
		switch a := t.Approval; {
		case r.Approval == "":
			b.WriteString("  approval  none needed\n")
		case a == nil:
			fmt.Fprintf(&b, "  approval  %s (not found in the ledger)\n", r.Approval)
		default:
			fmt.Fprintf(&b, "  approval  %s by %s (%s), issued %s, expires %s, %d of %d uses left\n", a.ID, a.Approver, a.Source,
				a.Issued.UTC().Format(time.RFC3339), a.Expires.UTC().Format(time.RFC3339), a.Remaining, a.Uses)
			if a.Source == authority.SourceOperator {
				fmt.Fprintf(&b, "  operator  %q\n", truncate(a.Evidence, 200))
			} else {
				fmt.Fprintf(&b, "  statement %d octets (the signed approval)\n", len(a.Evidence))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// truncate returns at most n octets of b, marked when cut.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
