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
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// refusedNote builds a clean package with value (JSON) in the unknown
// member {"note": {"v": value}}, and returns the hits Build refused it for.
func refusedNote(t *testing.T, value string) []Hit {
	t.Helper()
	p := refundPackage()
	p.Extra = Extra{"note": jsontext.Value(`{"v":` + value + `}`)}
	_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
	var re *RestrictedError
	require.True(t, errors.As(err, &re), "not refused: %v", err)
	return re.Hits
}

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
			var got []Pattern
			for _, h := range refusedNote(t, c.value) {
				require.True(t, strings.HasPrefix(h.Path, "/note/v"), h.Path)
				got = append(got, h.Pattern)
			}
			require.Contains(t, got, c.pattern)
		})
	}
}

// Issue 35, finding 5: the shapes one value shows on its own that got
// through, each in an unknown member of an otherwise clean package, or in
// a passed context item: Build refuses it, naming the pattern.
func TestScan_OneValueShapesCaught(t *testing.T) {
	q := func(s string) string { b, _ := jsontext.AppendQuote(nil, s); return string(b) }
	b64u := base64.RawURLEncoding.EncodeToString
	hex40 := strings.Repeat("0123456789abcdef", 2) + "01234567"
	cases := []struct {
		name, value string // value is JSON
		pattern     Pattern
	}{
		{"aws key id followed by a digit", q("AKIAIOSFODNN7EXAMPLE7"), PatternAWSAccessKey},
		{"aws key id followed by a year", q("rotated AKIAIOSFODNN7EXAMPLE2024"), PatternAWSAccessKey},
		{"SecretAccessKey in YAML", q("SecretAccessKey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), PatternAWSSecret},
		{"AWSSecretAccessKey", q("AWSSecretAccessKey=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), PatternAWSSecret},
		{"aws secret after a password", q("password=x; aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), PatternAWSSecret},
		{"PGPASSWORD", q("PGPASSWORD=hunter2 psql -h db"), PatternPasswordField},
		{"api-key", q("api-key: abc123def456"), PatternPasswordField},
		{"password in JSON text", q(`{"password": "hunter2"}`), PatternPasswordField},
		{"the password is", q("the password is hunter2"), PatternPasswordField},
		{"the password was", q("The password was P@ssw0rd."), PatternPasswordField},
		{"Authorization Token", q("Authorization: Token abc123def456ghi789"), PatternBearer},
		{"Bearer with %20", q("Authorization=Bearer%20abcdef0123456789ABCDEF"), PatternBearer},
		{"Bearer with +", q("?auth=Bearer+abcdef0123456789ABCDEF"), PatternBearer},
		{"JWT with a spaced header", q(b64u([]byte(`{ "alg": "HS256", "typ": "JWT" }`)) + "." + b64u([]byte(`{ "sub": "1234567890" }`)) + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"), PatternJWT},
		{"JWT over lines", q(b64u([]byte("{\n  \"alg\": \"HS256\"\n}")) + "." + b64u([]byte("{\n  \"sub\": \"1\"\n}")) + ".sig"), PatternJWT},
		{"JWT with URL-encoded dots", q("eyJhbGciOiJIUzI1NiJ9%2EeyJzdWIiOiIxMjM0NTY3ODkwIn0%2EdozjgNryP4J3jVmNHl0w5N"), PatternJWT},
		{"cookie", q("cookie session=4f3a9c2b7d1e8f60"), PatternSessionCookie},
		{"Cookie header", q("Cookie: sid=Zm9vYmFyMTIzNDU2; theme=dark"), PatternSessionCookie},
		{"Set-Cookie", q("Set-Cookie: __Host-id=a8F3kQ9zLm2XvB7w; Secure"), PatternSessionCookie},
		{"GITHUB_TOKEN quoted", q(`GITHUB_TOKEN="` + hex40 + `"`), PatternGitHubToken},
		{"github token spaced", q("github token: " + hex40), PatternGitHubToken},
		{"GH_TOKEN", q("GH_TOKEN=" + hex40), PatternGitHubToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Contains(t, refusedNote(t, c.value), Hit{c.pattern, "/note/v"})
		})
	}
	// A passed context item named like a credential, in any case.
	for _, name := range []string{"pass", "PASS", "Pass", "passwd", "PASSWD", "secret", "Secret", "api_key", "API_KEY", "Api-Key"} {
		t.Run("context item "+name, func(t *testing.T) {
			p := refundPackage()
			p.Passed = append(p.Passed, ContextItem{Name: name, Value: "hunter2"})
			_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
			var re *RestrictedError
			require.True(t, errors.As(err, &re), "not refused: %v", err)
			require.Contains(t, re.Hits, Hit{PatternPasswordField, "/context_passed/2/value"})
		})
	}
}

// What one value cannot show, as the documentation of the patterns says:
// these pass. If one of them is caught some day, the documentation must
// say so.
func TestScan_WhatOneValueCannotShow(t *testing.T) {
	cases := map[string]string{
		"JWT split across members":  `{"h":"eyJhbGciOiJIUzI1NiJ9","p":"eyJzdWIiOiIxMjM0NTY3ODkwIn0","s":"dozjgNryP4J3jVmNHl0w5N"}`,
		"AWS key split":             `{"a":"AKIAIOSF","b":"ODNN7EXAMPLE"}`,
		"AWS key, zero-width space": `"AKIAIOSF\u200bODNN7EXAMPLE"`,
		"AWS key, Cyrillic A":       `"\u0410KIAIOSFODNN7EXAMPLE"`,
		"bare 40-character secret":  `"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"`,
		"user:password in base64":   `"` + base64.StdEncoding.EncodeToString([]byte("admin:hunter2")) + `"`,
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			p := refundPackage()
			p.Extra = Extra{"note": jsontext.Value(v)}
			_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
			require.NoError(t, err)
		})
	}
}

// Ordinary text is not taken for a credential: near misses of every shape,
// and sentences that use the words the shapes look for.
func TestScan_OrdinaryTextPasses(t *testing.T) {
	for _, v := range []string{
		"the password is required",
		"The password was reset by the customer; the password is incorrect.",
		"password policy: at least twelve characters",
		"passwordless sign-in is enabled",
		"API key: see the console",
		"authorization: pending supervisor-approval",
		"Authorization required before any refund over 500",
		"cookie consent=accepted",
		"the session cookie expired; cookie settings=default",
		"Bearer of bad news arrives tomorrow",
		"basic information about the customer",
		"the secret is out; keep secrets out of tickets",
		"secret_sauce_recipe_v2",
		"see github.com/org/repo and the GitHub token docs",
		"GITHUB_SHA=" + strings.Repeat("0123456789abcdef", 2) + "01234567",
		"eyelash.eyebrows.eyeliner",
		"https://example.com:8443/path?q=1&sig=short",
		"mailto:ops@example.com",
		"boarding pass issued, compass set, bypass closed",
		"MIT license; MII is a network interface",
		"AKIA and ASIA are account prefixes",
		"sk-learn, sk-1, rk_live",
		"-----BEGIN CERTIFICATE-----",
		"Authorization: Basic",
		"token usage: 1234 of 5000",
		"the access token endpoint is /oauth/token",
	} {
		t.Run(v, func(t *testing.T) {
			doc, err := jsontext.AppendQuote([]byte(`{"note":`), v)
			require.NoError(t, err)
			hits, err := scan(append(doc, '}'), nil, nil)
			require.NoError(t, err)
			require.Empty(t, hits)
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

// BenchmarkScanString reports what the built-in detectors cost on one
// 256 KiB string, as ns/octet, for ordinary text and for strings dense in
// the anchors of each shape (issue 35: a 250 KB string of "eyJ" fragments
// cost 2.1 s in the JWT pattern); x-lookup is that time over the time of
// one table lookup per octet of the same string, measured in the same
// iterations, which a loaded machine slows alike. The "package" case is
// the whole scan of a package holding such a string, canonicalization
// included.
//
//	go test -run '^$' -bench ScanString ./evidence
func BenchmarkScanString(b *testing.B) {
	const size = 256 << 10
	var lookup [256]uint8 // one table lookup per octet, without branches
	for c := range lookup {
		lookup[c] = uint8(c & 1)
	}
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)+1)[:size] }
	for _, c := range []struct{ name, text string }{
		{"english", fill("The customer asked for a refund of order 4411; the agent checked the ledger. ")},
		{"base64", base64.StdEncoding.EncodeToString([]byte(fill("\x00\x01\x02\x03\xfe\xfd")))[:size]},
		{"eyJ", fill("eyJ")},
		{"eyJ-", fill("eyJ-")},
		{"eyJ.", fill("eyJabcde.")},
		{"sk-", fill("sk-")},
		{"glpat-", fill("glpat-")},
		{"AKIA", fill("AKIA0123456789ABCDE ")},
		{"-----BEGIN", fill("-----BEGIN ")},
		{"://", fill("a://b:c")},
		{"authorization", fill("authorization: x ")},
		{"cookie", fill("cookie=")},
		{"password", fill("password is x ")},
		{"github", fill("github_x=0123456789abcdef0123456789abcdef01234567 ")},
		{"spaces", fill(" ")},
		{"mixed", fill("AKIAeyJ.sk-ghp_npm_xoxb-secret_key=password is ://a:b@ -----BEGIN MIIcookie=bearer ")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			var scanned, looked time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				f := Field{Text: c.text, Kind: '"'}
				for _, d := range builtin {
					d.Detect(&f)
				}
				t1 := time.Now()
				for i := 0; i < len(c.text); i++ {
					n += int(lookup[c.text[i]])
				}
				scanned, looked = scanned+t1.Sub(t0), looked+time.Since(t1)
			}
			b.ReportMetric(float64(scanned.Nanoseconds())/float64(b.N)/float64(len(c.text)), "ns/octet")
			b.ReportMetric(float64(scanned)/float64(looked), "x-lookup")
			sink += n
		})
	}
	b.Run("package", func(b *testing.B) {
		doc, err := jsontext.AppendQuote([]byte(`{"note":`), fill("eyJ-"))
		require.NoError(b, err)
		doc = append(doc, '}')
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, err := scan(doc, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(doc)), "ns/octet")
	})
}

var sink int

// FuzzFindShapes: the one-pass shape finder never reads outside its
// string, whatever the string, and finds the same shapes in a string
// alone and at the end of a longer one (what a shape needs lies within
// its string).
func FuzzFindShapes(f *testing.F) {
	for _, s := range []string{"AKIAIOSFODNN7EXAMPLE7", "PGPASSWORD=hunter2", "eyJhbGciOiJIUzI1NiJ9%2EeyJzdWIiOiIxMjM0NTY3ODkwIn0%2E",
		"-----BEGIN RSA PRIVATE KEY-----", "redis://:s3cret@h", "sk-ant-api03-", "the password is x1", "cookie sid=abc123def",
		"Authorization: Token abc123def456", "github_token=0123456789abcdef0123456789abcdef01234567", "MIIEvQIBADANBg", "sig="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var m shapeScan
		alone := findShapes(s, &m)
		m = shapeScan{}
		if got := findShapes(" "+s, &m); got != alone {
			t.Fatalf("%q: %b alone, %b after a space", s, alone, got)
		}
	})
}
