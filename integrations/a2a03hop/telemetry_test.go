package a2a03hop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/internal/a2acore/a2atest"
	"github.com/agentproto/handoff/integrations/internal/agenttest"
	"github.com/agentproto/handoff/integrations/observe"
)

const (
	planner = a2atest.Planner
	coder   = a2atest.Coder
)

// The spans and counters of an accepted offer, a dialog mismatch and an
// equivocation, on both sides.
func TestA2A03_Telemetry_SpansAndCounters(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	rec, err := observe.New(observe.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	require.NoError(t, err)
	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.COSE}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := a2atest.Serve(t, line{}, ps[coder], func(d *a2atest.Delegate) { d.Observe = rec })
	cl := co.Dial(t, line{}, ps[planner], a2atest.Dial{Observe: rec})

	// accepted, then a dialog mismatch (check 5, "policy"), then an
	// equivocation of the first hop.
	d, err := cl.Send(ctx, a2atest.Text("x"), handoff.OfferParams{To: coder, Task: "one"})
	require.NoError(t, err)
	other, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: "elsewhere"})
	require.NoError(t, err)
	_, _, err = a2atest.SendWith(ctx, cl, other.Handoff, a2atest.Text("x"))
	require.NoError(t, err)
	_, _, err = a2atest.SendWith(ctx, cl, agenttest.Equivocate(t, ps[planner], d.Offer, "two"), a2atest.Text("x"))
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
