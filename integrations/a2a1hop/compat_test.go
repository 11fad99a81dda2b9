package a2a1hop_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacyclient "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/a2a03hop"
	"github.com/agentproto/handoff/integrations/a2a1hop"
	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/internal/a2acore/a2atest"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
)

// legacyBearer is bearer for an A2A 0.3 client.
type legacyBearer struct {
	legacyclient.PassthroughInterceptor
	id handoff.AgentID
}

func (b legacyBearer) Before(ctx context.Context, req *legacyclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + string(b.id)}
	return ctx, nil
}

// An A2A 0.3 client with the a2a03hop interceptor, against an A2A 1.0
// server with the a2a1hop executor behind the SDK's compatibility layer
// (a2acompat/a2av0): the Handoff arrives intact, the extension is
// requested, the statuses come back verified, a retransmission gets the
// identical octets, and a "canceled" for another hop is refused while its
// own cancels the task (HC-28, HC-38, HC-66).
func TestA2A1_ServesA2A03Clients_ThroughA2av0(t *testing.T) {
	const (
		alice = handoff.AgentID("spiffe://a.example/alice")
		bob   = handoff.AgentID("spiffe://b.example/bob")
	)
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: alice, Format: handoff.JWS}, agenttest.Spec{ID: bob, Format: handoff.COSE},
		agenttest.Spec{ID: a2atest.Coder, Format: handoff.JWS})
	hold := make(chan struct{})
	w := &a2atest.Work{}
	d := &a2atest.Delegate{Agent: ps[a2atest.Coder].Agent, Work: w}
	w.Do(func(ctx context.Context, in *handoff.Received, x a2atest.Exec) error {
		if in.Offer().Iss != bob {
			return x.Write(ctx, a2acore.Completed)
		}
		close(hold)
		<-ctx.Done()
		return nil
	})
	exec, err := a2a1hop.NewExecutor(a2a1hop.ServerConfig{Agent: ps[a2atest.Coder].Agent, Executor: executor{w},
		OnReceive: func(ctx context.Context, in *handoff.Received) {
			exts, ok := a2asrv.ExtensionsFrom(ctx)
			d.OnReceive(ctx, in, ok && exts.Requested(a2a1hop.Extension))
		}})
	require.NoError(t, err)
	srv := httptest.NewServer(a2a1hop.Authenticate(a2av0.NewJSONRPCHandler(a2asrv.NewHandler(exec)), who))
	t.Cleanup(srv.Close)

	dial03 := func(id handoff.AgentID, c *a2a03hop.Client, polling bool) *legacyclient.Client {
		cl, err := legacyclient.NewFromEndpoints(ctx, []legacy.AgentInterface{{Transport: legacy.TransportProtocolJSONRPC, URL: srv.URL}},
			legacyclient.WithConfig(legacyclient.Config{Polling: polling}),
			legacyclient.WithInterceptors(legacyBearer{id: id}, c))
		require.NoError(t, err)
		t.Cleanup(func() { cl.Destroy() })
		return cl
	}
	text03 := func(s string) *legacy.Message {
		m := legacy.NewMessage(legacy.MessageRoleUser, legacy.TextPart{Text: s})
		m.ContextID = a2atest.Dialog
		return m
	}
	ac, err := a2a03hop.NewClient(a2a03hop.ClientConfig{Agent: ps[alice].Agent})
	require.NoError(t, err)
	toA := dial03(alice, ac, false)
	dl, err := ac.Send(ctx, toA, text03("x"), handoff.OfferParams{To: a2atest.Coder})
	require.NoError(t, err)
	task, ok := dl.Result.(*legacy.Task)
	require.True(t, ok, "%T", dl.Result)
	require.Equal(t, legacy.TaskStateCompleted, task.Status.State)
	require.Equal(t, state.Completed, dl.State)
	var states []state.State
	for _, s := range dl.Statuses {
		require.NoError(t, s.Err())
		states = append(states, s.State)
	}
	require.Contains(t, states, state.Completed)
	require.Equal(t, []bool{true}, d.Requested(), "the 0.3 client's extension request reached the 1.0 server")
	require.Equal(t, handoff.ChainFull, w.Seen()[0].Chain())

	last, err := carry.Status(task.Status.Message.Metadata)
	require.NoError(t, err)
	res, sts, err := ac.Retransmit(ctx, toA, text03("x"), dl.Hop)
	require.NoError(t, err)
	m, ok := res.(*legacy.Message)
	require.True(t, ok, "%T", res)
	again, err := carry.Status(m.Metadata)
	require.NoError(t, err)
	require.True(t, bytes.Equal(last, again), "other status octets for a retransmission")
	require.Len(t, sts, 1)
	require.EqualValues(t, 1, w.Calls.Load())

	bc, err := a2a03hop.NewClient(a2a03hop.ClientConfig{Agent: ps[bob].Agent})
	require.NoError(t, err)
	toB := dial03(bob, bc, true)
	db, err := bc.Send(ctx, toB, text03("y"), handoff.OfferParams{To: a2atest.Coder})
	require.NoError(t, err)
	<-hold
	bobTask, ok := bc.TaskOf(db.Hop)
	require.True(t, ok)
	cn, err := ps[alice].Agent.Cancel(ctx, dl.Hop)
	require.NoError(t, err)
	_, err = toA.CancelTask(a2a03hop.WithCancel(ctx, cn.Status), &legacy.TaskIDParams{ID: bobTask})
	require.Error(t, err, "Alice's \"canceled\" canceled Bob's task")
	require.Zero(t, w.Cancels.Load())
	got, err := toB.GetTask(ctx, &legacy.TaskQueryParams{ID: bobTask})
	require.NoError(t, err)
	require.Equal(t, legacy.TaskStateWorking, got.Status.State)
	canceled, _, err := bc.Cancel(ctx, toB, db.Hop)
	require.NoError(t, err)
	require.Equal(t, legacy.TaskStateCanceled, canceled.Status.State)
	require.EqualValues(t, 1, w.Cancels.Load())
	require.EqualValues(t, 2, w.Calls.Load())
}
