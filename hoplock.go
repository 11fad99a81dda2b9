package handoff

import (
	"context"
	"sync"

	"github.com/agentproto/handoff/replay"
)

// hopLocks serialise, within one Agent, the read-check-write of a received
// hop's state (Reply, Take, a received cancel), so that two calls cannot
// both pass the lifecycle rules for one hop (HC-23). Replicas sharing a
// store rely on the store's compare-and-set instead.
//
// There is one lock per hop, made when first wanted and dropped when its
// last holder or waiter leaves, so that unrelated hops never wait on each
// other's store calls; and waiting for a lock ends with the caller's
// context, so that a hop whose store call hangs holds up only the callers
// of that hop, each until its own deadline. The store calls made under a
// hop lock run under the context of the call that holds it, never a
// context of their own; and since every write is a compare-and-set
// (replay.Store.Swap), the lock saves only wasted signatures, never the
// lifecycle's correctness, which replicas without a shared lock rely on.
type hopLocks struct {
	mu sync.Mutex
	m  map[replay.Key]*hopLock
}

// hopLock is held while its channel (of capacity one) holds a value.
type hopLock struct {
	ch   chan struct{}
	refs int // holder and waiters; guarded by hopLocks.mu
}

// lock takes the lock of hop k, or returns ctx's error when ctx ends
// first. The caller calls unlock exactly once.
func (l *hopLocks) lock(ctx context.Context, k replay.Key) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[replay.Key]*hopLock)
	}
	e := l.m[k]
	if e == nil {
		e = &hopLock{ch: make(chan struct{}, 1)}
		l.m[k] = e
	}
	e.refs++
	l.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; l.leave(k, e) }, nil
	case <-ctx.Done():
		l.leave(k, e)
		return nil, ctx.Err()
	}
}

// leave drops one reference to e, and e itself with the last.
func (l *hopLocks) leave(k replay.Key, e *hopLock) {
	l.mu.Lock()
	if e.refs--; e.refs == 0 {
		delete(l.m, k)
	}
	l.mu.Unlock()
}
