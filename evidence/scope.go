package evidence

import (
	"slices"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
)

// The scope of an effect (issue 33). An operation id or idempotency key
// names an effect only within the scope that could have performed it: the
// hop it was performed under, and below it the hops that hop delegated to.
// A package may therefore mark as done only what its own hop, or an earlier
// hop of its verified chain, could have done (CompletedAction.Hop). The
// reason: the guard refuses a name recorded in its scopes, so a delegator
// that could record a name in any scope could have the real effect of a
// hop it never took part in refused ("already performed"), and learn of
// that hop's record from the refusal. The chain is the verified one: its
// hops are bound to the offer by the digests of its signed prev links,
// which a delegator cannot point at another delegator's hop.

// CodeOutOfScope: a completed action names a hop that is neither the
// package's own nor an earlier hop of the offer's verified chain (or, from
// Check, any hop: the chain is not known there). It is advisory: the claim
// is not recorded as performed (NewGuard), and stays an untrusted claim.
const CodeOutOfScope Code = "effect-out-of-scope"

// Chain returns the handoff digests of the earlier hops of the offer's
// verified chain, outermost first, when CheckReceived made the report: the
// delegations the hop came through, which the guard records with every
// effect and approval. It ends at the first element, counting back from
// the offer, whose signature did not verify.
func (r *Report) Chain() []digest.Digest {
	out := make([]digest.Digest, len(r.chain))
	for i, d := range r.chain {
		out[i] = d.Clone()
	}
	return out
}

// chainKeys returns the chain as the ledger names hops.
func (r *Report) chainKeys() []string {
	if len(r.chain) == 0 {
		return nil
	}
	out := make([]string, len(r.chain))
	for i, d := range r.chain {
		out[i] = d.String()
	}
	return out
}

// verifiedChain returns the handoff digests of the verified suffix of in's
// chain, outermost first.
func verifiedChain(in *handoff.Received) []digest.Digest {
	links := in.Links()
	i := len(links)
	for i > 0 && links[i-1].Verified {
		i--
	}
	var out []digest.Digest
	for _, l := range links[i:] {
		out = append(out, l.Digest)
	}
	return out
}

// scopes reports the completed actions that name a hop outside the verified
// chain (nil when it is not known).
func (c *checker) scopes(chain []digest.Digest) {
	for i, a := range c.p.Completed {
		if a.Hop == "" || slices.ContainsFunc(chain, func(d digest.Digest) bool { return d.String() == a.Hop }) {
			continue
		}
		if chain == nil && c.r.offerDig.IsZero() {
			c.advise(CodeOutOfScope, idx("/completed/", i, "/hop"), "the hop it names cannot be placed without the offer's chain (CheckReceived)")
			continue
		}
		c.advise(CodeOutOfScope, idx("/completed/", i, "/hop"), "the hop it names is not an earlier hop of the offer's verified chain: not recorded as performed")
	}
}
