package contract

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority/boltauthority"
	"github.com/agentproto/handoff/ref"
)

// env is one process of the delegate: its agent, opened on its files, its
// clock (which the test may move on, as time passing would), and what it
// counts.
type env struct {
	dir    string
	agent  *handoff.Agent
	ledger *boltauthority.Ledger
	seal   []byte

	mu     sync.Mutex
	offset time.Duration
	counts map[string]int
}

func (e *env) now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Now().Add(e.offset)
}

func (e *env) count(what string) {
	e.mu.Lock()
	e.counts[what]++
	e.mu.Unlock()
}

// evidence is how every host's middleware checks the package that comes
// beside each offer, before any work: against the offer, the delegate's
// clock, and the system of record the package cites; and the hop's guard
// it gives, over the authority ledger.
func (e *env) evidence() *evidence.HostConfig {
	return &evidence.HostConfig{
		Check: evidence.CheckConfig{Now: e.now, Artifacts: e.systemOfRecord},
		Guard: evidence.GuardConfig{Ledger: e.ledger, Now: e.now},
	}
}

// systemOfRecord resolves the ledger entries packages cite from the
// invoice ledger's files, as they are now.
func (e *env) systemOfRecord(_ context.Context, r ref.Ref) (ref.Object, error) {
	name, ok := strings.CutPrefix(r.Loc, "urn:shop:ledger:")
	if !ok || strings.ContainsAny(name, `/\`) {
		return ref.Object{}, ref.ErrUnavailable
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "payments", "ledger", name+".json"))
	if err != nil {
		return ref.Object{}, ref.ErrUnavailable
	}
	return ref.Object{Octets: b}, nil
}

// ask asks the hop's guard before the effect of action, named as the
// package's completed actions and approvals name it.
func (e *env) ask(ctx context.Context, in *handoff.Received, action string) error {
	g := evidence.GuardFromContext(ctx)
	if g == nil {
		return errors.New("no guard for the hop: its package was not checked")
	}
	n := names[action]
	return g.Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: action, OperationID: n.op, IdempotencyKey: n.key})
}

// effect performs action for the hop of in, once the guard allowed it, and
// counts it. The specialist's report is written to the report store, and
// its reference returned with the package's: the "completed" that returns
// the result names both.
func (e *env) effect(in *handoff.Received, action string) ([]ref.Ref, error) {
	e.count(action)
	fmt.Printf("%s done for hop %s\n", action, in.Offer().Hop)
	if action != actReport {
		return nil, nil
	}
	name := "INV-1042-" + string(in.Offer().Hop)
	report := []byte(fmt.Sprintf(`{"invoice":"INV-1042","found":"paid, not refunded","hop":%q}`, in.Offer().Hop))
	if err := os.WriteFile(filepath.Join(e.dir, "reports", name+".json"), report, 0o600); err != nil {
		return nil, err
	}
	return append([]ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256(report), Loc: "urn:payments:report:" + name}},
		evidence.Refs(in.Offer().Refs)...), nil
}

// serveDelegate runs the delegate process for host until its test kills
// it, or closes its input.
func serveDelegate(host string) error {
	dir := os.Getenv(dirEnv)
	e := &env{dir: dir, counts: map[string]int{}}
	agent, store, _, err := openAgent(dir, "payments", e.now)
	if err != nil {
		return err
	}
	defer store.Close()
	e.agent = agent
	if e.ledger, err = boltauthority.Open(filepath.Join(dir, "payments", "authority.db"), boltauthority.Options{}); err != nil {
		return err
	}
	defer e.ledger.Close()
	if e.seal, err = os.ReadFile(filepath.Join(dir, "payments", "seal.key")); err != nil {
		return err
	}
	var h http.Handler
	switch host {
	case "a2a":
		h, err = e.a2aHandler()
	case "mcp":
		h, err = e.mcpHandler()
	case "adk":
		h, err = e.adkHandler()
	default:
		err = fmt.Errorf("no host %q", host)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(ln, h) //nolint:errcheck // the process is killed
	fmt.Printf("@ready http://%s\n", ln.Addr())

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "advance":
			dt, err := time.ParseDuration(arg)
			if err != nil {
				return err
			}
			e.mu.Lock()
			e.offset += dt
			e.mu.Unlock()
			fmt.Println("@advanced")
		case "counts":
			e.mu.Lock()
			b, err := json.Marshal(e.counts)
			e.mu.Unlock()
			if err != nil {
				return err
			}
			fmt.Printf("@counts %s\n", b)
		}
	}
	return sc.Err()
}

// bearerPeer is the caller the delegate's endpoint authenticated.
func bearerPeer(r *http.Request) (handoff.AgentID, bool) {
	return triage, r.Header.Get("Authorization") == "Bearer "+triageToken
}
