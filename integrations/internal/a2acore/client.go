package a2acore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/asking"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/observe"
)

// ClientConfig is the SDK-neutral part of the lines' ClientConfig.
type ClientConfig struct {
	Agent    *handoff.Agent
	Attempts int
	Now      func() time.Time
	Observe  *observe.Recorder
	Logger   *slog.Logger
}

// Client is the delegator's flow. It is safe for concurrent use.
type Client struct {
	cfg ClientConfig

	mu    sync.Mutex
	tasks map[handoff.HopID]string // the A2A task of each hop sent
	pkgs  hopwork.Packages         // the package of each hop sent, until it is resolved
}

// NewClient returns the delegator's flow for cfg: Attempts zero means 3,
// Now nil time.Now.
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
	return &Client{cfg: cfg, tasks: map[handoff.HopID]string{}}, nil
}

// carried is what a call's context carries for the interceptor.
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

func (c *carried) statuses() []*handoff.StatusResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// WithHandoff returns a context whose message send carries h.
func WithHandoff(ctx context.Context, h *handoff.Handoff) context.Context {
	var hop handoff.HopID
	if o, _, err := handoff.InspectUnverified(h.Offer, handoff.Limits{}); err == nil && o != nil {
		hop = o.Hop // our own offer: only used to index the task
	}
	return context.WithValue(ctx, keyCarried, &carried{h: h, hop: hop})
}

// WithCancel returns a context whose Cancel Task request carries a signed
// "canceled".
func WithCancel(ctx context.Context, canceled handoff.Signed) context.Context {
	return context.WithValue(ctx, keyCarried, &carried{status: &canceled})
}

// Statuses returns the results of the statuses handled for calls made with
// a context from WithHandoff or WithCancel, oldest first.
func Statuses(ctx context.Context) []*handoff.StatusResult {
	if c, ok := ctx.Value(keyCarried).(*carried); ok {
		return c.statuses()
	}
	return nil
}

// Kind is the kind of an outgoing request.
type Kind int

// The requests Before attaches to.
const (
	Other      Kind = iota
	Send            // a message send (SendMessage, SendStreamingMessage)
	CancelTask      // a Cancel Task request
)

// Request is an outgoing A2A request, as the interceptor of a line hands
// it to Before: Meta points to the metadata of the message sent (Send) or
// of the request (CancelTask), Exts to the message's extensions, Task is
// the task the message names ("" for none).
type Request struct {
	Kind Kind
	Meta *map[string]any
	Exts *[]string
	Task string
}

// Before attaches what the call's context carries to r, in place: the
// Handoff (WithHandoff) with the extension in the message's extensions,
// the hop's package beside it (OfferParams.Deliver's, kept for every send
// of the hop until it is resolved), and the call's trace context, or the
// "canceled" (WithCancel). A message that carries no Handoff and names the
// task of a hop sent through this client (as ADK's remote agent's answer
// to TASK_STATE_INPUT_REQUIRED does) continues that hop: it gets the
// hop's identical Handoff (Agent.Retransmit) and package, never a new
// offer. A message whose Handoff a framework's callback attached (as
// adkhop's does) is left as it is; its package is kept for such a
// continuation. Before reports whether the extension is to be activated
// in the call's A2A-Extensions service parameter: when it attached
// something, or when the message carries a Handoff. The context it
// returns is the call's, for After, which learns the hop's task.
func (c *Client) Before(ctx context.Context, r Request) (context.Context, bool, error) {
	cr, ok := ctx.Value(keyCarried).(*carried)
	switch {
	case r.Kind == Send && ok && cr.h != nil:
		if err := c.attach(r, cr.h, cr.hop); err != nil {
			return ctx, false, err
		}
	case r.Kind == CancelTask && ok && cr.status != nil:
		if *r.Meta == nil {
			*r.Meta = map[string]any{}
		}
		carry.AttachStatus(*r.Meta, *cr.status)
	case r.Kind == Send && !ok:
		hop, known := c.framework(*r.Meta, r.Task)
		switch {
		case hop != "":
		case !known:
			return ctx, false, nil
		default:
			if hop, known = c.HopOf(r.Task); !known {
				return ctx, false, nil
			}
			h, err := c.cfg.Agent.Retransmit(ctx, hop)
			if err != nil {
				return ctx, false, err
			}
			if err := c.attach(r, h, hop); err != nil {
				return ctx, false, err
			}
		}
		cr = &carried{hop: hop}
		ctx, ok = context.WithValue(ctx, keyCarried, cr), true
	default:
		return ctx, false, nil
	}
	if r.Kind == Send {
		observe.Inject(ctx, *r.Meta) // beside the Handoff, not in it: unsigned
	}
	if ok {
		cr.mu.Lock()
		cr.attached = true
		cr.mu.Unlock()
	}
	return ctx, true, nil
}

// attach puts h, the extension and the package of hop in the message of r.
func (c *Client) attach(r Request, h *handoff.Handoff, hop handoff.HopID) error {
	if *r.Meta == nil {
		*r.Meta = map[string]any{}
	}
	exts, err := carry.AttachHandoff(*r.Meta, *r.Exts, h)
	if err != nil {
		return err
	}
	*r.Exts = exts
	if pkg := c.pkgs.Of(hop); pkg != nil {
		carry.AttachPackage(*r.Meta, *pkg)
	}
	return nil
}

// framework looks at a message the call's context carries nothing for: a
// Handoff a framework's callback attached gives its hop (our own offer,
// decoded only to index the task; its package is kept for the hop); no
// Handoff, on a task of a hop this client sent, is that hop's
// continuation (hop "", known true); anything else is none of ours.
func (c *Client) framework(meta map[string]any, task string) (handoff.HopID, bool) {
	octets, err := carry.Handoff(meta)
	if errors.Is(err, carry.ErrAbsent) {
		_, known := c.HopOf(task)
		return "", known && task != ""
	}
	if err != nil {
		return "", false
	}
	h, _, err := handoff.ParseHandoff(octets, handoff.Limits{})
	if err != nil {
		return "", false
	}
	o, _, err := handoff.InspectUnverified(h.Offer, handoff.Limits{})
	if err != nil || o == nil {
		return "", false
	}
	if pkg, err := carry.Package(meta); err == nil {
		c.pkgs.Keep(o.Hop, &pkg)
	}
	return o.Hop, true
}

// After hands every status in a response to Agent.HandleStatus: metas are
// the metadata of the response's agent messages, task the task it names
// (""). A status that fails verification changes nothing; its result says
// why.
func (c *Client) After(ctx context.Context, task string, metas []map[string]any) error {
	cr, _ := ctx.Value(keyCarried).(*carried)
	if cr != nil && cr.hop != "" && task != "" {
		c.mu.Lock()
		if _, ok := c.tasks[cr.hop]; !ok {
			c.tasks[cr.hop] = task
		}
		c.mu.Unlock()
	}
	seen := map[string]bool{}
	for _, meta := range metas {
		octets, err := carry.Status(meta)
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
	if cr != nil && cr.hop != "" && len(seen) > 0 {
		c.pkgs.Settle(ctx, c.cfg.Agent, cr.hop) // a resolved hop is sent no more
	}
	return nil
}

// TaskOf returns the A2A task a hop sent through this client runs in.
func (c *Client) TaskOf(hop handoff.HopID) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tasks[hop]
	return t, ok
}

// HopOf returns the hop whose task is task, among the hops sent through
// this client: the hop a message that continues the task belongs to.
func (c *Client) HopOf(task string) (handoff.HopID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for hop, t := range c.tasks {
		if t == task {
			return hop, true
		}
	}
	return "", false
}

// Delivery is the SDK-neutral part of the lines' Delivery.
type Delivery struct {
	Hop      handoff.HopID
	Offer    *handoff.Outgoing
	Statuses []*handoff.StatusResult
	Attempts int
	State    state.State
	Refused  bool
	Reason   reason.Code
}

// Sender sends one message of a delivery, in a context that carries its
// Handoff, on the dialog of the offer; it returns the task state of the
// result, "" for a message.
type Sender func(ctx context.Context, dialog string) (string, error)

// Send makes an offer with p, whose Dialog defaults to contextID, the
// message's, and sends it with send. A call that has not answered by the
// next instant of asking.Backoff is abandoned and the identical Handoff
// sent again (HC-37, HC-52); after the last attempt the hop stays
// unresolved and the context error is returned (HC-40). However the
// delivery ended, the Delivery says it (State, Refused, Reason).
func (c *Client) Send(ctx context.Context, contextID string, p handoff.OfferParams, send Sender) (*Delivery, error) {
	if p.Dialog == "" && p.From == nil {
		if contextID == "" {
			return nil, fmt.Errorf("%w: the message names no context (Message.ContextID) and OfferParams.Dialog is empty: the offer's dialog is one of them", handoff.ErrArgument)
		}
		p.Dialog = contextID
	}
	out, err := c.cfg.Agent.Offer(ctx, p)
	if err != nil {
		return nil, err
	}
	d := &Delivery{Hop: out.Offer.Hop, Offer: out}
	c.pkgs.Keep(out.Offer.Hop, out.Delivered)
	var last string
	err = asking.Retransmit(ctx, out.Offer, c.cfg.Attempts, c.cfg.Now, func(actx context.Context) error {
		h := out.Handoff
		if d.Attempts > 0 {
			if h, err = c.cfg.Agent.Retransmit(ctx, out.Offer.Hop); err != nil {
				return err
			}
		}
		d.Attempts++
		var sts []*handoff.StatusResult
		last, sts, err = c.deliver(actx, h, out.Offer.Hop, func(ctx context.Context) (string, error) { return send(ctx, out.Offer.Dialog) })
		d.Statuses = append(d.Statuses, sts...)
		return err
	})
	if serr := c.settle(context.WithoutCancel(ctx), d, last); err == nil {
		err = serr
	}
	c.pkgs.Settle(context.WithoutCancel(ctx), c.cfg.Agent, d.Hop)
	return d, err
}

// deliver runs send with h for the interceptor to attach, and returns what
// send returned, the statuses handled, and ErrNotIntercepted when the
// interceptor did not run.
func (c *Client) deliver(ctx context.Context, h *handoff.Handoff, hop handoff.HopID, send func(context.Context) (string, error)) (string, []*handoff.StatusResult, error) {
	cr := &carried{h: h, hop: hop}
	ts, err := send(context.WithValue(ctx, keyCarried, cr))
	if !cr.wasAttached() {
		err = notIntercepted(err)
	}
	return ts, cr.statuses(), err
}

// settle fills the outcome of d from the delegator's table and the last
// task state: a task rejected with no status is refused too (HC-30).
func (c *Client) settle(ctx context.Context, d *Delivery, ts string) error {
	s, err := hopwork.Settle(ctx, c.cfg.Agent, d.Hop)
	if err != nil {
		return err
	}
	d.State, d.Refused, d.Reason = s.State, s.Refused || ts == Rejected, s.Reason
	return nil
}

// Retransmit sends the identical Handoff of an offered hop again with
// send, to learn its last status (HC-37, HC-52).
func (c *Client) Retransmit(ctx context.Context, hop handoff.HopID, send func(context.Context) (string, error)) ([]*handoff.StatusResult, error) {
	h, err := c.cfg.Agent.Retransmit(ctx, hop)
	if err != nil {
		return nil, err
	}
	_, sts, err := c.deliver(ctx, h, hop, send)
	c.pkgs.Settle(context.WithoutCancel(ctx), c.cfg.Agent, hop)
	return sts, err
}

// Cancel signs a "canceled" for hop (Agent.Cancel) and sends it with
// cancel, in a Cancel Task request for the hop's task (HC-28, HC-66).
func (c *Client) Cancel(ctx context.Context, hop handoff.HopID, cancel func(ctx context.Context, task string) error) (handoff.Notice, error) {
	task, ok := c.TaskOf(hop)
	if !ok {
		return handoff.Notice{}, fmt.Errorf("%w: no A2A task is known for hop %s", handoff.ErrArgument, hop)
	}
	n, err := c.cfg.Agent.Cancel(ctx, hop)
	if err != nil {
		return n, err
	}
	cr := &carried{status: &n.Status}
	err = cancel(context.WithValue(ctx, keyCarried, cr), task)
	if !cr.wasAttached() {
		err = notIntercepted(err)
	}
	return n, err
}

// notIntercepted is ErrNotIntercepted, with what the server answered to the
// request that went without the handoff.
func notIntercepted(answer error) error {
	if answer == nil {
		return ErrNotIntercepted
	}
	return fmt.Errorf("%w (the server answered: %w)", ErrNotIntercepted, answer)
}

// cancelWaits are the pauses between the tries of a Cancel Task request
// that CancelInterrupted makes: five tries within 0.62 s.
var cancelWaits = [...]time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond}

// CancelInterrupted sends a Cancel Task request (send) and sends it again
// while the SDK answers with one of retry (its "task cannot be canceled"
// and internal errors) and the task, as state reads it, is still
// interrupted (TASK_STATE_INPUT_REQUIRED or TASK_STATE_AUTH_REQUIRED).
// Both a2a-go lines answer so a Cancel Task request that arrives while
// the task's execution winds down: after the executor set the interrupted
// state and the reply went out, before its Execute returned. The
// execution takes the cancel on its own event queue and resolves to the
// interrupted state, so the cancel is dropped (a2a-go's local task
// manager, handleCancelWithConcurrentRun, names it as a known gap). Once
// the execution has ended, the same request cancels the task. The
// "canceled" it carries is the same signed octets each time; the
// delegate checks it again as a retransmission (HC-39).
func CancelInterrupted(ctx context.Context, retry []error, state func(context.Context) (string, error), send func(context.Context) error) error {
	err := send(ctx)
	for _, wait := range cancelWaits {
		if err == nil || !slices.ContainsFunc(retry, func(e error) bool { return errors.Is(err, e) }) {
			return err
		}
		s, serr := state(ctx)
		if serr != nil || (s != InputRequired && s != AuthRequired) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		err = send(ctx)
	}
	return err
}
