package evidence

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

// Pattern names one shape of credential-like data the scan catches.
type Pattern string

// The built-in patterns (HC-62). Each string pattern is a regular
// expression over one JSON string of the package (a member value or a
// member name), unescaped; see builtin below for the exact expressions.
// A token's shape is found after any character that is not a letter or a
// digit, so an underscore or a dash before it does not hide it.
const (
	PatternPEMPrivateKey  Pattern = "pem-private-key"      // -----BEGIN ... PRIVATE KEY----- in any case (RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8, PGP ... BLOCK)
	PatternEncodedKey     Pattern = "encoded-private-key"  // base64 of a PEM private key, or PKCS#8 / PKCS#1 / SEC 1 DER in base64
	PatternPuTTYKey       Pattern = "putty-private-key"    // PuTTY-User-Key-File-N:
	PatternJWT            Pattern = "jwt"                  // three base64url parts, the first two starting "eyJ"
	PatternBearer         Pattern = "bearer-token"         // "Bearer <token>" / "Basic <credentials>" as in an Authorization header
	PatternAWSAccessKey   Pattern = "aws-access-key-id"    // AKIA/ASIA/ABIA/ACCA + 16
	PatternAWSSecret      Pattern = "aws-secret-key"       // aws_secret_access_key = <40 chars>
	PatternGCPAPIKey      Pattern = "gcp-api-key"          // AIza + 35
	PatternAzureKey       Pattern = "azure-key"            // AccountKey=<base64 86>== or SharedAccessSignature/sig=<...>
	PatternGitHubToken    Pattern = "github-token"         // ghp_/gho_/ghu_/ghs_/ghr_ + 36, github_pat_..., a 40-hex token named github
	PatternGitLabToken    Pattern = "gitlab-token"         // glpat-, glrt-, gldt-, gloas- + 20
	PatternOpenAIKey      Pattern = "openai-key"           // sk-proj-/sk-svcacct-/sk-admin- + 20, sk- + 32 alphanumerics
	PatternAnthropicKey   Pattern = "anthropic-key"        // sk-ant-api03-..., sk-ant-admin01-...
	PatternNPMToken       Pattern = "npm-token"            // npm_ + 36
	PatternSlackToken     Pattern = "slack-token"          // xoxa-/xoxb-/xoxp-/xoxr-/xoxs-/xoxe-/xapp-, xoxe.xoxp-, hooks.slack.com/services/...
	PatternStripeKey      Pattern = "stripe-key"           // sk_live_/sk_test_/rk_live_/rk_test_/whsec_
	PatternPasswordField  Pattern = "password-field"       // a member named like a credential with a value, or "password=..." in text
	PatternURLCredentials Pattern = "url-credentials"      // scheme://user:password@host, the user possibly empty
	PatternJWKPrivate     Pattern = "jwk-private-key"      // an object with "kty" and a private member (d, p, q, dp, dq, qi, k)
	PatternWithheldValue  Pattern = "withheld-value"       // the value of an item the sender declared withheld (builder only)
	PatternTooManyHits    Pattern = "more-restricted-data" // more hits than are reported one by one
)

// Field is what a Detector sees of one place in the package: a member
// name, or a value (a string, a number, a literal, or the start of an
// object or array).
type Field struct {
	// Text is the unescaped string for a member name or a string value,
	// and empty for any other value.
	Text string
	// Member is the name of the member whose value this is, as in the
	// package ("" for an array element or the package itself); for a
	// member name, the name itself.
	Member string
	// Kind is the value's JSON kind: '"', '0' (number), 't', 'f', 'n',
	// '{' or '['; for a member name, '"'.
	Kind jsontext.Kind
	// IsName is true for a member name.
	IsName bool
	// Empty is true for an empty object or array, and for "" and null.
	Empty bool
}

// A Detector recognises credential-like data at one place of a package.
// The scan calls Detect once for every member name and every value, in
// one pass, so a detector's cost must be linear in the length of Text.
// Detect must not retain f or its strings, and must be safe for
// concurrent use.
type Detector interface {
	// Pattern names what the detector finds, in hits and findings.
	Pattern() Pattern
	Detect(f *Field) bool
}

// DefaultDetectors returns the built-in detectors, the default set of the
// builder and the checker. A deployment adds its own by appending to it.
func DefaultDetectors() []Detector { return append([]Detector(nil), builtin...) }

// regexDetector finds a regular expression in string fields.
type regexDetector struct {
	p  Pattern
	re *regexp.Regexp
}

func (d regexDetector) Pattern() Pattern { return d.p }
func (d regexDetector) Detect(f *Field) bool {
	return f.Kind == '"' && f.Text != "" && d.re.MatchString(f.Text)
}

// credentialMember is PatternPasswordField on structure: a member named
// like a credential (see credentialName) whose value is a non-empty string,
// a number, or a non-empty object or array.
type credentialMember struct{}

func (credentialMember) Pattern() Pattern { return PatternPasswordField }
func (credentialMember) Detect(f *Field) bool {
	if f.IsName || f.Empty || f.Kind == 't' || f.Kind == 'f' || f.Kind == 'n' {
		return false
	}
	return credentialName(f.Member)
}

// Token boundary: start of string or a character that is not a letter or a
// digit. RE2 has no look-behind, so the boundary is matched, which is all
// a yes/no match needs.
const lb = `(?:^|[^A-Za-z0-9])`

// encodedPhrases are the base64 forms of "PRIVATE KEY" (either case) at
// the three alignments a longer base64 text can put it in: the characters
// that depend on the phrase alone.
func encodedPhrases() string {
	var alts []string
	for _, s := range []string{"PRIVATE KEY", "private key", "-----BEGIN", "-----begin"} {
		for off := range 3 {
			e := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte{'x'}, off), s...))
			start := 0
			if off > 0 {
				start = (off*8 + 5) / 6
			}
			end := (off + len(s)) * 8 / 6
			alts = append(alts, regexp.QuoteMeta(e[start:end]))
		}
	}
	return strings.Join(alts, "|")
}

var builtin = []Detector{
	regexDetector{PatternPEMPrivateKey, regexp.MustCompile(`(?i)-----BEGIN[ A-Z0-9]*PRIVATE KEY( BLOCK)?-----`)},
	regexDetector{PatternEncodedKey, regexp.MustCompile(encodedPhrases() +
		// DER: SEQUENCE, then INTEGER 0 (PKCS#8, PKCS#1) or 1 (SEC 1), in
		// base64, followed by enough base64 for a key.
		`|` + lb + `(?:MI[I-L][A-Za-z0-9+/]{2}[AQgw]IBA[AD]|MI[E-H][A-Za-z0-9+/]AgE[AB]|M[A-Za-z0-9+/]{2}CAQ(?:Aw|EE))[A-Za-z0-9+/]{40,}`)},
	regexDetector{PatternPuTTYKey, regexp.MustCompile(`PuTTY-User-Key-File-[0-9]+:`)},
	regexDetector{PatternJWT, regexp.MustCompile(lb + `eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`)},
	regexDetector{PatternBearer, regexp.MustCompile(`(?i)` + lb + `(bearer\s+[A-Za-z0-9\-._~+/]{16,}=*|basic\s+[A-Za-z0-9+/]{16,}={0,2})`)},
	regexDetector{PatternAWSAccessKey, regexp.MustCompile(lb + `(AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?:[^A-Za-z0-9]|$)`)},
	regexDetector{PatternAWSSecret, regexp.MustCompile(`(?i)aws_?secret_?(access_?)?key\W{0,3}\s*[:=]\s*\S{20,}`)},
	regexDetector{PatternGCPAPIKey, regexp.MustCompile(lb + `AIza[0-9A-Za-z_-]{35}`)},
	regexDetector{PatternAzureKey, regexp.MustCompile(`(?i)AccountKey=[A-Za-z0-9+/]{80,}={0,2}|SharedAccessSignature=|[?&]sig=[A-Za-z0-9%+/]{30,}`)},
	regexDetector{PatternGitHubToken, regexp.MustCompile(lb + `(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})|(?i)github[a-z_-]{0,20}\W{0,3}\s*[:=]\s*[0-9a-f]{40}`)},
	regexDetector{PatternGitLabToken, regexp.MustCompile(lb + `gl(pat|rt|dt|oas)-[0-9A-Za-z_-]{20,}`)},
	regexDetector{PatternOpenAIKey, regexp.MustCompile(lb + `sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,})`)},
	regexDetector{PatternAnthropicKey, regexp.MustCompile(lb + `sk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{20,}`)},
	regexDetector{PatternNPMToken, regexp.MustCompile(lb + `npm_[A-Za-z0-9]{36}`)},
	regexDetector{PatternSlackToken, regexp.MustCompile(lb + `(xox[abposre]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,})|hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+`)},
	regexDetector{PatternStripeKey, regexp.MustCompile(lb + `((sk|rk)_(live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{16,})`)},
	regexDetector{PatternPasswordField, regexp.MustCompile(`(?i)(?:^|[^a-z0-9])(password|passwd|pwd|passphrase|client_secret|api_key|apikey|secret_key|access_token)\s*[:=]\s*\S+`)},
	regexDetector{PatternURLCredentials, regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@`)},
	credentialMember{},
}

// credentialWords are the names of credential members, after
// normalisation (see credentialName): a name that contains one of the
// first group, or ends with one of the second, is a credential's.
var (
	credentialInfixes  = []string{"password", "passwd", "passphrase"}
	credentialSuffixes = []string{"pwd", "secret", "apikey", "apisecret", "accesstoken", "refreshtoken", "idtoken",
		"authtoken", "token", "privatekey", "secretkey", "sessiontoken", "credential", "credentials",
		"authorization", "accesskey", "signingkey"}
)

// credentialName reports whether a member name names a credential: the
// name's ASCII letters and digits, lower-cased, with everything else
// dropped (so "db_password", "userPassword", "x-api-key" and "Password "
// all count), contain "password", "passwd" or "passphrase", or end with
// one of credentialSuffixes. Only the last 64 letters and digits are
// looked at.
func credentialName(name string) bool {
	var buf [64]byte
	n := len(buf)
	for i := len(name) - 1; i >= 0 && n > 0; i-- {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			continue
		}
		n--
		buf[n] = c
	}
	s := buf[n:]
	for _, w := range credentialInfixes {
		if bytes.Contains(s, []byte(w)) {
			return true
		}
	}
	for _, w := range credentialSuffixes {
		if bytes.HasSuffix(s, []byte(w)) {
			return true
		}
	}
	return false
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

// maxHits is the number of hits reported one by one; any more are counted
// in one last hit (PatternTooManyHits at ""), so that what a scan keeps is
// bounded however many strings match.
const maxHits = 32

// scanner is one walk of a package's tree.
type scanner struct {
	c        *canon
	dets     []Detector
	withheld []string
	path     []byte
	hits     []Hit
	more     int
	field    Field
}

// scan checks a JSON text and scans it (see scanTree).
func scan(data []byte, dets []Detector, withheld [][]byte) ([]Hit, error) {
	tree, _, err := canonicalize(data)
	if err != nil {
		return nil, err
	}
	return scanTree(tree, dets, withheld), nil
}

// scanTree shows every member name and value of a package once to the
// detectors (nil means DefaultDetectors), and reports what they find, JWK
// objects with a private member, and occurrences of the withheld values.
// It walks the tree canonicalize made, in canonical order: each node is
// visited once, the JSON Pointer of the current place is kept as a stack
// (one segment per level, never rebuilt), and what it keeps besides is at
// most maxHits paths. Its cost is linear in the package, and no more for
// a deep package than for a flat one of the same size.
func scanTree(c *canon, dets []Detector, withheld [][]byte) []Hit {
	if dets == nil {
		dets = builtin
	}
	s := &scanner{c: c, dets: dets}
	for _, w := range withheld {
		if len(w) > 0 {
			s.withheld = append(s.withheld, string(w))
		}
	}
	if len(c.nodes) > 0 {
		s.value(0, "")
	}
	if s.more > 0 {
		s.hits = append(s.hits, Hit{PatternTooManyHits, ""})
	}
	return s.hits
}

// text returns a string node's text: a view of the arena, which nothing
// writes once canonicalize has returned (detectors must not retain it).
func (s *scanner) text(i int32) string {
	n := s.c.nodes[i]
	if n.a == n.b {
		return ""
	}
	return unsafe.String(&s.c.arena[n.a], int(n.b-n.a))
}

// value visits node i, the value of member (or of an array element, "").
func (s *scanner) value(i int32, member string) {
	n := s.c.nodes[i]
	f := Field{Member: member, Kind: n.kind}
	switch n.kind {
	case '"':
		f.Text = s.text(i)
		f.Empty = f.Text == ""
	case '{', '[':
		f.Empty = n.a == noNode
	case 'n':
		f.Empty = true
	}
	s.field = f
	s.detect()
	mark := len(s.path)
	switch n.kind {
	case '[':
		k := 0
		for ch := n.a; ch != noNode; ch = s.c.nodes[ch].next {
			s.path = strconv.AppendInt(append(s.path[:mark], '/'), int64(k), 10)
			s.value(ch, "")
			k++
		}
	case '{':
		var flags uint8
		for nm := n.a; nm != noNode; {
			v := s.c.nodes[nm].next
			name := s.text(nm)
			switch name {
			case "kty":
				flags |= jwkKty
			case "d", "p", "q", "dp", "dq", "qi", "k":
				flags |= jwkPriv
			}
			s.path = appendPointerToken(append(s.path[:mark], '/'), name)
			s.field = Field{Text: name, Member: name, Kind: '"', IsName: true, Empty: name == ""}
			s.detect()
			s.value(v, name)
			nm = s.c.nodes[v].next
		}
		s.path = s.path[:mark]
		if flags == jwkKty|jwkPriv {
			s.hit(PatternJWKPrivate, s.path)
		}
	}
	s.path = s.path[:mark]
}

const (
	jwkKty  = 1 << iota // the object has "kty"
	jwkPriv             // the object has a private JWK member
)

// detect runs the detectors on the current field.
func (s *scanner) detect() {
	for _, d := range s.dets {
		if d.Detect(&s.field) {
			s.hit(d.Pattern(), s.path)
		}
	}
	if s.field.Kind == '"' {
		for _, w := range s.withheld {
			if strings.Contains(s.field.Text, w) {
				s.hit(PatternWithheldValue, s.path)
				break
			}
		}
	}
}

func (s *scanner) hit(p Pattern, path []byte) {
	if len(s.hits) == maxHits {
		s.more++
		return
	}
	s.hits = append(s.hits, Hit{p, string(path)})
}

// appendPointerToken appends a member name as a JSON Pointer reference
// token (RFC 6901 section 3: "~" as "~0", "/" as "~1").
func appendPointerToken(dst []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '~':
			dst = append(dst, '~', '0')
		case '/':
			dst = append(dst, '~', '1')
		default:
			dst = append(dst, name[i])
		}
	}
	return dst
}
