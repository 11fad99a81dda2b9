package handoff

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"
)

// Section 5.1 of the draft: receiving an offer, as one ordered pipeline.

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
	RefSource ref.Source
}

// Check names a check of section 5.1, numbered as the draft numbers them.
type Check uint8

const (
	// CheckNone: every check passed.
	CheckNone      Check = iota
	CheckSignature       // 1: signed form and signature (bad-signature, untrusted-key)
	CheckAudience        // 2: aud (wrong-audience)
	CheckFreshness       // 3: freshness (stale)
	CheckMemory          // 4: (iss, hop) memory: retransmission, equivocation, replay
	CheckDialog          // 5: dialog (policy)
	CheckChain           // 6: chain (broken-chain, cycle, too-deep, policy, bad-signature)
	CheckRefs            // 7: references (unverifiable-ref, ref-mismatch)
)

var checkNames = [...]string{"none", "signature", "audience", "freshness", "memory", "dialog", "chain", "references"}

// String returns the check's name: "signature", "audience", ...
func (c Check) String() string {
	if int(c) < len(checkNames) {
		return checkNames[c]
	}
	return fmt.Sprintf("Check(%d)", c)
}

// Received is the outcome of Receive. It is opaque: only Receive makes one,
// so that an Agent can trust what it holds (Agent.Offer with From). Its
// offer is handed out by name: Offer when it was accepted, Refused when its
// signature verified but it was not, Unverified in any case.
type Received struct {
	by        *Agent
	handoff   *Handoff
	offer     *Offer // decoded; verified when check != CheckSignature
	digest    digest.Digest
	check     Check
	verdict   verdict
	rejection *Rejection

	chain ChainState
	links []Link
	refs  []ref.Result

	equivocation state.Answer
	first        digest.Digest
	lastStatus   []byte
	owesAccept   bool
	host         Host
	// token is the call token of the Remember that inserted the hop's
	// record; the writes that take the hop carry it, so that they apply
	// only to that record (replay's contract on released records).
	token []byte
	// rec is the hop's record as the store returned it, when hasRec: the
	// state from which Reply and Take swap, without reading it again.
	rec    replay.Record
	hasRec bool
	// resumed marks the Received of Agent.Resume: a retransmission of a
	// hop taken and still "accepted", whose offer is handed out by Offer.
	resumed bool
}

// Accepted reports whether every check passed: the delegate may take the
// work (Agent.Take) and answer "accepted" (Agent.Reply).
func (r *Received) Accepted() bool { return r.verdict == verdictAccepted }

// Check is the check of section 5.1 that decided the outcome: CheckNone
// when the offer was accepted, CheckMemory for a retransmission or
// equivocation. A chain element's failure is CheckChain.
func (r *Received) Check() Check { return r.check }

// Reason returns the draft's reason code of a rejection, "equivocation" for
// an equivocating offer, and "" when accepted or a retransmission.
func (r *Received) Reason() reason.Code {
	switch {
	case r.rejection != nil:
		return r.rejection.Reason
	case r.verdict == verdictEquivocation:
		return reason.Equivocation
	}
	return ""
}

// Detail is a human explanation (HC-05: no program may depend on it).
func (r *Received) Detail() string {
	switch {
	case r.rejection != nil:
		return r.rejection.Detail
	case r.verdict == verdictEquivocation:
		return "another offer with this (iss, hop) and different octets was seen first; " +
			"two offers that differ only in their signature are equivocation too (HC-53)"
	case r.verdict == verdictRetransmit:
		return "exact copy of an offer already received; not processed again (HC-38)"
	}
	return ""
}

// Err returns the rejection as an error (a *Rejection, which carries the
// reason; for step 6 its detail says where in the chain), or nil when
// accepted or a retransmission.
func (r *Received) Err() error {
	switch {
	case r.rejection != nil:
		return r.rejection
	case r.verdict == verdictEquivocation:
		return reject(reason.Equivocation, ErrRejected, "%s", r.Detail())
	}
	return nil
}

// Offer returns the offer when it was accepted: every check of section
// 5.1 passed, and the delegate may take the work; or, for the Received of
// Agent.Resume, the offer its hop was accepted with, whose work resumes.
// It is nil for every other outcome, so that code which acts on Offer() !=
// nil never acts on a refused offer, nor on a retransmission that was not
// resumed. The offer is a copy.
func (r *Received) Offer() *Offer {
	if r.verdict != verdictAccepted && !r.resumed {
		return nil
	}
	return r.offer.clone()
}

// Refused returns the offer when its signature verified with a key the
// trust configuration binds to its iss (check 1) but it was not accepted:
// a later check refused it (Reason, Detail), it equivocates (HC-53), or it
// is a retransmission, which is not processed again (HC-38). Its members
// are what its iss signed; it is for answering and logging, never for
// doing the work. It is nil when the offer was accepted, for the Received
// of Agent.Resume (whose Offer is the hop's), and when its signature did
// not verify (see Unverified). The offer is a copy.
func (r *Received) Refused() *Offer {
	if r.offer == nil || r.check == CheckSignature || r.verdict == verdictAccepted || r.resumed {
		return nil
	}
	return r.offer.clone()
}

// Unverified returns the offer as decoded, whether or not its signature
// verified. It is for display and diagnosis only: an offer that failed
// check 1 says what anyone could have written. Such an offer is decoded
// only when this is called, never by Receive (what an unknown sender's
// octets cost, SECURITY.md), and nil when it does not decode.
func (r *Received) Unverified() *Offer {
	if r.check == CheckSignature && r.offer == nil && r.handoff != nil {
		o, _, _ := InspectUnverified(r.handoff.Offer, r.by.lim)
		return o
	}
	return r.offer.clone()
}

// Handoff returns a copy of the Handoff object as carried (nil when it did
// not parse). Its elements are signed octets; their claims are verified
// only as Offer and Links say. Receive reads at most Limits.MaxChain + 1
// elements of the chain (SECURITY.md): of a longer chain, refused as
// too-deep at step 6 if no earlier check refused the offer, Chain holds
// those first elements, and Encode refuses to write it.
func (r *Received) Handoff() *Handoff {
	h := r.handoff.clone()
	h.checkForms(r.by.lim, nil) // as ParseHandoff returns it, when step 6 did not run
	h.fillExtra()
	return h
}

// Digest returns the offer's handoff digest (HC-20), or the zero Digest
// when the Handoff did not parse.
func (r *Received) Digest() digest.Digest { return r.digest }

// Chain returns the chain's state, when step 6 ran.
func (r *Received) Chain() ChainState { return r.chain }

// Links returns a copy of the chain's elements, oldest first, when step 6
// passed.
func (r *Received) Links() []Link {
	if r.links == nil {
		return nil
	}
	c := make([]Link, len(r.links))
	for i, l := range r.links {
		l.Signed, l.Digest = l.Signed.clone(), l.Digest.Clone()
		c[i] = l // l.offer is reached only through Offer and Unverified, which copy
	}
	return c
}

// Refs returns each reference's outcome (HC-11): checked when step 7 ran,
// "not checked" otherwise. The results are copies.
func (r *Received) Refs() []ref.Result {
	if r.refs == nil {
		return nil
	}
	c := make([]ref.Result, len(r.refs))
	for i, rr := range r.refs {
		rr.Ref = cloneRef(rr.Ref)
		c[i] = rr
	}
	return c
}

// Retransmission reports that the offer is the exact octets of one already
// remembered (HC-35, HC-38): it is not processed again. It stays true for
// the Received of Agent.Resume, which is that retransmission resumed.
func (r *Received) Retransmission() bool { return r.verdict == verdictRetransmit }

// Equivocation returns, for an offer with the (iss, hop) of a different
// remembered offer (HC-53), what may be sent for the FIRST offer; "" when
// there is no equivocation.
func (r *Received) Equivocation() state.Answer { return r.equivocation }

// First is the digest of the first offer seen for the (iss, hop), for a
// retransmission or equivocation.
func (r *Received) First() digest.Digest { return r.first }

// LastStatus returns, for a retransmission, the last status this agent sent
// for the hop, as the identical octets to resend (HC-39). It is withheld
// (ok false) unless the host authenticated the sender as the offer's iss.
func (r *Received) LastStatus() (s Signed, ok bool) {
	if r.verdict != verdictRetransmit || len(r.lastStatus) == 0 || r.host.Peer != r.offer.Iss {
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
	return r.verdict == verdictRetransmit && r.owesAccept && r.host.Peer == r.offer.Iss
}

// StatusDue reports whether the rules ask for a "rejected" in answer to
// this offer (HC-30): a check from 2 to 7 failed. Nothing is due for an
// offer whose signature did not verify (no verified iss to answer), for an
// equivocating second offer (HC-53), or for a retransmission (answered by
// LastStatus or OwesAccepted instead).
func (r *Received) StatusDue() bool {
	return r.verdict == verdictRejected && r.check > CheckSignature
}

// LogValue is r for log/slog: the decision, the check that made it, the
// reason, and the offer's iss, hop and digest, and for a refusal its
// detail. The iss and hop are given only once the offer's signature
// verified; an offer refused at check 1 is named by the digest of its
// octets alone.
func (r *Received) LogValue() slog.Value { return slog.GroupValue(r.logAttrs()...) }

func (r *Received) logAttrs() []slog.Attr {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("decision", r.decision()))
	if r.check != CheckNone {
		attrs = append(attrs, slog.String("check", r.check.String()))
	}
	if why := r.Reason(); why != "" {
		attrs = append(attrs, slog.String("reason", string(why)))
	}
	if r.offer != nil && r.check != CheckSignature {
		attrs = append(attrs, slog.String("iss", string(r.offer.Iss)), slog.String("hop", string(r.offer.Hop)))
	}
	if !r.digest.IsZero() {
		attrs = append(attrs, slog.String("digest", r.digest.String()))
	}
	if r.chain != "" {
		attrs = append(attrs, slog.String("chain", string(r.chain)))
	}
	if r.rejection != nil && r.rejection.Detail != "" {
		attrs = append(attrs, slog.String("detail", r.rejection.Detail))
	}
	return attrs
}

// decision names the outcome in one word, for logs.
func (r *Received) decision() string {
	switch r.verdict {
	case verdictAccepted:
		return "accepted"
	case verdictRetransmit:
		if r.resumed {
			return "resumed"
		}
		return "retransmission"
	case verdictEquivocation:
		return "equivocation"
	}
	return "refused"
}

func (r *Received) fail(c Check, rj *Rejection) *Received {
	r.check, r.verdict, r.rejection = c, verdictRejected, rj
	return r
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
// Only what must be bounded before parsing is checked out of order: the
// size of the input. A chain that is too long, or whose elements are not
// signed handoffs, fails at step 6, after the offer's own checks.
//
// Rejections are results, not errors: the returned error is non-nil only
// when the store could not answer (wrapping ErrStore) or ctx ended, and then
// the offer must be refused. An offer that passed checks 1-3 is remembered
// even when a later check rejects it. The work starts only after Take or
// Reply with "accepted" has recorded that the hop was taken.
func (a *Agent) Receive(ctx context.Context, data []byte, host Host) (*Received, error) {
	r, err := a.receive(ctx, data, host)
	if err != nil {
		a.decided(ctx, slog.LevelError, "handoff: offer not decided", func() []slog.Attr {
			return []slog.Attr{slog.String("error", err.Error())}
		})
		return nil, err
	}
	level := slog.LevelInfo
	if r.verdict == verdictRejected || r.verdict == verdictEquivocation {
		level = slog.LevelWarn
	}
	a.decided(ctx, level, "handoff: offer "+r.decision(), r.logAttrs)
	return r, nil
}

// receive is Receive without its log record.
func (a *Agent) receive(ctx context.Context, data []byte, host Host) (*Received, error) {
	r := &Received{by: a, host: host}
	ts := a.trust.Load()
	h, _, err := parseHandoff(data, a.lim, true) // forms of elements seen before are not checked again: checkChain
	if err != nil {
		return r.fail(CheckSignature, &Rejection{Reason: reason.BadSignature, Detail: err.Error(), Err: err}), nil
	}
	r.handoff = h
	r.digest = h.Offer.Digest()

	// 1. Signed form and signature.
	o, err := OpenOffer(h.Offer, ts.trust, a.lim)
	if err != nil {
		return r.fail(CheckSignature, asRejection(err)), nil // Unverified decodes it, if asked
	}
	r.offer = o
	r.refs = notChecked(o.Refs)

	// 2. Audience.
	if o.Aud != a.cfg.ID {
		return r.fail(CheckAudience, reject(reason.WrongAudience, ErrRejected, "aud %q is not this agent %q", o.Aud, a.cfg.ID)), nil
	}

	// 3. Freshness, unless (iss, hop) is remembered, and 4. the (iss, hop)
	// memory. A fresh offer is checked and recorded in one store call,
	// which returns the record already held when the pair is remembered
	// (HC-33, HC-35); only an offer that is not fresh costs a read, so
	// that a remembered pair is still recognised (HC-38).
	key := replay.Key{Iss: string(o.Iss), Hop: string(o.Hop)}
	now := a.now()
	var (
		held       replay.Record
		remembered bool
	)
	if c, rj := a.beforeMemory(o, now); rj != nil {
		held, remembered, err = a.cfg.Store.Get(ctx, key)
		if err != nil {
			return nil, storeErr(err)
		}
		if !remembered {
			return r.fail(c, rj), nil
		}
	} else {
		token, err := a.token()
		if err != nil {
			return nil, err
		}
		rec := replay.Record{Digest: r.digest.Val, Expires: a.storeExpiry(o), Token: token, Created: now}
		var inserted bool
		held, inserted, err = a.cfg.Store.Remember(ctx, key, rec)
		if err != nil {
			return nil, storeErr(err)
		}
		remembered = !inserted
		if inserted {
			r.token = token
		}
	}
	r.rec, r.hasRec = held, true
	if remembered {
		r.check = CheckMemory
		r.first = digest.Digest{Alg: digest.SHA256Alg, Val: held.Digest}
		if !r.first.Equal(r.digest) {
			r.verdict = verdictEquivocation
			r.equivocation = equivocationAnswer(state.State(held.State))
			a.flag(Conflict{Kind: ConflictEquivocation, Iss: o.Iss, Hop: o.Hop, First: r.first, Second: r.digest,
				Detail: "two offers with one (iss, hop) and different octets"})
			return r, nil
		}
		r.verdict = verdictRetransmit
		r.lastStatus = held.Status
		r.owesAccept = held.Status == nil && held.State == string(state.Accepted)
		return r, nil
	}

	// 5. Dialog.
	if host.Dialog != "" && o.Dialog != host.Dialog {
		return r.fail(CheckDialog, reject(reason.Policy, ErrRejected, "dialog %q is not the host dialog %q", o.Dialog, host.Dialog)), nil
	}

	// 6. Chain.
	state, links, cerr := checkChain(h, o, chainCheck{self: a.cfg.ID, ts: ts, pol: a.cfg.Chain, lim: a.lim, skew: a.skew})
	if cerr == nil {
		r.chain, r.links = state, links
		cerr = applyChainPolicy(state, links, o, a.cfg.Chain)
	}
	if cerr != nil {
		where, d := cerr.parts()
		return r.fail(CheckChain, &Rejection{Reason: cerr.Reason, Detail: where + ": " + d, Err: cerr}), nil
	}

	// 7. References.
	src := host.RefSource
	if src == nil {
		src = a.cfg.RefSource
	}
	var rj *Rejection
	if r.refs, rj = checkRefs(ctx, o.Refs, a.cfg.Refs, a.cfg.RefCheckers, src); rj != nil {
		return r.fail(CheckRefs, rj), nil
	}
	r.verdict = verdictAccepted
	return r, nil
}

// beforeMemory is what an offer whose (iss, hop) is not remembered must
// pass before it is: freshness (check 3), and the rule of HC-59 for a
// receiver that lost its memory (check 4). It returns the check failed
// and its rejection, or nil.
func (a *Agent) beforeMemory(o *Offer, now time.Time) (Check, *Rejection) {
	if rj := a.fresh(o, now); rj != nil {
		return CheckFreshness, rj
	}
	// HC-59: a receiver that lost its memory refuses offers issued before
	// the loss until they can no longer be fresh.
	if lost := a.cfg.MemoryLostAt; !lost.IsZero() && o.Iat.before(lost) &&
		now.Before(lost.Add(a.maxLifetime+a.skew)) {
		return CheckMemory, reject(reason.Replay, ErrRejected, "issued before this receiver lost its memory at %s", lost.UTC().Format(time.RFC3339))
	}
	return CheckNone, nil
}

// fresh is "Freshness and Replay" for an offer whose (iss, hop) is not
// remembered (HC-31, HC-32).
func (a *Agent) fresh(o *Offer, now time.Time) *Rejection {
	nowT := TimeOf(now)
	switch {
	case o.Exp <= o.Iat:
		return reject(reason.Stale, ErrRejected, "exp %d is not later than iat %d", o.Exp, o.Iat)
	case o.Iat > nowT.plus(seconds(a.skew)):
		return reject(reason.Stale, ErrRejected, "iat %d is in the future beyond the skew (now %d)", o.Iat, nowT)
	case o.Exp-o.Iat > seconds(a.maxLifetime):
		return reject(reason.Stale, ErrRejected, "lifetime %ds exceeds the maximum %s", o.Exp-o.Iat, a.maxLifetime)
	case o.Exp <= nowT:
		return reject(reason.Stale, ErrRejected, "expired at %d (now %d)", o.Exp, nowT)
	}
	return nil
}

// storeExpiry is exp + skew, the time until which the hop's record must be
// kept at least (HC-33), as the stores take it. It is never shortened: a
// store keeps it as it is, or refuses it with replay.ErrExpiry when it
// cannot represent it (the offer is then refused). Past 2^62 seconds, where
// Time.Std clamps, it is the zero time (keepUntil): the record is kept
// until updated, longer than the draft asks, never shorter.
func (a *Agent) storeExpiry(o *Offer) time.Time {
	return keepUntil(o.Exp.plus(seconds(a.skew)))
}
