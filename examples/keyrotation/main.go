// Command keyrotation shows a planner rotating its own signing key while it
// runs, with the coder it delegates to following the planner's published
// keys over HTTP (package github.com/agentproto/handoff/keyset), and no
// message lost on the way.
//
// The planner serves its public keys as a JWK Set (keyset.Publisher, on
// loopback HTTP, Cache-Control max-age=1). The coder fetches that URL only
// (keyset.Source, refreshed in the background by Run) and swaps each change
// into its running agent (Follow with Agent.SetTrust). The rotation is
// the one handoff.Agent.SetSigner documents:
//
//  1. publish the new key beside the old one; once the coder has fetched
//     the set (PublisherConfig.OnServe), sign with the new key
//     (Agent.SetSigner). A hop offered before the rotation is retransmitted
//     with its identical octets, signed by the old key (HC-52), and still
//     verifies.
//  2. retire the old key: the coder honours it for its grace period
//     (Config.Grace), then drops it. The retransmission of the old hop is
//     then refused as untrusted-key: retire a key only once every hop it
//     signed has ended.
//
// Run it with:
//
//	cd examples && go run ./keyrotation
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/state"
)

const (
	planner = handoff.AgentID("spiffe://a.example/agent/planner")
	coder   = handoff.AgentID("spiffe://b.example/agent/coder")
	dialog  = "ctx-rotation"
	// grace is how long the coder honours a key the planner retired.
	grace = time.Second
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "keyrotation:", err)
		os.Exit(1)
	}
}

func newSigner() (*handoff.Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return handoff.NewSigner(k, handoff.JWS, nil)
}

// trusted is what the coder's running agent trusts of the planner: the
// kids its Source swapped in last. wait blocks until they are want.
type trusted struct {
	mu      sync.Mutex
	kids    []string
	changed chan struct{}
}

func (t *trusted) set(tr *handoff.Trust) {
	var kids []string
	for _, k := range tr.Keys(planner) {
		kids = append(kids, k.KID)
	}
	slices.Sort(kids)
	t.mu.Lock()
	t.kids = kids
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

func (t *trusted) wait(want ...string) error {
	slices.Sort(want)
	timeout := time.After(10 * time.Second)
	for {
		t.mu.Lock()
		got, changed := t.kids, t.changed
		t.mu.Unlock()
		if slices.Equal(got, want) {
			return nil
		}
		select {
		case <-changed:
		case <-timeout:
			return fmt.Errorf("the coder trusts %v of the planner, not %v", got, want)
		}
	}
}

func run(out io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	oldKey, err := newSigner()
	if err != nil {
		return err
	}
	newKey, err := newSigner()
	if err != nil {
		return err
	}
	coderKey, err := newSigner()
	if err != nil {
		return err
	}
	kid := func(s *handoff.Signer) string { return s.Key().KID[:8] }

	// The planner publishes its keys. Its own trust binds its keys and the
	// coder's, whose statuses it verifies.
	fetched := make(chan string, 16)
	pub, err := keyset.NewPublisher(keyset.PublisherConfig{MaxAge: time.Second,
		OnServe: func(_ *http.Request, etag string) {
			select {
			case fetched <- etag:
			default:
			}
		}}, oldKey.Key())
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/jwks.json", pub)
	keys := httptest.NewServer(mux)
	defer keys.Close()
	own := func(ks ...*handoff.Signer) (*handoff.Trust, error) {
		var tk []handoff.TrustedKey
		for _, k := range ks {
			tk = append(tk, k.Key())
		}
		return handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{planner: tk, coder: {coderKey.Key()}})
	}
	pt, err := own(oldKey)
	if err != nil {
		return err
	}
	plannerAgent, err := handoff.NewAgent(handoff.Config{ID: planner, Signer: oldKey, Trust: pt})
	if err != nil {
		return err
	}

	// The coder follows the planner's URL.
	src, err := keyset.New(keyset.Config{
		Agents:     map[handoff.AgentID]keyset.Endpoint{planner: {URL: keys.URL + "/.well-known/jwks.json"}},
		MinRefresh: 100 * time.Millisecond,
		Grace:      grace,
	})
	if err != nil {
		return err
	}
	defer src.Close()
	if err := src.Update(ctx); err != nil {
		return err
	}
	coderAgent, err := handoff.NewAgent(handoff.Config{ID: coder, Signer: coderKey, Trust: src.Trust(),
		TrustLacksSigner: true}) // the Source lists the peers' keys, not the coder's own
	if err != nil {
		return err
	}
	seen := &trusted{changed: make(chan struct{})}
	if err := src.Follow(func(t *handoff.Trust) error {
		err := coderAgent.SetTrust(t)
		seen.set(t)
		return err
	}); err != nil {
		return err
	}
	runDone := make(chan error, 1)
	go func() { runDone <- src.Run(ctx) }()
	fmt.Fprintf(out, "planner: publishes key %s; the coder trusts it\n", kid(oldKey))

	// deliver hands the coder an offer's octets and, when it is new, the
	// coder answers "accepted", which the planner verifies.
	deliver := func(what string, wire []byte) (*handoff.Received, error) {
		in, err := coderAgent.Receive(ctx, wire, handoff.Host{Dialog: dialog, Peer: planner})
		if err != nil {
			return nil, err
		}
		switch {
		case in.Accepted():
			st, err := coderAgent.Reply(ctx, in, state.Accepted, handoff.ReplyOptions{})
			if err != nil {
				return nil, err
			}
			res, err := plannerAgent.HandleStatus(ctx, st.Octets)
			if err != nil {
				return nil, err
			}
			if res.Err() != nil {
				return nil, res.Err()
			}
			fmt.Fprintf(out, "coder: %s: accepted\n", what)
		case in.Retransmission():
			fmt.Fprintf(out, "coder: %s: a retransmission, answered with the last status\n", what)
		default:
			fmt.Fprintf(out, "coder: %s: refused, %s (%s)\n", what, in.Reason(), in.Detail())
		}
		return in, nil
	}
	offer := func(task string) (*handoff.Outgoing, []byte, error) {
		o, err := plannerAgent.Offer(ctx, handoff.OfferParams{To: coder, Dialog: dialog, Task: task, TTL: time.Minute})
		if err != nil {
			return nil, nil, err
		}
		wire, err := o.Handoff.Encode(handoff.JSON)
		return o, wire, err
	}

	first, firstWire, err := offer("write the patch")
	if err != nil {
		return err
	}
	if _, err := deliver("hop 1, signed with "+kid(oldKey), firstWire); err != nil {
		return err
	}

	// 1. Publish the new key beside the old one; sign with it once the
	// coder has fetched the set.
	if err := pub.Set(oldKey.Key(), newKey.Key()); err != nil {
		return err
	}
	if pt, err = own(oldKey, newKey); err != nil {
		return err
	}
	if err := plannerAgent.SetTrust(pt); err != nil {
		return err
	}
	fmt.Fprintf(out, "planner: publishes key %s beside %s\n", kid(newKey), kid(oldKey))
	if err := waitFetched(fetched, pub.ETag()); err != nil {
		return err
	}
	if err := seen.wait(oldKey.Key().KID, newKey.Key().KID); err != nil {
		return err
	}
	fmt.Fprintln(out, "planner: the coder fetched the new set; signing with the new key")
	if err := plannerAgent.SetSigner(newKey); err != nil {
		return err
	}
	_, wire, err := offer("run the tests")
	if err != nil {
		return err
	}
	if _, err := deliver("hop 2, signed with "+kid(newKey), wire); err != nil {
		return err
	}
	again, err := plannerAgent.Retransmit(ctx, first.Offer.Hop)
	if err != nil {
		return err
	}
	againWire, err := again.Encode(handoff.JSON)
	if err != nil {
		return err
	}
	if !bytes.Equal(againWire, firstWire) {
		return errors.New("the retransmission of hop 1 is not its identical octets")
	}
	if _, err := deliver("hop 1 retransmitted, its identical octets signed with "+kid(oldKey), againWire); err != nil {
		return err
	}

	// 2. Retire the old key. The coder honours it for the grace period,
	// then drops it.
	if err := pub.Set(newKey.Key()); err != nil {
		return err
	}
	if pt, err = own(newKey); err != nil {
		return err
	}
	if err := plannerAgent.SetTrust(pt); err != nil {
		return err
	}
	fmt.Fprintf(out, "planner: retires key %s\n", kid(oldKey))
	if err := waitFetched(fetched, pub.ETag()); err != nil {
		return err
	}
	if _, err := deliver("hop 1 retransmitted in the grace period", againWire); err != nil {
		return err
	}
	if err := seen.wait(newKey.Key().KID); err != nil {
		return err
	}
	fmt.Fprintln(out, "coder: the grace period of the retired key is over")
	if _, err := deliver("hop 1 retransmitted after the grace period", againWire); err != nil {
		return err
	}
	_, wire, err = offer("merge the patch")
	if err != nil {
		return err
	}
	if _, err := deliver("hop 3, signed with "+kid(newKey), wire); err != nil {
		return err
	}
	cancel()
	if err := <-runDone; !errors.Is(err, context.Canceled) {
		return fmt.Errorf("the Source's Run ended with %v", err)
	}
	return nil
}

// waitFetched waits until the publisher has served the set of etag.
func waitFetched(fetched <-chan string, etag string) error {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-fetched:
			if got == etag {
				return nil
			}
		case <-timeout:
			return errors.New("the coder never fetched the new set")
		}
	}
}
