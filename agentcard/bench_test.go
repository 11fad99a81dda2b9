package agentcard_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/agentcard"
)

// BenchmarkVerify is one card with one ES256 signature by the agent's key:
// the baseline of BenchmarkVerifyHostile.
func BenchmarkVerify(b *testing.B) {
	key := newKey(b)
	trust := trustFor(b, key)
	signed := mustSign(b, testCard, key, agentcard.SignOptions{})
	b.SetBytes(int64(len(signed)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := agentcard.Verify(signed, trust, coder, agentcard.VerifyOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyHostile is the most a stranger's card within
// DefaultMaxSize costs: the agent's signature copied into "signatures" as
// many times as the size limit allows, its last octet changed so that
// none verifies. Verify tries each trusted key at most twice per card, so
// the first copy costs an ECDSA verification under the key its kid names
// (with AllowDroppedEmpty, two) and every other copy its parsing and a
// refusal. Compare its ns/op with BenchmarkVerify's, run in the same
// invocation: x-valid is that ratio, both timed alternately in the same
// run (alternated).
func BenchmarkVerifyHostile(b *testing.B) {
	key := newKey(b)
	trust := trustFor(b, key)
	signed := mustSign(b, testCard, key, agentcard.SignOptions{})
	var c map[string]json.RawMessage
	require.NoError(b, json.Unmarshal(signed, &c))
	var sigs []map[string]string
	require.NoError(b, json.Unmarshal(c["signatures"], &sigs))
	sig, err := base64.RawURLEncoding.DecodeString(sigs[0]["signature"])
	require.NoError(b, err)
	sig[len(sig)-1] ^= 1 // the low bit of s: another signature, as costly to check
	sigs[0]["signature"] = base64.RawURLEncoding.EncodeToString(sig)
	one, err := json.Marshal(sigs[0])
	require.NoError(b, err)
	rest := len(signed) - len(c["signatures"])
	n := (agentcard.DefaultMaxSize - rest - 2) / (len(one) + 1)
	all := append([]byte{'['}, bytes.Repeat(append(one, ','), n)...)
	all[len(all)-1] = ']'
	c["signatures"] = all
	card, err := json.Marshal(c)
	require.NoError(b, err)
	require.LessOrEqual(b, len(card), agentcard.DefaultMaxSize)
	for _, dropped := range []bool{false, true} {
		name := "default"
		if dropped {
			name = "AllowDroppedEmpty"
		}
		b.Run(name, func(b *testing.B) {
			opts := agentcard.VerifyOptions{AllowDroppedEmpty: dropped}
			hostile := func() {
				if _, err := agentcard.Verify(card, trust, coder, opts); err == nil {
					b.Fatal("a hostile card verified")
				}
			}
			valid := func() {
				if _, err := agentcard.Verify(signed, trust, coder, opts); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(card)))
			for b.Loop() {
				hostile()
			}
			b.StopTimer()
			b.ReportMetric(float64(n), "signatures")
			b.ReportMetric(alternated(hostile, valid), "x-valid")
		})
	}
}

// alternated times f and base alternately, 31 times each, and returns the
// ratio of their median times: alternating puts both under the same
// machine conditions, and the median drops the turns a busy machine
// preempted.
func alternated(f, base func()) float64 {
	const turns = 31
	var tf, tb []time.Duration
	f()
	base() // warm up
	for range turns {
		t0 := time.Now()
		f()
		t1 := time.Now()
		base()
		tf, tb = append(tf, t1.Sub(t0)), append(tb, time.Since(t1))
	}
	slices.Sort(tf)
	slices.Sort(tb)
	return float64(tf[turns/2]) / float64(tb[turns/2])
}
