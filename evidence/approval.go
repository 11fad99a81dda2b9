package evidence

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/jws"
)

// ApprovalStatement is a portable approval: the approver's statement,
// signed with its key as a JWS (jws.Sign: ES256, ES384 or EdDSA), that it
// approves Action on the hop whose offer has the handoff digest Hop, for
// one operation or a number of uses, possibly only for a call of Tool with
// arguments of digest Args, from Iat until Exp (seconds since the epoch).
// Anyone whose trust configuration binds the approver's AgentId to its key
// can verify it again from the ledger's record. ApprovalRequest.Statement
// returns the statement that approves exactly the call that waits.
//
// An approval is identified by what it says, not by the octets that carry
// it: its ID is the SHA-256 of the RFC 8785 (JCS) form of the statement
// as decoded, members this version does not define left out and Uses 0
// counted as 1. Another signature of the same statement (a second ECDSA
// signature, its (r, n-s) twin) and another encoding of it (member order,
// white space, escapes) are the same grant, whose uses are spent once.
type ApprovalStatement struct {
	Type        string `json:"type"` // always "approval"
	Hop         string `json:"hop"`  // Digest.String of the offer's handoff digest
	Action      string `json:"action"`
	OperationID string `json:"operation_id,omitempty"`
	Tool        string `json:"tool,omitempty"`
	Args        string `json:"args,omitempty"` // Digest.String of ArgsDigest of the call's arguments
	Uses        int    `json:"uses,omitzero"`
	Approver    string `json:"approver"` // the approver's AgentId
	Iat         int64  `json:"iat"`
	Exp         int64  `json:"exp"`
}

// id is the statement's identity: the SHA-256 of the JCS form of what it
// says.
func (st ApprovalStatement) id() (string, error) {
	if st.Uses == 0 {
		st.Uses = 1
	}
	enc, err := json.Marshal(st, json.Deterministic(true))
	if err != nil {
		return "", err
	}
	_, c, err := canonicalize(enc)
	if err != nil {
		return "", err
	}
	return digest.SHA256(c).String(), nil
}

// ApprovalType is the type member of an ApprovalStatement.
const ApprovalType = "approval"

// ErrApproval: a signed approval does not verify or does not fit the hop.
var ErrApproval = errors.New("evidence: signed approval refused")

// maxApprovalSize bounds a signed approval.
const maxApprovalSize = 4 << 10

// SignApproval signs st (its Type is set) with the approver's key, whose
// kid is its RFC 7638 thumbprint.
func SignApproval(st ApprovalStatement, key crypto.Signer, alg string) ([]byte, error) {
	st.Type = ApprovalType
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	kid, err := jws.Thumbprint(key.Public())
	if err != nil {
		return nil, err
	}
	return jws.Sign(payload, key, alg, kid, nil)
}

// ApproveSigned records a signed approval (authority.SourceSigned): its
// signature must verify with a key the guard's Trust binds to the
// approver, the approver must be the owner the package names for the
// action, the hop must be the guard's and the time now inside [iat, exp).
// A guard stopped, or whose offer expired, refuses it first, as it refuses
// every call then (a *Refusal wrapping ErrStopped); so does ApproveLocal.
// The statement is decoded strictly (no duplicate member names, names
// compared exactly). The ledger keeps the signed statement first presented
// as the approval's evidence; one statement is one grant however often,
// and however signed or encoded, it is presented.
func (g *Guard) ApproveSigned(ctx context.Context, signed []byte) (authority.Approval, error) {
	if g.trust == nil {
		return authority.Approval{}, fmt.Errorf("%w: the guard has no trust configuration", ErrApproval)
	}
	if _, err := g.live(Call{Hop: g.hop}); err != nil {
		// Stopped, or the offer expired: no approval can be used any more.
		return authority.Approval{}, err
	}
	lookup := func(_ jws.Header, payload []byte) ([]jws.Key, error) {
		var st ApprovalStatement
		if err := json.Unmarshal(payload, &st); err != nil {
			return nil, err
		}
		var keys []jws.Key
		for _, k := range g.trust.Keys(handoff.AgentID(st.Approver)) {
			keys = append(keys, jws.Key{Public: k.Public, Alg: k.Alg})
		}
		return keys, nil
	}
	payload, _, err := jws.Open(signed, lookup, maxApprovalSize)
	if err != nil {
		return authority.Approval{}, fmt.Errorf("%w: %w", ErrApproval, err)
	}
	var st ApprovalStatement
	if err := json.Unmarshal(payload, &st); err != nil {
		return authority.Approval{}, fmt.Errorf("%w: %v", ErrApproval, err)
	}
	now := g.now()
	iat, exp := time.Unix(st.Iat, 0).UTC(), time.Unix(st.Exp, 0).UTC()
	var args digest.Digest
	switch {
	case st.Type != ApprovalType:
		return authority.Approval{}, fmt.Errorf("%w: type %q", ErrApproval, st.Type)
	case st.Hop != g.hopKey:
		return authority.Approval{}, fmt.Errorf("%w: it approves another hop", ErrApproval)
	case now.Before(iat) || !now.Before(exp):
		return authority.Approval{}, fmt.Errorf("%w: outside its time window", ErrApproval)
	case st.Args != "":
		if args, err = digest.Parse(st.Args); err != nil {
			return authority.Approval{}, fmt.Errorf("%w: args: %v", ErrApproval, err)
		}
	}
	id, err := st.id()
	if err != nil {
		return authority.Approval{}, fmt.Errorf("%w: %v", ErrApproval, err)
	}
	return g.grant(ctx, Grant{Action: st.Action, OperationID: st.OperationID, Tool: st.Tool, Args: args, Uses: st.Uses,
		Approver: st.Approver, Expires: exp}, authority.SourceSigned, signed, id, iat)
}
