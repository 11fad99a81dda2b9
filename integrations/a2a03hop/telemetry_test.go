package a2a03hop_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"

	ha2a "github.com/agentproto/handoff/integrations/a2a03hop"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/observe"
	"github.com/agentproto/handoff/state"
)

func TestA2A_Telemetry_SpansAndCounters(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	rec, err := observe.New(observe.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	require.NoError(t, err)
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], rec)
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent, Observe: rec})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, false)

	// accepted, then a dialog mismatch (check 5, "policy"), then an
	// equivocation of the first hop.
	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder, Task: "one"})
	require.NoError(t, err)
	other, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "elsewhere"})
	require.NoError(t, err)
	_, err = cl.SendMessage(ha2a.WithHandoff(ctx, other.Handoff), &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)
	_, err = cl.SendMessage(ha2a.WithHandoff(ctx, agenttest.Equivocate(t, ps[planner], d.Offer, "two")), &a2a.MessageSendParams{Message: text("x")})
	require.NoError(t, err)

	type got struct{ decision, reason, check string }
	var receives []got
	sent, received := 0, 0
	for _, sp := range spans.Ended() {
		a := map[string]string{}
		for _, kv := range sp.Attributes() {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		switch sp.Name() {
		case observe.SpanReceive:
			require.Equal(t, "a2a", a["handoff.transport"])
			receives = append(receives, got{a["handoff.decision"], a["handoff.reason"], a["handoff.check"]})
		case observe.SpanStatus:
			if a["handoff.direction"] == "sent" {
				sent++
			} else {
				require.Equal(t, "verified", a["handoff.decision"])
				received++
			}
		}
	}
	require.Equal(t, []got{
		{"accepted", "", "none"},
		{"rejected", "policy", "dialog"},
		{"equivocation", "equivocation", "memory"},
	}, receives)
	require.Equal(t, 3, sent, "accepted, completed, rejected")
	require.Equal(t, 3, received)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == observe.MetricReceive {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					rs, _ := dp.Attributes.Value("handoff.reason")
					counts[rs.AsString()] += dp.Value
				}
			}
		}
	}
	require.Equal(t, map[string]int64{"": 1, "policy": 1, "equivocation": 1}, counts)
}

// A Cancel Task request whose "canceled" is not the delegator's is refused
// and changes nothing; with RequireSignedCancel, so is one without any.
func TestA2A_Cancel_Refused_HC55(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS},
		agenttest.Spec{ID: tester, Format: handoff.JWS})
	co := newNode(t, ps[coder], nil)
	co.w.body = func(ctx context.Context, _ *handoff.Received, _ *a2asrv.RequestContext, _ eventqueue.Queue) error {
		<-ctx.Done()
		return nil
	}
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, co, true)
	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder})
	require.NoError(t, err)
	task, ok := pc.TaskOf(d.Hop)
	require.True(t, ok)

	// The tester signs a "canceled" for the planner's hop: not the hop's
	// delegator, refused before it is verified (HC-55).
	st, err := ps[tester].Signer.SignStatus(&handoff.Status{Hop: d.Hop, Offer: d.Offer.Digest, Iss: tester, Aud: coder,
		Iat: handoff.TimeOf(d.Offer.Offer.Iat.Std()), State: state.Canceled})
	require.NoError(t, err)
	_, err = cl.CancelTask(ha2a.WithCancel(ctx, st), &a2a.TaskIDParams{ID: task})
	require.ErrorIs(t, err, a2a.ErrInvalidParams)
	co.mu.Lock()
	require.Empty(t, co.canceled, "a \"canceled\" of another signer was handed to HandleStatus")
	co.mu.Unlock()
	require.Zero(t, co.w.cancels.Load())
	info, _, err := ps[planner].Agent.Hop(ctx, d.Hop)
	require.NoError(t, err)
	require.False(t, info.Canceled)

	// The delegator's own cancel goes through.
	_, _, err = pc.Cancel(ctx, cl, d.Hop)
	require.NoError(t, err)
	co.mu.Lock()
	require.Len(t, co.canceled, 1)
	require.NoError(t, co.canceled[0].Err())
	co.mu.Unlock()
	require.EqualValues(t, 1, co.w.cancels.Load())
}

// With RequireSignedCancel, a Cancel Task request without a "canceled"
// is refused and the task goes on.
func TestA2A_RequireSignedCancel(t *testing.T) {
	ctx := context.Background()
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	w := &work{body: func(ctx context.Context, _ *handoff.Received, _ *a2asrv.RequestContext, _ eventqueue.Queue) error {
		<-ctx.Done()
		return nil
	}}
	exec, err := ha2a.NewExecutor(ha2a.ServerConfig{Agent: ps[coder].Agent, Executor: w, RequireSignedCancel: true})
	require.NoError(t, err)
	n := &node{p: ps[coder], w: w}
	srv := httptest.NewServer(ha2a.Authenticate(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)),
		func(*http.Request) (handoff.AgentID, bool) { return planner, true }))
	defer srv.Close()
	n.url = srv.URL
	pc, err := ha2a.NewClient(ha2a.ClientConfig{Agent: ps[planner].Agent})
	require.NoError(t, err)
	cl := dial(t, planner, pc, n, true)
	d, err := pc.Send(ctx, cl, text("x"), handoff.OfferParams{To: coder})
	require.NoError(t, err)
	task, _ := pc.TaskOf(d.Hop)
	_, err = cl.CancelTask(ctx, &a2a.TaskIDParams{ID: task})
	require.Error(t, err, "a cancel without the delegator's signed status")
	got, err := cl.GetTask(ctx, &a2a.TaskQueryParams{ID: task})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateWorking, got.Status.State)
	_, _, err = pc.Cancel(ctx, cl, d.Hop)
	require.NoError(t, err)
	got, err = cl.GetTask(ctx, &a2a.TaskQueryParams{ID: task})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCanceled, got.Status.State)
	require.EqualValues(t, 1, w.calls.Load())
}
