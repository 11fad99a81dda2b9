package handoff

import (
	"crypto/sha256"
	"sync"
)

// DefaultVerifiedCache is the number of chain elements an Agent remembers
// as verified when Config.VerifiedCache is zero.
const DefaultVerifiedCache = 4096

// verifiedCache remembers chain elements whose signature verified, by
// handoff digest, with their decoded offer, so that a chain prefix seen
// before (fan-out, long chains passing through one agent) costs neither a
// signature check nor a decode the second time. The digest covers every
// octet the signature covered, so an element that verified once under a
// trust configuration verifies again under it; replacing the trust
// configuration (Agent.SetTrust) starts a new cache. The cached offers are
// never handed out: Link.Offer returns copies. The cache is bounded: the
// oldest entry goes first.
type verifiedCache struct {
	mu    sync.Mutex
	max   int
	set   map[[sha256.Size]byte]*Offer
	order [][sha256.Size]byte
	next  int
}

func newVerifiedCache(n int) *verifiedCache {
	if n <= 0 {
		return nil
	}
	return &verifiedCache{max: n, set: make(map[[sha256.Size]byte]*Offer, min(n, 1024))}
}

// cacheKey is the cache key of an element: its handoff digest.
func cacheKey(d Digest) (k [sha256.Size]byte) {
	copy(k[:], d.Val)
	return k
}

func (c *verifiedCache) get(d Digest) *Offer {
	if c == nil {
		return nil
	}
	k := cacheKey(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set[k]
}

func (c *verifiedCache) add(d Digest, o *Offer) {
	if c == nil {
		return
	}
	k := cacheKey(d)
	o = o.clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.set[k]; ok {
		return
	}
	if len(c.order) < c.max {
		c.order = append(c.order, k)
	} else {
		delete(c.set, c.order[c.next])
		c.order[c.next] = k
		c.next = (c.next + 1) % c.max
	}
	c.set[k] = o
}

// trustState is a trust configuration with the cache of elements verified
// under it. An Agent swaps it whole, so that no element verified under an
// old configuration counts under a new one.
type trustState struct {
	trust *Trust
	cache *verifiedCache
}
