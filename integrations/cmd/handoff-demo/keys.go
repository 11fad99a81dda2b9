package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/keyset"
)

// Keys over HTTP: each agent publishes its public key as a JWK Set on its
// own loopback port (keyset.Publisher), and trusts the URLs where its
// peers publish theirs (keyset.Source), cached in a file beside its
// stores. Nobody shares a trust document.
const (
	keysMaxAge = time.Second // what each Publisher announces
	keysMin    = 200 * time.Millisecond
	keysMax    = 2 * time.Second
	keysGrace  = time.Minute      // a retired key stays trusted this long
	keysStale  = 30 * time.Second // past this without a refresh: refused
)

// keys is an agent's side of the key distribution.
type keys struct {
	pub   *keyset.Publisher
	src   *keyset.Source
	srv   *http.Server
	stop  context.CancelFunc
	done  chan struct{}
	ready chan struct{} // closed once every peer's key is trusted
	cache string

	mu     sync.Mutex
	served map[string]string // User-Agent -> the ETag last served to it
	fetch  chan struct{}     // signalled at each fetch
}

// userAgent is what an agent's Source sends, so that a Publisher can tell
// which peers have fetched its set.
func userAgent(id handoff.AgentID) string { return "handoff-demo " + string(id) }

// openKeys starts serving the agent's public key (that of signer) and
// reads its peers' sets from the cache; start follows them.
func openKeys(cfg *nodeConfig, signer *handoff.Signer, dir string) (*keys, error) {
	k := &keys{ready: make(chan struct{}), served: map[string]string{}, fetch: make(chan struct{}, 1),
		cache: filepath.Join(dir, "trusted-keys.json"), done: make(chan struct{})}
	pub, err := keyset.NewPublisher(keyset.PublisherConfig{MaxAge: keysMaxAge, OnServe: k.onServe}, signer.Key())
	if err != nil {
		return nil, err
	}
	k.pub = pub
	peers := map[handoff.AgentID]keyset.Endpoint{}
	for id, u := range cfg.TrustURLs {
		peers[id] = keyset.Endpoint{URL: u}
	}
	state, err := os.ReadFile(k.cache)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	src, err := keyset.New(keyset.Config{Agents: peers, MinRefresh: keysMin, MaxRefresh: keysMax, Grace: keysGrace,
		MaxStale: keysStale, Timeout: time.Second, UserAgent: userAgent(cfg.ID), State: state})
	if err != nil {
		return nil, err
	}
	k.src = src
	l, err := net.Listen("tcp", cfg.Keys)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /jwks.json", pub)
	k.srv = &http.Server{Handler: mux}
	go k.srv.Serve(l)
	return k, nil
}

// start makes agent follow the peers' keys, logging each change once
// every peer's key is known.
func (k *keys) start(agent *handoff.Agent, peers []handoff.AgentID, log *logger) error {
	src := k.src
	var prev *handoff.Trust
	follow := func(t *handoff.Trust) error {
		if err := agent.SetTrust(t); err != nil {
			return err
		}
		if b, err := src.State(); err == nil {
			writeFile(k.cache, b)
		}
		all := true
		for _, id := range peers {
			all = all && len(t.Keys(id)) > 0
		}
		select {
		case <-k.ready:
			if prev != nil {
				for _, line := range keyChanges(prev, t) {
					log.printf("%s", line)
				}
			}
		default:
			if all {
				close(k.ready)
			}
		}
		prev = t
		return nil
	}
	if err := src.Follow(follow); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	k.stop = stop
	go func() {
		defer close(k.done)
		src.Run(ctx)
	}()
	return nil
}

// onServe notes which peer was served which set.
func (k *keys) onServe(r *http.Request, etag string) {
	k.mu.Lock()
	k.served[r.Header.Get("User-Agent")] = etag
	k.mu.Unlock()
	select {
	case k.fetch <- struct{}{}:
	default:
	}
}

// waitFetched waits until every peer has fetched the set served now: from
// then on, all of them trust its keys.
func (k *keys) waitFetched(ctx context.Context, peers []handoff.AgentID) error {
	etag := k.pub.ETag()
	for {
		k.mu.Lock()
		all := true
		for _, id := range peers {
			all = all && k.served[userAgent(id)] == etag
		}
		k.mu.Unlock()
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-k.fetch:
		}
	}
}

func (k *keys) Close() {
	if k.stop != nil {
		k.stop()
		<-k.done
	}
	k.src.Close()
	k.srv.Close()
}

// keyChanges describes, one line per key, what next trusts that prev did
// not, and the reverse.
func keyChanges(prev, next *handoff.Trust) []string {
	var out []string
	kids := func(t *handoff.Trust, id handoff.AgentID) map[string]bool {
		m := map[string]bool{}
		for _, k := range t.Keys(id) {
			m[k.KID] = true
		}
		return m
	}
	ids := map[handoff.AgentID]bool{}
	for _, id := range append(prev.AgentIDs(), next.AgentIDs()...) {
		ids[id] = true
	}
	var sorted []handoff.AgentID
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for _, id := range sorted {
		was, is := kids(prev, id), kids(next, id)
		kept := len(was) > 0
		for kid := range was {
			kept = kept && is[kid]
		}
		for kid := range is {
			if !was[kid] {
				line := fmt.Sprintf("keys: now trusts %s's new key %s, fetched from its URL", shortName(id), short(kid))
				if kept {
					line += fmt.Sprintf("; its earlier key stays trusted for the %s grace period", keysGrace)
				}
				out = append(out, line)
			}
		}
		for kid := range was {
			if !is[kid] {
				out = append(out, fmt.Sprintf("keys: no longer trusts %s's key %s", shortName(id), short(kid)))
			}
		}
	}
	return out
}

// rotateKey gives role a new private key, as an operator rotating it
// while the agent is down would: the restarted agent publishes the new
// public key only, and its peers keep trusting the old one for keysGrace.
func rotateKey(dir, role string) (old, cur handoff.TrustedKey, err error) {
	path := filepath.Join(dir, role, "key.pem")
	prev, err := readKey(path)
	if err != nil {
		return old, cur, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return old, cur, err
	}
	if err := writeKey(path, key); err != nil {
		return old, cur, err
	}
	old = handoff.TrustedKey{Public: prev.Public(), Alg: handoff.ES256}
	cur = handoff.TrustedKey{Public: key.Public(), Alg: handoff.ES256}
	return keyWithKID(old), keyWithKID(cur), nil
}

func keyWithKID(k handoff.TrustedKey) handoff.TrustedKey {
	t, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{"x": {k}})
	if err == nil {
		k = t.Keys("x")[0]
	}
	return k
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return ek, nil
}

// writeFile replaces path with b (mode 0600), never half-written.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// peersOf lists the agents n trusts, sorted.
func peersOf(cfg *nodeConfig) []handoff.AgentID {
	var ids []handoff.AgentID
	for id := range cfg.TrustURLs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// keysURL is where role publishes its keys.
func keysURL(addr string) string { return "http://" + addr + "/jwks.json" }

// readyLine is what an agent prints once it trusts every peer's key.
const readyLine = "keys: trusts the keys its peers publish at "

func describeReady(cfg *nodeConfig) string {
	var names []string
	for _, id := range peersOf(cfg) {
		names = append(names, shortName(id))
	}
	return readyLine + "their URLs (" + strings.Join(names, ", ") + "); publishing its own at " + keysURL(cfg.Keys)
}
