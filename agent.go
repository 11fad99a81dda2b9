package handoff

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
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
	// is an error, never "accept all". Agent.SetTrust replaces it. It must
	// bind Signer's key, with its alg, to ID, as the peers' trust does:
	// NewAgent and SetTrust refuse one that does not, so that a Signer
	// that is another agent's key, or a Trust out of step with it, fails
	// here rather than at every peer as "untrusted-key".
	Trust *Trust
	// TrustLacksSigner says that Trust is meant not to bind Signer's key to
	// ID: for an agent that only receives (a verifier, a conformance
	// receiver), or a trust configuration that lists the peers only.
	// NewAgent and SetTrust then skip that check.
	TrustLacksSigner bool
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
	// the cache off. A COSE element received in a JSON Handoff object
	// takes two of these places: the second, by its base64url text, lets
	// it be found again without decoding that text.
	VerifiedCache int
	// Logger, when set, hears of each decision: an offer received
	// (accepted, refused, a retransmission, an equivocation), a status
	// sent or handled, an offer made, a hop taken or canceled, each with
	// its reason, check, iss, hop and digest. Nil is silent. An offer
	// refused at check 1 is named by its digest and why alone: its iss and
	// hop are claims no signature backs. The logger is never called while
	// the Agent holds a lock.
	Logger *slog.Logger
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
	signer                       atomic.Pointer[Signer]
	// rekey serialises SetTrust and SetSigner, so that the trust in effect
	// always binds the signer in effect (the readers load each atomically).
	rekey sync.Mutex

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
	if err := cfg.Trust.bindsSigner(cfg.ID, cfg.Signer, cfg.TrustLacksSigner); err != nil {
		return nil, err
	}
	if err := cfg.RefCheckers.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Store == nil {
		cfg.Store = replay.NewMemory(replay.MemoryOptions{Now: cfg.Now})
	}
	if cfg.Offers == nil {
		cfg.Offers = replay.NewMemoryOffers(replay.MemoryOffersOptions{Now: cfg.Now})
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
	a.signer.Store(cfg.Signer)
	return a, nil
}

// ID returns the agent's AgentID.
func (a *Agent) ID() AgentID { return a.cfg.ID }

// SetTrust replaces the trust configuration of a running agent, for
// example to rotate keys. The verified-element cache keeps exactly the
// elements whose verifying key the new configuration still binds to their
// iss, so that no element verified by a key it drops counts under it.
// Offers being received while it runs are checked under one configuration
// or the other, never a mix. Like NewAgent, it refuses a configuration
// that does not bind the agent's signing key in effect to its ID, unless
// Config.TrustLacksSigner.
func (a *Agent) SetTrust(t *Trust) error {
	if t == nil {
		return fmt.Errorf("%w: nil trust configuration", ErrConfig)
	}
	a.rekey.Lock()
	defer a.rekey.Unlock()
	if err := t.bindsSigner(a.cfg.ID, a.signer.Load(), a.cfg.TrustLacksSigner); err != nil {
		return err
	}
	swapTrust(&a.trust, t, a.cfg.VerifiedCache)
	return nil
}

// SetSigner replaces the key the agent signs its offers and statuses with,
// so that a running agent rotates its own key. Like NewAgent, it refuses a
// signer whose key the trust configuration in effect does not bind to the
// agent's ID (unless Config.TrustLacksSigner): peers could not verify what
// it signs. A rotation without a gap, with peers that fetch the agent's
// keys (package keyset):
//
//  1. publish the new key beside the old one, and SetTrust with both;
//  2. once peers have fetched it, SetSigner with the new key;
//  3. once every hop signed with the old key has ended (its exp plus the
//     skew), publish and SetTrust without the old key.
//
// Whatever was signed before SetSigner keeps its octets and verifies as
// long as the peers' trust still binds the old key (HC-52: a retransmission
// sends the same octets, never a new signature). Signing already under way
// finishes with the signer it started with.
func (a *Agent) SetSigner(s *Signer) error {
	if s == nil {
		return fmt.Errorf("%w: nil signer", ErrConfig)
	}
	a.rekey.Lock()
	defer a.rekey.Unlock()
	if err := a.trust.Load().trust.bindsSigner(a.cfg.ID, s, a.cfg.TrustLacksSigner); err != nil {
		return err
	}
	a.signer.Store(s)
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

// retained is the expiry of a record kept for the retention period from
// now (HC-34, HC-65): now plus the period, or the zero time, kept until
// updated, when that is past 2^62 seconds (keepUntil).
func (a *Agent) retained() time.Time {
	now := a.now()
	if TimeOf(now).plus(seconds(a.retention)+1) > maxUnix {
		return time.Time{}
	}
	return now.Add(a.retention)
}

// decided logs a decision at level with the attributes attrs gives, which
// are built only when the logger wants the record. Callers hold no lock.
func (a *Agent) decided(ctx context.Context, level slog.Level, msg string, attrs func() []slog.Attr) {
	if a.cfg.Logger.Enabled(ctx, level) {
		a.cfg.Logger.LogAttrs(ctx, level, msg, attrs()...)
	}
}

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

// ---- The delegator's verbs ----
