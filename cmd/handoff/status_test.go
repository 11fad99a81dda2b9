package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statusFields are the members of verify-status's output, exactly.
var statusFields = []string{
	"aud", "detail", "hop", "iat", "iss", "offer", "offer_digest", "offer_verified", "reason", "refs",
	"state", "status_detail", "status_digest", "status_reason", "status_verified", "terminal", "valid",
}

func verifyStatusOut(t *testing.T, wantCode int, stdin []byte, args ...string) map[string]any {
	t.Helper()
	r := cli(t, stdin, append([]string{"verify-status"}, args...)...)
	mustCode(t, r, wantCode)
	m := oneObject(t, r.stdout)
	require.Equal(t, statusFields, keysOf(m))
	require.Equal(t, wantCode == 0, m["valid"])
	if m["valid"] == true {
		require.Equal(t, "", m["reason"])
	} else {
		require.NotEqual(t, "", m["reason"])
	}
	return m
}

func statusFile(t *testing.T, path string, args ...string) string {
	t.Helper()
	r := cli(t, nil, append([]string{"status", "--out", path}, args...)...)
	mustCode(t, r, 0)
	assert.Empty(t, r.stdout)
	return path
}

func TestStatusVerifyStatus(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	offer := verifyOut(t, 0, nil, "--self", w.b.id, "--trust", w.trust, h)

	acc := statusFile(t, w.path("accepted.jws"), "--key", w.b.key, "--iss", w.b.id, "--aud", w.a.id,
		"--offer", h, "--state", "accepted", "--now", "1800000000")
	raw := mustRead(t, acc)
	assert.Equal(t, 2, strings.Count(raw, "."), "JWS compact text")
	assert.False(t, strings.HasSuffix(raw, "\n"), "the signed octets exactly")

	m := verifyStatusOut(t, 0, nil, "--trust", w.trust, "--offer", h, acc)
	assert.Equal(t, true, m["status_verified"])
	assert.Equal(t, "accepted", m["state"])
	assert.Equal(t, w.b.id, m["iss"])
	assert.Equal(t, w.a.id, m["aud"])
	assert.Equal(t, offer["hop"], m["hop"])
	assert.Equal(t, offer["offer_digest"], m["offer"])
	assert.Equal(t, offer["offer_digest"], m["offer_digest"])
	assert.Equal(t, "1800000000", m["iat"].(interface{ String() string }).String())
	assert.Equal(t, false, m["terminal"])
	assert.Equal(t, true, m["offer_verified"])

	// The status's digest, as digest prints it.
	dg := cli(t, nil, "digest", acc)
	mustCode(t, dg, 0)
	assert.Equal(t, m["status_digest"], strings.TrimSpace(dg.stdout))

	// completed, COSE, with a result reference, read from stdin; the
	// parties default from the offer.
	result := writeFile(t, w.path("result.txt"), []byte("done\n"))
	r := cli(t, nil, "status", "--key", w.b.key, "--offer", h, "--state", "completed", "--format", "cose", "--ref", result)
	mustCode(t, r, 0)
	require.Equal(t, byte(0xd2), r.stdout[0], "a tagged COSE_Sign1")
	m = verifyStatusOut(t, 0, []byte(r.stdout), "--trust", w.trust, "--offer", h, "-")
	assert.Equal(t, "completed", m["state"])
	assert.Equal(t, true, m["terminal"])
	require.Len(t, m["refs"], 1)
	assert.Equal(t, "not checked", m["refs"].([]any)[0].(map[string]any)["outcome"])

	// rejected, with its reason apart from the verification's.
	rej := statusFile(t, w.path("rejected.jws"), "--key", w.b.key, "--offer", h, "--state", "rejected",
		"--reason", "policy", "--detail", "not today")
	m = verifyStatusOut(t, 0, nil, "--trust", w.trust, "--offer", h, rej)
	assert.Equal(t, "rejected", m["state"])
	assert.Equal(t, "policy", m["status_reason"])
	assert.Equal(t, "not today", m["status_detail"])
	assert.Equal(t, "", m["reason"])

	// canceled goes from the delegator to the delegate.
	cxl := statusFile(t, w.path("canceled.jws"), "--key", w.a.key, "--offer", h, "--state", "canceled")
	m = verifyStatusOut(t, 0, nil, "--trust", w.trust, "--offer", h, cxl)
	assert.Equal(t, w.a.id, m["iss"])
	assert.Equal(t, w.b.id, m["aud"])
}

func TestVerifyStatusInvalid(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	other := offerFile(t, w.path("other.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	acc := statusFile(t, w.path("accepted.jws"), "--key", w.b.key, "--offer", h, "--state", "accepted")

	t.Run("wrong trust", func(t *testing.T) {
		// The trust file binds the delegate's id to another key.
		wrong := w.b
		wrong.pub = w.c.pub
		tr := writeTrust(t, w.path("wrong-trust.json"), w.a, wrong)
		m := verifyStatusOut(t, 1, nil, "--trust", tr, "--offer", h, acc)
		assert.Contains(t, []any{"untrusted-key", "bad-signature"}, m["reason"])
		assert.Equal(t, false, m["status_verified"])
		// Nobody trusted for the delegate at all.
		tr = writeTrust(t, w.path("no-b.json"), w.a)
		m = verifyStatusOut(t, 1, nil, "--trust", tr, "--offer", h, acc)
		assert.Equal(t, "untrusted-key", m["reason"])
	})
	t.Run("another offer", func(t *testing.T) {
		m := verifyStatusOut(t, 1, nil, "--trust", w.trust, "--offer", other, acc)
		assert.Equal(t, "policy", m["reason"])
		assert.Equal(t, true, m["status_verified"])
	})
	t.Run("signed by a third party", func(t *testing.T) {
		r := cli(t, nil, "status", "--key", w.c.key, "--iss", w.c.id, "--aud", w.a.id, "--offer", h, "--state", "accepted")
		mustCode(t, r, 0)
		assert.Contains(t, r.stderr, "warning")
		m := verifyStatusOut(t, 1, []byte(r.stdout), "--trust", w.trust, "--offer", h, "-")
		assert.Equal(t, "policy", m["reason"])
	})
	t.Run("wrong audience", func(t *testing.T) {
		r := cli(t, nil, "status", "--key", w.b.key, "--aud", w.c.id, "--offer", h, "--state", "accepted")
		mustCode(t, r, 0)
		m := verifyStatusOut(t, 1, []byte(r.stdout), "--trust", w.trust, "--offer", h, "-")
		assert.Equal(t, "wrong-audience", m["reason"])
	})
	t.Run("canceled by the delegate", func(t *testing.T) {
		r := cli(t, nil, "status", "--key", w.b.key, "--iss", w.b.id, "--aud", w.a.id, "--offer", h, "--state", "canceled")
		mustCode(t, r, 0)
		m := verifyStatusOut(t, 1, []byte(r.stdout), "--trust", w.trust, "--offer", h, "-")
		assert.Equal(t, "policy", m["reason"])
	})
	t.Run("tampered", func(t *testing.T) {
		raw := mustRead(t, acc)
		bad := raw[:len(raw)-3] + flip(raw[len(raw)-3]) + raw[len(raw)-2:]
		m := verifyStatusOut(t, 1, []byte(bad), "--trust", w.trust, "--offer", h, "-")
		assert.Equal(t, "bad-signature", m["reason"])
	})
	t.Run("an offer given as the status", func(t *testing.T) {
		offerJWS := offerElement(t, h)
		m := verifyStatusOut(t, 1, []byte(offerJWS), "--trust", w.trust, "--offer", h, "-")
		assert.Equal(t, "bad-signature", m["reason"])
	})
	for name, data := range map[string][]byte{
		"garbage": []byte("garbage"), "empty": {}, "truncated": []byte(mustRead(t, acc)[:40]),
	} {
		t.Run(name, func(t *testing.T) {
			f := writeFile(t, w.path(name+".jws"), data)
			m := verifyStatusOut(t, 1, nil, "--trust", w.trust, "--offer", h, f)
			assert.Equal(t, "bad-signature", m["reason"])
		})
	}
}

func TestStatusUsageErrors(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	acc := statusFile(t, w.path("accepted.jws"), "--key", w.b.key, "--offer", h, "--state", "accepted")
	garbage := writeFile(t, w.path("garbage"), []byte("garbage"))
	for name, args := range map[string][]string{
		"no key":             {"status", "--offer", h, "--state", "accepted"},
		"no offer":           {"status", "--key", w.b.key, "--state", "accepted"},
		"no state":           {"status", "--key", w.b.key, "--offer", h},
		"bad state":          {"status", "--key", w.b.key, "--offer", h, "--state", "offered"},
		"rejected no reason": {"status", "--key", w.b.key, "--offer", h, "--state", "rejected"},
		"garbage offer":      {"status", "--key", w.b.key, "--offer", garbage, "--state", "accepted"},
		"status as offer":    {"status", "--key", w.b.key, "--offer", acc, "--state", "accepted"},
		"missing offer":      {"status", "--key", w.b.key, "--offer", w.path("none"), "--state", "accepted"},
		"vs no trust":        {"verify-status", "--offer", h, acc},
		"vs no offer":        {"verify-status", "--trust", w.trust, acc},
		"vs no status":       {"verify-status", "--trust", w.trust, "--offer", h},
		"vs two statuses":    {"verify-status", "--trust", w.trust, "--offer", h, acc, acc},
		"vs missing status":  {"verify-status", "--trust", w.trust, "--offer", h, w.path("none")},
		"vs garbage offer":   {"verify-status", "--trust", w.trust, "--offer", garbage, acc},
		"vs garbage trust":   {"verify-status", "--trust", garbage, "--offer", h, acc},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, nil, args...)
			mustCode(t, r, 2)
			assert.Empty(t, r.stdout)
			assert.NotEmpty(t, r.stderr)
		})
	}
}

// offerElement returns the offer member of a JSON Handoff file.
func offerElement(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	m := oneObject(t, string(raw))
	return m["offer"].(string)
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func TestStatusForDraftExample(t *testing.T) {
	// A status for the draft's offer names its handoff digest, as the
	// draft's status payload does.
	dir := t.TempDir()
	key := filepath.Join(dir, "coder.jwk")
	r := cli(t, nil, "keygen", "--out", key)
	mustCode(t, r, 0)
	tr := writeTrust(t, filepath.Join(dir, "trust.json"), party{id: draftSelf, pub: strings.TrimSpace(r.stdout)})
	st := statusFile(t, filepath.Join(dir, "st.jws"), "--key", key, "--offer", draftHO, "--state", "accepted", "--now", "1793000003")
	m := verifyStatusOut(t, 0, nil, "--trust", tr, "--offer", draftHO, st)
	assert.Equal(t, draftOffer, m["offer"])
	assert.Equal(t, "q3Zl0v8bVfQmJm2c4bq1Ww", m["hop"])
	assert.Equal(t, draftSelf, m["iss"])
	assert.Equal(t, "spiffe://a.example/agent/planner", m["aud"])
	assert.Equal(t, false, m["offer_verified"], "the planner is not in this trust file")
}

// A status is in its offer's signed form unless --format says otherwise:
// a COSE offer is answered in COSE, a JWS offer in JWS, whatever the
// encoding of the Handoff object that carries it.
func TestStatus_DefaultsToTheOffersFormat(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct {
		name  string
		args  []string
		cose  bool
		force string
	}{
		{"jws offer", []string{"--format", "jws"}, false, ""},
		{"cose offer", []string{"--format", "cose"}, true, ""},
		{"cose offer in JSON", []string{"--format", "cose", "--encoding", "json"}, true, ""},
		{"jws offer in CBOR", []string{"--format", "jws", "--encoding", "cbor"}, false, ""},
		{"cose offer, --format jws", []string{"--format", "cose"}, false, "jws"},
		{"jws offer, --format cose", []string{"--format", "jws"}, true, "cose"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := offerFile(t, w.path(strings.ReplaceAll(c.name, " ", "-")+".h"),
				append([]string{"--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d"}, c.args...)...)
			args := []string{"status", "--key", w.b.key, "--offer", h, "--state", "accepted"}
			if c.force != "" {
				args = append(args, "--format", c.force)
			}
			r := cli(t, nil, args...)
			mustCode(t, r, 0)
			if c.cose {
				require.Equal(t, byte(0xd2), r.stdout[0], "a tagged COSE_Sign1")
			} else {
				require.Equal(t, 2, strings.Count(r.stdout, "."), "JWS compact text")
			}
			verifyStatusOut(t, 0, []byte(r.stdout), "--trust", w.trust, "--offer", h, "-")
		})
	}
}
