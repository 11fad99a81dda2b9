// Package binding ties each hop a delegate took to the host-protocol task
// or call that runs it, so that a signed "canceled" cancels only its own
// hop's task: the status's hop must be the task's hop, its offer the
// task's offer, and its signer that hop's delegator (HC-28, HC-55). It is
// shared by the A2A and MCP middlewares.
package binding

import (
	"errors"
	"fmt"
	"sync"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/state"
)

// ErrForeign is the error of a "canceled" that names another hop than the
// task or call it was sent to cancel: a captured "canceled" replayed
// against another task. The task goes on.
var ErrForeign = errors.New("handoff: the \"canceled\" is not for the hop of the task it would cancel")

// Hop is one hop a delegate took: its delegator, its hop identifier and the
// digest of its offer.
type Hop struct {
	Iss   handoff.AgentID
	Hop   handoff.HopID
	Offer digest.Digest
}

// Of returns the hop of an accepted offer.
func Of(in *handoff.Received) (Hop, bool) {
	o := in.Offer()
	if o == nil {
		return Hop{}, false
	}
	return Hop{Iss: o.Iss, Hop: o.Hop, Offer: in.Handoff().Offer.Digest()}, true
}

// Names reports whether the status names h: the same hop and offer, signed
// by the hop's delegator.
func (h Hop) Names(st *handoff.Status) bool {
	return st != nil && st.Hop == h.Hop && st.Iss == h.Iss && st.Offer.Equal(h.Offer)
}

// Table maps host tasks (or calls) to the hops they run. It is safe for
// concurrent use.
type Table[K comparable] struct {
	mu sync.Mutex
	m  map[K][]Hop
}

// Bind records that task k runs hop h. It reports whether k is new to
// the table.
func (t *Table[K]) Bind(k K, h Hop) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[K][]Hop{}
	}
	hops, known := t.m[k]
	for _, x := range hops {
		if x.Iss == h.Iss && x.Hop == h.Hop && x.Offer.Equal(h.Offer) {
			return false
		}
	}
	t.m[k] = append(hops, h)
	return !known
}

// Forget forgets that task k runs hop h, once h ended, keeping k in the
// table: a session that runs hop after hop holds only the hops that can
// still be canceled.
func (t *Table[K]) Forget(k K, h Hop) {
	t.mu.Lock()
	defer t.mu.Unlock()
	hops, ok := t.m[k]
	if !ok {
		return
	}
	for i, x := range hops {
		if x.Iss == h.Iss && x.Hop == h.Hop && x.Offer.Equal(h.Offer) {
			last := len(hops) - 1
			hops[i] = hops[last]
			hops[last] = Hop{}
			t.m[k] = hops[:last]
			return
		}
	}
}

// Unbind forgets task k, once it can no longer be canceled.
func (t *Table[K]) Unbind(k K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, k)
}

// Hops returns the hops task k runs.
func (t *Table[K]) Hops(k K) []Hop {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Hop(nil), t.m[k]...)
}

// Check looks, before any verification, at the "canceled" octets sent to
// cancel a task running hops: it returns the hop they name, or an error
// wrapping ErrForeign when they name none of hops, and
// handoff.ErrMalformed when they are no status at all. The status is then
// verified by Agent.HandleStatus, and Confirm checks the verified status
// against the same hop: the state of a hop the task does not run never
// changes.
func Check(octets []byte, hops []Hop) (Hop, error) {
	s, err := handoff.ParseSigned(octets, handoff.Limits{})
	if err != nil {
		return Hop{}, err
	}
	_, st, err := handoff.InspectUnverified(s, handoff.Limits{})
	if err != nil {
		return Hop{}, err
	}
	if st == nil {
		return Hop{}, fmt.Errorf("%w: the element is an offer, not a \"canceled\" status", handoff.ErrMalformed)
	}
	for _, h := range hops {
		if h.Names(st) {
			return h, nil
		}
	}
	// The task's own hop is not named: the sender may not be its delegator.
	return Hop{}, fmt.Errorf("%w: it names hop %s of %s, which the task does not run", ErrForeign, st.Hop, st.Iss)
}

// Confirm checks a status result of Agent.HandleStatus against the hop
// Check returned: verified, a "canceled", for that hop.
func Confirm(res *handoff.StatusResult, h Hop) error {
	if err := res.Err(); err != nil {
		return err
	}
	st := res.Status
	if st == nil || st.State != state.Canceled {
		return fmt.Errorf("%w: the status is not a \"canceled\"", handoff.ErrRejected)
	}
	if !h.Names(st) {
		return fmt.Errorf("%w: the verified status names hop %s of %s", ErrForeign, st.Hop, st.Iss)
	}
	return nil
}
