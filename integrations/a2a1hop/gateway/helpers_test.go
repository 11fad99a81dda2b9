package gateway_test

import (
	"context"
	"encoding/json"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/handofftest"

	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/a2a1hop/gateway"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
)

// world returns agents that trust one another, on a clock that shows the
// time: the asking schedule of a2a1hop's Client is in real time.
func world(t testing.TB) *handofftest.World {
	t.Helper()
	w := handofftest.NewWorld(t, planner, coder)
	w.Clock().Set(time.Now())
	return w
}

// upstream is an A2A 1.0 agent that knows nothing of handoffs: what it
// does depends on the text of the message (see work). It counts the times
// its work ran and keeps what each message carried.
type upstream struct {
	URL     string
	srv     *httptest.Server
	stop    chan struct{} // closed at the end of the test: "wait" ends
	calls   atomic.Int32  // Execute, for a message
	cancels atomic.Int32  // Cancel

	mu   sync.Mutex
	seen []seenMessage
}

type seenMessage struct {
	text    string
	meta    map[string]any
	exts    []string
	ext     []string // the A2A-Extensions service parameter
	auth    []string // the Authorization header
	task    a2a.TaskID
	context string
}

type upstreamOptions struct {
	restFirst   bool // list HTTP+JSON before JSON-RPC in the card
	noStreaming bool
	// atOnce answers a message/send with the task as it is when the work
	// starts, and ends a message/stream after its first event: the work
	// goes on, and the caller follows the task.
	atOnce bool
}

// atOnce is the request handler of an upstream that answers at once.
type atOnce struct{ a2asrv.RequestHandler }

func (h atOnce) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	cp, cfg := *req, a2a.SendMessageConfig{}
	if req.Config != nil {
		cfg = *req.Config
	}
	cfg.ReturnImmediately = true
	cp.Config = &cfg
	return h.RequestHandler.SendMessage(ctx, &cp)
}

func (h atOnce) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		for ev, err := range h.RequestHandler.SendStreamingMessage(ctx, req) {
			yield(ev, err)
			return
		}
	}
}

func newUpstream(t testing.TB, o upstreamOptions) *upstream {
	t.Helper()
	u := &upstream{stop: make(chan struct{})}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	ifaces := []*a2a.AgentInterface{
		a2a.NewAgentInterface(base+"/a2a", a2a.TransportProtocolJSONRPC),
		a2a.NewAgentInterface(base+"/v1", a2a.TransportProtocolHTTPJSON),
	}
	if o.restFirst {
		slices.Reverse(ifaces)
	}
	card := &a2a.AgentCard{Name: "upstream", Description: "an A2A agent that knows nothing of handoffs", Version: "1",
		SupportedInterfaces: ifaces, DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Capabilities: a2a.AgentCapabilities{Streaming: !o.noStreaming},
		Skills:       []a2a.AgentSkill{{ID: "work", Name: "work", Description: "does the work", Tags: []string{"work"}}}}
	h := a2asrv.NewHandler(u)
	if o.atOnce {
		h = atOnce{h}
	}
	mux := http.NewServeMux()
	mux.Handle(gateway.CardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(h))
	mux.Handle("/v1/", http.StripPrefix("/v1", a2asrv.NewRESTHandler(h)))
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(u.stop) }) // before Close, which waits for the streams
	u.URL, u.srv = srv.URL, srv
	return u
}

// closeUpstream stops up: nothing answers at its URL any more.
func closeUpstream(t *testing.T, up *upstream) {
	t.Helper()
	up.srv.CloseClientConnections()
	up.srv.Close()
}

// verified returns the status st, verified against offer with the World's
// trust (HC-55).
func verified(t *testing.T, w *handofftest.World, st []byte, offer handoff.Signed) *handoff.Status {
	t.Helper()
	s, err := handoff.ParseSigned(st, handoff.Limits{})
	require.NoError(t, err)
	v, err := handoff.VerifyStatus(s, offer, w.Trust(), handoff.Limits{})
	require.NoError(t, err)
	return v
}

func (u *upstream) messages() []seenMessage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// Execute is the upstream's work, by the message's text: "complete" (and
// any other text) completes with an artifact; "answer" answers with a
// Message; "fail", "reject", "input" and "cancel-self" end or pause the
// task so; "refuse" answers an A2A error and makes no task; "wait" works
// until canceled.
func (u *upstream) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		u.calls.Add(1)
		text := ""
		if len(ec.Message.Parts) > 0 {
			text = ec.Message.Parts[0].Text()
		}
		s := seenMessage{text: text, meta: ec.Message.Metadata, exts: ec.Message.Extensions, task: ec.Message.TaskID, context: ec.Message.ContextID}
		if ec.ServiceParams != nil {
			s.ext, _ = ec.ServiceParams.Get(a2a.SvcParamExtensions)
			s.auth, _ = ec.ServiceParams.Get("Authorization")
		}
		u.mu.Lock()
		u.seen = append(u.seen, s)
		u.mu.Unlock()
		switch text {
		case "refuse":
			yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation, "not this"))
			return
		case "answer":
			m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("answered"))
			m.ContextID = ec.ContextID
			yield(m, nil)
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		say := func(s a2a.TaskState, text string) bool {
			return yield(a2a.NewStatusUpdateEvent(ec, s, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))), nil)
		}
		switch text {
		case "fail":
			say(a2a.TaskStateFailed, "it broke")
		case "reject":
			say(a2a.TaskStateRejected, "not doing that")
		case "input":
			say(a2a.TaskStateInputRequired, "which file?")
		case "cancel-self":
			say(a2a.TaskStateCanceled, "gave up")
		case "wait":
			if say(a2a.TaskStateWorking, "working") {
				select {
				case <-ctx.Done():
				case <-u.stop:
					say(a2a.TaskStateCanceled, "stopped")
				}
			}
		case "slow":
			if !say(a2a.TaskStateWorking, "working") {
				return
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-u.stop:
			}
			say(a2a.TaskStateCompleted, "done, slowly")
		default:
			if !say(a2a.TaskStateWorking, "working") ||
				!yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("done: "+text)), nil) {
				return
			}
			say(a2a.TaskStateCompleted, "done")
		}
	}
}

func (u *upstream) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		u.cancels.Add(1)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// listen returns an unstarted server on loopback and its base URL, for a
// gateway whose card must name its own URL.
func listen(t testing.TB) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	return srv, "http://" + srv.Listener.Addr().String()
}

// delegate starts a Delegate for cfg (Agent, Upstream and URL filled in
// when unset) in front of up.
func delegate(t testing.TB, w *handofftest.World, up *upstream, cfg gateway.DelegateConfig) (*gateway.Delegate, string) {
	t.Helper()
	srv, base := listen(t)
	if cfg.Agent == nil {
		cfg.Agent = w.Agent(coder)
	}
	cfg.Upstream, cfg.URL = up.URL, base
	if cfg.Peer == nil {
		cfg.Peer = func(*http.Request) (handoff.AgentID, bool) { return planner, true }
	}
	d, err := gateway.NewDelegate(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	srv.Config.Handler = d
	srv.Start()
	return d, base
}

// binding is the A2A binding a client uses to reach a gateway.
type binding string

const (
	overJSONRPC binding = "jsonrpc"
	overREST    binding = "rest"
)

var bindings = []binding{overJSONRPC, overREST}

// client returns an A2A client of the gateway at base over b, with ics.
func client(t testing.TB, base string, b binding, ics ...a2aclient.CallInterceptor) *a2aclient.Client {
	t.Helper()
	iface := a2a.NewAgentInterface(base+gateway.JSONRPCPath, a2a.TransportProtocolJSONRPC)
	if b == overREST {
		iface = a2a.NewAgentInterface(base+gateway.RESTPath, a2a.TransportProtocolHTTPJSON)
	}
	cl, err := a2aclient.NewFromEndpoints(context.Background(), []*a2a.AgentInterface{iface}, a2aclient.WithCallInterceptors(ics...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Destroy() })
	return cl
}

// delegator returns a2a1hop's Client for the planner (agent), and an A2A
// client of base through it over b.
func delegator(t testing.TB, agent *handoff.Agent, base string, b binding, cfg a2a1hop.ClientConfig) (*a2a1hop.Client, *a2aclient.Client) {
	t.Helper()
	cfg.Agent = agent
	hc, err := a2a1hop.NewClient(cfg)
	require.NoError(t, err)
	return hc, client(t, base, b, hc)
}

func message(dialog, text string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.ContextID = dialog
	return m
}

// taskOf returns the task a reply is, failing the test for a message.
func taskOf(t *testing.T, res a2a.SendMessageResult) *a2a.Task {
	t.Helper()
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "a %T, not a task: %+v", res, res)
	return task
}

// statusOf returns the signed status in the reply res carries: in a
// Message's metadata, or in the status message of a Task.
func statusOf(res a2a.SendMessageResult) []byte {
	var meta map[string]any
	switch r := res.(type) {
	case *a2a.Message:
		meta = r.Metadata
	case *a2a.Task:
		if r.Status.Message != nil {
			meta = r.Status.Message.Metadata
		}
	}
	st, err := carry.Status(meta)
	if err != nil {
		return nil
	}
	return st
}

// sendRaw sends a message carrying the Handoff object data (JSON) as a
// client that does its own carriage would, through cl with no handoff
// interceptor, and returns the reply.
func sendRaw(ctx context.Context, cl *a2aclient.Client, dialog string, data []byte) (a2a.SendMessageResult, error) {
	var h map[string]any
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, err
	}
	m := message(dialog, "complete")
	m.Metadata = map[string]any{a2a1hop.ExtensionURI: h}
	m.Extensions = []string{a2a1hop.ExtensionURI}
	ctx = a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{a2a.SvcParamExtensions: {a2a1hop.ExtensionURI}})
	return cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 10*time.Millisecond, msg)
}

// dropFirstReply is a proxy in front of next that passes the first
// message/send on and closes the connection instead of answering it: a
// reply lost on the way back.
type dropFirstReply struct {
	next    http.Handler
	dropped atomic.Bool
}

func (d *dropFirstReply) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || d.dropped.Swap(true) {
		d.next.ServeHTTP(rw, r)
		return
	}
	d.next.ServeHTTP(httptest.NewRecorder(), r) // the work is done, the answer goes nowhere
	conn, _, err := http.NewResponseController(rw).Hijack()
	if err == nil {
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
	}
}
