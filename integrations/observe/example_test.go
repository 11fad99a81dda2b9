package observe_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/observe"
)

// A Recorder records one span per offer received, with the decision, the
// reason code and the check that decided. The middlewares take it in their
// configs (Observe); here it wraps a Receive directly.
func Example() {
	spans := tracetest.NewSpanRecorder()
	rec, err := observe.New(observe.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	a, b := handoff.AgentID("spiffe://a.example/a"), handoff.AgentID("spiffe://b.example/b")
	ka, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	kb, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sa, _ := handoff.NewSigner(ka, handoff.JWS, nil)
	sb, _ := handoff.NewSigner(kb, handoff.COSE, nil)
	trust, _ := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{a: {sa.Key()}, b: {sb.Key()}})
	agentA, _ := handoff.NewAgent(handoff.Config{ID: a, Signer: sa, Trust: trust})
	agentB, _ := handoff.NewAgent(handoff.Config{ID: b, Signer: sb, Trust: trust})

	first, _ := agentA.Offer(ctx, handoff.OfferParams{To: b, Dialog: "d-1"})
	other, _ := agentA.Offer(ctx, handoff.OfferParams{To: b, Dialog: "d-1"})
	w1, _ := first.Handoff.Encode(handoff.JSON)
	w2, _ := other.Handoff.Encode(handoff.JSON)
	for _, d := range []struct {
		wire   []byte
		dialog string
	}{{w1, "d-1"}, {w1, "d-1"}, {w2, "d-2"}} {
		rctx, end := rec.StartReceive(ctx, "example")
		in, err := agentB.Receive(rctx, d.wire, handoff.Host{Dialog: d.dialog, Peer: a})
		end(in, err)
	}
	for _, s := range spans.Ended() {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		fmt.Printf("%s decision=%s check=%s reason=%q\n", s.Name(), attrs["handoff.decision"], attrs["handoff.check"], attrs["handoff.reason"])
	}
	// Output:
	// handoff.receive decision=accepted check=none reason=""
	// handoff.receive decision=retransmission check=memory reason=""
	// handoff.receive decision=rejected check=dialog reason="policy"
}
