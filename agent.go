package handoff

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync/atomic"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/state"
)

// Config configures an Agent. ID, Signer and Trust are required; every
// other field has a default, named in its comment. The defaults are the
// draft's recommendations (skew 60 s, lifetime 300 s, chain 16), not its
// strictest values: a zero skew or a zero chain limit is said explicitly,
// with new(0) for the pointer fields.
type Config struct {
	// ID is this agent's AgentId: offers must name it as aud (step 2 of
	// section 5.1), and it signs as iss.
	ID AgentID
	// Signer signs this agent's offers and statuses.
	Signer *Signer
	// Trust binds AgentIDs to keys. Required: a missing trust configuration
	// is an error, never "accept all". Agent.SetTrust replaces it.
	Trust *Trust
	// Store is the delegate's memory of hops it received (HC-33, HC-34).
	// Nil means a new in-memory store, which a restart loses: see
	// MemoryLostAt.
	Store replay.Store
	// Offers is the delegator's record of hops it offered, for Retransmit,
	// Cancel, cancel propagation and HC-42. Nil means a new in-memory
	// store, which a restart loses.
	Offers replay.OfferStore
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Rand is the source of hop identifiers, call tokens and signature
	// randomness. Nil means crypto/rand.
	Rand io.Reader

	// Skew is the clock skew allowed (HC-31). Nil means 60 s, the
	// draft's recommendation.
	Skew *time.Duration
	// MaxLifetime bounds exp - iat of offers received and made (HC-32).
	// Nil means 300 s, the draft's recommendation.
	MaxLifetime *time.Duration
	// Retention is how long a hop is kept after its last terminal status,
	// so that the other side may still ask again (HC-34, HC-65). Nil means
	// 24 hours.
	Retention *time.Duration
	// MemoryLostAt, when set, is the time this agent's hop memory was lost,
	// for example the start of a process whose store is in memory. Offers
	// issued before it are rejected as "replay" until MaxLifetime plus Skew
	// has passed, except hops the store still records (HC-59). A durable
	// store that survived the restart has lost nothing: leave it zero.
	MemoryLostAt time.Time

	// Limits bounds input sizes and the chain length (HC-50, HC-61), and
	// selects the strict profile.
	Limits Limits
	// Chain is the chain policy (step 6 of section 5.1).
	Chain ChainPolicy
	// Refs is the reference policy (step 7) and RefSource its objects.
	Refs      ref.Policy
	RefSource ref.Source
	// RefCheckers are the checkers of the reference kinds beyond the
	// built-in "digest" and "salted-digest" (HC-10, HC-68, HC-69). A kind
	// with no checker is unverifiable.
	RefCheckers ref.Checkers
	// VerifiedCache is how many chain elements the agent remembers as
	// verified, by handoff digest, so that a chain prefix seen before is
	// not verified twice. Zero means 4096 elements; negative turns
	// the cache off.
	VerifiedCache int
	// OnConflict, when set, is called with every conflict the operator
	// should see: equivocation, conflicting statuses, hops flagged
	// unresolved (HC-42, HC-45, HC-54, HC-56). It is never called while the
	// Agent holds a lock, so it may call the Agent.
	OnConflict func(Conflict)
}

// Agent plays both roles of the draft for one AgentID: delegate (Receive,
// Take, Reply) and delegator (Offer, Retransmit, Cancel, HandleStatus). It
// is safe for concurrent use; its state lives in its two stores, so a
// restart with durable stores loses nothing.
type Agent struct {
	cfg                          Config
	lim                          Limits
	skew, maxLifetime, retention time.Duration
	trust                        atomic.Pointer[trustState]

	// hops serialise, within this Agent, the read-check-write of a
	// received hop's state: see hopLocks.
	hops hopLocks
}

// NewAgent validates cfg and returns an Agent.
func NewAgent(cfg Config) (*Agent, error) {
	switch {
	case cfg.ID == "":
		return nil, fmt.Errorf("%w: Config.ID is required", ErrConfig)
	case cfg.Trust == nil:
		return nil, fmt.Errorf("%w: Config.Trust is required", ErrConfig)
	case cfg.Signer == nil:
		return nil, fmt.Errorf("%w: Config.Signer is required", ErrConfig)
	}
	if err := cfg.RefCheckers.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Store == nil {
		cfg.Store = replay.NewMemory(replay.MemoryOptions{Now: cfg.Now})
	}
	if cfg.Offers == nil {
		cfg.Offers = replay.NewMemoryOffers(cfg.Now)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	a := &Agent{cfg: cfg, lim: cfg.Limits.withDefaults(),
		skew:        durationOr(cfg.Skew, defaultSkew),
		maxLifetime: durationOr(cfg.MaxLifetime, defaultMaxLifetime),
		retention:   durationOr(cfg.Retention, defaultRetention)}
	if a.skew < 0 || a.maxLifetime < 0 || a.retention < 0 {
		return nil, fmt.Errorf("%w: negative duration", ErrConfig)
	}
	if a.skew%time.Second != 0 || a.maxLifetime%time.Second != 0 {
		return nil, fmt.Errorf("%w: Skew and MaxLifetime must be whole seconds, as Time is", ErrConfig)
	}
	if cfg.Limits.MaxChain != nil && *cfg.Limits.MaxChain < 0 {
		return nil, fmt.Errorf("%w: negative Limits.MaxChain", ErrConfig)
	}
	if cfg.VerifiedCache == 0 {
		a.cfg.VerifiedCache = defaultVerifiedCache
	}
	a.trust.Store(&trustState{trust: cfg.Trust, cache: newVerifiedCache(a.cfg.VerifiedCache)})
	return a, nil
}

// ID returns the agent's AgentID.
func (a *Agent) ID() AgentID { return a.cfg.ID }

// SetTrust replaces the trust configuration of a running agent, for
// example to rotate keys. The verified-element cache keeps exactly the
// elements whose verifying key the new configuration still binds to their
// iss, so that no element verified by a key it drops counts under it.
// Offers being received while it runs are checked under one configuration
// or the other, never a mix.
func (a *Agent) SetTrust(t *Trust) error {
	if t == nil {
		return fmt.Errorf("%w: nil trust configuration", ErrConfig)
	}
	swapTrust(&a.trust, t, a.cfg.VerifiedCache)
	return nil
}

// ConflictKind classifies what an operator is shown.
type ConflictKind string

const (
	// ConflictEquivocation: two offers with one (iss, hop) and different
	// octets (HC-53, HC-54).
	ConflictEquivocation ConflictKind = "equivocation"
	// ConflictStatus: a verified status that contradicts the first
	// verified terminal status of the hop (HC-56).
	ConflictStatus ConflictKind = "status"
	// ConflictUnresolved: a hop left unresolved, or an outcome that could
	// not be established (HC-42, HC-45).
	ConflictUnresolved ConflictKind = "unresolved"
)

// Conflict is a fact flagged to the operator.
type Conflict struct {
	Kind   ConflictKind
	Iss    AgentID
	Hop    HopID
	First  digest.Digest // the offer or status that stands
	Second digest.Digest // the one that conflicts with it (zero if none)
	Detail string
}

// flag reports c to the operator. Callers hold no lock.
func (a *Agent) flag(c Conflict) {
	if a.cfg.OnConflict != nil {
		a.cfg.OnConflict(c)
	}
}

func (a *Agent) now() time.Time { return a.cfg.Now() }

// token returns a fresh call token for the store's check-and-record, so
// that a retried call recognises its own record.
func (a *Agent) token() ([]byte, error) {
	t := make([]byte, replay.TokenSize)
	if _, err := io.ReadFull(a.cfg.Rand, t); err != nil {
		return nil, fmt.Errorf("handoff: call token: %w", err)
	}
	return t, nil
}

// lockHop locks the state of the received hop (iss, hop) and returns the
// unlock function, or ctx's error when ctx ends before the lock is free.
func (a *Agent) lockHop(ctx context.Context, iss AgentID, hop HopID) (func(), error) {
	return a.hops.lock(ctx, replay.Key{Iss: string(iss), Hop: string(hop)})
}

// ---- The delegate's verbs ----

// received reports whether in was made by Receive of this agent, or of a
// replica with the same AgentID. Only Receive makes a Received, so what it
// holds was checked as it says.
func (a *Agent) received(in *Received) bool {
	return in != nil && in.by != nil && in.by.cfg.ID == a.cfg.ID
}

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
func (a *Agent) Reply(ctx context.Context, in *Received, state state.State, opt ReplyOptions) (Signed, error) {
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
	return a.reply(ctx, in.offer.Iss, in.offer.Hop, target, in.token, known, in.verdict, in.OwesAccepted(), in.equivocation, state, opt)
}

// ReplyHop signs a status for a hop this agent received and remembers, by
// its (iss, hop), without the *Received of the delivery: for example to
// send "completed" after a restart for work taken before it. The hop must
// have been taken (Take, or Reply with "accepted") or canceled by its
// delegator; the same rules as Reply apply.
func (a *Agent) ReplyHop(ctx context.Context, iss AgentID, hop HopID, st state.State, opt ReplyOptions) (Signed, error) {
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
	return a.reply(ctx, iss, hop, digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}, nil, &rec, verdictRetransmit, false, "", st, opt)
}

// reply applies the delegate's table to the hop (iss, hop). token, when
// set, is the call token of the delivery that remembered the hop: the
// write applies only to the record that delivery inserted. known, when
// set, is the hop's record as last read: the state is then decided from
// it and written with one compare-and-set (Store.Swap), which returns the
// record held if another call changed it meanwhile, to decide again.
func (a *Agent) reply(ctx context.Context, iss AgentID, hop HopID, target digest.Digest, token []byte, known *replay.Record, v verdict, owes bool, eq state.Answer, st state.State, opt ReplyOptions) (Signed, error) {
	var conflicts []Conflict
	defer func() { // after the hop lock is released
		for _, c := range conflicts {
			a.flag(c)
		}
	}()
	send := delegateSend{State: st, Reason: opt.Reason, Effect: opt.Effect, Refs: len(opt.Refs), OwesAccepted: owes, Equivocation: eq}
	if (st == state.Completed || st == state.Failed) && opt.Effect == state.EffectUnknown {
		// HC-45: never guess; the hop stays "accepted", flagged.
		conflicts = append(conflicts, Conflict{Kind: ConflictUnresolved, Iss: iss, Hop: hop, First: target,
			Detail: "the outcome of the work could not be established; the hop stays accepted"})
		return Signed{}, effectRule(send)
	}
	unlock, err := a.lockHop(ctx, iss, hop)
	if err != nil {
		return Signed{}, err
	}
	defer unlock()
	key := replay.Key{Iss: string(iss), Hop: string(hop)}
	var (
		rec        replay.Record
		remembered bool
	)
	if known != nil {
		rec, remembered = *known, true
	} else if rec, remembered, err = a.cfg.Store.Get(ctx, key); err != nil {
		return Signed{}, storeErr(err)
	}
	for attempt := 0; ; attempt++ {
		if remembered && !(digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}).Equal(target) {
			return Signed{}, rule("", "the hop holds another offer")
		}
		h := delegateHop{Remembered: remembered, State: state.State(rec.State), Sent: rec.Status != nil, Verdict: v}
		next, records, err := delegateStep(h, send)
		if err != nil {
			return Signed{}, err
		}
		st := &Status{Hop: hop, Offer: target, Iss: a.cfg.ID, Aud: iss, Iat: TimeOf(a.now()),
			State: st, Reason: opt.Reason, Detail: opt.Detail, Refs: opt.Refs}
		signed, err := a.cfg.Signer.SignStatus(st)
		if err != nil {
			return Signed{}, err
		}
		if !records {
			return signed, nil
		}
		w := replay.Record{State: string(next), Status: signed.Octets, Expires: rec.Expires}
		switch {
		case next == state.Accepted:
			w.Expires = time.Time{} // kept until resolved (HC-34)
		case next == state.Rejected && v == verdictRejected:
			// An offer that failed a check after 1-3 keeps its record
			// until exp + skew only (HC-33), as it was remembered:
			// retransmissions are answered with this "rejected" until
			// then, and are stale after. The retention period of HC-34
			// (a SHOULD) is for hops the delegate decided on; giving it
			// to offers refused by a check would let one trusted
			// delegator that floods such offers hold the store's room
			// for the whole period.
		default:
			w.Expires = a.now().Add(a.retention)
		}
		held, swapped, err := a.swap(ctx, key, rec, token, w, attempt)
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

// ---- The delegator's verbs ----

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
	// It must be an offer this agent received and accepted, not a
	// retransmission of one (whose chain was not checked, HC-38). Nil
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
	// them can be bound to the offer: for example a reference to a package
	// whose id is the hop. It may add refs and extension members; the
	// offer is checked against the CDDL after it returns.
	Prepare func(*Offer) error
}

// Outgoing is an offer this agent made.
type Outgoing struct {
	Handoff *Handoff
	Offer   *Offer
	Digest  digest.Digest
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
		case in.Retransmission():
			// A retransmission is not processed again (HC-38): checks 5
			// to 7 did not run on it, so its chain was never checked and
			// may not be passed on. Pass on the Received that was accepted.
			return nil, fmt.Errorf("%w: OfferParams.From is a retransmission, whose chain was not checked (HC-38); pass on the Received of the delivery that was accepted", ErrArgument)
		case !in.Accepted():
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
	signed, err := a.cfg.Signer.SignOffer(o)
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
	return &Outgoing{Handoff: h, Offer: o, Digest: d}, nil
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
	if o, _, err := InspectUnverified(a.recordedOffer(rec), Limits{MaxElementSize: len(rec.Handoff)}); err == nil && o != nil {
		exp = o.Exp // this agent's own offer, read back from its store
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
			next.Expires = a.now().Add(a.retention)
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
		signed, err := a.cfg.Signer.SignStatus(st)
		if err != nil {
			return false, err
		}
		n = Notice{To: AgentID(rec.To), Hop: hop, Status: signed}
		changed := !rec.Canceled
		rec.Canceled = true
		return changed, nil
	})
	return n, err
}

// StatusResult is the outcome of HandleStatus. Like Received, it carries a
// rejection as a value: Err, Reason.
type StatusResult struct {
	// Status is the status once it verified (HC-55), else nil.
	Status *Status
	// State is the hop's state after the status, for the side it concerns.
	State state.State
	// Changed reports that the status set the hop's state.
	Changed bool
	// Conflict reports that the status contradicts the first verified
	// terminal state: it was flagged and ignored (HC-56).
	Conflict bool
	// Notices are the "canceled" statuses this agent signed for the offers
	// it issued from a hop that was just canceled (HC-28): send each to its
	// delegate, so that the cancel walks down the chain.
	Notices []Notice

	rejection *Rejection
}

// Err returns why the status was refused (a *Rejection), or nil.
func (r *StatusResult) Err() error {
	if r.rejection == nil {
		return nil
	}
	return r.rejection
}

// Reason returns the reason code of a refusal, or "".
func (r *StatusResult) Reason() reason.Code {
	if r.rejection == nil {
		return ""
	}
	return r.rejection.Reason
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
		offer := a.recordedOffer(*rec)
		o, _, err := InspectUnverified(offer, Limits{MaxElementSize: len(offer.Octets)})
		if err != nil || o == nil || !(digest.Digest{Alg: digest.SHA256Alg, Val: rec.Digest}).Equal(st.Offer) {
			res.rejection = reject(reason.Policy, ErrRejected, "the status names no offer this agent made")
			return false, nil
		}
		if rj := statusAnswers(st, o, offer.Digest()); rj != nil {
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
		next := replay.Record{State: string(state.Canceled), Status: rec.Status, Expires: a.now().Add(a.retention)}
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

func storeErrOrNil(err error) error {
	if err == nil {
		return nil
	}
	return storeErr(err)
}
