package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	hmcp "github.com/agentproto/handoff/mcp"
)

// plannerClient is the delegator: an MCP client that calls the coder's tool
// with a Handoff and verifies the status that comes back.
type plannerClient struct {
	agent   *handoff.Agent
	session *mcp.ClientSession
	w       io.Writer
}

func (p *plannerClient) play(ctx context.Context, coderSrv *coderServer) error {
	out, err := p.agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	if err != nil {
		return err
	}
	hop := out.Offer.Hop
	p.logf("planner: offering hop %s to %s: tools/call write_patch, Handoff in params._meta[%q]", hop, coder, hmcp.MetaKey)

	// The first call: the coder checks the offer and takes the work.
	first, err := p.call(ctx, out.Handoff)
	if err != nil {
		return err
	}
	accepted, err := p.verify(ctx, first)
	if err != nil {
		return err
	}

	// No news yet: ask again with the identical octets, never a re-signed
	// hop (HC-37, HC-52). The coder resends its last status unchanged.
	p.logf("planner: retransmission of hop %s with the identical Handoff", hop)
	h, err := p.agent.Retransmit(context.Background(), hop)
	if err != nil {
		return err
	}
	again, err := p.call(ctx, h)
	if err != nil {
		return err
	}
	resent, err := p.verify(ctx, again)
	if err != nil {
		return err
	}
	if !bytes.Equal(resent, accepted) {
		return errors.New("the retransmission was answered with different status octets")
	}
	p.logf("planner: the retransmission got back the identical status octets (%d octets)", len(resent))

	// The coder finishes; the planner learns of it by asking again.
	if err := coderSrv.finishWork(ctx); err != nil {
		return err
	}
	p.logf("planner: retransmission of hop %s to learn the outcome", hop)
	later, err := p.call(ctx, h)
	if err != nil {
		return err
	}
	if _, err := p.verify(ctx, later); err != nil {
		return err
	}
	info, _, _ := p.agent.Hop(context.Background(), hop)
	p.logf("planner: hop %s is %s, resolved: %v", hop, info.State, info.Resolved)

	// Someone on the path rewrites the task in the signed offer.
	p.logf("planner: a Handoff whose task was rewritten in transit")
	res, err := p.call(ctx, tamper(out.Handoff, "write-patch", "drop-table"))
	if err != nil {
		return err
	}
	if !res.IsError {
		return errors.New("the tampered Handoff was not refused")
	}
	if _, err := hmcp.Status(res.Meta); !errors.Is(err, hmcp.ErrAbsent) {
		return errors.New("a status came back for an offer whose signature failed")
	}
	p.logf("planner: the tool refused it: %s", resultText(res))
	return nil
}

// call calls write_patch with h in params._meta (HC-67).
func (p *plannerClient) call(ctx context.Context, h *handoff.Handoff) (*mcp.CallToolResult, error) {
	meta := mcp.Meta{}
	if err := hmcp.AttachHandoff(meta, h); err != nil {
		return nil, err
	}
	return p.session.CallTool(ctx, &mcp.CallToolParams{
		Meta:      meta,
		Name:      "write_patch",
		Arguments: patchArgs{Dialog: dialog, Change: "fix the off-by-one in pager.go"},
	})
}

// verify takes the status from the result's _meta, verifies it against the
// offer this agent made, and returns its octets.
func (p *plannerClient) verify(ctx context.Context, res *mcp.CallToolResult) ([]byte, error) {
	if res.IsError {
		return nil, fmt.Errorf("tool error: %s", resultText(res))
	}
	octets, err := hmcp.Status(res.Meta)
	if err != nil {
		return nil, err
	}
	sr, err := p.agent.HandleStatus(ctx, octets)
	if err != nil {
		return nil, fmt.Errorf("status refused: %w", err)
	}
	p.logf("planner: verified status %q signed by %s (%s); hop is %s", sr.Status().State, sr.Status().Iss, resultText(res), sr.State())
	return octets, nil
}

func (p *plannerClient) logf(format string, args ...any) {
	fmt.Fprintf(p.w, format+"\n", args...)
}

// tamper returns h with from replaced by to in the payload of its JWS offer,
// keeping the original signature.
func tamper(h *handoff.Handoff, from, to string) *handoff.Handoff {
	parts := strings.Split(string(h.Offer.Octets), ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		panic(err)
	}
	payload = bytes.Replace(payload, []byte(from), []byte(to), 1)
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return &handoff.Handoff{Offer: handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(parts, "."))}}
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
