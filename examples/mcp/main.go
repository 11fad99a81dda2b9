// Command mcp hands work from a planner to a coder over MCP, with the
// official Go SDK and its in-memory transport, and the handoff middleware of
// github.com/agentproto/handoff/integrations/mcphop (draft section "Carrying
// the Element", HC-67).
//
// The coder's server has the receiving middleware: its tool runs only for
// a tools/call whose Handoff (in params._meta) passed every check, and the
// result carries the signed status in its _meta. The planner's client has
// the sending middleware: it attaches the Handoff and verifies the status
// of every result. A retransmission is answered with the identical octets of
// the last status, without running the tool again (HC-39).
//
// Run it with:
//
//	cd examples && go run ./mcp
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
	carry "github.com/agentproto/handoff/mcp"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
	dialog  = "ctx-7c1e"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcp:", err)
		os.Exit(1)
	}
}

// patchArgs are the arguments of the write_patch tool. The Handoff does not
// travel here but in params._meta.
type patchArgs struct {
	Change string `json:"change" jsonschema:"the change to make"`
}

func run(out io.Writer) error {
	w := &syncWriter{w: out}
	ctx := context.Background()
	plannerAgent, coderAgent, err := newAgents()
	if err != nil {
		return err
	}

	// The coder: an MCP server with the receiving middleware.
	mw, err := hmcp.Server(hmcp.ServerConfig{
		Agent: coderAgent,
		// The in-memory transport authenticates nobody; it connects exactly
		// the one client made below. Over HTTP with OAuth the default, the
		// verified token's UserID, applies.
		Peer: func(*mcp.CallToolRequest) handoff.AgentID { return planner },
		OnReceive: func(_ context.Context, in *handoff.Received) {
			switch {
			case in.Retransmission():
				fmt.Fprintf(w, "coder: hop %s is a retransmission, not processed again\n", in.Refused().Hop)
			case !in.Accepted():
				fmt.Fprintf(w, "coder: rejected: %s (%s); the tool does not run\n", in.Reason(), in.Detail())
			}
		},
	})
	if err != nil {
		return err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1.0.0"}, nil)
	server.AddReceivingMiddleware(mw)
	mcp.AddTool(server, &mcp.Tool{Name: "write_patch", Description: "Writes a patch. Requires a signed handoff in _meta."},
		func(ctx context.Context, req *mcp.CallToolRequest, args patchArgs) (*mcp.CallToolResult, any, error) {
			in, _ := hmcp.FromContext(ctx) // the verified, accepted offer
			fmt.Fprintf(w, "coder: hop %s from %s (chain %s): writing %q\n", in.Offer().Hop, in.Offer().Iss, in.Chain(), args.Change)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "patch written"}}}, nil, nil
		})

	// The planner: an MCP client with the sending middleware.
	hc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: plannerAgent})
	if err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1.0.0"}, nil)
	client.AddSendingMiddleware(hc.Middleware())
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, serverT, nil)
	if err != nil {
		return err
	}
	defer ss.Close()
	session, err := client.Connect(ctx, hc.Transport(clientT), nil)
	if err != nil {
		return err
	}
	defer session.Close()

	params := &mcp.CallToolParams{Name: "write_patch", Arguments: patchArgs{Change: "fix the off-by-one in pager.go"}}
	d, err := hc.Call(ctx, session, params, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	if err != nil {
		return err
	}
	for _, s := range d.Statuses {
		if s.Err() != nil {
			return fmt.Errorf("status refused: %w", s.Err())
		}
		fmt.Fprintf(w, "planner: verified status %q signed by %s; hop is %s\n", s.Status.State, s.Status.Iss, s.State)
	}
	info, _, err := plannerAgent.Hop(ctx, d.Hop)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "planner: hop %s is %s, resolved: %v\n", d.Hop, info.State, info.Resolved)
	first, err := carry.Status(d.Result.Meta)
	if err != nil {
		return err
	}

	// No news, say: ask again with the identical octets, never a re-signed
	// hop (HC-37, HC-52). The coder resends its last status unchanged.
	res, sts, err := hc.Retransmit(ctx, session, params, d.Hop)
	if err != nil {
		return err
	}
	again, err := carry.Status(res.Meta)
	if err != nil || len(sts) != 1 || sts[0].Err() != nil {
		return fmt.Errorf("unexpected answer to a retransmission: %v", err)
	}
	if !bytes.Equal(again, first) {
		return errors.New("the retransmission was answered with different status octets")
	}
	fmt.Fprintf(w, "planner: the retransmission got back the identical status octets (%d octets)\n", len(again))

	// Someone on the path rewrites the task in the signed offer.
	offer, err := plannerAgent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	if err != nil {
		return err
	}
	res, err = session.CallTool(hmcp.WithHandoff(ctx, tamper(offer.Handoff, "write-patch", "drop-table")), params)
	if err != nil {
		return err
	}
	if !res.IsError {
		return errors.New("the tampered Handoff was not refused")
	}
	if _, err := carry.Status(res.Meta); !errors.Is(err, carry.ErrAbsent) {
		return errors.New("a status came back for an offer whose signature failed")
	}
	fmt.Fprintf(w, "planner: the tool refused it: %s\n", res.Content[0].(*mcp.TextContent).Text)
	return nil
}

// newAgents makes the two agents, each with its own ES256 key and each
// trusting the other's public key.
func newAgents() (p, c *handoff.Agent, err error) {
	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ck, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ps, err := handoff.NewSigner(pk, handoff.JWS, nil)
	if err != nil {
		return nil, nil, err
	}
	cs, err := handoff.NewSigner(ck, handoff.JWS, nil)
	if err != nil {
		return nil, nil, err
	}
	// One trust configuration for both: each AgentID bound to its key.
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{planner: {ps.Key()}, coder: {cs.Key()}})
	if err != nil {
		return nil, nil, err
	}
	if p, err = handoff.NewAgent(handoff.Config{ID: planner, Signer: ps, Trust: trust}); err != nil {
		return nil, nil, err
	}
	if c, err = handoff.NewAgent(handoff.Config{ID: coder, Signer: cs, Trust: trust}); err != nil {
		return nil, nil, err
	}
	return p, c, nil
}

// tamper returns h with from replaced by to in the payload of its JWS offer,
// keeping the original signature.
func tamper(h *handoff.Handoff, from, to string) *handoff.Handoff {
	parts := strings.Split(string(h.Offer.Octets), ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(from), []byte(to), 1))
	return &handoff.Handoff{Offer: handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(parts, "."))}}
}
