package handoff

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/agentproto/handoff/replay"
)

// OfferParams describe a new offer (section 2).
type OfferParams struct {
	// To is the delegate (aud).
	To AgentID
	// Dialog is the host protocol's dialog identifier. Empty means the
	// dialog of From, when given.
	Dialog string
	Task   string
	// TTL is exp - iat. Zero means 2 minutes; it may not exceed the
	// configured MaxLifetime (HC-32).
	TTL time.Duration
	// From is the received offer whose work this offer passes on: prev is
	// its digest and the chain is its chain plus its offer (section 2.1).
	// Nil starts a chain.
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
	Refs []ContextRef
	// Extra members to sign with the offer (HC-01).
	Extra map[string]any
	// Work names the work this offer asks for. While an earlier hop for the
	// same Work is unresolved, a new offer is refused unless SafeToRepeat
	// (HC-42). Empty means the work is not tracked.
	Work         string
	SafeToRepeat bool
}

// Outgoing is an offer this agent made.
type Outgoing struct {
	Handoff *Handoff
	Offer   *Offer
	Digest  Digest
}

// Encode returns the Handoff object to carry.
func (o *Outgoing) Encode(enc Encoding) ([]byte, error) { return o.Handoff.Encode(enc) }

// HopInfo is the delegator's view of one hop it offered.
type HopInfo struct {
	Hop    HopID
	To     AgentID
	Digest Digest
	Work   string
	// State is the hop's state: Offered, Expired (local, provisional,
	// HC-27), or the first verified status's state.
	State State
	// Reason is the reason of a verified "rejected" or "failed".
	Reason Reason
	// Canceled is true once this agent canceled the hop; a later verified
	// "completed" or "failed" still resolves it (HC-56).
	Canceled bool
	// Resolved follows HC-41.
	Resolved bool
	// Refs of the status that set the state ("failed": what took effect).
	Refs []ContextRef
}

type outHop struct {
	handoff  *Handoff
	offer    *Offer
	digest   Digest
	work     string
	state    State // Offered, Accepted, Rejected, Completed, Failed
	reason   Reason
	refs     []ContextRef
	canceled bool
	observed bool // authoritative observation of no effect (HC-41)
	first    Digest
}

// Offer builds, signs and records a new offer to p.To with a fresh hop
// (HC-12). The hop is never signed again: Retransmit resends these octets
// (HC-52). Several offers may pass on one received offer (fan-out, HC-51).
func (a *Agent) Offer(ctx context.Context, p OfferParams) (*Outgoing, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.To == "" {
		return nil, fmt.Errorf("%w: OfferParams.To is required", ErrState)
	}
	ttl := p.TTL
	if ttl == 0 {
		ttl = 2 * time.Minute
	}
	if ttl < time.Second || ttl > a.cfg.MaxLifetime {
		return nil, fmt.Errorf("%w: TTL %s outside [1s, %s] (HC-32)", ErrState, ttl, a.cfg.MaxLifetime)
	}
	hop, err := NewHopID(a.cfg.Rand)
	if err != nil {
		return nil, err
	}
	now := TimeOf(a.now())
	o := &Offer{
		Hop: hop, Dialog: p.Dialog, Task: p.Task, Iss: a.cfg.ID, Aud: p.To,
		Iat: now, Exp: now + Time(ttl/time.Second), Obo: p.Obo, Refs: p.Refs, Extra: p.Extra,
	}
	h := &Handoff{}
	if p.From != nil {
		in := p.From
		if in.Offer == nil || in.Handoff == nil || !(in.Accepted() || in.Retransmission) || in.Offer.Aud != a.cfg.ID {
			return nil, fmt.Errorf("%w: From must be an offer this agent accepted", ErrState)
		}
		d := in.Digest
		o.Prev = &d
		if o.Dialog == "" {
			o.Dialog = in.Offer.Dialog
		}
		if o.Obo == nil {
			o.Obo = in.Offer.Obo
		}
		if !p.OmitChain {
			h.Chain = append(append([]Signed(nil), in.Handoff.Chain...), in.Handoff.Offer)
			if len(h.Chain) > a.lim.MaxChain {
				return nil, fmt.Errorf("%w: the chain would have %d elements, over the limit of %d (HC-50)", ErrState, len(h.Chain), a.lim.MaxChain)
			}
		}
	}
	if p.Credential != nil {
		g := GrantDigest(p.Credential)
		o.Grant = &g
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	a.pruneLocked()
	if p.Work != "" && !p.SafeToRepeat {
		for _, oh := range a.out {
			if oh.work == p.Work && !a.resolved(oh) {
				return nil, fmt.Errorf("%w: hop %s for the same work is unresolved (HC-42)", ErrState, oh.offer.Hop)
			}
		}
	}
	signed, err := a.cfg.Signer.SignOffer(o)
	if err != nil {
		return nil, err
	}
	h.Offer = signed
	d := signed.Digest()
	a.out[hop] = &outHop{handoff: h, offer: o, digest: d, work: p.Work, state: Offered}
	return &Outgoing{Handoff: h, Offer: o, Digest: d}, nil
}

// pruneLocked forgets hops that are resolved and whose retention period
// has passed since they expired, so that a long-running delegator's
// records stay bounded by its unresolved and recent hops. Unresolved hops
// are kept until resolved or abandoned (HC-42).
func (a *Agent) pruneLocked() {
	cutoff := TimeOf(a.now().Add(-a.cfg.Retention))
	for hop, oh := range a.out {
		if a.resolved(oh) && oh.offer.Exp < cutoff {
			delete(a.out, hop)
		}
	}
}

// Retransmit returns the Handoff of an offered hop unchanged: the identical
// octets, never a re-signed hop (HC-37, HC-52).
func (a *Agent) Retransmit(hop HopID) (*Handoff, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	oh, ok := a.out[hop]
	if !ok {
		return nil, fmt.Errorf("%w: no offered hop %s", ErrState, hop)
	}
	return oh.handoff, nil
}

// Backoff returns when to retransmit an offer issued at iat with lifetime
// ttl: the first attempt at half the lifetime, before exp (HC-37), then
// each wait twice the one before, n attempts in all.
func Backoff(iat time.Time, ttl time.Duration, n int) []time.Time {
	out := make([]time.Time, 0, n)
	wait := ttl / 2
	at := iat
	for i := 0; i < n; i++ {
		at = at.Add(wait)
		out = append(out, at)
		wait *= 2
	}
	return out
}

// Hop returns the delegator's view of a hop it offered.
func (a *Agent) Hop(hop HopID) (HopInfo, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	oh, ok := a.out[hop]
	if !ok {
		return HopInfo{}, false
	}
	return a.info(oh), true
}

// Unresolved lists the hops this agent offered that are not resolved
// (HC-41), for an operator, sorted by hop.
func (a *Agent) Unresolved() []HopInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []HopInfo
	for _, oh := range a.out {
		if !a.resolved(oh) {
			out = append(out, a.info(oh))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hop < out[j].Hop })
	return out
}

// ObservedNoEffect records an authoritative observation that the work of
// hop did not take effect, which resolves it (HC-41).
func (a *Agent) ObservedNoEffect(hop HopID) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	oh, ok := a.out[hop]
	if !ok {
		return fmt.Errorf("%w: no offered hop %s", ErrState, hop)
	}
	oh.observed = true
	return nil
}

// Abandon stops tracking an unresolved hop and flags it to the operator
// (HC-42: a delegator that stops asking while a hop is unresolved flags it).
func (a *Agent) Abandon(hop HopID) error {
	a.mu.Lock()
	oh, ok := a.out[hop]
	if ok {
		delete(a.out, hop)
	}
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: no offered hop %s", ErrState, hop)
	}
	if !a.resolved(oh) {
		a.flag(Conflict{Kind: ConflictUnresolved, Iss: a.cfg.ID, Hop: hop, First: oh.digest,
			Detail: "hop abandoned while unresolved"})
	}
	return nil
}

func (a *Agent) info(oh *outHop) HopInfo {
	st := oh.state
	if st == Offered && TimeOf(a.now()) >= oh.offer.Exp {
		st = Expired // local and provisional (HC-27)
	}
	return HopInfo{Hop: oh.offer.Hop, To: oh.offer.Aud, Digest: oh.digest, Work: oh.work, State: st,
		Reason: oh.reason, Canceled: oh.canceled, Resolved: a.resolved(oh), Refs: oh.refs}
}

// resolved is HC-41: a verified completed or failed, a verified rejected
// with a reason other than stale or replay, or an authoritative
// observation that the work did not take effect. Expired and canceled hops
// are unresolved.
func (a *Agent) resolved(oh *outHop) bool {
	switch oh.state {
	case Completed, Failed:
		return true
	case Rejected:
		return oh.reason != ReasonStale && oh.reason != ReasonReplay
	}
	return oh.observed
}

// StatusResult is the outcome of HandleStatus.
type StatusResult struct {
	Status *Status
	// Hop is the hop's state after the status, for the side it concerns.
	State State
	// Changed is true when the status set the hop's state.
	Changed bool
	// Conflict is true when the status contradicts the first verified
	// terminal state; it was flagged and ignored (HC-56).
	Conflict bool
	// Cancels are the "canceled" statuses this agent signed for the offers
	// it issued from a hop that was just canceled (HC-28): send each to its
	// delegate, so the cancel walks down the chain.
	Cancels []Cancel
}

// Cancel is a signed "canceled" for one downstream hop.
type Cancel struct {
	To     AgentID
	Hop    HopID
	Status Signed
}

// HandleStatus verifies a status (HC-55) and applies it.
//
// As delegator, for a hop this agent offered: the status must be signed by
// a key bound to its iss, with status.iss the offer's aud, status.aud this
// agent, and status.offer the offer's digest. The first verified terminal
// state stands; a later conflicting one is flagged and ignored (HC-56); a
// "rejected" with reason stale or replay never sets the state and is never
// a conflict; "accepted" is implied by "completed" and "failed" (HC-26); a
// verified status replaces a local expiry (HC-27); a "completed" or
// "failed" after this agent's own cancel still resolves the hop.
//
// As delegate, for a "canceled" from the delegator of a hop this agent
// received: status.iss must be that offer's iss (HC-55). The hop becomes
// canceled unless it already has a terminal state, and a "canceled" is
// signed for each offer this agent issued whose prev is that offer's
// digest (HC-28).
//
// A status that fails verification is a *Rejection; nothing changes.
func (a *Agent) HandleStatus(ctx context.Context, octets []byte) (*StatusResult, error) {
	s, err := ParseSigned(octets, a.lim)
	if err != nil {
		return nil, &Rejection{Reason: ReasonBadSignature, Detail: err.Error(), Err: err}
	}
	st, err := OpenStatus(s, a.cfg.Trust, a.lim)
	if err != nil {
		return nil, err
	}
	if st.Aud != a.cfg.ID {
		return nil, reject(ReasonWrongAudience, ErrRejected, "status aud %q is not this agent", st.Aud)
	}
	if st.State == Canceled {
		if res, ok, err := a.cancelReceived(ctx, st); ok || err != nil {
			return res, err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	oh, ok := a.out[st.Hop]
	if !ok || !oh.digest.Equal(st.Offer) {
		return nil, reject(ReasonPolicy, ErrRejected, "status names no offer this agent made")
	}
	if st.State == Canceled {
		return nil, reject(ReasonPolicy, ErrRejected, "a \"canceled\" for a hop this agent offered did not come from its delegate")
	}
	if err := statusAnswers(st, oh.offer, oh.digest); err != nil {
		return nil, err
	}
	res := &StatusResult{Status: st}
	switch {
	case st.State == Rejected && (st.Reason == ReasonStale || st.Reason == ReasonReplay):
		// Says only that the delegate does not remember the hop (HC-24).
	case oh.state == Offered:
		oh.state, oh.reason, oh.refs, res.Changed = st.State, st.Reason, st.Refs, true
	case oh.state == Accepted && st.State != Accepted:
		if st.State == Rejected {
			res.Conflict = true // a delegate may not reject a hop it took
		} else {
			oh.state, oh.reason, oh.refs, res.Changed = st.State, st.Reason, st.Refs, true
		}
	case st.State == Accepted:
		// Implied by a terminal state already held; nothing to change.
	case oh.state == st.State && oh.reason == st.Reason:
		// The same answer again, e.g. a resent status.
	default:
		res.Conflict = true
	}
	if res.Conflict {
		a.flag(Conflict{Kind: ConflictStatus, Iss: a.cfg.ID, Hop: st.Hop, First: oh.digest, Second: s.Digest(),
			Detail: fmt.Sprintf("status %q conflicts with the hop's state %q", st.State, oh.state)})
	}
	res.State = oh.state
	return res, nil
}

// cancelReceived handles a "canceled" for a hop this agent received. ok is
// false when the status is not for such a hop.
func (a *Agent) cancelReceived(ctx context.Context, st *Status) (*StatusResult, bool, error) {
	res, ok, err := a.cancelHop(ctx, st)
	if !ok || err != nil {
		return nil, ok, err
	}
	// HC-28: cancel each offer issued from this hop.
	a.mu.Lock()
	var down []*outHop
	for _, oh := range a.out {
		if oh.offer.Prev != nil && oh.offer.Prev.Equal(st.Offer) {
			down = append(down, oh)
		}
	}
	a.mu.Unlock()
	sort.Slice(down, func(i, j int) bool { return down[i].offer.Hop < down[j].offer.Hop })
	for _, oh := range down {
		c, err := a.Cancel(ctx, oh.offer.Hop)
		if err != nil {
			return nil, true, err
		}
		res.Cancels = append(res.Cancels, c)
	}
	return res, true, nil
}

// cancelHop sets a received hop canceled unless it already has a terminal
// state. ok is false when the status names no hop this agent received.
func (a *Agent) cancelHop(ctx context.Context, st *Status) (*StatusResult, bool, error) {
	defer a.lockHop(st.Iss, st.Hop)()
	key := replay.Key{Iss: string(st.Iss), Hop: string(st.Hop)}
	rec, ok, err := a.cfg.Store.Get(ctx, key)
	if err != nil {
		return nil, true, storeErr(err)
	}
	// The record is keyed by (iss, hop): a matching digest proves that
	// status.iss is the offer's iss (HC-55).
	if !ok || !(Digest{Alg: SHA256Alg, Val: rec.Digest}).Equal(st.Offer) {
		return nil, false, nil
	}
	res := &StatusResult{Status: st, State: State(rec.State)}
	switch State(rec.State) {
	case Rejected, Completed, Failed, Canceled:
		// The first terminal state stands.
	default:
		rec.State, res.State, res.Changed = string(Canceled), Canceled, true
		rec.Expires = a.now().Add(a.cfg.Retention)
		if err := a.cfg.Store.Update(ctx, key, rec); err != nil {
			return nil, true, storeErr(err)
		}
	}
	return res, true, nil
}

// Cancel signs a "canceled" for a hop this agent offered (section 4). The
// hop stays unresolved: the delegate may have done the work (HC-41).
func (a *Agent) Cancel(ctx context.Context, hop HopID) (Cancel, error) {
	if err := ctx.Err(); err != nil {
		return Cancel{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	oh, ok := a.out[hop]
	if !ok {
		return Cancel{}, fmt.Errorf("%w: no offered hop %s", ErrState, hop)
	}
	st := &Status{Hop: hop, Offer: oh.digest, Iss: a.cfg.ID, Aud: oh.offer.Aud, Iat: TimeOf(a.now()), State: Canceled}
	signed, err := a.cfg.Signer.SignStatus(st)
	if err != nil {
		return Cancel{}, err
	}
	oh.canceled = true
	return Cancel{To: oh.offer.Aud, Hop: hop, Status: signed}, nil
}
