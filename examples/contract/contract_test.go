package contract

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/boltauthority"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/agentproto/handoff/state"
)

// TestMain lets the test binary play the delegate: a test starts it again
// with roleEnv naming the host it serves.
func TestMain(m *testing.M) {
	if host := os.Getenv(roleEnv); host != "" {
		if err := serveDelegate(host); err != nil {
			fmt.Fprintf(os.Stderr, "delegate %s: %v\n", host, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	roleEnv = "HANDOFF_CONTRACT_DELEGATE"
	dirEnv  = "HANDOFF_CONTRACT_DIR"

	triage   = handoff.AgentID("spiffe://shop.example/agent/triage")
	payments = handoff.AgentID("spiffe://shop.example/agent/payments")
	owner    = "finance-lead"
	// ledgerLoc names the entry of the invoice ledger, the system of
	// record, that every package cites as evidence of the invoice's state.
	ledgerLoc = "urn:shop:ledger:INV-1042"
	// triageToken is how the delegate's endpoint authenticates the
	// delegator (it stands in for mutual TLS or OAuth).
	triageToken = "triage-token"
)

// The actions of the packages' authority, and what each names its effect
// by (an operation id, or an idempotency key).
const (
	actRead    = "ledger_read"     // allowed
	actReport  = "report_write"    // allowed: the specialist's result
	actNotify  = "customer_notify" // allowed, and already done (Completed)
	actRefund  = "refund_issue"    // must ask the finance lead
	actCharge  = "card_charge"     // denied
	actUnknown = "customer_delete" // listed nowhere
)

var names = map[string]struct{ op, key string }{
	actRead:    {op: "read-INV-1042"},
	actReport:  {op: "report-INV-1042"},
	actNotify:  {key: "notify-INV-1042"},
	actRefund:  {op: "refund-INV-1042"},
	actCharge:  {op: "charge-INV-1042"},
	actUnknown: {op: "delete-customer-77"},
}

// ledgerEntry is the invoice's entry as the system of record holds it.
var ledgerEntry = []byte(`{"invoice":"INV-1042","status":"paid","amount":"EUR 640.00"}`)

// world is the delegator's side of a test: its agent on its own file, the
// directory of both parties' files, and the trust both read.
type world struct {
	t     *testing.T
	dir   string
	agent *handoff.Agent
	store *boltstore.Store
	trust *handoff.Trust
	hops  []*expect
}

// expect is what the system of record must say of one hop at the end.
type expect struct {
	name     string
	hop      handoff.HopID
	digest   digest.Digest
	pkg      ref.Ref
	state    state.State // the delegator's and the delegate's final state
	reason   reason.Code
	ack      authority.Decision
	findings []string // the finding codes of a rejection
	// approvals is how many approvals the ledger holds for the hop, each
	// used.
	approvals int
	// finals are the final dispositions the ledger may hold: the hop's
	// first terminal state, its state, or "canceled" for a hop its
	// delegator canceled (the revocation comes first; the delegate's
	// outcome follows it, in its replay store).
	finals []state.State
	// effects: the ledger holds an effect of the hop (a call claimed under
	// it, whatever became of it).
	effects bool
}

// newWorld writes each party's key and the trust document into a fresh
// directory and opens the delegator on its file.
func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	doc := map[handoff.AgentID]map[string][]json.RawMessage{}
	for name, id := range map[string]handoff.AgentID{"triage": triage, "payments": payments} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		jwk, err := keyset.PublicJWK(handoff.TrustedKey{Public: &k.PublicKey, Alg: "ES256"})
		if err != nil {
			t.Fatal(err)
		}
		doc[id] = map[string][]json.RawMessage{"keys": {jwk}}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
	}{
		{"trust.json", raw},
		{"payments/seal.key", []byte("the payments agent's pause key!!")},
		{"payments/ledger/INV-1042.json", ledgerEntry},
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f.path)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.path), f.data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "reports"), 0o700); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, dir: dir}
	w.agent, w.store, w.trust, err = openAgent(dir, "triage", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.store.Close() })
	return w
}

// openAgent opens the agent name on its files: its key, the trust
// document, and its bbolt file (replay store and offer records in one).
func openAgent(dir, name string, now func() time.Time) (*handoff.Agent, *boltstore.Store, *handoff.Trust, error) {
	id := map[string]handoff.AgentID{"triage": triage, "payments": payments}[name]
	raw, err := os.ReadFile(filepath.Join(dir, name, "key.pem"))
	if err != nil {
		return nil, nil, nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, nil, nil, fmt.Errorf("%s: no PEM key", name)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s: not an ECDSA key", name)
	}
	signer, err := handoff.NewSigner(key, handoff.JWS, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	doc, err := os.ReadFile(filepath.Join(dir, "trust.json"))
	if err != nil {
		return nil, nil, nil, err
	}
	trust, err := keyset.ParseTrust(doc)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := boltstore.Open(filepath.Join(dir, name, "hops.db"), boltstore.Options{Now: now})
	if err != nil {
		return nil, nil, nil, err
	}
	offers, err := store.Offers()
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	agent, err := handoff.NewAgent(handoff.Config{ID: id, Signer: signer, Trust: trust, Store: store, Offers: offers, Now: now})
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	return agent, store, trust, nil
}

// refundPackage is the package of one hop: the refund of INV-1042, citing
// entry as the ledger's state, with the control mode given.
func refundPackage(o *handoff.Offer, entry []byte, control evidence.ControlMode) evidence.Package {
	now := o.Iat.Std()
	return evidence.Package{
		Sender: evidence.Party{Role: "triage"}, Receiver: evidence.Party{Role: "payments"},
		Control: control,
		Outcome: evidence.Outcome{Result: "INV-1042 refunded (EUR 640.00)", DoneWhen: "the ledger shows the refund"},
		Authority: evidence.Authority{Allowed: []string{actRead, actReport, actNotify}, MustAsk: []string{actRefund},
			Denied: []string{actCharge}},
		State: []evidence.StateClaim{{System: "invoice-ledger", State: "INV-1042 paid", AsOf: now.Add(-30 * time.Second),
			Evidence: []string{"ledger"}}},
		Completed: []evidence.CompletedAction{{Action: actNotify, External: true, IdempotencyKey: names[actNotify].key,
			Postcondition: "the customer was told the refund is under way", Evidence: []string{"ledger"}}},
		Artifacts: []evidence.Artifact{{ID: "ledger", Proves: "INV-1042 is paid",
			Ref: evidence.RefToWire(ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(entry), Loc: ledgerLoc})}},
		Passed:       []evidence.ContextItem{{Name: "invoice", Value: "INV-1042"}},
		Withheld:     []evidence.Withheld{{Item: "card_number", Reason: "PCI scope: the refund goes to the original payment"}},
		Pending:      []evidence.Pending{{Kind: evidence.PendingApproval, Item: "refund over EUR 500", Action: actRefund, Owner: owner}},
		Next:         evidence.NextAction{Action: actRead, Description: "confirm INV-1042 is paid and not refunded"},
		Verification: evidence.Verification{Check: "the ledger shows the refund"},
		Timeouts: []evidence.Timeout{{Condition: "no approval before the offer expires", Owner: "triage",
			At: o.Exp.Std()}},
		Rollback: evidence.Rollback{Method: "void the refund before settlement"},
	}
}

// offer is the offer of one action, with its package beside it.
func offer(action string, entry []byte, control evidence.ControlMode) handoff.OfferParams {
	return handoff.OfferParams{To: payments, Task: action, TTL: 30 * time.Second,
		Deliver: func(o *handoff.Offer) (ref.Ref, ref.Object, error) {
			return evidence.NewBuilder(refundPackage(o, entry, control)).Deliver(evidence.BuildOptions{})(o)
		}}
}

// restricted is the offer of a package that carries a credential, as a
// careless delegator's own code could make it: Build refuses it, so this
// one is encoded by hand. The delegate must refuse it.
func restricted(action string) handoff.OfferParams {
	p := offer(action, ledgerEntry, evidence.TransferOwnership)
	p.Deliver = func(o *handoff.Offer) (ref.Ref, ref.Object, error) {
		pkg := refundPackage(o, ledgerEntry, evidence.TransferOwnership)
		pkg.Handoff = evidence.Header{ID: string(o.Hop), Time: o.Iat.Std()}
		pkg.Sender.Agent, pkg.Receiver.Agent = string(o.Iss), string(o.Aud)
		pkg.Passed = append(pkg.Passed, evidence.ContextItem{Name: "gateway", Value: "use the key AKIAIOSFODNN7EXAMPLE for the refund"})
		enc, err := pkg.Encode()
		if err != nil {
			return ref.Ref{}, ref.Object{}, err
		}
		canonical, err := pkg.Canonical()
		if err != nil {
			return ref.Ref{}, ref.Object{}, err
		}
		return evidence.Ref(canonical, ""), ref.Object{Octets: enc}, nil
	}
	return p
}

// record notes what the system of record must say of the hop out at the
// end.
func (w *world) record(name string, out *handoff.Outgoing, st state.State, why reason.Code, ack authority.Decision, findings ...string) *expect {
	w.t.Helper()
	pkgs := evidence.Refs(out.Offer.Refs)
	if len(pkgs) != 1 {
		w.t.Fatalf("%s: the offer names %d packages", name, len(pkgs))
	}
	e := &expect{name: name, hop: out.Offer.Hop, digest: out.Digest, pkg: pkgs[0], state: st, reason: why, ack: ack, findings: findings,
		finals: []state.State{st}}
	w.hops = append(w.hops, e)
	return e
}

// took notes that the ledger holds an effect of the hop.
func (e *expect) took() *expect {
	e.effects = true
	return e
}

// canceled notes that the hop's delegator canceled it: the ledger's final
// disposition is the revocation, recorded first, or, when the delegate's
// own outcome crossed it in flight (draft section 5.5), that outcome.
func (e *expect) canceled(crossed bool) *expect {
	e.finals = []state.State{state.Canceled}
	if crossed {
		e.finals = append(e.finals, e.state)
	}
	return e
}

// resultSource gives the delegator the objects a returned result names:
// the reports the specialist wrote to the shared report store (which
// stands in for an object store both parties reach).
func resultSource(dir string) ref.Source {
	return func(_ context.Context, r ref.Ref) (ref.Object, error) {
		name, ok := strings.CutPrefix(r.Loc, "urn:payments:report:")
		if !ok || strings.ContainsAny(name, `/\`) {
			return ref.Object{}, ref.ErrUnavailable
		}
		b, err := os.ReadFile(filepath.Join(dir, "reports", name+".json"))
		if err != nil {
			return ref.Object{}, ref.ErrUnavailable
		}
		return ref.Object{Octets: b}, nil
	}
}

// delegate is one process of the delegate, started fresh on its files.
type delegate struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	url   string
	done  chan struct{}
}

// startDelegate starts the delegate serving host, and waits until it
// serves.
func (w *world) startDelegate(host string) *delegate {
	t := w.t
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+host, dirEnv+"="+w.dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &delegate{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "@") {
				d.lines <- sc.Text()
			} else {
				t.Logf("delegate: %s", sc.Text())
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(d.kill)
	d.url = strings.TrimPrefix(d.await("@ready "), "@ready ")
	return d
}

func (d *delegate) await(prefix string) string {
	d.t.Helper()
	select {
	case l := <-d.lines:
		if !strings.HasPrefix(l, prefix) {
			d.t.Fatalf("the delegate said %q, not %s...", l, prefix)
		}
		return l
	case <-d.done:
		d.t.Fatalf("the delegate ended before it said %s", prefix)
	case <-time.After(30 * time.Second):
		d.t.Fatalf("the delegate did not say %s", prefix)
	}
	return ""
}

// advance moves the delegate's clock on by dt.
func (d *delegate) advance(dt time.Duration) {
	d.t.Helper()
	fmt.Fprintf(d.stdin, "advance %s\n", dt)
	d.await("@advanced")
}

// counts returns the invocations the delegate counted: of its handler
// ("handler"), and of each action's effect.
func (d *delegate) counts() map[string]int {
	d.t.Helper()
	fmt.Fprintln(d.stdin, "counts")
	var c map[string]int
	if err := json.Unmarshal([]byte(strings.TrimPrefix(d.await("@counts "), "@counts ")), &c); err != nil {
		d.t.Fatal(err)
	}
	return c
}

// kill ends the process with SIGKILL: nothing is flushed or closed, the
// files keep what was synced.
func (d *delegate) kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// requireCounts checks the delegate's counts of this run.
func requireCounts(t *testing.T, got map[string]int, want map[string]int) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the delegate counted %d %s, want %d (all: %v)", got[k], k, v, got)
		}
	}
}

// readBack reads, once every process let go of them, what each party's
// files hold of every hop, and checks it against what the runs did.
func (w *world) readBack() {
	t := w.t
	t.Helper()
	ctx := context.Background()
	w.store.Close()
	// The delegator's own hop store.
	triageAgent, triageStore, trust, err := openAgent(w.dir, "triage", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer triageStore.Close()
	// The delegate's replay store, and its authority ledger.
	_, paymentsStore, _, err := openAgent(w.dir, "payments", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer paymentsStore.Close()
	ledger, err := boltauthority.Open(filepath.Join(w.dir, "payments", "authority.db"), boltauthority.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()

	for _, e := range w.hops {
		info, ok, err := triageAgent.Hop(ctx, e.hop)
		switch {
		case err != nil || !ok:
			t.Errorf("%s: the delegator's file does not hold hop %s: %v", e.name, e.hop, err)
		case info.State != e.state || info.Reason != e.reason || !info.Resolved:
			t.Errorf("%s: the delegator's file says %q (reason %q, resolved %v), want %q (%q), resolved",
				e.name, info.State, info.Reason, info.Resolved, e.state, e.reason)
		}
		disp, ok, err := evidence.Recorded(ctx, paymentsStore, triage, e.hop, trust, handoff.Limits{})
		switch {
		case err != nil || !ok:
			t.Errorf("%s: the delegate's replay store does not hold hop %s: %v", e.name, e.hop, err)
		case disp.State != e.state || !disp.Final():
			t.Errorf("%s: the delegate's replay store says %q, want %q", e.name, disp.State, e.state)
		}
		if e.ack == authority.Rejected && (disp.Package == nil || !disp.Package.Dig.Equal(e.pkg.Dig)) {
			t.Errorf("%s: the delegate's \"rejected\" names the package %v, the offer named %v", e.name, disp.Package, e.pkg)
		}
		t.Logf("%s: hop %s: delegator %q (%q), delegate %q", e.name, e.hop, info.State, info.Reason, disp.State)
	}
	for _, e := range w.hops {
		as, err := ledger.Approvals(ctx, e.digest.String())
		if err != nil || len(as) != e.approvals {
			t.Errorf("%s: the ledger holds the approvals %v (%v), want %d", e.name, as, err, e.approvals)
		}
		for _, a := range as {
			if a.Remaining != 0 || a.Action != actRefund || a.Approver != owner {
				t.Errorf("%s: the approval %+v", e.name, a)
			}
		}
	}
	// The authority ledger is the system of record of each hop's
	// acknowledgement and final disposition (the contract: "Preserve the
	// final acknowledgement and disposition in the system of record").
	t.Run("LedgerHoldsAckAndFinal", func(t *testing.T) {
		for _, e := range w.hops {
			rec, err := ledger.Hop(ctx, e.digest.String())
			if err != nil {
				t.Errorf("%s: the ledger could not answer for hop %s: %v", e.name, e.hop, err)
				continue
			}
			switch {
			case rec.Ack == nil:
				t.Errorf("%s: the ledger holds no acknowledgement of hop %s", e.name, e.hop)
			case rec.Ack.Decision != e.ack:
				t.Errorf("%s: the ledger's acknowledgement is %q, want %q", e.name, rec.Ack.Decision, e.ack)
			case rec.Ack.Package != e.pkg.Dig.String():
				t.Errorf("%s: the ledger acknowledges package %s, the offer named %s", e.name, rec.Ack.Package, e.pkg.Dig)
			case e.ack == authority.Rejected && strings.Join(rec.Ack.Findings, ",") != strings.Join(e.findings, ","):
				t.Errorf("%s: the rejection's findings are %v, want %v", e.name, rec.Ack.Findings, e.findings)
			}
			switch {
			case rec.Final == nil:
				t.Errorf("%s: the ledger holds no final disposition of hop %s", e.name, e.hop)
			case !slices.Contains(e.finals, state.State(rec.Final.State)):
				t.Errorf("%s: the ledger's final disposition is %q, want one of %q", e.name, rec.Final.State, e.finals)
			}
			if rec.Effects != e.effects {
				t.Errorf("%s: the ledger holds an effect of hop %s: %v, want %v", e.name, e.hop, rec.Effects, e.effects)
			}
		}
	})
}
