package a2a03hop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/evidence/authority"

	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
)

// coderWork is the coder's own executor: it never sees an offer that failed
// a check, nor one whose package failed. It asks the hop's guard before the
// effect the offer's task names, and returns a refusal as its error.
type coderWork struct{}

func (coderWork) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	in, _ := ha2a.FromContext(ctx)
	action := in.Offer().Task
	if err := evidence.GuardFromContext(ctx).Authorize(ctx, evidence.Call{Hop: in.Digest(), Action: action}); err != nil {
		fmt.Println("coder:", action, "refused:", err)
		return err // the hop ends "failed", no refs: the work took no effect
	}
	fmt.Println("coder:", action, "for", in.Offer().Iss, "chain", in.Chain())
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev) // the wrapper attaches the signed "completed" (HC-29)
}

func (coderWork) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// patchPackage is the handoff package of the work: the coder may write the
// patch, never push to main.
func patchPackage() evidence.Package {
	return evidence.Package{
		Sender: evidence.Party{Role: "planner"}, Receiver: evidence.Party{Role: "coder"},
		Control:      evidence.SpecialistReturnsResult,
		Outcome:      evidence.Outcome{Result: "a patch for the off-by-one in pager.go", DoneWhen: "the pager tests pass"},
		Authority:    evidence.Authority{Allowed: []string{"write_patch"}, Denied: []string{"push_main"}},
		State:        []evidence.StateClaim{{System: "git", State: "main at 4f2c9e1, tests failing", AsOf: time.Now()}},
		Next:         evidence.NextAction{Action: "write_patch", Description: "fix the loop bound in pager.go"},
		Verification: evidence.Verification{Check: "go test ./pager passes"},
		Timeouts:     []evidence.Timeout{{Condition: "no patch before the offer expires", Owner: "planner"}},
		Rollback:     evidence.Rollback{Method: "discard the patch"},
	}
}

// A planner sends work to a coder over A2A 0.3 (JSON-RPC on loopback HTTP),
// with the handoff package beside each offer. The coder's executor is
// wrapped and its package checked before it runs; the planner's client has
// the interceptor. The allowed patch completes; the denied push is refused
// by the hop's guard and ends its hop "failed", which the planner resolves.
func Example() {
	ctx := context.Background()
	plannerID, coderID := handoff.AgentID("spiffe://a.example/planner"), handoff.AgentID("spiffe://b.example/coder")

	pk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ck, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ps, _ := handoff.NewSigner(pk, handoff.COSE, nil)
	cs, _ := handoff.NewSigner(ck, handoff.JWS, nil)
	trust, _ := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{plannerID: {ps.Key()}, coderID: {cs.Key()}})
	plannerAgent, _ := handoff.NewAgent(handoff.Config{ID: plannerID, Signer: ps, Trust: trust})
	coderAgent, _ := handoff.NewAgent(handoff.Config{ID: coderID, Signer: cs, Trust: trust})

	// The delegate: the package beside each offer is checked, and gives
	// the hop's guard over the authority ledger.
	exec, err := ha2a.NewExecutor(ha2a.ServerConfig{Agent: coderAgent, Executor: coderWork{},
		Evidence: &evidence.HostConfig{Guard: evidence.GuardConfig{Ledger: authority.NewMemory()}}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(ha2a.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(r *http.Request) (handoff.AgentID, bool) {
			// Stands in for mutual TLS or OAuth: who is calling.
			return plannerID, r.Header.Get("Authorization") == "Bearer planner-token"
		}))
	defer srv.Close()

	// The delegator.
	hc, _ := ha2a.NewClient(ha2a.ClientConfig{Agent: plannerAgent})
	client, _ := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: srv.URL}},
		a2aclient.WithInterceptors(token("planner-token"), hc))
	defer client.Destroy()

	for _, action := range []string{"write_patch", "push_main"} {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "fix the off-by-one in pager.go"})
		msg.ContextID = "ctx-7c1e" // the dialog
		d, err := hc.Send(ctx, client, msg, handoff.OfferParams{To: coderID, Task: action,
			Deliver: evidence.NewBuilder(patchPackage()).Deliver(evidence.BuildOptions{})})
		if err != nil {
			panic(err)
		}
		for _, s := range d.Statuses {
			fmt.Printf("planner: %q (reason %q) signed by %s\n", s.State, s.Status.Reason, s.Status.Iss)
		}
	}
	// Output:
	// coder: write_patch for spiffe://a.example/planner chain full
	// planner: "accepted" (reason "") signed by spiffe://b.example/coder
	// planner: "completed" (reason "") signed by spiffe://b.example/coder
	// coder: push_main refused: evidence: action denied: "push_main"
	// planner: "accepted" (reason "") signed by spiffe://b.example/coder
	// planner: "failed" (reason "policy") signed by spiffe://b.example/coder
}

type token string

func (t token) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + string(t)}
	return ctx, nil
}

func (token) After(context.Context, *a2aclient.Response) error { return nil }
