// Command consumer is the program the rehearsed publish builds in a fresh
// module outside the repository, with every module of the repository
// fetched at the release's version through a module proxy (.ci/publish.sh).
// It uses the root package, a durable replay store (replay/boltstore), an
// authority ledger (evidence/authority/boltauthority) and each host's
// middleware: a hop through MCP (integrations/mcphop) and one through A2A
// 1.0 (integrations/a2a1hop), both resolved "completed" at the delegator,
// the A2A 0.3 executor (integrations/a2a03hop) and the ADK plugin
// (integrations/adkhop) set up. It prints what it did and exits 0 when
// every step held.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a03srv "github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/boltauthority"
	"github.com/agentproto/handoff/integrations/a2a03hop"
	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/adkhop"
	"github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/agentproto/handoff/state"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
	fmt.Println("consumer: every step held")
}

func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "consumer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	ps, err := signer()
	if err != nil {
		return err
	}
	cs, err := signer()
	if err != nil {
		return err
	}
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{planner: {ps.Key()}, coder: {cs.Key()}})
	if err != nil {
		return err
	}
	// The delegate remembers its hops in a bbolt file (a durable store).
	store, err := boltstore.Open(filepath.Join(dir, "coder.db"), boltstore.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	p, err := handoff.NewAgent(handoff.Config{ID: planner, Signer: ps, Trust: trust})
	if err != nil {
		return err
	}
	c, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: cs, Trust: trust, Store: store})
	if err != nil {
		return err
	}

	// An authority ledger in a bbolt file: an effect is performed once.
	ledger, err := boltauthority.Open(filepath.Join(dir, "authority.db"), boltauthority.Options{})
	if err != nil {
		return err
	}
	defer ledger.Close()
	eff := authority.Effect{OperationID: "refund-77", Hop: "hop-1", Action: "refund", At: time.Now()}
	if err := ledger.Perform(ctx, eff); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if err := ledger.Perform(ctx, eff); !errors.Is(err, authority.ErrRepeated) {
		return fmt.Errorf("ledger: the same effect again gave %v, not authority.ErrRepeated", err)
	}
	fmt.Println("consumer: the authority ledger refused the effect a second time")

	if err := viaMCP(ctx, p, c); err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	if err := viaA2A(ctx, p, c); err != nil {
		return fmt.Errorf("a2a 1.0: %w", err)
	}

	// The A2A 0.3 executor and the ADK plugin, set up as a host would.
	if _, err := a2a03hop.NewExecutor(a2a03hop.ServerConfig{Agent: c, Executor: work03{}}); err != nil {
		return fmt.Errorf("a2a 0.3: %w", err)
	}
	if _, err := adkhop.NewPlugin(adkhop.GuardConfig{}); err != nil {
		return fmt.Errorf("adk: %w", err)
	}
	fmt.Println("consumer: the A2A 0.3 executor and the ADK plugin are set up")
	return nil
}

// viaMCP sends one hop as an MCP tool call, in memory.
func viaMCP(ctx context.Context, p, c *handoff.Agent) error {
	server := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1"}, nil)
	mw, err := mcphop.Server(mcphop.ServerConfig{Agent: c, Peer: func(*mcp.CallToolRequest) handoff.AgentID { return planner }})
	if err != nil {
		return err
	}
	server.AddReceivingMiddleware(mw)
	mcp.AddTool(server, &mcp.Tool{Name: "write_patch"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "patched"}}}, nil, nil
	})
	pc, err := mcphop.NewClient(mcphop.ClientConfig{Agent: p})
	if err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil)
	client.AddSendingMiddleware(pc.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		return err
	}
	defer ss.Close()
	session, err := client.Connect(ctx, pc.Transport(ct), nil)
	if err != nil {
		return err
	}
	defer session.Close()
	d, err := pc.Call(ctx, session, &mcp.CallToolParams{Name: "write_patch", Arguments: map[string]any{}},
		handoff.OfferParams{To: coder, Dialog: "mcp-1", Task: "write-patch"})
	if err != nil {
		return err
	}
	return resolved(ctx, p, d.Hop, "MCP")
}

// viaA2A sends one hop as an A2A 1.0 message over loopback HTTP.
func viaA2A(ctx context.Context, p, c *handoff.Agent) error {
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: c, Executor: work{}})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(*http.Request) (handoff.AgentID, bool) { return planner, true }))
	defer srv.Close()
	hc, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: p})
	if err != nil {
		return err
	}
	cl, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL, a2a.TransportProtocolJSONRPC)},
		a2aclient.WithCallInterceptors(hc))
	if err != nil {
		return err
	}
	defer cl.Destroy()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("fix the pager"))
	msg.ContextID = "a2a-1"
	d, err := hc.Send(ctx, cl, msg, handoff.OfferParams{To: coder, Task: "write-patch"})
	if err != nil {
		return err
	}
	return resolved(ctx, p, d.Hop, "A2A 1.0")
}

func resolved(ctx context.Context, p *handoff.Agent, hop handoff.HopID, via string) error {
	info, ok, err := p.Hop(ctx, hop)
	if err != nil {
		return err
	}
	if !ok || info.State != state.Completed || !info.Resolved {
		return fmt.Errorf("the hop through %s is %s (resolved %v), not completed", via, info.State, info.Resolved)
	}
	fmt.Printf("consumer: a hop through %s is completed at the delegator\n", via)
	return nil
}

// work is an A2A 1.0 executor that completes its task.
type work struct{}

func (work) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (work) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// work03 is an A2A 0.3 executor that completes its task.
type work03 struct{}

func (work03) Execute(ctx context.Context, rc *a2a03srv.RequestContext, q eventqueue.Queue) error {
	ev := a2a03.NewStatusUpdateEvent(rc, a2a03.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (work03) Cancel(ctx context.Context, rc *a2a03srv.RequestContext, q eventqueue.Queue) error {
	ev := a2a03.NewStatusUpdateEvent(rc, a2a03.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func signer() (*handoff.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return handoff.NewSigner(key, handoff.JWS, nil)
}
