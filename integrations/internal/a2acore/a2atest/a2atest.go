// Package a2atest is the test kit of the A2A lines: the scenarios that
// a2a03hop (a2a-go v0.3) and a2a1hop (a2a-go/v2, A2A 1.0) must both pass,
// written once against Line, which each package's test implements with its
// own SDK over loopback HTTP. Run runs them all.
//
// The scenarios speak of task states as A2A 1.0 spells them
// (a2acore.Working, ...); a Line maps its own.
package a2atest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/evidence"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"

	"github.com/agentproto/handoff/integrations/internal/a2acore"
	"github.com/agentproto/handoff/integrations/observe"
)

// Line is one SDK line under test: its executor wrapper and its client,
// driven through the line's public API.
type Line interface {
	// Serve starts, over loopback HTTP, a delegate whose executor wrapper
	// is configured from d and wraps d.Work, behind the line's
	// Authenticate, which names the caller by its bearer token; it returns
	// the delegate's URL.
	Serve(t *testing.T, d *Delegate) string
	// Dial returns a delegator of p to the delegate at url.
	Dial(t *testing.T, p *handoff.Agent, url string, o Dial) Delegator
	// NewTasks returns a task store for Delegate.Tasks, one that outlives
	// a restart of the delegate as a database would.
	NewTasks() any
	// TaskState is the line's TaskState, spelled as A2A 1.0 does.
	TaskState(state.State) string
	// NoHandoff checks the answer to a message without a Handoff on a new
	// task, which the line refuses in its own way; nothing ran.
	NoHandoff(t *testing.T, res *Result, err error)
	// PausesAuthRequired reports whether the line's Approvals can pause
	// with auth-required (Approvals.AuthRequired).
	PausesAuthRequired() bool
	// NotIntercepted is the line's ErrNotIntercepted, and InvalidParams
	// the SDK's a2a.ErrInvalidParams.
	NotIntercepted() error
	InvalidParams() error
}

// Delegate is the configuration of a delegate the scenarios start, and
// what its executor wrapper reported to the hooks.
type Delegate struct {
	Agent               *handoff.Agent
	Work                *Work
	Optional            bool
	RequireSignedCancel bool
	Observe             *observe.Recorder
	Approvals           *Approvals
	// Evidence is the wrapper's ServerConfig.Evidence.
	Evidence *evidence.HostConfig
	// Tasks is a task store of Line.NewTasks; nil is the SDK's default.
	Tasks any

	mu        sync.Mutex
	canceled  []*handoff.StatusResult
	notices   []handoff.Notice
	requested []bool
	received  []*handoff.Received
}

// Approvals is the configuration of the wrapper's Approvals.
type Approvals struct {
	Key          []byte
	Guard        func(ctx context.Context, in *handoff.Received) (*evidence.Guard, error)
	Now          func() time.Time
	AuthRequired bool
}

// OnReceive is the wrapper's OnReceive; requested tells whether the call's
// A2A-Extensions requested the extension.
func (d *Delegate) OnReceive(_ context.Context, in *handoff.Received, requested bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requested = append(d.requested, requested)
	d.received = append(d.received, in)
}

// OnCancel is the wrapper's OnCancel.
func (d *Delegate) OnCancel(_ context.Context, r *handoff.StatusResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.canceled = append(d.canceled, r)
}

// OnNotices is the wrapper's OnNotices.
func (d *Delegate) OnNotices(_ context.Context, ns []handoff.Notice) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notices = append(d.notices, ns...)
}

// Canceled returns what OnCancel heard.
func (d *Delegate) Canceled() []*handoff.StatusResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*handoff.StatusResult(nil), d.canceled...)
}

func (d *Delegate) noticed() []handoff.Notice {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]handoff.Notice(nil), d.notices...)
}

// Requested returns, per Receive, whether A2A-Extensions named the
// extension.
func (d *Delegate) Requested() []bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]bool(nil), d.requested...)
}

func (d *Delegate) last() *handoff.Received {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.received) == 0 {
		return nil
	}
	return d.received[len(d.received)-1]
}

// Work is the wrapped executor the scenarios script. It counts its
// invocations.
type Work struct {
	Calls, Cancels atomic.Int32
	// Body is one execution of an offer; nil completes the task.
	Body func(ctx context.Context, in *handoff.Received, x Exec) error
	// CancelBody is the executor's Cancel; nil cancels the task.
	CancelBody func(ctx context.Context, x Exec) error

	mu   sync.Mutex
	seen []*handoff.Received
}

// Exec is one execution of Work, as the line's executor runs it.
type Exec interface {
	// Received is the line's FromContext.
	Received(ctx context.Context) (*handoff.Received, bool)
	// Write writes a status update to the task state s (A2A 1.0
	// spelling), final when s is terminal.
	Write(ctx context.Context, s string) error
	// Ask writes AskApproval's event for err; false when it gives none.
	Ask(ctx context.Context, err error) (bool, error)
	// Report is the line's Report.
	Report(ctx context.Context, o Outcome) bool
	// Meta is the metadata of the message the execution serves.
	Meta() map[string]any
}

// Outcome is the line's Outcome.
type Outcome struct {
	Effect state.Effect
	Reason reason.Code
	Refs   []ref.Ref
}

// Execute is the wrapped executor's Execute: the line's executor calls it.
// A message without an offer fails the task.
func (w *Work) Execute(ctx context.Context, x Exec) error {
	w.Calls.Add(1)
	in, ok := x.Received(ctx)
	if !ok {
		return x.Write(ctx, a2acore.Failed)
	}
	w.mu.Lock()
	w.seen = append(w.seen, in)
	body := w.Body
	w.mu.Unlock()
	if body == nil {
		return x.Write(ctx, a2acore.Completed)
	}
	return body(ctx, in, x)
}

// Cancel is the wrapped executor's Cancel: CancelBody, or the task is
// canceled.
func (w *Work) Cancel(ctx context.Context, x Exec) error {
	w.Cancels.Add(1)
	w.mu.Lock()
	body := w.CancelBody
	w.mu.Unlock()
	if body != nil {
		return body(ctx, x)
	}
	return x.Write(ctx, a2acore.Canceled)
}

// OnCancel sets the body of the executor's Cancel.
func (w *Work) OnCancel(body func(ctx context.Context, x Exec) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.CancelBody = body
}

// Do sets the body of the executions to come.
func (w *Work) Do(body func(ctx context.Context, in *handoff.Received, x Exec) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Body = body
}

// Seen returns the offers the executions served.
func (w *Work) Seen() []*handoff.Received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*handoff.Received(nil), w.seen...)
}

// Dial configures a delegator.
type Dial struct {
	// From is the bearer the delegator authenticates with; "" sends none.
	From handoff.AgentID
	// NoBearer sends no bearer (Node.Dial's From defaults to the party).
	NoBearer bool
	// Bare leaves the handoff Client out of the A2A client's interceptors.
	Bare bool
	// Immediate has a send return the task while it works (a2a-go v0.3:
	// polling; a2a-go/v2: ReturnImmediately).
	Immediate bool
	// Attempts is the Client's ClientConfig.Attempts.
	Attempts int
	// Observe is the Client's ClientConfig.Observe.
	Observe *observe.Recorder
	// Via, when set, is a delegator whose handoff Client the new one
	// shares: the same delegator process, connecting anew (to a delegate
	// restarted elsewhere).
	Via Delegator
}

// Msg is a message to send: text, on a context and task, with metadata
// and extensions; Raw, when set, is the line's own message (from Answer),
// sent as it is.
type Msg struct {
	Text      string
	ContextID string
	TaskID    string
	Meta      map[string]any
	Exts      []string
	Raw       any
}

// Result is what an A2A call returned: a task, or a message.
type Result struct {
	Task      bool
	ID        string // the task's, or the task a message names
	ContextID string
	State     string         // the task's state, A2A 1.0 spelling
	Meta      map[string]any // the task's status message's metadata, or the message's
	Text      string         // the text of that message
	Raw       any            // the line's own value
}

// Delivery is the line's Delivery, its Result a *Result.
type Delivery struct {
	Hop      handoff.HopID
	Offer    *handoff.Outgoing
	Result   *Result
	Statuses []*handoff.StatusResult
	Attempts int
	State    state.State
	Refused  bool
	Reason   reason.Code
}

// Delegator is a delegator's A2A client with the line's handoff Client.
type Delegator interface {
	// Send is Client.Send.
	Send(ctx context.Context, m Msg, p handoff.OfferParams) (*Delivery, error)
	// Retransmit is Client.Retransmit.
	Retransmit(ctx context.Context, m Msg, hop handoff.HopID) (*Result, []*handoff.StatusResult, error)
	// Cancel is Client.Cancel.
	Cancel(ctx context.Context, hop handoff.HopID) (*Result, handoff.Notice, error)
	// TaskOf is Client.TaskOf.
	TaskOf(hop handoff.HopID) (string, bool)
	// SendMessage sends m with the A2A client's SendMessage, in ctx.
	SendMessage(ctx context.Context, m Msg) (*Result, error)
	// Stream sends m with SendStreamingMessage, in ctx, and returns the
	// task states of the events.
	Stream(ctx context.Context, m Msg) ([]string, error)
	// CancelTask sends a Cancel Task request for task, in ctx.
	CancelTask(ctx context.Context, task string) (*Result, error)
	// Context returns the line's context helpers.
	Context() Context
	// Get is GetTask.
	Get(ctx context.Context, task string) (*Result, error)
	// Answer is the line's Answer for a task Result.
	Answer(task *Result, decision string, signed []byte) (Msg, error)
}

// Context is a line's WithHandoff, WithCancel and Statuses.
type Context struct {
	WithHandoff func(context.Context, *handoff.Handoff) context.Context
	WithCancel  func(context.Context, handoff.Signed) context.Context
	Statuses    func(context.Context) []*handoff.StatusResult
}

// SendWith sends m through d with SendMessage, carrying h (WithHandoff)
// unless nil, and returns the statuses handled (Statuses).
func SendWith(ctx context.Context, d Delegator, h *handoff.Handoff, m Msg) (*Result, []*handoff.StatusResult, error) {
	if h != nil {
		ctx = d.Context().WithHandoff(ctx, h)
	}
	res, err := d.SendMessage(ctx, m)
	return res, d.Context().Statuses(ctx), err
}

// StreamWith sends m through d with SendStreamingMessage, carrying h, and
// returns the task states of the events and the statuses handled.
func StreamWith(ctx context.Context, d Delegator, h *handoff.Handoff, m Msg) ([]string, []*handoff.StatusResult, error) {
	ctx = d.Context().WithHandoff(ctx, h)
	states, err := d.Stream(ctx, m)
	return states, d.Context().Statuses(ctx), err
}

// CancelWith sends a Cancel Task request for task through d, carrying
// canceled (WithCancel) unless nil.
func CancelWith(ctx context.Context, d Delegator, canceled *handoff.Signed, task string) (*Result, error) {
	if canceled != nil {
		ctx = d.Context().WithCancel(ctx, *canceled)
	}
	return d.CancelTask(ctx, task)
}
