package handoff

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pathTo is an rxCase build for a delegation path ending at rxReceiver:
// keep picks which of the signed elements the Handoff carries (the last
// picked is the offer), and mods configure the receiver.
func pathTo(mod func(i int, o *Offer), keep func(e []Signed) []Signed, ids []AgentID, mods ...func(*Config)) func(t *testing.T, w *world) rxInput {
	return func(t *testing.T, w *world) rxInput {
		e := w.path(mod, ids...)
		if keep != nil {
			e = keep(e)
		}
		return rxInput{agent: w.agent(rxReceiver, mods...), h: handoffOf(e...)}
	}
}

// Paths used below: four hops from rxOrigin to rxReceiver.
var (
	path3 = []AgentID{rxOrigin, rxPlanner, rxCoder, rxTester, rxReceiver} // chain of 3
	path1 = []AgentID{rxPlanner, rxCoder, rxReceiver}                     // chain of 1
)

func links(t *testing.T, in *Received) []bool {
	t.Helper()
	v := make([]bool, len(in.Links()))
	for i, l := range in.Links() {
		v[i] = l.Verified
		require.NotNil(t, l.Unverified(), "link %d is decoded", i)
		assert.Equal(t, l.Verified, l.Offer() != nil, "link %d: Offer only when verified", i)
		assert.Equal(t, l.Signed.Digest(), l.Digest, "link %d digest", i)
	}
	return v
}

func requireFull(c *Config) { c.Chain.RequireFull = true }

// Section 5.3 chain states (HC-46, HC-48), in both formats and encodings.
func TestChain_HC46_HC48_States(t *testing.T) {
	runRxCases(t, []rxCase{
		{name: "full without a chain: the offer starts it", build: plain(rxPlanner),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainFull, in.Chain())
				assert.Empty(t, in.Links())
			}},
		{name: "full with a chain of three", build: pathTo(nil, nil, path3),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainFull, in.Chain())
				assert.Equal(t, []bool{true, true, true}, links(t, in))
				assert.Equal(t, rxOrigin, in.Links()[0].Offer().Iss)
				assert.Nil(t, in.Links()[0].Offer().Prev)
				assert.Equal(t, rxTester, in.Offer().Iss)
			}},
		{name: "HC48 absent: prev without a chain", build: pathTo(nil, func(e []Signed) []Signed { return e[3:] }, path3),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainAbsent, in.Chain())
				assert.Empty(t, in.Links())
			}},
		{name: "HC48 partial: the first element has a prev", build: pathTo(nil, func(e []Signed) []Signed { return e[1:] }, path3),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainPartial, in.Chain())
				assert.Equal(t, []bool{true, true}, links(t, in))
				assert.NotNil(t, in.Links()[0].Offer().Prev)
			}},
		{name: "HC46 unverifiable from an untrusted middle element back",
			build: pathTo(nil, nil, path3, func(c *Config) {
				c.Trust = c.Trust.without(rxPlanner)
			}),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainUnverifiable, in.Chain())
				// rxPlanner signed element 1: the chain is unverifiable
				// from it back; element 0, whose iss is trusted, is still
				// verified, so that a forged element cannot hide behind an
				// untrusted one (section 5.3, check 1).
				assert.Equal(t, []bool{true, false, true}, links(t, in))
				assert.Equal(t, rxOrigin, in.Links()[0].Offer().Iss, "decoded for display only")
			}},
		{name: "HC46 unverifiable first element only",
			build: pathTo(nil, nil, path3, func(c *Config) { c.Trust = c.Trust.without(rxOrigin) }),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainUnverifiable, in.Chain())
				assert.Equal(t, []bool{false, true, true}, links(t, in))
			}},
		{name: "HC46 unverifiable partial chain",
			build: pathTo(nil, func(e []Signed) []Signed { return e[2:] }, path3, func(c *Config) { c.Trust = c.Trust.without(rxCoder) }),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainUnverifiable, in.Chain(), "unverifiable wins over partial")
				assert.Equal(t, []bool{false}, links(t, in))
			}},
		{name: "HC46 element under a key its iss is not bound to",
			build: pathTo(nil, nil, path1, func(c *Config) {
				// rxPlanner's key is rotated away: the receiver trusts
				// another key for it.
				c.Trust = c.Trust.rebind(rxPlanner, rxOther)
			}),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainUnverifiable, in.Chain())
				assert.Equal(t, []bool{false}, links(t, in))
			}},
	})
}

// without returns a copy of t that binds no key to ids (test helper).
func (t *Trust) without(ids ...AgentID) *Trust {
	c := &Trust{keys: map[AgentID][]boundKey{}}
	for id, ks := range t.keys {
		if !slices.Contains(ids, id) {
			c.keys[id] = ks
		}
	}
	return c
}

// rebind returns a copy of t in which id is bound to the keys of other.
func (t *Trust) rebind(id, other AgentID) *Trust {
	c := t.without(id)
	c.keys[id] = t.keys[other]
	return c
}

// HC-46: a chain whose elements come in both signed forms verifies, in
// JSON (COSE as base64url text) and in CBOR (COSE as a byte string, JWS as
// text), HC-19.
func TestChain_HC19_MixedFormats(t *testing.T) {
	for _, first := range []Format{JWS, COSE} {
		other := COSE
		if first == COSE {
			other = JWS
		}
		formats := map[AgentID]Format{}
		for i, id := range path3 {
			formats[id] = first
			if i%2 == 1 {
				formats[id] = other
			}
		}
		for _, enc := range []Encoding{JSON, CBOR} {
			t.Run(fmt.Sprintf("%s-first-in-%s", first, enc), func(t *testing.T) {
				w := newMixedWorld(t, formats)
				e := w.path(nil, path3...)
				for i, s := range e {
					require.Equal(t, formats[path3[i]], s.Format)
				}
				data := encodeHandoff(t, handoffOf(e...), enc)
				in := receive(t, w.agent(rxReceiver, func(c *Config) {
					c.Chain = ChainPolicy{RequireFull: true, TrustedOrigins: []AgentID{rxOrigin}}
				}), data, Host{Dialog: "ctx-1"})
				assertReceived(t, in, "", nil)
				assert.Equal(t, ChainFull, in.Chain())
				assert.Equal(t, []bool{true, true, true}, links(t, in))
				for i, l := range in.Links() {
					assert.Equal(t, e[i].Octets, l.Signed.Octets, "HC-20: element %d kept exactly", i)
					assert.Equal(t, e[i].Format, l.Signed.Format)
				}

				// One element tampered: the chain fails, whatever its form.
				bad := handoffOf(e...)
				bad.Chain[1] = tamperSignature(t, bad.Chain[1])
				in = receive(t, w.agent(rxReceiver), encodeHandoff(t, bad, enc), Host{})
				assertReceived(t, in, reason.BadSignature, ErrSignature)
			})
		}
	}
}

// HC-47: linkage, continuity and timing failures are "broken-chain".
func TestChain_HC47_BrokenChain(t *testing.T) {
	zero := digest.Digest{Alg: digest.SHA256Alg, Val: make([]byte, 32)}
	at := func(i int, mod func(o *Offer)) func(int, *Offer) {
		return func(j int, o *Offer) {
			if i == j {
				mod(o)
			}
		}
	}
	runRxCases(t, []rxCase{
		{name: "prev names another offer", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(at(1, func(o *Offer) { o.Prev = &zero }), nil, path1)},
		{name: "prev of a middle element names another offer", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(at(2, func(o *Offer) { o.Prev = &zero }), nil, path3)},
		{name: "aud of an element is not the iss of the next", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(at(0, func(o *Offer) { o.Aud = rxOther }), nil, path1)},
		{name: "iss of the offer is not the aud of the last element", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(at(1, func(o *Offer) { o.Iss = rxOther }), nil, path1)},
		{name: "issued before the element it passes on", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(at(0, func(o *Offer) { o.Iat, o.Exp = o.Iat+1, o.Exp+1 }), nil, path1)},
		{name: "issued at the same second as the element it passes on",
			build: pathTo(nil, nil, path1)},
		{name: "issued after the element's exp plus the skew", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(at(0, func(o *Offer) { o.Iat, o.Exp = o.Iat-100, o.Iat-61 }), nil, path1)},
		{name: "issued at the element's exp plus the skew",
			build: pathTo(at(0, func(o *Offer) { o.Iat, o.Exp = o.Iat-100, o.Iat-60 }), nil, path1)},
		{name: "HC12 an element whose exp is the largest Time",
			build: pathTo(at(0, func(o *Offer) { o.Exp = timeMax }), nil, path1)},
		{name: "a middle element issued after its predecessor's exp plus the skew", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(func(i int, o *Offer) {
				switch i {
				case 0: // expired 190 s ago
					o.Iat, o.Exp = o.Iat-200, o.Iat-190
				case 1: // issued 100 s ago, 30 s after element 0's exp + skew
					o.Iat, o.Exp = o.Iat-100, o.Iat+20
				}
			}, nil, path3)},
		{name: "chain carried but the offer has no prev", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(at(1, func(o *Offer) { o.Prev = nil }), nil, path1)},
		{name: "element removed from a chain of three", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return []Signed{e[0], e[2], e[3]} }, path3)},
		{name: "first element removed from a chain of three",
			build: pathTo(nil, func(e []Signed) []Signed { return e[1:] }, path3),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainPartial, in.Chain(), "a dropped start is only detectable as partial (draft: Truncated Chains)")
			}},
		{name: "last element removed from a chain of three", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return []Signed{e[0], e[1], e[3]} }, path3)},
		{name: "chain reordered", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return []Signed{e[1], e[0], e[2], e[3]} }, path3)},
		{name: "chain newest first", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return []Signed{e[2], e[1], e[0], e[3]} }, path3)},
		{name: "element duplicated", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return []Signed{e[0], e[0], e[1]} }, path1)},
		{name: "chain element replaced by the offer", reason: reason.BrokenChain, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return []Signed{e[1], e[1]} }, path1)},
		{name: "HC08 offer's prev uses an unsupported digest alg", reason: reason.BrokenChain, class: digest.ErrUnsupported,
			build: pathTo(at(1, func(o *Offer) { o.Prev = &digest.Digest{Alg: "sha-512", Val: make([]byte, 64)} }), nil, path1)},
		{name: "HC08 a middle element's prev uses an unsupported digest alg", reason: reason.BrokenChain, class: digest.ErrUnsupported,
			build: pathTo(at(1, func(o *Offer) { o.Prev = &digest.Digest{Alg: "sha3-256", Val: make([]byte, 32)} }), nil, path3)},
		{name: "chain element is not an offer", reason: reason.BadSignature, class: ErrMalformed,
			build: func(t *testing.T, w *world) rxInput {
				e := w.path(nil, path1...)
				o := w.draftOffer(rxPlanner, rxCoder)
				st, err := w.signers[rxCoder].SignStatus(&Status{Hop: o.Hop, Offer: digest.SHA256(nil), Iss: rxCoder, Aud: rxPlanner, Iat: o.Iat, State: state.Accepted})
				require.NoError(t, err)
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(st, e[1])}
			}},
		{name: "chain element with a broken signature", reason: reason.BadSignature, class: ErrSignature,
			build: func(t *testing.T, w *world) rxInput {
				e := w.path(nil, path1...)
				return rxInput{agent: w.agent(rxReceiver), h: handoffOf(tamperSignature(t, e[0]), e[1])}
			}},
	})
}

// HC-49: cycles, and re-entry admitted by policy.
func TestChain_HC49_Cycle(t *testing.T) {
	allow := func(ids ...AgentID) func(*Config) {
		return func(c *Config) { c.Chain.AllowReentry = ids }
	}
	back := []AgentID{rxPlanner, rxCoder, rxPlanner, rxReceiver}  // rxPlanner is iss twice
	self := []AgentID{rxReceiver, rxPlanner, rxCoder, rxReceiver} // the receiver is iss of an earlier element
	selfAud := []AgentID{rxPlanner, rxReceiver, rxReceiver}       // the receiver only as aud of an earlier element
	runRxCases(t, []rxCase{
		{name: "repeated iss", reason: reason.Cycle, class: ErrRejected, build: pathTo(nil, nil, back)},
		{name: "repeated iss admitted by AllowReentry", build: pathTo(nil, nil, back, allow(rxPlanner)),
			check: func(t *testing.T, _ *world, in *Received) { assert.Equal(t, ChainFull, in.Chain()) }},
		{name: "repeated iss, another agent admitted", reason: reason.Cycle, build: pathTo(nil, nil, back, allow(rxCoder))},
		{name: "receiver is iss of an earlier element", reason: reason.Cycle, class: ErrRejected, build: pathTo(nil, nil, self)},
		{name: "receiver is aud of an earlier element", reason: reason.Cycle, class: ErrRejected, build: pathTo(nil, nil, selfAud)},
		{name: "receiver re-entry admitted by AllowReentry", build: pathTo(nil, nil, self, allow(rxReceiver)),
			check: func(t *testing.T, _ *world, in *Received) { assert.Equal(t, ChainFull, in.Chain()) }},
		{name: "receiver as aud admitted by AllowReentry", build: pathTo(nil, nil, selfAud, allow(rxReceiver))},
		{name: "cycle in a partial chain", reason: reason.Cycle,
			build: pathTo(nil, func(e []Signed) []Signed { return e[1:] }, []AgentID{rxOrigin, rxPlanner, rxCoder, rxPlanner, rxReceiver})},
		{name: "cycle in an unverifiable prefix", reason: reason.Cycle,
			build: pathTo(nil, nil, back, func(c *Config) { c.Trust = c.Trust.without(rxCoder) })},
		{name: "cycle and a broken link: broken-chain first", reason: reason.BrokenChain,
			build: pathTo(nil, func(e []Signed) []Signed { return []Signed{e[1], e[0], e[2]} }, back)},
	})
}

// chainOf returns the ids of a path with n chain elements ending at
// rxReceiver, with fresh agents for the world to hold.
func chainOf(n int) []AgentID {
	ids := make([]AgentID, n+2)
	for i := range n + 1 {
		ids[i] = AgentID(fmt.Sprintf("spiffe://h%d.example/agent", i))
	}
	ids[n+1] = rxReceiver
	return ids
}

// HC-50: the chain length is bounded: 16 elements by default, or
// Limits.MaxChain.
func TestChain_HC50_TooDeep(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		limit  int
		reason reason.Code
	}{
		{"16 elements, default limit", 16, 0, ""},
		{"17 elements, default limit", 17, 0, reason.TooDeep},
		{"2 elements, limit 2", 2, 2, ""},
		{"3 elements, limit 2", 3, 2, reason.TooDeep},
		{"1 element, limit 1", 1, 1, ""},
		{"2 elements, limit 1", 2, 1, reason.TooDeep},
	}
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ids := chainOf(c.n)
				w := newWorld(t, fe.Format, ids...)
				a := w.agent(rxReceiver, func(cfg *Config) {
					if c.limit != 0 {
						cfg.Limits.MaxChain = new(c.limit)
					}
				})
				in := receive(t, a, encodeHandoff(t, handoffOf(w.path(nil, ids...)...), fe.Encoding), Host{})
				if c.reason == "" {
					assertReceived(t, in, "", nil)
					assert.Equal(t, ChainFull, in.Chain())
					assert.Len(t, in.Links(), c.n)
					return
				}
				assertReceived(t, in, c.reason, ErrRejected)
				assert.Empty(t, in.Links())
			})
		}
	})
	// The limit is checked before anything else in the chain: a chain too
	// long and broken is too-deep.
	t.Run("too deep and broken", func(t *testing.T) {
		w := newWorld(t, JWS, rxAgents...)
		e := w.path(nil, path3...)
		h := handoffOf(e[2], e[1], e[0], e[3])
		in := receive(t, w.agent(rxReceiver, func(c *Config) { c.Limits.MaxChain = new(2) }), encodeHandoff(t, h, JSON), Host{})
		assert.Equal(t, reason.TooDeep, in.Reason())
	})
}

// HC-36: a policy that requires a full, verified chain rejects an absent,
// partial or unverifiable one with reason "policy".
func TestChain_HC36_RequireFull(t *testing.T) {
	runRxCases(t, []rxCase{
		{name: "full chain", build: pathTo(nil, nil, path3, requireFull)},
		{name: "no prev, no chain", build: func(t *testing.T, w *world) rxInput {
			in := plain(rxPlanner)(t, w)
			in.agent = w.agent(rxReceiver, requireFull)
			return in
		}},
		{name: "absent", reason: reason.Policy, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return e[3:] }, path3, requireFull),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainAbsent, in.Chain(), "the state found is reported")
			}},
		{name: "partial", reason: reason.Policy, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return e[1:] }, path3, requireFull),
			check: func(t *testing.T, _ *world, in *Received) { assert.Equal(t, ChainPartial, in.Chain()) }},
		{name: "unverifiable", reason: reason.Policy, class: ErrRejected,
			build: pathTo(nil, nil, path3, requireFull, func(c *Config) { c.Trust = c.Trust.without(rxPlanner) }),
			check: func(t *testing.T, _ *world, in *Received) { assert.Equal(t, ChainUnverifiable, in.Chain()) }},
		{name: "unverifiable without the policy",
			build: pathTo(nil, nil, path3, func(c *Config) { c.Trust = c.Trust.without(rxPlanner) })},
	})
}

// HC-58: a receiver that needs the origin requires a full chain whose first
// element is signed by an origin it trusts. A delegator that drops prev and
// the chain and presents itself as the start is refused.
func TestChain_HC58_TrustedOrigins(t *testing.T) {
	origins := func(ids ...AgentID) func(*Config) {
		return func(c *Config) { c.Chain.TrustedOrigins = ids }
	}
	truncated := func(keepFrom int) func(i int, o *Offer) {
		// The delegator of element keepFrom drops prev: it presents itself
		// as the start.
		return func(i int, o *Offer) {
			if i == keepFrom {
				o.Prev = nil
			}
		}
	}
	runRxCases(t, []rxCase{
		{name: "full chain from a trusted origin", build: pathTo(nil, nil, path3, origins(rxOrigin))},
		{name: "full chain from another origin", reason: reason.Policy, class: ErrRejected,
			build: pathTo(nil, nil, path3, origins(rxOther))},
		{name: "offer starting its own chain, its iss a trusted origin",
			build: func(t *testing.T, w *world) rxInput {
				return rxInput{agent: w.agent(rxReceiver, origins(rxPlanner)), h: handoffOf(w.offer(rxPlanner, rxReceiver, nil))}
			}},
		{name: "truncated: the offer presented as the start", reason: reason.Policy, class: ErrRejected,
			build: pathTo(truncated(3), func(e []Signed) []Signed { return e[3:] }, path3, origins(rxOrigin))},
		{name: "truncated: a middle element presented as the start", reason: reason.Policy, class: ErrRejected,
			build: pathTo(truncated(2), func(e []Signed) []Signed { return e[2:] }, path3, origins(rxOrigin))},
		{name: "truncated, accepted without the policy",
			build: pathTo(truncated(2), func(e []Signed) []Signed { return e[2:] }, path3),
			check: func(t *testing.T, _ *world, in *Received) {
				assert.Equal(t, ChainFull, in.Chain(), "a truncated chain looks full (draft: Truncated Chains)")
				assert.Equal(t, rxCoder, in.Links()[0].Offer().Iss)
			}},
		{name: "partial chain", reason: reason.Policy, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return e[1:] }, path3, origins(rxOrigin, rxPlanner))},
		{name: "absent chain", reason: reason.Policy, class: ErrRejected,
			build: pathTo(nil, func(e []Signed) []Signed { return e[3:] }, path3, origins(rxOrigin, rxTester))},
		{name: "origin untrusted for its key: unverifiable", reason: reason.Policy, class: ErrRejected,
			build: pathTo(nil, nil, path3, origins(rxOrigin), func(c *Config) { c.Trust = c.Trust.without(rxOrigin) })},
	})
}

// Chain timing uses the configured skew (HC-47).
func TestChain_HC47_TimingUsesConfiguredSkew(t *testing.T) {
	eachFormatEncoding(t, func(t *testing.T, fe formatEncoding) {
		w := newWorld(t, fe.Format, rxAgents...)
		// The element expired 10 s before the offer was issued.
		e := w.path(func(i int, o *Offer) {
			if i == 0 {
				o.Iat, o.Exp = o.Iat-70, o.Iat-10
			}
		}, path1...)
		data := encodeHandoff(t, handoffOf(e...), fe.Encoding)
		in := receive(t, w.agent(rxReceiver, func(c *Config) { c.Skew = new(10 * time.Second) }), data, Host{})
		assertReceived(t, in, "", nil)
		in = receive(t, w.agent(rxReceiver, func(c *Config) { c.Skew = new(9 * time.Second) }), data, Host{})
		assertReceived(t, in, reason.BrokenChain, ErrRejected)
	})
}
