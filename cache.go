package handoff

import (
	"bytes"
	"crypto/sha256"
	"sync"
	"sync/atomic"

	"github.com/agentproto/handoff/digest"
)

// defaultVerifiedCache is the number of chain elements an Agent remembers
// as verified when Config.VerifiedCache is zero.
const defaultVerifiedCache = 4096

// verifiedCache remembers chain elements whose signature verified, by
// handoff digest, with their decoded offer, so that a chain prefix seen
// before (fan-out, long chains passing through one agent) costs neither a
// signature check nor a decode the second time. The digest covers every
// octet the signature covered, so an element that verified once under a
// trust configuration verifies again under it; replacing the trust
// configuration (Agent.SetTrust) starts a new cache. The cached offers are
// never handed out: Link.Offer returns copies.
//
// The cache holds at most max entries. A cache of cacheShardMin entries or
// more is split into cacheShards shards by the first octet of the digest,
// each with its own lock and an equal share of the bound, so that receives
// on many cores do not queue on one lock; a shard full of its share evicts
// its own oldest entry, even while another shard has room. A smaller cache
// is one shard, oldest first overall. A held entry costs about 400 octets
// (BenchmarkVerifiedCache/memory), so the default bound holds about 1.6 MB.
// A COSE element received in JSON takes a second entry, keyed by its
// base64url text (cached.text), which shares the first's offer and holds
// the element's octets: both count against the bound.
type verifiedCache struct {
	shards []cacheShard
}

const (
	cacheShards   = 16
	cacheShardMin = 256
)

// cached is an element's decoded offer and the key that verified it.
//
// An entry with text set is keyed by the SHA-256 of a COSE element's
// base64url text as a JSON Handoff object carries it (HC-19), not by its
// handoff digest: it holds the element's octets and their digest too, so
// that a receive finds the element without decoding its text. Canonical
// base64url without padding has one text for given octets and one octets
// for a text (decodeB64uOctets), so the text names the octets as surely as
// they name themselves. A lookup by handoff digest never returns such an
// entry, nor a lookup by text an entry without text.
type cached struct {
	offer  *Offer
	key    keyRef
	text   bool
	octets []byte            // when text: the element's octets, never handed out
	digest [sha256.Size]byte // when text: the element's handoff digest
}

type cacheShard struct {
	mu    sync.RWMutex
	max   int
	set   map[[sha256.Size]byte]cached
	order [][sha256.Size]byte // ring of the keys held, oldest at next once full
	next  int
	_     [64]byte // keep the shards' locks on separate cache lines
}

func newVerifiedCache(n int) *verifiedCache {
	if n <= 0 {
		return nil
	}
	s := 1
	if n >= cacheShardMin {
		s = cacheShards
	}
	c := &verifiedCache{shards: make([]cacheShard, s)}
	for i := range c.shards {
		m := n / s
		if i < n%s {
			m++
		}
		c.shards[i] = cacheShard{max: m, set: make(map[[sha256.Size]byte]cached, min(m, 1024))}
	}
	return c
}

// cacheKey is the cache key of an element: its handoff digest.
func cacheKey(d digest.Digest) (k [sha256.Size]byte) {
	copy(k[:], d.Val)
	return k
}

func (c *verifiedCache) shard(k *[sha256.Size]byte) *cacheShard {
	return &c.shards[int(k[0])%len(c.shards)]
}

func (c *verifiedCache) get(d digest.Digest) *Offer {
	e, ok := c.lookup(cacheKey(d))
	if !ok || e.text {
		return nil
	}
	return e.offer
}

// getText returns the entry of the COSE element whose base64url text has
// the SHA-256 k, if the cache holds it.
func (c *verifiedCache) getText(k [sha256.Size]byte) (cached, bool) {
	e, ok := c.lookup(k)
	return e, ok && e.text
}

func (c *verifiedCache) lookup(k [sha256.Size]byte) (cached, bool) {
	if c == nil {
		return cached{}, false
	}
	sh := c.shard(&k)
	sh.mu.RLock()
	e, ok := sh.set[k]
	sh.mu.RUnlock()
	return e, ok
}

// addText adds, beside the entry of an element held by its handoff digest
// d, an entry keyed by the SHA-256 k of its base64url text, which shares
// that entry's offer and key and holds a copy of octets, the element's
// octets. It does nothing when the cache does not hold d (evicted since)
// or holds k already.
func (c *verifiedCache) addText(k [sha256.Size]byte, d digest.Digest, octets []byte) {
	e, ok := c.lookup(cacheKey(d))
	if !ok || e.text {
		return
	}
	if _, held := c.lookup(k); held {
		return
	}
	c.put(k, cached{offer: e.offer, key: e.key, text: true, octets: bytes.Clone(octets), digest: cacheKey(d)})
}

func (c *verifiedCache) add(d digest.Digest, o *Offer, key keyRef) {
	if c == nil {
		return
	}
	k := cacheKey(d)
	sh := c.shard(&k)
	sh.mu.RLock()
	_, held := sh.set[k]
	sh.mu.RUnlock()
	if held {
		return
	}
	c.put(k, cached{offer: o.clone(), key: key})
}

// len returns the number of elements held: the entries by handoff
// digest, not those by base64url text, which name the same elements again.
func (c *verifiedCache) len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		for _, e := range sh.set {
			if !e.text {
				n++
			}
		}
		sh.mu.RUnlock()
	}
	return n
}

// trustState is a trust configuration with the cache of elements verified
// under it. An Agent swaps it whole, so that no element verified under an
// old configuration counts under a new one.
type trustState struct {
	trust *Trust
	cache *verifiedCache
}

// swapTrust installs t in p, with a cache that keeps the entries of the
// previous one that t would verify again: each entry records the key that
// verified it, and is kept exactly when t still binds that key, with its
// algorithm, to the entry's iss. No entry verified by a key that t no
// longer binds survives the swap, and an entry verified by a key that
// stays keeps its place, whatever happened to the agent's other keys.
// Receives under the old state that finish during the swap add to the old
// cache only.
func swapTrust(p *atomic.Pointer[trustState], t *Trust, n int) {
	for {
		old := p.Load()
		next := &trustState{trust: t, cache: newVerifiedCache(n)}
		if old != nil {
			old.cache.carry(t, next.cache)
		}
		if p.CompareAndSwap(old, next) {
			return
		}
	}
}

// carry copies into dst, oldest first, the entries that next verifies as
// prev did: those whose verifying key next still binds to their iss, with
// the same algorithm (see swapTrust).
func (c *verifiedCache) carry(next *Trust, dst *verifiedCache) {
	if c == nil || dst == nil || next == nil {
		return
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		for j := range len(sh.order) {
			k := sh.order[(sh.next+j)%len(sh.order)]
			if e, ok := sh.set[k]; ok && next.binds(e.offer.Iss, e.key) {
				dst.put(k, e)
			}
		}
		sh.mu.RUnlock()
	}
}

// put adds an entry already cloned, as carry moves it from one cache to
// the next.
func (c *verifiedCache) put(k [sha256.Size]byte, e cached) {
	sh := c.shard(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.set[k]; ok {
		return
	}
	if len(sh.order) < sh.max {
		sh.order = append(sh.order, k)
	} else {
		delete(sh.set, sh.order[sh.next])
		sh.order[sh.next] = k
		sh.next = (sh.next + 1) % sh.max
	}
	sh.set[k] = e
}
