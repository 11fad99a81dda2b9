// Package observe records what the handoff middlewares decide as
// OpenTelemetry spans and metrics: a span for each offer received and for
// each status sent or received, carrying the decision, the draft's reason code
// and the check of section 5.1 that decided, and a counter for each.
//
// One trace runs across every hop: a delegator's middleware puts the W3C
// trace context of its call (Inject) beside the Handoff, in A2A
// Message.metadata and MCP params._meta under "traceparent" and
// "tracestate"; the delegate's middleware makes the span of the hop
// (SpanHop, with the hop id and the offer's handoff digest) a child of it
// (StartHop) and runs the work in that span, so that the work's own spans
// and the next hop's join the same trace.
//
// The trace context is not signed and decides nothing. It is not part of
// the Handoff, no check of the draft reads it, and a forged, altered,
// malformed or replayed traceparent changes no verdict and no status: the
// signed chain of offers is the record of the delegation, the trace only
// where telemetry finds it. Never read who delegated what from a trace.
//
// The root module stays free of OpenTelemetry; only the middlewares in this
// module import it. A Recorder built from zero Options records nothing.
package observe

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

// ScopeName is the instrumentation scope of the spans and instruments.
const ScopeName = "github.com/agentproto/handoff/integrations"

// Span names and instrument names.
const (
	SpanReceive = "handoff.receive"
	SpanStatus  = "handoff.status"
	// MetricReceive counts offers received, by decision and reason.
	MetricReceive = "handoff.receive.decisions"
	// MetricStatus counts statuses sent and received, by direction, state,
	// decision and reason.
	MetricStatus = "handoff.status.count"
)

// Attribute keys.
const (
	KeyTransport = attribute.Key("handoff.transport") // "a2a" or "mcp"
	KeyDecision  = attribute.Key("handoff.decision")
	KeyReason    = attribute.Key("handoff.reason")
	KeyCheck     = attribute.Key("handoff.check")
	KeyHop       = attribute.Key("handoff.hop")
	KeyIss       = attribute.Key("handoff.iss")
	KeyChain     = attribute.Key("handoff.chain")
	KeyDirection = attribute.Key("handoff.direction") // "sent" or "received"
	KeyState     = attribute.Key("handoff.state")
	// KeyOfferDigest is the handoff digest of the offer received (HC-20),
	// as "alg:val": the value the next hop's prev names.
	KeyOfferDigest = attribute.Key("handoff.offer.digest")
)

// Decisions recorded for an offer received.
const (
	DecisionAccepted       = "accepted"
	DecisionRejected       = "rejected"
	DecisionRetransmission = "retransmission"
	DecisionEquivocation   = "equivocation"
	DecisionAbsent         = "absent" // the message carried no Handoff
	DecisionError          = "error"  // the store or the context failed: refused
	// For a status received: verified or refused.
	DecisionVerified = "verified"
	DecisionRefused  = "refused"
)

// Options choose the providers. A nil provider records nothing.
type Options struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// Recorder records spans and counters. The zero value and a nil *Recorder
// record nothing. It is safe for concurrent use.
type Recorder struct {
	tracer   trace.Tracer
	receives metric.Int64Counter
	statuses metric.Int64Counter
}

// New returns a Recorder for o.
func New(o Options) (*Recorder, error) {
	tp, mp := o.TracerProvider, o.MeterProvider
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(ScopeName)
	r := &Recorder{tracer: tp.Tracer(ScopeName)}
	var err error
	if r.receives, err = m.Int64Counter(MetricReceive,
		metric.WithDescription("Handoff offers received, by decision and reason code")); err != nil {
		return nil, err
	}
	if r.statuses, err = m.Int64Counter(MetricStatus,
		metric.WithDescription("Handoff statuses sent and received, by direction, state, decision and reason code")); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Recorder) on() bool { return r != nil && r.tracer != nil }

// StartReceive starts the span of one offer received. Call the returned
// function with the outcome of Agent.Receive (in may be nil, for a message
// without a Handoff when err is nil, or a failed Receive).
func (r *Recorder) StartReceive(ctx context.Context, transport string) (context.Context, func(in *handoff.Received, err error)) {
	if !r.on() {
		return ctx, func(*handoff.Received, error) {}
	}
	ctx, span := r.tracer.Start(ctx, SpanReceive, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(KeyTransport.String(transport)))
	return ctx, func(in *handoff.Received, err error) {
		dec, reason, check := Decide(in, err)
		attrs := []attribute.KeyValue{KeyTransport.String(transport), KeyDecision.String(dec), KeyReason.String(string(reason))}
		span.SetAttributes(KeyDecision.String(dec), KeyReason.String(string(reason)), KeyCheck.String(check))
		if in != nil {
			if o := hopwork.Verified(in); o != nil {
				span.SetAttributes(KeyHop.String(string(o.Hop)), KeyIss.String(string(o.Iss)))
			}
			if d := in.Digest(); !d.IsZero() {
				span.SetAttributes(KeyOfferDigest.String(d.String()))
			}
			if c := in.Chain(); c != "" {
				span.SetAttributes(KeyChain.String(string(c)))
			}
		}
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case dec == DecisionRejected || dec == DecisionEquivocation:
			span.SetStatus(codes.Error, string(reason))
		}
		span.End()
		r.receives.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attrs...))
	}
}

// Decide names the decision on an offer received, its reason code and the
// check that decided ("none" when every check passed).
func Decide(in *handoff.Received, err error) (decision string, reason reason.Code, check string) {
	switch {
	case err != nil:
		return DecisionError, handoff.ReasonOf(err), ""
	case in == nil:
		return DecisionAbsent, "", ""
	case in.Retransmission():
		return DecisionRetransmission, "", in.Check().String()
	case in.Equivocation() != "":
		return DecisionEquivocation, in.Reason(), in.Check().String()
	case in.Accepted():
		return DecisionAccepted, "", in.Check().String()
	default:
		return DecisionRejected, in.Reason(), in.Check().String()
	}
}

// StatusSent records a status this agent signed and sent for a hop.
func (r *Recorder) StatusSent(ctx context.Context, transport string, hop handoff.HopID, state state.State, reason reason.Code) {
	if !r.on() {
		return
	}
	_, span := r.tracer.Start(ctx, SpanStatus, trace.WithSpanKind(trace.SpanKindProducer))
	attrs := []attribute.KeyValue{KeyTransport.String(transport), KeyDirection.String("sent"),
		KeyState.String(string(state)), KeyDecision.String("signed"), KeyReason.String(string(reason))}
	span.SetAttributes(append(attrs, KeyHop.String(string(hop)))...)
	span.End()
	r.statuses.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attrs...))
}

// StatusReceived records the outcome of Agent.HandleStatus on a status that
// came back.
func (r *Recorder) StatusReceived(ctx context.Context, transport string, res *handoff.StatusResult, err error) {
	if !r.on() {
		return
	}
	_, span := r.tracer.Start(ctx, SpanStatus, trace.WithSpanKind(trace.SpanKindConsumer))
	dec, state, reason := DecisionVerified, state.State(""), reason.Code("")
	switch {
	case err != nil:
		dec, reason = DecisionError, handoff.ReasonOf(err)
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case res.Err() != nil:
		dec, reason = DecisionRefused, res.Reason()
		span.SetStatus(codes.Error, errorText(res.Err()))
	default:
		st := res.Status
		state, reason = st.State, st.Reason
		span.SetAttributes(KeyHop.String(string(st.Hop)), KeyIss.String(string(st.Iss)))
	}
	attrs := []attribute.KeyValue{KeyTransport.String(transport), KeyDirection.String("received"),
		KeyState.String(string(state)), KeyDecision.String(dec), KeyReason.String(string(reason))}
	span.SetAttributes(attrs...)
	span.End()
	r.statuses.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attrs...))
}

func errorText(err error) string {
	var rj *handoff.Rejection
	if errors.As(err, &rj) {
		return string(rj.Reason)
	}
	return err.Error()
}
