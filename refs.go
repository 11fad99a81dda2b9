package handoff

import (
	"context"
	"fmt"

	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
)

// checkRefs runs step 7 of section 5.1 under pol.
func checkRefs(ctx context.Context, refs []ref.Ref, pol ref.Policy, cs ref.Checkers, src ref.Source) ([]ref.Result, *Rejection) {
	if pol == ref.CheckNone {
		return notChecked(refs), nil
	}
	out := cs.CheckRefs(ctx, refs, src)
	for i, r := range out {
		switch {
		case r.Outcome == ref.Mismatch:
			return out, reject(reason.RefMismatch, ErrRejected, "refs[%d]: %s", i, r.Detail)
		case r.Outcome == ref.Unverifiable && pol == ref.CheckRequired:
			return out, reject(reason.UnverifiableRef, ErrRejected, "refs[%d]: %s", i, r.Detail)
		}
	}
	return out, nil
}

// VerifyGrant checks a credential presented with a hop against the offer's
// grant (HC-57, HC-03): nil when grant is the digest of exactly these
// octets. A missing grant, a mismatch, and a grant Digest alg this
// implementation lacks (HC-08: a failure for grant) are errors.
func VerifyGrant(o *Offer, credential []byte) error {
	if o.Grant == nil {
		return fmt.Errorf("%w: the offer carries no grant", ErrRejected)
	}
	ok, err := o.Grant.Matches(credential)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: credential does not match grant", ErrRejected)
	}
	return nil
}

func notChecked(refs []ref.Ref) []ref.Result {
	out := make([]ref.Result, len(refs))
	for i, r := range refs {
		out[i] = ref.Result{Ref: r, Outcome: ref.NotChecked}
	}
	return out
}
