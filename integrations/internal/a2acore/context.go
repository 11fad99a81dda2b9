package a2acore

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/hopwork"
)

// What the core puts in a context, for both lines: the packages' FromContext,
// Report, CancelFromContext, WithPeer and WithHandoff read and write these
// keys, so that a context made with one line's helpers is read by the
// other's.
type ctxKey int

const (
	keyReceived ctxKey = iota
	keyOutcome
	keyCancel
	keyPeer
	keyCarried
	keyPauser
)

// ErrEquivocated is the cause of the context of an execution stopped
// because its delegator signed another offer under the same hop (HC-54).
var ErrEquivocated = hopwork.ErrEquivocated

// ErrNotIntercepted is the error of a Client's Send, Retransmit and Cancel
// when the A2A client they were given does not have the Client among its
// interceptors: nothing was attached, whatever the server answered.
var ErrNotIntercepted = errors.New("handoff: the A2A client's interceptors do not include this handoff Client: nothing was attached")

// FromContext returns the Received of the hop the wrapped executor serves:
// the accepted delivery, or the hop's work resumed (Agent.Resume); its
// Offer is never nil.
func FromContext(ctx context.Context) (*handoff.Received, bool) {
	in, ok := ctx.Value(keyReceived).(*handoff.Received)
	return in, ok
}

// CancelFromContext returns, in the wrapped executor's Cancel, the
// verified "canceled" that came with the request.
func CancelFromContext(ctx context.Context) (*handoff.StatusResult, bool) {
	r, ok := ctx.Value(keyCancel).(*handoff.StatusResult)
	return r, ok
}

// Outcome is what the wrapped executor knows of its work's effect
// ("Knowing the Outcome" in the draft).
type Outcome struct {
	Effect state.Effect
	Reason reason.Code
	Refs   []ref.Ref
}

// Report records the work's outcome for the status the wrapper signs with
// the final task state; false outside a wrapped execution.
func Report(ctx context.Context, o Outcome) bool {
	b, ok := ctx.Value(keyOutcome).(*hopwork.Box)
	if ok {
		b.Report(hopwork.Outcome(o))
	}
	return ok
}

// Refused notes, in the execution ctx serves, that g, the hop's guard,
// refused one of its calls before any effect (hopcheck.Closes): adkhop's
// plugin does for each tool call it refuses. It reports false outside a
// wrapped execution. An execution that ends in a terminal task state with
// a call refused, no outcome reported, and no effect of the hop in the
// authority ledger ends the hop "failed", no refs, reason "policy"
// (Work.Status).
func Refused(ctx context.Context, g *evidence.Guard) bool {
	b, ok := ctx.Value(keyOutcome).(*hopwork.Box)
	if ok {
		b.Refuse(g)
	}
	return ok
}

// Authenticate is the packages' Authenticate: who names the request's
// caller, or refuses it with 401; the identity travels beside the SDK's
// call context (WithPeer).
func Authenticate(next http.Handler, who func(*http.Request) (handoff.AgentID, bool)) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		id, ok := who(r)
		if !ok {
			http.Error(rw, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(rw, r.WithContext(WithPeer(r.Context(), id)))
	})
}

// WithPeer returns a context naming the AgentID the transport
// authenticated the caller as.
func WithPeer(ctx context.Context, id handoff.AgentID) context.Context {
	return context.WithValue(ctx, keyPeer, id)
}

// PeerOf returns the caller WithPeer named.
func PeerOf(ctx context.Context) (handoff.AgentID, bool) {
	id, ok := ctx.Value(keyPeer).(handoff.AgentID)
	return id, ok
}
