package handoff

import (
	"crypto/sha256"
	"sync"
)

// DefaultVerifiedCache is the number of chain elements an Agent remembers
// as verified when Config.VerifiedCache is zero.
const DefaultVerifiedCache = 4096

// verifiedCache remembers the handoff digests of chain elements whose
// signature verified, so that a chain prefix seen before (fan-out, long
// chains passing through one agent) costs no signature check the second
// time. An Agent's trust configuration never changes, so an element that
// verified once verifies again; its octets, and so its digest, are all the
// signature covered. The cache is bounded: the oldest entry goes first.
type verifiedCache struct {
	mu    sync.Mutex
	max   int
	set   map[[sha256.Size]byte]struct{}
	order [][sha256.Size]byte
	next  int
}

func newVerifiedCache(n int) *verifiedCache {
	if n <= 0 {
		return nil
	}
	return &verifiedCache{max: n, set: make(map[[sha256.Size]byte]struct{}, n)}
}

// cacheKey is the cache key of an element: its handoff digest, computed once by
// the caller.
func cacheKey(d Digest) (k [sha256.Size]byte) {
	copy(k[:], d.Val)
	return k
}

func (c *verifiedCache) has(d Digest) bool {
	if c == nil {
		return false
	}
	k := cacheKey(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.set[k]
	return ok
}

func (c *verifiedCache) add(d Digest) {
	if c == nil {
		return
	}
	k := cacheKey(d)
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
	c.set[k] = struct{}{}
}
