package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentproto/handoff"
	ha2a "github.com/agentproto/handoff/a2a"
)

// extension is the handoff extension as the A2A SDK names extensions.
var extension = &a2a.AgentExtension{URI: ha2a.ExtensionURI}

// authenticate maps a bearer token to the AgentID of the caller and makes
// the request's headers the A2A service parameters of the call. Unknown
// callers are refused.
func authenticate(next http.Handler, tokens map[string]handoff.AgentID) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		id, ok := tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			http.Error(rw, "unauthenticated", http.StatusUnauthorized)
			return
		}
		ctx, callCtx := a2asrv.WithCallContext(r.Context(), a2asrv.NewRequestMeta(r.Header))
		callCtx.User = &a2asrv.AuthenticatedUser{UserName: string(id)}
		next.ServeHTTP(rw, r.WithContext(ctx))
	})
}

// coderExecutor is the delegate: an A2A agent that takes work only with a
// Handoff that passes the draft's checks.
type coderExecutor struct {
	agent *handoff.Agent
	w     io.Writer
}

var _ a2asrv.AgentExecutor = (*coderExecutor)(nil)

func (e *coderExecutor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	msg := reqCtx.Message
	// Host.Peer is the caller as the transport authenticated it: only that
	// party is sent the last status of a retransmitted hop (HC-39).
	var peer handoff.AgentID
	requested := false
	if callCtx, ok := a2asrv.CallContextFrom(ctx); ok {
		if callCtx.User != nil && callCtx.User.Authenticated() {
			peer = handoff.AgentID(callCtx.User.Name())
		}
		if requested = callCtx.Extensions().Requested(extension); requested {
			callCtx.Extensions().Activate(extension)
		}
	}
	e.logf("coder: message in context %s from %q; A2A-Extensions asks for the handoff extension: %v",
		msg.ContextID, peer, requested)
	octets, err := ha2a.Handoff(msg.Metadata)
	if err != nil {
		e.logf("coder: message without a usable handoff: %v", err)
		return q.Write(ctx, e.reply(reqCtx, "no handoff: "+err.Error(), nil))
	}
	in, err := e.agent.Receive(ctx, octets, handoff.Host{Dialog: msg.ContextID, Peer: peer})
	if err != nil {
		// The replay store could not answer: refuse, without a status.
		return err
	}

	switch {
	case in.Retransmission():
		// Never processed again (HC-38): answer with what was sent before.
		if last, ok := in.LastStatus(); ok {
			e.logf("coder: hop %s is a retransmission, not processed again; resending the last status unchanged", in.Offer().Hop)
			return q.Write(ctx, e.reply(reqCtx, "retransmission: last status resent", &last))
		}
		return q.Write(ctx, e.reply(reqCtx, "retransmission: not decided yet", nil))

	case in.Accepted():
		e.logf("coder: hop %s from %s passed every check (chain %s); taking the work", in.Offer().Hop, in.Offer().Iss, in.Chain())
		st, err := e.agent.Reply(ctx, in, handoff.Accepted, handoff.ReplyOptions{})
		if err != nil {
			return err
		}
		if err := q.Write(ctx, e.update(reqCtx, handoff.Accepted, "working on it", st)); err != nil {
			return err
		}
		// ... the work itself ...
		st, err = e.agent.Reply(ctx, in, handoff.Completed, handoff.ReplyOptions{Effect: handoff.EffectFull})
		if err != nil {
			return err
		}
		e.logf("coder: work for hop %s done", in.Offer().Hop)
		return q.Write(ctx, e.update(reqCtx, handoff.Completed, "patch written", st))
	}

	// A failed check. The reason code goes back; the detail stays in the
	// coder's log (HC-05, HC-65).
	e.logf("coder: rejected: %s (%s)", in.Reason(), in.Detail())
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateRejected, e.reply(reqCtx, "rejected: "+string(in.Reason()), nil))
	ev.Final = true
	if in.StatusDue() {
		st, err := e.agent.Reply(ctx, in, handoff.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
		if err != nil {
			return err
		}
		ha2a.AttachStatus(ev.Status.Message.Metadata, st)
	}
	return q.Write(ctx, ev)
}

func (e *coderExecutor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// update is a task status update whose status message carries a signed
// status, with the A2A task state that matches the handoff state (HC-29).
func (e *coderExecutor) update(reqCtx *a2asrv.RequestContext, state handoff.State, text string, st handoff.Signed) *a2a.TaskStatusUpdateEvent {
	ev := a2a.NewStatusUpdateEvent(reqCtx, taskState(state), e.reply(reqCtx, text, &st))
	ev.Final = state != handoff.Accepted // every other state a delegate sends ends the hop
	return ev
}

// reply is an agent Message in the request's context, carrying st in its
// metadata when given.
func (e *coderExecutor) reply(reqCtx *a2asrv.RequestContext, text string, st *handoff.Signed) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: text})
	m.ContextID = reqCtx.ContextID
	m.Metadata = map[string]any{}
	if st != nil {
		ha2a.AttachStatus(m.Metadata, *st)
		m.Extensions = []string{ha2a.ExtensionURI}
	}
	return m
}

// taskState maps a handoff state to the a2a-go TaskState: the draft names
// the A2A task states in their protocol buffer form ("TASK_STATE_WORKING"),
// the JSON binding in lower case ("working").
func taskState(s handoff.State) a2a.TaskState {
	name := strings.TrimPrefix(ha2a.TaskState(s), "TASK_STATE_")
	return a2a.TaskState(strings.ReplaceAll(strings.ToLower(name), "_", "-"))
}

func (e *coderExecutor) logf(format string, args ...any) {
	fmt.Fprintf(e.w, format+"\n", args...)
}
