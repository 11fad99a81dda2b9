package keyset

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1793000000, 0)} }

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// keyServer is a real HTTP server publishing one agent's JWK Set through a
// Publisher, counting requests; handler, when set, answers instead.
type keyServer struct {
	*httptest.Server
	pub      *Publisher
	requests atomic.Int64
	mu       sync.Mutex
	handler  http.HandlerFunc
	lastINM  atomic.Value // the last If-None-Match received
}

func newKeyServer(t *testing.T, maxAge time.Duration, keys ...handoff.TrustedKey) *keyServer {
	t.Helper()
	pub, err := NewPublisher(PublisherConfig{MaxAge: maxAge}, keys...)
	require.NoError(t, err)
	ks := &keyServer{pub: pub}
	ks.lastINM.Store("")
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.requests.Add(1)
		ks.lastINM.Store(r.Header.Get("If-None-Match"))
		ks.mu.Lock()
		h := ks.handler
		ks.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		pub.ServeHTTP(w, r)
	}))
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) answer(h http.HandlerFunc) {
	ks.mu.Lock()
	ks.handler = h
	ks.mu.Unlock()
}

func mustKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

// peer is an agent that signs offers.
type peer struct {
	id     handoff.AgentID
	signer *handoff.Signer
	priv   crypto.Signer
}

func newPeer(t *testing.T, id handoff.AgentID, f handoff.Format) *peer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	s, err := handoff.NewSigner(k, f, nil)
	require.NoError(t, err)
	return &peer{id: id, signer: s, priv: k}
}

func newEdPeer(t *testing.T, id handoff.AgentID) *peer {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	s, err := handoff.NewSigner(k, handoff.JWS, nil)
	require.NoError(t, err)
	return &peer{id: id, signer: s, priv: k}
}

// offerWithHeaders signs, with p's key, an offer from iss whose JWS
// protected header also carries headers (kid, jku, x5u...).
func offerWithHeaders(t *testing.T, iss handoff.AgentID, now time.Time, p *peer, headers map[jose.HeaderKey]any) handoff.Signed {
	t.Helper()
	s := (&peer{id: iss, signer: p.signer}).offer(t, me, now, nil)
	parts := strings.Split(string(s.Octets), ".")
	require.Len(t, parts, 3)
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.Unmarshal(hb, &h))
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	opts := &jose.SignerOptions{ExtraHeaders: map[jose.HeaderKey]any{"typ": h["typ"]}}
	for k, v := range headers {
		opts.ExtraHeaders[k] = v
	}
	sg, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.priv}, opts)
	require.NoError(t, err)
	obj, err := sg.Sign(payload)
	require.NoError(t, err)
	out, err := obj.CompactSerialize()
	require.NoError(t, err)
	return handoff.Signed{Format: handoff.JWS, Octets: []byte(out)}
}

func (p *peer) key() handoff.TrustedKey { return p.signer.Key() }

// offer signs an offer from p (or as iss, when not empty) to aud at now.
func (p *peer) offer(t *testing.T, aud handoff.AgentID, now time.Time, mod func(*handoff.Offer)) handoff.Signed {
	t.Helper()
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	o := &handoff.Offer{Hop: hop, Dialog: "d-1", Iss: p.id, Aud: aud, Iat: handoff.TimeOf(now), Exp: handoff.TimeOf(now) + 120}
	if mod != nil {
		mod(o)
	}
	s, err := p.signer.SignOffer(o)
	require.NoError(t, err)
	return s
}

const (
	alice = handoff.AgentID("spiffe://a.example/agent/alice")
	bob   = handoff.AgentID("spiffe://b.example/agent/bob")
	me    = handoff.AgentID("spiffe://r.example/agent/receiver")
)

// receiver is an Agent whose trust follows src.
func receiver(t *testing.T, src *Source, c *clock) *handoff.Agent {
	t.Helper()
	self := newPeer(t, me, handoff.JWS)
	a, err := handoff.NewAgent(handoff.Config{ID: me, Signer: self.signer, Trust: src.Trust(), Now: c.Now,
		TrustLacksSigner: true}) // src lists the peers only
	require.NoError(t, err)
	require.NoError(t, src.Follow(a.SetTrust))
	return a
}

func receive(t *testing.T, a *handoff.Agent, elems ...handoff.Signed) *handoff.Received {
	t.Helper()
	h := &handoff.Handoff{Offer: elems[len(elems)-1], Chain: elems[:len(elems)-1]}
	b, err := h.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := a.Receive(t.Context(), b, handoff.Host{})
	require.NoError(t, err)
	return in
}

// logBuffer is a Logger writing text to a buffer, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// waitIdle waits for the refreshes that unknown kids started.
func (s *Source) waitIdle() { s.bg.Wait() }
