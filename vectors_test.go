package handoff

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The conformance vectors of testdata/vectors (format in its README.md,
// written by the generator in testdata/vectors/gen). Each file is one receive scenario; these
// tests run every one against Agent.Receive and check that the set covers
// every reason code and chain state.

const vectorDir = "testdata/vectors"

var vectorFileName = regexp.MustCompile(`^([0-9]{3})-([a-z0-9-]+)\.json$`)

type vectorCase struct {
	Name        string                     `json:"name"`
	Description string                     `json:"description"`
	HC          []string                   `json:"hc"`
	Input       vectorInput                `json:"input"`
	Trust       map[string]json.RawMessage `json:"trust"`
	Receiver    vectorReceiver             `json:"receiver"`
	Prior       []string                   `json:"prior"`
	// What the vector says about conformance (level, basis, requires,
	// acceptable, why_open) is graded by cmd/handoff's runner and checked
	// against vector.schema.json there (TestVectorSchema).
	Level      string          `json:"level"`
	Basis      json.RawMessage `json:"basis"`
	Requires   []string        `json:"requires"`
	Acceptable json.RawMessage `json:"acceptable"`
	WhyOpen    string          `json:"why_open"`
	Expected   vectorExpected  `json:"expected"`
}

type vectorInput struct {
	Encoding    string          `json:"encoding"`
	HandoffB64  string          `json:"handoff_b64"`
	HandoffText string          `json:"handoff_text"`
	Decoded     json.RawMessage `json:"decoded"`
}

type vectorReceiver struct {
	Self             string                     `json:"self"`
	Now              int64                      `json:"now"`
	Dialog           string                     `json:"dialog"`
	Skew             int64                      `json:"skew"`
	MaxLifetime      int64                      `json:"max_lifetime"`
	MaxChain         int                        `json:"max_chain"`
	RequireFullChain bool                       `json:"require_full_chain"`
	TrustedOrigins   []string                   `json:"trusted_origins"`
	AllowReentry     []string                   `json:"allow_reentry"`
	RefsPolicy       string                     `json:"refs_policy"`
	RefObjects       map[string]vectorRefObject `json:"ref_objects"`
	MemoryLostAt     int64                      `json:"memory_lost_at"`
}

type vectorRefObject struct {
	OctetsB64 string `json:"octets_b64"`
	SaltB64   string `json:"salt_b64"`
}

type vectorExpected struct {
	Accepted       bool     `json:"accepted"`
	Retransmission bool     `json:"retransmission"`
	Reason         string   `json:"reason"`
	Chain          string   `json:"chain"`
	Refs           []string `json:"refs"`
	OfferDigest    string   `json:"offer_digest"`
}

// vectorFile is one file of the vectors with what its name says.
type vectorFile struct {
	file string // base name
	raw  []byte
	v    vectorCase
}

func loadVectors(t *testing.T) []vectorFile {
	t.Helper()
	entries, err := os.ReadDir(vectorDir)
	require.NoError(t, err)
	var out []vectorFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || e.Name() == "manifest.json" || e.Name() == "vector.schema.json" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(vectorDir, e.Name()))
		require.NoError(t, err)
		var v vectorCase
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&v), e.Name())
		out = append(out, vectorFile{file: e.Name(), raw: raw, v: v})
	}
	require.NotEmpty(t, out, "no vectors in %s", vectorDir)
	return out
}

func vectorB64(t *testing.T, s, what string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	require.NoError(t, err, "%s: not base64url without padding", what)
	return b
}

// vectorAgent builds the receiver a vector describes: its trust, a fixed
// clock, a fresh in-memory store, and its chain and reference policies.
func vectorAgent(t *testing.T, v vectorCase) *Agent {
	t.Helper()
	return vectorAgentProfile(t, v, false)
}

// vectorAgentProfile is vectorAgent, under the strict profile when strict.
func vectorAgentProfile(t *testing.T, v vectorCase, strict bool) *Agent {
	t.Helper()
	doc, err := json.Marshal(v.Trust)
	require.NoError(t, err)
	trust, err := parseTrustDoc(doc)
	require.NoError(t, err)

	r := v.Receiver
	objects := map[string]ref.Object{}
	for loc, o := range r.RefObjects {
		obj := ref.Object{Octets: vectorB64(t, o.OctetsB64, "octets_b64")}
		if o.SaltB64 != "" {
			obj.Salt = vectorB64(t, o.SaltB64, "salt_b64")
		}
		objects[loc] = obj
	}
	refs := map[string]ref.Policy{
		"not-checked": ref.CheckNone, "check-available": ref.CheckAvailable, "required": ref.CheckRequired,
	}
	pol, ok := refs[r.RefsPolicy]
	require.True(t, ok, "refs_policy %q", r.RefsPolicy)

	// The receiver's own key signs nothing here; any key will do.
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	signer, err := NewSigner(k, JWS, nil)
	require.NoError(t, err)

	at := time.Unix(r.Now, 0)
	cfg := Config{
		ID:          AgentID(r.Self),
		Signer:      signer,
		Trust:       trust,
		Now:         func() time.Time { return at },
		Skew:        new(time.Duration(r.Skew) * time.Second),
		MaxLifetime: new(time.Duration(r.MaxLifetime) * time.Second),
		Limits:      Limits{MaxChain: new(r.MaxChain), Strict: strict},
		Chain: ChainPolicy{
			RequireFull:    r.RequireFullChain,
			TrustedOrigins: vectorAgentIDs(r.TrustedOrigins),
			AllowReentry:   vectorAgentIDs(r.AllowReentry),
		},
		Refs:      pol,
		RefSource: ref.ByLoc(objects),
		// A vector's receiver only receives: its trust binds its ID to the
		// vector's key, whose private half it does not hold.
		TrustLacksSigner: true,
	}
	if r.MemoryLostAt != 0 {
		cfg.MemoryLostAt = time.Unix(r.MemoryLostAt, 0)
	}
	a, err := NewAgent(cfg)
	require.NoError(t, err)
	return a
}

func vectorAgentIDs(s []string) []AgentID {
	out := make([]AgentID, len(s))
	for i, id := range s {
		out[i] = AgentID(id)
	}
	return out
}

// pendingVectors are the vectors the draft decides one way and this
// package, today, the other: issue 14 lists each departure and the branches
// that fix it. Each entry names the point of issue 14. TestVectors still runs
// them: one that fails is reported as skipped with what the package did, and
// one that passes fails the test, so that its entry is removed as soon as the
// fix is merged. The list only shrinks.
var pendingVectors = map[string]string{}

// vectorOutcome is what the receiver decided, in the vectors' terms.
func vectorOutcome(in *Received) vectorExpected {
	out := vectorExpected{
		Accepted:       in.Accepted(),
		Retransmission: in.Retransmission(),
		Reason:         string(in.Reason()),
		Chain:          string(in.Chain()),
	}
	for _, r := range in.Refs() {
		out.Refs = append(out.Refs, string(r.Outcome))
	}
	if in.Handoff() != nil {
		out.OfferDigest = in.Digest().B64()
	}
	return out
}

func TestVectors(t *testing.T) {
	names := map[string]bool{}
	for _, f := range loadVectors(t) {
		names[f.v.Name] = true
		t.Run(strings.TrimSuffix(f.file, ".json"), func(t *testing.T) {
			v := f.v
			a := vectorAgent(t, v)
			ctx := context.Background()
			host := Host{Dialog: v.Receiver.Dialog}
			for i, p := range v.Prior {
				_, err := a.Receive(ctx, vectorB64(t, p, "prior"), host)
				require.NoError(t, err, "prior[%d]", i)
			}
			in, err := a.Receive(ctx, vectorB64(t, v.Input.HandoffB64, "handoff_b64"), host)
			require.NoError(t, err)

			e := v.Expected
			got := vectorOutcome(in)
			if in.Handoff() == nil {
				// The Handoff did not parse: there is no offer digest to
				// compare, and only a signed-form failure (the reason
				// compared below) can say so.
				got.OfferDigest = e.OfferDigest
			}
			if why, ok := pendingVectors[v.Name]; ok {
				if got.Accepted == e.Accepted && got.Retransmission == e.Retransmission && got.Reason == e.Reason &&
					got.Chain == e.Chain && slices.Equal(got.Refs, e.Refs) && got.OfferDigest == e.OfferDigest {
					t.Errorf("%s now reaches the draft's outcome: remove it from pendingVectors (%s)", v.Name, why)
					return
				}
				t.Skipf("pending (%s): want accepted=%v retransmission=%v reason=%q chain=%q; got accepted=%v retransmission=%v reason=%q chain=%q (%s)",
					why, e.Accepted, e.Retransmission, e.Reason, e.Chain,
					got.Accepted, got.Retransmission, got.Reason, got.Chain, in.Detail())
			}
			detail := in.Detail()
			assert.Equal(t, e.Accepted, got.Accepted, "accepted (%s: %s)", in.Reason(), detail)
			assert.Equal(t, e.Retransmission, got.Retransmission, "retransmission")
			assert.Equal(t, e.Reason, got.Reason, "reason (%s)", detail)
			assert.Equal(t, e.Chain, got.Chain, "chain")
			assert.Equal(t, e.Refs, got.Refs, "refs")
			assert.Equal(t, e.OfferDigest, got.OfferDigest, "offer_digest")
		})
	}
	for name := range pendingVectors {
		assert.True(t, names[name], "pendingVectors names %q, which is no vector", name)
	}
}

// TestVectorsWellFormed checks the files themselves: names, members, the
// text beside the bytes, and that the set covers every reason code, every
// chain state, both signed forms, a mixed chain and both encodings.
func TestVectorsWellFormed(t *testing.T) {
	files := loadVectors(t)
	hcID := regexp.MustCompile(`^HC-([0-9]{2})$`)
	states := []string{string(ChainAbsent), string(ChainPartial), string(ChainFull), string(ChainUnverifiable)}
	outcomes := []string{string(ref.Verified), string(ref.Mismatch), string(ref.Unverifiable), string(ref.NotChecked)}

	reasons := map[string][]string{}
	chains := map[string][]string{}
	encodings := map[string]bool{}
	formats := map[Format]bool{}
	var accepted, retransmissions, mixed, withPrior int
	seen := map[string]bool{}
	for i, f := range files {
		v, name := f.v, f.file
		m := vectorFileName.FindStringSubmatch(name)
		require.NotNil(t, m, "%s: file name is not <nnn>-<slug>.json", name)
		assert.Equal(t, fmt.Sprintf("%03d", i+1), m[1], "%s: files are numbered 001 on without gaps", name)
		assert.Equal(t, m[2], v.Name, "%s: name", name)
		assert.False(t, seen[v.Name], "%s: duplicate name", name)
		seen[v.Name] = true
		assert.NotEmpty(t, v.Description, "%s: description", name)
		require.NotEmpty(t, v.HC, "%s: hc", name)
		for _, id := range v.HC {
			m := hcID.FindStringSubmatch(id)
			if assert.NotNil(t, m, "%s: hc %q", name, id) {
				assert.True(t, m[1] >= "01" && m[1] <= "69", "%s: hc %q out of range", name, id)
			}
		}
		assert.NotEmpty(t, v.Trust, "%s: trust", name)
		assert.NotEmpty(t, v.Input.Decoded, "%s: decoded", name)
		r := v.Receiver
		assert.NotEmpty(t, r.Self, "%s: receiver.self", name)
		assert.Positive(t, r.Now, "%s: receiver.now", name)
		// Zero is a valid bound for each (issue 14 point 8).
		assert.GreaterOrEqual(t, r.Skew, int64(0), "%s: receiver.skew", name)
		assert.GreaterOrEqual(t, r.MaxLifetime, int64(0), "%s: receiver.max_lifetime", name)
		assert.GreaterOrEqual(t, r.MaxChain, 0, "%s: receiver.max_chain", name)
		assert.NotNil(t, r.TrustedOrigins, "%s: receiver.trusted_origins", name)
		assert.NotNil(t, r.AllowReentry, "%s: receiver.allow_reentry", name)
		assert.NotNil(t, r.RefObjects, "%s: receiver.ref_objects", name)
		assert.Contains(t, []string{"not-checked", "check-available", "required"}, r.RefsPolicy, name)
		for _, p := range v.Prior {
			vectorB64(t, p, name+": prior")
		}
		if len(v.Prior) > 0 {
			withPrior++
		}

		data := vectorB64(t, v.Input.HandoffB64, name+": handoff_b64")
		switch v.Input.Encoding {
		case "json":
			assert.Equal(t, string(data), v.Input.HandoffText, "%s: handoff_text is the octets", name)
		case "cbor":
			assert.Empty(t, v.Input.HandoffText, "%s: handoff_text only for json", name)
		default:
			t.Errorf("%s: encoding %q", name, v.Input.Encoding)
		}
		encodings[v.Input.Encoding] = true
		if h, enc, err := ParseHandoff(data, Limits{}); err == nil {
			assert.Equal(t, v.Input.Encoding, enc.String(), "%s: encoding", name)
			assert.Equal(t, h.Offer.Digest().B64(), v.Expected.OfferDigest, "%s: offer_digest", name)
			fs := map[Format]bool{h.Offer.Format: true}
			for _, c := range h.Chain {
				fs[c.Format] = true
			}
			if len(fs) == 2 {
				mixed++
			}
			for f := range fs {
				formats[f] = true
			}
		}

		e := v.Expected
		assert.NotEmpty(t, e.OfferDigest, "%s: offer_digest", name)
		switch {
		case e.Accepted:
			accepted++
			assert.False(t, e.Retransmission, "%s: accepted and retransmission", name)
			assert.Empty(t, e.Reason, "%s: accepted with a reason", name)
			assert.NotEmpty(t, e.Chain, "%s: an accepted offer went through step 6", name)
		case e.Retransmission:
			retransmissions++
			assert.Empty(t, e.Reason, "%s: retransmission with a reason", name)
			assert.NotEmpty(t, v.Prior, "%s: a retransmission needs a prior", name)
		default:
			assert.True(t, reason.Code(e.Reason).Defined(), "%s: reason %q", name, e.Reason)
			reasons[e.Reason] = append(reasons[e.Reason], name)
		}
		if e.Chain != "" {
			assert.Contains(t, states, e.Chain, name)
			chains[e.Chain] = append(chains[e.Chain], name)
		}
		for _, o := range e.Refs {
			assert.Contains(t, outcomes, o, name)
		}
	}

	for _, r := range reason.All() {
		assert.NotEmpty(t, reasons[string(r)], "no vector expects reason %q", r)
	}
	for _, s := range states {
		assert.NotEmpty(t, chains[s], "no vector expects chain state %q", s)
	}
	assert.Positive(t, accepted, "no accepted vector")
	assert.Positive(t, retransmissions, "no retransmission vector")
	assert.Positive(t, withPrior, "no vector with prior")
	assert.Positive(t, mixed, "no vector with a chain mixing JWS and COSE")
	assert.True(t, formats[JWS] && formats[COSE], "both signed forms: %v", formats)
	assert.True(t, encodings["json"] && encodings["cbor"], "both encodings: %v", encodings)

	// The draft-00 worked example is among them, byte for byte.
	draft, err := os.ReadFile(filepath.Join("testdata", "draft-00", "handoff.json"))
	require.NoError(t, err)
	found := slices.ContainsFunc(files, func(f vectorFile) bool {
		return f.v.Input.HandoffB64 == base64.RawURLEncoding.EncodeToString(draft) &&
			f.v.Expected.Accepted && f.v.Expected.Chain == string(ChainFull)
	})
	assert.True(t, found, "no vector accepts the draft-00 example with a full chain")

	// The README lists every file.
	readme, err := os.ReadFile(filepath.Join(vectorDir, "README.md"))
	require.NoError(t, err)
	for _, f := range files {
		assert.Contains(t, string(readme), f.file, "README.md does not list %s", f.file)
	}
}

// TestVectorsRegenerate runs the generator (testdata/vectors/gen, a main
// package under testdata and so outside ./...) in its -check mode: it
// regenerates every file twice in memory and fails unless both runs are
// byte-identical to each other and to the committed files.
func TestVectorsRegenerate(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts its own toolchain first on PATH
	require.NoError(t, err, "the go command is needed to run the generator")
	cmd := exec.Command(goTool, "run", "./testdata/vectors/gen", "-check", "-out", vectorDir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go run ./testdata/vectors/gen -check:\n%s", out)
}

// TestVectors_StrictProfileDeparts: the strict profile is not a conforming
// profile, as CONFORMANCE.md says: it refuses the member names that differ
// from the draft's own only in case, which the MUST vectors #086 to #091
// accept (HC-01: a receiver MUST ignore members it does not understand).
func TestVectors_StrictProfileDeparts(t *testing.T) {
	n := 0
	for _, f := range loadVectors(t) {
		if f.file < "086" || f.file >= "092" {
			continue
		}
		n++
		v := f.v
		require.Equal(t, "MUST", v.Level, f.file)
		require.True(t, v.Expected.Accepted, f.file)
		require.Contains(t, v.HC, "HC-01", f.file)
		in, err := vectorAgentProfile(t, v, true).Receive(context.Background(), vectorB64(t, v.Input.HandoffB64, "handoff_b64"), Host{Dialog: v.Receiver.Dialog})
		require.NoError(t, err)
		assert.False(t, in.Accepted(), "%s: the strict profile refuses case variants", f.file)
		assert.Equal(t, reason.BadSignature, in.Reason(), f.file)
	}
	assert.Equal(t, 6, n)
}
