package a2a03hop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentproto/handoff"

	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
)

// coderWork is the coder's own executor: it never sees an offer that failed
// a check.
type coderWork struct{}

func (coderWork) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	in, _ := ha2a.FromContext(ctx)
	fmt.Println("coder: working on hop from", in.Offer().Iss, "chain", in.Chain())
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev) // the wrapper attaches the signed "completed" (HC-29)
}

func (coderWork) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// A planner sends work to a coder over A2A (JSON-RPC on loopback HTTP).
// The coder's executor is wrapped; the planner's client has the
// interceptor.
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

	// The delegate.
	exec, err := ha2a.NewExecutor(ha2a.ServerConfig{Agent: coderAgent, Executor: coderWork{}})
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

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "fix the off-by-one in pager.go"})
	msg.ContextID = "ctx-7c1e" // the dialog
	d, err := hc.Send(ctx, client, msg, handoff.OfferParams{To: coderID, Task: "fix-pager"})
	if err != nil {
		panic(err)
	}
	for _, s := range d.Statuses {
		fmt.Println("planner: status", s.State, "signed by", s.Status.Iss)
	}
	// Output:
	// coder: working on hop from spiffe://a.example/planner chain full
	// planner: status accepted signed by spiffe://b.example/coder
	// planner: status completed signed by spiffe://b.example/coder
}

type token string

func (t token) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + string(t)}
	return ctx, nil
}

func (token) After(context.Context, *a2aclient.Response) error { return nil }
