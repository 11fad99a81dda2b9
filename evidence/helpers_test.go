package evidence

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
)

const (
	triage   handoff.AgentID = "spiffe://shop.example/agent/triage"
	payments handoff.AgentID = "spiffe://shop.example/agent/payments"
	t0                       = 1793000000
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// plannedHops is a delegator's Config.Rand that yields hops planned in
// advance, so that the package can be bound to the hop before the offer is
// signed (the root's Offer draws the hop itself).
type plannedHops struct {
	mu   sync.Mutex
	next [][]byte
}

func (p *plannedHops) plan(t testing.TB) handoff.HopID {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	p.mu.Lock()
	p.next = append(p.next, b)
	p.mu.Unlock()
	return handoff.HopID(base64.RawURLEncoding.EncodeToString(b))
}

func (p *plannedHops) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.next) == 0 {
		return rand.Read(b)
	}
	n := copy(b, p.next[0])
	p.next = p.next[1:]
	if n < len(b) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

// world is the delegator (triage) and the delegate (payments), trusting
// each other, on one clock.
type world struct {
	t       testing.TB
	clock   *clock
	signers map[handoff.AgentID]*handoff.Signer
	trust   *handoff.Trust
	hops    *plannedHops
	from    *handoff.Agent
	to      *handoff.Agent
	store   replay.Store
}

func newWorld(t testing.TB, f handoff.Format, store replay.Store) *world {
	t.Helper()
	w := &world{t: t, clock: &clock{t: time.Unix(t0, 0)}, signers: map[handoff.AgentID]*handoff.Signer{}, hops: &plannedHops{}}
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range []handoff.AgentID{triage, payments} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		s, err := handoff.NewSigner(k, f, nil)
		require.NoError(t, err)
		w.signers[id] = s
		keys[id] = []handoff.TrustedKey{s.Key()}
	}
	var err error
	w.trust, err = handoff.NewTrust(keys)
	require.NoError(t, err)
	w.from, err = handoff.NewAgent(handoff.Config{ID: triage, Signer: w.signers[triage], Trust: w.trust, Now: w.clock.Now, Rand: w.hops})
	require.NoError(t, err)
	if store == nil {
		store = replay.NewMemory(replay.MemoryOptions{Now: w.clock.Now})
	}
	w.store = store
	w.to = w.delegate(store)
	return w
}

// store0 is the delegate's store.
func (w *world) store0() replay.Store { return w.store }

// delegate returns a payments agent on store.
func (w *world) delegate(store replay.Store) *handoff.Agent {
	w.t.Helper()
	a, err := handoff.NewAgent(handoff.Config{ID: payments, Signer: w.signers[payments], Trust: w.trust, Now: w.clock.Now, Store: store})
	require.NoError(w.t, err)
	return a
}

// artifacts are the objects the refund package cites.
var artifacts = map[string][]byte{
	"ledger-extract": []byte(`{"invoice":"INV-1042","status":"paid","refunded":0}`),
	"email-receipt":  []byte(`{"message":"m-77","status":"queued"}`),
	"portal-log":     []byte(`{"attempt":"auto-refund","result":"declined: over limit"}`),
}

func artifactRef(id string) WireRef {
	return RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(artifacts[id]), Loc: "urn:example:artifact:" + id})
}

// artifactSource serves the artifacts by loc.
func artifactSource() ref.Source {
	objs := map[string]ref.Object{}
	for id, b := range artifacts {
		objs["urn:example:artifact:"+id] = ref.Object{Octets: b}
	}
	return ref.ByLoc(objs)
}

// refundPackage is a clean package: a billing refund handed from triage
// to the payments specialist.
func refundPackage() Package {
	now := time.Unix(t0, 0).UTC()
	return Package{
		Sender:   Party{Role: "triage"},
		Receiver: Party{Role: "payments-specialist"},
		Control:  SpecialistReturnsResult,
		Outcome:  Outcome{Result: "refund of invoice INV-1042 issued or declined with a reason", DoneWhen: "the ledger shows the refund settled, or the decline is recorded"},
		Authority: Authority{
			Allowed: []string{"ledger.read", "refund.eligibility"},
			MustAsk: []string{"refund.issue"},
			Denied:  []string{"card.charge", "customer.delete"},
		},
		State: []StateClaim{{System: "billing-ledger", State: "INV-1042 paid, no refund", AsOf: now.Add(-time.Minute), Evidence: []string{"ledger-extract"}}},
		Completed: []CompletedAction{{Action: "customer.notify", External: true, IdempotencyKey: "notify-INV-1042-1",
			Postcondition: "acknowledgement email queued", Evidence: []string{"email-receipt"}}},
		Artifacts: []Artifact{
			{ID: "ledger-extract", Ref: artifactRef("ledger-extract"), Proves: "INV-1042 is paid and not refunded"},
			{ID: "email-receipt", Ref: artifactRef("email-receipt"), Proves: "the customer was told once"},
			{ID: "portal-log", Ref: artifactRef("portal-log"), Proves: "the self-service refund was declined"},
		},
		Passed:       []ContextItem{{Name: "invoice", Value: "INV-1042"}, {Name: "amount", Value: "EUR 640.00"}},
		Assumptions:  []Assumption{{Item: "the customer is within the 30-day window", Validation: "refund.eligibility on INV-1042"}},
		Attempts:     []Attempt{{Attempt: "self-service refund", Result: "declined: over the EUR 500 limit", Evidence: []string{"portal-log"}}},
		Pending:      []Pending{{Kind: PendingApproval, Item: "refund over EUR 500", Action: "refund.issue", Owner: "finance-lead"}},
		Next:         NextAction{Action: "refund.eligibility", Description: "check INV-1042 against the refund policy"},
		Verification: Verification{Check: "refund.eligibility returns a decision for INV-1042"},
		Timeouts:     []Timeout{{Condition: "no approval within 4 hours", Owner: "triage", At: now.Add(4 * time.Hour)}},
		Rollback:     Rollback{Method: "void the refund before settlement"},
	}
}

// build builds p for a hop planned in w, offered at the clock's now for
// ttl.
func (w *world) build(p Package, opt BuildOptions) (*Built, Binding) {
	w.t.Helper()
	hop := w.hops.plan(w.t)
	now := handoff.TimeOf(w.clock.Now())
	bind := Binding{Hop: hop, Iss: triage, Aud: payments, Iat: now, Exp: now + 120}
	b := NewBuilder(p).Withhold("card_number", "PCI scope: the specialist works from the invoice", []byte("4111111111111111"))
	built, err := b.Build(bind, opt)
	require.NoError(w.t, err)
	return built, bind
}

// offer makes the delegator's offer for the built package.
func (w *world) offer(built *Built, bind Binding) *handoff.Outgoing {
	w.t.Helper()
	out, err := w.from.Offer(context.Background(), handoff.OfferParams{To: payments, Dialog: "case-77", TTL: 120 * time.Second,
		Refs: []ref.Ref{built.Ref}})
	require.NoError(w.t, err)
	require.Equal(w.t, bind.Hop, out.Offer.Hop, "the planned hop")
	return out
}

// receive delivers the offer to the delegate and checks the package.
func (w *world) receive(out *handoff.Outgoing, enc handoff.Encoding, d Delivered) (*handoff.Received, *Report) {
	w.t.Helper()
	data, err := out.Handoff.Encode(enc)
	require.NoError(w.t, err)
	in, err := w.to.Receive(context.Background(), data, handoff.Host{Dialog: "case-77"})
	require.NoError(w.t, err)
	require.True(w.t, in.Accepted(), "receive checks: %v", in.Err())
	rep, err := CheckReceived(context.Background(), in, d, CheckConfig{Now: w.clock.Now, Artifacts: artifactSource()})
	require.NoError(w.t, err)
	return in, rep
}
