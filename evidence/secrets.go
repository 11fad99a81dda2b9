package evidence

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Pattern names one shape of credential-like string the scan catches.
type Pattern string

// The patterns caught (HC-62). Each is a small regular expression over one
// JSON string (a member value or a member name) of the package; see
// patterns below for the exact expressions.
const (
	PatternPEMPrivateKey  Pattern = "pem-private-key"   // -----BEGIN ... PRIVATE KEY----- (RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8, PGP)
	PatternJWT            Pattern = "jwt"               // three base64url parts, the first two starting "eyJ"
	PatternBearer         Pattern = "bearer-token"      // "Bearer <token>" / "Basic <credentials>" as in an Authorization header
	PatternAWSAccessKey   Pattern = "aws-access-key-id" // AKIA/ASIA/ABIA/ACCA + 16
	PatternAWSSecret      Pattern = "aws-secret-key"    // aws_secret_access_key = <40 chars>
	PatternGCPAPIKey      Pattern = "gcp-api-key"       // AIza + 35
	PatternAzureKey       Pattern = "azure-key"         // AccountKey=<base64 86>== or SharedAccessSignature/sig=<...>
	PatternGitHubToken    Pattern = "github-token"      // ghp_/gho_/ghu_/ghs_/ghr_ + 36, github_pat_...
	PatternSlackToken     Pattern = "slack-token"       // xoxa-/xoxb-/xoxp-/xoxr-/xoxs-/xapp-, hooks.slack.com/services/...
	PatternStripeKey      Pattern = "stripe-key"        // sk_live_/sk_test_/rk_live_/rk_test_/whsec_
	PatternPasswordField  Pattern = "password-field"    // a member named password/secret/api_key/token... with a non-empty value, or "password=..." in text
	PatternURLCredentials Pattern = "url-credentials"   // scheme://user:password@host
	PatternWithheldValue  Pattern = "withheld-value"    // the value of an item the sender declared withheld (builder only)
)

var patterns = []struct {
	name Pattern
	re   *regexp.Regexp
}{
	{PatternPEMPrivateKey, regexp.MustCompile(`-----BEGIN ((RSA|EC|DSA|OPENSSH|ENCRYPTED) )?PRIVATE KEY-----|-----BEGIN PGP PRIVATE KEY BLOCK-----`)},
	{PatternJWT, regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`)},
	{PatternBearer, regexp.MustCompile(`(?i)\b(bearer\s+[A-Za-z0-9\-._~+/]{16,}=*|basic\s+[A-Za-z0-9+/]{16,}={0,2})`)},
	{PatternAWSAccessKey, regexp.MustCompile(`\b(AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`)},
	{PatternAWSSecret, regexp.MustCompile(`(?i)aws_?secret_?(access_?)?key\W{0,3}\s*[:=]\s*\S{20,}`)},
	{PatternGCPAPIKey, regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
	{PatternAzureKey, regexp.MustCompile(`(?i)AccountKey=[A-Za-z0-9+/]{80,}={0,2}|SharedAccessSignature=|[?&]sig=[A-Za-z0-9%+/]{30,}`)},
	{PatternGitHubToken, regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})`)},
	{PatternSlackToken, regexp.MustCompile(`\b(xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,})|hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+`)},
	{PatternStripeKey, regexp.MustCompile(`\b((sk|rk)_(live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{16,})`)},
	{PatternPasswordField, regexp.MustCompile(`(?i)\b(password|passwd|pwd|passphrase|client_secret|api_key|apikey)\s*[:=]\s*\S+`)},
	{PatternURLCredentials, regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@`)},
}

// passwordNames are member names whose non-empty string value is taken for
// a credential (PatternPasswordField), compared after lower-casing and
// dropping "-" and "_".
var passwordNames = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "passphrase": true, "secret": true,
	"clientsecret": true, "apikey": true, "apisecret": true, "accesstoken": true,
	"refreshtoken": true, "idtoken": true, "authtoken": true, "token": true,
	"privatekey": true, "secretkey": true, "sessiontoken": true, "credential": true,
	"credentials": true, "authorization": true,
}

// Hit is one credential-like string found: the pattern and the JSON Pointer
// (RFC 6901) of the string. The matched text is never reported.
type Hit struct {
	Pattern Pattern
	Path    string
}

// minWithheld is the shortest withheld value the builder accepts: shorter
// values would match by chance.
const minWithheld = 4

// scan walks every string of a JSON text (member names and values) and
// reports credential-like strings and occurrences of the withheld values.
func scan(data []byte, withheld [][]byte) ([]Hit, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	var hits []Hit
	passwordMember := false
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return hits, nil
		}
		if err != nil {
			return nil, classify(err, data)
		}
		if tok.Kind() != '"' {
			passwordMember = false
			continue
		}
		s := tok.String()
		path := string(dec.StackPointer())
		kind, _ := dec.StackIndex(dec.StackDepth())
		isName := kind == '{' && dec.StackDepth() > 0 && isNamePosition(dec)
		if !isName && passwordMember && s != "" {
			hits = append(hits, Hit{PatternPasswordField, path})
		}
		passwordMember = false
		for _, p := range patterns {
			if p.re.MatchString(s) {
				hits = append(hits, Hit{p.name, path})
			}
		}
		for _, w := range withheld {
			if len(w) > 0 && strings.Contains(s, string(w)) {
				hits = append(hits, Hit{PatternWithheldValue, path})
				break
			}
		}
		if isName {
			n := strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(s))
			passwordMember = passwordNames[n]
		}
	}
}

// isNamePosition reports whether the token just read was an object member
// name: inside an object, names are the odd-length positions.
func isNamePosition(dec *jsontext.Decoder) bool {
	_, n := dec.StackIndex(dec.StackDepth())
	return n%2 == 1
}
