package scitt

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/fxamacker/cbor/v2"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/veraison/go-cose"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
)

// COSE header labels and values of the COSE Receipts draft
// (draft-ietf-cose-merkle-tree-proofs, requested assignments).
const (
	HeaderLabelReceipts int64 = 394 // receipts: [+ Receipt]
	HeaderLabelVDS      int64 = 395 // vds: verifiable data structure
	HeaderLabelVDP      int64 = 396 // vdp: verifiable data structure proofs

	// VDSRFC9162SHA256 is verifiable data structure 1: the RFC 9162 Merkle
	// tree with SHA-256.
	VDSRFC9162SHA256 int64 = 1
	// ProofLabelInclusion is the vdp map key of inclusion proofs.
	ProofLabelInclusion int64 = -1
)

// Errors a program can branch on with errors.Is.
var (
	// ErrStatement: the Signed Statement is not a COSE_Sign1 message.
	ErrStatement = errors.New("scitt: malformed signed statement")
	// ErrReceipt: the Receipt is missing or not a well-formed COSE Receipt
	// of verifiable data structure 1 with inclusion proofs.
	ErrReceipt = errors.New("scitt: malformed receipt")
	// ErrUntrustedKey: no key in Checker.Keys matches the receipt.
	ErrUntrustedKey = errors.New("scitt: receipt not signed by a trusted transparency-service key")
	// ErrInclusion: an inclusion proof does not lead to a root that a
	// trusted key signed.
	ErrInclusion = errors.New("scitt: receipt does not verify")
)

// Key is a transparency-service key the caller trusts, pinned to one COSE
// algorithm.
type Key struct {
	// KID, when set, must equal the receipt's kid (protected header label
	// 4). When empty the key is tried on any receipt.
	KID []byte
	// Alg is the one algorithm this key verifies, e.g. cose.AlgorithmES256.
	Alg cose.Algorithm
	// Public is the public key.
	Public crypto.PublicKey
}

// Checker checks "scitt-receipt" references. Register it in
// handoff.Config.RefCheckers under ref.KindSCITTReceipt. The zero value
// trusts no key, so every receipt is unverifiable.
type Checker struct {
	// Keys are the transparency-service keys the caller trusts.
	Keys []Key
	// Entry returns the log entry whose inclusion a receipt proves, given
	// the statement as delivered. Nil means NormalizeStatement: the
	// statement as the digest covers it.
	Entry func(statement []byte) ([]byte, error)
}

var _ ref.Checker = (*Checker)(nil)

// cborDec decodes receipts' headers and proofs: definite lengths, no
// duplicate keys, integers as int64 so labels compare as int64.
var cborDec = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:       cbor.DupMapKeyEnforcedAPF,
		IndefLength:     cbor.IndefLengthForbidden,
		IntDec:          cbor.IntDecConvertSigned,
		MaxNestedLevels: 16,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

// parseSign1 decodes a COSE_Sign1 message, tagged (18) or untagged.
func parseSign1(b []byte) (*cose.Sign1Message, error) {
	var m cose.Sign1Message
	if len(b) > 0 && b[0] == 0xd2 {
		if err := m.UnmarshalCBOR(b); err != nil {
			return nil, err
		}
		return &m, nil
	}
	var u cose.UntaggedSign1Message
	if err := u.UnmarshalCBOR(b); err != nil {
		return nil, err
	}
	m = cose.Sign1Message(u)
	return &m, nil
}

// NormalizeStatement returns the Signed Statement as appendix A digests it:
// the tagged COSE_Sign1 message re-encoded with its unprotected header set
// to the empty map. The protected header is kept exactly as received (it is
// what the issuer signed), Receipts in it included. An untagged statement
// is tagged.
func NormalizeStatement(statement []byte) ([]byte, error) {
	m, err := parseSign1(statement)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStatement, err)
	}
	m.Headers.Unprotected = cose.UnprotectedHeader{}
	m.Headers.RawUnprotected = nil
	out, err := m.MarshalCBOR()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStatement, err)
	}
	return out, nil
}

// StatementDigest is dig for a statement (appendix A): SHA-256 of
// NormalizeStatement.
func StatementDigest(statement []byte) (digest.Digest, error) {
	n, err := NormalizeStatement(statement)
	if err != nil {
		return digest.Digest{}, err
	}
	return digest.SHA256(n), nil
}

// ReceiptFromProof returns the Receipt octets a ContextRef's proof carries:
// a byte string (CBOR) or base64url text without padding (JSON). A decoded
// ContextRef does not say which encoding it came in, so text is taken from
// a CBOR offer too; JSON cannot carry a byte string.
func ReceiptFromProof(p any) ([]byte, error) {
	switch v := p.(type) {
	case nil:
		return nil, fmt.Errorf("%w: the reference has no proof", ErrReceipt)
	case []byte:
		return v, nil
	case string:
		if strings.ContainsAny(v, "=+/") {
			return nil, fmt.Errorf("%w: proof is not base64url without padding", ErrReceipt)
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("%w: proof is not base64url without padding", ErrReceipt)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("%w: proof is %T, want a byte string or base64url text", ErrReceipt, p)
	}
}

// inclusionProof is the CBOR inclusion proof of RFC9162_SHA256.
type inclusionProof struct {
	_     struct{} `cbor:",toarray"`
	Size  uint64
	Index uint64
	Path  [][]byte
}

// Receipt is a decoded COSE Receipt of inclusion for verifiable data
// structure 1. It is not verified: see VerifyReceipt.
type receipt struct {
	msg    *cose.Sign1Message
	kid    []byte
	proofs []inclusionProof
}

func parseReceipt(b []byte) (*receipt, error) {
	m, err := parseSign1(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrReceipt, err)
	}
	if m.Payload != nil {
		// The draft says SHOULD be detached; an attached root is ignored
		// and the recomputed root used instead, so it is allowed but never
		// trusted.
		m.Payload = nil
	}
	// RawProtected is the bstr that wraps the encoded header map.
	var protBytes []byte
	if err := cborDec.Unmarshal(m.Headers.RawProtected, &protBytes); err != nil {
		return nil, fmt.Errorf("%w: protected header: %v", ErrReceipt, err)
	}
	prot := map[any]cbor.RawMessage{}
	if len(protBytes) > 0 {
		if err := cborDec.Unmarshal(protBytes, &prot); err != nil {
			return nil, fmt.Errorf("%w: protected header: %v", ErrReceipt, err)
		}
	}
	if err := checkCritical(prot); err != nil {
		return nil, err
	}
	var vds int64
	raw, ok := prot[HeaderLabelVDS]
	if !ok {
		return nil, fmt.Errorf("%w: no vds (label 395) in the protected header", ErrReceipt)
	}
	if err := cborDec.Unmarshal(raw, &vds); err != nil {
		return nil, fmt.Errorf("%w: vds: %v", ErrReceipt, err)
	}
	if vds != VDSRFC9162SHA256 {
		return nil, fmt.Errorf("%w: verifiable data structure %d, only %d (RFC9162_SHA256) is implemented", ErrReceipt, vds, VDSRFC9162SHA256)
	}
	r := &receipt{msg: m}
	if raw, ok := prot[int64(cose.HeaderLabelKeyID)]; ok {
		if err := cborDec.Unmarshal(raw, &r.kid); err != nil {
			return nil, fmt.Errorf("%w: kid: %v", ErrReceipt, err)
		}
	}
	var unprot map[any]cbor.RawMessage
	if err := cborDec.Unmarshal(m.Headers.RawUnprotected, &unprot); err != nil {
		return nil, fmt.Errorf("%w: unprotected header: %v", ErrReceipt, err)
	}
	raw, ok = unprot[HeaderLabelVDP]
	if !ok {
		return nil, fmt.Errorf("%w: no vdp (label 396) in the unprotected header", ErrReceipt)
	}
	var vdp map[any]cbor.RawMessage
	if err := cborDec.Unmarshal(raw, &vdp); err != nil {
		return nil, fmt.Errorf("%w: vdp: %v", ErrReceipt, err)
	}
	raw, ok = vdp[ProofLabelInclusion]
	if !ok {
		return nil, fmt.Errorf("%w: no inclusion proofs (vdp key -1)", ErrReceipt)
	}
	var encoded [][]byte
	if err := cborDec.Unmarshal(raw, &encoded); err != nil || len(encoded) == 0 {
		return nil, fmt.Errorf("%w: inclusion proofs are not [+ bstr]", ErrReceipt)
	}
	for i, e := range encoded {
		var p inclusionProof
		if err := cborDec.Unmarshal(e, &p); err != nil {
			return nil, fmt.Errorf("%w: inclusion proof %d: %v", ErrReceipt, i, err)
		}
		if len(p.Path) == 0 {
			// The draft's CDDL: inclusion-path: [ + bstr ].
			return nil, fmt.Errorf("%w: inclusion proof %d has an empty path", ErrReceipt, i)
		}
		r.proofs = append(r.proofs, p)
	}
	return r, nil
}

// understood are the protected header parameters a receipt's verifier
// processes: alg, content type, kid and vds. Only these may be critical.
var understood = map[int64]bool{
	int64(cose.HeaderLabelAlgorithm):   true,
	int64(cose.HeaderLabelContentType): true,
	int64(cose.HeaderLabelKeyID):       true,
	HeaderLabelVDS:                     true,
}

// checkCritical applies RFC 9052 section 3.1 to crit (label 2): a
// non-empty array of labels, each present in the protected header, and a
// receipt that marks as critical a parameter its verifier does not
// understand is refused.
func checkCritical(prot map[any]cbor.RawMessage) error {
	raw, ok := prot[int64(cose.HeaderLabelCritical)]
	if !ok {
		return nil
	}
	var crit []any
	if err := cborDec.Unmarshal(raw, &crit); err != nil || len(crit) == 0 {
		return fmt.Errorf("%w: crit (label 2) is not a non-empty array of labels (RFC 9052 section 3.1)", ErrReceipt)
	}
	for _, l := range crit {
		switch l := l.(type) {
		case int64:
			if _, ok := prot[l]; !ok {
				return fmt.Errorf("%w: crit names label %d, which the protected header lacks (RFC 9052 section 3.1)", ErrReceipt, l)
			}
			if !understood[l] {
				return fmt.Errorf("%w: crit names label %d, a parameter this verifier does not understand (RFC 9052 section 3.1)", ErrReceipt, l)
			}
		case string:
			return fmt.Errorf("%w: crit names label %q, a parameter this verifier does not understand (RFC 9052 section 3.1)", ErrReceipt, l)
		default:
			return fmt.Errorf("%w: crit holds %T, not a label (RFC 9052 section 3.1)", ErrReceipt, l)
		}
	}
	return nil
}

// VerifyReceipt verifies receipt for statement: every inclusion proof must
// lead from the statement's entry to a root that one trusted key signed.
// The error wraps ErrStatement, ErrReceipt, ErrUntrustedKey or
// ErrInclusion.
func (c *Checker) VerifyReceipt(statement, receipt []byte) error {
	r, err := parseReceipt(receipt)
	if err != nil {
		return err
	}
	entryOf := c.Entry
	if entryOf == nil {
		entryOf = NormalizeStatement
	}
	entry, err := entryOf(statement)
	if err != nil {
		return err
	}
	var keys []cose.Verifier
	for _, k := range c.Keys {
		if len(k.KID) > 0 && !bytes.Equal(k.KID, r.kid) {
			continue
		}
		v, err := cose.NewVerifier(k.Alg, k.Public)
		if err != nil {
			continue // a key that cannot verify with its alg verifies nothing
		}
		keys = append(keys, v)
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: kid %x", ErrUntrustedKey, r.kid)
	}
	hasher := rfc6962.DefaultHasher
	leaf := hasher.HashLeaf(entry)
	for i, p := range r.proofs {
		root, err := proof.RootFromInclusionProof(hasher, p.Index, p.Size, leaf, p.Path)
		if err != nil {
			return fmt.Errorf("%w: inclusion proof %d: %v", ErrInclusion, i, err)
		}
		r.msg.Payload = root
		signed := false
		for _, v := range keys {
			if r.msg.Verify(nil, v) == nil {
				signed = true
				break
			}
		}
		if !signed {
			return fmt.Errorf("%w: inclusion proof %d (index %d, size %d): the root it leads to is not signed by a trusted key",
				ErrInclusion, i, p.Index, p.Size)
		}
	}
	return nil
}

// CheckRef checks a "scitt-receipt" reference (appendix A, HC-68): dig
// against the statement src provides, then the receipt in proof. See the
// package documentation for what a verified result shows.
func (c *Checker) CheckRef(ctx context.Context, r ref.Ref, src ref.Source) ref.Result {
	res := ref.Result{Ref: r, Outcome: ref.Unverifiable}
	if r.Kind != ref.KindSCITTReceipt {
		res.Detail = fmt.Sprintf("scitt: kind %q is not %q", r.Kind, ref.KindSCITTReceipt)
		return res
	}
	obj, err := src.Object(ctx, r)
	if err != nil {
		res.Detail = "signed statement: " + err.Error()
		return res
	}
	if !r.Dig.Supported() {
		res.Detail = fmt.Sprintf("%v: %q", digest.ErrUnsupported, r.Dig.Alg) // HC-08
		return res
	}
	n, err := NormalizeStatement(obj.Octets)
	if err != nil {
		res.Detail = err.Error()
		return res
	}
	if ok, err := r.Dig.Matches(n); err != nil {
		res.Detail = err.Error()
		return res
	} else if !ok {
		res.Outcome, res.Detail = ref.Mismatch, "digest of the signed statement differs"
		return res
	}
	rc, err := ReceiptFromProof(r.Proof)
	if err != nil {
		res.Detail = err.Error()
		return res
	}
	if err := c.VerifyReceipt(obj.Octets, rc); err != nil {
		res.Detail = err.Error()
		return res
	}
	res.Outcome, res.Detail = ref.Verified, ""
	return res
}
