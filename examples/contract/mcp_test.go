package contract

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/mcphop"
)

// mcpArgs are a tool's arguments: the names the package gives the
// action's effect, which the middleware keys the call by, and Wait, which
// has the tool wait, before its effect, until its call is canceled.
type mcpArgs struct {
	Invoice        string `json:"invoice"`
	OperationID    string `json:"operation_id,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Wait           bool   `json:"wait,omitempty"`
}

// argsOf are the arguments of a call of action.
func argsOf(action string) mcpArgs {
	return mcpArgs{Invoice: "INV-1042", OperationID: names[action].op, IdempotencyKey: names[action].key}
}

// mcpHandler serves the delegate's actions as MCP tools over streamable
// HTTP: stateless (protocol 2026-07-28) at "/", and with sessions at
// "/session", where a notifications/cancelled belongs to the session of
// the call it cancels. The middleware runs each tool call under the hop's
// guard: a denied, unlisted or repeated call never reaches its tool, and
// a must-ask one pauses for its owner's approval before it does. The tool
// is the effect; the specialist's result goes back with the hop's
// "completed" (mcphop.Report). A tool canceled before its effect reports
// that none took place: the hop ends "failed", no refs.
func (e *env) mcpHandler() (http.Handler, error) {
	mw, err := mcphop.Server(mcphop.ServerConfig{
		Agent: e.agent,
		Peer: func(r *mcp.CallToolRequest) handoff.AgentID {
			if r.Extra != nil && r.Extra.Header.Get("Authorization") == "Bearer "+triageToken {
				return triage
			}
			return ""
		},
		Evidence:  e.evidence(),
		Approvals: &mcphop.Approvals{Key: e.seal, Now: e.now},
		OnCancel: func(_ context.Context, res *handoff.StatusResult) {
			if res.Err() == nil {
				e.count("cancel")
			}
		},
	})
	if err != nil {
		return nil, err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "v1"}, nil)
	server.AddReceivingMiddleware(mw)
	for action := range names {
		mcp.AddTool(server, &mcp.Tool{Name: action}, func(ctx context.Context, _ *mcp.CallToolRequest, a mcpArgs) (*mcp.CallToolResult, any, error) {
			e.count("handler")
			in, _ := mcphop.FromContext(ctx)
			if a.Wait {
				select {
				case <-ctx.Done():
					// Canceled before its effect: none took place.
					mcphop.Report(ctx, mcphop.Outcome{Effect: state.EffectNone})
					return nil, nil, context.Cause(ctx)
				case <-time.After(10 * time.Second):
				}
			}
			refs, err := e.effect(in, action)
			if err != nil {
				return nil, nil, err
			}
			if refs != nil {
				mcphop.Report(ctx, mcphop.Outcome{Effect: state.EffectFull, Refs: refs})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: action + " done"}}}, nil, nil
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	mux.Handle("/session", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	return mux, nil
}

type withToken struct{ next http.RoundTripper }

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+triageToken)
	return t.next.RoundTrip(r)
}

// mcpDelegator is the delegator's MCP client to one delegate process. Its
// elicitation handler is the approval's owner: it calls answer.
type mcpDelegator struct {
	t       *testing.T
	hc      *mcphop.Client
	session *mcp.ClientSession
	answer  func(pending map[string]any) string
	asked   int
}

func dialMCP(t *testing.T, w *world, url string) *mcpDelegator {
	t.Helper()
	hc, err := mcphop.NewClient(mcphop.ClientConfig{Agent: w.agent})
	if err != nil {
		t.Fatal(err)
	}
	c := &mcpDelegator{t: t, hc: hc, answer: func(map[string]any) string { return "approve" }}
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		p, ok := mcphop.PendingApproval(r.Params)
		if !ok {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		c.asked++
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": c.answer(p)}}, nil
	}}
	client := mcp.NewClient(&mcp.Implementation{Name: "triage", Version: "v1"}, opts)
	client.AddSendingMiddleware(hc.Middleware())
	c.session, err = client.Connect(context.Background(), hc.Transport(&mcp.StreamableClientTransport{Endpoint: url,
		DisableStandaloneSSE: !strings.HasSuffix(url, "/session"), HTTPClient: &http.Client{Transport: withToken{http.DefaultTransport}}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.session.Close() })
	return c
}

func (c *mcpDelegator) call(p handoff.OfferParams) *mcphop.Delivery {
	c.t.Helper()
	return c.callWith(context.Background(), p, argsOf(p.Task))
}

func (c *mcpDelegator) callWith(ctx context.Context, p handoff.OfferParams, a mcpArgs) *mcphop.Delivery {
	c.t.Helper()
	p.Dialog = "case-77" // MCP has no dialog of its own: the offer names one
	d, err := c.hc.Call(ctx, c.session, &mcp.CallToolParams{Name: p.Task, Arguments: a}, p)
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

// retransmit asks for the hop's last status.
func (c *mcpDelegator) retransmit(d *mcphop.Delivery) []*handoff.StatusResult {
	c.t.Helper()
	_, sts, err := c.hc.Retransmit(context.Background(), c.session, &mcp.CallToolParams{Name: d.Offer.Offer.Task}, d.Hop)
	if err != nil {
		c.t.Fatal(err)
	}
	return sts
}

func requireState(t *testing.T, what string, got, want state.State) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: the hop is %q, want %q", what, got, want)
	}
}

// TestContract_MCP is the contract's test over MCP.
func TestContract_MCP(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)

	// The main run.
	d := w.startDelegate("mcp")
	c := dialMCP(t, w, d.url)

	dl := c.call(offer(actRead, ledgerEntry, evidence.TransferOwnership))
	requireState(t, "allowed", dl.State, state.Completed)
	w.record("allowed", dl.Offer, state.Completed, "", authority.Accepted).took()
	if sts := c.retransmit(dl); len(sts) != 1 || sts[0].State != state.Completed {
		t.Fatalf("a retransmission of the completed hop: %v", sts)
	}

	for _, refused := range []struct{ name, action string }{
		{"denied", actCharge}, {"unlisted", actUnknown}, {"already performed", actNotify},
	} {
		dl := c.call(offer(refused.action, ledgerEntry, evidence.TransferOwnership))
		requireState(t, refused.name, dl.State, state.Failed)
		w.record(refused.name, dl.Offer, state.Failed, reason.Policy, authority.Accepted)
	}

	var pending map[string]any
	c.answer = func(p map[string]any) string { pending = p; return "approve" }
	dl = c.call(offer(actRefund, ledgerEntry, evidence.TransferOwnership))
	requireState(t, "must ask, approved", dl.State, state.Completed)
	if c.asked != 1 || pending["action"] != actRefund || pending["owner"] != owner || pending["hop"] != dl.Offer.Digest.String() {
		t.Errorf("the owner was asked %d times, for %v", c.asked, pending)
	}
	w.record("must ask", dl.Offer, state.Completed, "", authority.Accepted).took().approvals = 1

	dl = c.call(offer(actRead, staleEntry, evidence.TransferOwnership))
	requireState(t, "stale", dl.State, state.Rejected)
	w.record("stale state", dl.Offer, state.Rejected, reason.Policy, authority.Rejected, string(evidence.CodeArtifactMismatch))
	dl = c.call(restricted(actRead))
	requireState(t, "restricted", dl.State, state.Rejected)
	w.record("restricted data", dl.Offer, state.Rejected, reason.Policy, authority.Rejected, string(evidence.CodeRestricted))

	// The tool runs only for a call the guard allowed: the allowed read
	// and the approved refund, once each; the paused call never reached it.
	requireCounts(t, d.counts(), map[string]int{"handler": 2, actRead: 1, actRefund: 1, actCharge: 0, actUnknown: 0, actNotify: 0})
	d.kill()

	// Timeout: the owner answers once the offer expired.
	d = w.startDelegate("mcp")
	c = dialMCP(t, w, d.url)
	c.answer = func(map[string]any) string {
		d.advance(31 * time.Second)
		return "approve"
	}
	dl = c.call(offer(actRefund, ledgerEntry, evidence.TransferOwnership))
	requireState(t, "timeout, answered late", dl.State, state.Failed)
	requireOverdue(t, dl.Offer)
	w.record("timeout", dl.Offer, state.Failed, reason.Policy, authority.Accepted)
	requireCounts(t, d.counts(), map[string]int{"handler": 0, actRefund: 0})
	d.kill()

	// Cancellation of a call in flight, on a session: the delegator's
	// signed "canceled" rides in notifications/cancelled, and the tool,
	// stopped before its effect, reports none. The SDK ends the tool's
	// context before the middleware sees the notification, so that the
	// tool's "failed" and the "canceled" may cross (draft section 5.5):
	// the delegate keeps the first it knew.
	d = w.startDelegate("mcp")
	c = dialMCP(t, w, d.url+"/session")
	calls := make(chan *mcphop.Delivery, 1)
	go func() {
		args := argsOf(actRead)
		args.Wait = true
		dl, _ := c.hc.Call(ctx, c.session, &mcp.CallToolParams{Name: actRead, Arguments: args},
			handoff.OfferParams{To: payments, Dialog: "case-77", Task: actRead, TTL: 30 * time.Second,
				Deliver: offer(actRead, ledgerEntry, evidence.TransferOwnership).Deliver})
		calls <- dl
	}()
	for d.counts()["handler"] == 0 { // the tool runs
		time.Sleep(10 * time.Millisecond)
	}
	open, err := w.agent.Unresolved(ctx)
	if err != nil || len(open) != 1 {
		t.Fatalf("unresolved hops: %v %v", open, err)
	}
	if _, err := c.hc.Cancel(ctx, open[0].Hop); err != nil {
		t.Fatal(err)
	}
	if dl = <-calls; dl == nil { // MCP asks the delegate not to answer a cancellation
		t.Fatal("the canceled call made no delivery")
	}
	var sts []*handoff.StatusResult
	for range 50 { // the delegator learns the outcome by asking again
		if sts = c.retransmit(dl); len(sts) == 1 && sts[0].State == state.Failed {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(sts) != 1 || sts[0].State != state.Failed || len(sts[0].Status.Refs) != 0 {
		t.Fatalf("a retransmission of the canceled hop: %v", sts)
	}
	// The call was claimed under the hop before the tool ran: an effect
	// for the ledger, whatever became of it; the tool's report says none.
	w.record("canceled", dl.Offer, state.Failed, "", authority.Accepted).took().canceled(true)
	requireCounts(t, d.counts(), map[string]int{"handler": 1, "cancel": 1, actRead: 0})
	d.kill()

	// Return to sender.
	d = w.startDelegate("mcp")
	c = dialMCP(t, w, d.url)
	dl = c.call(offer(actReport, ledgerEntry, evidence.SpecialistReturnsResult))
	requireState(t, "return", dl.State, state.Completed)
	requireResult(t, w, dl.Statuses[len(dl.Statuses)-1].Status, dl.Offer)
	w.record("return to sender", dl.Offer, state.Completed, "", authority.Accepted).took()
	requireCounts(t, d.counts(), map[string]int{"handler": 1, actReport: 1})
	d.kill()

	w.readBack()
}
