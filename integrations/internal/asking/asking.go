// Package asking is the delegator's side of "Asking Again" in the draft,
// shared by the A2A and MCP clients: send an offer, and on a timeout send
// the identical octets again at the instants Backoff gives.
package asking

import (
	"context"
	"errors"
	"time"

	"github.com/agentproto/handoff"
)

// Retransmit runs send at once and then at each of attempts instants of
// Backoff for the offer o, each attempt bounded by the next
// instant. It stops at the first answer, at an error that is not a
// timeout, when ctx ends, or after the last attempt; it never treats the
// silence that follows as "failed" (HC-40): the caller keeps the hop
// unresolved.
func Retransmit(ctx context.Context, o *handoff.Offer, attempts int, now func() time.Time, send func(context.Context) error) error {
	iat := o.Iat.Std()
	sched := Backoff(iat, o.Exp.Std().Sub(iat), max(attempts, 0))
	for i := 0; ; i++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if i < len(sched) {
			actx, cancel = context.WithDeadline(ctx, sched[i])
		}
		err := send(actx)
		cancel()
		if err == nil || ctx.Err() != nil || i >= len(sched) || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		// Wait for the instant of the next attempt.
		if wait := sched[i].Sub(now()); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
}

// Backoff returns when to retransmit an offer issued at iat with lifetime
// ttl ("Asking Again"): the first attempt at half the lifetime, before exp
// (HC-37), then each wait twice the one before, n attempts in all. A
// delegator never treats the silence that follows as "failed" (HC-40).
func Backoff(iat time.Time, ttl time.Duration, n int) []time.Time {
	out := make([]time.Time, 0, max(n, 0))
	wait := ttl / 2
	at := iat
	for i := 0; i < n; i++ {
		at = at.Add(wait)
		out = append(out, at)
		wait *= 2
	}
	return out
}
