package interop_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The agents of the scenarios: an assistant hands work to a planner, the
// planner to a coder, the coder to a tester, which verifies. Mallory has a
// key that no trust file lists.
const (
	agentA = "spiffe://u.example/agent/assistant"
	agentB = "spiffe://a.example/agent/planner"
	agentC = "spiffe://b.example/agent/coder"
	agentD = "spiffe://c.example/agent/tester"
	agentM = "spiffe://m.example/agent/mallory"

	dialog = "ctx-7c1e"
	t0     = int64(1793000000) // every offer is issued at t0 + a few seconds
)

// Makers: which implementation creates the keys, offers and statuses of a
// world. Both implementations verify everything either makes.
const (
	makerPeer = "peer"
	makerUs   = "handoff"
)

// combo is a signed form and an encoding of the Handoff object.
type combo struct{ format, encoding string }

func (c combo) String() string { return c.format + "-" + c.encoding }

// other is the other signed form, for chains that mix them.
func (c combo) other() string {
	if c.format == "jws" {
		return "cose"
	}
	return "jws"
}

var combos = []combo{{"jws", "json"}, {"jws", "cbor"}, {"cose", "json"}, {"cose", "cbor"}}

// world is a set of agents whose keys one maker generated, and the trust
// files that bind them.
type world struct {
	maker    string
	key      map[string]string // AgentId -> private JWK file
	trust    string            // A, B, C and D
	trustNoA string            // B, C and D: the chain's origin is unknown
}

func newWorld(t *testing.T, maker string) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{maker: maker, key: map[string]string{}}
	pubs := map[string]json.RawMessage{}
	for i, id := range []string{agentA, agentB, agentC, agentD, agentM} {
		path := filepath.Join(dir, fmt.Sprintf("agent%d.jwk", i))
		var r ran
		if maker == makerPeer {
			r = must(t, peer(t, "keygen", "--out", path))
		} else {
			r = must(t, ours(t, "keygen", "--alg", "ES256", "--out", path))
		}
		pub := bytes.TrimSpace(r.stdout)
		var k struct{ Alg, Kid, D string }
		if err := json.Unmarshal(pub, &k); err != nil {
			t.Fatalf("%s: public JWK: %v\n%s", r.cmd, err, pub)
		}
		if k.D != "" {
			t.Fatalf("%s printed a private key", r.cmd)
		}
		if k.Alg != "ES256" {
			t.Fatalf("%s: public JWK alg %q, want ES256", r.cmd, k.Alg)
		}
		if tp := thumbprint(t, pub); k.Kid != tp {
			t.Fatalf("%s: kid %q is not the RFC 7638 thumbprint %q", r.cmd, k.Kid, tp)
		}
		w.key[id] = path
		pubs[id] = pub
	}
	writeTrust := func(name string, ids ...string) string {
		doc := map[string]any{}
		for _, id := range ids {
			doc[id] = map[string]any{"keys": []json.RawMessage{pubs[id]}}
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	w.trust = writeTrust("trust.json", agentA, agentB, agentC, agentD)
	w.trustNoA = writeTrust("trust-no-origin.json", agentB, agentC, agentD)
	return w
}

// make runs the world's maker.
func (w *world) make(t *testing.T, args ...string) ran {
	t.Helper()
	if w.maker == makerPeer {
		return must(t, peer(t, args...))
	}
	return must(t, ours(t, args...))
}

// offer signs an offer from iss to aud issued at `at`, passing on the
// Handoff in from when it is not "", and writes its Handoff to dir/name.
// Later flags in extra override earlier ones (--key, --format).
func (w *world) offer(t *testing.T, dir, name, iss, aud string, at int64, c combo, from string, extra ...string) string {
	t.Helper()
	return w.offerBy(t, w.maker, dir, name, iss, aud, at, c, from, extra...)
}

// offerBy is offer, signed by the given maker with the world's keys: each
// implementation reads the private JWKs the other wrote.
func (w *world) offerBy(t *testing.T, maker, dir, name, iss, aud string, at int64, c combo, from string, extra ...string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	args := []string{"offer", "--key", w.key[iss], "--iss", iss, "--aud", aud, "--dialog", dialog,
		"--now", itoa(at), "--format", c.format, "--encoding", c.encoding, "--out", out}
	if from != "" {
		args = append(args, "--from", from)
	}
	args = append(args, extra...)
	if maker == makerPeer {
		must(t, peer(t, args...))
	} else {
		must(t, ours(t, args...))
	}
	return out
}

// status signs a status answering the offer in the Handoff file offer.
func (w *world) status(t *testing.T, dir, name, keyOf, iss, aud, offer, state string, at int64, format string, extra ...string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	args := []string{"status", "--key", w.key[keyOf], "--iss", iss, "--aud", aud, "--offer", offer,
		"--state", state, "--now", itoa(at), "--format", format, "--out", out}
	w.make(t, append(args, extra...)...)
	return out
}

// tamper has the peer write a modified copy of in to dir/name.
func tamper(t *testing.T, dir, in, name, kind string, extra ...string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	must(t, peer(t, append([]string{"tamper", "--kind", kind, "--out", out}, append(extra, in)...)...))
	return out
}

// verifyBoth runs `verify` of both implementations on file, as agent D at
// time now with the world's trust file, plus args (later flags override),
// and asserts that each gives the wanted verdict and that they agree on
// what the offer is.
func (w *world) verifyBoth(t *testing.T, file string, wt want, now int64, args ...string) verdict {
	t.Helper()
	full := append([]string{"verify", "--self", agentD, "--trust", w.trust, "--now", itoa(now)}, args...)
	full = append(full, file)
	v := check(t, "handoff", ours(t, full...), wt)
	pv := check(t, "peer", peer(t, full...), wt)
	if v.OfferDigest != "" && pv.OfferDigest != "" && v.OfferDigest != pv.OfferDigest {
		t.Errorf("offer digest: handoff %q, peer %q", v.OfferDigest, pv.OfferDigest)
	}
	if v.Accepted && pv.Accepted && (v.Iss != pv.Iss || v.Aud != pv.Aud || v.Hop != pv.Hop || v.Dialog != pv.Dialog) {
		t.Errorf("decoded offer differs: handoff %s %s %s %s, peer %s %s %s %s",
			v.Iss, v.Aud, v.Hop, v.Dialog, pv.Iss, pv.Aud, pv.Hop, pv.Dialog)
	}
	return v
}
