package contract

import (
	"context"
	"iter"
	"net/http"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a1hop"
)

// a2aWork is the delegate's executor over A2A 1.0: it takes the action
// from the hop's offer, asks the hop's guard, pauses for an approval the
// guard asks for, returns any other refusal as its error, and returns the
// specialist's result with the hop's "completed".
type a2aWork struct{ e *env }

func (x a2aWork) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		x.e.count("handler")
		in, _ := a2a1hop.FromContext(ctx)
		action := in.Offer().Task
		err := x.e.ask(ctx, in, action)
		if ev, ok := a2a1hop.AskApproval(ctx, ec, err); ok {
			yield(ev, nil)
			return
		}
		if err != nil {
			yield(nil, err)
			return
		}
		refs, err := x.e.effect(in, action)
		if err != nil {
			yield(nil, err)
			return
		}
		if refs != nil {
			a2a1hop.Report(ctx, a2a1hop.Outcome{Effect: state.EffectFull, Refs: refs})
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// Cancel ends the task. The wrapper signs the canceled hop's outcome on
// it: the paused hop took no effect, which the authority ledger knows
// (no effect of the hop in it, none possible once the "canceled" is
// recorded), so "failed" with no refs (HC-44).
func (x a2aWork) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		x.e.count("cancel")
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (e *env) a2aHandler() (http.Handler, error) {
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: e.agent, Executor: a2aWork{e},
		Evidence:  e.evidence(),
		Approvals: &a2a1hop.Approvals{Key: e.seal, Now: e.now}})
	if err != nil {
		return nil, err
	}
	return a2a1hop.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)), bearerPeer), nil
}

type bearer struct {
	a2aclient.PassthroughInterceptor
}

func (bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+triageToken)
	return ctx, nil, nil
}

// a2aDelegator is the delegator's A2A 1.0 client to one delegate process.
type a2aDelegator struct {
	t  *testing.T
	hc *a2a1hop.Client
	cl *a2aclient.Client
}

func dialA2A(t *testing.T, w *world, url string) *a2aDelegator {
	t.Helper()
	hc, err := a2a1hop.NewClient(a2a1hop.ClientConfig{Agent: w.agent})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(url, a2a.TransportProtocolJSONRPC)}, a2aclient.WithCallInterceptors(bearer{}, hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Destroy() })
	return &a2aDelegator{t: t, hc: hc, cl: cl}
}

func (c *a2aDelegator) send(p handoff.OfferParams) (*a2a1hop.Delivery, *a2a.Task) {
	c.t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(p.Task))
	msg.ContextID = "case-77"
	d, err := c.hc.Send(context.Background(), c.cl, msg, p)
	if err != nil {
		c.t.Fatal(err)
	}
	task, ok := d.Result.(*a2a.Task)
	if !ok {
		c.t.Fatalf("%s: the delegate answered %T, not a task", p.Task, d.Result)
	}
	return d, task
}

// answer sends the owner's answer to the paused task on its hop.
func (c *a2aDelegator) answer(d *a2a1hop.Delivery, task *a2a.Task, decision string) *a2a.Task {
	c.t.Helper()
	m, err := a2a1hop.Answer(task, decision, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	res, _, err := c.hc.Retransmit(context.Background(), c.cl, m, d.Hop)
	if err != nil {
		c.t.Fatal(err)
	}
	resumed, ok := res.(*a2a.Task)
	if !ok {
		c.t.Fatalf("the answer got %T, not the task", res)
	}
	return resumed
}

// lastStatus asks the delegate again for the status of hop (HC-37), and
// returns the one it answers with.
func lastStatus(t *testing.T, hc *a2a1hop.Client, cl *a2aclient.Client, hop handoff.HopID) state.State {
	t.Helper()
	_, sts, err := hc.Retransmit(context.Background(), cl, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("again")), hop)
	if err != nil || len(sts) != 1 || sts[0].Err() != nil {
		t.Fatalf("a retransmission of hop %s: %v %v", hop, sts, err)
	}
	return sts[0].State
}

// requireResolved checks that the delegator holds hop in state want,
// resolved.
func requireResolved(t *testing.T, w *world, hop handoff.HopID, want state.State) {
	t.Helper()
	info, ok, err := w.agent.Hop(context.Background(), hop)
	if err != nil || !ok || info.State != want || !info.Resolved {
		t.Fatalf("hop %s: %q (resolved %v), want %q, resolved: %v", hop, info.State, info.Resolved, want, err)
	}
}

func requireTask(t *testing.T, what string, task *a2a.Task, want a2a.TaskState) {
	t.Helper()
	if task.Status.State != want {
		t.Fatalf("%s: task %s, want %s", what, task.Status.State, want)
	}
}

// TestContract_A2A1 is the contract's test over A2A 1.0.
func TestContract_A2A1(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)

	// The main run.
	d := w.startDelegate("a2a")
	c := dialA2A(t, w, d.url)

	dl, task := c.send(offer(actRead, ledgerEntry, evidence.TransferOwnership))
	requireTask(t, "allowed", task, a2a.TaskStateCompleted)
	requireAcknowledged(t, dl.Statuses[0].Status, dl.Offer)
	w.record("allowed", dl.Offer, state.Completed, "", authority.Accepted).took()
	requireState(t, "allowed, asked again", lastStatus(t, c.hc, c.cl, dl.Hop), state.Completed)

	for _, refused := range []struct{ name, action string }{
		{"denied", actCharge}, {"unlisted", actUnknown}, {"already performed", actNotify},
	} {
		dl, task := c.send(offer(refused.action, ledgerEntry, evidence.TransferOwnership))
		requireTask(t, refused.name, task, a2a.TaskStateFailed)
		w.record(refused.name, dl.Offer, state.Failed, reason.Policy, authority.Accepted)
	}

	dl, task = c.send(offer(actRefund, ledgerEntry, evidence.TransferOwnership))
	requireTask(t, "must ask", task, a2a.TaskStateInputRequired)
	requirePending(t, task.Status.Message, dl.Offer)
	requireTask(t, "must ask, approved", c.answer(dl, task, "approve"), a2a.TaskStateCompleted)
	w.record("must ask", dl.Offer, state.Completed, "", authority.Accepted).took().approvals = 1

	// Rejected before any work: a package whose ledger entry is no longer
	// the system of record's, and one that carries a credential.
	dl, task = c.send(offer(actRead, staleEntry, evidence.TransferOwnership))
	requireTask(t, "stale", task, a2a.TaskStateRejected)
	w.record("stale state", dl.Offer, state.Rejected, reason.Policy, authority.Rejected, string(evidence.CodeArtifactMismatch))
	dl, task = c.send(restricted(actRead))
	requireTask(t, "restricted", task, a2a.TaskStateRejected)
	w.record("restricted data", dl.Offer, state.Rejected, reason.Policy, authority.Rejected, string(evidence.CodeRestricted))

	requireCounts(t, d.counts(), map[string]int{"handler": 6, actRead: 1, actRefund: 1, actCharge: 0, actUnknown: 0, actNotify: 0})
	d.kill()

	// Timeout: the approval comes once the offer expired.
	d = w.startDelegate("a2a")
	c = dialA2A(t, w, d.url)
	dl, task = c.send(offer(actRefund, ledgerEntry, evidence.TransferOwnership))
	requireTask(t, "timeout", task, a2a.TaskStateInputRequired)
	requireOverdue(t, dl.Offer)
	d.advance(31 * time.Second)
	requireTask(t, "timeout, answered late", c.answer(dl, task, "approve"), a2a.TaskStateFailed)
	w.record("timeout", dl.Offer, state.Failed, reason.Policy, authority.Accepted)
	requireCounts(t, d.counts(), map[string]int{"handler": 1, actRefund: 0})
	d.kill()

	// Cancellation of the paused hop.
	d = w.startDelegate("a2a")
	c = dialA2A(t, w, d.url)
	dl, task = c.send(offer(actRefund, ledgerEntry, evidence.TransferOwnership))
	requireTask(t, "cancel", task, a2a.TaskStateInputRequired)
	canceled, _, err := c.hc.Cancel(ctx, c.cl, dl.Hop)
	if err != nil {
		t.Fatal(err)
	}
	requireTask(t, "canceled", canceled, a2a.TaskStateCanceled)
	// The canceled task carries the outcome, and so does asking again.
	requireResolved(t, w, dl.Hop, state.Failed)
	requireState(t, "canceled, asked again", lastStatus(t, c.hc, c.cl, dl.Hop), state.Failed)
	w.record("canceled", dl.Offer, state.Failed, "", authority.Accepted).canceled(false)
	requireCounts(t, d.counts(), map[string]int{"handler": 1, "cancel": 1, actRefund: 0})
	d.kill()

	// Return to sender: the specialist's result, named by digest in its
	// "completed".
	d = w.startDelegate("a2a")
	c = dialA2A(t, w, d.url)
	dl, task = c.send(offer(actReport, ledgerEntry, evidence.SpecialistReturnsResult))
	requireTask(t, "return", task, a2a.TaskStateCompleted)
	requireResult(t, w, dl.Statuses[len(dl.Statuses)-1].Status, dl.Offer)
	w.record("return to sender", dl.Offer, state.Completed, "", authority.Accepted).took()
	requireCounts(t, d.counts(), map[string]int{"handler": 1, actReport: 1})
	d.kill()

	w.readBack()
}

// staleEntry is the invoice's entry as the delegator read it before the
// invoice was paid: the system of record no longer holds it.
var staleEntry = []byte(`{"invoice":"INV-1042","status":"open","amount":"EUR 640.00"}`)

// requireAcknowledged checks that the delegate's first status names the
// package the offer named: it checked that package.
func requireAcknowledged(t *testing.T, st *handoff.Status, out *handoff.Outgoing) {
	t.Helper()
	got, want := evidence.Refs(st.Refs), evidence.Refs(out.Offer.Refs)
	if len(got) != 1 || !got[0].Dig.Equal(want[0].Dig) {
		t.Errorf("the %q names the packages %v, the offer %v", st.State, got, want)
	}
}

// requirePending checks the pending approval of a paused hop against its
// package.
func requirePending(t *testing.T, m *a2a.Message, out *handoff.Outgoing) {
	t.Helper()
	p, ok := a2a1hop.PendingApproval(m)
	if !ok || p["action"] != actRefund || p["owner"] != owner || p["hop"] != out.Digest.String() || p["operation_id"] != names[actRefund].op {
		t.Errorf("the pending approval: %v", p)
	}
}

// requireOverdue checks that at the offer's exp the package's timeout has
// come, naming its owner: the escalation the delegator owes.
func requireOverdue(t *testing.T, out *handoff.Outgoing) {
	t.Helper()
	pkg := refundPackage(out.Offer, ledgerEntry, evidence.TransferOwnership)
	due := pkg.Overdue(out.Offer.Exp.Std())
	if len(due) != 1 || due[0].Owner != "triage" {
		t.Errorf("at the offer's exp the overdue timeouts are %v", due)
	}
}

// requireResult checks the returned "completed" of a specialist: it names
// the package sent and a result that verifies against the report store.
func requireResult(t *testing.T, w *world, st *handoff.Status, out *handoff.Outgoing) {
	t.Helper()
	if st.State != state.Completed {
		t.Fatalf("the specialist returned %q", st.State)
	}
	results, err := evidence.CheckResult(context.Background(), st, evidence.Refs(out.Offer.Refs)[0], resultSource(w.dir))
	if err != nil {
		t.Fatalf("the returned result: %v (%v)", err, results)
	}
	if len(results) != 1 {
		t.Fatalf("%d results", len(results))
	}
}
