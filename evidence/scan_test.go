package evidence

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// The shapes the credential scan missed (issue 23), each in an unknown
// member of an otherwise clean package: Build refuses it, naming the
// pattern and the place.
func TestScan_ShapesCaught(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	_, edk, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	pkcs8 := func(k any) []byte { b, err := x509.MarshalPKCS8PrivateKey(k); require.NoError(t, err); return b }
	sec1, err := x509.MarshalECPrivateKey(ek)
	require.NoError(t, err)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8(ek)}))
	tok36 := strings.Repeat("aB3", 12)
	q := func(s string) string { b, _ := jsontext.AppendQuote(nil, s); return string(b) }
	cases := []struct {
		name, value string // value is JSON
		pattern     Pattern
	}{
		{"aws key after an underscore", q("AWS_KEY_AKIAIOSFODNN7EXAMPLE"), PatternAWSAccessKey},
		{"github token after an underscore", q("token_ghp_" + tok36), PatternGitHubToken},
		{"github classic hex token", q("github_token=" + strings.Repeat("0123456789abcdef", 2) + "01234567"), PatternGitHubToken},
		{"gitlab token", q("glpat-" + "xYz12AbC34dEf56GhI78"), PatternGitLabToken},
		{"openai project key", q("sk-proj-" + tok36), PatternOpenAIKey},
		{"openai key", q("sk-" + tok36), PatternOpenAIKey},
		{"anthropic key", q("sk-ant-api03-" + tok36), PatternAnthropicKey},
		{"npm token", q("npm_" + tok36), PatternNPMToken},
		{"slack xoxe token", q("xoxe-1-" + tok36), PatternSlackToken},
		{"slack xoxe.xoxp token", q("xoxe.xoxp-1-" + tok36), PatternSlackToken},
		{"db_password member", `{"db_password":"hunter2"}`, PatternPasswordField},
		{"userPassword member", `{"userPassword":"hunter2"}`, PatternPasswordField},
		{"x-api-key member", `{"x-api-key":"k-123"}`, PatternPasswordField},
		{"password member with a trailing space", `{"Password ":"hunter2"}`, PatternPasswordField},
		{"password member holding an array", `{"password":["h","unter2"]}`, PatternPasswordField},
		{"password member holding an object", `{"password":{"v":"hunter2"}}`, PatternPasswordField},
		{"password member holding a number", `{"password":123456}`, PatternPasswordField},
		{"url credentials with an empty user", q("redis://:s3cret@cache.internal:6379"), PatternURLCredentials},
		{"lower-case PEM armour", q(strings.ToLower(pemKey)), PatternPEMPrivateKey},
		{"PEM armour", q(pemKey), PatternPEMPrivateKey},
		{"base64 of a PEM", q(b64([]byte(pemKey))), PatternEncodedKey},
		{"base64 of a PEM after one octet", q(b64([]byte("x" + pemKey))), PatternEncodedKey},
		{"base64 of a PEM after two octets", q(b64([]byte("xy" + pemKey))), PatternEncodedKey},
		{"PKCS#8 RSA DER in base64", q(b64(pkcs8(rk))), PatternEncodedKey},
		{"PKCS#8 EC DER in base64", q(b64(pkcs8(ek))), PatternEncodedKey},
		{"PKCS#8 Ed25519 DER in base64", q(b64(pkcs8(edk))), PatternEncodedKey},
		{"PKCS#1 RSA DER in base64", q(b64(x509.MarshalPKCS1PrivateKey(rk))), PatternEncodedKey},
		{"SEC 1 EC DER in base64", q(b64(sec1)), PatternEncodedKey},
		{"PuTTY key", q("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none"), PatternPuTTYKey},
		{"JWK with a private member", `{"kty":"EC","crv":"P-256","x":"f83O","y":"x_FE","d":"jpsQ"}`, PatternJWKPrivate},
		{"symmetric JWK", `{"k":"GawgguFyGrWKav7AX4VKUg","kty":"oct"}`, PatternJWKPrivate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := refundPackage()
			p.Extra = Extra{"note": jsontext.Value(`{"v":` + c.value + `}`)}
			_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
			var re *RestrictedError
			require.True(t, errors.As(err, &re), "not refused: %v", err)
			var got []Pattern
			for _, h := range re.Hits {
				require.True(t, strings.HasPrefix(h.Path, "/note/v"), h.Path)
				got = append(got, h.Pattern)
			}
			require.Contains(t, got, c.pattern)
		})
	}
}

// Near misses are not credentials: the shapes need their full length, and
// a member named like a credential may say that it holds none.
func TestScan_NearMissesPass(t *testing.T) {
	for _, v := range []string{
		`"AKIA is a prefix"`, `"task_ghp_short"`, `"sk-short"`, `{"password":""}`, `{"password":null}`,
		`{"password":false}`, `{"password":[]}`, `{"token_count":3}`, `{"kty":"EC","x":"f83O","y":"x_FE"}`,
		`"https://example.com/a:b"`, `"-----BEGIN PUBLIC KEY-----"`, `"MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"`,
	} {
		p := refundPackage()
		p.Extra = Extra{"note": jsontext.Value(v)}
		_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
		require.NoError(t, err, v)
	}
}

// A deployment's own detector runs beside the built-in ones.
type employeeID struct{}

func (employeeID) Pattern() Pattern { return "employee-id" }
func (employeeID) Detect(f *Field) bool {
	return f.Kind == '"' && strings.HasPrefix(f.Text, "EMP-")
}

func TestScan_PluggableDetectors(t *testing.T) {
	p := refundPackage()
	p.Passed = append(p.Passed, ContextItem{Name: "staff", Value: "EMP-0042"})
	_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
	require.NoError(t, err, "not a built-in shape")
	_, err = NewBuilder(p).Build(testBinding(t), BuildOptions{Detectors: append(DefaultDetectors(), employeeID{})})
	var re *RestrictedError
	require.True(t, errors.As(err, &re))
	require.Equal(t, []Hit{{"employee-id", "/context_passed/2/value"}}, re.Hits)
}

// However many strings match, the hits kept are bounded.
func TestScan_HitsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"AKIAIOSFODNN7EXAMPLE"`)
	}
	b.WriteString("]")
	hits, err := scan([]byte(`{"x":`+b.String()+`}`), nil, nil)
	require.NoError(t, err)
	require.Len(t, hits, maxHits+1)
	require.Equal(t, Hit{PatternTooManyHits, ""}, hits[maxHits])
}
