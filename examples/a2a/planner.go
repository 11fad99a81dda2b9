package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/agentproto/handoff"
	ha2a "github.com/agentproto/handoff/a2a"
)

// extensionsParam is the A2A-Extensions service parameter as the JSON-RPC
// binding of a2a-go v0.3 sends it: an HTTP header (a2asrv.ExtensionsMetaKey).
const extensionsParam = "X-A2A-Extensions"

// callMeta adds the planner's credentials and the extension it uses to
// every call.
type callMeta struct {
	a2aclient.PassthroughInterceptor
	token string
}

func (c callMeta) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + c.token}
	req.Meta[extensionsParam] = []string{ha2a.ExtensionURI}
	return ctx, nil
}

// plannerClient is the delegator: an A2A client that sends work with a
// Handoff and verifies the statuses that come back.
type plannerClient struct {
	agent  *handoff.Agent
	client *a2aclient.Client
	w      io.Writer
}

func (p *plannerClient) play(ctx context.Context) error {
	out, err := p.agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	if err != nil {
		return err
	}
	hop := out.Offer.Hop
	p.logf("planner: offering hop %s to %s: message/send in context %s, Handoff in metadata[%q]", hop, coder, dialog, ha2a.ExtensionURI)

	// The first message: the coder takes the work and finishes it; the
	// returned task carries each status in a status message.
	res, err := p.send(ctx, out.Handoff)
	if err != nil {
		return err
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		return fmt.Errorf("expected a task, got %T", res)
	}
	p.logf("planner: task %s is %s", task.ID, task.Status.State)
	var last []byte
	for _, m := range statusMessages(task) {
		if last, err = p.verify(ctx, m); err != nil {
			return err
		}
	}
	info, _, _ := p.agent.Hop(context.Background(), hop)
	p.logf("planner: hop %s is %s, resolved: %v", hop, info.State, info.Resolved)

	// The reply was lost, say: ask again with the identical octets (HC-37,
	// HC-52). The coder resends its last status unchanged.
	p.logf("planner: retransmission of hop %s with the identical Handoff", hop)
	h, err := p.agent.Retransmit(context.Background(), hop)
	if err != nil {
		return err
	}
	res, err = p.send(ctx, h)
	if err != nil {
		return err
	}
	msg, ok := res.(*a2a.Message)
	if !ok {
		return fmt.Errorf("expected a reply message, got %T", res)
	}
	resent, err := p.verify(ctx, msg)
	if err != nil {
		return err
	}
	if !bytes.Equal(resent, last) {
		return errors.New("the retransmission was answered with different status octets")
	}
	p.logf("planner: the retransmission got back the identical status octets (%d octets)", len(resent))

	// Someone on the path rewrites the task in the signed offer.
	p.logf("planner: a Handoff whose task was rewritten in transit")
	res, err = p.send(ctx, tamper(out.Handoff, "write-patch", "drop-table"))
	if err != nil {
		return err
	}
	task, ok = res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateRejected || task.Status.Message == nil {
		return fmt.Errorf("the tampered Handoff was not refused: %v", res)
	}
	if _, err := ha2a.Status(task.Status.Message.Metadata); !errors.Is(err, ha2a.ErrAbsent) {
		return errors.New("a status came back for an offer whose signature failed")
	}
	p.logf("planner: the coder refused it (task %s): %s", task.Status.State, messageText(task.Status.Message))
	return nil
}

// send sends a new message in the dialog with h in its metadata and the
// extension listed (HC-66). The message goes through the JSON encoding
// first, as it would be logged or relayed, to show that the Handoff
// survives it unchanged.
func (p *plannerClient) send(ctx context.Context, h *handoff.Handoff) (a2a.SendMessageResult, error) {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "fix the off-by-one in pager.go"})
	msg.ContextID = dialog
	msg.Metadata = map[string]any{}
	var err error
	if msg.Extensions, err = ha2a.AttachHandoff(msg.Metadata, msg.Extensions, h); err != nil {
		return nil, err
	}
	wire, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	var sent a2a.Message
	if err := json.Unmarshal(wire, &sent); err != nil {
		return nil, err
	}
	return p.client.SendMessage(ctx, &a2a.MessageSendParams{Message: &sent})
}

// verify takes the status from a message's metadata, verifies it against
// the offer this agent made, and returns its octets.
func (p *plannerClient) verify(ctx context.Context, m *a2a.Message) ([]byte, error) {
	octets, err := ha2a.Status(m.Metadata)
	if err != nil {
		return nil, err
	}
	sr, err := p.agent.HandleStatus(ctx, octets)
	if err != nil {
		return nil, fmt.Errorf("status refused: %w", err)
	}
	p.logf("planner: verified status %q signed by %s (%s); hop is %s", sr.Status().State, sr.Status().Iss, messageText(m), sr.State())
	return octets, nil
}

// statusMessages returns the agent's status messages of a task, oldest
// first: those moved to its history, then the current one.
func statusMessages(t *a2a.Task) []*a2a.Message {
	var out []*a2a.Message
	for _, m := range t.History {
		if m.Role == a2a.MessageRoleAgent && slices.Contains(m.Extensions, ha2a.ExtensionURI) {
			out = append(out, m)
		}
	}
	if t.Status.Message != nil {
		out = append(out, t.Status.Message)
	}
	return out
}

func (p *plannerClient) logf(format string, args ...any) {
	fmt.Fprintf(p.w, format+"\n", args...)
}

// tamper returns h with from replaced by to in the payload of its JWS
// offer, keeping the original signature.
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

func messageText(m *a2a.Message) string {
	var b strings.Builder
	for _, part := range m.Parts {
		if t, ok := part.(a2a.TextPart); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
