package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"
)

// ReplyOptions are the optional members of a status and what the delegate
// knows of the work.
type ReplyOptions struct {
	Reason reason.Code
	// Detail is for people (HC-05); leave it empty across trust boundaries
	// (HC-65).
	Detail string
	// Refs: for "completed", the result; for "failed", every part of the
	// work that took effect (HC-44).
	Refs []ref.Ref
	// Effect is required for "completed" (EffectFull) and "failed"
	// (EffectNone or EffectPartial).
	Effect state.Effect
}

// Reply signs the delegate's status for a received offer and records it as
// the hop's last status, so that a retransmission is answered with the
// identical octets (HC-34, HC-39). The rules of lifecycle.go decide what
// may be sent: at most one of accepted/rejected and one of
// completed/failed per hop (HC-23); no "rejected" for a hop taken (HC-24);
// "completed" and "failed" only with a known effect (HC-25, HC-44, HC-45);
// for an equivocating offer, only what HC-54 allows, for the FIRST offer.
// A delegate never sends "canceled" for an offer it received.
func (a *Agent) Reply(ctx context.Context, in *Received, want state.State, opt ReplyOptions) (Signed, error) {
	if !a.received(in) || in.offer == nil || in.check == CheckSignature {
		return Signed{}, fmt.Errorf("%w: no offer received by this agent with a verified signature to answer", ErrArgument)
	}
	target := in.digest
	if in.verdict == verdictEquivocation {
		target = in.first
	}
	var known *replay.Record
	if in.hasRec {
		known = &in.rec
	}
	r := answered{iss: in.offer.Iss, hop: in.offer.Hop, target: target, token: in.token, known: known,
		verdict: in.verdict, owes: in.OwesAccepted(), eq: in.equivocation}
	signed, err := a.reply(ctx, r, want, opt)
	a.sent(ctx, r, want, opt, signed, err)
	return signed, err
}

// ReplyHop signs a status for a hop this agent received and remembers, by
// its (iss, hop), without the *Received of the delivery: for example to
// send "completed" after a restart for work taken before it. The hop must
// have been taken (Take, or Reply with "accepted") or canceled by its
// delegator; the same rules as Reply apply.
func (a *Agent) ReplyHop(ctx context.Context, iss AgentID, hop HopID, want state.State, opt ReplyOptions) (Signed, error) {
	rec, ok, err := a.cfg.Store.Get(ctx, replay.Key{Iss: string(iss), Hop: string(hop)})
	if err != nil {
		return Signed{}, storeErr(err)
	}
	if !ok {
		return Signed{}, rule("", "hop %s of %q is not remembered", hop, iss)
	}
	if s := state.State(rec.State); s != state.Accepted && s != state.Canceled {
		return Signed{}, rule("", "only a hop taken (or canceled while taken) can be answered without its delivery; this one is %q", rec.State)
	}
	r := answered{iss: iss, hop: hop, target: digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}, known: &rec, verdict: verdictRetransmit}
	signed, err := a.reply(ctx, r, want, opt)
	a.sent(ctx, r, want, opt, signed, err)
	return signed, err
}

// sent logs the status a reply signed, or why it was refused: a rule of
// the lifecycle or an argument (Info), a store or context error (Error).
func (a *Agent) sent(ctx context.Context, r answered, want state.State, opt ReplyOptions, signed Signed, err error) {
	level, msg := slog.LevelInfo, "handoff: status signed"
	switch {
	case err == nil:
	case errors.Is(err, ErrState) || errors.Is(err, ErrArgument):
		msg = "handoff: status refused"
	default:
		level, msg = slog.LevelError, "handoff: status not recorded"
	}
	a.decided(ctx, level, msg, func() []slog.Attr {
		attrs := []slog.Attr{slog.String("state", string(want)), slog.String("iss", string(r.iss)), slog.String("hop", string(r.hop)),
			slog.String("offer", r.target.String())}
		if opt.Reason != "" {
			attrs = append(attrs, slog.String("reason", string(opt.Reason)))
		}
		if err != nil {
			return append(attrs, slog.String("error", err.Error()))
		}
		return append(attrs, slog.String("digest", signed.Digest().String()))
	})
}

// answered is the hop a status answers, as Reply and ReplyHop know it.
type answered struct {
	iss    AgentID
	hop    HopID
	target digest.Digest // the offer the status names
	// token, when set, is the call token of the delivery that remembered
	// the hop: the write applies only to the record that delivery
	// inserted.
	token []byte
	// known, when set, is the hop's record as last read: the state is then
	// decided from it and written with one compare-and-set (Store.Swap),
	// which returns the record held if another call changed it meanwhile,
	// to decide again.
	known   *replay.Record
	verdict verdict
	owes    bool         // a retransmission owes "accepted" (HC-39)
	eq      state.Answer // for an equivocation, what the first offer may get
}

// reply applies the delegate's table to the hop r names, for a status of
// state want.
func (a *Agent) reply(ctx context.Context, r answered, want state.State, opt ReplyOptions) (Signed, error) {
	var conflicts []Conflict
	defer func() { // after the hop lock is released
		for _, c := range conflicts {
			a.flag(c)
		}
	}()
	send := delegateSend{State: want, Reason: opt.Reason, Effect: opt.Effect, Refs: len(opt.Refs), OwesAccepted: r.owes, Equivocation: r.eq}
	if (want == state.Completed || want == state.Failed) && opt.Effect == state.EffectUnknown {
		// HC-45: never guess; the hop stays "accepted", flagged.
		conflicts = append(conflicts, Conflict{Kind: ConflictUnresolved, Iss: r.iss, Hop: r.hop, First: r.target,
			Detail: "the outcome of the work could not be established; the hop stays accepted"})
		return Signed{}, effectRule(send)
	}
	unlock, err := a.lockHop(ctx, r.iss, r.hop)
	if err != nil {
		return Signed{}, err
	}
	defer unlock()
	key := replay.Key{Iss: string(r.iss), Hop: string(r.hop)}
	var (
		rec        replay.Record
		remembered bool
	)
	if r.known != nil {
		rec, remembered = *r.known, true
	} else if rec, remembered, err = a.cfg.Store.Get(ctx, key); err != nil {
		return Signed{}, storeErr(err)
	}
	// The status depends on the hop, the target and the options, not on
	// the record: it is signed once, when the first attempt allows it, and
	// the same octets are written by every later attempt of the
	// compare-and-set.
	var signed Signed
	for attempt := 0; ; attempt++ {
		if remembered && !(digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}).Equal(r.target) {
			return Signed{}, rule("", "the hop holds another offer")
		}
		h := delegateHop{Remembered: remembered, State: state.State(rec.State), Sent: rec.Status != nil, Verdict: r.verdict}
		next, records, err := delegateStep(h, send)
		if err != nil {
			return Signed{}, err
		}
		if signed.Octets == nil {
			status := &Status{Hop: r.hop, Offer: r.target, Iss: a.cfg.ID, Aud: r.iss, Iat: TimeOf(a.now()),
				State: want, Reason: opt.Reason, Detail: opt.Detail, Refs: opt.Refs}
			if signed, err = a.signer.Load().SignStatus(status); err != nil {
				return Signed{}, err
			}
		}
		if !records {
			return signed, nil
		}
		w := replay.Record{State: string(next), Status: signed.Octets, Expires: rec.Expires}
		switch {
		case next == state.Accepted:
			w.Expires = time.Time{} // kept until resolved (HC-34)
		case next == state.Rejected && r.verdict == verdictRejected:
			// An offer that failed a check after 1-3 keeps its record
			// until exp + skew only (HC-33), as it was remembered:
			// retransmissions are answered with this "rejected" until
			// then, and are stale after. The retention period of HC-34
			// (a SHOULD) is for hops the delegate decided on; giving it
			// to offers refused by a check would let one trusted
			// delegator that floods such offers hold the store's room
			// for the whole period.
		default:
			w.Expires = a.retained()
		}
		held, swapped, err := a.swap(ctx, key, rec, r.token, w, attempt)
		switch {
		case errors.Is(err, replay.ErrNotFound):
			// The record expired or was released since it was read:
			// decide again as for a hop not remembered, which never
			// takes it.
			rec, remembered = replay.Record{}, false
		case err != nil:
			return Signed{}, takeErr(err)
		case swapped:
			return signed, nil
		default:
			rec = held // another call changed the hop: decide again
		}
	}
}

// maxSwaps bounds the compare-and-set attempts of one write to a hop's
// record. Each failed attempt means another call moved the hop on, which
// the lifecycle allows only a few times.
const maxSwaps = 8

// swap writes next over old, the hop's record as last read, with
// Store.Swap; token, when set, must be the held record's.
func (a *Agent) swap(ctx context.Context, key replay.Key, old replay.Record, token []byte, next replay.Record, attempt int) (replay.Record, bool, error) {
	if attempt >= maxSwaps {
		return replay.Record{}, false, fmt.Errorf("the record of hop %s of %q changed %d times while being written", key.Hop, key.Iss, attempt)
	}
	old.Token = token
	return a.cfg.Store.Swap(ctx, key, old, next)
}

// Take records that the delegate has taken the work of an accepted offer
// without sending a status yet: a retransmission is then told it owes
// "accepted" (HC-39). The work starts only after Take or Reply with
// "accepted" returned.
func (a *Agent) Take(ctx context.Context, in *Received) error {
	if !a.received(in) || !in.Accepted() {
		return fmt.Errorf("%w: only an offer this agent received and accepted can be taken", ErrArgument)
	}
	err := a.take(ctx, in)
	a.decided(ctx, slog.LevelInfo, "handoff: hop taken", func() []slog.Attr {
		attrs := []slog.Attr{slog.String("iss", string(in.offer.Iss)), slog.String("hop", string(in.offer.Hop)), slog.String("digest", in.digest.String())}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		return attrs
	})
	return err
}

// take is Take without its checks of in and its log record.
func (a *Agent) take(ctx context.Context, in *Received) error {
	o := in.offer
	unlock, err := a.lockHop(ctx, o.Iss, o.Hop)
	if err != nil {
		return err
	}
	defer unlock()
	key := replay.Key{Iss: string(o.Iss), Hop: string(o.Hop)}
	rec := in.rec // an accepted offer was remembered by this delivery
	for attempt := 0; ; attempt++ {
		if rec.State != "" {
			return rule("HC-23", "a hop is taken once; this one is already %s", rec.State)
		}
		held, swapped, err := a.swap(ctx, key, rec, in.token, replay.Record{State: string(state.Accepted), Status: rec.Status}, attempt)
		if err != nil {
			return takeErr(err)
		}
		if swapped {
			return nil
		}
		rec = held
	}
}

// takeErr maps a store's refusal of a write that takes a hop: the record
// is gone or another delivery remembered the hop since (it was released);
// the work must not start.
func takeErr(err error) error {
	if errors.Is(err, replay.ErrNotFound) || errors.Is(err, replay.ErrConflict) {
		return rule("", "the hop's record changed since this delivery remembered it (released, or remembered again): do not start the work")
	}
	return storeErr(err)
}

// Resume returns the Received of a hop's work resumed: in must be a
// retransmission this agent's Receive returned (the exact octets of an
// offer it remembers, HC-35) of a hop it took and still holds "accepted"
// (Take, or Reply with "accepted", and no "completed" or "failed" since).
// Its Offer is then the offer the hop was accepted with, the same octets
// by digest as the delivery that was accepted, so that work paused in a
// host protocol (an approval asked for, an input required) and continued
// by the delegator's retransmission runs with the same accessors as the
// first delivery; Refused is nil, Retransmission still true, and Accepted
// false: the hop is not taken again (HC-23), nor its offer processed again
// (HC-38), and Reply answers it as the retransmission it is. A host that
// resumes nothing answers a retransmission as HC-39 says instead.
//
// The chain travels outside the offer's signature (section 2.1), so that
// the copy a retransmission carries was not checked: Resume runs the
// dialog check (step 5, against in's Host) and the chain check (step 6,
// with this agent's trust and ChainPolicy now) on it, so that the resumed
// work may pass the hop on (OfferParams.From) as the accepted delivery
// could. A failure is a *Rejection, with the reason of that step. The
// references (step 7) are "not checked" here: the first delivery checked
// them. A hop that ended, was canceled or is not held "accepted" is an
// error wrapping ErrState. Only the hop's delegator, as the host
// authenticated it (Host.Peer equal to the offer's iss), resumes its work,
// as only it is told the hop's state (HC-39); another sender, and anything
// else given as in, is an error wrapping ErrArgument.
func (a *Agent) Resume(ctx context.Context, in *Received) (*Received, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !a.received(in) || in.verdict != verdictRetransmit || in.resumed || !in.hasRec {
		return nil, fmt.Errorf("%w: Resume takes a retransmission that this agent's Receive returned", ErrArgument)
	}
	o := in.offer
	if in.host.Peer != o.Iss {
		// As a hop's status goes only to its delegator (HC-39), only the
		// delegator continues its work.
		return nil, fmt.Errorf("%w: the host did not authenticate the sender as the offer's iss %q (Host.Peer is %q)", ErrArgument, o.Iss, in.host.Peer)
	}
	if s := state.State(in.rec.State); s != state.Accepted {
		if s == "" {
			s = "not taken"
		}
		return nil, rule("", "hop %s of %q is %s: only a hop taken and still \"accepted\" resumes", o.Hop, o.Iss, s)
	}
	if in.host.Dialog != "" && o.Dialog != in.host.Dialog {
		return nil, reject(reason.Policy, ErrRejected, "dialog %q is not the host dialog %q", o.Dialog, in.host.Dialog)
	}
	h := in.handoff.clone() // checkChain completes the element forms in place
	cs, links, cerr := checkChain(h, o, chainCheck{self: a.cfg.ID, ts: a.trust.Load(), pol: a.cfg.Chain, lim: a.lim, skew: a.skew})
	if cerr == nil {
		cerr = applyChainPolicy(cs, links, o, a.cfg.Chain)
	}
	if cerr != nil {
		where, d := cerr.parts()
		return nil, &Rejection{Reason: cerr.Reason, Detail: where + ": " + d, Err: cerr}
	}
	r := *in
	r.handoff, r.chain, r.links, r.resumed = h, cs, links, true
	r.refs = notChecked(o.Refs)
	a.decided(ctx, slog.LevelInfo, "handoff: hop resumed", r.logAttrs)
	return &r, nil
}

// UntakenHop is a hop this agent remembers but never took or answered: the
// record of a delivery whose call may have failed after the store wrote it
// (a lost reply, a timeout). Every later delivery of its offer is a
// retransmission with no status owed, so it is shown to the operator.
type UntakenHop struct {
	Iss    AgentID
	Hop    HopID
	Digest digest.Digest
	Age    time.Duration
}

// Untaken lists the hops this agent remembers, has neither taken nor
// answered, and remembered more than olderThan ago, oldest first. Choose
// olderThan well above the time the application takes from Receive to
// Take or Reply.
func (a *Agent) Untaken(ctx context.Context, olderThan time.Duration) ([]UntakenHop, error) {
	recs, err := a.cfg.Store.Untaken(ctx, a.now().Add(-olderThan))
	if err != nil {
		return nil, storeErr(err)
	}
	out := make([]UntakenHop, len(recs))
	for i, u := range recs {
		out[i] = UntakenHop{Iss: AgentID(u.Key.Iss), Hop: HopID(u.Key.Hop), Digest: digest.Digest{Alg: digest.SHA256Alg, Val: u.Record.Digest}, Age: u.Age}
	}
	return out, nil
}

// Release forgets a hop listed by Untaken, so that the next delivery of its
// offer is checked afresh and may be accepted. The store deletes the
// record only if it still holds digest and the hop is still untaken, in one
// atomic step, so a concurrent Take or Reply either comes first (Release
// fails with ErrState) or finds the record gone and does not start the
// work. Since work starts only after Take or Reply("accepted") recorded
// the hop, a released hop was never worked on: it is accepted at most
// once.
func (a *Agent) Release(ctx context.Context, iss AgentID, hop HopID, digest digest.Digest) error {
	err := a.cfg.Store.Release(ctx, replay.Key{Iss: string(iss), Hop: string(hop)}, digest.Val)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replay.ErrTaken):
		return rule("", "hop %s of %q was taken or answered; it is no longer untaken", hop, iss)
	case errors.Is(err, replay.ErrNotFound), errors.Is(err, replay.ErrConflict):
		return fmt.Errorf("%w: hop %s of %q holds no untaken record of that offer", ErrArgument, hop, iss)
	}
	return storeErr(err)
}
