package handoff

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentproto/handoff/replay"
)

// Host is what the host protocol tells the receiver about the message that
// carried a Handoff.
type Host struct {
	// Dialog is the host protocol's dialog identifier (for example an A2A
	// contextId). Empty skips the dialog check (step 5 of section 5.1).
	Dialog string
	// Peer is the AgentID the host protocol authenticated the sender as, if
	// it did. A retransmission is answered with the last status only when
	// Peer equals the offer's iss (HC-39).
	Peer AgentID
	// RefSource, when set, provides referenced objects for this message,
	// in place of Config.RefSource.
	RefSource RefSource
}

// EquivocationAnswer says what status, if any, the rules let the receiver
// send for the FIRST of two offers with one (iss, hop) (HC-54). The second
// offer never gets a status (HC-53).
type EquivocationAnswer string

const (
	// AnswerRejectFirst: the first offer was neither taken nor answered:
	// send "rejected" with reason "equivocation" for it (Agent.Reply).
	AnswerRejectFirst EquivocationAnswer = "reject-first"
	// AnswerFinishFirst: the work of the first offer was taken (or the hop
	// canceled by its delegator) and this delegate sent no terminal status:
	// stop the work if possible, then, once the outcome is known, send
	// "completed" if it took full effect, else "failed" with reason
	// "equivocation" and refs of any effect.
	AnswerFinishFirst EquivocationAnswer = "finish-first"
	// AnswerNone: this delegate rejected the first offer or sent a terminal
	// status for it: no further status may be sent.
	AnswerNone EquivocationAnswer = "none"
)

// Received is the outcome of Receive: whether the offer may be taken, and
// if not, the check that failed with the draft's reason code.
type Received struct {
	// Handoff is the decoded Handoff object (nil when it did not parse).
	Handoff *Handoff
	// Offer is the decoded current offer. It is verified when the signature
	// check passed (Reason is not bad-signature or untrusted-key).
	Offer *Offer
	// Digest is the offer's handoff digest (HC-20).
	Digest Digest
	// Chain is the chain's state, and Links its elements oldest first,
	// when step 6 ran.
	Chain ChainState
	Links []Link
	// Refs is each reference's outcome, when step 7 ran; otherwise every
	// reference is "not checked" (HC-11).
	Refs []RefResult

	// Retransmission is true when the offer is the exact octets of one
	// already remembered (HC-35, HC-38). It is not processed again.
	Retransmission bool
	// Equivocation is set when the offer has the (iss, hop) of a different
	// remembered offer (HC-53): it says what to send for the first.
	Equivocation EquivocationAnswer
	// First is the digest of the first offer seen for the (iss, hop), for a
	// retransmission or equivocation.
	First Digest
	// Check is the number of the check of section 5.1 that decided the
	// outcome when the offer was not accepted: 1 signed form and signature
	// (of the offer itself; a chain element's failure is check 6), 2
	// audience, 3 freshness, 4 (iss, hop) memory (retransmission,
	// equivocation, and the HC-59 replay rule), 5 dialog, 6 chain, 7
	// references. It is 0 when the offer was accepted.
	Check int

	lastStatus []byte
	owesAccept bool
	rejection  *Rejection
	host       Host
}

// Accepted reports whether every check passed: the delegate may take the
// work and answer "accepted" (Agent.Reply).
func (r *Received) Accepted() bool {
	return r.rejection == nil && !r.Retransmission && r.Equivocation == ""
}

// Reason returns the draft's reason code of a rejection, "equivocation" for
// an equivocating offer, and "" when accepted or a retransmission.
func (r *Received) Reason() Reason {
	if r.rejection != nil {
		return r.rejection.Reason
	}
	if r.Equivocation != "" {
		return ReasonEquivocation
	}
	return ""
}

// Detail is a human explanation (HC-05: no program may depend on it).
func (r *Received) Detail() string {
	switch {
	case r.rejection != nil:
		return r.rejection.Detail
	case r.Equivocation != "":
		return "another offer with this (iss, hop) and different octets was seen first; " +
			"two offers that differ only in their signature are equivocation too (HC-53)"
	case r.Retransmission:
		return "exact copy of an offer already received; not processed again (HC-38)"
	}
	return ""
}

// Err returns the rejection as an error (a *Rejection), or nil.
func (r *Received) Err() error {
	if r.rejection == nil {
		if r.Equivocation != "" {
			return reject(ReasonEquivocation, ErrRejected, "%s", r.Detail())
		}
		return nil
	}
	return r.rejection
}

// LastStatus returns, for a retransmission, the last status this agent sent
// for the hop, as the identical octets to resend (HC-39). It is withheld
// (ok false) unless the host authenticated the sender as the offer's iss.
func (r *Received) LastStatus() (s Signed, ok bool) {
	if !r.Retransmission || len(r.lastStatus) == 0 || r.Offer == nil || r.host.Peer != r.Offer.Iss {
		return Signed{}, false
	}
	// The octets were signed and sent by this agent: resend them whatever
	// their size (HC-39), checking the form only.
	s, err := ParseSigned(r.lastStatus, Limits{MaxElementSize: len(r.lastStatus)})
	return s, err == nil
}

// OwesAccepted reports, for a retransmission, that this agent has taken the
// work but sent no status yet: it should send "accepted" (HC-39). Like
// LastStatus, it holds only when the host authenticated the sender as the
// offer's iss, since the answer reveals the hop's state.
func (r *Received) OwesAccepted() bool {
	return r.Retransmission && r.owesAccept && r.Offer != nil && r.host.Peer == r.Offer.Iss
}

// StatusDue reports whether the rules ask for a status in answer to this
// offer: "rejected" for a failed check (HC-30), nothing for an equivocating
// second offer (HC-53) or a retransmission (answered by LastStatus or
// OwesAccepted instead).
func (r *Received) StatusDue() bool {
	return r.rejection != nil && r.Offer != nil && r.Reason() != ReasonBadSignature &&
		r.Reason() != ReasonUntrustedKey
}

// Receive runs the checks of section 5.1 in order on a Handoff object (JSON
// or CBOR, detected), the first failure ending processing (HC-30):
//
//  1. signed form and signature with a key bound to iss
//  2. aud equals this agent's ID
//  3. freshness (HC-31, HC-32), skipped for a remembered (iss, hop)
//  4. (iss, hop) memory: retransmission or equivocation (HC-33, HC-35)
//  5. dialog equals the host's, when the host gives one
//  6. the chain (section 5.3, HC-46..HC-50, HC-58)
//  7. references the policy requires (HC-08, HC-11)
//
// Rejections are results, not errors: the returned error is non-nil only
// when the store could not answer (wrapping ErrStore) or ctx ended, and then
// the offer must be refused. An offer that passed checks 1-3 is remembered
// even when a later check rejects it.
func (a *Agent) Receive(ctx context.Context, data []byte, host Host) (*Received, error) {
	r := &Received{host: host}
	h, _, err := ParseHandoff(data, a.lim)
	if err != nil {
		r.Check, r.rejection = 1, &Rejection{Reason: ReasonBadSignature, Detail: err.Error(), Err: err}
		return r, nil
	}
	r.Handoff = h
	r.Digest = h.Offer.Digest()

	// 1. Signed form and signature.
	o, err := OpenOffer(h.Offer, a.cfg.Trust, a.lim)
	if err != nil {
		r.Check, r.rejection = 1, asRejection(err)
		r.Offer, _, _ = InspectUnverified(h.Offer, a.lim)
		return r, nil
	}
	r.Offer = o
	r.Refs = notChecked(o.Refs)

	// 2. Audience.
	if o.Aud != a.cfg.ID {
		r.Check, r.rejection = 2, reject(ReasonWrongAudience, ErrRejected, "aud %q is not this agent %q", o.Aud, a.cfg.ID)
		return r, nil
	}

	// 3. Freshness, unless (iss, hop) is remembered.
	key := replay.Key{Iss: string(o.Iss), Hop: string(o.Hop)}
	held, remembered, err := a.cfg.Store.Get(ctx, key)
	if err != nil {
		return nil, storeErr(err)
	}
	now := a.now()
	if !remembered {
		if rj := a.fresh(o, now); rj != nil {
			r.Check, r.rejection = 3, rj
			return r, nil
		}
		// HC-59: a receiver that lost its memory refuses offers issued
		// before the loss until they can no longer be fresh.
		if lost := a.cfg.MemoryLostAt; !lost.IsZero() && o.Iat.Std().Before(lost) &&
			now.Before(lost.Add(a.cfg.MaxLifetime+a.cfg.Skew)) {
			r.Check, r.rejection = 4, reject(ReasonReplay, ErrRejected, "issued before this receiver lost its memory at %s", lost.UTC().Format(time.RFC3339))
			return r, nil
		}
	}

	// 4. (iss, hop) memory: remember, or find what was remembered.
	if !remembered {
		rec := replay.Record{Digest: r.Digest.Val, Expires: o.Exp.Std().Add(a.cfg.Skew)}
		var inserted bool
		held, inserted, err = a.cfg.Store.Remember(ctx, key, rec)
		if err != nil {
			return nil, storeErr(err)
		}
		remembered = !inserted
	}
	if remembered {
		r.First = Digest{Alg: SHA256Alg, Val: held.Digest}
		if !r.First.Equal(r.Digest) {
			r.Check = 4
			r.Equivocation = equivocationAnswer(held)
			a.flag(Conflict{Kind: ConflictEquivocation, Iss: o.Iss, Hop: o.Hop, First: r.First, Second: r.Digest,
				Detail: "two offers with one (iss, hop) and different octets"})
			return r, nil
		}
		r.Check = 4
		r.Retransmission = true
		r.lastStatus = held.Status
		r.owesAccept = held.Status == nil && held.State == string(Accepted)
		return r, nil
	}

	// 5. Dialog.
	if host.Dialog != "" && o.Dialog != host.Dialog {
		r.Check, r.rejection = 5, reject(ReasonPolicy, ErrRejected, "dialog %q is not the host dialog %q", o.Dialog, host.Dialog)
		return r, nil
	}

	// 6. Chain.
	state, links, rj := checkChain(h, o, a.cfg.ID, a.cfg.Trust, a.verified, a.cfg.Chain, a.lim, a.cfg.Skew)
	if rj == nil {
		r.Chain, r.Links = state, links
		rj = applyChainPolicy(state, links, o, a.cfg.Chain)
	}
	if rj != nil {
		r.Check, r.rejection = 6, rj
		return r, nil
	}

	// 7. References.
	src := host.RefSource
	if src == nil {
		src = a.cfg.RefSource
	}
	r.Refs, rj = checkRefs(ctx, o.Refs, a.cfg.Refs, a.cfg.RefCheckers, src)
	if rj != nil {
		r.Check, r.rejection = 7, rj
	}
	return r, nil
}

// fresh is section 5.2 for an offer whose (iss, hop) is not remembered.
func (a *Agent) fresh(o *Offer, now time.Time) *Rejection {
	nowT := TimeOf(now)
	switch {
	case o.Exp <= o.Iat:
		return reject(ReasonStale, ErrRejected, "exp %d is not later than iat %d", o.Exp, o.Iat)
	case o.Iat > nowT+a.skewT():
		return reject(ReasonStale, ErrRejected, "iat %d is in the future beyond the skew (now %d)", o.Iat, nowT)
	case o.Exp-o.Iat > Time(a.cfg.MaxLifetime/time.Second): // in seconds: a Duration overflows
		return reject(ReasonStale, ErrRejected, "lifetime %ds exceeds the maximum %s", o.Exp-o.Iat, a.cfg.MaxLifetime)
	case o.Exp <= nowT:
		return reject(ReasonStale, ErrRejected, "expired at %d (now %d)", o.Exp, nowT)
	}
	return nil
}

func equivocationAnswer(held replay.Record) EquivocationAnswer {
	switch State(held.State) {
	case "":
		return AnswerRejectFirst
	case Accepted, Canceled:
		// A hop the delegator canceled has no terminal status from this
		// delegate, which may still report the outcome (HC-54, HC-56).
		return AnswerFinishFirst
	}
	return AnswerNone
}

func notChecked(refs []ContextRef) []RefResult {
	out := make([]RefResult, len(refs))
	for i, ref := range refs {
		out[i] = RefResult{Ref: ref, Outcome: RefNotChecked}
	}
	return out
}

func storeErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrStore, err)
}
