package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"iter"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/state"
)

// serve runs an agent's server until ctx ends. The planner and the coder
// are A2A 1.0 servers (a2a-go/v2), the testers MCP servers (streamable
// HTTP).
func serve(ctx context.Context, n *node, log *logger) error {
	var h http.Handler
	switch n.cfg.Role {
	case rolePlanner, roleCoder:
		exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: n.agent, Executor: &passOn{n: n, log: log},
			OnReceive: func(_ context.Context, in *handoff.Received) {
				if !in.Accepted() {
					log.printf("%s; the executor does not run", describeReceived(in))
				}
			}})
		if err != nil {
			return err
		}
		h = a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)), n.caller)
	case roleTester1, roleTester2:
		t := &tester{n: n, log: log, life: ctx}
		srv, err := t.server()
		if err != nil {
			return err
		}
		if err := t.resume(ctx); err != nil {
			return err
		}
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	default:
		return fmt.Errorf("no server for role %q", n.cfg.Role)
	}
	l, err := net.Listen("tcp", n.cfg.Listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	log.printf("listening on %s (%s), signing %s", n.cfg.Listen, map[bool]string{true: "A2A JSON-RPC", false: "MCP streamable HTTP"}[n.cfg.Role == rolePlanner || n.cfg.Role == roleCoder], n.cfg.Format)
	if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// caller authenticates an A2A request by its bearer token.
func (n *node) caller(r *http.Request) (handoff.AgentID, bool) {
	id, ok := n.cfg.Tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	return id, ok
}

// bearer adds this agent's token to every A2A call.
type bearer struct {
	a2aclient.PassthroughInterceptor
	token string
}

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+b.token)
	return ctx, nil, nil
}

// a2aClient is this agent's A2A client to a peer, with the handoff
// interceptor.
func (n *node) a2aClient(ctx context.Context, peer string) (*a2a1hop.Client, *a2aclient.Client, error) {
	hc, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: n.agent})
	if err != nil {
		return nil, nil, err
	}
	cl, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(n.cfg.Peers[peer], a2a.TransportProtocolJSONRPC)},
		a2aclient.WithCallInterceptors(bearer{token: n.cfg.Token}, hc))
	return hc, cl, err
}

// passOn is the executor of the planner and the coder: it passes the work
// on (the planner to the coder over A2A, the coder to both testers over
// MCP) and completes when every hop it made has completed.
type passOn struct {
	n   *node
	log *logger
}

func (p *passOn) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		in, _ := a2a1hop.FromContext(ctx)
		p.log.printf("%s", describeReceived(in))
		var err error
		switch p.n.cfg.Role {
		case rolePlanner:
			err = p.toCoder(ctx, in)
		case roleCoder:
			err = p.toTesters(ctx, in)
		}
		st := a2a.TaskStateCompleted
		if err != nil {
			p.log.printf("work failed: %v", err)
			st = a2a.TaskStateFailed
			a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectNone})
		}
		yield(a2a.NewStatusUpdateEvent(ec, st, nil), nil)
	}
}

func (p *passOn) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (p *passOn) toCoder(ctx context.Context, in *handoff.Received) error {
	hc, cl, err := p.n.a2aClient(ctx, roleCoder)
	if err != nil {
		return err
	}
	defer cl.Destroy()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("write the patch and have it tested"))
	p.log.printf("passing the work on to coder over A2A 1.0 (SendMessage, Handoff in Message.metadata)")
	d, err := hc.Send(ctx, cl, msg, handoff.OfferParams{To: agentID(roleCoder), From: in, Task: "write-patch"})
	if err != nil {
		return err
	}
	return p.statuses(d.Statuses)
}

func (p *passOn) statuses(sts []*handoff.StatusResult) error {
	var last state.State
	for _, s := range sts {
		p.log.printf("%s", describeStatus(s))
		last = s.State
	}
	if last != state.Completed {
		return fmt.Errorf("hop ended %q", last)
	}
	return nil
}

// toTesters fans the work out to both testers at once.
func (p *passOn) toTesters(ctx context.Context, in *handoff.Received) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, t := range []string{roleTester1, roleTester2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.toTester(ctx, in, t)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// toTester calls a tester's tool, then, until the hop has a terminal
// status, asks again with the identical Handoff: an MCP tool call gets one
// reply, so later statuses are learned by retransmitting. A call that
// fails (the tester crashed) is retried the same way, on a new session.
func (p *passOn) toTester(ctx context.Context, in *handoff.Received, tester string) error {
	mc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: p.n.agent})
	if err != nil {
		return err
	}
	connect := func() (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: string(p.n.cfg.ID), Version: "v1"}, nil)
		c.AddSendingMiddleware(mc.Middleware())
		tr := &mcp.StreamableClientTransport{Endpoint: p.n.cfg.Peers[tester], DisableStandaloneSSE: true, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: tokenTransport{token: p.n.cfg.Token}}}
		return c.Connect(ctx, mc.Transport(tr), nil)
	}
	params := &mcp.CallToolParams{Name: "run_tests", Arguments: map[string]any{"suite": "pager"}}
	p.log.printf("passing the work on to %s over MCP (tools/call, Handoff in params._meta)", tester)
	var hop handoff.HopID
	var st2 state.State
	s, err := connect()
	if err == nil {
		var d *hmcp.Delivery
		d, err = mc.Call(ctx, s, params, handoff.OfferParams{To: agentID(tester), From: in, Task: "run-tests"})
		if d != nil {
			hop = d.Hop
			for _, st := range d.Statuses {
				p.log.printf("%s: %s", tester, describeStatus(st))
				st2 = st.State
			}
		}
		s.Close()
	}
	if hop == "" {
		return err
	}
	for tries := 0; st2 != state.Completed && st2 != state.Failed && st2 != state.Rejected; tries++ {
		if tries == 100 {
			return fmt.Errorf("%s: no outcome for hop %s", tester, hop)
		}
		if err != nil {
			p.log.printf("%s: call failed (%v); asking again with the identical Handoff", tester, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if s, err = connect(); err != nil {
			continue
		}
		var sts []*handoff.StatusResult
		_, sts, err = mc.Retransmit(ctx, s, params, hop)
		s.Close()
		for _, st := range sts {
			p.log.printf("%s: retransmission answered: %s", tester, describeStatus(st))
			st2 = st.State
		}
	}
	if st2 != state.Completed {
		return fmt.Errorf("%s: hop ended %q", tester, st2)
	}
	return nil
}

type tokenTransport struct{ token string }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}

// tester is an MCP server whose tool runs the tests. It notes each hop it
// takes in a journal beside its store, so that after a crash it finishes
// the work it had taken and records "completed" as the hop's last status.
type tester struct {
	n   *node
	log *logger
	// life ends when the agent stops: its work stops with it.
	life context.Context
}

func (t *tester) journal() string { return filepath.Join(t.n.dir, "journal") }

func (t *tester) note(line string) error {
	f, err := os.OpenFile(t.journal(), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

func (t *tester) server() (*mcp.Server, error) {
	mw, err := hmcp.Server(hmcp.ServerConfig{
		Agent: t.n.agent,
		OnReceive: func(_ context.Context, in *handoff.Received) {
			if !in.Accepted() {
				t.log.printf("%s; the tool does not run", describeReceived(in))
			}
		},
		Peer: func(r *mcp.CallToolRequest) handoff.AgentID {
			if r.Extra == nil || r.Extra.Header == nil {
				return ""
			}
			return t.n.cfg.Tokens[strings.TrimPrefix(r.Extra.Header.Get("Authorization"), "Bearer ")]
		},
	})
	if err != nil {
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: t.n.cfg.Role, Version: "v1"}, nil)
	srv.AddReceivingMiddleware(mw)
	mcp.AddTool(srv, &mcp.Tool{Name: "run_tests", Description: "Runs a test suite; needs a signed handoff in _meta"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			in, _ := hmcp.FromContext(ctx)
			o := in.Offer()
			t.log.printf("%s", describeReceived(in))
			if err := t.note("taken " + string(o.Iss) + " " + string(o.Hop)); err != nil {
				return nil, nil, err
			}
			t.log.printf("working on hop %s (%s)…", short(string(o.Hop)), t.n.cfg.Work)
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err() // outcome unknown: no status
			case <-t.life.Done():
				return nil, nil, t.life.Err()
			case <-time.After(t.n.cfg.Work):
			}
			if err := t.note("done " + string(o.Hop)); err != nil {
				return nil, nil, err
			}
			t.log.printf("tests passed for hop %s", short(string(o.Hop)))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "42 tests passed"}}}, nil, nil
		})
	return srv, nil
}

// resumeWork is how long the rest of an interrupted piece of work takes.
const resumeWork = time.Second

// resume finishes the work a crash interrupted: hops taken and not done.
func (t *tester) resume(ctx context.Context) error {
	f, err := os.Open(t.journal())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	taken := map[string]string{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) == 3 && fs[0] == "taken":
			taken[fs[2]] = fs[1]
			order = append(order, fs[2])
		case len(fs) == 2 && fs[0] == "done":
			delete(taken, fs[1])
		}
	}
	for _, hop := range order {
		iss, ok := taken[hop]
		if !ok {
			continue
		}
		t.log.printf("restarted: hop %s was taken before the crash (the store still knows it); finishing the work", short(hop))
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(resumeWork):
			}
			// A new key signs nothing before every peer trusts it.
			if err := t.n.keys.waitFetched(ctx, peersOf(t.n.cfg)); err != nil {
				return
			}
			t.log.printf("keys: every peer has fetched the set with its current key %s; signing with it", short(t.n.signer.Key().KID))
			if _, err := t.n.agent.ReplyHop(ctx, handoff.AgentID(iss), handoff.HopID(hop), state.Completed,
				handoff.ReplyOptions{Effect: state.EffectFull}); err != nil {
				t.log.printf("could not record the outcome of hop %s: %v", short(hop), err)
				return
			}
			if err := t.note("done " + hop); err != nil {
				t.log.printf("journal: %v", err)
			}
			t.log.printf("tests passed for hop %s; \"completed\" is now its last status", short(hop))
		}()
	}
	return nil
}
