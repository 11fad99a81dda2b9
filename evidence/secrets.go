package evidence

import (
	"bytes"
	"strconv"
	"strings"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

// Pattern names one shape of credential-like data the scan catches.
type Pattern string

// The built-in patterns (HC-62). Each string pattern is a shape of one
// JSON string of the package (a member value or a member name), unescaped,
// in any place of it; shapes.go gives each one exactly. A token's shape is
// found after any character that is not a letter or a digit, so an
// underscore or a dash before it does not hide it.
//
// What one value shows is caught. What it cannot show is not, by design:
// a JWT or an AWS key split across two or three members (each part alone
// is ordinary text, and joining the values of a package would make
// shapes out of ordinary neighbours); a token disguised with a zero-width
// character or a look-alike letter (Cyrillic "А" for "A"), or encoded
// (base64 of "user:password" without "Basic", percent-encoding of the
// whole token): any string could be such a disguise, and undoing every
// encoding would flag ordinary data; a bare 40-character AWS secret key,
// or any other secret with no fixed shape, that no name beside it calls
// a secret: it is 40 characters of base64, as many hashes and identifiers
// are. A member named like a credential (PatternPasswordField) catches
// such a value when its name says what it is.
const (
	PatternPEMPrivateKey  Pattern = "pem-private-key"      // -----BEGIN ... PRIVATE KEY----- in any case (RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8, PGP ... BLOCK)
	PatternEncodedKey     Pattern = "encoded-private-key"  // base64 of a PEM private key, or PKCS#8 / PKCS#1 / SEC 1 DER in base64
	PatternPuTTYKey       Pattern = "putty-private-key"    // PuTTY-User-Key-File-N:
	PatternJWT            Pattern = "jwt"                  // three base64url parts separated by "." or "%2E", the first two the base64url of a JSON object ("eyJ", or "eyA" and "ew" for one with white space)
	PatternBearer         Pattern = "bearer-token"         // "Bearer <token>" (a space, "%20" or "+" between) / "Basic <credentials>", or an Authorization header with any scheme and a credential that looks generated
	PatternAWSAccessKey   Pattern = "aws-access-key-id"    // AKIA/ASIA/ABIA/ACCA + 16, not followed by a letter
	PatternAWSSecret      Pattern = "aws-secret-key"       // aws_secret_access_key = <20 or more>, SecretAccessKey: <...>, with or without aws, in any case
	PatternGCPAPIKey      Pattern = "gcp-api-key"          // AIza + 35
	PatternAzureKey       Pattern = "azure-key"            // AccountKey=<base64 86>== or SharedAccessSignature/sig=<...>
	PatternGitHubToken    Pattern = "github-token"         // ghp_/gho_/ghu_/ghs_/ghr_ + 36, github_pat_..., a 40-hex token assigned to a name that starts github or gh_ and says token, key, secret...
	PatternGitLabToken    Pattern = "gitlab-token"         // glpat-, glrt-, gldt-, gloas- + 20
	PatternOpenAIKey      Pattern = "openai-key"           // sk-proj-/sk-svcacct-/sk-admin- + 20, sk- + 32 alphanumerics
	PatternAnthropicKey   Pattern = "anthropic-key"        // sk-ant-api03-..., sk-ant-admin01-...
	PatternNPMToken       Pattern = "npm-token"            // npm_ + 36
	PatternSlackToken     Pattern = "slack-token"          // xoxa-/xoxb-/xoxp-/xoxr-/xoxs-/xoxe-/xapp-, xoxe.xoxp-, hooks.slack.com/services/...
	PatternStripeKey      Pattern = "stripe-key"           // sk_live_/sk_test_/rk_live_/rk_test_/whsec_
	PatternPasswordField  Pattern = "password-field"       // a member named like a credential with a value; in text, a value assigned to password (PGPASSWORD=...), passwd, pwd, passphrase, client_secret, api_key (api-key), secret_key, access_token, or "the password is <something with a digit or a symbol>"
	PatternURLCredentials Pattern = "url-credentials"      // scheme://user:password@host, the user possibly empty
	PatternSessionCookie  Pattern = "session-cookie"       // Cookie: / Set-Cookie: / cookie name=<value that looks generated>
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

	// shapes are the built-in shapes of Text, once found; m is the
	// memory of the pass that found them.
	shapes  shapeSet
	scanned bool
	m       shapeScan
}

// builtinShapes returns the built-in shapes of f.Text, found in one pass
// the first time a built-in detector asks (findShapes), so that the
// built-in detectors read each string once between them.
func (f *Field) builtinShapes() shapeSet {
	if !f.scanned {
		f.m = shapeScan{}
		f.shapes, f.scanned = findShapes(f.Text, &f.m), true
	}
	return f.shapes
}

// A Detector recognises credential-like data at one place of a package.
// The scan calls Detect once for every member name and every value, in
// one pass, so a detector's cost must be linear in the length of Text.
// Detect must not retain f or its strings, and must be safe for
// concurrent use. The built-in detectors share one pass over each string:
// the first of them to look at a Field remembers on it what the pass
// found, so a Field, even one made by hand, stands for one text only.
type Detector interface {
	// Pattern names what the detector finds, in hits and findings.
	Pattern() Pattern
	Detect(f *Field) bool
}

// DefaultDetectors returns the built-in detectors, the default set of the
// builder and the checker. A deployment adds its own by appending to it.
func DefaultDetectors() []Detector { return append([]Detector(nil), builtin...) }

// builtinDetector finds one built-in shape in string fields.
type builtinDetector struct {
	p   Pattern
	bit shapeSet
}

func (d builtinDetector) Pattern() Pattern { return d.p }
func (d builtinDetector) Detect(f *Field) bool {
	return f.Kind == '"' && f.Text != "" && f.builtinShapes()&d.bit != 0
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

var builtin = func() []Detector {
	var ds []Detector
	for _, p := range shapePatterns {
		ds = append(ds, builtinDetector{p, shapeOf(p)})
	}
	return append(ds, credentialMember{})
}()

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
// all count), contain "password", "passwd" or "passphrase", end with one
// of credentialSuffixes, or are "pass" (in any case: "Pass", "PASS"; a
// longer name ending in "pass" is not one: "bypass", "boarding_pass").
// Only the last 64 letters and digits are looked at.
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
	if string(s) == "pass" {
		return true
	}
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
