// Command a2a hands work from a planner to a coder over A2A, through the
// a2a-go SDK's JSON-RPC server and client on loopback HTTP, with the
// handoff middleware of github.com/agentproto/handoff/integrations/a2a03hop
// (draft section "Carrying the Element", HC-66).
//
// The coder's own executor is wrapped by ha2a.NewExecutor: it runs only for
// an offer that passed every check of the draft, and each state it writes
// gets the signed status of the matching hop state (HC-29). The planner's
// client has the ha2a.Client interceptor: it puts the Handoff in
// Message.metadata, lists the extension in Message.extensions and in the
// A2A-Extensions service parameter, and verifies every status that comes
// back. Neither side handles a handoff by hand.
//
// Run it with:
//
//	cd examples && go run ./a2a
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
	dialog  = "ctx-7c1e" // the A2A contextId
	// plannerToken is the bearer token the coder's endpoint knows the
	// planner by. It stands in for whatever authenticates the caller in a
	// deployment (mutual TLS, OAuth).
	plannerToken = "planner-token"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "a2a:", err)
		os.Exit(1)
	}
}

// coderWork is the coder's own executor: the work, and nothing about
// handoffs.
type coderWork struct{ w io.Writer }

func (c coderWork) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	in, _ := ha2a.FromContext(ctx) // the verified, accepted offer
	fmt.Fprintf(c.w, "coder: working on hop %s from %s (chain %s)\n", in.Offer().Hop, in.Offer().Iss, in.Chain())
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev) // the wrapper attaches the signed "completed"
}

func (c coderWork) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// token adds the planner's credentials to every call.
type token struct {
	a2aclient.PassthroughInterceptor
}

func (token) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + plannerToken}
	return ctx, nil
}

func run(out io.Writer) error {
	w := &syncWriter{w: out}
	ctx := context.Background()
	plannerAgent, coderAgent, err := newAgents()
	if err != nil {
		return err
	}

	// The coder: one wrapper around its executor.
	exec, err := ha2a.NewExecutor(ha2a.ServerConfig{
		Agent:    coderAgent,
		Executor: coderWork{w: w},
		OnReceive: func(ctx context.Context, in *handoff.Received) {
			requested := false
			if exts, ok := a2asrv.ExtensionsFrom(ctx); ok {
				requested = exts.Requested(ha2a.Extension)
			}
			switch {
			case in.Retransmission():
				fmt.Fprintf(w, "coder: hop %s is a retransmission, not processed again\n", in.Refused().Hop)
			case !in.Accepted():
				fmt.Fprintf(w, "coder: rejected: %s (%s); the executor does not run\n", in.Reason(), in.Detail())
			default:
				fmt.Fprintf(w, "coder: A2A-Extensions asks for the handoff extension: %v\n", requested)
			}
		},
	})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(ha2a.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(r *http.Request) (handoff.AgentID, bool) {
			return planner, r.Header.Get("Authorization") == "Bearer "+plannerToken
		}))
	defer srv.Close()

	// The planner: one interceptor on its client.
	hc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: plannerAgent})
	if err != nil {
		return err
	}
	client, err := a2aclient.NewFromEndpoints(ctx,
		[]a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: srv.URL}},
		a2aclient.WithInterceptors(token{}, hc))
	if err != nil {
		return err
	}
	defer client.Destroy()

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "fix the off-by-one in pager.go"})
	msg.ContextID = dialog
	d, err := hc.Send(ctx, client, msg, handoff.OfferParams{To: coder, Task: "write-patch"})
	if err != nil {
		return err
	}
	for _, s := range d.Statuses {
		if s.Err() != nil {
			return fmt.Errorf("status refused: %w", s.Err())
		}
		fmt.Fprintf(w, "planner: verified status %q signed by %s; hop is %s\n", s.Status.State, s.Status.Iss, s.State)
	}
	info, _, err := plannerAgent.Hop(ctx, d.Hop)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "planner: hop %s is %s, resolved: %v\n", d.Hop, info.State, info.Resolved)
	last, err := carry.Status(d.Result.(*a2a.Task).Status.Message.Metadata)
	if err != nil {
		return err
	}

	// The reply was lost, say: ask again with the identical octets (HC-37,
	// HC-52). The coder resends its last status unchanged.
	res, sts, err := hc.Retransmit(ctx, client, msg, d.Hop)
	if err != nil {
		return err
	}
	m, ok := res.(*a2a.Message)
	if !ok || len(sts) != 1 || sts[0].Err() != nil {
		return fmt.Errorf("unexpected answer to a retransmission: %v", res)
	}
	resent, err := carry.Status(m.Metadata)
	if err != nil {
		return err
	}
	if !bytes.Equal(resent, last) {
		return errors.New("the retransmission was answered with different status octets")
	}
	fmt.Fprintf(w, "planner: the retransmission got back the identical status octets (%d octets)\n", len(resent))

	// Someone on the path rewrites the task in the signed offer.
	offer, err := plannerAgent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	if err != nil {
		return err
	}
	res, err = client.SendMessage(ha2a.WithHandoff(ctx, tamper(offer.Handoff, "write-patch", "drop-table")),
		&a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "x"})})
	if err != nil {
		return err
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateRejected {
		return fmt.Errorf("the tampered Handoff was not refused: %v", res)
	}
	if _, err := carry.Status(task.Status.Message.Metadata); !errors.Is(err, carry.ErrAbsent) {
		return errors.New("a status came back for an offer whose signature failed")
	}
	fmt.Fprintf(w, "planner: the coder refused it (task %s), with no status\n", task.Status.State)
	return nil
}

// newAgents makes the two agents, each with its own ES256 key and each
// trusting the other's public key.
func newAgents() (p, c *handoff.Agent, err error) {
	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ck, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ps, err := handoff.NewSigner(pk, handoff.JWS, nil)
	if err != nil {
		return nil, nil, err
	}
	cs, err := handoff.NewSigner(ck, handoff.COSE, nil)
	if err != nil {
		return nil, nil, err
	}
	// One trust configuration for both: each AgentID bound to its key.
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{planner: {ps.Key()}, coder: {cs.Key()}})
	if err != nil {
		return nil, nil, err
	}
	if p, err = handoff.NewAgent(handoff.Config{ID: planner, Signer: ps, Trust: trust}); err != nil {
		return nil, nil, err
	}
	if c, err = handoff.NewAgent(handoff.Config{ID: coder, Signer: cs, Trust: trust}); err != nil {
		return nil, nil, err
	}
	return p, c, nil
}

// tamper returns h with from replaced by to in the payload of its JWS
// offer, keeping the original signature.
func tamper(h *handoff.Handoff, from, to string) *handoff.Handoff {
	parts := strings.Split(string(h.Offer.Octets), ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(from), []byte(to), 1))
	return &handoff.Handoff{Offer: handoff.Signed{Format: handoff.JWS, Octets: []byte(strings.Join(parts, "."))}}
}
