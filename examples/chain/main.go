// Command chain runs a chain of three hops across four agents, each agent
// a process of its own on its own bbolt file, and survives the real crash
// of one of them mid-hop:
//
//	assistant -> planner -> coder -> tester
//
// The program is the assistant, and starts the other three as processes of
// itself (re-executed with HANDOFF_CHAIN_ROLE set), each an MCP server on
// loopback HTTP (stateless streamable HTTP, with the middleware of
// github.com/agentproto/handoff/integrations/mcphop). Each agent keeps the
// hops it received (the delegate's memory, replay.Store) and the hops it
// offered (the delegator's record, replay.OfferStore) in one bbolt file
// (replay/boltstore: every write is synced before it returns).
//
// Each hop's work outlasts its call, as mcphop.Client.Call's documentation
// describes: the tool answers "accepted" at once (mcphop.Report with
// EffectUnknown), offers the next hop of the chain, and follows it by
// asking again (mcphop.Client.Retransmit) until it ends; it then ends the
// hop it received with the same outcome (Agent.ReplyHop). The offer of the
// next hop names, in its Work, the received hop it serves.
//
// While the tester runs the tests of hop 3, the program kills the coder
// with SIGKILL, while the coder is following hop 3 and hop 2 is open above
// it, then starts it again on its files. The restarted coder finds hop 3
// unresolved in its own store (Agent.Unresolved) and follows it again,
// retransmitting its identical octets; the planner, which kept asking about
// hop 2 through the crash, gets the coder's last status, unchanged, until
// the coder ends hop 2. The chain then finishes: "completed" travels back
// up to the assistant. At the end the program reads each hop's outcome back
// from the agents' files, as the delegator and as the delegate recorded it.
//
// The listeners are the program's, passed to each agent process (so an
// agent keeps its address across a restart): the program runs on Unix.
//
// Run it with:
//
//	cd examples && go run ./chain
package main

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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/keyset"
)

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		if err := child(role); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chain:", err)
		os.Exit(1)
	}
}

// syncWriter serializes the writes of every process's lines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// proc is an agent process: its lines go to out, its events ("@..." lines)
// to events.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// demo holds what the program keeps of its agent processes.
type demo struct {
	dir       string
	exe       string
	out       io.Writer
	listeners map[string]*os.File
	urls      map[string]string
	events    chan string
	seen      []string // events not awaited yet
}

func (dm *demo) start(name string) (*proc, error) {
	cmd := exec.Command(dm.exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+name, dirEnv+"="+dm.dir, nextEnv+"="+dm.urls[next[name]])
	cmd.ExtraFiles = []*os.File{dm.listeners[name]} // fd 3 in the agent
	cmd.Stderr = dm.out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "@") {
				dm.events <- line
			} else {
				fmt.Fprintln(dm.out, line)
			}
		}
		_ = cmd.Wait()
	}()
	return p, nil
}

// kill ends p with SIGKILL: it closes nothing, flushes nothing.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// await waits for an event that starts with prefix, takes it, and
// returns it; the others wait for their turn.
func (dm *demo) await(ctx context.Context, prefix string) (string, error) {
	for {
		for i, ev := range dm.seen {
			if strings.HasPrefix(ev, prefix) {
				dm.seen = append(dm.seen[:i], dm.seen[i+1:]...)
				return ev, nil
			}
		}
		select {
		case ev := <-dm.events:
			dm.seen = append(dm.seen, ev)
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for %q: %w", prefix, ctx.Err())
		}
	}
}

func run(out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &syncWriter{w: out}
	log := func(format string, args ...any) {
		fmt.Fprintf(w, "%-9s | %s\n", "assistant", fmt.Sprintf(format, args...))
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "handoff-chain-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := writeKeys(dir); err != nil {
		return err
	}
	dm := &demo{dir: dir, exe: exe, out: w, listeners: map[string]*os.File{}, urls: map[string]string{}, events: make(chan string, 64)}
	for _, name := range []string{"planner", "coder", "tester"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close() // f is a duplicate, which stays open
		if err != nil {
			return err
		}
		defer f.Close()
		dm.listeners[name], dm.urls[name] = f, "http://"+ln.Addr().String()
	}
	procs := map[string]*proc{}
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	for _, name := range []string{"tester", "coder", "planner"} {
		if procs[name], err = dm.start(name); err != nil {
			return err
		}
	}

	// The assistant, on its own file.
	me, err := openNode(dir, "assistant")
	if err != nil {
		return err
	}
	d, err := dialNext(ctx, me, dm.urls["planner"], tools["planner"])
	if err != nil {
		me.store.Close()
		return err
	}
	first, err := d.hc.Call(ctx, d.session, &mcp.CallToolParams{Name: tools["planner"]},
		handoff.OfferParams{To: ids["planner"], Dialog: "case-77", Task: "fix the off-by-one in pager.go", Work: "issue-42"})
	if err != nil {
		me.store.Close()
		return err
	}
	log("offered hop %s to the planner: %q", short(first.Hop), first.State)

	// The crash: the coder follows hop 3 while the tester runs the tests.
	hops := map[string]handoff.HopID{"assistant": first.Hop}
	for range 2 {
		ev, err := dm.await(ctx, "@offered ")
		if err != nil {
			me.store.Close()
			return err
		}
		f := strings.Fields(ev)
		hops[f[1]] = handoff.HopID(f[2])
	}
	if _, err := dm.await(ctx, "@running"); err != nil {
		me.store.Close()
		return err
	}
	fmt.Fprintf(w, "%-9s | killing the coder (SIGKILL) while it follows hop %s\n", "demo", short(hops["coder"]))
	procs["coder"].kill()
	fmt.Fprintf(w, "%-9s | starting the coder again on its files\n", "demo")
	if procs["coder"], err = dm.start("coder"); err != nil {
		me.store.Close()
		return err
	}
	if _, err := dm.await(ctx, "@restarted"); err != nil {
		me.store.Close()
		return err
	}
	fmt.Fprintf(w, "%-9s | the tests of hop %s finish\n", "demo", short(hops["coder"]))
	if _, err := io.WriteString(procs["tester"].stdin, "release\n"); err != nil {
		me.store.Close()
		return err
	}

	// The assistant asks about hop 1 until it ends.
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		_, _, rerr := d.hc.Retransmit(actx, d.session, &mcp.CallToolParams{Name: tools["planner"]}, first.Hop)
		acancel()
		if rerr != nil && ctx.Err() != nil {
			me.store.Close()
			return ctx.Err()
		}
		info, _, err := me.agent.Hop(ctx, first.Hop)
		if err != nil {
			me.store.Close()
			return err
		}
		if info.Resolved {
			log("hop %s is %q: the chain finished", short(first.Hop), info.State)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.session.Close()
	me.store.Close()

	// Every agent stops; what each recorded is read back from its file.
	for name, p := range procs {
		p.kill()
		delete(procs, name)
	}
	return readBack(ctx, w, dir, hops)
}

// readBack prints each hop's outcome as its delegator's and its delegate's
// files hold it.
func readBack(ctx context.Context, w io.Writer, dir string, hops map[string]handoff.HopID) error {
	for _, from := range []string{"assistant", "planner", "coder"} {
		to := next[from]
		hop := hops[from]
		dn, err := openNode(dir, from)
		if err != nil {
			return err
		}
		info, ok, err := dn.agent.Hop(ctx, hop)
		dn.store.Close()
		if err != nil || !ok {
			return fmt.Errorf("%s's file does not hold hop %s: %v", from, hop, err)
		}
		tn, err := openNode(dir, to)
		if err != nil {
			return err
		}
		trust, err := trustOf(dir)
		if err != nil {
			tn.store.Close()
			return err
		}
		disp, ok, err := evidence.Recorded(ctx, tn.store, ids[from], hop, trust, handoff.Limits{})
		tn.store.Close()
		if err != nil || !ok {
			return fmt.Errorf("%s's file does not hold hop %s: %v", to, hop, err)
		}
		fmt.Fprintf(w, "%-9s | hop %s %s -> %s: the %s's file says %q (resolved: %v), the %s's file says %q\n",
			"files", short(hop), from, to, from, info.State, info.Resolved, to, disp.State)
	}
	return nil
}

// writeKeys gives every agent a key of its own, in its directory, and
// writes the trust document every agent reads (AgentID -> JWK Set).
func writeKeys(dir string) error {
	doc := map[handoff.AgentID]map[string][]json.RawMessage{}
	for name, id := range ids {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return err
		}
		jwk, err := keyset.PublicJWK(handoff.TrustedKey{Public: &k.PublicKey, Alg: "ES256"})
		if err != nil {
			return err
		}
		doc[id] = map[string][]json.RawMessage{"keys": {jwk}}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "trust.json"), b, 0o600)
}

func trustOf(dir string) (*handoff.Trust, error) {
	doc, err := os.ReadFile(filepath.Join(dir, "trust.json"))
	if err != nil {
		return nil, err
	}
	return keyset.ParseTrust(doc)
}
