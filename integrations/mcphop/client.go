package mcphop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/mcp"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/asking"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/observe"
)

// ErrNotIntercepted is the error of Call and Retransmit when the session's
// client does not have this Client's Middleware among its sending
// middlewares (mcp.Client.AddSendingMiddleware): the Handoff was not put in
// the call's _meta, whatever the server answered.
var ErrNotIntercepted = errors.New("handoff: the MCP client's sending middlewares do not include this handoff Client's: nothing was attached")

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
	// Attempts is how many times Call asks again when a call times out
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

// Client is the delegator's side of the middleware. It is safe for
// concurrent use.
type Client struct {
	cfg ClientConfig

	mu       sync.Mutex
	inflight map[handoff.HopID]context.CancelFunc // calls in flight, by hop
	ids      map[handoff.HopID]hopCall            // last request of each hop
	hops     map[string]handoff.HopID             // scope and request id -> hop
	pending  map[handoff.HopID]*pendingCancel     // "canceled" to put in notifications/cancelled
	pkgs     hopwork.Packages                     // the package of each hop called, until it is resolved
}

type hopCall struct {
	id jsonrpc.ID
	// write sends a message on the connection of the call; nil over
	// streamable HTTP, where only a call in flight can be canceled.
	write func(context.Context, jsonrpc.Message) error
}

type pendingCancel struct {
	status handoff.Signed
	done   chan struct{} // closed once written
	once   sync.Once
}

// NewClient returns the delegator's side for cfg.
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
	return &Client{cfg: cfg, inflight: map[handoff.HopID]context.CancelFunc{},
		ids: map[handoff.HopID]hopCall{}, hops: map[string]handoff.HopID{}, pending: map[handoff.HopID]*pendingCancel{}}, nil
}

type carried struct {
	h        *handoff.Handoff
	hop      handoff.HopID
	got      *[]*handoff.StatusResult
	attached *bool // the middleware put h in a call's _meta
}

// WithHandoff returns a context whose tools/call carries h in
// params._meta (HC-67). The statuses of the result are handed to
// Agent.HandleStatus.
func WithHandoff(ctx context.Context, h *handoff.Handoff) context.Context {
	var hop handoff.HopID
	if o, _, err := handoff.InspectUnverified(h.Offer, handoff.Limits{}); err == nil && o != nil {
		hop = o.Hop // our own offer: only used to index the call
	}
	return withHandoff(ctx, h, hop)
}

// withHandoff is WithHandoff for a Handoff whose hop the caller knows, as
// Call and Retransmit do: its offer is not decoded again.
func withHandoff(ctx context.Context, h *handoff.Handoff, hop handoff.HopID) context.Context {
	return context.WithValue(ctx, keyHandoff, &carried{h: h, hop: hop, got: new([]*handoff.StatusResult), attached: new(bool)})
}

// Statuses returns the results of the statuses handled for calls made with
// a context from WithHandoff, oldest first.
func Statuses(ctx context.Context) []*handoff.StatusResult {
	if c, ok := ctx.Value(keyHandoff).(*carried); ok {
		return *c.got
	}
	return nil
}

// Middleware is the sending middleware, for mcp.Client.AddSendingMiddleware.
func (c *Client) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			cr, ok := ctx.Value(keyHandoff).(*carried)
			p, isCall := req.GetParams().(*mcp.CallToolParams)
			if method != methodCallTool || !ok || !isCall {
				return next(ctx, method, req)
			}
			meta := mcp.Meta{}
			for k, v := range p.Meta {
				meta[k] = v
			}
			if err := carry.AttachHandoff(meta, cr.h); err != nil {
				return nil, err
			}
			if pkg := c.pkgs.Of(cr.hop); pkg != nil && cr.hop != "" {
				carry.AttachPackage(meta, *pkg) // beside the Handoff, for every call of the hop
			}
			observe.Inject(ctx, meta) // beside the Handoff, not in it: unsigned
			p.Meta = meta
			*cr.attached = true
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if cr.hop != "" {
				c.mu.Lock()
				c.inflight[cr.hop] = cancel
				c.mu.Unlock()
				defer func() {
					c.mu.Lock()
					delete(c.inflight, cr.hop)
					c.mu.Unlock()
				}()
			}
			res, err := next(cctx, method, req)
			if ctr, ok := res.(*mcp.CallToolResult); ok && err == nil {
				if sr := c.handle(ctx, ctr.Meta); sr != nil {
					*cr.got = append(*cr.got, sr)
				}
			}
			return res, err
		}
	}
}

func (c *Client) handle(ctx context.Context, meta mcp.Meta) *handoff.StatusResult {
	octets, err := carry.Status(meta)
	if err != nil {
		return nil
	}
	sr, err := c.cfg.Agent.HandleStatus(ctx, octets)
	c.cfg.Observe.StatusReceived(ctx, Transport, sr, err)
	hopwork.LogStatus(ctx, c.cfg.Logger, Transport, sr, err)
	if err != nil {
		return nil
	}
	return sr
}

// Delivery is the outcome of Call.
type Delivery struct {
	Hop      handoff.HopID
	Offer    *handoff.Outgoing
	Result   *mcp.CallToolResult
	Statuses []*handoff.StatusResult
	// Attempts is the number of times the Handoff was sent.
	Attempts int

	// State is the hop's state in the delegator's table once the call
	// ended (Agent.Hop): state.Offered while no verified status came
	// back, else the state the verified statuses set (HC-55, HC-56).
	State state.State
	// Refused reports that the delegate refused the offer: with a verified
	// "rejected" (State state.Rejected, Reason its reason code), or with
	// an error result and no status, as for an offer whose signature did
	// not verify (HC-30; Reason empty).
	Refused bool
	Reason  reason.Code
}

// settle fills the outcome of d from the delegator's table and the result.
func (c *Client) settle(ctx context.Context, d *Delivery) error {
	s, err := hopwork.Settle(ctx, c.cfg.Agent, d.Hop)
	if err != nil {
		return err
	}
	d.State, d.Refused, d.Reason = s.State, s.Refused, s.Reason
	if d.Result != nil && d.Result.IsError && (d.State == state.Offered || d.State == "") {
		d.Refused = true // refused with no status the delegator could verify
	}
	return nil
}

// Call makes an offer with p, calls the tool with it in params._meta (and
// the object p.Deliver made, the handoff package, beside it under
// PackageKey, on every call of the hop until it is resolved), and hands
// the result's status to Agent.HandleStatus. A call that has not
// answered by the next instant of asking.Backoff is abandoned and the
// identical Handoff is sent again (HC-37, HC-52); after the last attempt
// the hop stays unresolved and the context error is returned (HC-40: silence
// is never "failed").
//
// MCP ends an abandoned call: the SDK sends notifications/cancelled and the
// tool's context ends. A tool whose work may outlast the first instant of
// the backoff (half the offer's lifetime) should answer at once, with
// Report EffectUnknown so the result carries "accepted", finish the work
// in the background and record the outcome with Agent.ReplyHop: the
// delegator learns it with Retransmit.
func (c *Client) Call(ctx context.Context, s *mcp.ClientSession, params *mcp.CallToolParams, p handoff.OfferParams) (*Delivery, error) {
	out, err := c.cfg.Agent.Offer(ctx, p)
	if err != nil {
		return nil, err
	}
	d := &Delivery{Hop: out.Offer.Hop, Offer: out}
	c.pkgs.Keep(out.Offer.Hop, out.Delivered)
	defer c.pkgs.Settle(context.WithoutCancel(ctx), c.cfg.Agent, out.Offer.Hop)
	err = c.retry(ctx, out.Offer, func(actx context.Context) error {
		h := out.Handoff
		if d.Attempts > 0 {
			if h, err = c.cfg.Agent.Retransmit(ctx, out.Offer.Hop); err != nil {
				return err
			}
		}
		d.Attempts++
		actx = withHandoff(actx, h, out.Offer.Hop)
		pp := *params
		res, err := s.CallTool(actx, &pp)
		d.Statuses = append(d.Statuses, Statuses(actx)...)
		d.Result = res
		if !*actx.Value(keyHandoff).(*carried).attached {
			return notIntercepted(err)
		}
		return err
	})
	if err != nil {
		return d, err
	}
	return d, c.settle(ctx, d)
}

// Retransmit sends the identical Handoff of an offered hop again in a new
// call, to learn its last status (a tool call gets one reply, so a delegator
// over MCP learns later statuses by asking again).
func (c *Client) Retransmit(ctx context.Context, s *mcp.ClientSession, params *mcp.CallToolParams, hop handoff.HopID) (*mcp.CallToolResult, []*handoff.StatusResult, error) {
	h, err := c.cfg.Agent.Retransmit(ctx, hop)
	if err != nil {
		return nil, nil, err
	}
	actx := withHandoff(ctx, h, hop)
	pp := *params
	res, err := s.CallTool(actx, &pp)
	if !*actx.Value(keyHandoff).(*carried).attached {
		err = notIntercepted(err)
	}
	c.pkgs.Settle(context.WithoutCancel(ctx), c.cfg.Agent, hop)
	return res, Statuses(actx), err
}

// retry runs send at the offer's iat and at each instant of Backoff, each
// attempt bounded by the next instant.
func (c *Client) retry(ctx context.Context, o *handoff.Offer, send func(context.Context) error) error {
	return asking.Retransmit(ctx, o, c.cfg.Attempts, c.cfg.Now, send)
}

// ErrCancelNotSent is the error of Cancel for a hop that has no call in
// flight and no connection of this client's Transport to send a
// cancellation on (streamable HTTP once the hop's call returned): no
// "canceled" was signed, and the hop's state is unchanged on both sides.
// It wraps handoff.ErrArgument.
var ErrCancelNotSent = fmt.Errorf("%w: no call of the hop in flight, nor a connection of this client's Transport to send a cancellation on", handoff.ErrArgument)

// Cancel signs a "canceled" for hop (Agent.Cancel) and sends it in the _meta
// of notifications/cancelled (HC-28, HC-67): the cancellation of the call in
// flight for hop, or, when none is, a notification naming the hop's last
// request. It needs the session's transport wrapped by Client.Transport.
// MCP asks the receiver not to answer a cancellation: the hop stays
// unresolved until a retransmission learns its status (HC-41), the
// delegate's outcome of the canceled work ("failed" with no refs when it
// took none).
//
// A delegate takes a "canceled" only on the session of the hop's call
// (ErrForeignCancel), so that over streamable HTTP a cancel counts only
// with sessions, and only while the hop's call is in flight. With no call
// in flight over streamable HTTP, Cancel signs nothing and returns
// ErrCancelNotSent: a hop paused for an approval is ended by declining
// the approval instead (the elicitation handler's {"decision": "deny"}),
// which ends it "failed" with no refs; work that outlasts its call is
// followed with Retransmit until it ends, or left to its exp. Over a
// stateless server (StreamableHTTPOptions.Stateless) every request is a
// session of its own and no "canceled" ever counts: the cancel of a call
// in flight ends the call (the tool's context, with
// StreamableHTTPOptions.PropagateRequestCancellation), and the tool that
// stops before its effect reports none (Report, EffectNone), so that the
// hop ends "failed", no refs, which Retransmit learns.
func (c *Client) Cancel(ctx context.Context, hop handoff.HopID) (handoff.Notice, error) {
	c.mu.Lock()
	_, inflight := c.inflight[hop]
	last, known := c.ids[hop]
	c.mu.Unlock()
	if !inflight && (!known || last.write == nil) {
		return handoff.Notice{}, fmt.Errorf("%w: hop %s", ErrCancelNotSent, hop)
	}
	n, err := c.cfg.Agent.Cancel(ctx, hop)
	if err != nil {
		return n, err
	}
	pc := &pendingCancel{status: n.Status, done: make(chan struct{})}
	c.mu.Lock()
	cancel, inflight := c.inflight[hop]
	last, known = c.ids[hop]
	known = known && last.write != nil
	if inflight || known {
		c.pending[hop] = pc
	}
	c.mu.Unlock()
	switch {
	case inflight:
		// The SDK sends notifications/cancelled; the transport adds _meta.
		cancel()
	case known:
		msg, err := CancelledNotification(last.id, n.Status)
		if err != nil {
			return n, err
		}
		if err := last.write(ctx, msg); err != nil {
			return n, err
		}
		pc.written()
	default:
		// The call ended between the check above and the signature.
		return n, fmt.Errorf("%w: hop %s (its call ended meanwhile; the \"canceled\" is signed)", ErrCancelNotSent, hop)
	}
	select {
	case <-pc.done:
		return n, nil
	case <-ctx.Done():
		return n, ctx.Err()
	}
}

func (p *pendingCancel) written() { p.once.Do(func() { close(p.done) }) }

// CancelledNotification returns a notifications/cancelled for the request
// id with a signed "canceled" in its params._meta (HC-67), for a program
// that writes JSON-RPC messages itself.
func CancelledNotification(id jsonrpc.ID, canceled handoff.Signed) (*jsonrpc.Request, error) {
	meta := map[string]any{}
	carry.AttachStatus(meta, canceled)
	params, err := json.Marshal(map[string]any{"requestId": id.Raw(), "_meta": meta})
	if err != nil {
		return nil, err
	}
	return &jsonrpc.Request{Method: methodCancelled, Params: params}, nil
}

// AttachCancel puts a signed "canceled" in the params._meta of a
// notifications/cancelled message, keeping its other members. It fails for
// any other message.
func AttachCancel(msg *jsonrpc.Request, canceled handoff.Signed) error {
	if msg == nil || msg.Method != methodCancelled || msg.ID.IsValid() {
		return fmt.Errorf("%w: not a notifications/cancelled", handoff.ErrArgument)
	}
	params := map[string]json.RawMessage{}
	if len(msg.Params) > 0 {
		if err := json.Unmarshal(msg.Params, &params); err != nil {
			return fmt.Errorf("%w: notifications/cancelled params: %v", handoff.ErrMalformed, err)
		}
	}
	meta := map[string]any{}
	if raw, ok := params["_meta"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return fmt.Errorf("%w: notifications/cancelled _meta: %v", handoff.ErrMalformed, err)
		}
	}
	carry.AttachStatus(meta, canceled)
	raw, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	params["_meta"] = raw
	if msg.Params, err = json.Marshal(params); err != nil {
		return err
	}
	return nil
}

// Transport returns t prepared so that the calls carrying a Handoff are
// indexed by hop and the notifications/cancelled of a hop Cancel signed for
// carry the "canceled" in params._meta (HC-67), which the SDK sends without
// _meta. A *mcp.StreamableClientTransport is returned as a copy whose HTTP
// client does this on the request bodies, so that the SDK's own connection
// is not wrapped; any other transport's connection is wrapped.
func (c *Client) Transport(t mcp.Transport) mcp.Transport {
	if st, ok := t.(*mcp.StreamableClientTransport); ok {
		cp := *st
		base := http.DefaultClient
		if st.HTTPClient != nil {
			base = st.HTTPClient
		}
		hc := *base
		rt := base.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		hc.Transport = &roundTripper{c: c, next: rt}
		cp.HTTPClient = &hc
		return &cp
	}
	return &transport{c: c, t: t}
}

// outgoing looks at a message about to be sent in scope (one connection or
// one HTTP session) with the context ctx: it indexes a tools/call carrying
// a Handoff, and returns a copy of a notifications/cancelled with the
// pending "canceled" of its hop, with that pending cancel to mark written
// once sent.
//
// The SDK writes a call with the call's context, and its
// notifications/cancelled with that context's values (the Handoff that
// Middleware attached to the call among them), so that the hop of either
// is read from ctx; the message is decoded for its hop only when ctx does
// not carry one, as for a Handoff put in _meta by other means.
func (c *Client) outgoing(ctx context.Context, scope string, msg jsonrpc.Message, w func(context.Context, jsonrpc.Message) error) (jsonrpc.Message, *pendingCancel) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return msg, nil
	}
	hop := hopOf(ctx)
	switch {
	case req.Method == methodCallTool && req.ID.IsValid():
		c.index(scope, req, hop, w)
	case req.Method == methodCancelled && !req.ID.IsValid():
		if pc := c.pendingFor(scope, req, hop); pc != nil {
			cp := *req
			if AttachCancel(&cp, pc.status) == nil {
				return &cp, pc
			}
		}
	}
	return msg, nil
}

// hopOf returns the hop of the Handoff that ctx carries for a call, or ""
// when it carries none.
func hopOf(ctx context.Context) handoff.HopID {
	if cr, ok := ctx.Value(keyHandoff).(*carried); ok {
		return cr.hop
	}
	return ""
}

func idKey(scope string, id any) string {
	b, _ := json.Marshal(id)
	return scope + "|" + string(b)
}

// index records that the tools/call req, sent in scope, carries the hop
// hop, or, when hop is "", the hop of the Handoff in its _meta, if any.
func (c *Client) index(scope string, req *jsonrpc.Request, hop handoff.HopID, w func(context.Context, jsonrpc.Message) error) {
	if hop == "" {
		hop = hopIn(req)
	}
	if hop == "" {
		return
	}
	c.mu.Lock()
	c.hops[idKey(scope, req.ID.Raw())] = hop
	c.ids[hop] = hopCall{id: req.ID, write: w}
	c.mu.Unlock()
}

// hopIn returns the hop of the Handoff in the _meta of a tools/call, or ""
// when it carries none.
func hopIn(req *jsonrpc.Request) handoff.HopID {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return ""
	}
	octets, err := carry.Handoff(p.Meta)
	if err != nil {
		return ""
	}
	h, _, err := handoff.ParseHandoff(octets, handoff.Limits{})
	if err != nil {
		return ""
	}
	o, _, err := handoff.InspectUnverified(h.Offer, handoff.Limits{})
	if err != nil || o == nil {
		return "" // our own offer: decoded only to index the call
	}
	return o.Hop
}

// pendingFor returns, and forgets, the pending "canceled" of the hop whose
// call the notifications/cancelled req, sent in scope, cancels: the hop
// hop when the notification's context names it, else the hop indexed
// under its requestId.
func (c *Client) pendingFor(scope string, req *jsonrpc.Request, hop handoff.HopID) *pendingCancel {
	if hop == "" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) != nil {
			return nil
		}
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil {
			return nil
		}
		c.mu.Lock()
		hop = c.hops[idKey(scope, id.Raw())]
		c.mu.Unlock()
		if hop == "" {
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pc := c.pending[hop]
	delete(c.pending, hop)
	return pc
}

// cancelPending reports whether Cancel left a "canceled" for hop to send.
func (c *Client) cancelPending(hop handoff.HopID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[hop] != nil
}

type transport struct {
	c *Client
	t mcp.Transport
}

func (t *transport) Connect(ctx context.Context) (mcp.Connection, error) {
	cn, err := t.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	w := &conn{Connection: cn, c: t.c}
	w.scope = fmt.Sprintf("conn:%p", w)
	return w, nil
}

type conn struct {
	mcp.Connection
	c     *Client
	scope string
}

func (cn *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	out, pc := cn.c.outgoing(ctx, cn.scope, msg, cn.Connection.Write)
	err := cn.Connection.Write(ctx, out)
	if pc != nil {
		pc.written()
	}
	return err
}

// roundTripper does for the streamable HTTP transport what conn does for
// the others, on the JSON-RPC message in each POST body. Over HTTP a hop
// is canceled only while its call is in flight (Cancel), so that the
// message of a call whose context carries a hop with no "canceled" pending
// is sent as it is, without reading its body: its index would never be
// used.
type roundTripper struct {
	c    *Client
	next http.RoundTripper
}

func (rt *roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Body == nil {
		return rt.next.RoundTrip(r)
	}
	ctx := r.Context()
	if hop := hopOf(ctx); hop != "" && !rt.c.cancelPending(hop) {
		return rt.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	msg, derr := jsonrpc.DecodeMessage(body)
	var pc *pendingCancel
	if derr == nil {
		var out jsonrpc.Message
		out, pc = rt.c.outgoing(ctx, "http:"+r.URL.String()+"|"+r.Header.Get("Mcp-Session-Id"), msg, nil)
		if pc != nil {
			if b, err := jsonrpc.EncodeMessage(out); err == nil {
				body = b
			}
		}
	}
	r = r.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	resp, err := rt.next.RoundTrip(r)
	if pc != nil {
		pc.written()
	}
	return resp, err
}
