package evidence

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors from the fixture")

const vectorDir = "testdata/vectors"

// vectorPackage is the fixture of the valid vector: the refund package,
// bound to a fixed hop.
func vectorPackage(t *testing.T) []byte {
	p := refundPackage()
	p.Handoff = Header{ID: "kJIcudVNmFFwbYKTXNO3mq", Time: time.Unix(t0, 0).UTC()}
	p.Sender.Agent, p.Receiver.Agent = string(triage), string(payments)
	p.Withheld = []Withheld{{Item: "card_number", Reason: "PCI scope"}}
	p.Extra = Extra{"x-ticket": []byte(`{"id":77,"note":"caf\u00e9 \ud83d\ude00","ratio":1.50}`)}
	enc, err := p.Encode()
	require.NoError(t, err)
	// Spell it as a person would: one member a line, members in template
	// order, a string with escapes (JCS writes the characters).
	s := strings.ReplaceAll(string(enc), `,"`, ",\n  \"")
	s = strings.Replace(s, "café 😀", `caf\u00e9 \ud83d\ude00`, 1)
	return []byte(s + "\n")
}

// Language-neutral vectors (see testdata/vectors/README.md): a valid
// package with its JCS form and digests, and invalid packages with the
// failure class a decoder must report.
func TestVectors(t *testing.T) {
	if *update {
		pkg := vectorPackage(t)
		c, err := Canonical(pkg, DecodeOptions{})
		require.NoError(t, err)
		salt := []byte("0123456789abcdef0123456789abcdef")
		salted := digest.SHA256(append(append([]byte(nil), salt...), c...))
		files := map[string]string{
			"valid-refund.json":          string(pkg),
			"valid-refund.jcs":           string(c),
			"valid-refund.digest":        digest.SHA256(c).B64() + "\n",
			"valid-refund.salt":          string(salt),
			"valid-refund.salted-digest": salted.B64() + "\n",
		}
		for name, body := range files {
			require.NoError(t, os.WriteFile(filepath.Join(vectorDir, name), []byte(body), 0o644))
		}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(vectorDir, name))
		require.NoError(t, err)
		return b
	}
	pkg := read("valid-refund.json")
	c, err := Canonical(pkg, DecodeOptions{})
	require.NoError(t, err)
	require.Equal(t, string(read("valid-refund.jcs")), string(c))
	d, err := Digest(pkg, DecodeOptions{})
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(read("valid-refund.digest"))), d.B64())
	r := ref.Ref{Kind: KindSalted, Dig: mustParse(t, strings.TrimSpace(string(read("valid-refund.salted-digest"))))}
	require.Equal(t, ref.Verified, CheckRef(r, ref.Object{Octets: pkg, Salt: read("valid-refund.salt")}, DecodeOptions{}).Outcome)

	invalid := map[string]error{
		"invalid-duplicate-name.json":        ErrDuplicateName,
		"invalid-duplicate-nested-name.json": ErrDuplicateName,
		"invalid-lone-surrogate.json":        ErrInvalidUTF8,
		"invalid-utf8.json":                  ErrInvalidUTF8,
		"invalid-not-object.json":            ErrMalformed,
		"invalid-trailing-data.json":         ErrMalformed,
		"invalid-time.json":                  ErrMalformed,
	}
	ents, err := os.ReadDir(vectorDir)
	require.NoError(t, err)
	seen := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "invalid-") {
			continue
		}
		want, ok := invalid[e.Name()]
		require.True(t, ok, "vector %s has no expected class here", e.Name())
		_, err := Decode(read(e.Name()), DecodeOptions{})
		require.True(t, errors.Is(err, want), "%s: got %v, want %v", e.Name(), err, want)
		seen++
	}
	require.Equal(t, len(invalid), seen)
}

func mustParse(t *testing.T, b64 string) digest.Digest {
	d, err := digest.Parse(b64)
	require.NoError(t, err)
	return d
}
