package scitt_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/veraison/go-cose"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/handofftest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/scitt"
)

// vector is one file of testdata/vectors (see testdata/README.md).
type vector struct {
	Description string         `json:"description"`
	Ref         map[string]any `json:"ref"`
	Statement   string         `json:"statement"`
	TrustedKeys []struct {
		KID string          `json:"kid"`
		Alg string          `json:"alg"`
		JWK json.RawMessage `json:"jwk"`
	} `json:"trusted_keys"`
	Outcome string `json:"outcome"`
	Error   string `json:"error"`

	name      string
	ref       ref.Ref
	statement []byte
	checker   *scitt.Checker
}

var b64 = base64.RawURLEncoding

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
		require.NoError(t, json.Unmarshal(b, v), f)
		dig := v.Ref["dig"].(map[string]any)
		val, err := b64.DecodeString(dig["val"].(string))
		require.NoError(t, err)
		v.ref = ref.Ref{Kind: v.Ref["kind"].(string), Dig: digest.Digest{Alg: dig["alg"].(string), Val: val}}
		v.ref.Loc, _ = v.Ref["loc"].(string)
		if p, ok := v.Ref["proof"]; ok {
			v.ref.Proof = p // JSON form: base64url text
		}
		if v.Statement != "" {
			v.statement, err = b64.DecodeString(v.Statement)
			require.NoError(t, err)
		}
		v.checker = &scitt.Checker{}
		for _, k := range v.TrustedKeys {
			var jwk jose.JSONWebKey
			require.NoError(t, jwk.UnmarshalJSON(k.JWK))
			require.Equal(t, "ES256", k.Alg)
			kid, err := b64.DecodeString(k.KID)
			require.NoError(t, err)
			v.checker.Keys = append(v.checker.Keys, scitt.Key{KID: kid, Alg: cose.AlgorithmES256, Public: jwk.Key})
		}
		out = append(out, v)
	}
	return out
}

func (v *vector) source() ref.Source {
	objs := map[string]ref.Object{}
	if v.statement != nil {
		objs[v.ref.Loc] = ref.Object{Octets: v.statement}
	}
	return ref.ByLoc(objs)
}

var sentinels = map[string]error{
	"ErrStatement":    scitt.ErrStatement,
	"ErrReceipt":      scitt.ErrReceipt,
	"ErrUntrustedKey": scitt.ErrUntrustedKey,
	"ErrInclusion":    scitt.ErrInclusion,
}

// Every vector, with the proof in its JSON form (base64url text) and its
// CBOR form (a byte string): the outcome is the one the vector names, and
// the failure class is the one it names (HC-68, HC-11, HC-08).
func TestVectors_HC68_HC11(t *testing.T) {
	outcomes := map[string]int{}
	for _, v := range loadVectors(t) {
		for _, form := range []string{"json", "cbor"} {
			t.Run(v.name+"/"+form, func(t *testing.T) {
				r := v.ref
				if s, ok := r.Proof.(string); ok && form == "cbor" {
					b, err := b64.DecodeString(s)
					require.NoError(t, err)
					r.Proof = b
				}
				cs := ref.Checkers{ref.KindSCITTReceipt: v.checker}
				require.NoError(t, cs.Validate())
				res := cs.Check(context.Background(), r, v.source())
				assert.Equal(t, ref.Outcome(v.Outcome), res.Outcome, "%s: %s", v.Description, res.Detail)
				if res.Outcome != ref.Verified {
					assert.NotEmpty(t, res.Detail)
				}
				outcomes[v.Outcome]++
				if want, ok := sentinels[v.Error]; ok {
					err := failure(v, r)
					require.ErrorIs(t, err, want, v.Description)
					assert.Contains(t, res.Detail, err.Error(), "the detail is the error")
				}
			})
		}
	}
	for _, o := range []string{"verified", "mismatch", "unverifiable"} {
		assert.NotZero(t, outcomes[o], "no vector drives %s", o)
	}
	// The scenarios the vector set must cover are all there.
	have := map[string]bool{}
	for _, v := range loadVectors(t) {
		have[v.name] = true
	}
	for _, name := range []string{"valid", "wrong-digest", "valid-unprotected-header-ignored", "unprotected-header-digested",
		"valid-protected-receipt", "protected-receipt-dropped", "wrong-ts-key", "wrong-index", "wrong-tree-size",
		"sibling-flipped", "truncated-receipt", "statement-unavailable"} {
		assert.True(t, have[name], "vector %s is missing", name)
	}
}

// failure is the error of the step that fails for v.
func failure(v *vector, ref ref.Ref) error {
	if _, err := scitt.NormalizeStatement(v.statement); err != nil {
		return err
	}
	rc, err := scitt.ReceiptFromProof(ref.Proof)
	if err != nil {
		return err
	}
	return v.checker.VerifyReceipt(v.statement, rc)
}

// The digest ignores the unprotected header and keeps the protected one:
// the two statements of the vectors that differ only in their unprotected
// header have one digest, which is dig of the valid vector.
func TestStatementDigest_HC68_UnprotectedIgnored(t *testing.T) {
	byName := map[string]*vector{}
	for _, v := range loadVectors(t) {
		byName[v.name] = v
	}
	plain, withUnprot := byName["valid"], byName["valid-unprotected-header-ignored"]
	require.NotEqual(t, plain.statement, withUnprot.statement)
	d1, err := scitt.StatementDigest(plain.statement)
	require.NoError(t, err)
	d2, err := scitt.StatementDigest(withUnprot.statement)
	require.NoError(t, err)
	assert.True(t, d1.Equal(d2))
	assert.True(t, d1.Equal(plain.ref.Dig))
	assert.False(t, digest.SHA256(withUnprot.statement).Equal(d1), "the statement as delivered hashes differently")

	n, err := scitt.NormalizeStatement(withUnprot.statement)
	require.NoError(t, err)
	assert.Equal(t, byte(0xd2), n[0], "tagged COSE_Sign1")
	// An untagged statement is tagged before hashing.
	d3, err := scitt.StatementDigest(plain.statement[1:])
	require.NoError(t, err)
	assert.True(t, d1.Equal(d3))

	prot := byName["valid-protected-receipt"]
	dp, err := scitt.StatementDigest(prot.statement)
	require.NoError(t, err)
	assert.True(t, dp.Equal(prot.ref.Dig))
	assert.False(t, dp.Equal(byName["protected-receipt-dropped"].ref.Dig))
}

// ReceiptFromProof takes exactly the two forms of appendix A.
func TestReceiptFromProof_HC68(t *testing.T) {
	b, err := scitt.ReceiptFromProof("0oQ")
	require.NoError(t, err)
	assert.Equal(t, []byte{0xd2, 0x84}, b)
	b, err = scitt.ReceiptFromProof([]byte{1, 2})
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 2}, b)
	for _, bad := range []any{nil, "0oQ=", "0o+/", "!!", 42, map[string]any{}} {
		_, err := scitt.ReceiptFromProof(bad)
		assert.ErrorIs(t, err, scitt.ErrReceipt, "%v", bad)
	}
}

// A checker that trusts no key, or whose key is pinned to another alg,
// verifies nothing; a checker asked about another kind says so.
func TestChecker_HC68_KeysPinned(t *testing.T) {
	var valid, unprot *vector
	for _, v := range loadVectors(t) {
		switch v.name {
		case "valid":
			valid = v
		case "valid-unprotected-header-ignored":
			unprot = v
		}
	}
	require.NotNil(t, valid)
	require.NotNil(t, unprot)
	ctx := context.Background()
	assert.Equal(t, ref.Verified, valid.checker.CheckRef(ctx, valid.ref, valid.source()).Outcome)

	none := &scitt.Checker{}
	res := none.CheckRef(ctx, valid.ref, valid.source())
	assert.Equal(t, ref.Unverifiable, res.Outcome)

	k := valid.checker.Keys[0]
	k.Alg = cose.AlgorithmES384
	res = (&scitt.Checker{Keys: []scitt.Key{k}}).CheckRef(ctx, valid.ref, valid.source())
	assert.Equal(t, ref.Unverifiable, res.Outcome, "a P-256 key pinned to ES384 verifies nothing")

	k = valid.checker.Keys[0]
	k.KID = nil // a key without a kid is tried on any receipt
	res = (&scitt.Checker{Keys: []scitt.Key{k}}).CheckRef(ctx, valid.ref, valid.source())
	assert.Equal(t, ref.Verified, res.Outcome)

	other := valid.ref
	other.Kind = ref.KindLearnlogHead
	assert.Equal(t, ref.Unverifiable, valid.checker.CheckRef(ctx, other, valid.source()).Outcome)

	// A caller-supplied entry rule that does not match the log: the
	// statement as delivered, unprotected header included.
	wrongEntry := &scitt.Checker{Keys: unprot.checker.Keys, Entry: func(s []byte) ([]byte, error) { return s, nil }}
	res = wrongEntry.CheckRef(ctx, unprot.ref, unprot.source())
	assert.Equal(t, ref.Unverifiable, res.Outcome)
	entryErr := &scitt.Checker{Keys: valid.checker.Keys, Entry: func([]byte) ([]byte, error) { return nil, errors.New("no entry") }}
	assert.Equal(t, ref.Unverifiable, entryErr.CheckRef(ctx, valid.ref, valid.source()).Outcome)
}

// ---- the receive pipeline ----

const (
	delegator = handoff.AgentID("spiffe://a.example/agent/planner")
	delegate  = handoff.AgentID("spiffe://b.example/agent/coder")
)

func agents(t *testing.T, f handoff.Format, pol ref.Policy, cs ref.Checkers, src ref.Source) (*handoff.Agent, *handoff.Agent) {
	t.Helper()
	w := handofftest.NewWorld(t, delegator, delegate).In(f)
	w.Clock().Set(time.Unix(1793000000, 0))
	return w.Agent(delegator), w.Agent(delegate, func(c *handoff.Config) {
		c.Refs, c.RefCheckers = pol, cs
		c.RefSource = src
	})
}

// Step 7 with a scitt-receipt reference, in both signed forms and both
// encodings: under RefsRequired a verified reference is accepted, a
// mismatch rejected with ref-mismatch, an unverifiable one with
// unverifiable-ref (HC-68, HC-11).
func TestReceive_HC68_HC11_Pipeline(t *testing.T) {
	ctx := context.Background()
	want := map[string]reason.Code{"verified": "", "mismatch": reason.RefMismatch, "unverifiable": reason.UnverifiableRef}
	for _, v := range loadVectors(t) {
		for _, f := range []handoff.Format{handoff.JWS, handoff.COSE} {
			for _, enc := range []handoff.Encoding{handoff.JSON, handoff.CBOR} {
				t.Run(v.name, func(t *testing.T) {
					cs := ref.Checkers{ref.KindSCITTReceipt: v.checker}
					from, to := agents(t, f, ref.CheckRequired, cs, v.source())
					r := v.ref
					if s, ok := r.Proof.(string); ok {
						r.Proof, _ = b64.DecodeString(s) // the codec writes base64url text in JSON
					}
					out, err := from.Offer(ctx, handoff.OfferParams{To: delegate, Dialog: "ctx-1", Refs: []ref.Ref{r}})
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

// Without a registered checker the kind stays unverifiable, and under
// RefsCheckAvailable an unverifiable receipt is reported without rejecting.
func TestReceive_HC68_Unregistered(t *testing.T) {
	ctx := context.Background()
	var valid *vector
	for _, v := range loadVectors(t) {
		if v.name == "valid" {
			valid = v
		}
	}
	require.NotNil(t, valid)
	for _, c := range []struct {
		name   string
		pol    ref.Policy
		cs     ref.Checkers
		reason reason.Code
		out    ref.Outcome
	}{
		{"required, unregistered", ref.CheckRequired, nil, reason.UnverifiableRef, ref.Unverifiable},
		{"available, unregistered", ref.CheckAvailable, nil, "", ref.Unverifiable},
		{"available, registered", ref.CheckAvailable, ref.Checkers{ref.KindSCITTReceipt: valid.checker}, "", ref.Verified},
		{"not checked, registered", ref.CheckNone, ref.Checkers{ref.KindSCITTReceipt: valid.checker}, "", ref.NotChecked},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, to := agents(t, handoff.JWS, c.pol, c.cs, valid.source())
			out, err := from.Offer(ctx, handoff.OfferParams{To: delegate, Dialog: "ctx-1", Refs: []ref.Ref{valid.ref}})
			require.NoError(t, err)
			msg, err := out.Handoff.Encode(handoff.JSON)
			require.NoError(t, err)
			in, err := to.Receive(ctx, msg, handoff.Host{})
			require.NoError(t, err)
			assert.Equal(t, c.reason, in.Reason())
			assert.Equal(t, c.out, in.Refs()[0].Outcome)
		})
	}
}
