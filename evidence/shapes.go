package evidence

import (
	"encoding/base64"
	"strings"
)

// The built-in string shapes, found in one pass over a string.
//
// Every shape has an anchor: a few fixed characters that any instance
// contains ("akia", "-----begin", "://", "password"...). One automaton
// (Aho-Corasick over the ASCII-lower-cased octets) finds every anchor of
// every shape in one pass; the verifier of the anchor then looks at the
// octets around it. A verifier reads a bounded window (the shape's fixed
// length: 16 characters after "AKIA", 40 after a DER key's header...), or
// a run of characters that no later anchor of the same shape can start
// inside, or that is remembered (the base64url segments of a JWT), so
// that each octet is read a bounded number of times, whatever the string:
// the cost of the scan is linear in its length, with a small constant
// (BenchmarkScanString).

// shapeSet is a set of built-in shapes, one bit per entry of shapePatterns.
type shapeSet uint32

// shapePatterns are the patterns findShapes reports, by bit.
var shapePatterns = [...]Pattern{
	PatternPEMPrivateKey, PatternEncodedKey, PatternPuTTYKey, PatternJWT, PatternBearer, PatternAWSAccessKey,
	PatternAWSSecret, PatternGCPAPIKey, PatternAzureKey, PatternGitHubToken, PatternGitLabToken, PatternOpenAIKey,
	PatternAnthropicKey, PatternNPMToken, PatternSlackToken, PatternStripeKey, PatternPasswordField,
	PatternURLCredentials, PatternSessionCookie,
}

func shapeOf(p Pattern) shapeSet {
	for i, q := range shapePatterns {
		if q == p {
			return 1 << i
		}
	}
	panic("evidence: no built-in shape " + string(p))
}

// anchor is one fixed string of a shape, in lower case, with what must
// hold around it.
type anchor struct {
	text string
	// exact, when set, is the anchor as it must be written, case
	// included; otherwise any case matches.
	exact string
	// boundary: the anchor starts the string or follows a character that
	// is not a letter or a digit.
	boundary bool
	// verify reports the shapes found with the anchor at s[start:end],
	// or 0. Nil: the anchor alone is the shape found (p).
	verify func(m *shapeScan, s string, start, end int) shapeSet
	p      Pattern
	// may is every shape verify can report: once all are found, the
	// anchor is not verified again.
	may shapeSet
}

// shapeScan is one pass over one string: what verifiers remember, so that
// a later anchor inside a run of characters already measured does not
// read it again.
type shapeScan struct {
	// The runs measured, by slot: [start, end), and whether end is the
	// run's true end (short) or only where the count stopped.
	runs [slots]struct {
		start, end int
		short      bool
	}
}

// The slots of shapeScan.runs: the two JWT segments, then one for each
// family of token prefixes (tokenFamilies), each measuring runs of its own
// class.
const (
	slotJWTHeader = iota
	slotJWTPayload
	slotTokens
	slots = slotTokens + len(tokenFamilies)
)

// tokenFamilies are the token prefixes, case as written, after a
// boundary: the prefix, then at least n characters of a class.
var tokenFamilies = [...]struct {
	prefixes []string
	n        int
	class    *charClass
	p        Pattern
}{
	{[]string{"AIza"}, 35, &cB64URL, PatternGCPAPIKey},
	{[]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, 36, &cAlnum, PatternGitHubToken},
	{[]string{"glpat-", "glrt-", "gldt-", "gloas-"}, 20, &cB64URL, PatternGitLabToken},
	{[]string{"npm_"}, 36, &cAlnum, PatternNPMToken},
	{[]string{"xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xoxe.xoxb-", "xoxe.xoxp-", "xapp-"}, 10, &cAlnumDash, PatternSlackToken},
	{[]string{"sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"}, 16, &cAlnum, PatternStripeKey},
}

// runEnd returns the end of the base64url run that contains s[i], in
// slot k, reading it only when i is past the run remembered there.
func (m *shapeScan) runEnd(k int, s string, i int) int {
	r := &m.runs[k]
	if i >= r.start && i < r.end {
		return r.end
	}
	j := i
	for j < len(s) && isB64URL(s[j]) {
		j++
	}
	r.start, r.end = i, j
	return j
}

// atLeast reports whether n characters of class start at s[i], with slot
// k remembering a run found too short: a later i inside it is answered
// without reading.
func (m *shapeScan) atLeast(k int, s string, i int, class *charClass, n int) bool {
	r := &m.runs[k]
	if r.short && i >= r.start && i <= r.end {
		return r.end-i >= n
	}
	c := run(s, i, class, n)
	if c < n {
		r.start, r.end, r.short = i, i+c, true
	}
	return c >= n
}

var anchors = buildAnchors()

func buildAnchors() []anchor {
	var as []anchor
	add := func(a anchor) {
		if a.may == 0 {
			a.may = shapeOf(a.p)
		}
		as = append(as, a)
	}
	cs := func(text string, boundary bool, verify func(*shapeScan, string, int, int) shapeSet, p Pattern) {
		add(anchor{text: strings.ToLower(text), exact: text, boundary: boundary, verify: verify, p: p})
	}
	ci := func(text string, boundary bool, verify func(*shapeScan, string, int, int) shapeSet, p Pattern) {
		add(anchor{text: text, boundary: boundary, verify: verify, p: p})
	}

	// Token prefixes (and for AWS, no letter after).
	for f, t := range tokenFamilies {
		n, class, bit, slot := t.n, t.class, shapeOf(t.p), slotTokens+f
		for _, pre := range t.prefixes {
			cs(pre, true, func(m *shapeScan, s string, _, end int) shapeSet {
				if m.atLeast(slot, s, end, class, n) {
					return bit
				}
				return 0
			}, t.p)
		}
	}
	for _, pre := range []string{"AKIA", "ASIA", "ABIA", "ACCA"} {
		cs(pre, true, verifyAWSKey, PatternAWSAccessKey)
	}
	add(anchor{text: "sk-", exact: "sk-", boundary: true, verify: verifyOpenAI, p: PatternOpenAIKey,
		may: shapeOf(PatternOpenAIKey) | shapeOf(PatternAnthropicKey)})
	cs("hooks.slack.com/services/", false, verifySlackHook, PatternSlackToken)
	cs("PuTTY-User-Key-File-", false, verifyPuTTY, PatternPuTTYKey)

	// JWT: the base64url of "{" and what JSON puts after it: a quote,
	// white space.
	for _, pre := range jwtStarts {
		cs(pre, true, verifyJWT, PatternJWT)
	}

	// Private keys: PEM armour, its base64, DER in base64.
	ci("begin", false, verifyPEM, PatternPEMPrivateKey)
	for _, phrase := range encodedPhrases() {
		cs(phrase, false, nil, PatternEncodedKey)
	}
	for _, pre := range []string{"MII", "MIJ", "MIK", "MIL"} {
		cs(pre, true, verifyDERLong, PatternEncodedKey)
	}
	for _, pre := range []string{"MIE", "MIF", "MIG", "MIH"} {
		cs(pre, true, verifyDERShort, PatternEncodedKey)
	}
	for _, mid := range []string{"CAQAw", "CAQEE"} {
		cs(mid, false, verifyDERSmall, PatternEncodedKey)
	}

	// Cloud keys named in text.
	ci("accountkey=", false, func(_ *shapeScan, s string, _, end int) shapeSet {
		if run(s, end, &cB64, 80) == 80 {
			return shapeOf(PatternAzureKey)
		}
		return 0
	}, PatternAzureKey)
	ci("sharedaccesssignature=", false, nil, PatternAzureKey)
	ci("sig=", false, verifyAzureSig, PatternAzureKey)
	ci("github", false, verifyGitHubNamed, PatternGitHubToken)
	ci("gh_", true, verifyGitHubNamed, PatternGitHubToken)
	ci("gh-", true, verifyGitHubNamed, PatternGitHubToken)

	// HTTP credentials.
	ci("bearer", true, verifyBearer, PatternBearer)
	ci("basic", true, verifyBasic, PatternBearer)
	ci("authorization", true, verifyAuthorization, PatternBearer)
	ci("cookie", true, verifyCookie, PatternSessionCookie)
	add(anchor{text: "://", verify: verifyURLCredentials, p: PatternURLCredentials})

	// Credentials assigned to a name that says so.
	for _, w := range []string{"password", "passwd", "passphrase"} {
		ci(w, false, verifyPassword, PatternPasswordField) // PGPASSWORD=...
	}
	ci("pwd", true, verifyAssigned, PatternPasswordField)
	ci("api", true, verifyAPIKey, PatternPasswordField)
	ci("access", true, verifyAccessToken, PatternPasswordField)
	add(anchor{text: "secret", verify: verifySecret, p: PatternPasswordField,
		may: shapeOf(PatternPasswordField) | shapeOf(PatternAWSSecret)})
	return as
}

// jwtStarts are the first three characters of the base64url of a JSON
// object: "{" followed by a quote, a space, a line feed, a tab or a
// carriage return.
var jwtStarts = []string{"eyJ", "eyA", "ewo", "ewk", "ew0"}

// encodedPhrases are the base64 forms of "PRIVATE KEY" (either case) and
// "-----BEGIN" (either case) at the three alignments a longer base64 text
// can put them in: the characters that depend on the phrase alone.
func encodedPhrases() []string {
	var out []string
	for _, s := range []string{"PRIVATE KEY", "private key", "-----BEGIN", "-----begin"} {
		for off := range 3 {
			e := base64.StdEncoding.EncodeToString(append([]byte(strings.Repeat("x", off)), s...))
			start := 0
			if off > 0 {
				start = (off*8 + 5) / 6
			}
			end := (off + len(s)) * 8 / 6
			out = append(out, e[start:end])
		}
	}
	return out
}

// The automaton: Aho-Corasick over the anchors' characters, with every
// other octet one class; a full transition table, so that each octet of
// the input costs two loads. An entry of delta is the next state's row
// offset in its low 16 bits, and, when anchors end in that state, outFlag
// and the index of their list in outputs above them.
type automaton struct {
	class   [256]uint8
	nclass  int
	delta   []uint32   // offset + class -> next state
	outputs [][]uint16 // the lists of anchors that end in a state
}

const (
	outFlag   = 1 << 31
	outShift  = 16
	stateMask = 1<<outShift - 1
)

var shapeAutomaton = buildAutomaton(anchors)

func buildAutomaton(as []anchor) *automaton {
	a := &automaton{}
	next := uint8(1)
	for _, an := range as {
		for i := 0; i < len(an.text); i++ {
			c := an.text[i]
			if a.class[c] == 0 {
				a.class[c] = next
				next++
			}
		}
	}
	a.nclass = int(next)
	for c := 'A'; c <= 'Z'; c++ {
		a.class[c] = a.class[c+'a'-'A']
	}
	// The trie.
	gotoFn := [][]int{make([]int, a.nclass)}
	out := [][]uint16{nil}
	for i, an := range as {
		st := 0
		for j := 0; j < len(an.text); j++ {
			c := a.class[an.text[j]]
			if gotoFn[st][c] == 0 {
				gotoFn = append(gotoFn, make([]int, a.nclass))
				out = append(out, nil)
				gotoFn[st][c] = len(gotoFn) - 1
			}
			st = gotoFn[st][c]
		}
		out[st] = append(out[st], uint16(i))
	}
	// Failure links, breadth first, folded into a full transition table.
	n := len(gotoFn)
	if n*a.nclass > stateMask {
		panic("evidence: too many anchor states")
	}
	fail := make([]int, n)
	delta := make([]int, n*a.nclass)
	var queue []int
	for c := range a.nclass {
		if s := gotoFn[0][c]; s != 0 {
			delta[c] = s
			queue = append(queue, s)
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		out[st] = append(out[st], out[fail[st]]...)
		for c := range a.nclass {
			if s := gotoFn[st][c]; s != 0 {
				fail[s] = delta[fail[st]*a.nclass+c]
				delta[st*a.nclass+c] = s
				queue = append(queue, s)
			} else {
				delta[st*a.nclass+c] = delta[fail[st]*a.nclass+c]
			}
		}
	}
	// Rows addressed by offset, flagged when anchors end in the state.
	list := make([]int, n)
	for st := range out {
		if len(out[st]) > 0 {
			list[st] = len(a.outputs)
			a.outputs = append(a.outputs, out[st])
		}
	}
	a.delta = make([]uint32, len(delta))
	for i, next := range delta {
		a.delta[i] = uint32(next * a.nclass)
		if len(out[next]) > 0 {
			a.delta[i] |= outFlag | uint32(list[next])<<outShift
		}
	}
	return a
}

// findShapes reports the built-in shapes s holds, with m, zero, for the
// memory of its verifiers.
func findShapes(s string, m *shapeScan) shapeSet {
	a := shapeAutomaton
	var (
		found shapeSet
		st    uint32
	)
	for i := 0; i < len(s); i++ {
		v := a.delta[st+uint32(a.class[s[i]])]
		st = v & stateMask
		if v&outFlag == 0 {
			continue
		}
		for _, k := range a.outputs[v>>outShift&^(outFlag>>outShift)] {
			an := &anchors[k]
			end := i + 1
			start := end - len(an.text)
			switch {
			case found&an.may == an.may:
			case an.exact != "" && !exactAt(s, start, an.exact):
			case an.boundary && !boundary(s, start):
			case an.verify == nil:
				found |= an.may
			default:
				found |= an.verify(m, s, start, end)
			}
		}
	}
	return found
}

// Character classes: a table each, so that a run of them costs a load per
// character.

type charClass [256]bool

func newClass(in func(c byte) bool) (t charClass) {
	for c := range 256 {
		t[c] = in(byte(c))
	}
	return t
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool  { return isLetter(c) || isDigit(c) }
func isB64URL(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }
func isB64(c byte) bool    { return isAlnum(c) || c == '+' || c == '/' }
func isSpace(c byte) bool  { return cSpace[c] }

var (
	cAlnum      = newClass(isAlnum)
	cAlnumDash  = newClass(func(c byte) bool { return isAlnum(c) || c == '-' })
	cB64URL     = newClass(isB64URL)
	cB64        = newClass(isB64)
	cDigit      = newClass(isDigit)
	cHex        = newClass(func(c byte) bool { return isDigit(c) || ('a' <= c|0x20 && c|0x20 <= 'f') })
	cUpperDigit = newClass(func(c byte) bool { return isDigit(c) || ('A' <= c && c <= 'Z') })
	cLower      = newClass(func(c byte) bool { return 'a' <= c && c <= 'z' })
	cSpace      = newClass(func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' })
	cNonSpace   = newClass(func(c byte) bool { return !cSpace[c] })
	cQuote      = newClass(func(c byte) bool { return c == '"' || c == '\'' })
	cDash       = newClass(func(c byte) bool { return c == '_' || c == '-' })
	cWord       = newClass(func(c byte) bool { return isAlnum(c) || c == '_' })
	cLabel      = newClass(func(c byte) bool { return isAlnum(c) || c == ' ' })
	cSig        = newClass(func(c byte) bool { return isB64(c) || c == '%' })
	cBearer     = newClass(func(c byte) bool { return isB64URL(c) || c == '.' || c == '~' || c == '+' || c == '/' })
	cScheme     = newClass(func(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' })
	cGitHubName = newClass(func(c byte) bool { return isLetter(c) || c == '_' || c == '-' || c == ' ' || c == '.' })
	// Where a token ends: white space, quotes and the separators of
	// headers and lists.
	cTokenEnd = newClass(func(c byte) bool { return cSpace[c] || c == '"' || c == '\'' || c == ',' || c == ';' })
	// Where a cookie's value ends: as a token, and at "=", which starts
	// the next cookie in a list written without spaces.
	cCookieEnd = newClass(func(c byte) bool { return cTokenEnd[c] || c == '=' })
)

// boundary reports whether s[i] starts s or follows a character that is
// not a letter or a digit.
func boundary(s string, i int) bool { return i == 0 || !cAlnum[s[i-1]] }

// run returns how many characters of class start at s[i], counting at
// most max.
func run(s string, i int, class *charClass, max int) int {
	n := 0
	for i+n < len(s) && n < max && class[s[i+n]] {
		n++
	}
	return n
}

// exactAt reports whether s[i:] starts with w, octet for octet (a loop:
// anchors are short, and most differ in their first octets).
func exactAt(s string, i int, w string) bool {
	if len(s)-i < len(w) {
		return false
	}
	for j := 0; j < len(w); j++ {
		if s[i+j] != w[j] {
			return false
		}
	}
	return true
}

// hasFold reports whether s[i:] starts with w, written in lower case, in
// any ASCII case.
func hasFold(s string, i int, w string) bool {
	if i < 0 || len(s)-i < len(w) {
		return false
	}
	for j := 0; j < len(w); j++ {
		c := s[i+j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[j] {
			return false
		}
	}
	return true
}

// skipSpace returns i after at most max white-space characters.
func skipSpace(s string, i, max int) int { return i + run(s, i, &cSpace, max) }

// assignment finds, after a name ending at s[i], what JSON, YAML, HTTP
// headers and shell assignments put between a name and its value: a
// closing quote, white space, ":" or "=", white space, an opening quote.
// It returns where the value starts, and false when none of it is there
// or the value is empty.
func assignment(s string, i int) (int, bool) {
	i += run(s, i, &cQuote, 1)
	i = skipSpace(s, i, 8)
	if i >= len(s) || (s[i] != ':' && s[i] != '=') {
		return 0, false
	}
	i = skipSpace(s, i+1, 8)
	i += run(s, i, &cQuote, 1)
	if i >= len(s) || isSpace(s[i]) || strings.IndexByte(`"',;}]`, s[i]) >= 0 {
		return 0, false
	}
	return i, true
}

// token returns the characters of s from i up to the first of end, at
// most max.
func token(s string, i, max int, end *charClass) string {
	j := i
	for j < len(s) && j-i < max && !end[s[j]] {
		j++
	}
	return s[i:j]
}

// looksRandom reports whether a token (a session cookie, a credential
// after an authorization scheme) has the look of a generated secret
// rather than of a word: letters and digits mixed, or a long mixed-case
// string.
func looksRandom(t string) bool {
	var letter, digit, upper, lower bool
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case isDigit(c):
			digit = true
		case 'A' <= c && c <= 'Z':
			letter, upper = true, true
		case 'a' <= c && c <= 'z':
			letter, lower = true, true
		}
	}
	return (len(t) >= 8 && letter && digit) || (len(t) >= 20 && upper && lower)
}

// Verifiers.

func verifyAWSKey(_ *shapeScan, s string, _, end int) shapeSet {
	// 16 upper-case letters or digits, not followed by a letter (a digit
	// may follow: a key id written against a number).
	if run(s, end, &cUpperDigit, 16) == 16 && (end+16 == len(s) || !isLetter(s[end+16])) {
		return shapeOf(PatternAWSAccessKey)
	}
	return 0
}

func verifyOpenAI(_ *shapeScan, s string, _, end int) shapeSet {
	if end == len(s) {
		return 0
	}
	kind := ""
	switch s[end] {
	case 'a':
		if strings.HasPrefix(s[end:], "ant-") {
			i := end + 4
			n := run(s, i, &cLower, 16)
			i += n
			if n > 0 && run(s, i, &cDigit, 2) == 2 && i+2 < len(s) && s[i+2] == '-' && run(s, i+3, &cB64URL, 20) == 20 {
				return shapeOf(PatternAnthropicKey)
			}
			return 0
		}
		kind = "admin-"
	case 'p':
		kind = "proj-"
	case 's':
		kind = "svcacct-"
	}
	if kind != "" && strings.HasPrefix(s[end:], kind) {
		if run(s, end+len(kind), &cB64URL, 20) == 20 {
			return shapeOf(PatternOpenAIKey)
		}
		return 0
	}
	if run(s, end, &cAlnum, 32) == 32 {
		return shapeOf(PatternOpenAIKey)
	}
	return 0
}

func verifySlackHook(_ *shapeScan, s string, _, end int) shapeSet {
	// T<id>/B<id>/<secret>
	i := end
	for _, sep := range []string{"T", "/B", "/"} {
		if !strings.HasPrefix(s[i:], sep) {
			return 0
		}
		i += len(sep)
		n := run(s, i, &cAlnum, len(s))
		if n == 0 {
			return 0
		}
		i += n
	}
	return shapeOf(PatternSlackToken)
}

func verifyPuTTY(_ *shapeScan, s string, _, end int) shapeSet {
	n := run(s, end, &cDigit, len(s))
	if n > 0 && end+n < len(s) && s[end+n] == ':' {
		return shapeOf(PatternPuTTYKey)
	}
	return 0
}

// jwtSep returns the length of the separator of JWT parts at s[i]: "." or
// its percent-encoding, or 0.
func jwtSep(s string, i int) int {
	switch {
	case i < len(s) && s[i] == '.':
		return 1
	case hasFold(s, i, "%2e"):
		return 3
	}
	return 0
}

func jwtStart(s string, i int) bool {
	for _, p := range jwtStarts {
		if strings.HasPrefix(s[i:], p) {
			return true
		}
	}
	return false
}

func verifyJWT(m *shapeScan, s string, start, end int) shapeSet {
	// header.payload.: each part at least 5 characters after its start.
	e := m.runEnd(slotJWTHeader, s, start)
	if e-end < 5 {
		return 0
	}
	sep := jwtSep(s, e)
	if sep == 0 || !jwtStart(s, e+sep) {
		return 0
	}
	p := e + sep
	e = m.runEnd(slotJWTPayload, s, p)
	if e-(p+3) < 5 || jwtSep(s, e) == 0 {
		return 0
	}
	return shapeOf(PatternJWT)
}

func verifyPEM(_ *shapeScan, s string, start, end int) shapeSet {
	// -----BEGIN [ A-Z0-9]*PRIVATE KEY( BLOCK)?----- in any case.
	if start < 5 || s[start-5:start] != "-----" {
		return 0
	}
	e := end + run(s, end, &cLabel, len(s))
	if !strings.HasPrefix(s[e:], "-----") {
		return 0
	}
	label := s[end:e]
	for _, w := range []string{"private key", "private key block"} {
		if len(label) >= len(w) && hasFold(label, len(label)-len(w), w) {
			return shapeOf(PatternPEMPrivateKey)
		}
	}
	return 0
}

// The DER of a private key in base64: SEQUENCE, then INTEGER 0 (PKCS#8,
// PKCS#1) or 1 (SEC 1), followed by enough base64 for a key.

func verifyDERLong(_ *shapeScan, s string, start, _ int) shapeSet {
	// MI[I-L]..[AQgw]IBA[AD], then 40.
	i := start + 3
	if run(s, i, &cB64, 2) == 2 && i+7 < len(s) && strings.IndexByte("AQgw", s[i+2]) >= 0 &&
		s[i+3:i+6] == "IBA" && (s[i+6] == 'A' || s[i+6] == 'D') && run(s, i+7, &cB64, 40) == 40 {
		return shapeOf(PatternEncodedKey)
	}
	return 0
}

func verifyDERShort(_ *shapeScan, s string, start, _ int) shapeSet {
	// MI[E-H].AgE[AB], then 40.
	i := start + 3
	if i+4 < len(s) && isB64(s[i]) && s[i+1:i+4] == "AgE" && (s[i+4] == 'A' || s[i+4] == 'B') && run(s, i+5, &cB64, 40) == 40 {
		return shapeOf(PatternEncodedKey)
	}
	return 0
}

func verifyDERSmall(_ *shapeScan, s string, start, end int) shapeSet {
	// M..CAQ(Aw|EE), then 40.
	m := start - 3
	if m >= 0 && s[m] == 'M' && boundary(s, m) && isB64(s[m+1]) && isB64(s[m+2]) && run(s, end, &cB64, 40) == 40 {
		return shapeOf(PatternEncodedKey)
	}
	return 0
}

func verifyAzureSig(_ *shapeScan, s string, start, end int) shapeSet {
	if start > 0 && (s[start-1] == '?' || s[start-1] == '&') &&
		run(s, end, &cSig, 30) == 30 {
		return shapeOf(PatternAzureKey)
	}
	return 0
}

// verifyGitHubNamed finds a classic token, 40 hexadecimal digits, after a
// name that starts with "github" or "gh_" and says it names a secret
// ("GITHUB_TOKEN=...", "github token: ..."), and github_pat_ tokens.
func verifyGitHubNamed(_ *shapeScan, s string, start, end int) shapeSet {
	if strings.HasPrefix(s[start:], "github_pat_") && boundary(s, start) {
		if run(s, start+len("github_pat_"), &cWord, 22) == 22 {
			return shapeOf(PatternGitHubToken)
		}
		return 0
	}
	n := run(s, end, &cGitHubName, 20)
	v, ok := assignment(s, end+n)
	if !ok || run(s, v, &cHex, 41) != 40 || (v+40 < len(s) && isAlnum(s[v+40])) {
		return 0
	}
	name := s[end : end+n]
	for _, w := range []string{"token", "pat", "key", "secret", "pass", "auth", "cred"} {
		for i := 0; i+len(w) <= len(name); i++ {
			if hasFold(name, i, w) {
				return shapeOf(PatternGitHubToken)
			}
		}
	}
	return 0
}

// httpSpace returns the length of the space after an authorization scheme
// at s[i]: white space, "%20" or "+" (form encoding), or 0.
func httpSpace(s string, i int) int {
	if n := run(s, i, &cSpace, 8); n > 0 {
		return n
	}
	if hasFold(s, i, "%20") {
		return 3
	}
	if i < len(s) && s[i] == '+' {
		return 1
	}
	return 0
}

func verifyBearer(_ *shapeScan, s string, _, end int) shapeSet {
	sp := httpSpace(s, end)
	if sp > 0 && run(s, end+sp, &cBearer, 16) == 16 {
		return shapeOf(PatternBearer)
	}
	return 0
}

func verifyBasic(_ *shapeScan, s string, _, end int) shapeSet {
	sp := run(s, end, &cSpace, 8)
	if sp > 0 && run(s, end+sp, &cB64, 16) == 16 {
		return shapeOf(PatternBearer)
	}
	return 0
}

// verifyAuthorization finds an Authorization header with any scheme
// ("Token", "Bearer", a vendor's) and a credential that looks generated.
func verifyAuthorization(_ *shapeScan, s string, _, end int) shapeSet {
	v, ok := assignment(s, end)
	if !ok || !isLetter(s[v]) {
		return 0
	}
	n := run(s, v, &cScheme, 32)
	sp := httpSpace(s, v+n)
	if sp == 0 {
		return 0
	}
	if looksRandom(token(s, v+n+sp, 24, &cTokenEnd)) {
		return shapeOf(PatternBearer)
	}
	return 0
}

// verifyCookie finds "Cookie: name=value", "cookie name=value" and
// Set-Cookie with a value that looks generated.
func verifyCookie(_ *shapeScan, s string, _, end int) shapeSet {
	i := end
	if i < len(s) && (s[i] == ':' || s[i] == '=') {
		i++
	}
	i = skipSpace(s, i, 8)
	n := run(s, i, &cScheme, 64)
	if n == 0 || i+n >= len(s) || s[i+n] != '=' {
		return 0
	}
	if looksRandom(token(s, i+n+1, 24, &cCookieEnd)) {
		return shapeOf(PatternSessionCookie)
	}
	return 0
}

func verifyURLCredentials(_ *shapeScan, s string, start, end int) shapeSet {
	// scheme://user:password@, the user possibly empty.
	letter := false
	for i := start - 1; i >= 0 && start-i <= 32; i-- {
		c := s[i]
		if !isAlnum(c) && c != '+' && c != '.' && c != '-' {
			break
		}
		letter = letter || isLetter(c)
	}
	if !letter {
		return 0
	}
	i := end
	for i < len(s) && s[i] != '/' && s[i] != ':' && s[i] != '@' && !isSpace(s[i]) {
		i++
	}
	if i >= len(s) || s[i] != ':' {
		return 0
	}
	j := i + 1
	for j < len(s) && s[j] != '/' && s[j] != '@' && !isSpace(s[j]) {
		j++
	}
	if j > i+1 && j < len(s) && s[j] == '@' {
		return shapeOf(PatternURLCredentials)
	}
	return 0
}

// verifyAssigned finds a value assigned to the name that ends at s[end].
func verifyAssigned(_ *shapeScan, s string, _, end int) shapeSet {
	if _, ok := assignment(s, end); ok {
		return shapeOf(PatternPasswordField)
	}
	return 0
}

// verifyPassword finds a value assigned to a password ("PGPASSWORD=...",
// "password: ..."), or said to be one: "the password is hunter2", where
// the word after "is" must look like a secret (a digit or a symbol in it),
// not like a word ("the password is required").
func verifyPassword(m *shapeScan, s string, start, end int) shapeSet {
	if f := verifyAssigned(m, s, start, end); f != 0 {
		return f
	}
	i := skipSpace(s, end, 8)
	if i == end {
		return 0
	}
	switch {
	case hasFold(s, i, "is"):
		i += 2
	case hasFold(s, i, "was"):
		i += 3
	default:
		return 0
	}
	if i < len(s) && s[i] == ':' {
		i++
	}
	j := skipSpace(s, i, 8)
	if j == i {
		return 0
	}
	t := strings.TrimRight(token(s, j, 24, &cTokenEnd), ".,;:!?)")
	if len(t) < 4 {
		return 0
	}
	for k := 0; k < len(t); k++ {
		if !isLetter(t[k]) {
			return shapeOf(PatternPasswordField)
		}
	}
	return 0
}

// verifyAPIKey: api_key, api-key, apikey.
func verifyAPIKey(m *shapeScan, s string, start, end int) shapeSet {
	i := end + run(s, end, &cDash, 1)
	if hasFold(s, i, "key") {
		return verifyAssigned(m, s, start, i+3)
	}
	return 0
}

// verifyAccessToken: access_token, access-token, accesstoken.
func verifyAccessToken(m *shapeScan, s string, start, end int) shapeSet {
	i := end + run(s, end, &cDash, 1)
	if hasFold(s, i, "token") {
		return verifyAssigned(m, s, start, i+5)
	}
	return 0
}

// verifySecret finds an AWS secret access key assigned to its name, with
// or without "aws" before it (aws_secret_access_key, SecretAccessKey,
// aws_secret_key), and client_secret or secret_key assigned a value.
func verifySecret(m *shapeScan, s string, start, end int) shapeSet {
	dash := func(i int) int { return i + run(s, i, &cDash, 1) }
	// What comes before: "aws" or "client", each with a separator or none.
	aws, client := false, false
	for _, w := range []string{"aws", "client"} {
		for _, sep := range []int{0, 1} {
			i := start - sep - len(w)
			if i >= 0 && (sep == 0 || s[start-1] == '_' || s[start-1] == '-') && hasFold(s, i, w) && boundary(s, i) {
				aws, client = aws || w == "aws", client || w == "client"
			}
		}
	}
	if !aws && !client && !boundary(s, start) {
		return 0
	}
	i := dash(end)
	access := hasFold(s, i, "access")
	if access {
		i = dash(i + len("access"))
	}
	key := hasFold(s, i, "key")
	if key {
		i += 3
	}
	switch {
	case (aws || access) && key:
		// \W{0,3}\s*[:=]\s*\S{20,}
		v, ok := assignment(s, i)
		if ok && run(s, v, &cNonSpace, 20) == 20 {
			return shapeOf(PatternAWSSecret)
		}
	case client && !key && !access, key && !access:
		return verifyAssigned(m, s, start, i)
	}
	return 0
}
