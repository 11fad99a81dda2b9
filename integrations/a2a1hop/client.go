package a2a1hop

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/observe"
)

// ExtensionsParam is the A2A-Extensions service parameter that activates
// the extension for a call (A2A 1.0; an HTTP header in the JSON-RPC and
// HTTP+JSON bindings).
const ExtensionsParam = a2a.SvcParamExtensions

// ErrNotIntercepted is the error of Send, Retransmit and Cancel when the
// A2A client they were given does not have this Client among its
// interceptors (a2aclient.WithCallInterceptors): the Handoff or the
// "canceled" was not attached to the request, whatever the server answered.
var ErrNotIntercepted = a2acore.ErrNotIntercepted

// ClientConfig configures the delegator's side.
type ClientConfig struct {
	// Agent is the delegator. Required.
	Agent *handoff.Agent
	// Attempts is how many times Send asks again when a call times out
	// (asking.Backoff). Zero means 3; negative means never.
	Attempts int
	// Now is the clock of the retransmission schedule; nil means time.Now.
	Now func() time.Time
	// SendConfig, when set, is the configuration of every SendMessage that
	// Send and Retransmit make, for example ReturnImmediately to have the
	// task back while it works.
	SendConfig *a2a.SendMessageConfig
	// Observe records spans and counters; nil records nothing.
	Observe *observe.Recorder
	// Logger, when set, hears of each status handled: the outcome as the
	// Agent decided it (a slog.LogValuer), with the transport. Nil is
	// silent.
	Logger *slog.Logger
}

// Client is the delegator's a2aclient.CallInterceptor. It is safe for
// concurrent use.
type Client struct {
	cfg  ClientConfig
	core *a2acore.Client
}

var _ a2aclient.CallInterceptor = (*Client)(nil)

// NewClient returns the delegator's side for cfg. Add it to an A2A client
// with a2aclient.WithCallInterceptors.
func NewClient(cfg ClientConfig) (*Client, error) {
	core, err := a2acore.NewClient(a2acore.ClientConfig{Agent: cfg.Agent, Attempts: cfg.Attempts, Now: cfg.Now,
		Observe: cfg.Observe, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, core: core}, nil
}

// WithHandoff returns a context whose SendMessage (or
// SendStreamingMessage) carries h in Message.metadata (HC-66). The
// statuses in the response are handed to Agent.HandleStatus; Statuses
// returns their results.
func WithHandoff(ctx context.Context, h *handoff.Handoff) context.Context {
	return a2acore.WithHandoff(ctx, h)
}

// WithCancel returns a context whose Cancel Task request carries a signed
// "canceled" in its metadata (HC-66).
func WithCancel(ctx context.Context, canceled handoff.Signed) context.Context {
	return a2acore.WithCancel(ctx, canceled)
}

// Statuses returns the results of the statuses handled for calls made with
// a context from WithHandoff or WithCancel, oldest first.
func Statuses(ctx context.Context) []*handoff.StatusResult { return a2acore.Statuses(ctx) }

// Before implements a2aclient.CallInterceptor. It changes the caller's
// request in place: the message's metadata gets the Handoff, its
// extensions the URI, and the call's A2A-Extensions service parameter
// activates the extension. A message whose Handoff a framework's callback
// attached (as adkhop's does) gets the activation and the trace context.
func (c *Client) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	var r a2acore.Request
	switch p := req.Payload.(type) {
	case *a2a.SendMessageRequest:
		if p != nil && p.Message != nil {
			r = a2acore.Request{Kind: a2acore.Send, Meta: &p.Message.Metadata, Exts: &p.Message.Extensions, Task: string(p.Message.TaskID)}
		}
	case *a2a.CancelTaskRequest:
		if p != nil {
			r = a2acore.Request{Kind: a2acore.CancelTask, Meta: &p.Metadata}
		}
	}
	ctx, activate, err := c.core.Before(ctx, r)
	if activate {
		if req.ServiceParams == nil {
			req.ServiceParams = a2aclient.ServiceParams{}
		}
		req.ServiceParams.Append(ExtensionsParam, ExtensionURI)
	}
	return ctx, nil, err
}

// After implements a2aclient.CallInterceptor: every status in the response
// goes to Agent.HandleStatus. A status that fails verification changes
// nothing; its result says why.
func (c *Client) After(ctx context.Context, resp *a2aclient.Response) error {
	if resp.Err != nil {
		return nil // nothing came back; the transport's error stands
	}
	var task a2a.TaskID
	var ms []*a2a.Message
	switch p := resp.Payload.(type) {
	case *a2a.Task:
		if p != nil {
			task, ms = p.ID, append(append(ms, p.History...), p.Status.Message)
		}
	case *a2a.TaskStatusUpdateEvent:
		if p != nil {
			task, ms = p.TaskID, append(ms, p.Status.Message)
		}
	case *a2a.Message:
		ms = append(ms, p)
	}
	return c.core.After(ctx, string(task), a2acore.Metas(view, ms...))
}

// TaskOf returns the A2A task a hop sent through this client runs in.
func (c *Client) TaskOf(hop handoff.HopID) (a2a.TaskID, bool) {
	t, ok := c.core.TaskOf(hop)
	return a2a.TaskID(t), ok
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
	// ended (Agent.Hop), whatever the transport answered: state.Offered
	// while no verified status came back, else the state the verified
	// statuses set (HC-55, HC-56).
	State state.State
	// Refused reports that the delegate refused the offer: with a verified
	// "rejected" (State state.Rejected, Reason its reason code), or with
	// TASK_STATE_REJECTED and no status, as for an offer whose signature
	// did not verify (HC-30; Reason empty).
	Refused bool
	Reason  reason.Code
}

// Send makes an offer with p (its Dialog defaults to msg.ContextID; one of
// them is required unless p.From gives it) and sends msg with it through
// cl, whose interceptors must include c. A call that has not answered by
// the next instant of asking.Backoff is abandoned and the identical
// Handoff is sent again in a copy of msg (HC-37, HC-52); after the last
// attempt the hop stays unresolved and the context error is returned
// (HC-40).
func (c *Client) Send(ctx context.Context, cl *a2aclient.Client, msg *a2a.Message, p handoff.OfferParams) (*Delivery, error) {
	var res a2a.SendMessageResult
	d, err := c.core.Send(ctx, msg.ContextID, p, func(ctx context.Context, dialog string) (string, error) {
		if msg.ContextID == "" {
			msg.ContextID = dialog
		}
		var err error
		res, err = c.send(ctx, cl, msg)
		if t, ok := res.(*a2a.Task); ok {
			return string(t.Status.State), err
		}
		return "", err
	})
	if d == nil {
		return nil, err
	}
	return &Delivery{Hop: d.Hop, Offer: d.Offer, Result: res, Statuses: d.Statuses, Attempts: d.Attempts,
		State: d.State, Refused: d.Refused, Reason: d.Reason}, err
}

// send sends a copy of msg, with an ID of its own.
func (c *Client) send(ctx context.Context, cl *a2aclient.Client, msg *a2a.Message) (a2a.SendMessageResult, error) {
	m := *msg
	m.ID = a2a.NewMessageID()
	m.Metadata = maps.Clone(msg.Metadata)
	req := &a2a.SendMessageRequest{Message: &m}
	if c.cfg.SendConfig != nil {
		cfg := *c.cfg.SendConfig
		req.Config = &cfg
	}
	return cl.SendMessage(ctx, req)
}

// Retransmit sends the identical Handoff of an offered hop again in a copy
// of msg, to learn its last status (HC-37, HC-52).
func (c *Client) Retransmit(ctx context.Context, cl *a2aclient.Client, msg *a2a.Message, hop handoff.HopID) (a2a.SendMessageResult, []*handoff.StatusResult, error) {
	var res a2a.SendMessageResult
	sts, err := c.core.Retransmit(ctx, hop, func(ctx context.Context) (string, error) {
		var err error
		res, err = c.send(ctx, cl, msg)
		return "", err
	})
	return res, sts, err
}

// Cancel signs a "canceled" for hop (Agent.Cancel) and sends it in a Cancel
// Task request for the hop's task (HC-28, HC-66). The hop stays unresolved
// until a verified "completed" or "failed" arrives or an outcome is observed
// (HC-41).
func (c *Client) Cancel(ctx context.Context, cl *a2aclient.Client, hop handoff.HopID) (*a2a.Task, handoff.Notice, error) {
	var t *a2a.Task
	n, err := c.core.Cancel(ctx, hop, func(ctx context.Context, task string) error {
		return a2acore.CancelInterrupted(ctx, []error{a2a.ErrTaskNotCancelable, a2a.ErrInternalError},
			func(ctx context.Context) (string, error) {
				got, err := cl.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(task)})
				if err != nil {
					return "", err
				}
				return string(got.Status.State), nil
			},
			func(ctx context.Context) error {
				var err error
				t, err = cl.CancelTask(ctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(task)})
				return err
			})
	})
	return t, n, err
}
