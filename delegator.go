package handoff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"
)

// OfferParams describe a new offer (section 2).
type OfferParams struct {
	// To is the delegate (aud). Required.
	To AgentID
	// Dialog is the host protocol's dialog identifier, which the delegate
	// checks against its host message (step 5). Required, unless From
	// gives it: the CDDL makes dialog a required text.
	Dialog string
	Task   string
	// TTL is exp - iat. Zero means 2 minutes; it may not exceed the
	// configured MaxLifetime (HC-32).
	TTL time.Duration
	// From is the received offer whose work this offer passes on: prev is
	// its digest and the chain is its chain plus its offer (section 2.1).
	// It must be an offer this agent received and accepted, or the hop's
	// work resumed (Agent.Resume, which checks the chain again), not a
	// bare retransmission (whose chain was not checked, HC-38). Nil
	// starts a chain.
	From *Received
	// OmitChain leaves the chain out, keeping prev (HC-63): the next hop
	// then sees an absent chain.
	OmitChain bool
	// Obo names the principal; nil means From's, when given.
	Obo *Principal
	// Credential, when set, is bound to the hop by its digest in grant
	// (HC-03). The credential itself is never put in the offer (HC-62).
	Credential []byte
	// Refs name prior context by digest (HC-64).
	Refs []ref.Ref
	// Extra members to sign with the offer (HC-01).
	Extra map[string]any
	// Work names the work this offer asks for. While an earlier hop for the
	// same Work is unresolved, a new offer is refused unless SafeToRepeat
	// (HC-42). Empty means the work is not tracked.
	Work         string
	SafeToRepeat bool
	// Prepare, when set, is called with the offer before it is signed,
	// once its hop, iat, exp and prev are chosen, so that what must name
	// them can be bound to the offer. It may add refs and extension
	// members; the offer is checked against the CDDL after it returns.
	Prepare func(*Offer) error
	// Deliver, when set, makes the object the delegate receives with the
	// task, beside the Handoff: section 2.2 has a "digest" reference name
	// "octets the delegate is expected to receive with the task", and a
	// "salted-digest" their salt too, which never goes in the offer
	// (HC-09). It is called after Prepare, with a copy of the offer (its
	// hop, iat, exp and prev chosen, so that the object can be bound to
	// them), and returns the object and the reference that names it,
	// which is appended to the offer's refs: the offer names the object
	// by digest and never embeds it (HC-64). A reference of kind "digest"
	// or "salted-digest" is checked against the object first. Agent.Offer
	// returns the object in Outgoing.Delivered, for the host's middleware
	// to carry beside the Handoff with every send of the hop. An evidence
	// package is made this way by evidence.Builder.Deliver.
	Deliver func(*Offer) (ref.Ref, ref.Object, error)
}

// Outgoing is an offer this agent made.
type Outgoing struct {
	Handoff *Handoff
	Offer   *Offer
	Digest  digest.Digest
	// Delivered is the object OfferParams.Deliver made, which travels
	// beside the Handoff, or nil.
	Delivered *ref.Object
}

// Offer builds, signs and records a new offer to p.To with a fresh hop
// (HC-12). The hop is never signed again: Retransmit resends these octets
// (HC-52). Several offers may pass on one received offer (fan-out, HC-51).
func (a *Agent) Offer(ctx context.Context, p OfferParams) (*Outgoing, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.To == "" {
		return nil, fmt.Errorf("%w: OfferParams.To is required", ErrArgument)
	}
	ttl := p.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	if ttl < time.Second || ttl > a.maxLifetime {
		return nil, fmt.Errorf("%w: TTL %s outside [1s, %s], the maximum lifetime (HC-32)", ErrArgument, ttl, a.maxLifetime)
	}
	hop, err := NewHopID(a.cfg.Rand)
	if err != nil {
		return nil, err
	}
	now := TimeOf(a.now())
	o := &Offer{
		Hop: hop, Dialog: p.Dialog, Task: p.Task, Iss: a.cfg.ID, Aud: p.To,
		Iat: now, Exp: now + seconds(ttl), Obo: p.Obo, Refs: p.Refs, Extra: p.Extra,
	}
	h := &Handoff{}
	var prev []byte
	if in := p.From; in != nil {
		switch {
		case !a.received(in):
			return nil, fmt.Errorf("%w: OfferParams.From must be a Received that this agent's Receive returned", ErrArgument)
		case in.Retransmission() && !in.resumed:
			// A retransmission is not processed again (HC-38): checks 5
			// to 7 did not run on it, so its chain was never checked and
			// may not be passed on. Pass on the Received that was accepted,
			// or the hop's work resumed (Agent.Resume checks the chain).
			return nil, fmt.Errorf("%w: OfferParams.From is a retransmission, whose chain was not checked (HC-38); pass on the Received of the delivery that was accepted, or of Agent.Resume", ErrArgument)
		case !in.Accepted() && !in.resumed:
			return nil, fmt.Errorf("%w: OfferParams.From must be an offer this agent accepted; this one was refused (%s)", ErrArgument, in.Reason())
		}
		o.Prev = &digest.Digest{Alg: digest.SHA256Alg, Val: in.digest.Val}
		prev = in.digest.Val
		if o.Dialog == "" {
			o.Dialog = in.offer.Dialog
		}
		if o.Obo == nil {
			o.Obo = in.offer.Obo
		}
		if !p.OmitChain {
			h.Chain = append(append([]Signed(nil), in.handoff.Chain...), in.handoff.Offer)
			if len(h.Chain) > a.lim.maxChain() {
				return nil, fmt.Errorf("%w: the chain would have %d elements, over the limit of %d (HC-50)", ErrArgument, len(h.Chain), a.lim.maxChain())
			}
		}
	}
	if o.Dialog == "" {
		return nil, fmt.Errorf("%w: OfferParams.Dialog is required: the delegate checks it against its host message", ErrArgument)
	}
	if p.Credential != nil {
		g := digest.SHA256(p.Credential)
		o.Grant = &g
	}
	if p.Prepare != nil {
		iss, aud, hop, iat, exp := o.Iss, o.Aud, o.Hop, o.Iat, o.Exp
		if err := p.Prepare(o); err != nil {
			return nil, err
		}
		if o.Iss != iss || o.Aud != aud || o.Hop != hop || o.Iat != iat || o.Exp != exp {
			return nil, fmt.Errorf("%w: Prepare may not change iss, aud, hop, iat or exp", ErrArgument)
		}
	}
	var delivered *ref.Object
	if p.Deliver != nil {
		r, obj, err := p.Deliver(o.clone())
		if err != nil {
			return nil, err
		}
		if r.Kind == ref.KindDigest || r.Kind == ref.KindSaltedDigest {
			if res := ref.Check(r, obj); res.Outcome != ref.Verified {
				return nil, fmt.Errorf("%w: OfferParams.Deliver: the reference does not name the object (%s)", ErrArgument, res.Detail)
			}
		}
		o.Refs = append(slices.Clip(o.Refs), cloneRef(r)) // never into the caller's array
		delivered = &ref.Object{Octets: bytes.Clone(obj.Octets), Salt: bytes.Clone(obj.Salt)}
	}
	if p.Work != "" && !p.SafeToRepeat {
		// A cheap look first, so that a refused offer costs no signature;
		// Create below is the atomic check (HC-42).
		open, err := a.cfg.Offers.List(ctx, replay.OfferQuery{OpenOnly: true, Work: p.Work})
		if err != nil {
			return nil, storeErr(err)
		}
		if len(open) > 0 {
			return nil, rule("HC-42", "hop %s for the same work is unresolved; no new offer replaces it unless the work is safe to do twice", open[0].Hop)
		}
	}
	signed, err := a.signer.Load().SignOffer(o)
	if err != nil {
		return nil, err
	}
	h.Offer = signed
	encoded, err := h.Encode(CBOR)
	if err != nil {
		return nil, err
	}
	d := signed.Digest()
	work := p.Work
	if p.SafeToRepeat {
		work = "" // not held against later offers
	}
	rec := replay.OfferRecord{Hop: string(hop), To: string(p.To), Digest: d.Val, Prev: prev, Work: work, Open: true,
		Handoff: encoded, State: string(state.Offered), Created: a.now()}
	if _, err := a.cfg.Offers.Create(ctx, rec); err != nil {
		var busy *replay.BusyError
		if errors.As(err, &busy) {
			return nil, rule("HC-42", "hop %s for the same work is unresolved; no new offer replaces it unless the work is safe to do twice", busy.Hop)
		}
		return nil, storeErr(err)
	}
	a.decided(ctx, slog.LevelInfo, "handoff: offer made", func() []slog.Attr {
		return []slog.Attr{slog.String("aud", string(o.Aud)), slog.String("hop", string(o.Hop)), slog.String("digest", d.String()),
			slog.Int("chain", len(h.Chain))}
	})
	return &Outgoing{Handoff: h, Offer: o, Digest: d, Delivered: delivered}, nil
}

// Retransmit returns the Handoff of an offered hop unchanged: the identical
// octets, never a re-signed hop (HC-37, HC-52). It works across restarts
// when Config.Offers is durable.
func (a *Agent) Retransmit(ctx context.Context, hop HopID) (*Handoff, error) {
	rec, err := a.offered(ctx, hop)
	if err != nil {
		return nil, err
	}
	h, _, err := ParseHandoff(rec.Handoff, Limits{MaxHandoffSize: len(rec.Handoff), MaxElementSize: len(rec.Handoff)})
	if err != nil {
		return nil, fmt.Errorf("handoff: the recorded Handoff of hop %s does not parse: %w", hop, err)
	}
	return h, nil
}

func (a *Agent) offered(ctx context.Context, hop HopID) (replay.OfferRecord, error) {
	rec, ok, err := a.cfg.Offers.Get(ctx, string(hop))
	if err != nil {
		return replay.OfferRecord{}, storeErr(err)
	}
	if !ok {
		return replay.OfferRecord{}, fmt.Errorf("%w: no offered hop %s", ErrArgument, hop)
	}
	return rec, nil
}

// HopInfo is the delegator's view of one hop it offered.
type HopInfo struct {
	Hop    HopID
	To     AgentID
	Digest digest.Digest
	Work   string
	// State is the hop's state: Offered, Expired (local, provisional,
	// HC-27), or the first verified status's state.
	State state.State
	// Reason is the reason of a verified "rejected" or "failed".
	Reason reason.Code
	// Canceled is true once this agent canceled the hop; a later verified
	// "completed" or "failed" still resolves it (HC-56).
	Canceled bool
	// Resolved follows HC-41.
	Resolved bool
	// Status is the verified status that set State, as received.
	Status Signed
	// Age is how long ago the offer was made.
	Age time.Duration
}

func (a *Agent) info(rec replay.OfferRecord) HopInfo {
	h := hopOf(rec)
	exp := Time(0)
	if h.State == state.Offered { // only an offered hop can have expired (HC-27)
		if o, _, err := InspectUnverified(a.recordedOffer(rec), Limits{MaxElementSize: len(rec.Handoff)}); err == nil && o != nil {
			exp = o.Exp // this agent's own offer, read back from its store
		}
	}
	info := HopInfo{Hop: HopID(rec.Hop), To: AgentID(rec.To), Digest: digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}, Work: rec.Work,
		State: h.localState(exp, TimeOf(a.now())), Reason: reason.Code(rec.Reason), Canceled: rec.Canceled,
		Resolved: h.resolved(), Age: a.now().Sub(rec.Created)}
	if len(rec.Status) > 0 {
		if s, err := ParseSigned(rec.Status, Limits{MaxElementSize: len(rec.Status)}); err == nil {
			info.Status = s
		}
	}
	return info
}

// recordedOffer returns the signed offer of a record, or a zero Signed.
func (a *Agent) recordedOffer(rec replay.OfferRecord) Signed {
	h, _, err := ParseHandoff(rec.Handoff, Limits{MaxHandoffSize: len(rec.Handoff), MaxElementSize: len(rec.Handoff)})
	if err != nil {
		return Signed{}
	}
	return h.Offer
}

func hopOf(rec replay.OfferRecord) delegatorHop {
	return delegatorHop{State: state.State(rec.State), Reason: reason.Code(rec.Reason), Canceled: rec.Canceled, Observed: rec.Observed}
}

// Hop returns the delegator's view of a hop it offered.
func (a *Agent) Hop(ctx context.Context, hop HopID) (HopInfo, bool, error) {
	rec, ok, err := a.cfg.Offers.Get(ctx, string(hop))
	if err != nil || !ok {
		return HopInfo{}, false, storeErrOrNil(err)
	}
	return a.info(rec), true, nil
}

// Unresolved lists the hops this agent offered that are not resolved
// (HC-41), for an operator, sorted by hop.
func (a *Agent) Unresolved(ctx context.Context) ([]HopInfo, error) {
	recs, err := a.cfg.Offers.List(ctx, replay.OfferQuery{OpenOnly: true})
	if err != nil {
		return nil, storeErr(err)
	}
	out := make([]HopInfo, 0, len(recs))
	for _, rec := range recs {
		out = append(out, a.info(rec))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hop < out[j].Hop })
	return out, nil
}

// ObservedNoEffect records an authoritative observation that the work of
// hop did not take effect, which resolves it (HC-41).
func (a *Agent) ObservedNoEffect(ctx context.Context, hop HopID) error {
	return a.updateOffered(ctx, hop, func(rec *replay.OfferRecord) (bool, error) {
		rec.Observed = true
		return true, nil
	})
}

// Abandon stops tracking a hop and, when it is unresolved, flags it to the
// operator (HC-42: a delegator that stops asking while a hop is unresolved
// flags it).
func (a *Agent) Abandon(ctx context.Context, hop HopID) error {
	rec, err := a.offered(ctx, hop)
	if err != nil {
		return err
	}
	if err := a.cfg.Offers.Delete(ctx, rec.Hop, rec.Version); err != nil {
		return storeErr(err)
	}
	if !hopOf(rec).resolved() {
		a.flag(Conflict{Kind: ConflictUnresolved, Iss: a.cfg.ID, Hop: hop, First: digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest},
			Detail: "hop abandoned while unresolved"})
	}
	return nil
}

// updateOffered applies change to the record of hop with the store's
// compare-and-swap, retrying when another writer got there first. change
// reports whether it changed anything.
func (a *Agent) updateOffered(ctx context.Context, hop HopID, change func(*replay.OfferRecord) (bool, error)) error {
	for {
		rec, err := a.offered(ctx, hop)
		if err != nil {
			return err
		}
		next := rec
		changed, err := change(&next)
		if err != nil || !changed {
			return err
		}
		h := hopOf(next)
		if next.Open && h.resolved() {
			next.Open = false
			next.Expires = a.retained()
		}
		if _, err := a.cfg.Offers.Swap(ctx, rec, next); err != nil {
			if errors.Is(err, replay.ErrConflict) {
				continue
			}
			return storeErr(err)
		}
		return nil
	}
}

// Notice is a status this agent signed for another agent: send Status to
// To, about its hop Hop.
type Notice struct {
	To     AgentID
	Hop    HopID
	Status Signed
}

// Cancel signs a "canceled" for a hop this agent offered (section 4). The
// hop stays unresolved: the delegate may have done the work (HC-41).
func (a *Agent) Cancel(ctx context.Context, hop HopID) (Notice, error) {
	var n Notice
	err := a.updateOffered(ctx, hop, func(rec *replay.OfferRecord) (bool, error) {
		st := &Status{Hop: hop, Offer: digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}, Iss: a.cfg.ID, Aud: AgentID(rec.To),
			Iat: TimeOf(a.now()), State: state.Canceled}
		signed, err := a.signer.Load().SignStatus(st)
		if err != nil {
			return false, err
		}
		n = Notice{To: AgentID(rec.To), Hop: hop, Status: signed}
		changed := !rec.Canceled
		rec.Canceled = true
		return changed, nil
	})
	if err == nil {
		a.decided(ctx, slog.LevelInfo, "handoff: hop canceled", func() []slog.Attr {
			return []slog.Attr{slog.String("aud", string(n.To)), slog.String("hop", string(hop)), slog.String("digest", n.Status.Digest().String())}
		})
	}
	return n, err
}

// HandleStatus verifies a status (HC-55) and applies it.
//
// As delegator, for a hop this agent offered: the status must be signed by
// a key bound to its iss, with status.iss the offer's aud, status.aud this
// agent, and status.offer the offer's digest. The delegator's table in
// lifecycle.go then applies it: the first verified terminal state stands,
// a later conflicting one is flagged and ignored (HC-56), a verified status
// replaces a local expiry (HC-27).
//
// As delegate, for a "canceled" from the delegator of a hop this agent
// received: status.iss must be that offer's iss (HC-55). The hop becomes
// canceled unless it already has a terminal state, and a "canceled" is
// signed for each offer this agent issued whose prev is that offer's
// digest (HC-28).
//
// A status that fails verification changes nothing: the result carries the
// rejection (Err, Reason). The error is for the stores and the context.
func (a *Agent) HandleStatus(ctx context.Context, octets []byte) (*StatusResult, error) {
	res, err := a.handleStatus(ctx, octets)
	if err != nil {
		a.decided(ctx, slog.LevelError, "handoff: status not decided", func() []slog.Attr {
			return []slog.Attr{slog.String("digest", digest.SHA256(octets).String()), slog.String("error", err.Error())}
		})
		return nil, err
	}
	level := slog.LevelInfo
	if res.rejection != nil || res.Conflict {
		level = slog.LevelWarn
	}
	a.decided(ctx, level, "handoff: status "+res.decision(), func() []slog.Attr {
		return append(res.logAttrs(), slog.String("digest", digest.SHA256(octets).String()))
	})
	return res, nil
}

// handleStatus is HandleStatus without its log record.
func (a *Agent) handleStatus(ctx context.Context, octets []byte) (*StatusResult, error) {
	res := &StatusResult{}
	s, err := ParseSigned(octets, a.lim)
	if err != nil {
		res.rejection = &Rejection{Reason: reason.BadSignature, Detail: err.Error(), Err: err}
		return res, nil
	}
	st, err := OpenStatus(s, a.trust.Load().trust, a.lim)
	if err != nil {
		res.rejection = asRejection(err)
		return res, nil
	}
	if st.Aud != a.cfg.ID {
		res.rejection = reject(reason.WrongAudience, ErrRejected, "status aud %q is not this agent", st.Aud)
		return res, nil
	}
	if st.State == state.Canceled {
		if ok, err := a.cancelReceived(ctx, st, res); ok || err != nil {
			return res, err
		}
		res.rejection = reject(reason.Policy, ErrRejected, "a \"canceled\" names no hop this agent received from its iss")
		return res, nil
	}
	var flagged *Conflict
	err = a.updateOffered(ctx, st.Hop, func(rec *replay.OfferRecord) (bool, error) {
		flagged, res.Conflict, res.Changed = nil, false, false
		// The record holds what the status must answer: this agent's own
		// offer of hop rec.Hop to rec.To, whose digest is rec.Digest. It
		// is not decoded again for each status.
		d := digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}
		if !d.Equal(st.Offer) {
			res.rejection = reject(reason.Policy, ErrRejected, "the status names no offer this agent made")
			return false, nil
		}
		o := &Offer{Hop: HopID(rec.Hop), Iss: a.cfg.ID, Aud: AgentID(rec.To)}
		if rj := statusAnswers(st, o, d); rj != nil {
			res.rejection = asRejection(rj)
			return false, nil
		}
		res.Status = st
		next, changed, conflict := delegatorStep(hopOf(*rec), st)
		res.State, res.Changed, res.Conflict = next.State, changed, conflict
		if conflict {
			flagged = &Conflict{Kind: ConflictStatus, Iss: a.cfg.ID, Hop: st.Hop, First: digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}, Second: s.Digest(),
				Detail: fmt.Sprintf("status %q conflicts with the hop's state %q", st.State, rec.State)}
		}
		if changed {
			rec.State, rec.Reason, rec.Status = string(next.State), string(next.Reason), s.Octets
		}
		return changed, nil
	})
	if err != nil {
		if errors.Is(err, ErrArgument) { // no such hop
			res.rejection = reject(reason.Policy, ErrRejected, "the status names no offer this agent made")
			return res, nil
		}
		return nil, err
	}
	if flagged != nil {
		a.flag(*flagged)
	}
	return res, nil
}

// cancelReceived handles a "canceled" for a hop this agent received. It
// reports false when the status names no such hop.
func (a *Agent) cancelReceived(ctx context.Context, st *Status, res *StatusResult) (bool, error) {
	ok, err := a.cancelHop(ctx, st, res)
	if !ok || err != nil {
		return ok, err
	}
	// HC-28: cancel each offer issued from this hop.
	down, err := a.cfg.Offers.List(ctx, replay.OfferQuery{Prev: st.Offer.Val})
	if err != nil {
		return true, storeErr(err)
	}
	sort.Slice(down, func(i, j int) bool { return down[i].Hop < down[j].Hop })
	for _, rec := range down {
		n, err := a.Cancel(ctx, HopID(rec.Hop))
		if err != nil {
			return true, err
		}
		res.Notices = append(res.Notices, n)
	}
	return true, nil
}

// cancelHop sets a received hop canceled unless it already has a terminal
// state.
func (a *Agent) cancelHop(ctx context.Context, st *Status, res *StatusResult) (bool, error) {
	unlock, err := a.lockHop(ctx, st.Iss, st.Hop)
	if err != nil {
		return true, err
	}
	defer unlock()
	key := replay.Key{Iss: string(st.Iss), Hop: string(st.Hop)}
	rec, ok, err := a.cfg.Store.Get(ctx, key)
	if err != nil {
		return true, storeErr(err)
	}
	// The record is keyed by (iss, hop): a matching digest proves that
	// status.iss is the offer's iss (HC-55).
	if !ok || !(digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}).Equal(st.Offer) {
		return false, nil
	}
	res.Status = st
	for attempt := 0; ; attempt++ {
		res.State = state.State(rec.State)
		switch state.State(rec.State) {
		case state.Rejected, state.Completed, state.Failed, state.Canceled:
			return true, nil // the first terminal state stands
		}
		if attempt >= maxSwaps {
			return true, storeErr(fmt.Errorf("the record of hop %s of %q changed %d times while being written", key.Hop, key.Iss, attempt))
		}
		next := replay.Record{State: string(state.Canceled), Status: rec.Status, Expires: a.retained()}
		held, swapped, err := a.cfg.Store.Swap(ctx, key, rec, next)
		switch {
		case errors.Is(err, replay.ErrNotFound) || errors.Is(err, replay.ErrConflict):
			return false, nil // released, or remembered again for another offer
		case err != nil:
			return true, storeErr(err)
		case swapped:
			res.State, res.Changed = state.Canceled, true
			return true, nil
		}
		rec = held
	}
}
