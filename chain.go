package handoff

import (
	"fmt"
	"time"
)

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
// section 5.1). The zero value checks any chain carried and accepts every
// chain state.
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
}

// Link is one element of a checked chain.
type Link struct {
	Signed Signed
	Offer  *Offer // decoded; verified unless Verified is false
	Digest Digest
	// Verified is true when the element's signature verified with a key
	// bound to its iss. Elements of an unverifiable prefix are decoded
	// without verification and must not drive decisions.
	Verified bool
}

// checkChain runs section 5.3 on a decoded current offer and its carried
// chain. It returns the chain's state and its elements, or a rejection.
// The length limit is checked before any signature work (HC-50); signatures
// are verified from the newest element back, so that the unverifiable
// prefix is found as the draft describes it (HC-46). Elements in cache
// verified before and are only decoded.
func checkChain(h *Handoff, o *Offer, self AgentID, trust *Trust, cache *verifiedCache, pol ChainPolicy, lim Limits, skew time.Duration) (ChainState, []Link, *Rejection) {
	n := len(h.Chain)
	if n > lim.MaxChain { // HC-50
		return "", nil, reject(ReasonTooDeep, ErrRejected, "chain of %d elements exceeds the limit of %d", n, lim.MaxChain)
	}
	if n == 0 {
		if o.Prev != nil {
			return ChainAbsent, nil, nil
		}
		return ChainFull, nil, nil
	}
	if o.Prev == nil {
		return "", nil, reject(ReasonBrokenChain, ErrRejected, "a chain is carried but the offer has no prev")
	}

	// Step 1: each element's signed form and signature, newest first; an
	// element whose iss has no trusted key makes it and every earlier
	// element unverifiable.
	links := make([]Link, n)
	unverifiable := false
	for i := n - 1; i >= 0; i-- {
		e := h.Chain[i]
		links[i] = Link{Signed: e, Digest: e.Digest()}
		if !unverifiable {
			if cache.has(links[i].Digest) {
				// Verified before with this agent's trust: decode only.
				if eo, _, err := InspectUnverified(e, lim); err == nil && eo != nil {
					links[i].Offer, links[i].Verified = eo, true
					continue
				}
			}
			eo, err := OpenOffer(e, trust, lim)
			if err == nil {
				links[i].Offer, links[i].Verified = eo, true
				cache.add(links[i].Digest)
				continue
			}
			if ReasonOf(err) != ReasonUntrustedKey {
				r := asRejection(err)
				r.Detail = fmt.Sprintf("chain[%d]: %s", i, r.Detail)
				return "", nil, r
			}
			unverifiable = true
		}
		eo, _, err := InspectUnverified(e, lim)
		if err != nil || eo == nil {
			return "", nil, reject(ReasonBadSignature, ErrMalformed, "chain[%d]: not a well-formed offer: %v", i, err)
		}
		links[i].Offer = eo
	}

	// Steps 2-4: linkage, continuity and timing for i = 1..n, C[n] = O.
	at := func(i int) *Offer {
		if i == n {
			return o
		}
		return links[i].Offer
	}
	for i := 1; i <= n; i++ {
		prev, cur := links[i-1], at(i)
		if cur.Prev == nil || !cur.Prev.Equal(prev.Digest) {
			if cur.Prev != nil && !cur.Prev.Supported() { // HC-08: fails for prev
				return "", nil, reject(ReasonBrokenChain, ErrUnsupportedDigest, "element %d: prev uses unsupported digest alg %q", i, cur.Prev.Alg)
			}
			return "", nil, reject(ReasonBrokenChain, ErrRejected, "element %d: prev does not name the digest of element %d", i, i-1)
		}
		if prev.Offer.Aud != cur.Iss {
			return "", nil, reject(ReasonBrokenChain, ErrRejected, "element %d: iss %q is not the aud %q of element %d", i, cur.Iss, prev.Offer.Aud, i-1)
		}
		skewS := Time(skew / time.Second)
		if prev.Offer.Iat > cur.Iat || (cur.Iat > prev.Offer.Exp && cur.Iat-prev.Offer.Exp > skewS) { // no overflow: Time = uint
			return "", nil, reject(ReasonBrokenChain, ErrRejected, "element %d: issued at %d, outside [%d, %d + skew] of element %d", i, cur.Iat, prev.Offer.Iat, prev.Offer.Exp, i-1)
		}
	}

	// Step 6: cycles (HC-49).
	allowed := func(id AgentID) bool { return contains(agentStrings(pol.AllowReentry), string(id)) }
	seen := map[AgentID]int{}
	for i := 0; i <= n; i++ {
		iss := at(i).Iss
		if j, dup := seen[iss]; dup && !allowed(iss) {
			return "", nil, reject(ReasonCycle, ErrRejected, "%q is iss of elements %d and %d", iss, j, i)
		}
		seen[iss] = i
		if i < n && (at(i).Iss == self || at(i).Aud == self) && !allowed(self) {
			return "", nil, reject(ReasonCycle, ErrRejected, "the receiver %q already appears in element %d", self, i)
		}
	}

	switch {
	case unverifiable:
		return ChainUnverifiable, links, nil
	case links[0].Offer.Prev != nil:
		return ChainPartial, links, nil
	}
	return ChainFull, links, nil
}

// applyChainPolicy is the policy half of step 6 (HC-36, HC-58).
func applyChainPolicy(state ChainState, links []Link, o *Offer, pol ChainPolicy) *Rejection {
	if !pol.RequireFull && len(pol.TrustedOrigins) == 0 {
		return nil
	}
	if state != ChainFull {
		return reject(ReasonPolicy, ErrRejected, "policy requires a full verified chain; chain is %s", state)
	}
	if len(pol.TrustedOrigins) > 0 {
		origin := o.Iss
		if len(links) > 0 {
			origin = links[0].Offer.Iss
		}
		if !contains(agentStrings(pol.TrustedOrigins), string(origin)) {
			return reject(ReasonPolicy, ErrRejected, "chain origin %q is not a trusted origin", origin)
		}
	}
	return nil
}

func agentStrings(ids []AgentID) []string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return s
}

func asRejection(err error) *Rejection {
	if r, ok := err.(*Rejection); ok {
		c := *r
		return &c
	}
	return &Rejection{Reason: ReasonBadSignature, Detail: err.Error(), Err: err}
}
