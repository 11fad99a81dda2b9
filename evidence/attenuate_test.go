package evidence

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
)

// chain is a line of agents, each handing the work on to the next with a
// package, on one clock, in one format.
type chain struct {
	t      *testing.T
	clock  *clock
	ids    []handoff.AgentID
	agents []*handoff.Agent
	mu     sync.Mutex
	pkgs   map[string][]byte // package digest (B64) -> encoding
}

func newChain(t *testing.T, f handoff.Format, n int) *chain {
	c := &chain{t: t, clock: &clock{t: time.Unix(t0, 0)}, pkgs: map[string][]byte{}}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	signers := map[handoff.AgentID]*handoff.Signer{}
	for i := range n {
		id := handoff.AgentID(fmt.Sprintf("spiffe://shop.example/agent/%d", i))
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		s, err := handoff.NewSigner(k, f, nil)
		require.NoError(t, err)
		c.ids, signers[id], keys[id] = append(c.ids, id), s, []handoff.TrustedKey{s.Key()}
	}
	trust, err := handoff.NewTrust(keys)
	require.NoError(t, err)
	for _, id := range c.ids {
		a, err := handoff.NewAgent(handoff.Config{ID: id, Signer: signers[id], Trust: trust, Now: c.clock.Now,
			Store: replay.NewMemory(replay.MemoryOptions{Now: c.clock.Now})})
		require.NoError(t, err)
		c.agents = append(c.agents, a)
	}
	return c
}

// ancestors serves the packages of earlier hops, by digest.
func (c *chain) ancestors(_ context.Context, r ref.Ref) (ref.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.pkgs[r.Dig.B64()]
	if !ok {
		return ref.Object{}, ref.ErrUnavailable
	}
	return ref.Object{Octets: b}, nil
}

// pkgOf returns the package delivered with the offer of in: the one its
// refs name.
func (c *chain) pkgOf(t *testing.T, in *handoff.Received) []byte {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range in.Offer().Refs {
		if b, ok := c.pkgs[r.Dig.B64()]; ok {
			return b
		}
	}
	t.Fatal("no package for the offer")
	return nil
}

// hand makes agent i offer to agent i+1, passing on from (nil for the
// first hop), with p built for the hop (raw: without the builder's
// refusal of a widening), and returns what i+1 received and its report.
func (c *chain) hand(i int, from *handoff.Received, p Package, cfg CheckConfig) (*handoff.Received, *Report) {
	t := c.t
	var enc []byte
	out, err := c.agents[i].Offer(context.Background(), handoff.OfferParams{To: c.ids[i+1], Dialog: "case-77", TTL: 120 * time.Second,
		From: from, Prepare: func(o *handoff.Offer) error {
			built, err := NewBuilder(p).Build(BindingOf(o), BuildOptions{})
			if err != nil {
				return err
			}
			enc = built.Encoded
			c.mu.Lock()
			c.pkgs[built.Ref.Dig.B64()] = enc
			c.mu.Unlock()
			o.Refs = append(o.Refs, built.Ref)
			return nil
		}})
	require.NoError(t, err)
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := c.agents[i+1].Receive(context.Background(), data, handoff.Host{Dialog: "case-77"})
	require.NoError(t, err)
	require.True(t, in.Accepted(), "receive: %v", in.Err())
	if cfg.Now == nil {
		cfg.Now, cfg.Artifacts, cfg.Ancestors = c.clock.Now, artifactSource(), c.ancestors
	}
	rep, err := CheckReceived(context.Background(), in, Delivered{Package: enc}, cfg)
	require.NoError(t, err)
	return in, rep
}

// walk hands the work down depth+1 hops, every package the clean one but
// the last, which change changes; it returns the last report.
func (c *chain) walk(depth int, change func(*Package), cfg CheckConfig) (*handoff.Received, *Report) {
	var in *handoff.Received
	var rep *Report
	for i := 0; i <= depth; i++ {
		p := refundPackage()
		if i == depth && change != nil {
			change(&p)
		}
		in, rep = c.hand(i, in, p, cfg)
		if i < depth {
			require.True(c.t, rep.Acceptable(), "hop %d: %+v", i, rep.Findings())
		}
	}
	return in, rep
}

// Widening by an added allowed action, a dropped denial and a must-ask
// turned allowed, at depth 1 and at depth 3, in JWS and COSE: each is
// refused with authority-widened at the entry, against every ancestor.
func TestAttenuation_WideningRefused(t *testing.T) {
	cases := []struct {
		name  string
		widen func(*Authority)
		path  string
	}{
		{"allowed action added", func(a *Authority) { a.Allowed = append(a.Allowed, "gateway.payout") }, "/authority/allowed/2"},
		{"denial dropped", func(a *Authority) { a.Denied = []string{"customer.delete"} }, "/authority/denied"},
		{"must-ask turned allowed", func(a *Authority) {
			a.Allowed = append(a.Allowed, "refund.issue")
			a.MustAsk = nil
		}, "/authority/allowed/2"},
		{"denied action allowed", func(a *Authority) {
			a.Allowed = append(a.Allowed, "card.charge")
			a.Denied = []string{"customer.delete"}
		}, "/authority/allowed/2"},
	}
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		for _, depth := range []int{1, 3} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/depth%d/%s", f, depth, c.name), func(t *testing.T) {
					ch := newChain(t, f, depth+2)
					_, rep := ch.walk(depth, func(p *Package) { c.widen(&p.Authority) }, CheckConfig{})
					require.True(t, rep.Has(CodeWidened, c.path), "findings: %+v", rep.Findings())
					require.False(t, rep.Acceptable())
					n := 0
					for _, fd := range rep.Findings() {
						if fd.Code == CodeWidened && fd.Path == c.path {
							n++
						}
					}
					require.Equal(t, depth, n, "one finding per ancestor")
					require.Len(t, rep.ancestors, depth)
				})
			}
		}
	}
}

// Narrowing passes: a must-ask may become denied, an allowed action may
// be dropped or become must-ask; and nothing outlives an ancestor's offer.
func TestAttenuation_NarrowingPasses(t *testing.T) {
	for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
		t.Run(f.String(), func(t *testing.T) {
			ch := newChain(t, f, 5)
			_, rep := ch.walk(3, func(p *Package) {
				p.Authority.Allowed = []string{"refund.eligibility"}
				p.Authority.MustAsk = []string{"ledger.read"}
				p.Authority.Denied = append(p.Authority.Denied, "refund.issue")
				p.Pending = append(p.Pending, Pending{Kind: PendingApproval, Item: "a read of the ledger", Action: "ledger.read", Owner: "finance-lead"})
			}, CheckConfig{})
			require.True(t, rep.Acceptable(), "findings: %+v", rep.Findings())
			for _, fd := range rep.Findings() {
				require.NotEqual(t, CodeWidened, fd.Code, "%+v", fd)
			}
			// The same walk with a clean last package is acceptable, and
			// its guard ends with the earliest offer of the chain.
			ch = newChain(t, f, 5)
			var last *handoff.Received
			var lastRep *Report
			for i := 0; i <= 3; i++ {
				last, lastRep = ch.hand(i, last, refundPackage(), CheckConfig{})
				require.True(t, lastRep.Acceptable(), "hop %d: %+v", i, lastRep.Findings())
				ch.clock.Add(20 * time.Second)
			}
			g, err := NewGuard(context.Background(), lastRep, GuardConfig{Ledger: authority.NewMemory(), Now: ch.clock.Now})
			require.NoError(t, err)
			require.Equal(t, handoff.TimeOf(time.Unix(t0, 0))+120, handoff.TimeOf(g.exp), "the first offer's exp")
			require.NoError(t, g.Authorize(context.Background(), Call{Hop: last.Digest(), Action: "ledger.read"}))
			ch.clock.Add(41 * time.Second) // t0+121: past the first exp, before the last (t0+180)
			require.ErrorIs(t, g.Authorize(context.Background(), Call{Hop: last.Digest(), Action: "ledger.read"}), ErrStopped,
				"the first offer expired, though the last has not")
		})
	}
}

// Issue 35, finding 4: a widening deep in the chain passed silently when
// CheckConfig.Ancestors was nil, every ancestor being only "unobtainable",
// an advisory. Now a chain that names packages, checked without Ancestors,
// fails with ancestors-not-supplied, whether the package widens or not;
// with Ancestors each widening is authority-widened; a chain that names no
// package needs none.
func TestAttenuation_WideningNeverSilent(t *testing.T) {
	widenings := map[string]func(*Package){
		"allows what depth 1 denied": func(p *Package) {
			p.Authority.Allowed = append(p.Authority.Allowed, "customer.delete")
			p.Authority.Denied = []string{"card.charge"}
		},
		"allows *": func(p *Package) { p.Authority.Allowed = append(p.Authority.Allowed, "*") },
		"must-ask moved to allowed": func(p *Package) {
			p.Authority.Allowed = append(p.Authority.Allowed, p.Authority.MustAsk...)
			p.Authority.MustAsk = nil
		},
		"none": nil,
	}
	for name, widen := range widenings {
		t.Run(name, func(t *testing.T) {
			ch := newChain(t, handoff.JWS, 5)
			noAncestors := CheckConfig{Now: ch.clock.Now, Artifacts: artifactSource()}
			var in *handoff.Received
			var rep *Report
			for i := 0; i <= 3; i++ {
				p := refundPackage()
				if i == 3 && widen != nil {
					widen(&p)
				}
				cfg := CheckConfig{} // the chain's own resolver
				if i == 3 {
					cfg = noAncestors
				}
				in, rep = ch.hand(i, in, p, cfg)
			}
			require.False(t, rep.Acceptable(), "findings: %+v", rep.Findings())
			require.Contains(t, rep.Codes(), CodeAncestorsNotSupplied)
			n := 0
			for _, f := range rep.Findings() {
				if f.Code == CodeAncestorsNotSupplied {
					n++
				}
			}
			require.Equal(t, 3, n, "one finding per chain element that names a package")
			require.NotContains(t, rep.Codes(), CodeWidened, "nothing was compared")

			// The same package with the ancestors supplied.
			rep, err := CheckReceived(context.Background(), in, Delivered{Package: ch.pkgOf(t, in)},
				CheckConfig{Now: ch.clock.Now, Artifacts: artifactSource(), Ancestors: ch.ancestors})
			require.NoError(t, err)
			require.NotContains(t, rep.Codes(), CodeAncestorsNotSupplied)
			if widen == nil {
				require.True(t, rep.Acceptable(), "findings: %+v", rep.Findings())
			} else {
				require.Contains(t, rep.Codes(), CodeWidened)
				require.False(t, rep.Acceptable())
			}
		})
	}
	// A chain whose offers name no package has nothing to compare.
	ch := newChain(t, handoff.JWS, 3)
	out, err := ch.agents[0].Offer(context.Background(), handoff.OfferParams{To: ch.ids[1], Dialog: "case-77"})
	require.NoError(t, err)
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	first, err := ch.agents[1].Receive(context.Background(), data, handoff.Host{Dialog: "case-77"})
	require.NoError(t, err)
	_, rep := ch.hand(1, first, refundPackage(), CheckConfig{Now: ch.clock.Now, Artifacts: artifactSource()})
	require.True(t, rep.Acceptable(), "findings: %+v", rep.Findings())
}

// An ancestor whose package cannot be obtained is its own finding:
// advisory by default, failing the check under RequireAncestors.
func TestAttenuation_AncestorUnobtainable(t *testing.T) {
	ch := newChain(t, handoff.JWS, 3)
	none := func(context.Context, ref.Ref) (ref.Object, error) {
		return ref.Object{}, ref.ErrUnavailable
	}
	in, rep := ch.hand(0, nil, refundPackage(), CheckConfig{})
	require.True(t, rep.Acceptable())
	_, rep = ch.hand(1, in, refundPackage(), CheckConfig{Now: ch.clock.Now, Artifacts: artifactSource(), Ancestors: none})
	require.True(t, rep.Has(CodeAncestorUnverifiable, ""))
	require.True(t, rep.Acceptable(), "advisory by default")

	ch = newChain(t, handoff.JWS, 3)
	in, _ = ch.hand(0, nil, refundPackage(), CheckConfig{})
	_, rep = ch.hand(1, in, refundPackage(), CheckConfig{Now: ch.clock.Now, Artifacts: artifactSource(), Ancestors: none, RequireAncestors: true})
	require.True(t, rep.Has(CodeAncestorUnverifiable, ""))
	require.False(t, rep.Acceptable())

	// A package served under another digest is not the ancestor's.
	ch = newChain(t, handoff.JWS, 3)
	in, _ = ch.hand(0, nil, refundPackage(), CheckConfig{})
	other := func(context.Context, ref.Ref) (ref.Object, error) {
		return ref.Object{Octets: []byte(`{"authority":{"allowed":["everything"]}}`)}, nil
	}
	_, rep = ch.hand(1, in, refundPackage(), CheckConfig{Now: ch.clock.Now, Artifacts: artifactSource(), Ancestors: other, RequireAncestors: true})
	require.True(t, rep.Has(CodeAncestorUnverifiable, ""))
	require.False(t, rep.Acceptable())
}

// The builder refuses to build a package that widens the authority its
// delegator received.
func TestBuild_RefusesToWiden(t *testing.T) {
	received := refundPackage().Authority
	for _, widen := range []func(*Authority){
		func(a *Authority) { a.Allowed = append(a.Allowed, "gateway.payout") },
		func(a *Authority) { a.Denied = nil },
		func(a *Authority) { a.Allowed, a.MustAsk = append(a.Allowed, "refund.issue"), nil },
	} {
		p := refundPackage()
		widen(&p.Authority)
		_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{Within: &received})
		require.ErrorIs(t, err, ErrWidened)
		var we *WidenedError
		require.True(t, errors.As(err, &we))
		require.NotEmpty(t, we.Widenings)
	}
	narrower := refundPackage()
	narrower.Authority.Allowed = narrower.Authority.Allowed[:1]
	narrower.Next.Action = narrower.Authority.Allowed[0]
	_, err := NewBuilder(narrower).Build(testBinding(t), BuildOptions{Within: &received})
	require.NoError(t, err)
}
