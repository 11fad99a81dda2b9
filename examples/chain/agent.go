package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/mcphop"
)

// The environment of an agent process: which agent it is, the directory of
// every agent's files, and the URL of the agent it delegates to.
const (
	roleEnv = "HANDOFF_CHAIN_ROLE"
	dirEnv  = "HANDOFF_CHAIN_DIR"
	nextEnv = "HANDOFF_CHAIN_NEXT"
)

// agents names every agent of the chain, and the one each delegates to.
var (
	ids = map[string]handoff.AgentID{
		"assistant": "spiffe://shop.example/agent/assistant",
		"planner":   "spiffe://shop.example/agent/planner",
		"coder":     "spiffe://shop.example/agent/coder",
		"tester":    "spiffe://shop.example/agent/tester",
	}
	next = map[string]string{"assistant": "planner", "planner": "coder", "coder": "tester"}
	prev = map[string]string{"planner": "assistant", "coder": "planner", "tester": "coder"}
	// tools is the tool each agent serves, and tasks what it is asked.
	tools = map[string]string{"planner": "plan_fix", "coder": "write_patch", "tester": "run_tests"}
)

// node is one agent on its files: its key and the trust document that
// the demo wrote, and its bbolt file, which keeps the delegate's memory of
// the hops it received and the delegator's record of the hops it offered.
type node struct {
	name  string
	agent *handoff.Agent
	store *boltstore.Store
}

func openNode(dir, name string) (*node, error) {
	raw, err := os.ReadFile(filepath.Join(dir, name, "key.pem"))
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM key", name)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", name)
	}
	format := handoff.JWS
	if name == "coder" {
		format = handoff.COSE // JWS and COSE hops mixed in one chain
	}
	signer, err := handoff.NewSigner(key, format, nil)
	if err != nil {
		return nil, err
	}
	trust, err := trustOf(dir)
	if err != nil {
		return nil, err
	}
	store, err := boltstore.Open(filepath.Join(dir, name, "hops.db"), boltstore.Options{})
	if err != nil {
		return nil, err
	}
	offers, err := store.Offers() // the same file
	if err != nil {
		store.Close()
		return nil, err
	}
	agent, err := handoff.NewAgent(handoff.Config{ID: ids[name], Signer: signer, Trust: trust, Store: store, Offers: offers})
	if err != nil {
		store.Close()
		return nil, err
	}
	return &node{name: name, agent: agent, store: store}, nil
}

// bearer names the caller by its bearer token, here its AgentID: the
// loopback endpoint stands in for an authenticated transport.
func bearer(r *mcp.CallToolRequest) handoff.AgentID {
	if r.Extra == nil {
		return ""
	}
	return handoff.AgentID(strings.TrimPrefix(r.Extra.Header.Get("Authorization"), "Bearer "))
}

type withToken struct {
	id   handoff.AgentID
	next http.RoundTripper
}

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t.id))
	return t.next.RoundTrip(r)
}

// delegator is an agent's MCP client to the agent it delegates to.
type delegator struct {
	n       *node
	hc      *mcphop.Client
	session *mcp.ClientSession
	tool    string
}

func dialNext(ctx context.Context, n *node, url, tool string) (*delegator, error) {
	hc, err := mcphop.NewClient(mcphop.ClientConfig{Agent: n.agent, Attempts: -1})
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: n.name, Version: "v1"}, nil)
	client.AddSendingMiddleware(hc.Middleware())
	s, err := client.Connect(ctx, hc.Transport(&mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: withToken{ids[n.name], http.DefaultTransport}}}), nil)
	if err != nil {
		return nil, err
	}
	return &delegator{n: n, hc: hc, session: s, tool: tool}, nil
}

// offer hands the work on, as the next hop of the chain in: its Work
// names the hop it serves, so that the agent finds, in its own store
// after a restart, which received hop to end when this one ends.
func (d *delegator) offer(ctx context.Context, in *handoff.Received) (*mcphop.Delivery, error) {
	return d.hc.Call(ctx, d.session, &mcp.CallToolParams{Name: d.tool}, handoff.OfferParams{
		To: ids[next[d.n.name]], From: in, Task: d.tool, Work: string(in.Offer().Hop)})
}

// follow asks the next agent for the status of hop until it ends (a tool
// call gets one reply: a delegator over MCP learns later statuses by
// asking again), then ends the received hop it serves with the same
// outcome. Each attempt is bounded: an agent that is down does not answer
// until it is back.
func (d *delegator) follow(ctx context.Context, hop handoff.HopID, log func(string, ...any)) error {
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, _, err := d.hc.Retransmit(actx, d.session, &mcp.CallToolParams{Name: d.tool}, hop)
		cancel()
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		info, _, herr := d.n.agent.Hop(ctx, hop)
		if herr != nil {
			return herr
		}
		if info.Resolved {
			want, effect := state.Completed, state.EffectFull
			if info.State != state.Completed {
				want, effect = state.Failed, state.EffectNone
			}
			if _, err := d.n.agent.ReplyHop(ctx, ids[prev[d.n.name]], handoff.HopID(info.Work), want,
				handoff.ReplyOptions{Effect: effect}); err != nil {
				return err
			}
			log("hop %s is %q; hop %s is now %q", short(hop), info.State, short(handoff.HopID(info.Work)), want)
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func short(h handoff.HopID) string { return string(h)[:8] }

// child runs one agent process until it is killed.
func child(name string) error {
	ctx := context.Background()
	dir := os.Getenv(dirEnv)
	log := func(format string, args ...any) {
		fmt.Printf("%-9s | %s\n", name, fmt.Sprintf(format, args...))
	}
	n, err := openNode(dir, name)
	if err != nil {
		return err
	}
	// The listener the demo holds for this agent: the same address across
	// restarts.
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return err
	}
	mw, err := mcphop.Server(mcphop.ServerConfig{Agent: n.agent, Peer: bearer})
	if err != nil {
		return err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "v1"}, nil)
	server.AddReceivingMiddleware(mw)

	var d *delegator
	if next[name] != "" {
		if d, err = dialNext(ctx, n, os.Getenv(nextEnv), tools[next[name]]); err != nil {
			return err
		}
		// A restart: the hops this agent offered and that are not
		// resolved are in its store. Follow each to its end.
		open, err := n.agent.Unresolved(ctx)
		if err != nil {
			return err
		}
		for _, h := range open {
			fmt.Println("@restarted")
			log("restarted on its files: hop %s to the %s (for hop %s) is unresolved; following it", short(h.Hop), next[name], short(handoff.HopID(h.Work)))
			go func() {
				if err := d.follow(ctx, h.Hop, log); err != nil {
					log("%v", err)
				}
			}()
		}
	}
	release := make(chan struct{})
	go func() { // the demo says when the tests have run
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "release" {
				close(release)
				return
			}
		}
	}()

	mcp.AddTool(server, &mcp.Tool{Name: tools[name]}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		in, _ := mcphop.FromContext(ctx)
		hop := in.Offer().Hop
		// The work outlasts the call: answer "accepted" now (no
		// terminal status), finish it in the background, and record the
		// outcome with ReplyHop; the delegator learns it by asking again.
		mcphop.Report(ctx, mcphop.Outcome{Effect: state.EffectUnknown})
		if d == nil {
			log("took hop %s from the %s (chain %s, %d earlier hops); running the tests", short(hop), prev[name], in.Chain(), len(in.Links()))
			fmt.Println("@running")
			go func() {
				<-release
				if _, err := n.agent.ReplyHop(context.Background(), in.Offer().Iss, hop, state.Completed,
					handoff.ReplyOptions{Effect: state.EffectFull}); err != nil {
					log("%v", err)
					return
				}
				log("tests passed; hop %s is now %q", short(hop), state.Completed)
			}()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "running"}}}, nil, nil
		}
		out, err := d.offer(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		fmt.Printf("@offered %s %s\n", name, out.Hop) // for the demo, which reads the stores at the end
		log("took hop %s from the %s (chain %s, %d earlier hops); offered hop %s to the %s: %q",
			short(hop), prev[name], in.Chain(), len(in.Links()), short(out.Hop), next[name], out.State)
		go func() {
			if err := d.follow(context.Background(), out.Hop, log); err != nil {
				log("%v", err)
			}
		}()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "working"}}}, nil, nil
	})
	log("serving on its files (%s)", filepath.Join(name, "hops.db"))
	err = http.Serve(ln, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
