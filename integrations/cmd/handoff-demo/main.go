// Command handoff-demo runs five agents as separate processes on loopback
// and drives one task through them, every hop signed and checked by the
// middlewares of github.com/agentproto/handoff/integrations:
//
//	assistant --A2A--> planner --A2A--> coder --MCP--> tester-1
//	                                          \--MCP--> tester-2
//
// The assistant and the coder sign JWS, the planner COSE; tester-1 signs
// COSE and tester-2 JWS. Each agent has its own key, its own bearer token
// and its own stores under a temporary directory. Each publishes its
// public key as a JWK Set on loopback (keyset.Publisher), and trusts the
// URLs where its peers publish theirs (keyset.Source): no trust document is
// shared. While tester-2 works on its hop, the demo kills it with SIGKILL,
// rotates its key, and starts it again: it publishes the new key only, and
// its peers pick it up while keeping the old one for its grace period. Its
// bbolt store still knows the hop, so the coder's retransmission is
// answered without running the tests again, with the statuses signed
// before the crash by the old key, and the restarted tester records
// "completed", signed by the new key once every peer has fetched it. Then the assistant
// asks again for its own hop and gets the identical status octets, and sends
// a forged offer that the planner refuses before its executor runs.
//
// The agents speak A2A 1.0 through a2a-go/v2 (package a2a1hop) and MCP
// through the MCP Go SDK (package mcphop). Run it from the repository's
// root (workspace mode) or from its own module:
//
//	go run ./integrations/cmd/handoff-demo
//	go run ./integrations/cmd/handoff-demo -in-process   # one process, the crash simulated
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"

	"github.com/agentproto/handoff/integrations/a2a1hop"
)

// The environment of an agent process: its role and the demo directory.
const (
	envRole = "HANDOFF_DEMO_ROLE"
	envDir  = "HANDOFF_DEMO_DIR"
)

func main() {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(child(role, os.Getenv(envDir)))
	}
	var o options
	newFlags(&o, flag.ExitOnError).Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "handoff-demo:", err)
		os.Exit(1)
	}
	o.Exe = exe
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "handoff-demo:", err)
		os.Exit(1)
	}
}

// about is what -h says the demo does.
const about = `Usage: handoff-demo [-in-process] [-keep]

handoff-demo runs five agents on loopback, each a separate process (or,
with -in-process, all in this one) with its own key, bearer token and
stores, and drives one task through them:
an assistant hands it to a planner over A2A, the planner to a coder over
A2A, and the coder to two testers over MCP. Every hop carries a signed
offer with the chain of the offers before it, and every answer is a
signed status; the agents sign JWS or COSE, and fetch each other's
public keys as JWK Sets from loopback URLs.

While tester-2 works, the demo kills it (SIGKILL), rotates its key and
starts it again: its store still knows the hop, so the coder's
retransmission is answered without the tests running twice, and
tester-2 signs "completed" with its new key once every peer has fetched
it. Then the assistant asks again for its own hop and gets the identical
status octets, and sends a forged offer, which the planner refuses
before its executor runs. The demo prints what each agent does and
saw, and exits 0 when every step went as described.

Flags:
`

// newFlags returns the demo's flags, which set o, and whose usage (-h)
// describes the demo.
func newFlags(o *options, h flag.ErrorHandling) *flag.FlagSet {
	fs := flag.NewFlagSet("handoff-demo", h)
	fs.BoolVar(&o.InProcess, "in-process", false, "run every agent in this process; the crash is simulated by stopping the tester's server and closing its store")
	fs.BoolVar(&o.Keep, "keep", false, "keep the temporary directory with the agents' keys, stores and journals")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), about)
		fs.PrintDefaults()
	}
	return fs
}

// child is an agent process: it serves until SIGTERM or SIGKILL.
func child(role, dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := &logger{w: os.Stdout}
	n, err := openNode(dir, role, log)
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	defer n.Close()
	if err := serve(ctx, n, log); err != nil {
		fmt.Println("serve:", err)
		return 1
	}
	return 0
}

type options struct {
	InProcess bool
	// Exe is the program started for each agent, with envRole set.
	Exe  string
	Keep bool
	// Env is added to each agent process's environment.
	Env []string
}

// agents starts, kills and restarts the agents.
type agents interface {
	start(role string) error
	kill(role string) error
	stopAll()
}

func run(ctx context.Context, out io.Writer, o options) error {
	start := time.Now()
	log := &logger{w: out}
	dir, err := os.MkdirTemp("", "handoff-demo-")
	if err != nil {
		return err
	}
	if o.Keep {
		log.printf("%-9s | agents' directory: %s", "demo", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	cfgs, err := setup(dir)
	if err != nil {
		return err
	}
	mode := "separate processes"
	if o.InProcess {
		mode = "one process"
	}
	log.printf("%-9s | five agents in %s on loopback, each with its own key, token and stores under %s", "demo", mode, dir)

	crash := make(chan struct{}, 1) // tester-2 began its work
	ready := make(chan string, 16)  // an agent trusts every peer's key
	onLine := func(role, line string) {
		log.printf("%-9s | %s", role, line)
		if strings.HasPrefix(line, readyLine) {
			select {
			case ready <- role:
			default:
			}
		}
		if role == roleTester2 && strings.HasPrefix(line, "working on hop") {
			select {
			case crash <- struct{}{}:
			default:
			}
		}
	}
	var ag agents
	if o.InProcess {
		ag = &goroutines{dir: dir, onLine: onLine, cancel: map[string]func(){}}
	} else {
		ag = &processes{dir: dir, exe: o.Exe, env: o.Env, onLine: onLine, cmds: map[string]*exec.Cmd{}}
	}
	defer ag.stopAll()
	for _, p := range plan {
		if p.role == roleAssistant {
			continue
		}
		if err := ag.start(p.role); err != nil {
			return err
		}
		if err := waitListening(ctx, cfgs[p.role].Listen); err != nil {
			return fmt.Errorf("%s: %w", p.role, err)
		}
	}

	// Crash tester-2 once while it works, rotate its key, then start it
	// again: it publishes its new key only, and signs with it once every
	// peer has fetched it; the peers keep trusting the old one for its
	// grace period, so the statuses it signed before the crash still
	// verify.
	crashed := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
			crashed <- ctx.Err()
			return
		case <-crash:
		}
		time.Sleep(200 * time.Millisecond)
		log.printf("%-9s | --- killing tester-2 (SIGKILL) while it works on its hop ---", "demo")
		if err := ag.kill(roleTester2); err != nil {
			crashed <- err
			return
		}
		old, cur, err := rotateKey(dir, roleTester2)
		if err != nil {
			crashed <- err
			return
		}
		log.printf("%-9s | --- rotating tester-2's key while it is down: key %s replaced by %s, published at %s ---", "demo",
			short(old.KID), short(cur.KID), keysURL(cfgs[roleTester2].Keys))
		log.printf("%-9s | --- starting tester-2 again on the same store ---", "demo")
		if err := ag.start(roleTester2); err != nil {
			crashed <- err
			return
		}
		crashed <- waitListening(ctx, cfgs[roleTester2].Listen)
	}()

	alog := &logger{w: prefixWriter(log, roleAssistant)}
	n, err := openNode(dir, roleAssistant, alog)
	if err != nil {
		return err
	}
	defer n.Close()
	// Nothing is sent before every agent trusts every other's key, each
	// fetched from where its agent publishes it.
	waiting := map[string]bool{}
	for _, p := range plan {
		if p.role != roleAssistant {
			waiting[p.role] = true
		}
	}
	for len(waiting) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-ready:
			delete(waiting, r)
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-n.keys.ready:
	}
	if err := drive(ctx, n, alog); err != nil {
		return err
	}
	select {
	case err := <-crashed:
		if err != nil {
			return err
		}
	default:
		return errors.New("tester-2 was never crashed")
	}
	log.printf("%-9s | done in %s", "demo", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// drive is the assistant: it sends the task, asks again for its hop, and
// sends one forged offer.
func drive(ctx context.Context, n *node, log *logger) error {
	hc, cl, err := n.a2aClient(ctx, rolePlanner)
	if err != nil {
		return err
	}
	defer cl.Destroy()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("fix the off-by-one in pager.go"))
	msg.ContextID = "dialog-pager-42"
	log.printf("offering the task to planner over A2A 1.0 (JWS, dialog %s)", msg.ContextID)
	d, err := hc.Send(ctx, cl, msg, handoff.OfferParams{To: agentID(rolePlanner), Task: "fix-pager"})
	if err != nil {
		return err
	}
	for _, s := range d.Statuses {
		log.printf("%s", describeStatus(s))
	}
	task, ok := d.Result.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted {
		return fmt.Errorf("the task did not complete: %v", d.Result)
	}
	last, err := carry.Status(task.Status.Message.Metadata)
	if err != nil {
		return err
	}
	info, _, err := n.agent.Hop(ctx, d.Hop)
	if err != nil {
		return err
	}
	log.printf("hop %s is %s, resolved: %v", short(string(d.Hop)), info.State, info.Resolved)

	// The reply could have been lost: ask again with the identical octets.
	log.printf("asking again for hop %s with the identical Handoff (a retransmission)", short(string(d.Hop)))
	res, sts, err := hc.Retransmit(ctx, cl, msg, d.Hop)
	if err != nil {
		return err
	}
	m, ok := res.(*a2a.Message)
	if !ok {
		return fmt.Errorf("a retransmission was answered with %T", res)
	}
	again, err := carry.Status(m.Metadata)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, last) || len(sts) != 1 || sts[0].Err() != nil {
		return errors.New("the retransmission was not answered with the identical status octets")
	}
	log.printf("answered with the identical %d status octets; the planner did not run the work again", len(again))

	// A forgery: a fresh offer whose task is rewritten in transit.
	out, err := n.agent.Offer(ctx, handoff.OfferParams{To: agentID(rolePlanner), Dialog: msg.ContextID, Task: "fix-pager"})
	if err != nil {
		return err
	}
	forged, err := tamper(out.Handoff, "fix-pager", "rm-rf-all")
	if err != nil {
		return err
	}
	log.printf("sending a forged offer: task rewritten from fix-pager to rm-rf-all, signature kept")
	fres, err := cl.SendMessage(a2a1hop.WithHandoff(ctx, forged), &a2a.SendMessageRequest{Message: copyMessage(msg)})
	if err != nil {
		return err
	}
	ft, ok := fres.(*a2a.Task)
	if !ok || ft.Status.State != a2a.TaskStateRejected {
		return fmt.Errorf("the forgery was not refused: %v", fres)
	}
	if _, err := carry.Status(ft.Status.Message.Metadata); err == nil {
		return errors.New("a status came back for a forged offer")
	}
	log.printf("refused (task %s), with no status: a status answers only an offer whose signature verified, and this one's did not", ft.Status.State)
	return nil
}

func copyMessage(m *a2a.Message) *a2a.Message {
	cp := *m
	cp.ID = a2a.NewMessageID()
	cp.Metadata = nil
	return &cp
}

// tamper rewrites from to to in a JWS offer's payload, keeping the
// signature.
func tamper(h *handoff.Handoff, from, to string) (*handoff.Handoff, error) {
	parts := strings.Split(string(h.Offer.Octets), ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(from), []byte(to), 1))
	return &handoff.Handoff{Offer: handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(parts, "."))}}, nil
}

func waitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// processes runs each agent as a process of exe.
type processes struct {
	dir    string
	exe    string
	env    []string
	onLine func(role, line string)

	mu   sync.Mutex
	cmds map[string]*exec.Cmd
	done map[*exec.Cmd]chan struct{} // closed when the process has exited
	wg   sync.WaitGroup
}

func (p *processes) start(role string) error {
	cmd := exec.Command(p.exe)
	cmd.Env = append(append(os.Environ(), p.env...), envRole+"="+role, envDir+"="+p.dir)
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return err
	}
	p.onLine(role, fmt.Sprintf("started as process %d", cmd.Process.Pid))
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmds[role] = cmd
	if p.done == nil {
		p.done = map[*exec.Cmd]chan struct{}{}
	}
	p.done[cmd] = exited
	p.mu.Unlock()
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.onLine(role, sc.Text())
		}
	}()
	go func() {
		defer p.wg.Done()
		cmd.Wait()
		close(exited)
		w.Close()
	}()
	return nil
}

func (p *processes) kill(role string) error {
	p.mu.Lock()
	cmd := p.cmds[role]
	exited := p.done[cmd]
	delete(p.cmds, role)
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s is not running", role)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-exited
	return nil
}

func (p *processes) stopAll() {
	p.mu.Lock()
	for _, cmd := range p.cmds {
		cmd.Process.Signal(syscall.SIGTERM)
	}
	p.cmds = map[string]*exec.Cmd{}
	p.mu.Unlock()
	p.wg.Wait()
}

// goroutines runs each agent in this process. kill stops its server and
// closes its stores, as a crash would leave them.
type goroutines struct {
	dir    string
	onLine func(role, line string)

	mu     sync.Mutex
	cancel map[string]func()
}

func (g *goroutines) start(role string) error {
	n, err := openNode(g.dir, role, &logger{w: lineWriter(func(l string) { g.onLine(role, l) })})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serve(ctx, n, &logger{w: lineWriter(func(l string) { g.onLine(role, l) })}); err != nil {
			g.onLine(role, "serve: "+err.Error())
		}
	}()
	g.mu.Lock()
	g.cancel[role] = func() {
		cancel()
		<-done
		n.Close()
	}
	g.mu.Unlock()
	return nil
}

func (g *goroutines) kill(role string) error {
	g.mu.Lock()
	stop := g.cancel[role]
	delete(g.cancel, role)
	g.mu.Unlock()
	if stop == nil {
		return fmt.Errorf("%s is not running", role)
	}
	stop()
	return nil
}

func (g *goroutines) stopAll() {
	g.mu.Lock()
	all := g.cancel
	g.cancel = map[string]func(){}
	g.mu.Unlock()
	for _, stop := range all {
		stop()
	}
}

// lineWriter calls f with each line written.
type lineWriter func(string)

func (f lineWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		f(l)
	}
	return len(b), nil
}

func prefixWriter(l *logger, role string) io.Writer {
	return lineWriter(func(s string) { l.printf("%-9s | %s", role, s) })
}
