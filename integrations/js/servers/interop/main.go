// Command interop serves the handoff middlewares on loopback for the
// JavaScript clients of integrations/js: an A2A 1.0 agent (a2a-go/v2 with
// the a2a1hop executor; the A2A version @a2a-js/sdk speaks) and an MCP
// server (the MCP Go SDK with the mcphop receiving middleware), on one
// listener:
//
//	/.well-known/agent-card.json  the agent card, the extension declared required
//	/a2a                          A2A 1.0 JSON-RPC
//	/mcp                          MCP streamable HTTP, tool "work" guarded
//	/calls                        {"a2a": n, "mcp": m}: how often the work ran
//	/seen                         the offers the A2A work ran for, oldest first:
//	                              iss, aud, hop, dialog, chain (the chain's state)
//	                              and handoff (the Handoff object)
//
// It signs with the private JWK -key as -id and trusts the agents of the
// trust file -trust. Loopback authenticates nobody: every caller is taken
// to be -peer. Once listening it writes its base URL to -ready.
package main

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/keyset"
)

func main() {
	id := flag.String("id", "", "AgentId of this agent (required)")
	keyFile := flag.String("key", "", "private JWK of this agent (required)")
	trustFile := flag.String("trust", "", "trust file (required)")
	peer := flag.String("peer", "", "AgentId every caller is taken to be (required)")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	ready := flag.String("ready", "", "file to write the base URL to once listening")
	flag.Parse()
	if *id == "" || *keyFile == "" || *trustFile == "" || *peer == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*id, *keyFile, *trustFile, handoff.AgentID(*peer), *addr, *ready); err != nil {
		log.Fatal(err)
	}
}

func loadAgent(id, keyFile, trustFile string) (*handoff.Agent, error) {
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	key, ok := jwk.Key.(crypto.Signer)
	if !ok || jwk.IsPublic() {
		return nil, fmt.Errorf("%s: not a private signing key", keyFile)
	}
	signer, err := handoff.NewSigner(key, handoff.JWS, nil)
	if err != nil {
		return nil, err
	}
	doc, err := os.ReadFile(trustFile)
	if err != nil {
		return nil, err
	}
	trust, err := keyset.ParseTrust(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", trustFile, err)
	}
	return handoff.NewAgent(handoff.Config{ID: handoff.AgentID(id), Signer: signer, Trust: trust})
}

// work is the executor and the tool behind the middlewares: it counts the
// times it ran, which the tests read to see that a refused offer never
// reached it.
type work struct {
	a2a, mcp atomic.Int32

	mu   sync.Mutex
	seen []seenOffer
}

// seenOffer is an offer the A2A work ran for, as /seen shows it.
type seenOffer struct {
	Iss     handoff.AgentID    `json:"iss"`
	Aud     handoff.AgentID    `json:"aud"`
	Hop     handoff.HopID      `json:"hop"`
	Dialog  string             `json:"dialog"`
	Chain   handoff.ChainState `json:"chain"`
	Handoff json.RawMessage    `json:"handoff"`
}

func (w *work) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		in, ok := a2a1hop.FromContext(ctx)
		if !ok {
			yield(nil, errors.New("no accepted offer"))
			return
		}
		h, err := in.Handoff().Encode(handoff.JSON)
		if err != nil {
			yield(nil, err)
			return
		}
		o := in.Offer()
		w.mu.Lock()
		w.seen = append(w.seen, seenOffer{Iss: o.Iss, Aud: o.Aud, Hop: o.Hop, Dialog: o.Dialog, Chain: in.Chain(), Handoff: h})
		w.mu.Unlock()
		w.a2a.Add(1)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (w *work) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

type args struct {
	Change string `json:"change"`
}

func run(id, keyFile, trustFile string, peer handoff.AgentID, addr, ready string) error {
	agent, err := loadAgent(id, keyFile, trustFile)
	if err != nil {
		return err
	}
	w := &work{}
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: agent, Executor: w,
		Peer: func(context.Context, *a2asrv.ExecutorContext) handoff.AgentID { return peer }})
	if err != nil {
		return err
	}
	mw, err := mcphop.Server(mcphop.ServerConfig{Agent: agent,
		Peer: func(*mcp.CallToolRequest) handoff.AgentID { return peer }})
	if err != nil {
		return err
	}
	ms := mcp.NewServer(&mcp.Implementation{Name: id, Version: "v1"}, nil)
	ms.AddReceivingMiddleware(mw)
	mcp.AddTool(ms, &mcp.Tool{Name: "work", Description: "does the work of an accepted offer"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			if _, ok := mcphop.FromContext(ctx); !ok {
				return nil, nil, errors.New("no accepted offer")
			}
			w.mcp.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done: " + a.Change}}}, nil, nil
		})

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	card := &a2a.AgentCard{Name: id, Description: "handoff interop agent", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/a2a", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "work", Name: "work", Description: "does the work of an accepted offer", Tags: []string{"handoff"}}}}
	a2a1hop.Declare(card, true)

	mux := http.NewServeMux()
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil))
	mux.HandleFunc("/calls", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]int32{"a2a": w.a2a.Load(), "mcp": w.mcp.Load()})
	})
	mux.HandleFunc("/seen", func(rw http.ResponseWriter, _ *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(w.seen)
	})
	srv := &http.Server{Handler: mux}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if ready != "" {
		if err := os.WriteFile(ready, []byte(base+"\n"), 0o644); err != nil {
			return err
		}
	}
	log.Printf("interop: %s serving on %s", id, base)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-stop:
		return srv.Shutdown(context.Background())
	}
}
