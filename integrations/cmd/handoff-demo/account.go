package main

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
)

// logger writes whole lines, one writer shared by goroutines.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logger) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// describeReceived is one line on an offer received: decision and chain.
func describeReceived(in *handoff.Received) string {
	o := hopwork.Verified(in)
	if o == nil {
		u := in.Unverified()
		who := "?"
		if u != nil {
			who = shortName(u.Iss) + " (unverified)"
		}
		return fmt.Sprintf("offer from %s REFUSED: %s at the %s check", who, in.Reason(), in.Check())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "hop %s from %s (%s): ", short(string(o.Hop)), shortName(o.Iss), in.Handoff().Offer.Format)
	switch {
	case in.Retransmission():
		b.WriteString("RETRANSMISSION, not processed again")
	case in.Equivocation() != "":
		b.WriteString("EQUIVOCATION, refused")
	case in.Accepted():
		b.WriteString("ACCEPTED")
	default:
		fmt.Fprintf(&b, "REJECTED: %s at the %s check", in.Reason(), in.Check())
	}
	if in.Accepted() {
		fmt.Fprintf(&b, "; chain %s: %s", in.Chain(), chainPath(in))
	}
	return b.String()
}

// chainPath is the path of the work through the chain and the offer, each
// hop with its signed form.
func chainPath(in *handoff.Received) string {
	var parts []string
	for _, l := range in.Links() {
		if o := l.Offer(); o != nil {
			parts = append(parts, fmt.Sprintf("%s -%s->", shortName(o.Iss), l.Signed.Format))
		}
	}
	o := hopwork.Verified(in)
	parts = append(parts, fmt.Sprintf("%s -%s-> %s", shortName(o.Iss), in.Handoff().Offer.Format, shortName(o.Aud)))
	return strings.Join(parts, " ")
}

// describeStatus is one line on a status handled by a delegator.
func describeStatus(sr *handoff.StatusResult) string {
	if sr.Err() != nil {
		return fmt.Sprintf("status REFUSED: %s", sr.Reason())
	}
	st := sr.Status
	s := fmt.Sprintf("status %q for hop %s signed by %s, verified; hop is now %s", st.State, short(string(st.Hop)), shortName(st.Iss), sr.State)
	if st.Reason != "" {
		s += " (reason " + string(st.Reason) + ")"
	}
	return s
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8] + "…"
	}
	return s
}
