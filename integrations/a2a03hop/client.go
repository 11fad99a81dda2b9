package a2a03hop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/asking"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/observe"
)

// ErrNotIntercepted is the error of Send, Retransmit and Cancel when the
// A2A client they were given does not have this Client among its
// interceptors (a2aclient.WithInterceptors): the Handoff or the "canceled"
// was not attached to the request, whatever the server answered.
var ErrNotIntercepted = errors.New("handoff: the A2A client's interceptors do not include this handoff Client: nothing was attached")

// ExtensionsParam is the A2A-Extensions service parameter as the JSON-RPC
// binding of a2a-go v0.3 sends it, an HTTP header.
const ExtensionsParam = a2asrv.ExtensionsMetaKey

// notIntercepted is ErrNotIntercepted, with what the server answered to the
// request that went without the handoff.
func notIntercepted(answer error) error {
	if answer == nil {
		return ErrNotIntercepted
	}
	return fmt.Errorf("%w (the server answered: %w)", ErrNotIntercepted, answer)
}

// ClientConfig configures the delegator's side.
type ClientConfig struct {
	// Agent is the delegator. Required.
	Agent *handoff.Agent
	// Attempts is how many times Send asks again when a call times out
	// (asking.Backoff). Zero means 3; negative means never.
	Attempts int
	// Now is the clock of the retransmission schedule; nil means time.Now.
	Now func() time.Time
	// Observe records spans and counters; nil records nothing.
	Observe *observe.Recorder
	// Logger, when set, hears of each status handled: the outcome as the Agent decided
	// it (a slog.LogValuer), with the transport. Nil is silent. Give the
	// Agent a logger too (handoff.Config.Logger) for its own decisions.
	Logger *slog.Logger
}

// Client is the delegator's a2aclient.CallInterceptor. It is safe for
// concurrent use.
type Client struct {
	cfg ClientConfig

	mu    sync.Mutex
	tasks map[handoff.HopID]a2a.TaskID // the A2A task of each hop sent
}

var _ a2aclient.CallInterceptor = (*Client)(nil)

// NewClient returns the delegator's side for cfg. Add it to an A2A client
// with a2aclient.WithInterceptors.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Agent == nil {
		return nil, fmt.Errorf("%w: ClientConfig.Agent is required", handoff.ErrConfig)
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg, tasks: map[handoff.HopID]a2a.TaskID{}}, nil
}

type carried struct {
	h      *handoff.Handoff
	status *handoff.Signed // a "canceled" for a Cancel Task request
	hop    handoff.HopID

	mu       sync.Mutex
	got      []*handoff.StatusResult
	attached bool // Before put the element in a request
}

func (c *carried) wasAttached() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attached
}

// WithHandoff returns a context whose message/send (or message/stream)
// carries h in Message.metadata (HC-66). The statuses in the response are
// handed to Agent.HandleStatus; Statuses returns their results.
func WithHandoff(ctx context.Context, h *handoff.Handoff) context.Context {
	var hop handoff.HopID
	if o, _, err := handoff.InspectUnverified(h.Offer, handoff.Limits{}); err == nil && o != nil {
		hop = o.Hop // our own offer: only used to index the task
	}
	return withHandoff(ctx, h, hop)
}

// withHandoff is WithHandoff for a Handoff whose hop the caller knows, as
// Send and Retransmit do: its offer is not decoded again.
func withHandoff(ctx context.Context, h *handoff.Handoff, hop handoff.HopID) context.Context {
	return context.WithValue(ctx, keyHandoff, &carried{h: h, hop: hop})
}

// WithCancel returns a context whose Cancel Task request carries a signed
// "canceled" in its metadata (HC-66).
func WithCancel(ctx context.Context, canceled handoff.Signed) context.Context {
	return context.WithValue(ctx, keyHandoff, &carried{status: &canceled})
}

// Statuses returns the results of the statuses handled for calls made with
// a context from WithHandoff or WithCancel, oldest first.
func Statuses(ctx context.Context) []*handoff.StatusResult {
	if c, ok := ctx.Value(keyHandoff).(*carried); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.Clone(c.got)
	}
	return nil
}

// Before implements a2aclient.CallInterceptor. It changes the caller's
// message in place: its metadata gets the Handoff, its extensions the URI.
func (c *Client) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	cr, ok := ctx.Value(keyHandoff).(*carried)
	if !ok {
		return ctx, nil
	}
	switch p := req.Payload.(type) {
	case *a2a.MessageSendParams:
		if cr.h == nil || p == nil || p.Message == nil {
			return ctx, nil
		}
		if p.Message.Metadata == nil {
			p.Message.Metadata = map[string]any{}
		}
		exts, err := carry.AttachHandoff(p.Message.Metadata, p.Message.Extensions, cr.h)
		if err != nil {
			return ctx, err
		}
		observe.Inject(ctx, p.Message.Metadata) // beside the Handoff, not in it: unsigned
		p.Message.Extensions = exts
		cr.mu.Lock()
		cr.attached = true
		cr.mu.Unlock()
	case *a2a.TaskIDParams:
		if cr.status == nil || p == nil {
			return ctx, nil
		}
		if p.Metadata == nil {
			p.Metadata = map[string]any{}
		}
		carry.AttachStatus(p.Metadata, *cr.status)
		cr.mu.Lock()
		cr.attached = true
		cr.mu.Unlock()
	default:
		return ctx, nil
	}
	if !slices.Contains(req.Meta[ExtensionsParam], ExtensionURI) {
		req.Meta[ExtensionsParam] = append(req.Meta[ExtensionsParam], ExtensionURI)
	}
	return ctx, nil
}

// After implements a2aclient.CallInterceptor: every status in the response
// goes to Agent.HandleStatus. A status that fails verification changes
// nothing; its result says why.
func (c *Client) After(ctx context.Context, resp *a2aclient.Response) error {
	cr, _ := ctx.Value(keyHandoff).(*carried)
	var msgs []*a2a.Message
	var task a2a.TaskID
	if resp.Err != nil {
		return nil // nothing came back; the transport's error stands
	}
	switch p := resp.Payload.(type) {
	case *a2a.Task:
		if p == nil {
			return nil
		}
		task = p.ID
		for _, m := range p.History {
			if m != nil && m.Role == a2a.MessageRoleAgent {
				msgs = append(msgs, m)
			}
		}
		msgs = append(msgs, p.Status.Message)
	case *a2a.TaskStatusUpdateEvent:
		if p == nil {
			return nil
		}
		task = p.TaskID
		msgs = append(msgs, p.Status.Message)
	case *a2a.Message:
		if p != nil && p.Role == a2a.MessageRoleAgent {
			msgs = append(msgs, p)
		}
	}
	if cr != nil && cr.hop != "" && task != "" {
		c.mu.Lock()
		if _, ok := c.tasks[cr.hop]; !ok {
			c.tasks[cr.hop] = task
		}
		c.mu.Unlock()
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		if m == nil {
			continue
		}
		octets, err := carry.Status(m.Metadata)
		if err != nil || seen[string(octets)] {
			continue
		}
		seen[string(octets)] = true
		sr, err := c.cfg.Agent.HandleStatus(ctx, octets)
		c.cfg.Observe.StatusReceived(ctx, Transport, sr, err)
		hopwork.LogStatus(ctx, c.cfg.Logger, Transport, sr, err)
		if err != nil {
			return err
		}
		if cr != nil {
			cr.mu.Lock()
			cr.got = append(cr.got, sr)
			cr.mu.Unlock()
		}
	}
	return nil
}

// TaskOf returns the A2A task a hop sent through this client runs in.
func (c *Client) TaskOf(hop handoff.HopID) (a2a.TaskID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tasks[hop]
	return t, ok
}

// Delivery is the outcome of Send.
type Delivery struct {
	Hop      handoff.HopID
	Offer    *handoff.Outgoing
	Result   a2a.SendMessageResult
	Statuses []*handoff.StatusResult
	// Attempts is the number of times the Handoff was sent.
	Attempts int

	// State is the hop's state in the delegator's table once the delivery
	// ended (Agent.Hop): state.Offered while no verified status came
	// back, else the state the verified statuses set (HC-55, HC-56).
	State state.State
	// Refused reports that the delegate refused the offer: with a verified
	// "rejected" (State state.Rejected, Reason its reason code), or with
	// TASK_STATE_REJECTED and no status, as for an offer whose signature
	// did not verify (HC-30; Reason empty).
	Refused bool
	Reason  reason.Code
}

// settle fills the outcome of d from the delegator's table and the last
// task state.
func (c *Client) settle(ctx context.Context, d *Delivery) error {
	s, err := hopwork.Settle(ctx, c.cfg.Agent, d.Hop)
	if err != nil {
		return err
	}
	d.State, d.Refused, d.Reason = s.State, s.Refused, s.Reason
	if t, ok := d.Result.(*a2a.Task); ok && t.Status.State == a2a.TaskStateRejected {
		d.Refused = true
	}
	return nil
}

// Send makes an offer with p (its Dialog defaults to the message's
// contextId) and sends msg with it through cl, whose interceptors must
// include c. A call that has not answered by the next instant of
// asking.Backoff is abandoned and the identical Handoff is sent again in
// a copy of msg (HC-37, HC-52); after the last attempt the hop stays
// unresolved and the context error is returned (HC-40).
func (c *Client) Send(ctx context.Context, cl *a2aclient.Client, msg *a2a.Message, p handoff.OfferParams) (*Delivery, error) {
	if p.Dialog == "" && p.From == nil {
		p.Dialog = msg.ContextID
	}
	if msg.ContextID == "" {
		msg.ContextID = p.Dialog
	}
	out, err := c.cfg.Agent.Offer(ctx, p)
	if err != nil {
		return nil, err
	}
	if msg.ContextID == "" {
		msg.ContextID = out.Offer.Dialog
	}
	d := &Delivery{Hop: out.Offer.Hop, Offer: out}
	err = c.retry(ctx, out.Offer, func(actx context.Context) error {
		h := out.Handoff
		if d.Attempts > 0 {
			if h, err = c.cfg.Agent.Retransmit(ctx, out.Offer.Hop); err != nil {
				return err
			}
		}
		d.Attempts++
		actx = withHandoff(actx, h, out.Offer.Hop)
		m := *msg
		m.ID = a2a.NewMessageID()
		m.Metadata = clone(msg.Metadata)
		res, err := cl.SendMessage(actx, &a2a.MessageSendParams{Message: &m})
		d.Statuses = append(d.Statuses, Statuses(actx)...)
		d.Result = res
		if !actx.Value(keyHandoff).(*carried).wasAttached() {
			return notIntercepted(err)
		}
		return err
	})
	if err != nil {
		return d, err
	}
	return d, c.settle(ctx, d)
}

// Retransmit sends the identical Handoff of an offered hop again in a copy
// of msg, to learn its last status (HC-37, HC-52).
func (c *Client) Retransmit(ctx context.Context, cl *a2aclient.Client, msg *a2a.Message, hop handoff.HopID) (a2a.SendMessageResult, []*handoff.StatusResult, error) {
	h, err := c.cfg.Agent.Retransmit(ctx, hop)
	if err != nil {
		return nil, nil, err
	}
	actx := withHandoff(ctx, h, hop)
	m := *msg
	m.ID = a2a.NewMessageID()
	m.Metadata = clone(msg.Metadata)
	res, err := cl.SendMessage(actx, &a2a.MessageSendParams{Message: &m})
	if !actx.Value(keyHandoff).(*carried).wasAttached() {
		err = notIntercepted(err)
	}
	return res, Statuses(actx), err
}

// Cancel signs a "canceled" for hop (Agent.Cancel) and sends it in a Cancel
// Task request for the hop's task (HC-28, HC-66). The hop stays unresolved
// until a verified "completed" or "failed" arrives or an outcome is observed
// (HC-41).
func (c *Client) Cancel(ctx context.Context, cl *a2aclient.Client, hop handoff.HopID) (*a2a.Task, handoff.Notice, error) {
	task, ok := c.TaskOf(hop)
	if !ok {
		return nil, handoff.Notice{}, fmt.Errorf("%w: no A2A task is known for hop %s", handoff.ErrArgument, hop)
	}
	n, err := c.cfg.Agent.Cancel(ctx, hop)
	if err != nil {
		return nil, n, err
	}
	cctx := WithCancel(ctx, n.Status)
	t, err := cl.CancelTask(cctx, &a2a.TaskIDParams{ID: task})
	if !cctx.Value(keyHandoff).(*carried).wasAttached() {
		err = notIntercepted(err)
	}
	return t, n, err
}

func (c *Client) retry(ctx context.Context, o *handoff.Offer, send func(context.Context) error) error {
	return asking.Retransmit(ctx, o, c.cfg.Attempts, c.cfg.Now, send)
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
