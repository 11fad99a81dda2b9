// Command refvectors writes the test vectors of the "scitt-receipt" and
// "learnlog-head" reference kinds (HC-68, HC-69) to scitt/testdata/vectors
// and learnlog/testdata/vectors. Run from the module root:
//
//	go run ./testdata/refvectors
//
// Every run makes fresh keys, so every file changes; the scenarios and
// their expected outcomes do not. The format is described in each
// testdata/README.md.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fxamacker/cbor/v2"
	"github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"github.com/veraison/go-cose"

	"github.com/agentproto/handoff/scitt"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "refvectors:", err)
		os.Exit(1)
	}
}

// Vector is one scenario, written as one JSON file.
type Vector struct {
	Description string `json:"description"`
	// Ref is the ContextRef as its JSON form: kind, dig, and proof.
	Ref map[string]any `json:"ref"`
	// ProofText, when set, is the proof exactly as received, as JSON text;
	// it replaces ref.proof.
	ProofText string `json:"proof_text,omitempty"`
	// Statement is the Signed Statement delivered with the task
	// (base64url); absent when none is delivered.
	Statement string `json:"statement,omitempty"`
	// TrustedKeys are the keys the checker trusts.
	TrustedKeys []TrustedKey `json:"trusted_keys"`
	// Outcome is what checking must report: verified, mismatch or
	// unverifiable.
	Outcome string `json:"outcome"`
	// Error names the failure class for an unverifiable outcome, when one
	// applies (the package's sentinel error).
	Error string `json:"error,omitempty"`
}

// TrustedKey is a public key as a JWK, its algorithm and, for a
// transparency service, its COSE kid (base64url).
type TrustedKey struct {
	KID string          `json:"kid,omitempty"`
	Alg string          `json:"alg"`
	JWK json.RawMessage `json:"jwk"`
}

var b64 = base64.RawURLEncoding

func newKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func jwkOf(k *ecdsa.PrivateKey) json.RawMessage {
	b, err := (&jose.JSONWebKey{Key: &k.PublicKey}).MarshalJSON()
	if err != nil {
		panic(err)
	}
	return b
}

func digestJSON(octets []byte) map[string]any {
	s := sha256.Sum256(octets)
	return map[string]any{"alg": "sha-256", "val": b64.EncodeToString(s[:])}
}

func write(dir string, vs map[string]Vector) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for name, v := range vs {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func run() error {
	sv, err := scittVectors()
	if err != nil {
		return fmt.Errorf("scitt: %w", err)
	}
	if err := write(filepath.Join("scitt", "testdata", "vectors"), sv); err != nil {
		return err
	}
	lv, err := learnlogVectors()
	if err != nil {
		return fmt.Errorf("learnlog: %w", err)
	}
	return write(filepath.Join("learnlog", "testdata", "vectors"), lv)
}

// ---- scitt-receipt ----

func coseSigner(k *ecdsa.PrivateKey) cose.Signer {
	s, err := cose.NewSigner(cose.AlgorithmES256, k)
	if err != nil {
		panic(err)
	}
	return s
}

// statement signs a Signed Statement; extra protected parameters go into
// its protected header.
func statement(issuer *ecdsa.PrivateKey, payload []byte, extra map[any]any) *cose.Sign1Message {
	m := cose.NewSign1Message()
	m.Headers.Protected.SetAlgorithm(cose.AlgorithmES256)
	m.Headers.Protected[cose.HeaderLabelContentType] = "application/json"
	m.Headers.Protected[cose.HeaderLabelKeyID] = []byte("issuer-1")
	for k, v := range extra {
		m.Headers.Protected[k] = v
	}
	m.Payload = payload
	if err := m.Sign(rand.Reader, nil, coseSigner(issuer)); err != nil {
		panic(err)
	}
	return m
}

func marshal(m *cose.Sign1Message) []byte {
	b, err := m.MarshalCBOR()
	if err != nil {
		panic(err)
	}
	return b
}

type inclusion struct {
	_     struct{} `cbor:",toarray"`
	Size  uint64
	Index uint64
	Path  [][]byte
}

// receiptParts are the pieces of a receipt a negative case changes.
type receiptParts struct {
	signer *ecdsa.PrivateKey
	kid    []byte
	vds    int64
	root   []byte
	proof  inclusion
	// crit, when set, is the crit parameter (label 2) of the protected
	// header, and extra further protected parameters.
	crit  []any
	extra map[any]any
}

func (p receiptParts) encode() []byte {
	m := cose.NewSign1Message()
	m.Headers.Protected.SetAlgorithm(cose.AlgorithmES256)
	m.Headers.Protected[cose.HeaderLabelKeyID] = p.kid
	m.Headers.Protected[scitt.HeaderLabelVDS] = p.vds
	for k, v := range p.extra {
		m.Headers.Protected[k] = v
	}
	if p.crit != nil {
		m.Headers.Protected[cose.HeaderLabelCritical] = p.crit
	}
	enc, err := cbor.Marshal(p.proof)
	if err != nil {
		panic(err)
	}
	m.Headers.Unprotected[scitt.HeaderLabelVDP] = map[any]any{scitt.ProofLabelInclusion: []any{enc}}
	m.Payload = p.root
	if err := m.Sign(rand.Reader, nil, coseSigner(p.signer)); err != nil {
		panic(err)
	}
	m.Payload = nil // detached: the verifier recomputes the root
	return marshal(m)
}

// logWith builds a 7-entry RFC 9162 tree with entry at index 4 and returns
// the receipt parts for it.
func logWith(entry []byte, ts *ecdsa.PrivateKey, kid []byte) (receiptParts, error) {
	tree := testonly.New(rfc6962.DefaultHasher)
	for i := range 7 {
		if i == 4 {
			tree.AppendData(entry)
			continue
		}
		tree.AppendData([]byte(fmt.Sprintf("another registered statement %d", i)))
	}
	path, err := tree.InclusionProof(4, 7)
	if err != nil {
		return receiptParts{}, err
	}
	return receiptParts{signer: ts, kid: kid, vds: scitt.VDSRFC9162SHA256, root: tree.Hash(),
		proof: inclusion{Size: 7, Index: 4, Path: path}}, nil
}

func scittVectors() (map[string]Vector, error) {
	issuer, ts, other := newKey(), newKey(), newKey()
	tsKID := []byte("ts-key-1")
	trusted := []TrustedKey{{KID: b64.EncodeToString(tsKID), Alg: "ES256", JWK: jwkOf(ts)}}

	payload := []byte(`{"artifact":"build-7","sha256":"3f1c"}`)
	plain := statement(issuer, payload, nil)
	plainBytes := marshal(plain)
	norm, err := scitt.NormalizeStatement(plainBytes)
	if err != nil {
		return nil, err
	}
	parts, err := logWith(norm, ts, tsKID)
	if err != nil {
		return nil, err
	}
	receipt := parts.encode()

	// The same statement carrying receipts and another parameter in its
	// unprotected header: same digest, same log entry.
	withUnprot := statement(issuer, payload, nil)
	withUnprot.Signature = plain.Signature
	withUnprot.Headers.Unprotected[scitt.HeaderLabelReceipts] = []any{receipt}
	withUnprot.Headers.Unprotected[int64(-70000)] = "unprotected note"
	withUnprotBytes := marshal(withUnprot)

	// A statement with a receipt in its protected header: the digest covers
	// it. wrongDig is what an implementation that dropped it would compute.
	protRcpt := statement(issuer, payload, map[any]any{scitt.HeaderLabelReceipts: []any{[]byte("an earlier receipt")}})
	protBytes := marshal(protRcpt)
	protNorm, err := scitt.NormalizeStatement(protBytes)
	if err != nil {
		return nil, err
	}
	protParts, err := logWith(protNorm, ts, tsKID)
	if err != nil {
		return nil, err
	}
	stripped := cose.NewSign1Message()
	stripped.Headers.Protected.SetAlgorithm(cose.AlgorithmES256)
	stripped.Headers.Protected[cose.HeaderLabelContentType] = "application/json"
	stripped.Headers.Protected[cose.HeaderLabelKeyID] = []byte("issuer-1")
	stripped.Payload, stripped.Signature = payload, protRcpt.Signature
	strippedBytes := marshal(stripped)

	otherStmt := marshal(statement(issuer, []byte(`{"artifact":"build-8"}`), nil))
	otherNorm, err := scitt.NormalizeStatement(otherStmt)
	if err != nil {
		return nil, err
	}
	otherParts, err := logWith(otherNorm, ts, tsKID)
	if err != nil {
		return nil, err
	}

	ref := func(dig map[string]any, proof []byte) map[string]any {
		r := map[string]any{"kind": "scitt-receipt", "dig": dig, "loc": "https://ts.example/entries/4"}
		if proof != nil {
			r["proof"] = b64.EncodeToString(proof)
		}
		return r
	}
	vec := func(desc string, dig map[string]any, proof, stmt []byte, outcome, errName string) Vector {
		v := Vector{Description: desc, Ref: ref(dig, proof), TrustedKeys: trusted, Outcome: outcome, Error: errName}
		if stmt != nil {
			v.Statement = b64.EncodeToString(stmt)
		}
		return v
	}
	okDig := digestJSON(norm)
	tweak := func(f func(p *receiptParts)) []byte {
		p := parts
		p.proof.Path = append([][]byte{}, parts.proof.Path...)
		f(&p)
		return p.encode()
	}
	// Each broken receipt is signed anew over the same root, so only the
	// part the case names is wrong.
	flipped := append([][]byte{}, parts.proof.Path...)
	flipped[1] = append([]byte{}, flipped[1]...)
	flipped[1][0] ^= 0x01

	vs := map[string]Vector{
		"valid": vec("a statement with an empty unprotected header and its receipt", okDig, receipt, plainBytes, "verified", ""),
		"valid-unprotected-header-ignored": vec("the statement delivered with receipts (label 394) and another parameter in its unprotected header: "+
			"the digest and the log entry ignore the unprotected header", okDig, receipt, withUnprotBytes, "verified", ""),
		"valid-protected-receipt": vec("a statement with a receipt in its protected header: dig covers it", digestJSON(protNorm),
			protParts.encode(), protBytes, "verified", ""),
		"protected-receipt-dropped": vec("dig computed with the protected-header receipt removed: the digest must include it",
			digestJSON(strippedBytes), protParts.encode(), protBytes, "mismatch", ""),
		"unprotected-header-digested": vec("dig computed over the statement as delivered, unprotected header included: the digest must ignore it",
			digestJSON(withUnprotBytes), receipt, withUnprotBytes, "mismatch", ""),
		"wrong-digest": vec("dig names another statement", digestJSON(otherNorm), receipt, plainBytes, "mismatch", ""),
		"unsupported-digest-alg": vec("dig uses an alg this implementation lacks (HC-08)",
			map[string]any{"alg": "sha-512", "val": b64.EncodeToString(make([]byte, 64))}, receipt, plainBytes, "unverifiable", "ErrUnsupportedDigest"),
		"statement-unavailable": vec("no statement is delivered", okDig, receipt, nil, "unverifiable", "ErrRefUnavailable"),
		"statement-malformed":   vec("the delivered object is not a COSE_Sign1 message", digestJSON(payload), receipt, payload, "unverifiable", "ErrStatement"),
		"no-proof":              vec("the reference carries no receipt", okDig, nil, plainBytes, "unverifiable", "ErrReceipt"),
		"truncated-receipt":     vec("the receipt is cut short", okDig, receipt[:len(receipt)-9], plainBytes, "unverifiable", "ErrReceipt"),
		"wrong-vds": vec("the receipt names verifiable data structure 2", okDig,
			tweak(func(p *receiptParts) { p.vds = 2 }), plainBytes, "unverifiable", "ErrReceipt"),
		"wrong-ts-key": vec("the receipt carries the trusted kid but is signed by another key", okDig,
			tweak(func(p *receiptParts) { p.signer = other }), plainBytes, "unverifiable", "ErrInclusion"),
		"untrusted-ts-kid": vec("the receipt is signed by a key whose kid is not trusted", okDig,
			tweak(func(p *receiptParts) { p.signer, p.kid = other, []byte("ts-key-9") }), plainBytes, "unverifiable", "ErrUntrustedKey"),
		"wrong-index": vec("the inclusion proof names leaf index 3 instead of 4", okDig,
			tweak(func(p *receiptParts) { p.proof.Index = 3 }), plainBytes, "unverifiable", "ErrInclusion"),
		"wrong-tree-size": vec("the inclusion proof names tree size 6 instead of 7", okDig,
			tweak(func(p *receiptParts) { p.proof.Size = 6 }), plainBytes, "unverifiable", "ErrInclusion"),
		"tree-size-not-signed": vec("the inclusion proof names tree size 8 instead of 7: for leaf 4 the path and the root are the same, "+
			"and the receipt signs only the root, so this verifies; a receipt does not prove the tree size", okDig,
			tweak(func(p *receiptParts) { p.proof.Size = 8 }), plainBytes, "verified", ""),
		"sibling-flipped": vec("one bit of a sibling hash in the inclusion path is flipped", okDig,
			tweak(func(p *receiptParts) { p.proof.Path = flipped }), plainBytes, "unverifiable", "ErrInclusion"),
		"path-truncated": vec("the inclusion path lacks its last sibling", okDig,
			tweak(func(p *receiptParts) { p.proof.Path = p.proof.Path[:len(p.proof.Path)-1] }), plainBytes, "unverifiable", "ErrInclusion"),
		"unknown-critical-parameter": vec("the receipt's protected header marks a parameter this implementation does not understand as critical "+
			"(crit, label 2): RFC 9052 section 3.1 requires the receipt to be refused", okDig,
			tweak(func(p *receiptParts) {
				p.crit, p.extra = []any{int64(-70001)}, map[any]any{int64(-70001): "must be understood"}
			}),
			plainBytes, "unverifiable", "ErrReceipt"),
		"known-critical-parameter": vec("the receipt's protected header marks vds (label 395), which the verifier processes, as critical: "+
			"RFC 9052 section 3.1 lets it be verified", okDig,
			tweak(func(p *receiptParts) { p.crit = []any{scitt.HeaderLabelVDS} }), plainBytes, "verified", ""),
		"receipt-for-another-statement": vec("a valid receipt of another statement", okDig,
			otherParts.encode(), plainBytes, "unverifiable", "ErrInclusion"),
	}
	return vs, nil
}

// ---- learnlog-head ----

func thumbprint(k *ecdsa.PrivateKey) string {
	t, err := (&jose.JSONWebKey{Key: &k.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		panic(err)
	}
	return b64.EncodeToString(t)
}

func canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		panic(err)
	}
	return c
}

// signHead signs payload as a compact JWS with k under kid and alg.
func signHead(k crypto.Signer, alg jose.SignatureAlgorithm, kid string, payload []byte) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	if err != nil {
		panic(err)
	}
	obj, err := s.Sign(payload)
	if err != nil {
		panic(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return out
}

func learnlogVectors() (map[string]Vector, error) {
	producer, stranger := newKey(), newKey()
	trusted := []TrustedKey{{Alg: "ES256", JWK: jwkOf(producer)}}
	members := func() map[string]any {
		return map[string]any{
			"record_hash": "mXb1Zc3p2QeYqk0Sx8WlR4dT7nA9uVfJ6hGiKoLrE5s",
			"seq":         41,
			"entry_hash":  "Q2p8fN4sVx1aZr7LmKc0TyH3dWbJ5gUo9eXiRk6nAq0",
			"time":        "2026-10-20T09:14:07Z",
		}
	}
	head := func(m map[string]any, jws string) map[string]any {
		h := map[string]any{}
		for k, v := range m {
			h[k] = v
		}
		h["jws"] = jws
		return h
	}
	tp := thumbprint(producer)
	good := head(members(), signHead(producer, jose.ES256, tp, canonical(members())))
	goodDig := digestJSON(canonical(good))

	vec := func(desc string, proof map[string]any, dig map[string]any, outcome, errName string) Vector {
		r := map[string]any{"kind": "learnlog-head", "dig": dig}
		if proof != nil {
			r["proof"] = proof
		}
		return Vector{Description: desc, Ref: r, TrustedKeys: trusted, Outcome: outcome, Error: errName}
	}
	withDig := func(desc string, proof map[string]any, outcome, errName string) Vector {
		return vec(desc, proof, digestJSON(canonical(proof)), outcome, errName)
	}

	// The same head as received with its members in another order, white
	// space, and seq spelled 4.1e1: its JCS form differs from the octets
	// received, and dig is over the JCS form.
	jwsGood := good["jws"].(string)
	received := fmt.Sprintf(`{ "time" : "2026-10-20T09:14:07Z", "seq": 4.1e1,
  "jws": %q, "entry_hash": "Q2p8fN4sVx1aZr7LmKc0TyH3dWbJ5gUo9eXiRk6nAq0",
  "record_hash": "mXb1Zc3p2QeYqk0Sx8WlR4dT7nA9uVfJ6hGiKoLrE5s" }`, jwsGood)
	if c, err := jcs.Transform([]byte(received)); err != nil || string(c) != string(canonical(good)) {
		return nil, fmt.Errorf("the received form does not canonicalise to the head: %v", err)
	}
	jcsForm := vec("the head as received is not in JCS form (member order, white space, 4.1e1): dig is over its JCS form",
		nil, goodDig, "verified", "")
	jcsForm.ProofText = received
	overReceived := vec("dig computed over the octets received instead of the JCS form", nil,
		digestJSON([]byte(received)), "mismatch", "")
	overReceived.ProofText = received

	changed := members()
	changed["seq"] = 42
	missing := members()
	delete(missing, "entry_hash")

	vs := map[string]Vector{
		"valid":                    vec("a head signed by the trusted producer key, kid its JWK Thumbprint", good, goodDig, "verified", ""),
		"valid-received-not-jcs":   jcsForm,
		"digest-over-received":     overReceived,
		"wrong-digest":             vec("dig names another head", good, digestJSON(canonical(head(changed, jwsGood))), "mismatch", ""),
		"unsupported-digest-alg":   vec("dig uses an alg this implementation lacks (HC-08)", good, map[string]any{"alg": "sha-512", "val": b64.EncodeToString(make([]byte, 64))}, "unverifiable", "ErrUnsupportedDigest"),
		"no-proof":                 vec("the reference carries no head", nil, goodDig, "unverifiable", "ErrHead"),
		"untrusted-key":            withDig("a head signed by a key not trusted for the producer, kid its thumbprint", head(members(), signHead(stranger, jose.ES256, thumbprint(stranger), canonical(members()))), "unverifiable", "ErrUntrustedKey"),
		"non-thumbprint-kid":       withDig("a head signed by the trusted key under a kid that is not its JWK Thumbprint", head(members(), signHead(producer, jose.ES256, "producer-key-1", canonical(members()))), "unverifiable", "ErrUntrustedKey"),
		"trusted-kid-other-signer": withDig("the trusted key's thumbprint as kid, signed by another key", head(members(), signHead(stranger, jose.ES256, tp, canonical(members()))), "unverifiable", "ErrSignature"),
		"payload-not-head":         withDig("the signed payload has seq 42, the head beside it seq 41", head(members(), signHead(producer, jose.ES256, tp, canonical(changed))), "unverifiable", "ErrSignature"),
		"missing-member":           withDig("a head without entry_hash", head(missing, signHead(producer, jose.ES256, tp, canonical(missing))), "unverifiable", "ErrHead"),
		"no-jws":                   withDig("a head without its jws", members(), "unverifiable", "ErrHead"),
	}
	return vs, nil
}
