package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/state"
)

// logBuffer collects the JSON records of a slog handler.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	b.buf.Reset()
	return out
}

// Each decision is logged with its reason, check, iss, hop and digest;
// an offer refused at check 1 is named by its digest alone, never by the
// iss or hop it claims (issue 21, point 7).
func TestLogger_EachDecision(t *testing.T) {
	ctx := context.Background()
	var logs logBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	w := newWorld(t, JWS, rxPlanner, rxReceiver, rxOther)
	withLog := func(c *Config) { c.Logger = logger }
	dtor := w.agent(rxPlanner, withLog)
	dte := w.agent(rxReceiver, withLog)

	out, err := dtor.Offer(ctx, OfferParams{To: rxReceiver, Dialog: "d"})
	require.NoError(t, err)
	recs := logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "handoff: offer made", recs[0]["msg"])
	assert.Equal(t, string(out.Offer.Hop), recs[0]["hop"])
	assert.Equal(t, out.Digest.String(), recs[0]["digest"])

	b, err := out.Handoff.Encode(JSON)
	require.NoError(t, err)
	in := receive(t, dte, b, Host{})
	recs = logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "handoff: offer accepted", recs[0]["msg"])
	assert.Equal(t, "INFO", recs[0]["level"])
	assert.Equal(t, string(rxPlanner), recs[0]["iss"])
	assert.Equal(t, string(out.Offer.Hop), recs[0]["hop"])
	assert.Equal(t, in.Digest().String(), recs[0]["digest"])

	st, err := dte.Reply(ctx, in, state.Accepted, ReplyOptions{})
	require.NoError(t, err)
	recs = logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "handoff: status signed", recs[0]["msg"])
	assert.Equal(t, "accepted", recs[0]["state"])
	assert.Equal(t, st.Digest().String(), recs[0]["digest"])

	_, err = dte.Reply(ctx, in, state.Rejected, ReplyOptions{Reason: reason.Policy})
	require.ErrorIs(t, err, ErrState)
	recs = logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "handoff: status refused", recs[0]["msg"])
	assert.Contains(t, recs[0]["error"], "HC-24")

	res, err := dtor.HandleStatus(ctx, st.Octets)
	require.NoError(t, err)
	require.True(t, res.Changed)
	recs = logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "handoff: status applied", recs[0]["msg"])
	assert.Equal(t, string(rxReceiver), recs[0]["iss"])
	assert.Equal(t, "accepted", recs[0]["state"])

	receive(t, dte, b, Host{})
	recs = logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "handoff: offer retransmission", recs[0]["msg"])
	assert.Equal(t, "memory", recs[0]["check"])

	// Refused after check 1: the verified iss and hop are logged.
	wrong := encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxOther, nil)), JSON)
	receive(t, dte, wrong, Host{})
	recs = logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "handoff: offer refused", recs[0]["msg"])
	assert.Equal(t, "WARN", recs[0]["level"])
	assert.Equal(t, "audience", recs[0]["check"])
	assert.Equal(t, "wrong-audience", recs[0]["reason"])
	assert.Equal(t, string(rxPlanner), recs[0]["iss"])

	// Refused at check 1: no member of the unverified payload is logged.
	stranger := w.agent(rxReceiver, withLog, func(c *Config) { c.Trust = c.Trust.without(rxPlanner) })
	receive(t, stranger, b, Host{})
	recs = logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "signature", recs[0]["check"])
	assert.Equal(t, "untrusted-key", recs[0]["reason"])
	assert.NotContains(t, recs[0], "iss")
	assert.NotContains(t, recs[0], "hop")
	assert.Equal(t, in.Digest().String(), recs[0]["digest"])
}

// Received and StatusResult are slog.LogValuers: a caller logs them whole.
func TestLogger_LogValuers(t *testing.T) {
	var logs logBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	p := newPair(t)
	logger.Info("got", "received", p.in)
	st, err := p.dte.Reply(context.Background(), p.in, state.Accepted, ReplyOptions{})
	require.NoError(t, err)
	res, err := p.dtor.HandleStatus(context.Background(), st.Octets)
	require.NoError(t, err)
	logger.Info("got", "status", res)
	recs := logs.records(t)
	require.Len(t, recs, 2)
	got := recs[0]["received"].(map[string]any)
	assert.Equal(t, "accepted", got["decision"])
	assert.Equal(t, string(idA), got["iss"])
	assert.Equal(t, string(p.in.Offer().Hop), got["hop"])
	gotSt := recs[1]["status"].(map[string]any)
	assert.Equal(t, "applied", gotSt["decision"])
	assert.Equal(t, string(idB), gotSt["iss"])
}

// The logger is never called under a lock of the Agent: a handler that
// calls the Agent back for the same hop does not deadlock.
func TestLogger_NoLockHeld(t *testing.T) {
	var again func() error
	h := &callbackHandler{on: func(r slog.Record) {
		if r.Message == "handoff: hop taken" && again != nil {
			f := again
			again = nil
			assert.NotErrorIs(t, f(), context.DeadlineExceeded, "the hop's lock is free")
		}
	}}
	w := newWorld(t, JWS, rxPlanner, rxReceiver)
	dte := w.agent(rxReceiver, func(c *Config) { c.Logger = slog.New(h) })
	in := receive(t, dte, encodeHandoff(t, handoffOf(w.offer(rxPlanner, rxReceiver, nil)), JSON), Host{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	again = func() error {
		_, err := dte.ReplyHop(ctx, rxPlanner, in.Offer().Hop, state.Accepted, ReplyOptions{})
		return err
	}
	require.NoError(t, dte.Take(ctx, in))
	assert.Nil(t, again, "the handler ran")
}

type callbackHandler struct{ on func(slog.Record) }

func (h *callbackHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h *callbackHandler) Handle(_ context.Context, r slog.Record) error { h.on(r); return nil }
func (h *callbackHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h *callbackHandler) WithGroup(string) slog.Handler                 { return h }
