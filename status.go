package handoff

// VerifyStatus checks a signed status against the offer it answers, as
// section 5.4 says (HC-55): its signed form with type "status", its
// signature with a key the trust configuration binds to status.iss, then
// status.iss is offer.aud (offer.iss for "canceled"), status.aud is the
// other party of the hop, status.hop is the offer's hop and status.offer is
// offerDigest, the handoff digest of the offer. offer must be the decoded
// offer whose signed octets have digest offerDigest; it need not be
// verified by the caller, since the status is checked against it, not it
// against the status.
//
// A failure is a *Rejection; the status must then be discarded.
func VerifyStatus(status Signed, offer *Offer, offerDigest Digest, trust *Trust, lim Limits) (*Status, error) {
	st, err := OpenStatus(status, trust, lim)
	if err != nil {
		return nil, err
	}
	if err := statusAnswers(st, offer, offerDigest); err != nil {
		return nil, err
	}
	return st, nil
}

// statusAnswers is the part of HC-55 that relates a verified status to its
// offer.
func statusAnswers(st *Status, offer *Offer, offerDigest Digest) error {
	if !st.Offer.Equal(offerDigest) {
		return reject(ReasonPolicy, ErrRejected, "status.offer does not name the offer's digest (HC-55)")
	}
	if st.Hop != offer.Hop {
		return reject(ReasonPolicy, ErrRejected, "status.hop %q is not the offer's hop %q", st.Hop, offer.Hop)
	}
	from, to := offer.Aud, offer.Iss
	if st.State == Canceled {
		from, to = offer.Iss, offer.Aud
	}
	if st.Iss != from {
		return reject(ReasonPolicy, ErrRejected, "a %q status must come from %q, not %q (HC-55)", st.State, from, st.Iss)
	}
	if st.Aud != to {
		return reject(ReasonPolicy, ErrRejected, "a %q status must be addressed to %q, not %q (HC-55)", st.State, to, st.Aud)
	}
	return nil
}
