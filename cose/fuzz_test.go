package cose_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/cose"
	"github.com/agentproto/handoff/internal/ecsig"
)

// fuzzPayload is an offer payload in CBOR core deterministic encoding, as
// the root package writes it.
var fuzzPayload = func() []byte {
	return fuzzEnc(map[string]any{
		"v": 1, "type": "offer", "hop": "fzhop-cose-0000000001", "dialog": "ctx-fuzz",
		"iss": "spiffe://fuzz.example/agent/beta", "aud": "spiffe://b.example/agent/coder",
		"iat": 1793000000, "exp": 1793000120,
	})
}

// fuzzEnc encodes v in core deterministic encoding.
func fuzzEnc(v any) []byte {
	b, err := encMode.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// fuzzKeys are fixed keys, one per algorithm, whose scalars or seeds are
// SHA-256 of a label, so that the committed corpus stays valid.
func fuzzKeys() map[string]crypto.Signer {
	scalar := func(label string) []byte { d := sha256.Sum256([]byte(label)); return d[:] }
	p256, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar("handoff fuzz cose ES256"))
	if err != nil {
		panic(err)
	}
	p384, err := ecdsa.ParseRawPrivateKey(elliptic.P384(), append(scalar("handoff fuzz cose ES384"), make([]byte, 16)...))
	if err != nil {
		panic(err)
	}
	return map[string]crypto.Signer{
		cose.ES256: p256,
		cose.ES384: p384,
		cose.EdDSA: ed25519.NewKeyFromSeed(scalar("handoff fuzz cose EdDSA")),
	}
}

// fuzzMessages returns the seeds, a deterministic (RFC 6979) message per
// algorithm plus one without kid (HC-18), and the trusted keys.
func fuzzMessages(tb testing.TB) (map[string][]byte, []cose.Key) {
	tb.Helper()
	msgs := map[string][]byte{}
	var keys []cose.Key
	for alg, k := range fuzzKeys() {
		msg, err := cose.Sign(fuzzPayload(), k, alg, "kid-"+alg, nil)
		require.NoError(tb, err)
		msgs[alg] = msg
		keys = append(keys, cose.Key{Public: k.Public(), Alg: alg})
	}
	// Without kid: the protected header is {1: -7, 3: content type}.
	k := fuzzKeys()[cose.ES256]
	prot := fuzzEnc(map[int64]any{1: -7, 3: cose.ContentType})
	tbs := fuzzEnc([]any{"Signature1", prot, []byte{}, fuzzPayload()})
	sig, err := ecsig.Sign(nil, k, cose.ES256, tbs)
	require.NoError(tb, err)
	msgs["ES256-nokid"] = cat([]byte{0xd2, 0x84}, bstr(prot), []byte{0xa0}, bstr(fuzzPayload()), bstr(sig))
	return msgs, keys
}

// fuzzAlg is the algorithm of the seed message of that name.
func fuzzAlg(name string) string {
	if name == cose.ES384 || name == cose.EdDSA {
		return name
	}
	return cose.ES256
}

// twinMessage replaces the ECDSA signature at the end of msg by its high-S
// twin.
func twinMessage(tb testing.TB, msg []byte, alg string) []byte {
	sig := sigOf(msg, alg)
	tw, err := ecsig.Twin(alg, sig)
	require.NoError(tb, err)
	return cat(msg[:len(msg)-len(sig)], tw)
}

var fuzzSentinels = []error{cose.ErrMalformed, cose.ErrTooLarge, cose.ErrType, cose.ErrCrit,
	cose.ErrAlg, cose.ErrNoKey, cose.ErrSignature}

// signedParts returns what the signature of a COSE_Sign1 covers besides the
// fixed context: the protected header's octets, the payload and, beside
// them, the signature. It decodes any valid CBOR, whatever its heads.
func signedParts(msg []byte) ([3]string, bool) {
	var tag cbor.RawTag
	if err := cbor.Unmarshal(msg, &tag); err != nil {
		return [3]string{}, false
	}
	var m struct {
		_           struct{} `cbor:",toarray"`
		Protected   []byte
		Unprotected cbor.RawMessage
		Payload     []byte
		Signature   []byte
	}
	if err := cbor.Unmarshal(tag.Content, &m); err != nil {
		return [3]string{}, false
	}
	return [3]string{string(m.Protected), string(m.Payload), string(m.Signature)}, true
}

// FuzzOpen mutates valid messages. Open never panics, in either profile; an
// error wraps one of the package's sentinels and comes with a nil payload
// and a zero header; the strict profile opens nothing the default does not.
// In the strict profile, a message that opens is one of the seeds, byte for
// byte, or the seed with its ECDSA signature replaced by the high-S twin
// (r, n-s), which verifies too (Wycheproof marks it valid; the root package
// treats it as equivocation, HC-53). In the default profile, a message that
// opens carries the protected header, payload and signature of one of those,
// octet for octet: only what the signature does not cover (the unprotected
// header, the length of heads) may differ, and that makes other octets, so
// another handoff digest (HC-20). UnsafePayload agrees with Open on the
// payload.
func FuzzOpen(f *testing.F) {
	msgs, keys := fuzzMessages(f)
	verifies := map[string]bool{}
	signed := map[[3]string]bool{}
	for name, msg := range msgs {
		f.Add(msg)
		all := [][]byte{msg}
		if alg := fuzzAlg(name); alg != cose.EdDSA {
			all = append(all, twinMessage(f, msg, alg))
		}
		for _, m := range all {
			verifies[string(m)] = true
			parts, ok := signedParts(m)
			require.True(f, ok)
			signed[parts] = true
		}
	}
	f.Add([]byte{0xd2, 0x84, 0x40, 0xa0, 0x40, 0x40})
	// Seeds for what only the default profile opens: a kid in the
	// unprotected header, and indefinite lengths with long heads.
	nokid := msgs["ES256-nokid"]
	require.Equal(f, []byte{0xd2, 0x84}, nokid[:2])
	var parts []cbor.RawMessage
	var tag cbor.RawTag
	require.NoError(f, cbor.Unmarshal(nokid, &tag))
	require.NoError(f, cbor.Unmarshal(tag.Content, &parts))
	lookup := func(cose.Header, []byte) ([]cose.Key, error) { return keys, nil }
	for _, m := range [][]byte{
		cat([]byte{0xd2, 0x84}, parts[0], fuzzEnc(map[int64]any{4: []byte("kid-ES256"), -70000: "x"}), parts[2], parts[3]),
		cat([]byte{0xd8, 0x12, 0x9f}, parts[0], []byte{0xbf, 0xff}, []byte{0x5f}, parts[2], []byte{0xff}, parts[3], []byte{0xff}),
	} {
		_, _, err := cose.Open(m, lookup, 4096)
		require.NoError(f, err)
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		strictPayload, strictHeader, strictErr := cose.OpenWith(msg, lookup, cose.Options{MaxSize: 4096, Strict: true})
		payload, h, err := cose.Open(msg, lookup, 4096)
		for _, r := range []struct {
			payload []byte
			h       cose.Header
			err     error
		}{{strictPayload, strictHeader, strictErr}, {payload, h, err}} {
			if r.err == nil {
				continue
			}
			if r.payload != nil || r.h != (cose.Header{}) {
				t.Fatalf("error %v with payload %x, header %v", r.err, r.payload, r.h)
			}
			wraps := false
			for _, s := range fuzzSentinels {
				wraps = wraps || errors.Is(r.err, s)
			}
			if !wraps {
				t.Fatalf("error wraps no sentinel: %v", r.err)
			}
		}
		if strictErr == nil {
			if err != nil || !bytes.Equal(strictPayload, payload) || strictHeader != h {
				t.Fatalf("strict opens %x, default gives %x, %v, %v", msg, payload, h, err)
			}
			if !verifies[string(msg)] {
				t.Fatalf("strict: a message that was never signed opens: %x", msg)
			}
		}
		if err != nil {
			return
		}
		parts, ok := signedParts(msg)
		if !ok || !signed[parts] {
			t.Fatalf("a message whose signed parts were never signed opens: %x", msg)
		}
		if string(payload) != parts[1] {
			t.Fatalf("Open returns %x, the message carries %x", payload, parts[1])
		}
		unsafe, err := cose.UnsafePayload(msg, 4096)
		if err != nil || !bytes.Equal(unsafe, payload) {
			t.Fatalf("UnsafePayload = %x, %v; Open = %x", unsafe, err, payload)
		}
	})
}

// TestOpen_HC20_OneOctetChanges is FuzzOpen's property made exhaustive for
// small edits: every one-octet substitution (eight different values),
// deletion and insertion at every position of each seed message fails to
// open.
func TestOpen_HC20_OneOctetChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("exhaustive")
	}
	msgs, keys := fuzzMessages(t)
	lookup := func(cose.Header, []byte) ([]cose.Key, error) { return keys, nil }
	names := make([]string, 0, len(msgs))
	for name := range msgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		msg := msgs[name]
		_, _, err := cose.Open(msg, lookup, 4096)
		require.NoError(t, err, name)
		for i := range msg {
			for _, x := range []byte{1, 2, 4, 0x20, 0x40, 0x80, 0xff} {
				v := bytes.Clone(msg)
				v[i] ^= x
				if _, _, err := cose.Open(v, lookup, 4096); err == nil {
					t.Fatalf("%s: octet %d xor %#x opens: %x", name, i, x, v)
				}
			}
			if _, _, err := cose.Open(append(bytes.Clone(msg[:i]), msg[i+1:]...), lookup, 4096); err == nil {
				t.Fatalf("%s: octet %d deleted opens", name, i)
			}
			for _, c := range []byte{0x00, 0xa0, 0x40} {
				if _, _, err := cose.Open(append(append(bytes.Clone(msg[:i]), c), msg[i:]...), lookup, 4096); err == nil {
					t.Fatalf("%s: %#x inserted at %d opens", name, c, i)
				}
			}
		}
	}
}

// TestWriteFuzzCorpus writes the seeds of FuzzOpen as its committed corpus,
// only when HANDOFF_WRITE_FUZZ_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("HANDOFF_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set HANDOFF_WRITE_FUZZ_CORPUS=1 to regenerate testdata/fuzz")
	}
	msgs, _ := fuzzMessages(t)
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, msg := range msgs {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", msg)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "seed-"+strings.ToLower(name)), []byte(body), 0o644))
	}
}
