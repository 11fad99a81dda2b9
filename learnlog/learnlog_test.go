package learnlog_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/learnlog"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
)

// vector is one file of testdata/vectors (see testdata/README.md).
type vector struct {
	Description string         `json:"description"`
	Ref         map[string]any `json:"ref"`
	ProofText   string         `json:"proof_text"`
	TrustedKeys []struct {
		Alg string          `json:"alg"`
		JWK json.RawMessage `json:"jwk"`
	} `json:"trusted_keys"`
	Outcome string `json:"outcome"`
	Error   string `json:"error"`

	name    string
	ref     ref.Ref
	checker *learnlog.Checker
}

var b64 = base64.RawURLEncoding

// decode reads JSON as the handoff codec does: numbers kept as written.
func decode(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(v))
}

func loadVectors(t testing.TB) []*vector {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "vectors", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "run go run ./testdata/refvectors from the module root")
	var out []*vector
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		v := &vector{name: strings.TrimSuffix(filepath.Base(f), ".json")}
		decode(t, b, v)
		dig := v.Ref["dig"].(map[string]any)
		val, err := b64.DecodeString(dig["val"].(string))
		require.NoError(t, err)
		v.ref = ref.Ref{Kind: v.Ref["kind"].(string), Dig: digest.Digest{Alg: dig["alg"].(string), Val: val}}
		if p, ok := v.Ref["proof"]; ok {
			v.ref.Proof = p
		}
		if v.ProofText != "" {
			var p any
			decode(t, []byte(v.ProofText), &p)
			v.ref.Proof = p
		}
		v.checker = &learnlog.Checker{}
		for _, k := range v.TrustedKeys {
			var jwk jose.JSONWebKey
			require.NoError(t, jwk.UnmarshalJSON(k.JWK))
			v.checker.Keys = append(v.checker.Keys, learnlog.Key{Public: jwk.Key, Alg: jose.SignatureAlgorithm(k.Alg)})
		}
		out = append(out, v)
	}
	return out
}

var sentinels = map[string]error{
	"ErrHead":         learnlog.ErrHead,
	"ErrUntrustedKey": learnlog.ErrUntrustedKey,
	"ErrSignature":    learnlog.ErrSignature,
}

// Every vector through the dispatcher: the outcome and failure class are
// the ones it names (HC-69, HC-11, HC-08).
func TestVectors_HC69_HC11(t *testing.T) {
	outcomes := map[string]int{}
	for _, v := range loadVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			cs := ref.Checkers{ref.KindLearnlogHead: v.checker}
			require.NoError(t, cs.Validate())
			res := cs.Check(context.Background(), v.ref, nil) // no source: the head is the whole proof
			assert.Equal(t, ref.Outcome(v.Outcome), res.Outcome, "%s: %s", v.Description, res.Detail)
			if res.Outcome != ref.Verified {
				assert.NotEmpty(t, res.Detail)
			}
			outcomes[v.Outcome]++
			if want, ok := sentinels[v.Error]; ok && v.ref.Proof != nil {
				_, err := v.checker.Verify(v.ref.Proof)
				require.ErrorIs(t, err, want, v.Description)
				assert.Contains(t, res.Detail, err.Error(), "the detail is the error")
			}
		})
	}
	for _, o := range []string{"verified", "mismatch", "unverifiable"} {
		assert.NotZero(t, outcomes[o], "no vector drives %s", o)
	}
	// The scenarios the vector set must cover are all there.
	have := map[string]bool{}
	for _, v := range loadVectors(t) {
		have[v.name] = true
	}
	for _, name := range []string{"valid", "wrong-digest", "untrusted-key", "valid-received-not-jcs", "digest-over-received",
		"non-thumbprint-kid"} {
		assert.True(t, have[name], "vector %s is missing", name)
	}
}

// dig is over the JCS form, not the octets received: the head received as
// non-canonical text has the dig of the canonical head.
func TestHeadDigest_HC69_JCS(t *testing.T) {
	byName := map[string]*vector{}
	for _, v := range loadVectors(t) {
		byName[v.name] = v
	}
	received := byName["valid-received-not-jcs"]
	require.NotEmpty(t, received.ProofText)
	d, err := learnlog.HeadDigest(received.ref.Proof)
	require.NoError(t, err)
	assert.True(t, d.Equal(byName["valid"].ref.Dig), "same head, same dig")
	assert.False(t, digest.SHA256([]byte(received.ProofText)).Equal(d), "the received octets hash differently")
	c, err := learnlog.Canonical(received.ref.Proof)
	require.NoError(t, err)
	assert.Contains(t, string(c), `"seq":41,`)
	assert.True(t, strings.HasPrefix(string(c), `{"entry_hash":`), "members sorted")

	for _, bad := range []any{nil, "head", []any{}, map[string]any{"b": []byte{1}}, map[string]any{"x": struct{}{}}} {
		_, err := learnlog.HeadDigest(bad)
		assert.ErrorIs(t, err, learnlog.ErrHead, "%v", bad)
	}
}

// A verified head reports its members and the kid; keys are pinned to one
// alg; the zero Checker trusts nothing.
func TestChecker_HC69_Verify(t *testing.T) {
	var valid *vector
	for _, v := range loadVectors(t) {
		if v.name == "valid" {
			valid = v
		}
	}
	require.NotNil(t, valid)
	h, err := valid.checker.Verify(valid.ref.Proof)
	require.NoError(t, err)
	tp, err := valid.checker.Keys[0].Thumbprint()
	require.NoError(t, err)
	assert.Equal(t, tp, h.KID)
	assert.Equal(t, uint64(41), h.Seq)
	assert.NotEmpty(t, h.RecordHash)
	assert.NotEmpty(t, h.EntryHash)
	assert.NotNil(t, h.Time)

	_, err = (&learnlog.Checker{}).Verify(valid.ref.Proof)
	assert.ErrorIs(t, err, learnlog.ErrUntrustedKey)
	pinned := &learnlog.Checker{Keys: []learnlog.Key{{Public: valid.checker.Keys[0].Public, Alg: jose.ES384}}}
	_, err = pinned.Verify(valid.ref.Proof)
	assert.Error(t, err, "a key pinned to ES384 does not verify an ES256 head")

	other := valid.ref
	other.Kind = ref.KindSCITTReceipt
	assert.Equal(t, ref.Unverifiable, valid.checker.CheckRef(context.Background(), other, nil).Outcome)
}

// The members' types (appendix B as this package reads Learnlog).
func TestParseHead_HC69_Members(t *testing.T) {
	var valid *vector
	for _, v := range loadVectors(t) {
		if v.name == "valid" {
			valid = v
		}
	}
	require.NotNil(t, valid)
	base := valid.ref.Proof.(map[string]any)
	with := func(k string, val any) map[string]any {
		m := map[string]any{}
		for kk, vv := range base {
			m[kk] = vv
		}
		if val == nil {
			delete(m, k)
		} else {
			m[k] = val
		}
		return m
	}
	for name, head := range map[string]map[string]any{
		"seq negative":      with("seq", json.Number("-1")),
		"seq fraction":      with("seq", json.Number("41.5")),
		"seq text":          with("seq", "41"),
		"record_hash num":   with("record_hash", json.Number("1")),
		"entry_hash absent": with("entry_hash", nil),
		"time absent":       with("time", nil),
		"jws not text":      with("jws", json.Number("1")),
	} {
		_, err := valid.checker.Verify(head)
		assert.ErrorIs(t, err, learnlog.ErrHead, name)
	}
	// seq as CBOR gives it, and as 41.0: the same head.
	for _, seq := range []any{uint64(41), int64(41), float64(41), json.Number("41.0")} {
		_, err := valid.checker.Verify(with("seq", seq))
		assert.NoError(t, err, "%T %v", seq, seq)
	}
}

// ---- the receive pipeline ----

const (
	delegator = handoff.AgentID("spiffe://a.example/agent/tutor")
	delegate  = handoff.AgentID("spiffe://b.example/agent/grader")
)

func agents(t *testing.T, f handoff.Format, pol ref.Policy, cs ref.Checkers) (*handoff.Agent, *handoff.Agent) {
	t.Helper()
	w := handofftest.NewWorld(t, delegator, delegate).In(f)
	w.Clock().Set(time.Unix(1793000000, 0))
	return w.Agent(delegator), w.Agent(delegate, func(c *handoff.Config) {
		c.Refs, c.RefCheckers = pol, cs
	})
}

// Step 7 with a learnlog-head reference, in both signed forms and both
// encodings: under RefsRequired a verified head is accepted, a mismatch
// rejected with ref-mismatch, an unverifiable one with unverifiable-ref
// (HC-69, HC-11). The head crosses the wire inside the offer, so its dig
// must survive JSON and CBOR encoding.
func TestReceive_HC69_HC11_Pipeline(t *testing.T) {
	ctx := context.Background()
	want := map[string]reason.Code{"verified": "", "mismatch": reason.RefMismatch, "unverifiable": reason.UnverifiableRef}
	for _, v := range loadVectors(t) {
		for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
			for _, enc := range []handoff.Encoding{handoff.JSON, handoff.CBOR} {
				t.Run(v.name, func(t *testing.T) {
					from, to := agents(t, f, ref.CheckRequired, ref.Checkers{ref.KindLearnlogHead: v.checker})
					out, err := from.Offer(ctx, handoff.OfferParams{To: delegate, Dialog: "ctx-1", Refs: []ref.Ref{v.ref}})
					require.NoError(t, err)
					msg, err := out.Handoff.Encode(enc)
					require.NoError(t, err)
					in, err := to.Receive(ctx, msg, handoff.Host{Dialog: "ctx-1"})
					require.NoError(t, err)
					assert.Equal(t, want[v.Outcome], in.Reason(), in.Detail())
					assert.Equal(t, v.Outcome == "verified", in.Accepted())
					require.Len(t, in.Refs(), 1)
					assert.Equal(t, ref.Outcome(v.Outcome), in.Refs()[0].Outcome)
				})
			}
		}
	}
}
