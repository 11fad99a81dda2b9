package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
)

func TestInspectDraft00(t *testing.T) {
	r := cli(t, nil, "inspect", "--now", draftNow, draftHO)
	mustCode(t, r, 0)
	out := r.stdout
	assert.True(t, strings.HasPrefix(out, "UNVERIFIED"), "marked at the top:\n%s", out)
	assert.Contains(t, out, "intact")
	assert.NotContains(t, out, "BROKEN")
	for _, want := range []string{
		"chain[0]  spiffe://u.example/agent/assistant -> spiffe://a.example/agent/planner",
		"└── offer  spiffe://a.example/agent/planner -> spiffe://b.example/agent/coder",
		"hop     Vb3kQx9ZtR2mN8pL4wYc1A",
		"hop     q3Zl0v8bVfQmJm2c4bq1Ww",
		"iat     2026-10-26T07:33:20Z (3s ago)",
		"exp     2026-10-26T07:35:20Z (in 1m57s; lifetime 120s)",
		"iat     2026-10-26T07:33:10Z (13s ago)",
		"format  jws, 942 octets, alg ES256, kid lWGFAC8Cpc9fneqXZ3b4aCjtbb7vBoT8RbvJxX61-kQ",
		"digest  " + draftOffer,
		"digest  " + draftChain,
		"prev    " + draftChain + " = digest of chain[0]: intact",
		"link    iss is the aud of chain[0]: intact",
		"prev    none: the start of the chain",
		"obo     u-8f2a (iss https://idp.u.example)",
		"ref     [0] digest sha-256:V_WPM8F9ztg6WxBxj1ZIGnzRbM1Xyp5GVdpEYmwbvuQ loc https://a.example/ctx/9",
	} {
		assert.Contains(t, out, want)
	}
	// Later, the offers show as expired.
	r = cli(t, nil, "inspect", "--now", draftLate, draftHO)
	mustCode(t, r, 0)
	assert.Contains(t, r.stdout, "(1m20s ago, expired; lifetime 120s)")
}

func TestInspectBrokenChain(t *testing.T) {
	w := newWorld(t)
	h1 := offerFile(t, w.path("h1.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d")
	h2 := offerFile(t, w.path("h2.json"), "--key", w.b.key, "--iss", w.b.id, "--aud", w.c.id, "--from", h1)
	unrelated := offerFile(t, w.path("x.json"), "--key", w.d.key, "--iss", w.d.id, "--aud", w.c.id, "--dialog", "d")

	r := cli(t, nil, "inspect", h2)
	mustCode(t, r, 0)
	assert.Contains(t, r.stdout, "intact")
	assert.NotContains(t, r.stdout, "BROKEN")

	// The chain element swapped for an unrelated offer.
	doc, err := json.Marshal(map[string]any{"offer": offerElement(t, h2), "chain": []string{offerElement(t, unrelated)}})
	require.NoError(t, err)
	broken := writeFile(t, w.path("broken.json"), doc)
	r = cli(t, nil, "inspect", broken)
	mustCode(t, r, 0)
	assert.True(t, strings.HasPrefix(r.stdout, "UNVERIFIED"))
	assert.Contains(t, r.stdout, "prev    BROKEN")
	assert.Contains(t, r.stdout, "link    BROKEN")
	assert.Contains(t, r.stdout, "a receiver rejects this chain")
	// verify agrees.
	m := verifyOut(t, 1, nil, "--self", w.c.id, "--trust", w.trust, broken)
	assert.Equal(t, "broken-chain", m["reason"])

	// One undecodable element.
	doc, err = json.Marshal(map[string]any{"offer": offerElement(t, h2), "chain": []string{"e30.e30.e30"}})
	require.NoError(t, err)
	bad := writeFile(t, w.path("bad.json"), doc)
	r = cli(t, nil, "inspect", bad)
	mustCode(t, r, 1)
	assert.Contains(t, r.stdout, "UNDECODABLE")
}

func TestInspectSingleElements(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d", "--task", "t-9")
	st := statusFile(t, w.path("st.jws"), "--key", w.b.key, "--offer", h, "--state", "rejected", "--reason", "policy")

	r := cli(t, nil, "inspect", st)
	mustCode(t, r, 0)
	assert.True(t, strings.HasPrefix(r.stdout, "UNVERIFIED"))
	assert.Contains(t, r.stdout, "status rejected  "+w.b.id+" -> "+w.a.id)
	assert.Contains(t, r.stdout, "reason  policy")

	// A bare offer element, with a trailing newline, on stdin.
	r = cli(t, []byte(offerElement(t, h)+"\n"), "inspect", "-")
	mustCode(t, r, 0)
	assert.Contains(t, r.stdout, "offer  "+w.a.id+" -> "+w.b.id)
	assert.Contains(t, r.stdout, "task    t-9")
	assert.Contains(t, r.stdout, "prev    none: the start of a chain")

	// Control characters from an element never reach the terminal raw.
	evil := offerFile(t, w.path("evil.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d\x1b[2J")
	r = cli(t, nil, "inspect", evil)
	mustCode(t, r, 0)
	assert.NotContains(t, r.stdout, "\x1b")
	assert.Contains(t, r.stdout, `"d\x1b[2J"`)
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	draft, err := os.ReadFile(draftHO)
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"garbage": []byte("garbage"), "empty": {}, "truncated": draft[:100],
	} {
		t.Run(name, func(t *testing.T) {
			f := writeFile(t, filepath.Join(dir, name), data)
			r := cli(t, nil, "inspect", f)
			mustCode(t, r, 1)
			assert.True(t, strings.HasPrefix(r.stdout, "UNVERIFIED"))
		})
	}
	for name, args := range map[string][]string{
		"missing":   {"inspect", filepath.Join(dir, "none")},
		"no file":   {"inspect"},
		"two files": {"inspect", draftHO, draftHO},
		"bad now":   {"inspect", "--now", "x", draftHO},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, nil, args...)
			mustCode(t, r, 2)
			assert.Empty(t, r.stdout)
		})
	}
}

func TestDigestDraft00(t *testing.T) {
	r := cli(t, nil, "digest", draftHO)
	mustCode(t, r, 0)
	assert.Equal(t, "chain[0]   "+draftChain+"\noffer      "+draftOffer+"\n", r.stdout)

	// One element on its own, on stdin.
	r = cli(t, []byte(offerElement(t, draftHO)), "digest", "-")
	mustCode(t, r, 0)
	assert.Equal(t, draftOffer+"\n", r.stdout)

	// --raw: the digest of a file's octets, as grant and refs use it.
	r = cli(t, nil, "digest", "--raw", draftDir+"/credential.txt")
	mustCode(t, r, 0)
	assert.Equal(t, "SKLjsfET5xtZoO5hzIiZFigz2JoYZLmW8Cg8GuYh4o4\n", r.stdout)
	r = cli(t, nil, "digest", "--raw", draftDir+"/ref-object.json")
	mustCode(t, r, 0)
	assert.Equal(t, "V_WPM8F9ztg6WxBxj1ZIGnzRbM1Xyp5GVdpEYmwbvuQ\n", r.stdout)
}

// A COSE element on its own is taken exactly as it is, whatever the length
// of its tag's head (RFC 8949 allows 0xd8 0x12 for 0xd2): never trimmed,
// even when its last octet is white space, and its digest is over all its
// octets. (Such an element then fails its signature check, as its octets
// are not a COSE_Sign1 alone.)
func TestDigestCOSEElementAsIs(t *testing.T) {
	w := newWorld(t)
	h := offerFile(t, w.path("h.json"), "--key", w.a.key, "--iss", w.a.id, "--aud", w.b.id, "--dialog", "d",
		"--format", "cose")
	b64 := offerElement(t, h)
	elem, err := base64.RawURLEncoding.DecodeString(b64)
	require.NoError(t, err)
	require.Equal(t, byte(0xd2), elem[0])
	long := append([]byte{0xd8, 0x12}, elem[1:]...)
	for name, octets := range map[string][]byte{
		"short tag head":                  elem,
		"long tag head":                   long,
		"a trailing octet of white space": append(bytes.Clone(long), '\n'), // kept: the digest covers it
	} {
		r := cli(t, octets, "digest", "-")
		mustCode(t, r, 0)
		assert.Equal(t, digest.SHA256(octets).B64()+"\n", r.stdout, name)
	}
}

func TestDigestErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := writeFile(t, filepath.Join(dir, "garbage"), []byte("garbage"))
	r := cli(t, nil, "digest", garbage)
	mustCode(t, r, 1)
	assert.Empty(t, r.stdout)
	assert.NotEmpty(t, r.stderr)
	empty := writeFile(t, filepath.Join(dir, "empty"), nil)
	mustCode(t, cli(t, nil, "digest", empty), 1)
	for _, args := range [][]string{{"digest"}, {"digest", filepath.Join(dir, "none")}, {"digest", draftHO, draftHO}} {
		r := cli(t, nil, args...)
		mustCode(t, r, 2)
		assert.Empty(t, r.stdout)
	}
}

// longChainCBOR is a Handoff in CBOR: the draft's offer and a chain of n
// one-octet byte strings, none of them a signed element (2 octets each).
func longChainCBOR(t testing.TB, n int) []byte {
	t.Helper()
	raw, err := os.ReadFile(draftHO)
	require.NoError(t, err)
	var h struct{ Offer string }
	require.NoError(t, json.Unmarshal(raw, &h))
	b := []byte{0xa2, 0x65, 'o', 'f', 'f', 'e', 'r', 0x79, byte(len(h.Offer) >> 8), byte(len(h.Offer))}
	b = append(b, h.Offer...)
	b = append(b, 0x65, 'c', 'h', 'a', 'i', 'n', 0x9a, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	for range n {
		b = append(b, 0x41, 0x00)
	}
	return b
}

// inspectInProcess runs inspect on data, read from stdin, in this process,
// and returns its exit status, its output and the bytes it allocated.
func inspectInProcess(data []byte) (code int, stdout string, alloc uint64) {
	var out, errb bytes.Buffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code = run([]string{"inspect", "--now", draftNow, "-"}, bytes.NewReader(data), &out, &errb)
	runtime.ReadMemStats(&after)
	return code, out.String(), after.TotalAlloc - before.TotalAlloc
}

// Issue 35, finding 3: inspect drew each element one level deeper and built
// its output in memory, so a 4 KB file printed 24 MB and a 130 KB one ran
// out of memory. Now a 130 KB file of 65,000 elements allocates well under
// 64 MiB in all, and prints a bounded summary of what it does not draw.
func TestInspect_LongChainBounded(t *testing.T) {
	data := longChainCBOR(t, 65000)
	require.Less(t, len(data), 131500)
	code, out, alloc := inspectInProcess(data)
	require.Equal(t, 1, code, out) // the elements do not decode
	t.Logf("%d octets in, %d octets out, %d bytes allocated (%.1fx the input)", len(data), len(out), alloc, float64(alloc)/float64(len(data)))
	assert.Less(t, alloc, uint64(64<<20), "allocated in all")
	assert.Less(t, len(out), 16<<10, "the output is bounded by what is drawn")
	// The chain as the library reads it (all of it today; a reader that
	// keeps less of a chain past its bound changes only the counts).
	h, _, err := handoff.ParseHandoff(data, handoff.Limits{})
	require.NoError(t, err)
	n := len(h.Chain)
	require.Greater(t, n, inspectHead+inspectTail)
	assert.Contains(t, out, fmt.Sprintf("chain[8] to chain[%d]: %d elements not drawn (inspect draws 16 of a chain); %d do not decode, 0 BROKEN link check(s) among them",
		n-inspectTail-1, n-inspectHead-inspectTail, n-inspectHead-inspectTail))
	assert.Contains(t, out, fmt.Sprintf("chain[%d]  UNDECODABLE", n-1))
	assert.Contains(t, out, "offer  spiffe://a.example/agent/planner -> spiffe://b.example/agent/coder")
	assert.Contains(t, out, "refuses it (too-deep)")
	// The indentation is bounded: no line starts with more than
	// inspectIndent levels of it.
	for _, line := range strings.Split(out, "\n") {
		assert.False(t, strings.HasPrefix(line, strings.Repeat(" ", 4*(inspectIndent+1)+1)), "line indented too deep: %q", line)
	}
}

// The elements inspect does not draw are still checked: their broken
// links are counted, in the line that stands for them and in the summary.
func TestInspect_LongChainCountsWhatItDoesNotDraw(t *testing.T) {
	raw, err := os.ReadFile(draftHO)
	require.NoError(t, err)
	var h struct {
		Offer string
		Chain []string
	}
	require.NoError(t, json.Unmarshal(raw, &h))
	// chain[0] of the draft 40 times: each copy after the first has no prev
	// and is not issued by the aud of the one before (2 BROKEN checks); the
	// offer follows the last copy, which is chain[0] itself.
	chain := make([]string, 40)
	for i := range chain {
		chain[i] = h.Chain[0]
	}
	doc, err := json.Marshal(map[string]any{"offer": h.Offer, "chain": chain})
	require.NoError(t, err)
	code, out, _ := inspectInProcess(doc)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "chain[8] to chain[31]: 24 elements not drawn (inspect draws 16 of a chain); 0 do not decode, 48 BROKEN link check(s) among them")
	assert.Contains(t, out, "Summary: 78 BROKEN link check(s); a receiver rejects this chain (broken-chain).")
	assert.Contains(t, out, "prev    "+draftChain+" = digest of chain[39]: intact")
	for i := range 40 {
		drawn := i < 8 || i >= 32
		assert.Equal(t, drawn, strings.Contains(out, fmt.Sprintf("chain[%d]  spiffe://", i)), "chain[%d]", i)
	}
	// A chain of 16 elements, the draft's bound, is drawn whole.
	doc, err = json.Marshal(map[string]any{"offer": h.Offer, "chain": chain[:16]})
	require.NoError(t, err)
	_, out, _ = inspectInProcess(doc)
	assert.NotContains(t, out, "not drawn")
	assert.NotContains(t, out, "too-deep")
	assert.Contains(t, out, "chain[15]  spiffe://")
}

// BenchmarkInspectLongChain reports what inspect costs on the 130 KB file
// of 65,000 elements, per input octet.
func BenchmarkInspectLongChain(b *testing.B) {
	data := longChainCBOR(b, 65000)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var out bytes.Buffer
		if code := run([]string{"inspect", "--now", draftNow, "-"}, bytes.NewReader(data), &out, io.Discard); code != 1 {
			b.Fatalf("exit %d", code)
		}
	}
}
