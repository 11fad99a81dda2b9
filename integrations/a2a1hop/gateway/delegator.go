package gateway

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/observe"
)

// DelegatorConfig configures a Delegator.
type DelegatorConfig struct {
	// Agent is the delegator the gateway sends for: it signs the offers
	// and verifies the statuses. Required. Give it a durable
	// replay.OfferStore to keep its hops across a restart.
	Agent *handoff.Agent
	// To is the target's AgentID, the aud of every offer. Required.
	To handoff.AgentID
	// Upstream is the target's base URL: its card is fetched from
	// Upstream + CardPath when the gateway starts. Required.
	Upstream string
	// URL is the gateway's own base URL, as its client reaches it: the
	// interfaces of the card it serves name it. Required.
	URL string
	// TTL is each offer's lifetime (exp - iat); zero means the library's
	// default, 2 minutes. A call not answered by half of it is asked
	// again (HC-37).
	TTL time.Duration
	// Attempts is how many times a hop is sent again when its reply is
	// lost (a2a1hop.ClientConfig.Attempts): zero means 3, negative never.
	Attempts int
	// CardTrust, when set, requires the target's card to carry a
	// signature that a key CardTrust binds to To verifies (agentcard.Verify,
	// with AllowDroppedEmpty, the reading of @a2a-js/sdk's signatures): the
	// gateway does not start otherwise. Nil reads the card unverified.
	CardTrust *handoff.Trust
	// ForwardHeaders names the headers of a call that go on to the target
	// (such as Authorization). A2A-Extensions always does.
	ForwardHeaders []string
	// HTTPClient calls the target; nil means a client with no timeout.
	HTTPClient *http.Client
	// Observe records spans and counters; nil records nothing.
	Observe *observe.Recorder
	// Logger hears of each status handled; nil is silent.
	Logger *slog.Logger
}

// Delegator is the gateway in front of an A2A client: an http.Handler
// serving CardPath, JSONRPCPath and RESTPath, which sends every message
// to the target with an offer. It is safe for concurrent use.
type Delegator struct {
	cfg      DelegatorConfig
	attempts int
	card     []byte
	hc       *a2a1hop.Client
	up       *a2aclient.Client
	handler  http.Handler
	tasks    hopsOfTasks
}

var _ a2asrv.RequestHandler = (*proxy)(nil)

// NewDelegator fetches the target's card and returns the gateway in front
// of the client. ctx bounds the fetch.
func NewDelegator(ctx context.Context, cfg DelegatorConfig) (*Delegator, error) {
	switch {
	case cfg.Agent == nil || cfg.To == "":
		return nil, fmt.Errorf("%w: DelegatorConfig.Agent and DelegatorConfig.To are required", handoff.ErrConfig)
	case cfg.Upstream == "" || cfg.URL == "":
		return nil, fmt.Errorf("%w: DelegatorConfig.Upstream and DelegatorConfig.URL are required", handoff.ErrConfig)
	}
	hc, raw, upCard, err := fetchCard(ctx, cfg.HTTPClient, cfg.Upstream)
	if err != nil {
		return nil, err
	}
	if cfg.CardTrust != nil {
		if _, err := agentcard.Verify(raw, cfg.CardTrust, cfg.To, agentcard.VerifyOptions{AllowDroppedEmpty: true}); err != nil {
			return nil, fmt.Errorf("%w: the card of %s: %w", ErrUpstream, cfg.To, err)
		}
	}
	// The client sees the target's card with the gateway's interfaces and
	// without the handoff extension, which the gateway speaks for it.
	card, err := servedCard(raw, cfg.URL, func(c members) error {
		exts, err := c.extensions()
		if err != nil {
			return err
		}
		if len(exts) == 0 {
			delete(c, "extensions")
			return nil
		}
		return c.set("extensions", exts)
	})
	if err != nil {
		return nil, err
	}
	client, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: cfg.Agent, Attempts: cfg.Attempts, Observe: cfg.Observe, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	up, err := dial(ctx, upCard, hc, carrier{}, client)
	if err != nil {
		return nil, err
	}
	d := &Delegator{cfg: cfg, attempts: cfg.Attempts, card: card, hc: client, up: up}
	switch {
	case d.attempts == 0:
		d.attempts = 3
	case d.attempts < 0:
		d.attempts = 0
	}
	d.handler = serve(card, (*proxy)(d), nil)
	return d, nil
}

// ServeHTTP implements http.Handler.
func (d *Delegator) ServeHTTP(rw http.ResponseWriter, r *http.Request) { d.handler.ServeHTTP(rw, r) }

// Card returns the card the gateway serves at CardPath.
func (d *Delegator) Card() []byte { return slices.Clone(d.card) }

// Close releases the connections to the target.
func (d *Delegator) Close() error { return d.up.Destroy() }

// proxy is the Delegator as the a2asrv transports call it.
type proxy Delegator

// carried is what a call to the target carries of the client's call: its
// service parameters, and the fields of its request that a2a1hop's Client
// makes anew (the configuration, metadata and tenant of a message/send,
// the metadata and tenant of a tasks/cancel).
type carried struct {
	send   *a2a.SendMessageRequest
	cancel *a2a.CancelTaskRequest
}

type carriedKey struct{}

// outgoing returns ctx for the call to the target that serves the
// client's call ctx, whose request is req.
func (p *proxy) outgoing(ctx context.Context, req any) context.Context {
	ctx = a2aclient.AttachServiceParams(ctx, forwarded(callParams(ctx), p.cfg.ForwardHeaders, false))
	c := &carried{}
	switch r := req.(type) {
	case *a2a.SendMessageRequest:
		c.send = r
	case *a2a.CancelTaskRequest:
		c.cancel = r
	default:
		return ctx
	}
	return context.WithValue(ctx, carriedKey{}, c)
}

// carrier is the interceptor, before a2a1hop's, that puts back in the
// request to the target what the client's request had.
type carrier struct {
	a2aclient.PassthroughInterceptor
}

func (carrier) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	c, ok := ctx.Value(carriedKey{}).(*carried)
	if !ok {
		return ctx, nil, nil
	}
	switch p := req.Payload.(type) {
	case *a2a.SendMessageRequest:
		if c.send != nil && p != nil {
			p.Config, p.Metadata, p.Tenant = c.send.Config, maps.Clone(c.send.Metadata), c.send.Tenant
		}
	case *a2a.CancelTaskRequest:
		if c.cancel != nil && p != nil {
			p.Metadata, p.Tenant = maps.Clone(c.cancel.Metadata), c.cancel.Tenant
			delete(p.Metadata, a2a1hop.ExtensionURI) // the gateway's "canceled" goes there
		}
	}
	return ctx, nil, nil
}

// message returns the message to send for the client's req, on a dialog
// (its contextId, made when it names none), and the hop of the task it
// continues, if the gateway sent that task's hop.
func (p *proxy) message(req *a2a.SendMessageRequest) (*a2a.Message, handoff.HopID, error) {
	if req == nil || req.Message == nil {
		return nil, "", fmt.Errorf("%w: no message", a2a.ErrInvalidParams)
	}
	if _, ok := req.Message.Metadata[a2a1hop.ExtensionURI]; ok {
		return nil, "", fmt.Errorf("%w: the message carries a Handoff already: the gateway signs the offer itself", a2a.ErrInvalidParams)
	}
	m := *req.Message
	m.Metadata = maps.Clone(m.Metadata)
	if m.ContextID == "" {
		m.ContextID = a2a.NewContextID()
	}
	hop, _ := p.tasks.hop(m.TaskID)
	return &m, hop, nil
}

func (p *proxy) params(m *a2a.Message) handoff.OfferParams {
	return handoff.OfferParams{To: p.cfg.To, Dialog: m.ContextID, Task: string(m.TaskID), TTL: p.cfg.TTL}
}

// SendMessage implements a2asrv.RequestHandler: the message goes to the
// target with a new offer, or, on the task of a hop the gateway sent, with
// that hop's identical Handoff (a2a1hop answers it as a retransmission, or
// resumes a paused hop).
func (p *proxy) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	m, hop, err := p.message(req)
	if err != nil {
		return nil, err
	}
	ctx = p.outgoing(ctx, req)
	if hop != "" {
		return p.again(ctx, m, hop, nil)
	}
	d, err := p.hc.Send(ctx, p.up, m, p.params(m))
	if d == nil {
		return nil, err
	}
	res := d.Result
	if err != nil && lostReply(ctx, err) && d.State == state.Offered {
		res, err = p.again(ctx, m, d.Hop, err)
	}
	p.tasks.note(res, d.Hop)
	return res, err
}

// SendStreamingMessage implements a2asrv.RequestHandler: the target's
// events stream back as they come, each status in them verified and
// applied on the way. A stream lost before its first event is asked again
// as SendMessage is.
func (p *proxy) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		m, hop, err := p.message(req)
		if err != nil {
			yield(nil, err)
			return
		}
		ctx := p.outgoing(ctx, req)
		if hop != "" {
			yield(p.again(ctx, m, hop, nil))
			return
		}
		out, err := p.cfg.Agent.Offer(ctx, p.params(m))
		if err != nil {
			yield(nil, err)
			return
		}
		hop = out.Offer.Hop
		r := *req
		r.Message = m
		got := false
		for ev, err := range p.up.SendStreamingMessage(a2a1hop.WithHandoff(ctx, out.Handoff), &r) {
			if err != nil {
				if !got && lostReply(ctx, err) {
					res, err := p.again(ctx, m, hop, err)
					p.tasks.note(res, hop)
					yield(res, err)
					return
				}
				yield(nil, err)
				return
			}
			got = true
			p.tasks.note(ev, hop)
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// again sends hop's identical Handoff with m (HC-52): once, or, after a
// reply lost with the error lost, up to the configured attempts while
// replies are lost, waiting longer each time (HC-37). With no attempt
// left, the hop stays unresolved and lost is returned (HC-40).
func (p *proxy) again(ctx context.Context, m *a2a.Message, hop handoff.HopID, lost error) (a2a.SendMessageResult, error) {
	n, wait, err := 1, time.Duration(0), lost
	if lost != nil {
		n, wait = p.attempts, 100*time.Millisecond
	}
	for range n {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			wait *= 2
		}
		var res a2a.SendMessageResult
		res, _, err = p.hc.Retransmit(ctx, p.up, m, hop)
		if err == nil || !lostReply(ctx, err) {
			return res, err
		}
	}
	return nil, err
}

// lostReply reports whether err ends a call whose reply was lost on the
// way: not an answer of the target, not the client's call ending.
func lostReply(ctx context.Context, err error) bool {
	var ae *a2a.Error
	return ctx.Err() == nil && !errors.As(err, &ae) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, a2a1hop.ErrNotIntercepted) &&
		!errors.Is(err, handoff.ErrArgument) && !errors.Is(err, handoff.ErrConfig)
}

// CancelTask implements a2asrv.RequestHandler: a task of a hop the gateway
// sent is canceled with the delegator's signed "canceled" (HC-28); any
// other request passes as it is.
func (p *proxy) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	ctx = p.outgoing(ctx, req)
	hop, ok := p.tasks.hop(req.ID)
	if !ok {
		return p.up.CancelTask(ctx, req)
	}
	t, _, err := p.hc.Cancel(ctx, p.up, hop)
	return t, err
}

// The methods that pass through; the statuses in their answers are
// verified and applied all the same.

func (p *proxy) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	return p.up.GetTask(p.outgoing(ctx, req), req)
}

func (p *proxy) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return p.up.ListTasks(p.outgoing(ctx, req), req)
}

func (p *proxy) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return p.up.SubscribeToTask(p.outgoing(ctx, req), req)
}

func (p *proxy) GetTaskPushConfig(ctx context.Context, req *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return p.up.GetTaskPushConfig(p.outgoing(ctx, req), req)
}

func (p *proxy) ListTaskPushConfigs(ctx context.Context, req *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	cs, err := p.up.ListTaskPushConfigs(p.outgoing(ctx, req), req)
	if err != nil {
		return nil, err
	}
	return &a2a.ListTaskPushConfigResponse{Configs: cs}, nil
}

func (p *proxy) CreateTaskPushConfig(ctx context.Context, req *a2a.PushConfig) (*a2a.PushConfig, error) {
	return p.up.CreateTaskPushConfig(p.outgoing(ctx, req), req)
}

func (p *proxy) DeleteTaskPushConfig(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) error {
	return p.up.DeleteTaskPushConfig(p.outgoing(ctx, req), req)
}

func (p *proxy) GetExtendedAgentCard(ctx context.Context, req *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return p.up.GetExtendedAgentCard(p.outgoing(ctx, req), req)
}

// maxTasks bounds the tasks whose hop a Delegator remembers, for
// tasks/cancel and the messages that follow on a task: the oldest is
// forgotten first, and a task forgotten is then served as one of another
// client's.
const maxTasks = 1 << 16

// hopsOfTasks maps the target's tasks to the hops the gateway sent them
// with.
type hopsOfTasks struct {
	mu    sync.Mutex
	hops  map[a2a.TaskID]handoff.HopID
	order []a2a.TaskID
}

// note records the task of a result or event as hop's.
func (t *hopsOfTasks) note(ev a2a.Event, hop handoff.HopID) {
	var id a2a.TaskID
	switch ev := ev.(type) {
	case *a2a.Task:
		id = ev.ID
	case *a2a.TaskStatusUpdateEvent:
		id = ev.TaskID
	case *a2a.TaskArtifactUpdateEvent:
		id = ev.TaskID
	}
	if id == "" || hop == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hops == nil {
		t.hops = map[a2a.TaskID]handoff.HopID{}
	}
	if _, ok := t.hops[id]; ok {
		return
	}
	if len(t.order) >= maxTasks {
		delete(t.hops, t.order[0])
		t.order = t.order[1:]
	}
	t.hops[id] = hop
	t.order = append(t.order, id)
}

func (t *hopsOfTasks) hop(id a2a.TaskID) (handoff.HopID, bool) {
	if id == "" {
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.hops[id]
	return h, ok
}
