package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	hmcp "github.com/agentproto/handoff/mcp"
)

// patchArgs are the arguments of the write_patch tool. The Handoff does not
// travel here but in params._meta.
type patchArgs struct {
	Dialog string `json:"dialog" jsonschema:"the dialog this call belongs to"`
	Change string `json:"change" jsonschema:"the change to make"`
}

// coderServer is the delegate: an MCP server whose tool takes work only
// with a Handoff that passes the draft's checks.
type coderServer struct {
	agent  *handoff.Agent
	server *mcp.Server
	w      io.Writer
	// inMemoryPeer is the AgentID of the one client the in-memory
	// transport connects.
	inMemoryPeer handoff.AgentID

	mu    sync.Mutex
	taken []*handoff.Received // work accepted and not yet finished
}

func newCoderServer(agent *handoff.Agent, inMemoryPeer handoff.AgentID, w io.Writer) *coderServer {
	cs := &coderServer{agent: agent, w: w, inMemoryPeer: inMemoryPeer}
	cs.server = mcp.NewServer(&mcp.Implementation{Name: "coder", Version: "v1.0.0"}, nil)
	mcp.AddTool(cs.server, &mcp.Tool{
		Name:        "write_patch",
		Description: "Writes a patch. Requires a signed handoff in _meta under " + hmcp.MetaKey + ".",
	}, cs.writePatch)
	return cs
}

// peer is the AgentID the host protocol authenticated the caller as. Only
// that party is sent the last status of a retransmitted hop (HC-39).
func (cs *coderServer) peer(req *mcp.CallToolRequest) handoff.AgentID {
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return handoff.AgentID(req.Extra.TokenInfo.UserID)
	}
	return cs.inMemoryPeer
}

// writePatch handles tools/call write_patch.
func (cs *coderServer) writePatch(ctx context.Context, req *mcp.CallToolRequest, args patchArgs) (*mcp.CallToolResult, any, error) {
	octets, err := hmcp.Handoff(req.Params.Meta)
	if err != nil {
		cs.logf("coder: call without a usable handoff: %v", err)
		return toolError("no handoff: %v", err), nil, nil
	}
	in, err := cs.agent.Receive(ctx, octets, handoff.Host{Dialog: args.Dialog, Peer: cs.peer(req)})
	if err != nil {
		// The replay store could not answer: refuse, without a status.
		return nil, nil, fmt.Errorf("refused: %w", err)
	}

	switch {
	case in.Retransmission():
		// Never processed again (HC-38): answer with what was sent before.
		if last, ok := in.LastStatus(); ok {
			cs.logf("coder: hop %s is a retransmission, not processed again; resending the last status unchanged", in.Offer().Hop)
			return withStatus(last, "retransmission: last status resent"), nil, nil
		}
		if in.OwesAccepted() {
			st, err := cs.agent.Reply(ctx, in, handoff.Accepted, handoff.ReplyOptions{})
			if err != nil {
				return nil, nil, err
			}
			return withStatus(st, "accepted"), nil, nil
		}
		return textResult("retransmission: not decided yet"), nil, nil

	case in.Accepted():
		st, err := cs.agent.Reply(ctx, in, handoff.Accepted, handoff.ReplyOptions{})
		if err != nil {
			return nil, nil, err
		}
		cs.mu.Lock()
		cs.taken = append(cs.taken, in)
		cs.mu.Unlock()
		cs.logf("coder: hop %s from %s passed every check (chain %s); took the work: %q",
			in.Offer().Hop, in.Offer().Iss, in.Chain(), args.Change)
		return withStatus(st, "accepted"), nil, nil
	}

	// A failed check. The reason code goes back; the detail stays in the
	// coder's log (HC-05, HC-65).
	cs.logf("coder: rejected: %s (%s)", in.Reason(), in.Detail())
	res := toolError("rejected: %s", in.Reason())
	if in.StatusDue() {
		st, err := cs.agent.Reply(ctx, in, handoff.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
		if err != nil {
			return nil, nil, err
		}
		hmcp.AttachStatus(res.Meta, st)
	}
	return res, nil, nil
}

// finishWork does the work taken so far and records "completed" as each
// hop's last status. A tool call has already been answered, so the
// delegator learns of it when it asks again.
func (cs *coderServer) finishWork(ctx context.Context) error {
	cs.mu.Lock()
	taken := cs.taken
	cs.taken = nil
	cs.mu.Unlock()
	for _, in := range taken {
		if _, err := cs.agent.Reply(ctx, in, handoff.Completed, handoff.ReplyOptions{Effect: handoff.EffectFull}); err != nil {
			return err
		}
		cs.logf("coder: work for hop %s done; \"completed\" is now its last status", in.Offer().Hop)
	}
	return nil
}

func (cs *coderServer) logf(format string, args ...any) {
	fmt.Fprintf(cs.w, format+"\n", args...)
}

// withStatus is a result that carries a signed status in its _meta (HC-67).
func withStatus(st handoff.Signed, text string) *mcp.CallToolResult {
	res := textResult(text)
	hmcp.AttachStatus(res.Meta, st)
	return res
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: mcp.Meta{}, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func toolError(format string, args ...any) *mcp.CallToolResult {
	res := textResult(fmt.Sprintf(format, args...))
	res.IsError = true
	return res
}
