package handoff

import (
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"time"

	"github.com/agentproto/handoff/replay"
)

// Config configures an Agent. The zero value of every optional field is the
// strict choice; ID, Signer and Trust are required.
type Config struct {
	// ID is this agent's AgentId: offers must name it as aud (step 2 of
	// section 5.1), and it signs as iss.
	ID AgentID
	// Signer signs this agent's offers and statuses.
	Signer *Signer
	// Trust binds AgentIDs to keys. Required: a missing trust configuration
	// is an error, never "accept all".
	Trust *Trust
	// Store is the delegate's memory of hops (HC-33, HC-34). Nil means a new
	// in-memory store, which a restart loses: see MemoryLostAt.
	Store replay.Store
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Rand is the source of hop identifiers and signature randomness. Nil
	// means crypto/rand.
	Rand io.Reader

	// Skew is the clock skew allowed (HC-31). Zero means DefaultSkew.
	Skew time.Duration
	// MaxLifetime bounds exp - iat of offers received and made (HC-32).
	// Zero means DefaultMaxLifetime.
	MaxLifetime time.Duration
	// Retention is how long a hop the delegate answered is kept after its
	// last status, so that a delegator may still ask again (HC-34, HC-65).
	// Zero means 24 hours.
	Retention time.Duration
	// MemoryLostAt, when set, is the time this agent's hop memory was lost,
	// for example the start of a process whose store is in memory. Offers
	// issued before it are rejected as "replay" until MaxLifetime plus Skew
	// has passed, except hops the store still records (HC-59). A durable
	// store that survived the restart has lost nothing: leave it zero.
	MemoryLostAt time.Time

	// Limits bounds input sizes and the chain length (HC-50, HC-61).
	Limits Limits
	// Chain is the chain policy (step 6 of section 5.1).
	Chain ChainPolicy
	// Refs is the reference policy (step 7) and RefSource its objects.
	Refs      RefPolicy
	RefSource RefSource
	// RefCheckers are the checkers of the reference kinds beyond the
	// built-in "digest" and "salted-digest" (HC-10, HC-68, HC-69). A kind
	// with no checker is unverifiable.
	RefCheckers RefCheckers
	// VerifiedCache is how many chain elements the agent remembers as
	// verified, by handoff digest, so that a chain prefix seen before is
	// not verified twice. Zero means DefaultVerifiedCache; negative turns
	// the cache off.
	VerifiedCache int
	// OnConflict, when set, is called with every conflict the operator
	// should see: equivocation, conflicting statuses, hops flagged
	// unresolved (HC-42, HC-45, HC-54, HC-56). It must not block.
	OnConflict func(Conflict)
}

// Agent plays both roles of the draft for one AgentID: delegate (Receive,
// Reply) and delegator (Offer, HandleStatus). It is safe for concurrent use.
type Agent struct {
	cfg      Config
	lim      Limits
	verified *verifiedCache

	mu  sync.Mutex
	out map[HopID]*outHop // delegator side: hops this agent offered

	// hopLocks serialise the read-check-write of a received hop's state
	// (Reply, Take, a received cancel), so that two calls on one Agent
	// cannot both pass the lifecycle rules for one hop (HC-23).
	hopLocks [64]sync.Mutex
}

// lockHop locks the state of the received hop (iss, hop) and returns the
// unlock function.
func (a *Agent) lockHop(iss AgentID, hop HopID) func() {
	h := fnv.New32a()
	h.Write([]byte(iss))
	h.Write([]byte{0})
	h.Write([]byte(hop))
	m := &a.hopLocks[h.Sum32()%uint32(len(a.hopLocks))]
	m.Lock()
	return m.Unlock
}

// NewAgent validates cfg and returns an Agent.
func NewAgent(cfg Config) (*Agent, error) {
	if cfg.ID == "" {
		return nil, errors.New("handoff: Config.ID is required")
	}
	if cfg.Trust == nil {
		return nil, errors.New("handoff: Config.Trust is required")
	}
	if cfg.Signer == nil {
		return nil, errors.New("handoff: Config.Signer is required")
	}
	if err := cfg.RefCheckers.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store == nil {
		cfg.Store = replay.NewMemory(replay.MemoryOptions{Now: cfg.Now})
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Skew == 0 {
		cfg.Skew = DefaultSkew
	}
	if cfg.MaxLifetime == 0 {
		cfg.MaxLifetime = DefaultMaxLifetime
	}
	if cfg.Retention == 0 {
		cfg.Retention = 24 * time.Hour
	}
	if cfg.Skew < 0 || cfg.MaxLifetime < 0 || cfg.Retention < 0 {
		return nil, errors.New("handoff: negative duration in Config")
	}
	if cfg.Skew%time.Second != 0 || cfg.MaxLifetime%time.Second != 0 {
		return nil, fmt.Errorf("handoff: Skew and MaxLifetime must be whole seconds")
	}
	if cfg.VerifiedCache == 0 {
		cfg.VerifiedCache = DefaultVerifiedCache
	}
	return &Agent{cfg: cfg, lim: cfg.Limits.withDefaults(), out: map[HopID]*outHop{},
		verified: newVerifiedCache(cfg.VerifiedCache)}, nil
}

// ID returns the agent's AgentID.
func (a *Agent) ID() AgentID { return a.cfg.ID }

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
	First  Digest // the offer or status that stands
	Second Digest // the one that conflicts with it (zero if none)
	Detail string
}

func (a *Agent) flag(c Conflict) {
	if a.cfg.OnConflict != nil {
		a.cfg.OnConflict(c)
	}
}

func (a *Agent) now() time.Time { return a.cfg.Now() }

func (a *Agent) skewT() Time { return Time(a.cfg.Skew / time.Second) }
