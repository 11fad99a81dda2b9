package handoff

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/internal/b64u"
	"github.com/agentproto/handoff/reason"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outcome is what a receive reports: the check, the reason, and for a
// chain failure the element and detail.
type outcome struct {
	Check  Check
	Reason reason.Code
	Index  int
	Detail string
	State  ChainState
}

func outcomeOf(in *Received) outcome {
	o := outcome{Check: in.Check(), Reason: in.Reason(), Index: -2, State: in.Chain()}
	var ce *chainError
	if errors.As(in.Err(), &ce) {
		o.Index, o.Detail = ce.Index, ce.Detail
	}
	return o
}

// HC-46, HC-47: verifying a chain's signatures on several goroutines
// (ChainPolicy.Workers) reports exactly what the sequential order reports,
// with the cache off, cold or warm: when bad signatures, untrusted keys
// and broken links are mixed, the failure is that of the newest failing
// element in check 1, else the first broken link.
func TestChain_HC46_ParallelSameOutcome(t *testing.T) {
	const n = 16
	rng := rand.New(rand.NewPCG(16, 46))
	ids := benchIDs(n)
	for _, f := range []Format{JWS, COSE} {
		w := newWorld(t, f, ids...)
		for trial := range 24 {
			bogus := digest.SHA256([]byte("not the element before"))
			pick := func(p float64) map[int]bool {
				m := map[int]bool{}
				for i := range n {
					if rng.Float64() < p {
						m[i] = true
					}
				}
				return m
			}
			bad, untrusted, broken := pick(0.12), pick(0.12), pick(0.1)
			if trial%4 == 0 { // untrusted keys only: an unverifiable chain, accepted
				bad, broken = nil, nil
			}
			elems := w.path(func(i int, o *Offer) {
				if broken[i] && i > 0 {
					o.Prev = &bogus
				}
			}, ids...)
			for i := range bad {
				elems[i] = tamperSignature(t, elems[i])
			}
			var trusted []AgentID
			for i, id := range ids {
				if !untrusted[i] || i >= n {
					trusted = append(trusted, id)
				}
			}
			data := encodeHandoff(t, handoffOf(elems...), JSON)
			tr := w.trustOnly(trusted...)
			recv := func(workers, cache int, warm []byte) outcome {
				a := w.agent(ids[n+1], func(c *Config) {
					c.Store, c.Trust, c.VerifiedCache, c.Chain.Workers = forgetful{}, tr, cache, workers
				})
				if warm != nil {
					receive(t, a, warm, Host{})
				}
				return outcomeOf(receive(t, a, data, Host{}))
			}
			want := recv(1, -1, nil)
			name := fmt.Sprintf("%s/%d bad=%v untrusted=%v broken=%v", f, trial, keys(bad), keys(untrusted), keys(broken))
			for _, workers := range []int{2, 4, 32} {
				assert.Equal(t, want, recv(workers, -1, nil), "%s workers=%d", name, workers)
				assert.Equal(t, want, recv(workers, 0, data), "%s workers=%d, the same chain seen before", name, workers)
			}
			// A cache warmed by the intact chain: the elements not
			// altered are cached, the others verified.
			intact := encodeHandoff(t, handoffOf(w.path(nil, ids...)...), JSON)
			assert.Equal(t, want, recv(4, 0, intact), "%s workers=4, unrelated chain seen before", name)
		}
	}
}

func keys(m map[int]bool) []int {
	var out []int
	for i := range 64 {
		if m[i] {
			out = append(out, i)
		}
	}
	return out
}

// Parallel receives on one Agent share its verified-element cache; the
// race detector watches the shards and the parallel chain check.
func TestReceive_ParallelSharedCache(t *testing.T) {
	w, self, msgs := chainFixture(t, COSE, 6, 8)
	a := w.agent(self, func(c *Config) { c.Store = forgetful{}; c.Chain.Workers = 3; c.VerifiedCache = 300 })
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 4 {
				in, err := a.Receive(context.Background(), msgs[(g+k)%len(msgs)], Host{})
				if assert.NoError(t, err) {
					assert.True(t, in.Accepted(), in.Detail())
					assert.Len(t, in.Links(), 6)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 6, a.trust.Load().cache.len())
}

// A cache of 256 entries or more is sharded: it never holds more than its
// bound, evicts the oldest of a shard first, and keeps the newest.
func TestVerifiedCache_ShardedBound(t *testing.T) {
	const bound = 300
	c := newVerifiedCache(bound)
	require.Len(t, c.shards, cacheShards)
	o := &Offer{Hop: "AAAAAAAAAAAAAAAAAAAAAA"}
	key := func(i int) digest.Digest { return digest.SHA256([]byte(fmt.Sprint(i))) }
	for i := range 3 * bound {
		c.add(key(i), o, keyRef{})
		require.LessOrEqual(t, c.len(), bound)
	}
	assert.Equal(t, bound, c.len())
	// The newest entry of each shard is held; the oldest entries are gone.
	assert.NotNil(t, c.get(key(3*bound-1)))
	for i := range bound {
		assert.Nil(t, c.get(key(i)), "entry %d of the first round", i)
	}
}

// jwsCompact gives the answer of the CDDL's JwsCompact regular expression
// (anchored at both ends) on every input.
func TestJWSCompactForm(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)
	for _, s := range []string{
		"", ".", "..", "a.b.c", "a.b.c.", ".a.b", "a..b", "a.b", "a.b.c.d", "aZ09-_.b.c", "a.b.c\n", "\na.b.c",
		"a.b.c ", "a.b.=", "a+b.c.d", "a/b.c.d", "a.b.c\x00", "é.b.c", "a.b.\xff", "A.B.C", "abc", "a.b.cc",
	} {
		assert.Equal(t, re.MatchString(s), jwsCompact.MatchString(s), "%q", s)
		assert.Equal(t, re.Match([]byte(s)), jwsCompact.Match([]byte(s)), "%q", s)
	}
}

// HopID.Valid gives the answer of the regular expression of a hop
// identifier (22 to 64 base64url characters) on every input.
func FuzzHopIDValid(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9_-]{22,64}$`)
	for _, s := range []string{"", "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAA", strings.Repeat("a", 64), strings.Repeat("a", 65),
		"AAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAAA\n", "AAAAAAAAAAAAAAAAAAAA\u00e9", "-_-_-_-_-_-_-_-_-_-_-_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if re.MatchString(s) != HopID(s).Valid() {
			t.Fatalf("%q: regexp %v, Valid %v", s, re.MatchString(s), HopID(s).Valid())
		}
	})
}

func FuzzJWSCompactForm(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)
	for _, s := range []string{"a.b.c", "a..c", "a.b.c.d", "a.b.c\n", "-_.x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if re.MatchString(s) != jwsCompact.MatchString(s) || re.Match([]byte(s)) != jwsCompact.Match([]byte(s)) {
			t.Fatalf("%q: regexp %v, jwsCompact %v", s, re.MatchString(s), jwsCompact.MatchString(s))
		}
	})
}

func BenchmarkJWSCompactForm(b *testing.B) {
	w := newWorld(b, JWS, rxPlanner, rxCoder)
	s := string(w.offer(rxPlanner, rxCoder, nil).Octets)
	re := regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if !jwsCompact.MatchString(s) {
			b.Fatal("no match")
		}
	}
	b.StopTimer()
	m := medians(benchRounds, func() { jwsCompact.MatchString(s) }, func() { re.MatchString(s) })
	b.ReportMetric(m[0]/m[1], "x-regexp")
}

// Section 5.3: check 1 (every element's signature) comes before checks 2
// to 4, so a chain with both a bad signature and a broken link is refused
// for the signature, wherever each sits, sequentially or in parallel. The
// newest failing element is the one reported.
func TestChain_HC46_SignatureBeforeLink(t *testing.T) {
	ids := benchIDs(4)
	w := newWorld(t, JWS, ids...)
	bogus := digest.SHA256([]byte("not the element before"))
	for _, tc := range []struct {
		bad    []int
		broken int
		want   outcome
	}{
		{bad: []int{1}, broken: 3, want: outcome{Check: CheckChain, Reason: reason.BadSignature, Index: 1}},
		{bad: []int{3}, broken: 1, want: outcome{Check: CheckChain, Reason: reason.BadSignature, Index: 3}},
		{bad: []int{0, 2}, broken: 4, want: outcome{Check: CheckChain, Reason: reason.BadSignature, Index: 2}},
		{broken: 2, want: outcome{Check: CheckChain, Reason: reason.BrokenChain, Index: 2}},
	} {
		elems := w.path(func(i int, o *Offer) {
			if i == tc.broken {
				o.Prev = &bogus
			}
		}, ids...)
		for _, i := range tc.bad {
			elems[i] = tamperSignature(t, elems[i])
		}
		data := encodeHandoff(t, handoffOf(elems...), JSON)
		for _, workers := range []int{0, 1, 2, 8} {
			a := w.agent(ids[len(ids)-1], func(c *Config) { c.Chain.Workers = workers })
			got := outcomeOf(receive(t, a, data, Host{}))
			got.Detail, got.State = "", ""
			assert.Equal(t, tc.want, got, "bad %v, broken link %d, workers %d", tc.bad, tc.broken, workers)
		}
	}
}

// decodeB64u accepts exactly the strings that decode and encode back to
// themselves, as its earlier form checked by encoding again.
func FuzzDecodeB64u(f *testing.F) {
	for _, s := range []string{"", "A", "AA", "AB", "AAA", "AAB", "AAAA", "AQ", "AR", "AA==", "A\nA", "AA\r", "+/", "-_",
		"AAAA\n", "\nAAAA", "aGVsbG8", "aGVsbG9", "aGVsbG8=", "a b", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := b64u.Decode(s)
		want, werr := base64.RawURLEncoding.Strict().DecodeString(s)
		ok := s != "" && werr == nil && base64.RawURLEncoding.EncodeToString(want) == s
		if (err == nil) != ok || (ok && !bytes.Equal(got, want)) {
			t.Fatalf("%q: decodeB64u %x, %v; reference %x, canonical %v", s, got, err, want, ok)
		}
	})
}

// ChainPolicy.StructureFirst: the structure (checks 2 to 6 of section 5.3)
// is checked on the decoded elements before any element's signature, so a
// chain with both a bad signature and a broken link or a cycle is refused
// for the structure (where the draft's order gives bad-signature); a chain
// with a bad signature and a sound structure is refused for the signature
// as in the draft's order; an element that does not decode fails check 1
// first in both orders; an intact chain is accepted with every link
// verified, cached or not, on one goroutine or several.
func TestChain_HC46_StructureFirst(t *testing.T) {
	ids := benchIDs(4)
	a, b, c, d, rx := ids[0], ids[1], ids[2], ids[3], ids[5]
	straight := []AgentID{a, b, c, d, ids[4], rx}
	cycle := []AgentID{a, b, a, c, d, rx} // a is iss of elements 0 and 2
	type want struct {
		reason reason.Code
		index  int
	}
	for _, f := range []Format{JWS, COSE} {
		w := newWorld(t, f, ids...)
		for _, tc := range []struct {
			name          string
			path          []AgentID
			bad           []int // elements whose signature is altered; later elements link to the altered octets
			broken        int   // the element whose prev names something else; -1: none
			garbage       int   // an element replaced by octets that do not decode; -1: none
			draft, sfirst want
		}{
			{"bad 1, broken 3", straight, []int{1}, 3, -1, want{reason.BadSignature, 1}, want{reason.BrokenChain, 3}},
			{"bad 3, broken 1", straight, []int{3}, 1, -1, want{reason.BadSignature, 3}, want{reason.BrokenChain, 1}},
			{"all bad, the offer's link broken", straight, []int{0, 1, 2, 3}, 4, -1, want{reason.BadSignature, 3}, want{reason.BrokenChain, 4}},
			{"all bad, a cycle", cycle, []int{0, 1, 2, 3}, -1, -1, want{reason.BadSignature, 3}, want{reason.Cycle, 2}},
			{"bad 2, sound structure", straight, []int{2}, -1, -1, want{reason.BadSignature, 2}, want{reason.BadSignature, 2}},
			{"not decodable 0, bad 1, broken 3", straight, []int{1}, 3, 0, want{reason.BadSignature, 1}, want{reason.BadSignature, 0}},
			{"intact", straight, nil, -1, -1, want{"", -2}, want{"", -2}},
		} {
			var elems []Signed
			for i := 0; i+1 < len(tc.path); i++ {
				o := w.draftOffer(tc.path[i], tc.path[i+1])
				if i > 0 {
					dg := elems[i-1].Digest()
					o.Prev = &dg
				}
				if i == tc.broken {
					bogus := digest.SHA256([]byte("not the element before"))
					o.Prev = &bogus
				}
				s := w.signAs(o.Iss, o)
				if slices.Contains(tc.bad, i) {
					s = tamperSignature(t, s)
				}
				if i == tc.garbage {
					s = Signed{Format: f, Octets: garbageElement(f)}
				}
				elems = append(elems, s)
			}
			data := encodeHandoff(t, handoffOf(elems...), JSON)
			for _, sf := range []bool{false, true} {
				exp := tc.draft
				if sf {
					exp = tc.sfirst
				}
				for _, workers := range []int{0, 2} {
					for _, cache := range []int{-1, 0} {
						// A store that forgets, so that the second round runs
						// every check again and finds the verified elements
						// in cache.
						ag := w.agent(rx, func(c *Config) {
							c.Chain.StructureFirst, c.Chain.Workers, c.VerifiedCache = sf, workers, cache
							c.Store = forgetful{}
						})
						for round := range 2 {
							msg := fmt.Sprintf("%s: %s, structure first %v, workers %d, cache %d, round %d", f, tc.name, sf, workers, cache, round)
							in := receive(t, ag, data, Host{})
							got := outcomeOf(in)
							if exp.reason == "" {
								require.True(t, in.Accepted(), "%s: %s", msg, in.Detail())
								assert.Equal(t, ChainFull, in.Chain(), msg)
								require.Len(t, in.Links(), len(elems)-1, msg)
								for _, l := range in.Links() {
									assert.True(t, l.Verified, msg)
								}
								continue
							}
							assert.Equal(t, outcome{Check: CheckChain, Reason: exp.reason, Index: exp.index},
								outcome{Check: got.Check, Reason: got.Reason, Index: got.Index}, msg)
						}
					}
				}
			}
		}
	}
}

// garbageElement is a chain element of form f whose octets are not a
// signed handoff.
func garbageElement(f Format) []byte {
	if f == COSE {
		return []byte{0xd2, 0x84, 0x40, 0xa0, 0x40, 0x40} // tag 18, four empty members
	}
	return []byte("eyJhbGciOiJFUzI1NiJ9.e30.AAAA")
}
