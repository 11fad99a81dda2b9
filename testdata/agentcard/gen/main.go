// Command gen writes the AgentCard signature vectors of testdata/agentcard:
// one JSON file per scenario of verifying a signed AgentCard (A2A 1.0,
// section 8.4) with a trust configuration, described in
// testdata/agentcard/README.md.
//
// It lives beside the vectors it writes, under testdata, so that the go
// tool's ./... patterns leave it out of the module's packages. Run it from
// the module root:
//
//	go run ./testdata/agentcard/gen            # write the files
//	go run ./testdata/agentcard/gen -check     # compare, write nothing
//
// Every key is derived from a fixed label and every signature is
// deterministic (RFC 6979 ECDSA, Ed25519), so the output is the same on
// every run. The agentcard package's tests run -check.
//
// The expected outcome of each vector is written here by hand, from the
// rules of the README: the vectors are not a record of what the package
// answers, and its tests hold it to them.
package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/keyset"
)

//go:embed README.md.tmpl
var readmeTemplate string

func main() {
	out := flag.String("out", filepath.Join("testdata", "agentcard"), "directory of the vectors")
	check := flag.Bool("check", false, "regenerate twice in memory and compare with -out; write nothing, exit 1 on any difference")
	flag.Parse()
	log.SetFlags(0)
	a, err := generate()
	if err != nil {
		log.Fatal(err)
	}
	if !*check {
		for name, b := range a {
			if err := os.WriteFile(filepath.Join(*out, name), b, 0o644); err != nil {
				log.Fatal(err)
			}
		}
		return
	}
	b, err := generate()
	if err != nil {
		log.Fatal(err)
	}
	var problems []string
	for name, want := range a {
		if !bytes.Equal(want, b[name]) {
			problems = append(problems, name+": two runs differ: the generator is not deterministic")
		}
		got, err := os.ReadFile(filepath.Join(*out, name))
		if err != nil || !bytes.Equal(got, want) {
			problems = append(problems, name+": stale or missing")
		}
	}
	files, _ := filepath.Glob(filepath.Join(*out, "*"))
	for _, f := range files {
		if filepath.Base(f) == "gen" {
			continue
		}
		if _, ok := a[filepath.Base(f)]; !ok {
			problems = append(problems, filepath.Base(f)+": not written by the generator")
		}
	}
	slices.Sort(problems)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "%d problems; run go run ./testdata/agentcard/gen to regenerate\n", len(problems))
		os.Exit(1)
	}
}

// Vector is one scenario, written as one JSON file. The README describes
// each member.
type Vector struct {
	Description string          `json:"description"`
	Agent       string          `json:"agent"`
	Trust       json.RawMessage `json:"trust"`
	Options     Options         `json:"options"`
	CardB64     string          `json:"card_b64"`
	CardText    string          `json:"card_text,omitempty"`
	Expected    Expected        `json:"expected"`
	Open        string          `json:"open,omitempty"`
	SDK         *bool           `json:"sdk_verifies,omitempty"`
}

// Options are the verifier's options.
type Options struct {
	AllowDroppedEmpty bool `json:"allow_dropped_empty"`
	MaxSize           int  `json:"max_size"`
}

// Expected is the outcome.
type Expected struct {
	Verified   bool     `json:"verified"`
	Error      string   `json:"error"`
	Payload    string   `json:"payload,omitempty"`
	Signatures []SigOut `json:"signatures"`
}

// SigOut is the outcome for one element of "signatures".
type SigOut struct {
	Index        int    `json:"index"`
	Verified     bool   `json:"verified"`
	Key          string `json:"key,omitempty"`
	DroppedEmpty bool   `json:"dropped_empty,omitempty"`
	Error        string `json:"error,omitempty"`
}

// detKey makes every signature deterministic: crypto/ecdsa signs per RFC
// 6979 when given a nil random source, and Ed25519 is deterministic by
// construction.
type detKey struct{ crypto.Signer }

func (k detKey) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return k.Signer.Sign(nil, digest, opts)
}

const keyLabel = "github.com/agentproto/handoff testdata/agentcard key: "

func p256Key(label string) crypto.Signer {
	for i := 0; ; i++ {
		seed := sha256.Sum256([]byte(fmt.Sprintf("%s%s/%d", keyLabel, label, i)))
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seed[:]); err == nil {
			return detKey{k}
		}
	}
}

func p384Key(label string) crypto.Signer {
	for i := 0; ; i++ {
		seed := sha512.Sum384([]byte(fmt.Sprintf("%s%s/%d", keyLabel, label, i)))
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P384(), seed[:]); err == nil {
			return detKey{k}
		}
	}
}

func ed25519Key(label string) crypto.Signer {
	seed := sha256.Sum256([]byte(keyLabel + label))
	return detKey{ed25519.NewKeyFromSeed(seed[:])}
}

// party is a signing key with its alg and thumbprint.
type party struct {
	key      crypto.Signer
	alg, kid string
}

func newParty(key crypto.Signer) party {
	s, err := handoff.NewSigner(key, handoff.JWS, nil)
	if err != nil {
		panic(err)
	}
	return party{key: key, alg: s.Key().Alg, kid: s.Key().KID}
}

func (p party) jwk() json.RawMessage {
	b, err := keyset.PublicJWK(handoff.TrustedKey{Public: p.key.Public(), Alg: p.alg, KID: p.kid})
	if err != nil {
		panic(err)
	}
	return b
}

const (
	coderID   = "spiffe://b.example/agent/coder"
	plannerID = "spiffe://a.example/agent/planner"
)

var (
	coderES256 = newParty(p256Key("coder"))
	coderEdDSA = newParty(ed25519Key("coder"))
	coderES384 = newParty(p384Key("coder"))
	planner    = newParty(p256Key("planner"))
	// mallory's key is bound to no agent of any vector.
	mallory = newParty(p256Key("mallory"))
)

// trustDoc is a trust document: the coder's ES256 and EdDSA keys, the
// planner's key, and more keys for the coder when given.
func trustDoc(more ...party) json.RawMessage {
	coder := []json.RawMessage{coderES256.jwk(), coderEdDSA.jwk()}
	for _, p := range more {
		coder = append(coder, p.jwk())
	}
	doc := map[string]any{
		coderID:   map[string]any{"keys": coder},
		plannerID: map[string]any{"keys": []json.RawMessage{planner.jwk()}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

// baseCard is an A2A 1.0 AgentCard with members of the v1.0 schema only
// and no empty or default value, so that the SDK's reading and the JCS
// form of the card agree. Its description and skill have non-ASCII text
// and its extension a number, which JCS writes in one way.
const baseCard = `{
  "name": "Go coder",
  "description": "Corrige les bogues — vite, et bien.",
  "version": "1.0.0",
  "supportedInterfaces": [
    {"url": "https://b.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
  ],
  "provider": {"organization": "B Example", "url": "https://b.example"},
  "capabilities": {
    "streaming": true,
    "extensions": [
      {"uri": "https://quantumlearningmachines.com/a2a/ext/agent-handoff/v1", "description": "Signed handoffs", "required": true,
       "params": {"maxChain": 16, "skew": 60}}
    ]
  },
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain", "application/json"],
  "skills": [
    {"id": "fix", "name": "Fix a bug", "description": "Finds and fixes a bug 🐛.", "tags": ["go", "bugs"], "examples": ["fix the pager"]}
  ]
}`

// sign signs card with p through the package, as an agent does.
func sign(card string, p party, opts agentcard.SignOptions) string {
	b, err := agentcard.Sign([]byte(card), p.key, opts)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// canon is the JCS form of JSON text.
func canon(s string) string {
	b, err := jcs.Transform([]byte(s))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// payloadOf is the JCS form of card without "signatures".
func payloadOf(card string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(card), &m); err != nil {
		panic(err)
	}
	delete(m, "signatures")
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return canon(string(b))
}

// rawSig makes a signature element by hand, for the elements the package
// does not make: header is the protected header's exact JSON text, the
// signing input is BASE64URL(header) "." BASE64URL(payload), or the
// payload as is when b64 is false (RFC 7797). extra members are added to
// the element.
func rawSig(header string, payload string, b64 bool, p party, extra map[string]any) map[string]any {
	enc := base64.RawURLEncoding
	prot := enc.EncodeToString([]byte(header))
	in := prot + "."
	if b64 {
		in += enc.EncodeToString([]byte(payload))
	} else {
		in += payload
	}
	sig, err := ecsig.Sign(nil, p.key, p.alg, []byte(in))
	if err != nil {
		panic(err)
	}
	el := map[string]any{"protected": prot, "signature": enc.EncodeToString(sig)}
	for k, v := range extra {
		el[k] = v
	}
	return el
}

// header is a protected header in the form Sign writes, with its members
// in the order given.
func header(alg, kid string, more ...string) string {
	h := fmt.Sprintf(`{"alg":%q,"kid":%q,"typ":"JOSE"`, alg, kid)
	for _, m := range more {
		h += "," + m
	}
	return h + "}"
}

// withSigs returns card with its "signatures" replaced by els, in JCS form.
func withSigs(card string, els ...any) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(card), &m); err != nil {
		panic(err)
	}
	m["signatures"] = els
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return canon(string(b))
}

// sigsOf returns the elements of a signed card's "signatures".
func sigsOf(card string) []any {
	var m map[string]any
	if err := json.Unmarshal([]byte(card), &m); err != nil {
		panic(err)
	}
	return m["signatures"].([]any)
}

// element returns the first signature element of a signed card.
func element(card string) map[string]any { return sigsOf(card)[0].(map[string]any) }

func ok(key string) SigOut    { return SigOut{Verified: true, Key: key} }
func bad(class string) SigOut { return SigOut{Error: class} }
func verified(payload string, sigs ...SigOut) Expected {
	return Expected{Verified: true, Payload: payload, Signatures: sigs}
}
func unverified(payload string, sigs ...SigOut) Expected {
	return Expected{Error: "unverified", Payload: payload, Signatures: sigs}
}
func refused(class string) Expected { return Expected{Error: class} }

var (
	yes = new(true)
	no  = new(false)
)

type scenario struct {
	name string
	v    Vector
	card string
}

func generate() (map[string][]byte, error) {
	out := map[string][]byte{}
	var table strings.Builder
	for i, s := range scenarios() {
		v := s.v
		if v.Agent == "" {
			v.Agent = coderID
		}
		if v.Trust == nil {
			v.Trust = trustDoc()
		}
		v.CardB64 = base64.RawURLEncoding.EncodeToString([]byte(s.card))
		if utf8.ValidString(s.card) {
			v.CardText = s.card
		}
		for j := range v.Expected.Signatures {
			v.Expected.Signatures[j].Index = j
		}
		if v.Expected.Signatures == nil {
			v.Expected.Signatures = []SigOut{}
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		name := fmt.Sprintf("%03d-%s", i+1, s.name)
		out[name+".json"] = b.Bytes()
		fmt.Fprintf(&table, "| `%s` | %s |\n", name, summary(v))
	}
	out["README.md"] = []byte(strings.Replace(readmeTemplate, "{{TABLE}}", table.String(), 1))
	return out, nil
}

// summary is a vector's row in the README's table: the card's outcome,
// each signature's, whether it is open, and sdk_verifies.
func summary(v Vector) string {
	card := v.Expected.Error
	if v.Expected.Verified {
		card = "verified"
	}
	var sigs []string
	for _, s := range v.Expected.Signatures {
		switch {
		case s.DroppedEmpty:
			sigs = append(sigs, "ok (dropped empty)")
		case s.Verified:
			sigs = append(sigs, "ok")
		default:
			sigs = append(sigs, s.Error)
		}
	}
	open, sdk := "", ""
	if v.Open != "" {
		open = "open"
	}
	if v.SDK != nil {
		sdk = map[bool]string{true: "yes", false: "no"}[*v.SDK]
	}
	return strings.Join([]string{card, strings.Join(sigs, ", "), open, sdk}, " | ")
}

func scenarios() []scenario {
	base := canon(baseCard)
	payload := payloadOf(base)
	signed := sign(base, coderES256, agentcard.SignOptions{})
	var out []scenario
	add := func(name string, card string, v Vector) { out = append(out, scenario{name: name, v: v, card: card}) }

	// Accepted.
	add("signed-es256", signed, Vector{
		Description: "A card signed with the agent's ES256 handoff key, as Sign writes it: the protected header " +
			`{"alg","kid","typ":"JOSE"}, the kid its RFC 7638 thumbprint, the card served in its JCS form.`,
		Expected: verified(payload, ok(coderES256.kid)), SDK: yes,
	})
	add("signed-eddsa", sign(base, coderEdDSA, agentcard.SignOptions{}), Vector{
		Description: "A card signed with the agent's Ed25519 handoff key (EdDSA).",
		Expected:    verified(payload, ok(coderEdDSA.kid)), SDK: yes,
	})
	add("signed-es384", sign(base, coderES384, agentcard.SignOptions{}), Vector{
		Description: "A card signed with an ES384 key the trust configuration binds to the agent.",
		Trust:       trustDoc(coderES384),
		Expected:    verified(payload, ok(coderES384.kid)), SDK: yes,
	})
	served := `{"version":"1.0.0",` + "\n\t" + `"signatures": ` + string(mustJSON(sigsOf(signed))) + `,
  "skills": [{"examples": ["fix the pager"], "tags": ["go", "bugs"], "description": "Finds and fixes a bug \ud83d\udc1b.",
              "name": "Fix a bug", "id": "fix"}],
  "name": "Go \u0063oder", "description": "Corrige les bogues \u2014 vite, et bien.",
  "supportedInterfaces": [{"protocolVersion": "1.0", "protocolBinding": "JSONRPC", "url": "https:\/\/b.example\/a2a"}],
  "provider": {"url": "https://b.example", "organization": "B Example"},
  "capabilities": {"extensions": [{"params": {"skew": 6.0E1, "maxChain": 16.0}, "required": true,
    "description": "Signed handoffs", "uri": "https://quantumlearningmachines.com/a2a/ext/agent-handoff/v1"}], "streaming": true},
  "defaultOutputModes": ["text/plain", "application/json"], "defaultInputModes": ["text/plain"]}
`
	add("served-not-jcs", served, Vector{
		Description: "The signed card of 001 served in another form: members in another order, whitespace, escapes (\\u0063, \\/, " +
			"a surrogate pair for U+1F41B) and other spellings of its numbers (6.0E1, 16.0). Its JCS form is the one signed: it verifies. " +
			"Verification is over the JCS form of the card as parsed, never over the octets as served.",
		Expected: verified(payload, ok(coderES256.kid)), SDK: yes,
	})
	add("kid-not-thumbprint", sign(base, coderES256, agentcard.SignOptions{KID: "coder-2026-01"}), Vector{
		Description: "The kid is a name of the signer's choosing that names no key of the trust configuration. A kid only orders " +
			"the keys bound to the agent; every key of the agent pinned to the alg is tried, and the agent's key verifies.",
		Expected: verified(payload, ok(coderES256.kid)), SDK: no,
	})
	add("empty-kid", withSigs(base, rawSig(header("ES256", ""), payload, true, coderES256, nil)), Vector{
		Description: `The protected header's kid is "": present, as section 8.4 requires, and naming no key. Every key of the agent is tried.`,
		Expected:    verified(payload, ok(coderES256.kid)),
		Open:        "@a2a-js/sdk 1.3.0 refuses a signature whose kid, typ or alg is empty; section 8.4 requires them present.",
		SDK:         no,
	})
	add("jku-ignored", sign(base, coderES256, agentcard.SignOptions{JKU: "https://b.example/.well-known/jwks.json"}), Vector{
		Description: "The protected header has a jku. The signature verifies with the trust configuration's key; the URL is never fetched.",
		Expected:    verified(payload, ok(coderES256.kid)), SDK: yes,
	})
	twice := sign(sign(base, coderES256, agentcard.SignOptions{}), coderEdDSA, agentcard.SignOptions{})
	add("two-signatures", twice, Vector{
		Description: "Two signatures by two keys of the agent, the second appended by Sign after the first: both verify.",
		Expected:    verified(payload, ok(coderES256.kid), ok(coderEdDSA.kid)), SDK: yes,
	})
	add("one-of-two-untrusted", withSigs(base, element(signed), element(sign(base, mallory, agentcard.SignOptions{}))), Vector{
		Description: "The agent's signature and one by a key bound to no agent: the card verifies, and the second signature is " +
			"reported untrusted-key.",
		Expected: verified(payload, ok(coderES256.kid), bad("untrusted-key")), SDK: yes,
	})
	tw, err := ecsig.Twin(handoff.ES256, mustB64(element(signed)["signature"].(string)))
	if err != nil {
		panic(err)
	}
	high := map[string]any{"protected": element(signed)["protected"], "signature": base64.RawURLEncoding.EncodeToString(tw)}
	add("ecdsa-high-s", withSigs(base, high), Vector{
		Description: "The ES256 signature of 001 in its other valid form, (r, n-s): ECDSA verifies both (RFC 7518 section 3.4 " +
			"requires no low-S form), as the module's verifiers accept them.",
		Expected: verified(payload, ok(coderES256.kid)), SDK: yes,
	})
	add("b64-false", withSigs(base, rawSig(header("ES256", coderES256.kid, `"b64":false`, `"crit":["b64"]`), payload, false, coderES256, nil)), Vector{
		Description: `An unencoded payload (RFC 7797): the protected header has "b64": false and "crit": ["b64"], and the signing ` +
			"input is BASE64URL(header) \".\" followed by the JCS octets themselves. A verifier that understands b64 verifies it.",
		Expected: verified(payload, ok(coderES256.kid)),
		Open:     "RFC 7797 is an extension: a verifier that does not understand b64 must refuse the signature because crit names it.",
		SDK:      no, // it verifies over the encoded payload whatever b64 says
	})
	withPayload := rawSig(header("ES256", coderES256.kid), payload, true, coderES256,
		map[string]any{"payload": base64.RawURLEncoding.EncodeToString([]byte(`{"name":"Someone else"}`)), "note": 1})
	add("member-payload-ignored", withSigs(base, withPayload), Vector{
		Description: `The element carries a "payload" and an unknown member: both are ignored (RFC 7515 section 7.2.1); ` +
			"the payload of a card's signature is always the card's JCS form.",
		Expected: verified(payload, ok(coderES256.kid)), SDK: yes,
	})
	unprot := rawSig(header("ES256", coderES256.kid), payload, true, coderES256,
		map[string]any{"header": map[string]any{"jwk": json.RawMessage(mallory.jwk()), "note": "unsigned"}})
	add("unprotected-header", withSigs(base, unprot), Vector{
		Description: "The element has an unprotected header, with a jwk (mallory's key) and another member: they are not signed, " +
			"and the key in it is never used.",
		Expected: verified(payload, ok(coderES256.kid)), SDK: yes,
	})
	unknownCard := canon(strings.Replace(baseCard, `"version": "1.0.0",`, `"version": "1.0.0", "x-deploy": {"region": "eu-west-1"},`, 1))
	add("member-outside-schema", sign(unknownCard, coderES256, agentcard.SignOptions{}), Vector{
		Description: "A card with a member outside the A2A 1.0 schema, signed: the payload is the whole card, that member included.",
		Expected:    verified(payloadOf(unknownCard), ok(coderES256.kid)),
		SDK:         no, // the SDK drops the member before JCS, so it rebuilds other octets
	})

	// Refused: the signature.
	altered := strings.Replace(signed, "Finds and fixes", "Finds and deletes", 1)
	add("altered-after-signing", altered, Vector{
		Description: "The card of 001 with its skill's description changed after signing. The kid names the agent's key, " +
			"which does not verify: bad-signature.",
		Expected: unverified(payloadOf(altered), bad("bad-signature")), SDK: no,
	})
	alteredOut := strings.Replace(sign(unknownCard, coderES256, agentcard.SignOptions{}), "eu-west-1", "us-east-1", 1)
	add("altered-member-outside-schema", alteredOut, Vector{
		Description: "The card of member-outside-schema with that member changed after signing: every member is covered, " +
			"so the signature fails.",
		Expected: unverified(payloadOf(alteredOut), bad("bad-signature")),
		SDK:      no, // the SDK drops the member: it never verifies a signature over it
	})
	add("sdk-member-outside-schema", withSigs(unknownCard, rawSig(header("ES256", coderES256.kid), payload, true, coderES256, nil)), Vector{
		Description: "The card of member-outside-schema signed as @a2a-js/sdk 1.3.0 signs it: over the card without that member, " +
			"which the SDK drops as outside the v1.0 schema. Every member of the card as served is covered here, under either " +
			"reading: bad-signature. (The SDK verifies it, whatever that member says.)",
		Expected: unverified(payloadOf(unknownCard), bad("bad-signature")),
		Open:     "section 8.4.1 has default values removed before JCS; a member outside the schema is dropped by a verifier that parses the card into the schema (see README).",
		SDK:      yes,
	})
	add("untrusted-key", sign(base, mallory, agentcard.SignOptions{}), Vector{
		Description: "Signed by a key the trust configuration binds to no agent; its kid (the key's thumbprint) names no key of " +
			"the agent: untrusted-key.",
		Expected: unverified(payload, bad("untrusted-key")), SDK: no,
	})
	add("untrusted-key-with-jku", sign(base, mallory, agentcard.SignOptions{JKU: "https://m.example/.well-known/jwks.json"}), Vector{
		Description: "Signed by mallory's key, with a jku where that key is published. The URL is never fetched: untrusted-key.",
		Expected:    unverified(payload, bad("untrusted-key")), SDK: no,
	})
	add("forged-kid", withSigs(base, rawSig(header("ES256", coderES256.kid), payload, true, mallory, nil)), Vector{
		Description: "Signed by mallory's key under the kid of the agent's key. The kid names the agent's key, which does not " +
			"verify: bad-signature.",
		Expected: unverified(payload, bad("bad-signature")), SDK: no,
	})
	add("other-agent", signed, Vector{
		Description: "The card of 001, verified for another agent (the planner): the coder's key is not bound to it, and the " +
			"planner's key does not verify. A card's own claims do not say whose it is; the caller does.",
		Agent:    plannerID,
		Expected: unverified(payload, bad("untrusted-key")),
	})
	add("agent-without-keys", signed, Vector{
		Description: "The card of 001, verified for an agent the trust configuration binds no key to: untrusted-key.",
		Agent:       "spiffe://c.example/agent/unknown",
		Expected:    unverified(payload, bad("untrusted-key")),
	})
	onlyEd := map[string]any{coderID: map[string]any{"keys": []json.RawMessage{coderEdDSA.jwk()}}}
	add("alg-not-pinned", signed, Vector{
		Description: "The trust configuration binds only the agent's EdDSA key; the signature is ES256. No key of the agent is " +
			"pinned to ES256 (HC-22): untrusted-key.",
		Trust:    mustJSON(onlyEd),
		Expected: unverified(payload, bad("untrusted-key")),
	})
	rs := map[string]any{"protected": base64.RawURLEncoding.EncodeToString([]byte(header("RS256", coderES256.kid))),
		"signature": element(signed)["signature"]}
	add("alg-rs256", withSigs(base, rs), Vector{
		Description: "A signature under RS256: a trust configuration holds ES256, ES384 and EdDSA keys only (HC-15), so no key " +
			"of the agent can verify it: untrusted-key.",
		Expected: unverified(payload, bad("untrusted-key")), SDK: no,
	})
	hs := map[string]any{"protected": base64.RawURLEncoding.EncodeToString([]byte(header("HS256", coderES256.kid))),
		"signature": base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))}
	add("alg-hs256", withSigs(base, hs), Vector{
		Description: "A signature under HS256, a MAC: no trusted key is pinned to it (HC-15, RFC 8725 section 3.1): untrusted-key.",
		Expected:    unverified(payload, bad("untrusted-key")), SDK: no,
	})
	der := rawSig(header("ES256", coderES256.kid), payload, true, coderES256, nil)
	der["signature"] = base64.RawURLEncoding.EncodeToString(derOf(mustB64(der["signature"].(string))))
	add("ecdsa-der", withSigs(base, der), Vector{
		Description: "The ES256 signature in ASN.1 DER instead of r||s: not a JWS signature (RFC 7518 section 3.4): bad-signature.",
		Expected:    unverified(payload, bad("bad-signature")), SDK: no,
	})
	empties := canon(strings.Replace(baseCard, `"version": "1.0.0",`, `"version": "1.0.0", "iconUrl": "", "securitySchemes": {},`, 1))
	sdkSigned := withSigs(empties, rawSig(header("ES256", coderES256.kid), payloadOf(baseCard), true, coderES256, nil))
	add("sdk-dropped-empty", sdkSigned, Vector{
		Description: `A card with "iconUrl": "" and "securitySchemes": {}, signed as @a2a-js/sdk 1.3.0 signs it: over the JCS form ` +
			"with those members dropped. This package's default reading signs every member: bad-signature.",
		Expected: unverified(payloadOf(empties), bad("bad-signature")),
		Open:     "section 8.4.1 has default values removed before JCS; which members are defaults depends on the schema (see README).",
		SDK:      yes,
	})
	add("sdk-dropped-empty-allowed", sdkSigned, Vector{
		Description: "The card of sdk-dropped-empty verified with allow_dropped_empty: the signature verifies over the card with " +
			"its null, \"\", [] and {} members dropped.",
		Options:  Options{AllowDroppedEmpty: true},
		Expected: verified(payloadOf(empties), SigOut{Verified: true, Key: coderES256.kid, DroppedEmpty: true}),
		Open:     "section 8.4.1 has default values removed before JCS; which members are defaults depends on the schema (see README).",
		SDK:      yes,
	})
	add("signed-drop-empty", sign(empties, coderES256, agentcard.SignOptions{DropEmpty: true}), Vector{
		Description: "The card of sdk-dropped-empty signed by Sign with DropEmpty: the empty members are removed from the card " +
			"before it is signed, so both readings verify it.",
		Expected: verified(payload, ok(coderES256.kid)), SDK: yes,
	})

	// Refused: no signature, or the card.
	add("unsigned-absent", base, Vector{Description: `No "signatures" member.`, Expected: refused("unsigned")})
	add("unsigned-empty", withSigs(base), Vector{Description: `"signatures": [].`, Expected: refused("unsigned")})
	add("unsigned-null", strings.Replace(base, `"version"`, `"signatures":null,"version"`, 1), Vector{
		Description: `"signatures": null, which ProtoJSON writes for an empty list.`, Expected: refused("unsigned"),
	})
	add("too-large", signed, Vector{
		Description: "The card of 001 with max_size one octet shorter than it: too-large, before any parsing.",
		Options:     Options{MaxSize: len(signed) - 1},
		Expected:    refused("too-large"),
	})
	add("card-duplicate-member", strings.Replace(signed, `{"capabilities"`, `{"name":"Someone else","capabilities"`, 1), Vector{
		Description: `The signed card with a second "name" member: names must be unique (RFC 7493 section 2.3; RFC 8785 ` +
			"section 3.1 canonicalizes I-JSON only): malformed.",
		Expected: refused("malformed"),
	})
	add("card-duplicate-nested-member", strings.Replace(signed, `"streaming":true`, `"streaming":true,"streaming":false`, 1), Vector{
		Description: "A duplicate member name inside a nested object: malformed.",
		Expected:    refused("malformed"),
	})
	add("card-escaped-duplicate", strings.Replace(signed, `{"capabilities"`, `{"n\u0061me":"Someone else","capabilities"`, 1), Vector{
		Description: `"name" and "n\u0061me" are one name once unescaped: malformed.`,
		Expected:    refused("malformed"),
	})
	add("card-lone-surrogate", strings.Replace(signed, `"Go coder"`, `"Go coder\ud800"`, 1), Vector{
		Description: `A string with a lone surrogate escape, "\ud800", which no Unicode text holds (RFC 7493 section 2.1): malformed.`,
		Expected:    refused("malformed"),
	})
	add("card-invalid-utf8", strings.Replace(signed, "Go coder", "Go coder\xff", 1), Vector{
		Description: "A string with an octet that is not UTF-8 (card_text is absent): malformed.",
		Expected:    refused("malformed"),
	})
	add("card-number-out-of-range", strings.Replace(signed, `"skew":60`, `"skew":1e400`, 1), Vector{
		Description: "A number beyond the IEEE 754 double range: the card has no JCS form (RFC 8785 section 3.2.2.3): malformed.",
		Expected:    refused("malformed"),
	})
	add("card-not-object", "["+signed+"]", Vector{Description: "A JSON array holding a card: malformed.", Expected: refused("malformed")})
	add("signatures-object", strings.Replace(strings.Replace(signed, `"signatures":[`, `"signatures":`, 1), `}],"skills"`, `},"skills"`, 1), Vector{
		Description: `"signatures" is one JWS object, not an array of them: malformed.`,
		Expected:    refused("malformed"),
	})

	// Refused: a malformed signature element.
	elem := func(name, desc string, el any) {
		add(name, withSigs(base, el), Vector{Description: desc, Expected: unverified(payload, bad("malformed"))})
	}
	good := element(signed)
	elem("sig-not-object", `An element of "signatures" that is an array, not a JWS object.`, []any{good})
	prot := good["protected"].(string)
	if len(prot)%4 == 0 {
		panic("the protected header of 001 needs no padding: sig-protected-padded would prove nothing")
	}
	elem("sig-no-protected", `An element without "protected".`, map[string]any{"signature": good["signature"]})
	elem("sig-no-signature", `An element without "signature".`, map[string]any{"protected": good["protected"]})
	elem("sig-protected-padded", `"protected" in base64url with "=" padding, which JWS forbids (RFC 7515 section 2).`,
		map[string]any{"protected": prot + strings.Repeat("=", 4-len(prot)%4), "signature": good["signature"]})
	elem("sig-signature-base64", `"signature" in base64 with "+" and "/", not base64url.`,
		map[string]any{"protected": good["protected"], "signature": base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 32))})
	elem("sig-protected-not-object", "A protected header that is a JSON array.",
		rawSig(`["ES256"]`, payload, true, coderES256, nil))
	elem("sig-no-kid", `A protected header without kid (section 8.4: alg, kid and typ are required), signed by the agent's key.`,
		rawSig(`{"alg":"ES256","typ":"JOSE"}`, payload, true, coderES256, nil))
	elem("sig-no-typ", "A protected header without typ, signed by the agent's key.",
		rawSig(fmt.Sprintf(`{"alg":"ES256","kid":%q}`, coderES256.kid), payload, true, coderES256, nil))
	elem("sig-kid-in-header-only", "kid in the unprotected header only: section 8.4 requires it in the protected header.",
		rawSig(`{"alg":"ES256","typ":"JOSE"}`, payload, true, coderES256, map[string]any{"header": map[string]any{"kid": coderES256.kid}}))
	elem("sig-kid-not-string", "A kid that is a number.",
		rawSig(`{"alg":"ES256","kid":7,"typ":"JOSE"}`, payload, true, coderES256, nil))
	elem("sig-protected-duplicate", `A protected header with two "alg" members (RFC 7515 section 4: reject or take the last; `+
		"this module rejects), signed by the agent's key.",
		rawSig(fmt.Sprintf(`{"alg":"ES384","alg":"ES256","kid":%q,"typ":"JOSE"}`, coderES256.kid), payload, true, coderES256, nil))
	elem("sig-headers-overlap", "typ in both the protected and the unprotected header (RFC 7515 section 7.2.1: disjoint).",
		rawSig(header("ES256", coderES256.kid), payload, true, coderES256, map[string]any{"header": map[string]any{"typ": "JOSE"}}))
	elem("sig-header-null", `"header": null, not a JSON object.`,
		rawSig(header("ES256", coderES256.kid), payload, true, coderES256, map[string]any{"header": nil}))
	elem("sig-crit-unknown", `crit names "exp", an extension this verifier does not understand (RFC 7515 section 4.1.11).`,
		rawSig(header("ES256", coderES256.kid, `"crit":["exp"]`, `"exp":1`), payload, true, coderES256, nil))
	elem("sig-crit-in-header", "crit in the unprotected header (RFC 7515 section 4.1.11: protected only).",
		rawSig(header("ES256", coderES256.kid), payload, true, coderES256, map[string]any{"header": map[string]any{"crit": []string{"b64"}}}))
	elem("sig-b64-without-crit", `"b64": false without crit naming it (RFC 7797 section 6), over the unencoded payload.`,
		rawSig(header("ES256", coderES256.kid, `"b64":false`), payload, false, coderES256, nil))
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func mustB64(s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// derOf re-encodes an r||s ECDSA signature in ASN.1 DER.
func derOf(rs []byte) []byte {
	n := len(rs) / 2
	integer := func(b []byte) []byte {
		b = bytes.TrimLeft(b, "\x00")
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return append([]byte{0x02, byte(len(b))}, b...)
	}
	body := append(integer(rs[:n]), integer(rs[n:])...)
	return append([]byte{0x30, byte(len(body))}, body...)
}
