package handoff

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
)

// Section 5.3 of the draft: checking a chain. The work is split in two:
// verifyElements is check 1 (each element's signed form and signature, the
// costly part, cached by handoff digest), and checkStructure is checks 2 to
// 7, a pure function of the decoded elements.

// ChainState says how much of an offer's history a receiver could verify.
type ChainState string

const (
	// ChainAbsent: the offer names a prev but no chain was carried.
	ChainAbsent ChainState = "absent"
	// ChainPartial: the chain verified, but its first element has a prev:
	// it does not reach the start (HC-48).
	ChainPartial ChainState = "partial"
	// ChainFull: the chain verified back to an offer without prev. An offer
	// without prev starts its own chain, so its empty chain is full.
	ChainFull ChainState = "full"
	// ChainUnverifiable: some element's iss has no trusted key; the chain is
	// unverifiable from that element back (HC-46).
	ChainUnverifiable ChainState = "unverifiable"
)

// ChainPolicy is a receiver's policy for chains (section 5.3, step 6 of
// section 5.1). The draft leaves the policy for an absent, partial or
// unverifiable chain to the receiver; the zero value checks every chain
// carried and accepts each of those states, reporting it in
// Received.Chain. Set RequireFull to refuse them.
type ChainPolicy struct {
	// RequireFull rejects, with reason "policy", an offer whose chain is
	// absent, partial or unverifiable.
	RequireFull bool
	// TrustedOrigins, when not empty, requires a full chain whose first
	// element (the offer itself when it has no prev) is signed by one of
	// these agents (HC-58). It implies RequireFull.
	TrustedOrigins []AgentID
	// AllowReentry names agents that may appear more than once without the
	// chain counting as a cycle: a known re-entry, such as a callback to
	// the original requester (HC-49). Naming the receiver itself admits it
	// as iss or aud of earlier elements.
	AllowReentry []AgentID
	// StructureFirst is an opt-in profile against CPU exhaustion: it
	// checks the chain's structure (checks 2 to 6 of section 5.3: links,
	// continuity, timing, cycles) on the decoded elements before any
	// element's signature (check 1), so that a chain refused for its
	// structure costs no signature work beyond the offer's own (step 1 of
	// section 5.1, which comes first in every profile). It departs from the
	// draft's order in one case only: an element whose signature fails in
	// a chain whose structure is broken too is reported as the structure's
	// failure (broken-chain or cycle), where the draft's order reports
	// bad-signature. Every chain refused in one order is refused in the
	// other, and a chain that passes is verified in full either way. Off
	// by default, which keeps the draft's order (HC-46, HC-30).
	StructureFirst bool
	// Workers, when above 1, verifies the signatures of a chain's elements
	// (check 1) on up to that many goroutines, for the latency of one
	// receive. The outcome and its reason are those of the sequential
	// order. Zero or 1 verifies them one after the other on the calling
	// goroutine, which uses the cores as well when many offers are
	// received at once.
	Workers int
}

// Link is one element of a checked chain, oldest first.
type Link struct {
	Signed Signed
	Digest digest.Digest
	// Verified is true when the element's signature verified with a key
	// the trust configuration binds to its iss.
	Verified bool

	offer *Offer
}

// Offer returns the element's offer when its signature verified, and nil
// otherwise. The offer is a copy: changing it changes nothing else.
func (l Link) Offer() *Offer {
	if !l.Verified {
		return nil
	}
	return l.offer.clone()
}

// Unverified returns the element's decoded offer whether or not its
// signature verified. It is for display and diagnosis only: an element of
// an unverifiable prefix says what anyone could have written.
func (l Link) Unverified() *Offer { return l.offer.clone() }

// element is one chain element after check 1.
type element struct {
	offer     *Offer
	verified  bool
	untrusted bool // no key of its iss: the chain is unverifiable from here back
}

// elementWork is the signature work of step 6 on one chain: its elements,
// their handoff digests, the trust they are verified under, the limits,
// and, when not nil, each element's offer as decoded before.
type elementWork struct {
	chain   []Signed
	digests []digest.Digest
	ts      *trustState
	lim     Limits
	pre     []*Offer
	hits    []*Offer
	// texts, when not nil, holds for each COSE element carried as
	// base64url text the SHA-256 of that text, so that the element, once
	// verified, is found by it next time (verifiedCache.addText).
	texts []textKey
}

// verifyElements is check 1 of section 5.3 on every element: its signed
// form, v and type, and its signature with a key bound to its iss. An
// element whose iss has no trusted key is decoded without verification and
// makes the chain unverifiable from that point back (HC-46); every element
// whose iss is trusted is verified wherever it sits, so that a forged
// element cannot hide behind an untrusted one. Elements in cache verified
// before under the same trust and are not verified again.
//
// The elements are taken newest first and the first failure in that order
// is the one reported: the failing element with the highest index. With
// workers > 1 the elements not in cache are verified on up to that many
// goroutines, still taken newest first; the failure reported is the same,
// because every element above the highest failing one is checked before
// the result is read, and only elements below it, which the sequential
// order never reaches, may be skipped.
//
// pre, when not nil, holds each element's offer as decoded before (by
// decodeElements, for ChainPolicy.StructureFirst); a nil entry is an
// element found in cache. The signatures are then verified over the same
// octets without decoding the payloads again.
//
// w.hits holds what the cache held for each element when checkChain
// looked (lookupChain), nil for an element it did not hold.
func verifyElements(w elementWork, workers int) ([]element, *chainError) {
	chain, hits := w.chain, w.hits
	out := make([]element, len(chain))
	var todo []int // indices not in cache, newest first
	for i := len(chain) - 1; i >= 0; i-- {
		if o := hits[i]; o != nil {
			out[i] = element{offer: o, verified: true}
			continue
		}
		if workers <= 1 {
			// Sequential: verify now, in order, and stop at the first
			// failure.
			if cerr := w.verify(i, out); cerr != nil {
				return nil, cerr
			}
			continue
		}
		todo = append(todo, i)
	}
	switch len(todo) {
	case 0:
		return out, nil
	case 1:
		if cerr := w.verify(todo[0], out); cerr != nil {
			return nil, cerr
		}
		return out, nil
	}
	errs := make([]*chainError, len(chain))
	var next atomic.Int64
	var failAt atomic.Int64 // the highest failing index found, or -1
	failAt.Store(-1)
	work := func() {
		for {
			p := int(next.Add(1) - 1)
			if p >= len(todo) {
				return
			}
			i := todo[p]
			if int64(i) < failAt.Load() {
				return // every index still to take is lower
			}
			if cerr := w.verify(i, out); cerr != nil {
				errs[i] = cerr
				for f := failAt.Load(); int64(i) > f && !failAt.CompareAndSwap(f, int64(i)); f = failAt.Load() {
				}
			}
		}
	}
	var wg sync.WaitGroup
	for range min(workers, len(todo)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	if f := failAt.Load(); f >= 0 {
		return nil, errs[f]
	}
	return out, nil
}

// verify is check 1 on element i, which is not in cache. On success it
// sets out[i], and caches the element when its signature verified.
func (w elementWork) verify(i int, out []element) *chainError {
	chain, digests, ts, lim, pre := w.chain, w.digests, w.ts, w.lim, w.pre
	var o *Offer
	var key keyRef
	var err error
	if pre != nil && pre[i] != nil {
		o = pre[i]
		key, err = openDecoded(chain[i], ts.trust, lim, pre[i])
	} else {
		o, key, err = openOffer(chain[i], ts.trust, lim)
	}
	if err == nil {
		out[i] = element{offer: o, verified: true}
		ts.cache.add(digests[i], o, key)
		if w.texts != nil && w.texts[i].ok {
			ts.cache.addText(w.texts[i].sum, digests[i], chain[i].Octets)
		}
		return nil
	}
	if ReasonOf(err) != reason.UntrustedKey {
		r := asRejection(err)
		return &chainError{Index: i, Reason: r.Reason, Detail: r.Detail, err: r.Err}
	}
	u, err := inspectOffer(chain[i], lim)
	if err != nil {
		// Unreachable in practice: the lookup decoded the payload as an
		// offer before it found no key.
		return chainErr(i, reason.BadSignature, "not a well-formed offer: %s", bare(err))
	}
	out[i] = element{offer: u, untrusted: true}
	return nil
}

// decodeElements decodes each element's offer without verifying it, for
// ChainPolicy.StructureFirst: elements in cache (hits) are taken from it
// (their entry in the result is nil, verifyElements takes them again),
// the others are decoded. An element that is not a well-formed signed
// offer fails check 1 (bad-signature), the failing element with the
// highest index reported, as verifyElements reports.
func decodeElements(chain []Signed, hits []*Offer, lim Limits) ([]element, []*Offer, *chainError) {
	elems := make([]element, len(chain))
	pre := make([]*Offer, len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		if o := hits[i]; o != nil {
			elems[i] = element{offer: o, verified: true}
			continue
		}
		o, err := inspectOffer(chain[i], lim)
		if err != nil {
			r := asRejection(err)
			return nil, nil, &chainError{Index: i, Reason: reason.BadSignature, Detail: "not a well-formed signed offer: " + strings.TrimPrefix(r.Detail, pkgPrefix), err: errClass(err)}
		}
		elems[i], pre[i] = element{offer: o}, o
	}
	return elems, pre, nil
}

// checkStructure is checks 2 to 6 of section 5.3 on the decoded elements
// C[0..n-1] with C[n] = o, the current offer: linkage (prev names the
// digest of the element before), continuity (each iss is the aud before
// it), timing (HC-47), and cycles (HC-49). It returns the chain's state.
// It is pure: no signature, no clock, no I/O.
func checkStructure(elems []element, digests []digest.Digest, o *Offer, self AgentID, pol ChainPolicy, skew Time) (ChainState, *chainError) {
	n := len(elems)
	at := func(i int) *Offer {
		if i == n {
			return o
		}
		return elems[i].offer
	}
	for i := 1; i <= n; i++ {
		prev, cur := at(i-1), at(i)
		// Check 2. A link names public octets: compared in variable time,
		// as Digest.Equal would in constant time.
		if d := digests[i-1]; cur.Prev == nil || cur.Prev.Alg != d.Alg || !bytes.Equal(cur.Prev.Val, d.Val) {
			if cur.Prev != nil && !cur.Prev.Supported() { // HC-08: fails for prev
				return "", &chainError{Index: i, Reason: reason.BrokenChain, Detail: fmt.Sprintf("prev uses the unsupported digest alg %q", cur.Prev.Alg), err: digest.ErrUnsupported}
			}
			return "", chainErr(i, reason.BrokenChain, "prev does not name the digest of element %d", i-1)
		}
		if prev.Aud != cur.Iss { // check 3
			return "", chainErr(i, reason.BrokenChain, "iss %q is not the aud %q of element %d", cur.Iss, prev.Aud, i-1)
		}
		if prev.Iat > cur.Iat || cur.Iat > prev.Exp.plus(skew) { // check 4, HC-47
			return "", chainErr(i, reason.BrokenChain, "issued at %d, outside [%d, %d + skew] of element %d", cur.Iat, prev.Iat, prev.Exp, i-1)
		}
	}
	// Check 6: cycles (HC-49). last finds the latest earlier element with
	// the same iss: by a look back over a short chain, which costs less
	// than a map, and by a map over a long one, which keeps it linear.
	allowed := func(id AgentID) bool { return slices.Contains(pol.AllowReentry, id) }
	var seen map[AgentID]int
	if n+1 > shortChain {
		seen = make(map[AgentID]int, n+1)
	}
	last := func(i int, iss AgentID) (int, bool) {
		if seen != nil {
			j, ok := seen[iss]
			seen[iss] = i
			return j, ok
		}
		for j := i - 1; j >= 0; j-- {
			if at(j).Iss == iss {
				return j, true
			}
		}
		return 0, false
	}
	for i := 0; i <= n; i++ {
		iss := at(i).Iss
		if j, dup := last(i, iss); dup && !allowed(iss) {
			return "", chainErr(i, reason.Cycle, "%q is iss of elements %d and %d", iss, j, i)
		}
		if i < n && (at(i).Iss == self || at(i).Aud == self) && !allowed(self) {
			return "", chainErr(i, reason.Cycle, "the receiver %q already appears in element %d", self, i)
		}
	}
	return chainState(elems), nil
}

// shortChain is the most elements, the offer included, whose issuers
// checkStructure compares with one another rather than through a map.
const shortChain = 32

// chainState is the state of a chain whose structure passed: unverifiable
// when some element's iss has no trusted key (HC-46), partial when its
// first element has a prev (check 5, HC-48), full otherwise.
func chainState(elems []element) ChainState {
	for _, e := range elems {
		if e.untrusted {
			return ChainUnverifiable
		}
	}
	if len(elems) > 0 && elems[0].offer.Prev != nil {
		return ChainPartial
	}
	return ChainFull
}

// chainCheck is what step 6 needs of the receiver: its AgentID, its trust
// and verified-element cache, its chain policy, limits and clock skew.
type chainCheck struct {
	self AgentID
	ts   *trustState
	pol  ChainPolicy
	lim  Limits
	skew time.Duration
}

// checkChain is step 6 of section 5.1 for an offer that passed steps 1 to
// 5: the chain member's form, its length (check 7, HC-50, before any
// signature work), check 1 on each element, then checks 2 to 6.
func checkChain(h *Handoff, o *Offer, c chainCheck) (ChainState, []Link, *chainError) {
	self, ts, pol, lim, skew := c.self, c.ts, c.pol, c.lim, c.skew
	n := len(h.Chain)
	if h.chainErr != nil && h.chainErr.Index < 0 {
		return "", nil, h.chainErr
	}
	if held := max(n, h.chainLen); held > lim.maxChain() { // HC-50
		// A chain past the bound was read only up to it (readBound): its
		// other elements were counted, never built.
		return "", nil, chainErr(-1, reason.TooDeep, "chain of %d elements exceeds the limit of %d", held, lim.maxChain())
	}
	if h.chainErr != nil {
		return "", nil, h.chainErr
	}
	if n == 0 {
		if o.Prev != nil {
			return ChainAbsent, nil, nil
		}
		return ChainFull, nil, nil
	}
	ls := lookupChain(h, ts.cache, lim)
	if h.chainErr != nil {
		return "", nil, h.chainErr
	}
	digests, hits := ls.digests, ls.hits
	var pre []*Offer
	if pol.StructureFirst {
		var decoded []element
		var cerr *chainError
		if decoded, pre, cerr = decodeElements(h.Chain, hits, lim); cerr != nil {
			return "", nil, cerr
		}
		if _, cerr := checkStructure(decoded, digests, o, self, pol, seconds(skew)); cerr != nil {
			return "", nil, cerr
		}
	}
	elems, cerr := verifyElements(elementWork{chain: h.Chain, digests: digests, hits: hits, texts: ls.texts, ts: ts, lim: lim, pre: pre}, pol.Workers)
	if cerr != nil {
		return "", nil, cerr
	}
	var state ChainState
	if pre != nil {
		// The structure passed on the same octets, decoded once: only the
		// state, which needs to know which keys were trusted, is left.
		state = chainState(elems)
	} else if state, cerr = checkStructure(elems, digests, o, self, pol, seconds(skew)); cerr != nil {
		return "", nil, cerr
	}
	links := make([]Link, n)
	for i, e := range elems {
		links[i] = Link{Signed: h.Chain[i], Digest: digests[i], Verified: e.verified, offer: e.offer}
	}
	return state, links, nil
}

// chainLookup is what the cache held for a chain's elements: the handoff
// digest of each (HC-20), their values in one array, what the cache holds
// for each, verified under the receive's trust state, or nil, and, for a
// COSE element carried as base64url text, the SHA-256 of that text.
type chainLookup struct {
	digests []digest.Digest
	vals    [][sha256.Size]byte
	hits    []*Offer
	texts   []textKey
}

// textKey is the SHA-256 of a COSE element's base64url text, when ok.
type textKey struct {
	sum [sha256.Size]byte
	ok  bool
}

// lookupChain looks each element up in the cache once, and completes the
// forms Receive left unchecked (parseHandoff) for the elements it does
// not find; h.chainErr then says whether an element is no signed handoff.
//
// A COSE element still held as its base64url text is looked up by the
// SHA-256 of that text (cached.text): found, its octets are the cache's,
// copied over the text, and they are not decoded; else it is decoded by
// Handoff.checkForms and looked up by its handoff digest, as every other
// element is. An element verified before has the octets of one that passed
// the form checks, so they are not run on it again. The cache holds JWS
// elements, which passed the JwsCompact test, and COSE elements, whose
// first octet is a tag's (major type 6): octets that start with a
// base64url character and are held are a JWS's.
func lookupChain(h *Handoff, c *verifiedCache, lim Limits) chainLookup {
	n := len(h.Chain)
	ls := chainLookup{digests: make([]digest.Digest, n), vals: make([][sha256.Size]byte, n), hits: make([]*Offer, n)}
	at := func(i int) {
		ls.vals[i] = sha256.Sum256(h.Chain[i].Octets)
		ls.digests[i] = digest.Digest{Alg: digest.SHA256Alg, Val: ls.vals[i][:]}
		ls.hits[i] = c.get(ls.digests[i])
	}
	if h.forms == nil {
		for i := range n {
			at(i)
		}
		return ls
	}
	var texts []int // the elements held as text, not found by it
	p := h.forms.idx
	for i := range n {
		if len(p) > 0 && p[0] == i {
			p = p[1:]
			if h.Chain[i].Format == COSE {
				if !ls.byText(h, i, c, lim) {
					texts = append(texts, i)
				}
				continue
			}
		}
		at(i)
	}
	h.checkForms(lim, func(i int) bool {
		o := h.Chain[i].Octets
		return ls.hits[i] != nil && (h.Chain[i].Format == COSE || b64url[o[0]])
	})
	if h.chainErr != nil {
		return ls
	}
	for _, i := range texts {
		at(i) // decoded now
		if ls.hits[i] != nil && ls.texts[i].ok {
			c.addText(ls.texts[i].sum, ls.digests[i], h.Chain[i].Octets)
		}
	}
	return ls
}

// byText looks element i, a COSE element held as its base64url text, up
// by the SHA-256 of that text, and reports whether the cache held it.
func (ls *chainLookup) byText(h *Handoff, i int, c *verifiedCache, lim Limits) bool {
	t := h.Chain[i].Octets
	if c == nil || len(t) == 0 {
		return false
	}
	if ls.texts == nil {
		ls.texts = make([]textKey, len(h.Chain))
	}
	k := &ls.texts[i]
	k.sum, k.ok = sha256.Sum256(t), true
	e, ok := c.getText(k.sum)
	if !ok || len(e.octets) > len(t) || len(e.octets) > lim.MaxElementSize {
		return false
	}
	b := t[:len(e.octets):len(e.octets)] // the text is the Handoff's own
	copy(b, e.octets)
	h.Chain[i].Octets = b
	ls.vals[i] = e.digest
	ls.digests[i] = digest.Digest{Alg: digest.SHA256Alg, Val: ls.vals[i][:]}
	ls.hits[i] = e.offer
	return true
}

// applyChainPolicy is the policy half of step 6 (HC-36, HC-58).
func applyChainPolicy(state ChainState, links []Link, o *Offer, pol ChainPolicy) *chainError {
	if !pol.RequireFull && len(pol.TrustedOrigins) == 0 {
		return nil
	}
	if state != ChainFull {
		// The reason says "policy" already: the detail names the setting.
		setting := "ChainPolicy.RequireFull"
		if !pol.RequireFull {
			setting = "ChainPolicy.TrustedOrigins (the origin is known only from a full chain)"
		}
		return chainErr(-1, reason.Policy, "%s requires a full verified chain; this one is %s", setting, state)
	}
	if len(pol.TrustedOrigins) > 0 {
		origin := o.Iss
		if len(links) > 0 {
			origin = links[0].offer.Iss
		}
		if !slices.Contains(pol.TrustedOrigins, origin) {
			return chainErr(0, reason.Policy, "the chain's origin %q is not one of ChainPolicy.TrustedOrigins", origin)
		}
	}
	return nil
}
