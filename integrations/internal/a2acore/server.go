// Package a2acore is the handoff's flow over A2A, written once for every
// SDK line: the delegate's (Server: read the Handoff, Agent.Receive,
// answer a refusal, a retransmission or an equivocation, run the wrapped
// executor with the offer in its context, sign the statuses of its task
// states, pause for approvals and resume, take a signed cancel) and the
// delegator's (Client: attach, ask again with backoff, hand every status
// to Agent.HandleStatus, tell how a delivery ended). The packages a2a03hop
// (a2a-go v0.3) and a2a1hop (a2a-go/v2) are adapters: they translate the
// SDK's requests, events and errors to the small interfaces here
// (Exchange, CancelRequest, Request) and back, and hold the public API.
//
// The steps of the delegate's flow, in order, and where they live:
//
//   - Server.Execute: the Handoff read from the message (absent or
//     malformed: Exchange.Refuse, or Exchange.Plain with Optional),
//     the extension activated, the hop's span, Agent.Receive;
//   - Server.answer: what the Received asks for: a retransmission
//     (resumed as the hop's work with Agent.Resume, or answered with the
//     last status), an equivocation, a refusal, an offer on a task that
//     runs another hop, or an accepted offer, whose package is checked
//     (Server.check, ServerConfig.Evidence: a failing one is "rejected",
//     "policy") before it is taken with "accepted";
//   - Server.resume: the package that came with the answer to a pause,
//     checked again against the hop's offer, then Server.run;
//   - Server.run: the hop's guard (the package's, or Approvals.Guard's)
//     and an approval's answer (guarded), the working state with
//     "accepted", the wrapped executor with the Received, the outcome box
//     and the pauser in its context (Exchange.Run); a refusal before any
//     effect (an answer declined or expired, the executor ended by the
//     guard's refusal) ends the hop with "failed" and no refs
//     (hopcheck.Closes);
//   - Work.Status: the signed status of each task state the executor sets;
//   - Server.Cancel: a Cancel Task request's "canceled", checked against
//     the task's hop, verified, applied and recorded before the executor's
//     Cancel, whose task state carries the canceled work's outcome when it
//     is known (reported, or no effect of the hop in the ledger).
//
// A message on a task that exists changes that task only when it carries
// the verified offer of the hop bound to the task, from the delegator the
// transport authenticated (Task.Owns): anything else is answered with
// Exchange.Reply, which changes no task's state. The binding is the
// task's own metadata (BindingKey), written with the "accepted" that
// started the task, so it outlives a restart with the task store.
package a2acore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentproto/handoff"
	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/binding"
	"github.com/agentproto/handoff/integrations/internal/hopcheck"
	"github.com/agentproto/handoff/integrations/internal/hopwork"
	"github.com/agentproto/handoff/integrations/internal/pause"
	"github.com/agentproto/handoff/integrations/observe"
)

// Transport is the name recorded in spans and metrics.
const Transport = "a2a"

// BindingKey is the task metadata key under which the delegate records
// the hop a task runs: "iss", "hop" and "offer" (the offer's handoff
// digest). Only the server writes a task's metadata; a client's message
// cannot.
const BindingKey = carry.ExtensionURI + "/hop"

// ErrForeignCancel is the error of a Cancel Task request whose "canceled"
// names another hop than the task's (HC-28, HC-55).
var ErrForeignCancel = binding.ErrForeign

// ServerConfig is the SDK-neutral part of the lines' ServerConfig; the
// fields mean what they mean there.
type ServerConfig struct {
	Agent *handoff.Agent
	// Executor is the wrapped executor; the core only checks that there
	// is one.
	Executor            any
	Optional            bool
	OnNotices           func(context.Context, []handoff.Notice)
	OnCancel            func(context.Context, *handoff.StatusResult)
	RequireSignedCancel bool
	OnReceive           func(context.Context, *handoff.Received)
	Observe             *observe.Recorder
	Logger              *slog.Logger
	Approvals           *Approvals
	Evidence            *evidence.HostConfig
}

// Server is the delegate's flow. It is safe for concurrent use.
type Server struct {
	cfg     ServerConfig
	guards  hopcheck.Config // where a hop's guard comes from
	running hopwork.Running // accepted hops whose executor runs
	// canceled holds the outcome signed in a Cancel, for a Cancel Task
	// request the SDK drops and the delegator sends again.
	canceled canceledOutcomes
}

// canceledOutcomes are the final statuses signed in the wrapped
// executor's Cancel in the last canceledHold. An a2a-go task manager
// that takes a Cancel Task request while the task's execution winds down
// drops the canceled task it resolves to (CancelInterrupted): the
// delegator sends the same "canceled" again, the hop's outcome is already
// signed, and the second canceled task carries the same octets (HC-39).
type canceledOutcomes struct {
	mu   sync.Mutex
	held map[canceledKey]canceledOutcome
}

type canceledKey struct {
	iss handoff.AgentID
	hop handoff.HopID
}

type canceledOutcome struct {
	st    handoff.Signed
	state state.State
	at    time.Time
}

// canceledHold is how long an outcome signed in a Cancel is held for a
// Cancel Task request sent again; canceledMax bounds how many are held.
const (
	canceledHold = 2 * time.Minute
	canceledMax  = 4096
)

func (c *canceledOutcomes) put(h binding.Hop, want state.State, st handoff.Signed, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[canceledKey]canceledOutcome{}
	}
	for k, o := range c.held {
		if now.Sub(o.at) > canceledHold {
			delete(c.held, k)
		}
	}
	if len(c.held) < canceledMax {
		c.held[canceledKey{h.Iss, h.Hop}] = canceledOutcome{st: st, state: want, at: now}
	}
}

func (c *canceledOutcomes) get(h binding.Hop, want state.State, now time.Time) (handoff.Signed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.held[canceledKey{h.Iss, h.Hop}]
	if !ok || o.state != want || now.Sub(o.at) > canceledHold {
		return handoff.Signed{}, false
	}
	return o.st, true
}

// NewServer returns the delegate's flow for cfg.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Agent == nil || cfg.Executor == nil {
		return nil, fmt.Errorf("%w: ServerConfig.Agent and ServerConfig.Executor are required", handoff.ErrConfig)
	}
	if err := cfg.Approvals.validate(); err != nil {
		return nil, err
	}
	g := hopcheck.Config{Evidence: cfg.Evidence}
	if cfg.Approvals != nil {
		g.Guard = cfg.Approvals.Guard
	}
	if err := g.Validate(cfg.Approvals != nil); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, guards: g}, nil
}

// Task is the task a message or a Cancel Task request names, as the
// adapter reads it from the SDK's stored task.
type Task struct {
	ContextID string
	State     string         // A2A 1.0 spelling
	Meta      map[string]any // the task's metadata
	// Asked: the task's status message carries a pending approval of
	// Ask (ApprovalKey): the pause is the wrapper's, answered with
	// AnswerKey; any other pause is the wrapped executor's own.
	Asked bool
}

// Exchange is one message to the delegate, as the adapter of a line
// presents it to Server.Execute: what the core reads of the SDK's request,
// and how it answers in the SDK's events.
type Exchange interface {
	// Message returns the message's metadata (nil without a message) and
	// its contextId.
	Message() (meta map[string]any, contextID string)
	// Task returns the task the message names, nil for a new task.
	Task() *Task
	// Activate activates the extension for the call (A2A-Extensions).
	Activate(ctx context.Context)
	// Peer returns the caller the transport authenticated:
	// ServerConfig.Peer's answer when set, else PeerOf's, else the SDK's
	// authenticated user; "" when none.
	Peer(ctx context.Context) handoff.AgentID
	// Operator returns Approvals.Operator's answer, false when it is nil.
	Operator(ctx context.Context) (string, bool)

	// Reply answers without changing any task's state, with text, st
	// (nil: none) and meta merged into the answer's message metadata.
	Reply(ctx context.Context, text string, st *handoff.Signed, meta map[string]any) error
	// Parts returns the message's parts as JSON (nil without a message):
	// the arguments of the call its execution is (Server.run).
	Parts() []byte
	// SetState puts the task in the state s (A2A 1.0 spelling), with text
	// and st in its status message and meta merged into its metadata; a
	// new task is made then.
	SetState(ctx context.Context, s, text string, st *handoff.Signed, meta map[string]any) error
	// Refuse answers a message without a usable Handoff on a new task:
	// err says why, text is the answer's text for a line that answers
	// with a message.
	Refuse(ctx context.Context, text string, err error) error
	// Plain runs the wrapped executor in ctx, with no offer
	// (ServerConfig.Optional).
	Plain(ctx context.Context) error
	// Run runs the wrapped executor in ctx on the task SetState made or
	// the task that exists; every event it makes that sets a task state
	// goes through w.Status first, every Task it makes through w.Bind.
	Run(ctx context.Context, w *Work) error
}

// call is one Execute: the exchange, the task it names and its caller.
type call struct {
	x    Exchange
	task *Task
	peer handoff.AgentID
}

// Execute serves one message: its Handoff is checked before anything of
// the wrapped executor runs (HC-30, HC-66).
func (s *Server) Execute(ctx context.Context, x Exchange) error {
	meta, contextID := x.Message()
	c := &call{x: x, task: x.Task()}
	octets, err := carry.Handoff(meta)
	if err != nil {
		if errors.Is(err, carry.ErrAbsent) && s.cfg.Optional && !c.task.bound() {
			return x.Plain(observe.Extract(ctx, meta))
		}
		_, end := s.cfg.Observe.StartReceive(ctx, Transport)
		end(nil, nil)
		text := "handoff required: " + err.Error()
		if c.task != nil {
			return x.Reply(ctx, text, nil, nil) // the task stays as it is
		}
		return x.Refuse(ctx, text, err)
	}
	x.Activate(ctx)
	// The dialog is the A2A contextId the client gave (step 5); a message
	// that names none starts a context of the server's: no dialog to check.
	dialog := contextID
	if dialog == "" && c.task != nil {
		dialog = c.task.ContextID
	}
	// The hop's span, a child of the delegator's trace context in the
	// message metadata when there is one; the executor runs in it. The
	// trace context decides nothing: the offer is checked as if it were
	// absent.
	ctx, span := s.cfg.Observe.StartHop(ctx, Transport, meta)
	defer span.End()
	c.peer = x.Peer(ctx)
	rctx, end := s.cfg.Observe.StartReceive(ctx, Transport)
	in, err := s.cfg.Agent.Receive(rctx, octets, handoff.Host{Dialog: dialog, Peer: c.peer})
	end(in, err)
	hopwork.LogReceived(ctx, s.cfg.Logger, Transport, in, err)
	span.Received(in, err)
	if err != nil {
		if c.task != nil {
			return x.Reply(ctx, "handoff: the offer could not be decided", nil, nil) // the task stays as it is
		}
		return fmt.Errorf("handoff: offer refused: %w", err) // fail closed
	}
	if s.cfg.OnReceive != nil {
		s.cfg.OnReceive(ctx, in)
	}
	return s.answer(ctx, c, in)
}

// answer answers a message whose Handoff Receive decided. On a task that
// exists and is not the offer's own (Task.Owns), nothing changes the
// task: every answer is a Reply.
func (s *Server) answer(ctx context.Context, c *call, in *handoff.Received) error {
	hop := handoff.HopID("")
	if o := hopwork.Verified(in); o != nil {
		hop = o.Hop
	}
	mine := c.task == nil || c.task.Owns(in, c.peer)
	refuse := func(text string, st *handoff.Signed) error {
		if mine {
			return c.x.SetState(ctx, Rejected, text, st, nil)
		}
		return c.x.Reply(ctx, text, st, nil)
	}
	sign := func(want state.State, o handoff.ReplyOptions) (*handoff.Signed, error) {
		st, err := s.reply(ctx, in, hop, want, o)
		if err != nil && !mine {
			// A stranger's message does not end the task with an error.
			return nil, c.x.Reply(ctx, "handoff: no status could be signed", nil, nil)
		}
		return &st, err
	}
	switch {
	case in.Retransmission():
		// The answer to a pause of the hop's work resumes it: the hop's
		// work, with the hop's accepted offer (Agent.Resume).
		if accepted, ok := s.resumable(c, in, mine); ok {
			if rin, err := s.cfg.Agent.Resume(ctx, in); err == nil {
				return s.resume(ctx, c, rin, accepted)
			}
		}
		// Never processed again (HC-38): answer with what was sent before.
		if last, ok := in.LastStatus(); ok {
			s.sent(ctx, hop, last)
			return c.x.Reply(ctx, "retransmission: last status resent", &last, nil)
		}
		if in.OwesAccepted() {
			st, err := sign(state.Accepted, handoff.ReplyOptions{})
			if st == nil || err != nil {
				return err
			}
			return c.x.Reply(ctx, "retransmission: work taken", st, nil)
		}
		return c.x.Reply(ctx, "retransmission: not decided yet", nil, nil)

	case in.Equivocation() != "":
		if in.Equivocation() == state.AnswerFinishFirst {
			s.running.Stop(in.Refused().Iss, hop) // stop the first offer's work if it runs
		}
		if in.Equivocation() != state.AnswerRejectFirst {
			return refuse("rejected: equivocation", nil)
		}
		st, err := sign(state.Rejected, handoff.ReplyOptions{Reason: reason.Equivocation})
		if st == nil || err != nil {
			return err
		}
		return refuse("rejected: equivocation", st)

	case !in.Accepted():
		// The reason code goes back; the detail stays here (HC-05, HC-65).
		text := "rejected: " + string(in.Reason())
		if !in.StatusDue() {
			return refuse(text, nil)
		}
		st, err := sign(state.Rejected, handoff.ReplyOptions{Reason: in.Reason()})
		if st == nil || err != nil {
			return err
		}
		return refuse(text, st)

	case !mine:
		// A new hop on a task that runs another: refused by local policy
		// (HC-30), and the task stays as it is.
		st, err := sign(state.Rejected, handoff.ReplyOptions{Reason: reason.Policy})
		if st == nil || err != nil {
			return err
		}
		return c.x.Reply(ctx, "rejected: the task runs another hop", st, nil)
	}
	// The handoff package beside the offer, checked before any work
	// (ServerConfig.Evidence): one that fails is the offer's refusal.
	chk, err := s.check(ctx, c, in)
	if err != nil {
		return fmt.Errorf("handoff: offer not decided: %w", err) // fail closed
	}
	if err := s.guards.Acknowledge(ctx, chk); err != nil {
		return fmt.Errorf("handoff: offer not decided: %w", err) // fail closed
	}
	if chk.Refused {
		st, err := sign(state.Rejected, chk.Rejected())
		if st == nil || err != nil {
			return err
		}
		return refuse("rejected: "+string(reason.Policy)+": the handoff package did not pass", st)
	}
	st, err := s.reply(ctx, in, hop, state.Accepted, handoff.ReplyOptions{Refs: chk.Refs})
	if err != nil {
		return err
	}
	return s.run(ctx, c, in, "accepted", st, chk.Guard)
}

// unit is the call of the execution for the message, with parts, that
// carried the offer of in: named by the hop, its arguments the digest of
// the message's parts (so that a message of any size has a call of a few
// octets).
func unit(in *handoff.Received, parts []byte) evidence.Call {
	args := `{"parts":"` + digest.SHA256(parts).String() + `"}`
	return evidence.Call{Hop: in.Digest(), Action: UnitAction, Args: []byte(args), IdempotencyKey: in.Digest().String()}
}

// UnitAction is the action an A2A execution is recorded under in the
// authority ledger, when the wrapper claims it (Server.run): it is not an
// action of the package, and authorizes nothing.
const UnitAction = "a2a.message"

// check checks the handoff package the message carries beside the offer
// of in (hopcheck.Config.Check).
func (s *Server) check(ctx context.Context, c *call, in *handoff.Received) (hopcheck.Checked, error) {
	meta, _ := c.x.Message()
	obj, err := carry.Package(meta)
	return s.guards.Check(ctx, in, obj, err)
}

// resume runs the hop's work again for the message that answers its
// pause, with in from Agent.Resume and the hop's package checked again
// against the same offer: a message without its package, or whose check
// cannot be made now, resumes nothing and the task stays as it is.
func (s *Server) resume(ctx context.Context, c *call, in *handoff.Received, accepted handoff.Signed) error {
	chk, err := s.check(ctx, c, in)
	switch {
	case err != nil:
		return c.x.Reply(ctx, "handoff: the hop's work does not resume: "+err.Error(), nil, nil)
	case chk.Refused:
		return c.x.Reply(ctx, "handoff: the hop's work does not resume: "+chk.Detail, nil, nil)
	}
	return s.run(ctx, c, in, "resumed", accepted, chk.Guard)
}

// run sets the task working, with the hop's "accepted" (or its last one,
// for work resumed) and the task's binding to the hop, and runs the
// wrapped executor of an accepted or resumed hop with the Received in its
// context, and g, the guard its package gave, or the application's.
//
// With a guard, each execution is the hop's unit of work, run once under
// the idempotency key contract (evidence.Guard.Once), so that no message
// runs the executor twice, on any replica sharing the guard's ledger: the
// execution for the message that carried the offer is claimed under the
// hop (its offer's handoff digest, with the digest of the message's parts
// as the call's arguments); the one for an answer to a pause of Ask, under the pause,
// once, by the one answer that takes it (pause.Take), which records the
// approval of exactly the paused call first. Any other presentation of
// the same execution changes no task: it is answered with a message that
// carries the contract's answer under IdempotencyOutcomeKey (replayed, with the
// recorded outcome; in flight; conflict) and the hop's last status. The
// execution that resumes the executor's own pause (the input it asked
// for, as ADK's tool confirmation) is not claimed here: the executor
// binds its answer, and ADK's plugin runs each tool call once under its
// key.
//
// A refusal before any effect closes the hop (hopcheck.Closes): an answer
// that declines the approval, or comes once the offer expired, before the
// executor runs; a refusal of the hop's guard that the executor ends
// with, as its error. The task is then TASK_STATE_FAILED with the hop's
// "failed" and no refs (the work took no effect, HC-44), or the outcome
// the executor reported (Report), which wins. The hop's task may span
// several messages (a pause and its answer): the terminal status of its
// hop, in the status message of the task's terminal state, closes both.
func (s *Server) run(ctx context.Context, c *call, in *handoff.Received, text string, st handoff.Signed, g *evidence.Guard) error {
	g, err := s.guards.GuardOf(ctx, in, g)
	if err != nil {
		return s.refused(ctx, c, in, nil, err)
	}
	a := s.cfg.Approvals
	meta, _ := c.x.Message()
	ans, sealed := answerOf(meta)
	var b pause.Bound
	if a != nil && sealed != "" {
		if g == nil {
			return s.refused(ctx, c, in, nil, fmt.Errorf("handoff: no evidence guard for the hop to record the answer in"))
		}
		if b, err = pause.Open(a.Key, sealed, in.Digest(), a.config().Time()); err != nil {
			return s.refused(ctx, c, in, g, err)
		}
	}
	if g != nil {
		ctx = evidence.ContextWithGuard(ctx, g)
	}
	x := &execution{s: s, c: c, in: in, text: text, st: st, g: g}
	if a != nil && g != nil {
		x.p = &pauser{a: a, in: in}
	}
	switch {
	case g == nil:
		_, err = x.run(ctx)
	case a != nil && sealed != "":
		operator, ok := c.x.Operator(ctx)
		if !ok {
			operator = string(c.peer)
		}
		_, err = pause.Take(ctx, g, b, pause.AnswerOf(ans), operator, x.run)
	case c.task == nil:
		_, err = g.Once(ctx, unit(in, c.x.Parts()), x.run)
	default:
		_, err = x.run(ctx)
	}
	if x.ran || err == nil {
		s.unsettled(ctx, in, err)
		return x.err
	}
	return s.refused(ctx, c, in, g, err)
}

// unsettled logs an execution whose outcome the ledger did not record
// (evidence.ErrUnsettled): it stays in flight there, and is never run
// again until an operator settles it.
func (s *Server) unsettled(ctx context.Context, in *handoff.Received, err error) {
	if errors.Is(err, evidence.ErrUnsettled) && s.cfg.Logger != nil {
		s.cfg.Logger.WarnContext(ctx, "handoff: the outcome of the hop's execution is not in the authority ledger",
			slog.String("hop", string(hopwork.Verified(in).Hop)), slog.Any("error", err))
	}
}

// refused answers a message whose execution did not run, for err: the
// idempotency key contract's answer, and no task changed; the hop's end,
// recorded in the ledger (by a replica), and no task changed; a refusal before any effect (hopcheck.Closes), which ends
// the hop with "failed" and no refs, in TASK_STATE_FAILED; any other,
// which leaves the task paused (an answer that cannot be used). A hop
// that ended meanwhile changes no task.
func (s *Server) refused(ctx context.Context, c *call, in *handoff.Received, g *evidence.Guard, err error) error {
	if m, ok := hopcheck.Idempotent(err, digest.Digest{}); ok {
		return c.x.Reply(ctx, "idempotency: "+fmt.Sprint(m["outcome"]), nil, map[string]any{IdempotencyOutcomeKey: m})
	}
	if hopcheck.Ended(err) {
		return c.x.Reply(ctx, "handoff: the hop ended: "+err.Error(), nil, nil)
	}
	if hopcheck.Closes(err) {
		sts, _, serr := s.final(ctx, in, g, hopwork.Verified(in).Hop, hopcheck.Closed)
		switch {
		case serr != nil:
			return serr
		case sts == nil:
			return c.x.Reply(ctx, "handoff: the hop ended: "+refusedText(err), nil, nil)
		}
		return c.x.SetState(ctx, Failed, refusedText(err), sts, nil) // the executor does not run
	}
	return c.x.SetState(ctx, s.paused(), refusedText(err), nil, nil) // the task stays paused
}

// execution is one run of the wrapped executor for a message of the hop.
type execution struct {
	s    *Server
	c    *call
	in   *handoff.Received
	text string
	st   handoff.Signed
	g    *evidence.Guard
	p    *pauser

	ran bool  // the executor's run started
	err error // the error it ended with, as the line returns it
}

// run sets the task working and runs the executor; the outcome it returns
// is the task state the execution left, and the hop's terminal status if
// it signed one, as JSON.
func (x *execution) run(ctx context.Context) ([]byte, error) {
	s, c, in := x.s, x.c, x.in
	x.ran = true
	bind := Bind(in)
	if err := c.x.SetState(ctx, Working, x.text, &x.st, bind); err != nil {
		x.err = err
		return nil, err
	}
	if x.p != nil {
		ctx = context.WithValue(ctx, keyPauser, x.p)
	}
	if c.peer != "" {
		ctx = WithPeer(ctx, c.peer) // who the transport authenticated for this message
	}
	wctx, box, done := s.running.Start(context.WithValue(ctx, keyReceived, in), in)
	defer done()
	if x.p != nil {
		x.p.box = box
	}
	o := hopwork.Verified(in)
	w := &Work{s: s, ctx: ctx, in: in, hop: binding.Hop{Iss: o.Iss, Hop: o.Hop, Offer: in.Digest()}, g: x.g, box: box, bind: bind}
	err := c.x.Run(context.WithValue(wctx, keyOutcome, box), w)
	if err != nil && hopcheck.Closes(err) {
		// The executor ended with a refusal of the hop's guard: the hop
		// ends with what the work reported, or with no effect.
		if sts, hs, serr := w.final(hopcheck.Closed); serr == nil && sts != nil {
			err = c.x.SetState(ctx, TaskState(hs), err.Error(), sts, nil)
			w.set(TaskState(hs))
		}
	}
	x.err = err
	return w.outcome(), err
}

// final signs the terminal status of an outcome o, for a hop whose work
// did not run, and records it as the hop's final disposition in the
// authority ledger (through g); nil when the hop moved on meanwhile
// (canceled and answered, or ended by another call).
func (s *Server) final(ctx context.Context, in *handoff.Received, g *evidence.Guard, hop handoff.HopID, o hopwork.Outcome) (*handoff.Signed, state.State, error) {
	var b hopwork.Box
	want, o := b.Final(o)
	st, err := s.reply(ctx, in, hop, want, handoff.ReplyOptions{Effect: o.Effect, Reason: o.Reason, Refs: o.Refs})
	switch {
	case errors.Is(err, handoff.ErrState):
		return nil, want, nil
	case err != nil:
		return nil, want, err
	}
	s.finished(ctx, in.Digest(), hop, g, want, o)
	return &st, want, nil
}

// finished records the hop's final disposition, the terminal state it
// signed, in the authority ledger (hopcheck.Config.Finish); a ledger that
// cannot record it is logged, and the status, signed, goes out. A hop
// whose delegator canceled it keeps "canceled" there, its first.
func (s *Server) finished(ctx context.Context, offer digest.Digest, hop handoff.HopID, g *evidence.Guard, want state.State, o hopwork.Outcome) {
	if err := s.guards.Finish(ctx, g, offer, want, string(o.Reason)); err != nil && s.cfg.Logger != nil {
		s.cfg.Logger.WarnContext(ctx, "handoff: the hop's final disposition is not in the authority ledger",
			slog.String("hop", string(hop)), slog.Any("error", err))
	}
}

// paused is the task state of a pause whose answer was refused.
func (s *Server) paused() string {
	if s.cfg.Approvals != nil {
		return s.cfg.Approvals.Pause
	}
	return InputRequired
}

// reply signs a status for in and records it as sent.
func (s *Server) reply(ctx context.Context, in *handoff.Received, hop handoff.HopID, want state.State, o handoff.ReplyOptions) (handoff.Signed, error) {
	st, err := s.cfg.Agent.Reply(ctx, in, want, o)
	if err == nil {
		s.sent(ctx, hop, st)
	}
	return st, err
}

func (s *Server) sent(ctx context.Context, hop handoff.HopID, st handoff.Signed) {
	if s.cfg.Observe == nil {
		return
	}
	state, reason := state.State(""), reason.Code("")
	if _, sts, err := handoff.InspectUnverified(st, handoff.Limits{}); err == nil && sts != nil {
		state, reason = sts.State, sts.Reason
	}
	s.cfg.Observe.StatusSent(ctx, Transport, hop, state, reason)
}

// Work is one execution of the wrapped executor for an accepted or
// resumed hop, or the wrapped executor's Cancel of a hop its delegator
// canceled: the adapter hands it every task state the executor sets.
type Work struct {
	s    *Server
	ctx  context.Context   // the call's, not canceled with the work
	in   *handoff.Received // nil for a Cancel
	hop  binding.Hop
	g    *evidence.Guard // the hop's, if any
	box  *hopwork.Box
	bind map[string]any
	// none: the authority ledger knows that the hop took no effect and
	// can take none (its delegator's "canceled" is recorded there).
	none bool

	mu     sync.Mutex
	done   bool            // a terminal status was signed
	last   string          // the last task state the execution set
	status *handoff.Signed // the terminal status signed
}

// set records ts as the last task state the execution set.
func (w *Work) set(ts string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = ts
}

// outcome is the execution's outcome, as the ledger records it: the last
// task state it set and the hop's terminal status if it signed one
// ({"state": ..., "status": base64url}).
func (w *Work) outcome() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := map[string]any{}
	if w.last != "" {
		o["state"] = w.last
	}
	if w.status != nil {
		o["status"] = base64.RawURLEncoding.EncodeToString(w.status.Octets)
	}
	b, _ := json.Marshal(o)
	return b
}

// Status returns the status to attach to the status message of the task
// state ts (HC-29), and the hop state it names; the outcome the work
// reported (Report) wins, and otherwise:
//
//   - a terminal state (completed, failed, canceled) of an execution one
//     of whose calls the hop's guard refused before any effect (Refused),
//     when the authority ledger holds no effect of the hop: "failed", no
//     refs, reason "policy", the work took no effect (HC-44);
//   - failed or canceled on a hop its delegator canceled, when the ledger
//     holds no effect of the hop (none): "failed", no refs;
//   - completed: "completed";
//   - any other: nil, for the host protocol's own states and an unknown
//     outcome (HC-25, HC-45), and once a terminal status was signed.
func (w *Work) Status(ts string) (*handoff.Signed, state.State, error) {
	w.set(ts)
	var otherwise hopwork.Outcome
	switch ts {
	case Completed, Failed, Canceled:
	default:
		return nil, "", nil
	}
	_, reported := w.box.Reported()
	refused, g := w.box.Refused()
	if w.g != nil {
		g = w.g
	}
	switch {
	case reported:
	case refused && w.s.guards.NoEffect(w.ctx, g, w.hop.Offer):
		otherwise = hopcheck.Closed
	case w.none && ts != Completed:
		otherwise = hopcheck.None
	case ts == Completed:
		otherwise.Effect = state.EffectFull
	}
	return w.final(otherwise)
}

// final signs the terminal status the work's outcome asks for, otherwise
// when it reported none, once.
func (w *Work) final(otherwise hopwork.Outcome) (*handoff.Signed, state.State, error) {
	want, o := w.box.Final(otherwise)
	w.mu.Lock()
	if want == "" || w.done {
		w.mu.Unlock()
		return nil, "", nil
	}
	w.done = true
	w.mu.Unlock()
	opt := handoff.ReplyOptions{Effect: o.Effect, Reason: o.Reason, Refs: o.Refs}
	var st handoff.Signed
	var err error
	if w.in != nil {
		st, err = w.s.reply(w.ctx, w.in, w.hop.Hop, want, opt)
	} else if st, err = w.s.cfg.Agent.ReplyHop(w.ctx, w.hop.Iss, w.hop.Hop, want, opt); err == nil {
		w.s.sent(w.ctx, w.hop.Hop, st)
		w.s.canceled.put(w.hop, want, st, time.Now())
	} else if held, ok := w.s.canceled.get(w.hop, want, time.Now()); ok && errors.Is(err, handoff.ErrState) {
		// The same Cancel Task request again: the outcome is signed.
		w.mu.Lock()
		w.status = &held
		w.mu.Unlock()
		return &held, want, nil
	}
	if err != nil {
		w.mu.Lock()
		w.done = false
		w.mu.Unlock()
		return nil, "", err
	}
	w.mu.Lock()
	w.status = &st
	w.mu.Unlock()
	w.s.finished(w.ctx, w.hop.Offer, w.hop.Hop, w.g, want, o)
	return &st, want, nil
}

// Bind returns meta with the task's binding to its hop, for a Task the
// executor makes whole: the task stays its hop's.
func (w *Work) Bind(meta map[string]any) map[string]any {
	if meta == nil {
		meta = map[string]any{}
	}
	meta[BindingKey] = w.bind[BindingKey]
	return meta
}

// Attach puts st in a message's metadata and the extension in its
// extensions (HC-66).
func Attach(meta map[string]any, exts []string, st handoff.Signed) (map[string]any, []string) {
	if meta == nil {
		meta = map[string]any{}
	}
	carry.AttachStatus(meta, st)
	if !slices.Contains(exts, carry.ExtensionURI) {
		exts = append(exts, carry.ExtensionURI)
	}
	return meta, exts
}

// Bind returns the task metadata that binds a task to the hop of the
// accepted offer in (BindingKey).
func Bind(in *handoff.Received) map[string]any {
	o := hopwork.Verified(in)
	return bindOf(binding.Hop{Iss: o.Iss, Hop: o.Hop, Offer: in.Digest()})
}

func bindOf(h binding.Hop) map[string]any {
	return map[string]any{BindingKey: map[string]any{"iss": string(h.Iss), "hop": string(h.Hop), "offer": h.Offer.String()}}
}

// hop returns the hop bound to t, false when none is (or t is nil).
func (t *Task) hop() (binding.Hop, bool) {
	if t == nil {
		return binding.Hop{}, false
	}
	b, _ := t.Meta[BindingKey].(map[string]any)
	iss, _ := b["iss"].(string)
	hop, _ := b["hop"].(string)
	offer, _ := b["offer"].(string)
	d, err := digest.Parse(offer)
	if iss == "" || hop == "" || err != nil {
		return binding.Hop{}, false
	}
	return binding.Hop{Iss: handoff.AgentID(iss), Hop: handoff.HopID(hop), Offer: d}, true
}

func (t *Task) bound() bool {
	_, ok := t.hop()
	return ok
}

// Owns reports whether the task is the hop's of in: its binding names the
// verified offer of in, whose delegator the transport authenticated as
// peer. A task bound to no hop is no offer's.
func (t *Task) Owns(in *handoff.Received, peer handoff.AgentID) bool {
	b, ok := t.hop()
	o := hopwork.Verified(in)
	return ok && o != nil && o.Iss == b.Iss && o.Hop == b.Hop && in.Digest().Equal(b.Offer) && peer == o.Iss
}

// CancelRequest is a Cancel Task request, as the adapter presents it.
type CancelRequest struct {
	Meta   map[string]any // the request's metadata
	TaskID string
	Task   *Task // the stored task
	// Invalid is the SDK's a2a.ErrInvalidParams, which a refused request's
	// error wraps.
	Invalid error
}

// Cancel serves a Cancel Task request: a "canceled" in its metadata must
// name the hop the task runs, with that hop's offer, signed by that hop's
// delegator; it is verified and applied (HC-28, HC-55), and recorded as
// the hop's final disposition in the authority ledger, before cancel, the
// wrapped executor's Cancel, runs with the result in its context
// (CancelFromContext) and w, which signs the hop's outcome on the task
// state it sets (Work.Status): the one it reports (Report, which works in
// Cancel as in Execute), else "failed" with no refs when the ledger holds
// no effect of the hop, else none, the hop staying "accepted" (HC-25). A
// hop known to have taken no effect gets its "failed" even when the
// wrapped executor's Cancel sets no task state. Any other "canceled" is
// refused with ErrForeignCancel before it is verified, the state of no hop
// changes and the task goes on; a request without one (and not
// RequireSignedCancel) runs cancel with a nil w, and no hop changes.
func (s *Server) Cancel(ctx context.Context, r CancelRequest, cancel func(context.Context, *Work) error) error {
	octets, err := carry.Status(r.Meta)
	switch {
	case errors.Is(err, carry.ErrAbsent) && !s.cfg.RequireSignedCancel:
		return cancel(ctx, nil)
	case err != nil:
		return fmt.Errorf("%w: cancel task: %w", r.Invalid, err)
	}
	var hops []binding.Hop
	if h, ok := r.Task.hop(); ok {
		hops = append(hops, h)
	}
	own, err := binding.Check(octets, hops)
	if err != nil {
		return fmt.Errorf("%w: cancel task %s: %w", r.Invalid, r.TaskID, err)
	}
	res, err := s.cfg.Agent.HandleStatus(ctx, octets)
	s.cfg.Observe.StatusReceived(ctx, Transport, res, err)
	hopwork.LogStatus(ctx, s.cfg.Logger, Transport, res, err)
	if err != nil {
		return err
	}
	if s.cfg.OnCancel != nil {
		s.cfg.OnCancel(ctx, res)
	}
	if err := binding.Confirm(res, own); err != nil {
		// Not the delegator's verified "canceled" of this task's hop: the
		// task goes on.
		return fmt.Errorf("%w: cancel task %s: the handoff status was refused: %w", r.Invalid, r.TaskID, err)
	}
	// The revocation first: once it is recorded no guard of the hop takes
	// an effect, so that a ledger that holds none knows the outcome.
	w := &Work{s: s, ctx: ctx, hop: own, box: &hopwork.Box{}, bind: bindOf(own)}
	if err := s.guards.Finish(ctx, nil, own.Offer, state.Canceled, "canceled by the delegator"); err != nil {
		if s.cfg.Logger != nil {
			s.cfg.Logger.WarnContext(ctx, "handoff: the hop's final disposition is not in the authority ledger",
				slog.String("hop", string(own.Hop)), slog.Any("error", err))
		}
	} else {
		w.none = s.guards.NoEffect(ctx, nil, own.Offer)
	}
	if n := res.Notices; len(n) > 0 && s.cfg.OnNotices != nil {
		s.cfg.OnNotices(ctx, n)
	}
	err = cancel(context.WithValue(context.WithValue(ctx, keyCancel, res), keyOutcome, w.box), w)
	if _, reported := w.box.Reported(); w.none || reported {
		if _, _, serr := w.final(hopcheck.None); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}
