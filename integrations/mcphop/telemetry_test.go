package mcphop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/internal/agenttest"
	hmcp "github.com/agentproto/handoff/integrations/mcphop"
	"github.com/agentproto/handoff/integrations/observe"
)

func TestMCP_Telemetry_SpansAndCounters(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	rec, err := observe.New(observe.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	require.NoError(t, err)

	ps := agenttest.New(t, agenttest.Spec{ID: planner, Format: handoff.JWS}, agenttest.Spec{ID: coder, Format: handoff.JWS})
	co := newNode(t, ps[coder], planner, rec)
	pc, err := hmcp.NewClient(hmcp.ClientConfig{Agent: ps[planner].Agent, Observe: rec})
	require.NoError(t, err)
	s := connect(t, pc, co.server, false)

	d, err := pc.Call(ctx, s, call("x"), handoff.OfferParams{To: coder, Dialog: dialog})
	require.NoError(t, err)
	_, _, err = pc.Retransmit(ctx, s, call("x"), d.Hop)
	require.NoError(t, err)
	out, err := ps[planner].Agent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: "write-patch"})
	require.NoError(t, err)
	_, err = s.CallTool(hmcp.WithHandoff(ctx, agenttest.Tamper(t, out.Handoff, "write-patch", "drop-table!")), call("x"))
	require.NoError(t, err)

	type got struct{ decision, reason, check string }
	var receives []got
	statuses := map[string]int{}
	for _, sp := range spans.Ended() {
		a := attrs(sp.Attributes())
		switch sp.Name() {
		case observe.SpanReceive:
			receives = append(receives, got{a["handoff.decision"], a["handoff.reason"], a["handoff.check"]})
		case observe.SpanStatus:
			statuses[a["handoff.direction"]+"/"+a["handoff.state"]+"/"+a["handoff.decision"]]++
		}
	}
	require.Equal(t, []got{
		{"accepted", "", "none"},
		{"retransmission", "", "memory"},
		{"rejected", "bad-signature", "signature"},
	}, receives)
	require.Equal(t, map[string]int{
		// No "accepted": the hop was taken before the tool ran, and the
		// call's one reply carries "completed", which implies it.
		"sent/completed/signed":       2, // the answer and its resend
		"received/completed/verified": 2,
	}, statuses)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != observe.MetricReceive {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				dec, _ := dp.Attributes.Value("handoff.decision")
				rs, _ := dp.Attributes.Value("handoff.reason")
				counts[dec.AsString()+"/"+rs.AsString()] += dp.Value
			}
		}
	}
	require.Equal(t, map[string]int64{"accepted/": 1, "retransmission/": 1, "rejected/bad-signature": 1}, counts)
}

func attrs(kv []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}
