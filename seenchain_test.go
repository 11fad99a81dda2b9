package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/internal/b64u"
	"github.com/agentproto/handoff/reason"
	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Receive leaves the JwsCompact test of a chain element that holds a
// period to step 6, where an element verified before skips it
// (parseHandoff, Handoff.checkForms). These tests hold that a Handoff so
// read, its forms then checked, is the Handoff ParseHandoff returns, and
// that Receive refuses what ParseHandoff's ChainErr names.

// deferredFormCases returns Handoff objects in JSON and CBOR whose chain
// holds text that has a period but is no JWS, next to good elements and
// to elements that fail for another reason.
func deferredFormCases(t *testing.T) map[string][]byte {
	t.Helper()
	w := newWorld(t, JWS, benchIDs(3)...)
	elems := w.path(nil, benchIDs(3)...)
	chain := []string{string(elems[0].Octets), string(elems[1].Octets), string(elems[2].Octets)}
	offer := string(elems[3].Octets)
	long := strings.Repeat("a", 40) + "." + strings.Repeat("b", 40) + ".c"
	bad := map[string]any{
		"dots3":     "a.b.c.d",
		"empty run": "a..b",
		"lead dot":  ".ab.c",
		"trail dot": "ab.c.",
		"bad char":  "ab.c$d.e",
		"padded":    "ab.cd.e=",
		"space":     "ab.cd. e",
		"utf8":      "ab.cd.é",
		"escaped":   "ab\u0000.c.d",
		"long":      long,
		"number":    7,
		"bytes":     []byte("a.b.c"),
	}
	out := map[string][]byte{}
	for name, v := range bad {
		for _, at := range []int{0, 1, 2} {
			for _, other := range []any{nil, "a.b.c.d", 3, "no-period"} {
				c := make([]any, len(chain))
				for i := range chain {
					c[i] = chain[i]
				}
				c[at] = v
				if other != nil {
					c[(at+1)%len(c)] = other
				}
				m := map[string]any{"offer": offer, "chain": c}
				key := fmt.Sprintf("%s/at=%d/other=%v", name, at, other)
				if _, isBytes := v.([]byte); !isBytes {
					j, err := json.Marshal(m)
					require.NoError(t, err)
					out[key+"/json"] = j
				}
				cb, err := cbor.Marshal(m)
				require.NoError(t, err)
				out[key+"/cbor"] = cb
			}
		}
	}
	// A JSON text with an escaped period is read as the text it stands for.
	out["escaped period/json"] = []byte(`{"offer":"` + offer + `","chain":["` + strings.Replace(chain[0], ".", `\u002e`, 1) + `","a.b\u002ec.d"]}`)
	return out
}

func TestParseHandoff_DeferredFormsAsParsed(t *testing.T) {
	for _, lim := range []Limits{{}, {MaxElementSize: 60}, {Strict: true}} {
		for name, data := range deferredFormCases(t) {
			t.Run(fmt.Sprintf("%s/max=%d", name, lim.MaxElementSize), func(t *testing.T) {
				want, wantEnc, wantErr := ParseHandoff(data, lim)
				got, enc, err := parseHandoff(data, lim, true)
				if wantErr != nil {
					require.EqualError(t, err, wantErr.Error())
					return
				}
				require.NoError(t, err)
				require.Equal(t, wantEnc, enc)
				got.checkForms(lim.withDefaults(), nil)
				require.Equal(t, want, got)
			})
		}
	}
}

// TestReceive_DeferredFormsRefused: each case is refused at step 6 with
// the failure ParseHandoff names, by a receiver that verified the good
// elements before and by one without a cache; Received.Handoff is what
// ParseHandoff returns, whichever check ended the receive.
func TestReceive_DeferredFormsRefused(t *testing.T) {
	ids := benchIDs(3)
	w := newWorld(t, JWS, ids...)
	elems := w.path(nil, ids...)
	good := encodeHandoff(t, handoffOf(elems...), JSON)
	ctx := context.Background()
	for _, cache := range []int{0, -1} {
		a := w.agent(ids[4], func(c *Config) { c.Store = forgetful{}; c.VerifiedCache = cache })
		in, err := a.Receive(ctx, good, Host{})
		require.NoError(t, err)
		require.True(t, in.Accepted(), in.Detail())
		for _, h := range []*Handoff{
			{Offer: elems[3], Chain: []Signed{elems[0], {Format: JWS, Octets: []byte("a.b.c.d")}, elems[2]}},
			{Offer: elems[3], Chain: []Signed{{Format: JWS, Octets: []byte("ab.c$d.e")}, elems[1], elems[2]}},
			{Offer: elems[3], Chain: []Signed{elems[0], elems[1], {Format: JWS, Octets: append([]byte(nil), elems[2].Octets[:len(elems[2].Octets)-1]...)}}},
		} {
			raw := map[string]any{"offer": string(h.Offer.Octets)}
			var c []string
			for _, e := range h.Chain {
				c = append(c, string(e.Octets))
			}
			raw["chain"] = c
			data, err := json.Marshal(raw)
			require.NoError(t, err)
			parsed, _, err := ParseHandoff(data, a.lim)
			require.NoError(t, err)
			wantErr := parsed.chainErrOf()
			if bytes.Equal(h.Chain[2].Octets, elems[2].Octets[:len(elems[2].Octets)-1]) {
				require.NoError(t, wantErr, "a JWS form, its signature cut")
			} else {
				require.Error(t, wantErr)
			}
			in, err := a.Receive(ctx, data, Host{})
			require.NoError(t, err)
			require.False(t, in.Accepted())
			assert.Equal(t, CheckChain, in.Check())
			if wantErr != nil {
				assert.Equal(t, reason.BadSignature, in.Reason())
				var ce *chainError
				require.ErrorAs(t, in.Err(), &ce)
				assert.Equal(t, wantErr.Error(), ce.Error())
			}
			assert.Equal(t, parsed, in.Handoff())

			// Refused before step 6 (another audience): the Handoff is
			// still the one ParseHandoff returns.
			other := w.agent(ids[0], func(c *Config) { c.Store = forgetful{}; c.VerifiedCache = cache })
			in, err = other.Receive(ctx, data, Host{})
			require.NoError(t, err)
			assert.Equal(t, CheckAudience, in.Check())
			assert.Equal(t, parsed, in.Handoff())
		}
	}
}

// FuzzParseHandoffDeferred: for any input, a Handoff read as a receiver
// reads it, with its forms deferred and then checked and its unknown
// members then built, is the Handoff ParseHandoff returns, but for a chain
// longer than the receiver's bound (readBound): it holds that chain's
// first elements and its length, and the elements past the bound, only
// counted, can neither fail it nor name its failing element.
func FuzzParseHandoffDeferred(f *testing.F) {
	fx := fuzzFixture(f)
	for _, b := range fx.handoffs {
		f.Add(b)
	}
	f.Add([]byte(`{"offer":"a.b.c","chain":["a.b.c.d","x.y.z",1]}`))
	f.Add([]byte(`{"offer":"a.b.c","chain":["a.b.c",".b.c","0oRAoEBA"]}`))
	f.Add([]byte(`{"offer":"a.b.c","chain":["a.b.c","a.b.c","a.b.c",1,2]}`))
	f.Add([]byte{0xa2, 0x65, 'o', 'f', 'f', 'e', 'r', 0x65, 'a', '.', 'b', '.', 'c',
		0x65, 'c', 'h', 'a', 'i', 'n', 0x84, 0x40, 0x40, 0x61, 0xff, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range []Limits{{}, {MaxElementSize: 8}, {MaxChain: new(1)}} {
			bound := readBound(lim.withDefaults())
			want, wantEnc, wantErr := ParseHandoff(data, lim)
			got, enc, err := parseHandoff(data, lim, true)
			if wantErr != nil {
				// The receiver refuses it too, for the same reason, unless
				// that reason is an element past the bound, which it only
				// counts: read with no bound, it gives the same reason.
				all := lim
				all.MaxChain = new(math.MaxInt32 - 1)
				_, _, errAll := parseHandoff(data, all, true)
				require.EqualError(t, errAll, wantErr.Error())
				if err != nil {
					requireTyped(t, err)
					require.Nil(t, got)
				} else {
					require.Greater(t, got.chainLen, bound)
				}
				continue
			}
			require.NoError(t, err)
			require.Equal(t, wantEnc, enc)
			got.checkForms(lim.withDefaults(), nil)
			got.fillExtra()
			if len(want.Chain) > bound {
				require.Equal(t, want.Chain[:bound], got.Chain)
				require.Equal(t, len(want.Chain), got.chainLen)
				got.Chain, got.chainLen = want.Chain, 0
				if want.chainErr != nil && want.chainErr.Index >= bound {
					require.Nil(t, got.chainErr)
					got.chainErr = want.chainErr
				}
			}
			require.Equal(t, want, got)
		}
	})
}

// FuzzDecodeB64uOctets: the decoder of a COSE element held as octets is
// decodeB64u.
func FuzzDecodeB64uOctets(f *testing.F) {
	for _, s := range []string{"", "AA", "AB", "A", "0oRAoEBA", "a\nb", "a=", "-_-_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, wantErr := b64u.Decode(s)
		got, err := decodeB64uOctets([]byte(s))
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error())
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}

// TestCheckStructure_CyclesShortAndLong: the cycle check (HC-49) gives the
// same outcome by its look back over a short chain and by its map over a
// long one: both against a plain reference, on chains whose issuers repeat,
// with and without an allowed re-entry.
func TestCheckStructure_CyclesShortAndLong(t *testing.T) {
	const self = AgentID("self")
	reference := func(iss []AgentID, allow []AgentID) string {
		seen := map[AgentID]int{}
		for i, id := range iss {
			if j, dup := seen[id]; dup && !slices.Contains(allow, id) {
				return fmt.Sprintf("%d:%d", j, i)
			}
			seen[id] = i
		}
		return ""
	}
	rng := mrand.New(mrand.NewPCG(22, 16))
	for _, n := range []int{1, 5, shortChain - 2, shortChain - 1, shortChain, shortChain + 8, 3 * shortChain} {
		for round := range 40 {
			// Issuers drawn from an alphabet about as large as the chain,
			// so that some chains repeat one and some do not.
			alphabet := n + 1 + rng.IntN(n+2)
			iss := make([]AgentID, n+1)
			for i := range iss {
				iss[i] = AgentID(fmt.Sprintf("agent-%d", rng.IntN(alphabet)))
			}
			var allow []AgentID
			if round%2 == 1 {
				allow = []AgentID{iss[rng.IntN(n+1)]}
			}
			digests := make([]digest.Digest, n)
			elems := make([]element, n)
			offers := make([]*Offer, n+1)
			for i := range offers {
				offers[i] = &Offer{Iss: iss[i], Iat: 100, Exp: 200}
				if i > 0 {
					offers[i-1].Aud = iss[i]
					p := digests[i-1]
					offers[i].Prev = &p
				}
				if i < n {
					digests[i] = digest.SHA256([]byte(fmt.Sprint(round, i)))
					elems[i] = element{offer: offers[i], verified: true}
				}
			}
			offers[n].Aud = self
			_, cerr := checkStructure(elems, digests, offers[n], self, ChainPolicy{AllowReentry: allow}, 0)
			want := reference(iss, allow)
			if want == "" {
				require.Nil(t, cerr, "n=%d %v", n, iss)
				continue
			}
			require.NotNil(t, cerr, "n=%d %v", n, iss)
			require.Equal(t, reason.Cycle, cerr.Reason)
			var j, i int
			_, err := fmt.Sscanf(want, "%d:%d", &j, &i)
			require.NoError(t, err)
			require.Equal(t, i, cerr.Index)
			require.Equal(t, fmt.Sprintf("%q is iss of elements %d and %d", iss[i], j, i), cerr.Detail)
		}
	}
}

// TestParseHandoff_ElementsAtAnyOffset: elements are located by the JSON
// decoder's input offset, so white space around and between them, and
// escapes inside them, change nothing but the octets they stand for.
func TestParseHandoff_ElementsAtAnyOffset(t *testing.T) {
	for _, f := range []Format{JWS, COSE} {
		ids := benchIDs(3)
		w := newWorld(t, f, ids...)
		want := handoffOf(w.path(nil, ids...)...)
		compact := encodeHandoff(t, want, JSON)
		var m map[string]any
		require.NoError(t, json.Unmarshal(compact, &m))
		m["https://example.com/x"] = map[string]any{"a": []any{1, "two"}}
		indented, err := json.MarshalIndent(m, "\t ", "\r\n  ")
		require.NoError(t, err)
		escaped := bytes.Replace(indented, []byte(`"e`), []byte(`"\u0065`), -1) // the first octet of each JWS
		for name, data := range map[string][]byte{
			"compact":  compact,
			"indented": append(append([]byte(" \n"), indented...), "\n\t "...),
			"escaped":  escaped,
		} {
			got, enc, err := ParseHandoff(data, Limits{})
			require.NoError(t, err, name)
			require.Equal(t, JSON, enc)
			require.NoError(t, got.chainErrOf(), name)
			assert.Equal(t, want.Offer, got.Offer, "%s %s", f, name)
			assert.Equal(t, want.Chain, got.Chain, "%s %s", f, name)
		}
	}
}
