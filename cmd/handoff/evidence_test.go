package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/ref"
)

// evidenceFields are the members of "evidence check" output, exactly.
var evidenceFields = []string{"acknowledgement", "artifacts", "binding", "digest", "findings", "passed"}

const evNow = 1793000000

// evidenceFixture is a package bound to an offer signed by the CLI's keys:
// the files "evidence check" reads.
type evidenceFixture struct {
	w               *world
	pkg, offer, obj string
	ref             ref.Ref
	salt            []byte
}

// newEvidenceFixture writes a package and a Handoff whose offer names it,
// from party b to party c. mut changes the package once built, as a
// delegator that skips Build's refusals would send it.
func newEvidenceFixture(t *testing.T, f handoff.Format, enc handoff.Encoding, salted bool, mut func(*evidence.Package)) *evidenceFixture {
	t.Helper()
	w := newWorld(t)
	fx := &evidenceFixture{w: w}
	ledger := []byte(`{"invoice":"INV-1042","status":"paid"}`)
	fx.obj = writeFile(t, w.path("ledger.json"), ledger)
	asOf := time.Unix(evNow-60, 0).UTC()
	p := evidence.Package{
		Sender: evidence.Party{Role: "planner"}, Receiver: evidence.Party{Role: "coder"},
		Control:   evidence.TransferOwnership,
		Outcome:   evidence.Outcome{Result: "refund INV-1042", DoneWhen: "ledger shows the refund"},
		Authority: evidence.Authority{Allowed: []string{"ledger.read"}, Denied: []string{"card.charge"}},
		State:     []evidence.StateClaim{{System: "ledger", State: "paid", AsOf: asOf, Evidence: []string{"ledger"}}},
		Artifacts: []evidence.Artifact{{ID: "ledger", Proves: "INV-1042 is paid",
			Ref: evidence.RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(ledger), Loc: "urn:shop:ledger"})}},
		Next:         evidence.NextAction{Action: "ledger.read", Description: "read INV-1042"},
		Verification: evidence.Verification{Check: "ledger answers"},
		Timeouts:     []evidence.Timeout{{Condition: "no answer in 1h", Owner: "planner"}},
		Rollback:     evidence.Rollback{Method: "none needed: read only"},
	}
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	bind := evidence.Binding{Hop: hop, Iss: handoff.AgentID(w.b.id), Aud: handoff.AgentID(w.c.id), Iat: evNow, Exp: evNow + 120}
	built, err := evidence.NewBuilder(p).Build(bind, evidence.BuildOptions{Salted: salted})
	require.NoError(t, err)
	octets := built.Encoded
	fx.ref, fx.salt = built.Ref, built.Salt
	if mut != nil {
		q := *built.Package
		mut(&q)
		octets, err = q.Encode()
		require.NoError(t, err)
		c, err := evidence.Canonical(octets, evidence.DecodeOptions{})
		require.NoError(t, err)
		fx.ref, fx.salt = evidence.Ref(c, ""), nil
		if salted {
			fx.ref, fx.salt, err = evidence.SaltedRef(nil, c, "")
			require.NoError(t, err)
		}
	}
	fx.pkg = writeFile(t, w.path("package.json"), octets)
	signer, _, err := loadSigner(w.b.key, f)
	require.NoError(t, err)
	o := &handoff.Offer{Hop: hop, Dialog: "case-1", Iss: bind.Iss, Aud: bind.Aud, Iat: bind.Iat, Exp: bind.Exp,
		Refs: []ref.Ref{fx.ref}}
	s, err := signer.SignOffer(o)
	require.NoError(t, err)
	h, err := (&handoff.Handoff{Offer: s}).Encode(enc)
	require.NoError(t, err)
	fx.offer = writeFile(t, w.path("handoff.bin"), h)
	return fx
}

func (fx *evidenceFixture) check(t *testing.T, wantCode int, extra ...string) map[string]any {
	t.Helper()
	args := append([]string{"evidence", "check", "--offer", fx.offer, "--trust", fx.w.trust, "--now", "1793000000",
		"--ref-object", "urn:shop:ledger=" + fx.obj}, extra...)
	r := cli(t, nil, append(args, fx.pkg)...)
	mustCode(t, r, wantCode)
	assert.Empty(t, r.stderr)
	m := oneObject(t, r.stdout)
	return m
}

func findingsOf(m map[string]any) []string {
	var out []string
	for _, f := range m["findings"].([]any) {
		fm := f.(map[string]any)
		out = append(out, fm["code"].(string)+" "+fm["path"].(string))
	}
	return out
}

func TestEvidenceCheckPasses(t *testing.T) {
	for _, c := range []struct {
		name string
		f    handoff.Format
		enc  handoff.Encoding
	}{{"jws-json", handoff.JWS, handoff.JSON}, {"cose-cbor", handoff.COSE, handoff.CBOR}} {
		t.Run(c.name, func(t *testing.T) {
			fx := newEvidenceFixture(t, c.f, c.enc, false, nil)
			m := fx.check(t, 0)
			require.Equal(t, evidenceFields, keysOf(m))
			assert.Equal(t, true, m["passed"])
			assert.Empty(t, m["findings"])
			assert.Equal(t, fx.ref.Dig.B64(), m["digest"])
			assert.Equal(t, "verified", m["binding"].(map[string]any)["outcome"])
			assert.Equal(t, "verified", m["artifacts"].([]any)[0].(map[string]any)["outcome"])
			assert.Equal(t, map[string]any{"decision": "accepted"}, m["acknowledgement"])
		})
	}
}

func TestEvidenceCheckSalted(t *testing.T) {
	fx := newEvidenceFixture(t, handoff.JWS, handoff.JSON, true, nil)
	m := fx.check(t, 1)
	assert.Equal(t, []string{"package-unverifiable "}, findingsOf(m))
	m = fx.check(t, 0, "--salt", base64.RawURLEncoding.EncodeToString(fx.salt))
	assert.Equal(t, true, m["passed"])
}

func TestEvidenceCheckFindings(t *testing.T) {
	fx := newEvidenceFixture(t, handoff.JWS, handoff.JSON, false, func(p *evidence.Package) {
		p.State[0].AsOf = time.Unix(evNow-3600, 0).UTC()
		p.Next.Action = "card.charge"
		p.Verification.Check = ""
	})
	m := fx.check(t, 1)
	require.Equal(t, evidenceFields, keysOf(m))
	assert.Equal(t, false, m["passed"])
	assert.ElementsMatch(t, []string{"next-action-unverified /verification/check", "next-action-denied /next_action/action",
		"stale-state /state/0/as_of"}, findingsOf(m))
	assert.Equal(t, map[string]any{"decision": "rejected", "reason": "policy",
		"findings": []any{"next-action-denied", "next-action-unverified", "stale-state"}}, m["acknowledgement"])

	// The bound on a state's age is the caller's.
	m = fx.check(t, 1, "--max-state-age", "2h")
	assert.NotContains(t, findingsOf(m), "stale-state /state/0/as_of")

	// Without the artifact, it is unverifiable and the claim unsupported.
	r := cli(t, nil, "evidence", "check", "--offer", fx.offer, "--trust", fx.w.trust, "--now", "1793000000", fx.pkg)
	mustCode(t, r, 1)
	got := findingsOf(oneObject(t, r.stdout))
	assert.Contains(t, got, "artifact-unverifiable /artifacts/0/ref")
	assert.Contains(t, got, "claim-unsupported /state/0")
}

func TestEvidenceCheckRefusals(t *testing.T) {
	fx := newEvidenceFixture(t, handoff.JWS, handoff.JSON, false, nil)
	dup := writeFile(t, fx.w.path("dup.json"), []byte(`{"control":"transfer-ownership","control":"x"}`))
	r := cli(t, nil, "evidence", "check", "--unbound", dup)
	mustCode(t, r, 1)
	m := oneObject(t, r.stdout)
	assert.Equal(t, false, m["passed"])
	assert.Contains(t, m["error"], "duplicate member name")

	// Another package than the offer names.
	other := writeFile(t, fx.w.path("other.json"), []byte(strings.Replace(mustRead(t, fx.pkg), "refund INV-1042", "refund INV-1043", 1)))
	r = cli(t, nil, "evidence", "check", "--offer", fx.offer, "--trust", fx.w.trust, "--now", "1793000000",
		"--ref-object", "urn:shop:ledger="+fx.obj, other)
	mustCode(t, r, 1)
	assert.Equal(t, []string{"package-mismatch "}, findingsOf(oneObject(t, r.stdout)))

	// An offer no trusted key signed.
	untrusted := writeTrust(t, fx.w.path("untrusted.json"), fx.w.a)
	r = cli(t, nil, "evidence", "check", "--offer", fx.offer, "--trust", untrusted, fx.pkg)
	mustCode(t, r, 1)
	assert.Contains(t, oneObject(t, r.stdout)["error"], "offer:")

	// Without an offer the binding is not shown.
	r = cli(t, nil, "evidence", "check", "--unbound", "--now", "1793000000", "--ref-object", "urn:shop:ledger="+fx.obj, fx.pkg)
	mustCode(t, r, 0)
	assert.Nil(t, oneObject(t, r.stdout)["binding"])

	for _, args := range [][]string{
		{"evidence", "check", fx.pkg},
		{"evidence", "check", "--unbound", "--offer", fx.offer, fx.pkg},
		{"evidence", "check", "--offer", fx.offer, fx.pkg},
		{"evidence", "check", "--unbound"},
		{"evidence", "check", "--unbound", "--max-state-age", "0", fx.pkg},
		{"evidence", "check", "--unbound", "--salt", "***", fx.pkg},
		{"evidence", "check", "--unbound", filepath.Join(fx.w.dir, "missing.json")},
		{"evidence", "frobnicate"},
		{"evidence"},
	} {
		r := cli(t, nil, args...)
		mustCode(t, r, 2)
		assert.Empty(t, r.stdout, "%v", args)
	}
}

func TestEvidenceDigest(t *testing.T) {
	fx := newEvidenceFixture(t, handoff.JWS, handoff.JSON, true, nil)
	r := cli(t, nil, "evidence", "digest", fx.pkg)
	mustCode(t, r, 0)
	want, err := evidence.Digest([]byte(mustRead(t, fx.pkg)), evidence.DecodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, want.B64()+"\n", r.stdout)

	// One package, another encoding: the same digest (JCS).
	c := cli(t, nil, "evidence", "digest", "--canonical", fx.pkg)
	mustCode(t, c, 0)
	reenc := strings.ReplaceAll(c.stdout, ",", ",\n  ")
	r = cli(t, []byte(reenc), "evidence", "digest", "-")
	mustCode(t, r, 0)
	assert.Equal(t, want.B64()+"\n", r.stdout)

	// The salted digest is the offer's reference.
	r = cli(t, nil, "evidence", "digest", "--salt", base64.RawURLEncoding.EncodeToString(fx.salt), fx.pkg)
	mustCode(t, r, 0)
	assert.Equal(t, fx.ref.Dig.B64()+"\n", r.stdout)

	r = cli(t, []byte("{\"a\":\"\xff\"}"), "evidence", "digest", "-")
	mustCode(t, r, 1)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "invalid UTF-8")

	for _, args := range [][]string{{"evidence", "digest"}, {"evidence", "digest", "--salt", "c2hvcnQ", fx.pkg},
		{"evidence", "digest", "--salt", base64.RawURLEncoding.EncodeToString(fx.salt), "--canonical", fx.pkg}} {
		mustCode(t, cli(t, nil, args...), 2)
	}
}

func TestEvidenceTemplate(t *testing.T) {
	r := cli(t, nil, "evidence", "template")
	mustCode(t, r, 0)
	assert.Equal(t, string(evidence.Template()), r.stdout)
	m := oneObject(t, r.stdout)
	assert.Contains(t, m, "next_action")

	// The template is annotated, not filled in: checking it as it is
	// fails.
	dir := t.TempDir()
	out := filepath.Join(dir, "t.json")
	mustCode(t, cli(t, nil, "evidence", "template", "--out", out), 0)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, evidence.Template(), b)
	r = cli(t, nil, "evidence", "check", "--unbound", out)
	mustCode(t, r, 1)
}

// "offer --package" binds a package to the offer it signs and names it in
// the refs; "evidence check" then checks the bound package against that
// offer and it passes, salted or not; the package as given, unbound, does
// not (issue 32, finding 1: the CLI could not make an offer that names a
// package).
func TestOfferPackage_ThenEvidenceCheck(t *testing.T) {
	for _, salted := range []bool{false, true} {
		fx := newEvidenceFixture(t, handoff.JWS, handoff.JSON, false, nil)
		w := fx.w
		bound := w.path("bound.json")
		args := []string{"offer", "--key", w.b.key, "--iss", w.b.id, "--aud", w.c.id, "--dialog", "case-1",
			"--now", "1793000000", "--package", fx.pkg, "--package-out", bound, "--out", w.path("h.json")}
		if salted {
			args = append(args, "--salted")
		}
		r := cli(t, nil, args...)
		mustCode(t, r, 0)
		check := []string{"evidence", "check", "--offer", w.path("h.json"), "--trust", w.trust, "--now", "1793000000",
			"--ref-object", "urn:shop:ledger=" + fx.obj}
		if salted {
			_, after, ok := strings.Cut(strings.TrimSpace(r.stderr), " salt ")
			require.True(t, ok, "the salt on stderr: %q", r.stderr)
			check = append(check, "--salt", after)
		} else {
			assert.Empty(t, r.stderr)
		}
		out := cli(t, nil, append(check, bound)...)
		mustCode(t, out, 0)
		m := oneObject(t, out.stdout)
		assert.Equal(t, true, m["passed"], "salted %v: %s", salted, out.stdout)
		assert.Equal(t, "verified", m["binding"].(map[string]any)["outcome"])
		h, err := os.ReadFile(w.path("h.json"))
		require.NoError(t, err)
		assert.NotContains(t, string(h), "INV-1042", "the offer names the package by digest, never embeds it")

		// The package as given is bound to another offer: not this one's.
		mustCode(t, cli(t, nil, append(check, fx.pkg)...), 1)
	}
}

// "offer --package" refuses an incomplete package, naming the field, and
// needs --package-out.
func TestOfferPackage_Refusals(t *testing.T) {
	w := newWorld(t)
	base := []string{"offer", "--key", w.b.key, "--iss", w.b.id, "--aud", w.c.id, "--dialog", "case-1"}
	incomplete := writeFile(t, w.path("incomplete.json"), []byte(`{"sender":{"role":"planner"}}`))
	r := cli(t, nil, append(base, "--package", incomplete, "--package-out", w.path("out.json"))...)
	mustCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "incomplete")
	_, err := os.Stat(w.path("out.json"))
	assert.True(t, os.IsNotExist(err), "nothing written for a refused package")
	mustCode(t, cli(t, nil, append(base, "--package", incomplete)...), exitUsage)
}
