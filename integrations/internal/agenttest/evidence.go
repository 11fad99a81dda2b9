package agenttest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/jws"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// Approval names of the package Evidence builds: ledger_read allowed,
// refund_issue must ask (approved by Owner), card_charge denied; and the
// operation of ledger_read the package lists as completed already
// (Performed), which the guard refuses as repeated.
const (
	Allowed   = "ledger_read"
	MustAsk   = "refund_issue"
	Denied    = "card_charge"
	Owner     = "finance-lead"
	Performed = "read-INV-1042-first"
)

var ledgerOctets = []byte(`{"invoice":"INV-1042","status":"paid"}`)

const ledgerLoc = "urn:shop:ledger:INV-1042"

// Evidence builds, for every offer made with its Prepare, an evidence
// package bound to that offer, and checks it again on the delegate's side
// (Guard) into a guard over a ledger shared by every guard built from it:
// a delegate restarted between two calls builds a new guard over the same
// ledger. It is safe for concurrent use.
type Evidence struct {
	tb     testing.TB
	Ledger authority.Ledger
	// Trust verifies signed approvals; nil refuses them.
	Trust *handoff.Trust
	Now   func() time.Time

	mu   sync.Mutex
	pkgs map[handoff.HopID][]byte
}

// NewEvidence returns an Evidence over a fresh memory ledger.
func NewEvidence(tb testing.TB) *Evidence {
	return &Evidence{tb: tb, Ledger: authority.NewMemory(), pkgs: map[handoff.HopID][]byte{}}
}

// Prepare is OfferParams.Prepare: it binds a package to the offer o and
// names it in the offer's refs; the delegate's Guard finds it by hop (the
// package travels beside nothing: the test hands it over).
func (e *Evidence) Prepare(o *handoff.Offer) error {
	built, err := evidence.NewBuilder(Package(o)).Build(evidence.BindingOf(o), evidence.BuildOptions{})
	if err != nil {
		return err
	}
	o.Refs = append(o.Refs, built.Ref)
	e.mu.Lock()
	e.pkgs[o.Hop] = built.Encoded
	e.mu.Unlock()
	return nil
}

// Deliver is OfferParams.Deliver: the same package, carried beside the
// Handoff by the host's middleware and checked by the delegate's
// (Host).
func Deliver(o *handoff.Offer) (ref.Ref, ref.Object, error) {
	return evidence.NewBuilder(Package(o)).Deliver(evidence.BuildOptions{})(o)
}

// OtherOffers is a Deliver that carries a package bound to another offer
// of the delegator a to to, under this offer's reference to it: a package
// the check refuses.
func OtherOffers(tb testing.TB, a *handoff.Agent, to handoff.AgentID) func(*handoff.Offer) (ref.Ref, ref.Object, error) {
	return func(o *handoff.Offer) (ref.Ref, ref.Object, error) {
		var other ref.Object
		_, err := a.Offer(context.Background(), handoff.OfferParams{To: to, Dialog: o.Dialog,
			Deliver: func(o2 *handoff.Offer) (ref.Ref, ref.Object, error) {
				r, obj, err := Deliver(o2)
				other = obj
				return r, obj, err
			}})
		if err != nil {
			tb.Fatal(err)
		}
		r, _, err := Deliver(o)
		return r, other, err
	}
}

// Host is the delegate's evidence.HostConfig over the Evidence's ledger,
// trust and clock, with the artifact the package cites.
func (e *Evidence) Host() *evidence.HostConfig {
	return &evidence.HostConfig{
		Check: evidence.CheckConfig{Now: e.Now, Artifacts: ref.ByLoc(map[string]ref.Object{ledgerLoc: {Octets: ledgerOctets}})},
		Guard: evidence.GuardConfig{Ledger: e.Ledger, Trust: e.Trust, Now: e.Now},
	}
}

// Package is the package of the scenarios, for the offer o: a refund,
// with the authority of Allowed, MustAsk and Denied, and Performed done.
func Package(o *handoff.Offer) evidence.Package {
	now := o.Iat.Std()
	ref := evidence.RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(ledgerOctets), Loc: ledgerLoc})
	return evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments"},
		Control:   evidence.SpecialistReturnsResult,
		Outcome:   evidence.Outcome{Result: "refund INV-1042", DoneWhen: "the refund is settled"},
		Authority: evidence.Authority{Allowed: []string{Allowed}, MustAsk: []string{MustAsk}, Denied: []string{Denied}},
		State:     []evidence.StateClaim{{System: "ledger", State: "INV-1042 paid", AsOf: now.Add(-time.Second), Evidence: []string{"ledger"}}},
		Completed: []evidence.CompletedAction{{Action: Allowed, External: true, OperationID: Performed,
			Postcondition: "INV-1042 read once", Evidence: []string{"ledger"}}},
		Artifacts:    []evidence.Artifact{{ID: "ledger", Ref: ref, Proves: "INV-1042 is paid"}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund", Action: MustAsk, Owner: Owner}},
		Next:         evidence.NextAction{Action: Allowed, Description: "read INV-1042"},
		Verification: evidence.Verification{Check: "ledger_read answers for INV-1042"},
		Rollback:     evidence.Rollback{Method: "void the refund"},
		Timeouts:     []evidence.Timeout{{Condition: "no approval before the offer expires", Owner: "triage", At: o.Exp.Std()}},
	}
}

// Guard checks the package delivered with in's offer and returns the
// guard of its hop, over the shared ledger.
func (e *Evidence) Guard(ctx context.Context, in *handoff.Received) (*evidence.Guard, error) {
	return e.GuardOn(ctx, in, e.Ledger)
}

// GuardOn is Guard over the ledger l: a replica's own handle on a ledger
// replicas share.
func (e *Evidence) GuardOn(ctx context.Context, in *handoff.Received, l authority.Ledger) (*evidence.Guard, error) {
	e.mu.Lock()
	pkg := e.pkgs[hopwork.Verified(in).Hop]
	e.mu.Unlock()
	rep, err := evidence.CheckReceived(ctx, in, evidence.Delivered{Package: pkg}, evidence.CheckConfig{Now: e.Now,
		Artifacts: ref.ByLoc(map[string]ref.Object{ledgerLoc: {Octets: ledgerOctets}})})
	if err != nil {
		return nil, err
	}
	if !rep.Acceptable() {
		e.tb.Errorf("the package did not pass: %v", rep.Findings())
	}
	return evidence.NewGuard(ctx, rep, evidence.GuardConfig{Ledger: l, Trust: e.Trust, Now: e.Now})
}

// SignedApprovals gives the owner of the package's pending approval a key
// the guards' Trust binds to it, and returns the owner's signer of
// approval statements for one operation on a hop, valid for a minute.
func (e *Evidence) SignedApprovals() func(hop digest.Digest, op string) []byte {
	o := e.Owner()
	return func(hop digest.Digest, op string) []byte {
		return o.Sign(o.Statement(hop, op))
	}
}

// OwnerKey is the key of the owner of the package's pending approval,
// which the guards' Trust binds to it.
type OwnerKey struct {
	e   *Evidence
	key *ecdsa.PrivateKey
	kid string
}

// Owner gives the owner of the package's pending approval a key the
// guards' Trust binds to it.
func (e *Evidence) Owner() *OwnerKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		e.tb.Fatal(err)
	}
	sg, err := handoff.NewSigner(key, handoff.JWS, nil)
	if err != nil {
		e.tb.Fatal(err)
	}
	if e.Trust, err = handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{Owner: {sg.Key()}}); err != nil {
		e.tb.Fatal(err)
	}
	kid, err := jws.Thumbprint(key.Public())
	if err != nil {
		e.tb.Fatal(err)
	}
	return &OwnerKey{e: e, key: key, kid: kid}
}

// Statement is the owner's statement approving MustAsk for operation op
// on hop, valid for a minute from the Evidence's now.
func (o *OwnerKey) Statement(hop digest.Digest, op string) evidence.ApprovalStatement {
	now := time.Now()
	if o.e.Now != nil {
		now = o.e.Now()
	}
	return evidence.ApprovalStatement{Hop: hop.String(), Action: MustAsk, OperationID: op,
		Approver: Owner, Iat: now.Add(-time.Second).Unix(), Exp: now.Add(time.Minute).Unix()}
}

// Sign signs st (evidence.SignApproval).
func (o *OwnerKey) Sign(st evidence.ApprovalStatement) []byte {
	signed, err := evidence.SignApproval(st, o.key, jws.ES256)
	if err != nil {
		o.e.tb.Fatal(err)
	}
	return signed
}

// Variants returns st signed, and three other presentations of the same
// statement that anyone relaying it can make or the owner may send: the
// high-S twin (r, n-s) of that signature, which needs no key; a second
// signature; and a re-encoding of the statement (members in another
// order, white space, an escape), signed. All four are one grant.
func (o *OwnerKey) Variants(st evidence.ApprovalStatement) [][]byte {
	signed := o.Sign(st)
	parts := strings.Split(string(signed), ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		o.e.tb.Fatal(err)
	}
	twinSig, err := ecsig.Twin(jws.ES256, sig)
	if err != nil {
		o.e.tb.Fatal(err)
	}
	twin := []byte(parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(twinSig))
	st.Type = evidence.ApprovalType
	payload, err := json.Marshal(st)
	if err != nil {
		o.e.tb.Fatal(err)
	}
	again, err := jws.Sign(payload, o.key, jws.ES256, o.kid, rand.Reader)
	if err != nil {
		o.e.tb.Fatal(err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(payload, &members); err != nil {
		o.e.tb.Fatal(err)
	}
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	slices.Sort(names)
	slices.Reverse(names)
	var b strings.Builder
	b.WriteString(" {")
	for i, n := range names {
		if i > 0 {
			b.WriteString(" ,\n ")
		}
		v := string(members[n])
		if n == "type" {
			v = `"\u0061pproval"`
		}
		b.WriteString(`"` + n + `" : ` + v)
	}
	b.WriteString("} ")
	reencoded, err := jws.Sign([]byte(b.String()), o.key, jws.ES256, o.kid, nil)
	if err != nil {
		o.e.tb.Fatal(err)
	}
	return [][]byte{signed, twin, again, reencoded}
}

// Clock is a settable clock: a hop's timeout passes without a sleep.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// RequireClosed fails tb unless the delegator a holds hop "failed" with
// no refs and reason "policy", resolved (the work took no effect, HC-44),
// and holds no unresolved hop at all.
func RequireClosed(tb testing.TB, a *handoff.Agent, hop handoff.HopID) {
	tb.Helper()
	ctx := context.Background()
	info, ok, err := a.Hop(ctx, hop)
	if err != nil || !ok {
		tb.Fatalf("hop %s: known %v, %v", hop, ok, err)
	}
	if info.State != state.Failed || info.Reason != reason.Policy || !info.Resolved {
		tb.Fatalf("hop %s is %q (reason %q, resolved %v), not \"failed\" for \"policy\", resolved", hop, info.State, info.Reason, info.Resolved)
	}
	if _, st, err := handoff.InspectUnverified(info.Status, handoff.Limits{}); err != nil || len(st.Refs) > 0 {
		tb.Fatalf("hop %s: \"failed\" with refs says part of the work took effect (HC-44): %v %v", hop, st, err)
	}
	if open, err := a.Unresolved(ctx); err != nil || len(open) > 0 {
		tb.Fatalf("the delegator's unresolved hops: %v %v", open, err)
	}
}
