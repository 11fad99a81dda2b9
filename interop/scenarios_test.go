package interop_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPeerToHandoff: the peer makes keys, offers, chains and statuses;
// `handoff verify` and `handoff verify-status` judge them (and so does the
// peer, which must agree).
func TestPeerToHandoff(t *testing.T) { runWorld(t, makerPeer) }

// TestHandoffToPeer: `handoff keygen`, `handoff offer` and `handoff status`
// make them; the peer's verify and verify-status judge them (and so does
// handoff, which must agree).
func TestHandoffToPeer(t *testing.T) { runWorld(t, makerUs) }

func runWorld(t *testing.T, maker string) {
	requirePeer(t)
	w := newWorld(t, maker)
	for _, c := range combos {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			t.Run("offers", func(t *testing.T) { w.offers(t, c) })
			t.Run("statuses", func(t *testing.T) { w.statuses(t, c) })
			t.Run("memory", func(t *testing.T) { w.memory(t, c) })
			t.Run("crossed", func(t *testing.T) { w.crossed(t, c) })
		})
	}
}

// chain3 makes the three-hop chain A -> B -> C -> D: h3 carries C's offer
// to D with the chain [A's offer to B, B's offer to C].
func (w *world) chain3(t *testing.T, dir string, c combo) (h1, h2, h3 string) {
	t.Helper()
	h1 = w.offer(t, dir, "h1", agentA, agentB, t0, c, "")
	h2 = w.offer(t, dir, "h2", agentB, agentC, t0+10, c, h1)
	h3 = w.offer(t, dir, "h3", agentC, agentD, t0+20, c, h2)
	return h1, h2, h3
}

// vcase is one Handoff and the verdict both verifiers must reach.
type vcase struct {
	name string
	file string
	want want
	args []string
}

func (w *world) offers(t *testing.T, c combo) {
	dir := t.TempDir()
	_, _, h3 := w.chain3(t, dir, c)
	const at = t0 + 25    // when D verifies
	const exp3 = t0 + 140 // h3's exp: iat t0+20, default lifetime 120 s
	keyC := w.key[agentC] // C signs again for the tampered variants that need it
	tam := func(name, kind string, extra ...string) string { return tamper(t, dir, h3, name, kind, extra...) }

	// A chain whose middle element is in the other signed form.
	m1 := w.offer(t, dir, "m1", agentA, agentB, t0, c, "")
	m2 := w.offer(t, dir, "m2", agentB, agentC, t0+10, c, m1, "--format", c.other())
	m3 := w.offer(t, dir, "m3", agentC, agentD, t0+20, c, m2)

	// Chain timing: each offer is issued while the one it passes on is
	// live, give or take the skew (60 s): A's offer to B expires at t0+120.
	late0 := w.offer(t, dir, "late0", agentA, agentB, t0, c, "")
	late1 := w.offer(t, dir, "late1", agentB, agentC, t0+180, c, late0)
	late := w.offer(t, dir, "late", agentC, agentD, t0+185, c, late1)
	later1 := w.offer(t, dir, "later1", agentB, agentC, t0+181, c, late0)
	later := w.offer(t, dir, "later", agentC, agentD, t0+185, c, later1)
	early0 := w.offer(t, dir, "early0", agentA, agentB, t0+10, c, "")
	early1 := w.offer(t, dir, "early1", agentB, agentC, t0+5, c, early0)
	early := w.offer(t, dir, "early", agentC, agentD, t0+20, c, early1)

	// Cycles: D already took part; A is iss twice.
	y1 := w.offer(t, dir, "y1", agentA, agentD, t0, c, "")
	y2 := w.offer(t, dir, "y2", agentD, agentC, t0+5, c, y1)
	y3 := w.offer(t, dir, "y3", agentC, agentD, t0+10, c, y2)
	z1 := w.offer(t, dir, "z1", agentA, agentB, t0, c, "")
	z2 := w.offer(t, dir, "z2", agentB, agentA, t0+5, c, z1)
	z3 := w.offer(t, dir, "z3", agentA, agentD, t0+10, c, z2)

	// Optional members, a reference, and (from the peer) an unknown
	// member that a receiver must ignore (HC-01).
	object := []byte(`{"repo":"https://git.a.example/app","commit":"9fceb02","issue":9}`)
	objectFile := filepath.Join(dir, "object.json")
	otherFile := filepath.Join(dir, "other.json")
	credFile := filepath.Join(dir, "credential.txt")
	for path, b := range map[string][]byte{
		objectFile: object,
		otherFile:  []byte(`{"issue":10}`),
		credFile:   []byte("example access token issued to " + agentD),
	} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const loc = "https://a.example/ctx/9"
	rich := []string{"--task", "task-42", "--ref", objectFile + "=" + loc}
	if w.maker == makerPeer {
		rich = append(rich, "--obo", "u-8f2a", "--grant", "example access token issued to "+agentD,
			"--extra", `x-peer={"nested":[1,"two",{"k":true}]}`)
	} else {
		rich = append(rich, "--obo-sub", "u-8f2a", "--obo-iss", "https://idp.u.example", "--grant-credential-file", credFile)
	}
	richFile := w.offer(t, dir, "rich", agentA, agentD, t0+20, c, "", rich...)

	cases := []vcase{
		{"single", w.offer(t, dir, "single", agentA, agentD, t0+20, c, ""), accept("full"), nil},
		{"single/require-chain", filepath.Join(dir, "single"), accept("full"), []string{"--require-chain"}},
		{"chain", h3, accept("full"), nil},
		{"chain/require-chain", h3, accept("full"), []string{"--require-chain"}},
		{"chain/mixed-forms", m3, accept("full"), []string{"--require-chain"}},
		{"chain/dialog", h3, accept("full"), []string{"--dialog", dialog}},
		{"chain/other-dialog", h3, reject("policy"), []string{"--dialog", "ctx-other"}},
		{"chain/max-chain-2", h3, accept("full"), []string{"--max-chain", "2"}},
		{"chain/max-chain-1", h3, reject("too-deep"), []string{"--max-chain", "1"}},
		{"chain/not-for-me", h3, reject("wrong-audience"), []string{"--self", agentC}},
		{"chain/last-second", h3, accept("full"), []string{"--now", itoa(exp3 - 1)}},
		{"chain/expired", h3, reject("stale"), []string{"--now", itoa(exp3)}},
		{"chain/issued-within-skew", h3, accept("full"), []string{"--now", itoa(t0 + 20 - 60)}},
		{"chain/issued-in-future", h3, reject("stale"), []string{"--now", itoa(t0 + 20 - 61)}},
		{"chain/origin-untrusted", h3, accept("unverifiable"), []string{"--trust", w.trustNoA}},
		{"chain/origin-untrusted/require-chain", h3, reject("policy"), []string{"--trust", w.trustNoA, "--require-chain"}},
		{"chain/issued-at-prev-exp-plus-skew", late, accept("full"), []string{"--now", itoa(t0 + 190)}},
		{"chain/issued-after-prev-exp-plus-skew", later, reject("broken-chain"), []string{"--now", itoa(t0 + 190)}},
		{"chain/issued-before-prev", early, reject("broken-chain"), nil},
		{"chain/cycle-receiver", y3, reject("cycle"), nil},
		{"chain/cycle-iss", z3, reject("cycle"), nil},

		{"lifetime/300", w.offer(t, dir, "ttl300", agentA, agentD, t0+20, c, "", "--ttl", "300"), accept("full"), nil},
		{"lifetime/301", w.offer(t, dir, "ttl301", agentA, agentD, t0+20, c, "", "--ttl", "301"), reject("stale"), nil},
		{"lifetime/301-allowed", filepath.Join(dir, "ttl301"), accept("full"), []string{"--max-lifetime", "301"}},

		{"untrusted/iss", w.offer(t, dir, "mallory", agentM, agentD, t0+20, c, ""), reject("untrusted-key"), nil},
		{"untrusted/key-of-another-agent", w.offer(t, dir, "a-as-c", agentC, agentD, t0+20, c, "", "--key", w.key[agentA]),
			reject("untrusted-key"), nil},
		{"untrusted/key-not-in-trust", w.offer(t, dir, "m-as-c", agentC, agentD, t0+20, c, "", "--key", w.key[agentM]),
			reject("untrusted-key"), nil},

		{"members/optional-and-unknown", richFile, accept("full"), nil},
		{"members/ref-verified", richFile, accept("full"), []string{"--ref-object", loc + "=" + objectFile}},
		{"members/ref-mismatch", richFile, reject("ref-mismatch"), []string{"--ref-object", loc + "=" + otherFile}},

		{"tamper/flip-sig", tam("flip-sig", "flip-sig"), reject("bad-signature"), nil},
		{"tamper/high-s", tam("high-s", "high-s"), accept("full"), []string{"--require-chain"}},
		{"tamper/payload", tam("payload", "payload", "--aud", agentD+"/2"), reject("bad-signature"), nil},
		{"tamper/alg-none", tam("alg-none", "alg-none"), reject("bad-signature"), nil},
		{"tamper/wrong-typ", tam("wrong-typ", "wrong-typ", "--key", keyC), reject("bad-signature"), nil},
		{"tamper/wrong-aud", tam("wrong-aud", "wrong-aud", "--key", keyC), reject("wrong-audience"), nil},
		{"tamper/expired", tam("expired", "expired", "--key", keyC), reject("stale"), nil},
		{"tamper/resigned", tam("resigned", "wrong-aud", "--key", keyC, "--aud", agentD), accept("full"), nil},
		{"tamper/broken-prev", tam("broken-prev", "broken-prev", "--key", keyC), reject("broken-chain"), nil},
		{"tamper/reorder", tam("reorder", "reorder"), reject("broken-chain"), nil},
		{"tamper/drop", tam("drop", "drop"), reject("broken-chain"), nil},
		{"tamper/strip-chain", tam("strip", "strip-chain"), accept("absent"), nil},
		{"tamper/strip-chain/require-chain", filepath.Join(dir, "strip"), reject("policy"), []string{"--require-chain"}},
		{"tamper/chain0-flip-sig", tam("c0-flip", "flip-sig", "--index", "0"), reject("bad-signature"), nil},
		{"tamper/chain0-payload", tam("c0-payload", "payload", "--index", "0"), reject("bad-signature"), nil},
		{"tamper/chain0-flip-sig/origin-untrusted", filepath.Join(dir, "c0-flip"), reject("broken-chain"),
			[]string{"--trust", w.trustNoA}},
		{"tamper/chain1-high-s", tam("c1-high-s", "high-s", "--index", "1"), reject("broken-chain"), nil},
	}
	if w.maker == makerPeer {
		// handoff offer refuses a lifetime under one second, and one that
		// does not fit a duration: exp in the year 10000 makes exp - iat
		// overflow a signed 64-bit count of nanoseconds.
		cases = append(cases,
			vcase{"lifetime/0", w.offer(t, dir, "ttl0", agentA, agentD, t0+20, c, "", "--ttl", "0"), reject("stale"), nil},
			vcase{"lifetime/far-future-exp", w.offer(t, dir, "exp10000", agentA, agentD, t0+20, c, "", "--exp", "253402300800"),
				reject("stale"), nil})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := w.verifyBoth(t, tc.file, tc.want, at, tc.args...)
			switch tc.name {
			case "members/optional-and-unknown":
				if len(v.Refs) != 1 || v.Refs[0].Kind != "digest" || v.Refs[0].Alg != "sha-256" ||
					v.Refs[0].Dig != b64sha256(object) || v.Refs[0].Outcome != "not checked" {
					t.Errorf("refs %+v, want one digest reference over the object, not checked", v.Refs)
				}
			case "members/ref-verified":
				if len(v.Refs) != 1 || v.Refs[0].Outcome != "verified" {
					t.Errorf("refs %+v, want one verified reference", v.Refs)
				}
			}
		})
	}
}

// scase is one status, the offer it is checked against, and what each
// verifier must say. The peer names its own reasons for the checks that
// relate a status to its offer.
type scase struct {
	name       string
	status     string
	offer      string
	state      string // the status's state, reported by both when it verified
	ourReason  string // "" = valid
	peerReason string
}

func (w *world) statuses(t *testing.T, c combo) {
	dir := t.TempDir()
	_, h2, h3 := w.chain3(t, dir, c)
	// A second offer from C to D, with its own hop: a status for h3 does not
	// answer it.
	fan := w.offer(t, dir, "fan", agentC, agentD, t0+21, c, h2)
	const at = t0 + 26
	f := c.format

	accepted := w.status(t, dir, "accepted", agentD, agentD, agentC, h3, "accepted", at, f)
	cases := []scase{
		{"accepted", accepted, h3, "accepted", "", ""},
		{"completed", w.status(t, dir, "completed", agentD, agentD, agentC, h3, "completed", at, f), h3, "completed", "", ""},
		{"failed", w.status(t, dir, "failed", agentD, agentD, agentC, h3, "failed", at, f), h3, "failed", "", ""},
		{"rejected", w.status(t, dir, "rejected", agentD, agentD, agentC, h3, "rejected", at, f, "--reason", "policy"),
			h3, "rejected", "", ""},
		{"canceled-by-delegator", w.status(t, dir, "canceled", agentC, agentC, agentD, h3, "canceled", at, f), h3, "canceled", "", ""},
		{"other-offer", accepted, fan, "accepted", "policy", "wrong-offer"},
		{"flip-sig", tamper(t, dir, accepted, "flipped", "flip-sig"), h3, "", "bad-signature", "bad-signature"},
		{"alg-none", tamper(t, dir, accepted, "none", "alg-none"), h3, "", "bad-signature", "bad-signature"},
		{"signer-untrusted", w.status(t, dir, "forged", agentM, agentD, agentC, h3, "accepted", at, f), h3, "",
			"untrusted-key", "untrusted-key"},
		{"signer-not-delegate", w.status(t, dir, "by-b", agentB, agentB, agentC, h3, "accepted", at, f), h3, "accepted",
			"policy", "wrong-issuer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"verify-status", "--trust", w.trust, "--offer", tc.offer, tc.status}
			for _, side := range []struct {
				who    string
				r      ran
				reason string
			}{
				{"handoff", ours(t, args...), tc.ourReason},
				{"peer", peer(t, args...), tc.peerReason},
			} {
				v := decode[statusVerdict](t, side.r)
				code := 1
				if side.reason == "" {
					code = 0
				}
				if v.Valid != (side.reason == "") || v.Reason != side.reason || side.r.code != code {
					t.Errorf("%s verify-status: valid=%v reason=%q exit %d (detail %q); want reason %q exit %d\n  %s",
						side.who, v.Valid, v.Reason, side.r.code, v.Detail, side.reason, code, side.r.cmd)
				}
				if tc.state != "" && v.State != tc.state {
					t.Errorf("%s verify-status: state %q, want %q", side.who, v.State, tc.state)
				}
			}
		})
	}
}

// memory: handoff verify with --replay-db remembers (iss, hop) across
// runs: the same octets again are a retransmission, and a second signature
// over the same hop is equivocation (HC-35, HC-52, HC-53). The peer's
// ECDSA signatures, like ours, differ each time, so signing one hop twice
// always gives different octets.
func (w *world) memory(t *testing.T, c combo) {
	dir := t.TempDir()
	_, h2, h3 := w.chain3(t, dir, c)
	db := filepath.Join(dir, "seen.db")
	const at = t0 + 25
	verify := func(now int64, file string) (ran, verdict) {
		r := ours(t, "verify", "--self", agentD, "--trust", w.trust, "--now", itoa(now), "--replay-db", db, file)
		return r, decode[verdict](t, r)
	}
	r, _ := verify(at, h3)
	first := check(t, "handoff", r, accept("full"))

	for _, now := range []int64{at + 1, t0 + 140 + 10} { // again, and again after exp (within the skew)
		r, v := verify(now, h3)
		if v.Accepted || !v.Retransmission || v.Reason != "" || r.code != 1 {
			t.Errorf("same octets again at %d: accepted=%v retransmission=%v reason=%q exit %d; want a retransmission, exit 1",
				now, v.Accepted, v.Retransmission, v.Reason, r.code)
		}
	}

	again := w.offer(t, dir, "h3-again", agentC, agentD, t0+20, c, h2, "--hop="+first.Hop)
	// On its own, the second offer is valid...
	w.verifyBoth(t, again, accept("full"), at)
	// ...but a receiver that saw the first must refuse it.
	r, v := verify(at+2, again)
	if v.Accepted || v.Reason != "equivocation" || v.Equivocation == "" || r.code != 1 {
		t.Errorf("second signature over hop %s: accepted=%v reason=%q equivocation=%q exit %d; want equivocation, exit 1",
			first.Hop, v.Accepted, v.Reason, v.Equivocation, r.code)
	}
}

// crossed: chains whose hops the two implementations sign in turn, each
// forwarding the other's elements as the exact octets it received (HC-20)
// and signing with a private JWK the other wrote.
func (w *world) crossed(t *testing.T, c combo) {
	dir := t.TempDir()
	first, second := makerUs, makerPeer
	if w.maker == makerUs {
		first, second = makerPeer, makerUs
	}
	h1 := w.offerBy(t, first, dir, "x1", agentA, agentB, t0, c, "")
	h2 := w.offerBy(t, second, dir, "x2", agentB, agentC, t0+10, c, h1, "--format", c.other())
	h3 := w.offerBy(t, first, dir, "x3", agentC, agentD, t0+20, c, h2)
	w.verifyBoth(t, h3, accept("full"), t0+25, "--require-chain")
	w.verifyBoth(t, tamper(t, dir, h3, "x3-reorder", "reorder"), reject("broken-chain"), t0+25)

	// Each answers the other's offer with a status the other accepts.
	for _, m := range []string{makerUs, makerPeer} {
		st := filepath.Join(dir, "status-by-"+m)
		args := []string{"status", "--key", w.key[agentD], "--iss", agentD, "--aud", agentC, "--offer", h3,
			"--state", "completed", "--now", itoa(t0 + 30), "--format", c.format, "--out", st}
		if m == makerPeer {
			must(t, peer(t, args...))
		} else {
			must(t, ours(t, args...))
		}
		for _, r := range []ran{
			ours(t, "verify-status", "--trust", w.trust, "--offer", h3, st),
			peer(t, "verify-status", "--trust", w.trust, "--offer", h3, st),
		} {
			if v := decode[statusVerdict](t, r); !v.Valid || v.State != "completed" || r.code != 0 {
				t.Errorf("%s: valid=%v state=%q reason=%q exit %d; want a valid completed status", r.cmd, v.Valid, v.State, v.Reason, r.code)
			}
		}
	}
}

// TestVectorsWithPeer runs the project's conformance vectors
// (testdata/vectors, written by the library's generator) through the
// peer's receiver: an implementation that shares no code with the library
// must reach every expected outcome.
func TestVectorsWithPeer(t *testing.T) {
	requirePeer(t)
	files, err := filepath.Glob(filepath.Join("..", "testdata", "vectors", "[0-9][0-9][0-9]-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no vectors in ../testdata/vectors")
	}
	r := must(t, peer(t, append([]string{"vectors"}, files...)...))
	var got []struct {
		File           string   `json:"file"`
		Accepted       bool     `json:"accepted"`
		Retransmission bool     `json:"retransmission"`
		Reason         string   `json:"reason"`
		Detail         string   `json:"detail"`
		Chain          string   `json:"chain"`
		Refs           []string `json:"refs"`
		OfferDigest    string   `json:"offer_digest"`
	}
	if err := json.Unmarshal(r.stdout, &got); err != nil {
		t.Fatalf("peer vectors: %v\n%s", err, r.stdout)
	}
	if len(got) != len(files) {
		t.Fatalf("peer vectors: %d results for %d files", len(got), len(files))
	}
	for i, file := range files {
		g := got[i]
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Expected struct {
					Accepted       bool     `json:"accepted"`
					Retransmission bool     `json:"retransmission"`
					Reason         string   `json:"reason"`
					Chain          string   `json:"chain"`
					Refs           []string `json:"refs"`
					OfferDigest    string   `json:"offer_digest"`
				} `json:"expected"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			e := v.Expected
			if g.File != filepath.Base(file) {
				t.Fatalf("result for %s, want %s", g.File, filepath.Base(file))
			}
			if g.Accepted != e.Accepted || g.Retransmission != e.Retransmission || g.Reason != e.Reason ||
				g.Chain != e.Chain || !slices.Equal(g.Refs, e.Refs) || g.OfferDigest != e.OfferDigest {
				t.Errorf("peer: accepted=%v retransmission=%v reason=%q chain=%q refs=%q digest=%s (detail %q)\n"+
					"want: accepted=%v retransmission=%v reason=%q chain=%q refs=%q digest=%s",
					g.Accepted, g.Retransmission, g.Reason, g.Chain, g.Refs, g.OfferDigest, g.Detail,
					e.Accepted, e.Retransmission, e.Reason, e.Chain, e.Refs, e.OfferDigest)
			}
		})
	}
}
