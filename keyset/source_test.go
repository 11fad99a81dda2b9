package keyset

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
)

// Rotation: the new key is picked up (an unknown kid makes the Source
// refresh at once), the old one is honoured for the grace period, then
// refused as untrusted-key.
func TestRotation(t *testing.T) {
	c := newClock()
	old := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, time.Hour, old.key())
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now,
		MinRefresh: 10 * time.Second, Grace: 5 * time.Minute})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)
	in := receive(t, a, old.offer(t, me, c.Now(), nil))
	require.True(t, in.Accepted(), in.Detail())

	// alice rotates: her set now holds the new key only.
	cur := newPeer(t, alice, handoff.JWS)
	require.NoError(t, ks.pub.Set(cur.key()))
	c.Add(11 * time.Second)
	in = receive(t, a, cur.offer(t, me, c.Now(), nil))
	assert.Equal(t, reason.UntrustedKey, in.Reason(), "checked under the keys known when it arrived")
	src.waitIdle()
	assert.Equal(t, int64(2), ks.requests.Load(), "the unknown kid made one refresh")
	in = receive(t, a, cur.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), "the new key: %s", in.Detail())
	in = receive(t, a, old.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), "the retired key within its grace: %s", in.Detail())

	c.Add(5 * time.Minute)
	require.NoError(t, src.Update(t.Context()))
	in = receive(t, a, old.offer(t, me, c.Now(), nil))
	assert.Equal(t, reason.UntrustedKey, in.Reason(), "the retired key after its grace")
	in = receive(t, a, cur.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), in.Detail())
}

// Outage: the cached set is used until max-stale, then the agent's offers
// are refused as untrusted-key with a detail saying its keys are stale;
// the first successful refresh trusts them again.
func TestOutage(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.COSE)
	other := newPeer(t, bob, handoff.JWS)
	ks := newKeyServer(t, time.Minute, p.key())
	bs := newKeyServer(t, time.Minute, other.key())
	var logs logBuffer
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}, bob: {URL: bs.URL}}, Now: c.Now,
		MinRefresh: time.Minute, MaxRefresh: time.Hour, MaxStale: 2 * time.Hour, Logger: logs.logger()})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)

	ks.answer(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	for range 12 { // two hours of failed refreshes, ten minutes apart
		c.Add(10 * time.Minute)
		err := src.Update(t.Context())
		if c.Now().Sub(time.Unix(1793000000, 0)) <= 2*time.Hour {
			assert.ErrorContains(t, err, "HTTP 503")
			in := receive(t, a, p.offer(t, me, c.Now(), nil))
			assert.True(t, in.Accepted(), "the last good set within max-stale: %s", in.Detail())
		}
	}
	assert.Contains(t, logs.String(), "the last good set is kept")
	c.Add(time.Second)
	assert.NoError(t, src.Update(t.Context()), "no refresh due: time alone makes the keys stale")
	in := receive(t, a, p.offer(t, me, c.Now(), nil))
	assert.Equal(t, reason.UntrustedKey, in.Reason(), "past max-stale")
	assert.Contains(t, in.Detail(), "stale")
	assert.Contains(t, in.Detail(), string(alice))
	in = receive(t, a, other.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), "another agent's keys are not stale: %s", in.Detail())

	ks.answer(nil)
	c.Add(time.Minute)
	require.NoError(t, src.Update(t.Context()))
	in = receive(t, a, p.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), "refreshed again: %s", in.Detail())
}

// A bad document is refused whole and logged, and the last good set is
// kept: every key is validated as ParseTrust validates it.
func TestBadDocument_HC22(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, time.Minute, p.key())
	var logs logBuffer
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now,
		MinRefresh: time.Minute, Logger: logs.logger()})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)

	jwk, err := PublicJWK(p.key())
	require.NoError(t, err)
	var pub map[string]any
	require.NoError(t, json.Unmarshal(jwk, &pub))
	with := func(mod func(m map[string]any)) string {
		m := map[string]any{}
		for k, v := range pub {
			m[k] = v
		}
		mod(m)
		b, _ := json.Marshal(map[string]any{"keys": []any{m}})
		return string(b)
	}
	x := pub["x"].(string)
	for name, doc := range map[string]string{
		"not JSON":        `{"keys":[`,
		"not a set":       `[]`,
		"private member":  with(func(m map[string]any) { m["d"] = x }),
		"symmetric key":   `{"keys":[{"kty":"oct","alg":"HS256","k":"` + x + `"}]}`,
		"alg not pinned":  with(func(m map[string]any) { m["alg"] = "RS256" }),
		"curve mismatch":  with(func(m map[string]any) { m["alg"] = "ES384" }),
		"point off curve": with(func(m map[string]any) { m["y"] = x }),
		"alg none":        with(func(m map[string]any) { m["alg"] = "none" }),
		"duplicate keys":  `{"keys":[],"keys":[]}`,
		"Ed25519 no alg":  `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + base64.RawURLEncoding.EncodeToString(make([]byte, 32)) + `"}]}`,
	} {
		ks.answer(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "max-age=60")
			w.Write([]byte(doc))
		})
		c.Add(time.Minute)
		err := src.Update(t.Context())
		assert.ErrorContains(t, err, "document refused", name)
		in := receive(t, a, p.offer(t, me, c.Now(), nil))
		assert.True(t, in.Accepted(), "%s: the last good set is kept: %s", name, in.Detail())
	}
	assert.Contains(t, logs.String(), "document refused")

	// A key without alg is pinned by the configuration.
	okp := newEdPeer(t, bob)
	okpJWK, err := PublicJWK(okp.key())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(okpJWK, &m))
	delete(m, "alg")
	bare, _ := json.Marshal(map[string]any{"keys": []any{m}})
	bs := newKeyServer(t, time.Minute)
	bs.answer(func(w http.ResponseWriter, r *http.Request) { w.Write(bare) })
	for alg, ok := range map[string]bool{"": false, handoff.EdDSA: true, handoff.ES256: false} {
		s2, err := New(Config{Agents: map[handoff.AgentID]Endpoint{bob: {URL: bs.URL, Alg: alg}}, Now: c.Now})
		require.NoError(t, err)
		err = s2.Update(t.Context())
		assert.Equal(t, ok, err == nil, "pin %q: %v", alg, err)
		assert.Equal(t, ok, len(s2.Trust().Keys(bob)) == 1, "pin %q", alg)
		s2.Close()
	}
}

// An unknown-kid storm: messages with forged kids make at most one refresh
// of their agent's URL per MinRefresh, however many and however
// concurrent, and none for an agent no URL covers.
func TestUnknownKidStorm(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, time.Hour, p.key())
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now, MinRefresh: 30 * time.Second})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)
	require.Equal(t, int64(1), ks.requests.Load())

	storm := func() {
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				forger := newPeer(t, alice, handoff.JWS) // a key alice never published
				in := receive(t, a, forger.offer(t, me, c.Now(), nil))
				assert.Equal(t, reason.UntrustedKey, in.Reason())
				stranger := newPeer(t, bob, handoff.JWS) // an agent no URL covers
				in = receive(t, a, stranger.offer(t, me, c.Now(), nil))
				assert.Equal(t, reason.UntrustedKey, in.Reason())
			})
		}
		wg.Wait()
		src.waitIdle()
	}
	storm()
	assert.Equal(t, int64(1), ks.requests.Load(), "within MinRefresh of the last refresh: none")
	c.Add(30 * time.Second)
	storm()
	assert.Equal(t, int64(2), ks.requests.Load(), "one refresh for the interval")
	c.Add(29 * time.Second)
	storm()
	assert.Equal(t, int64(2), ks.requests.Load())
	c.Add(time.Second)
	storm()
	assert.Equal(t, int64(3), ks.requests.Load(), "one refresh for the next interval")
}

// An oversized document (announced or not) and a slow one are refused;
// the last good set is kept.
func TestOversizedAndSlowDocument(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, time.Minute, p.key())
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now,
		MaxSize: 1024, Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)
	big := `{"keys":[],"pad":"` + strings.Repeat("a", 2000) + `"}`

	ks.answer(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(big)) })
	c.Add(time.Minute)
	assert.ErrorContains(t, src.Update(t.Context()), "more than 1024")
	ks.answer(func(w http.ResponseWriter, r *http.Request) { // chunked: no length announced
		w.Write([]byte(big[:1000]))
		w.(http.Flusher).Flush()
		w.Write([]byte(big[1000:]))
	})
	c.Add(time.Minute)
	assert.ErrorContains(t, src.Update(t.Context()), "more than 1024 octets")

	release := make(chan struct{})
	defer close(release)
	ks.answer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"keys":[`))
		w.(http.Flusher).Flush()
		select { // the rest never comes in time
		case <-release:
		case <-r.Context().Done():
		}
	})
	c.Add(time.Minute)
	err = src.Update(t.Context())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	in := receive(t, a, p.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), in.Detail())
}

// The ETag path: a refresh revalidates with If-None-Match, and a 304 keeps
// the set without parsing it again; the refresh interval follows max-age
// within the floor and the ceiling.
func TestETagNotModified(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, 90*time.Second, p.key())
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now,
		MinRefresh: time.Minute, MaxRefresh: 10 * time.Minute})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)
	assert.Equal(t, int64(1), src.parses.Load())
	assert.Equal(t, "", ks.lastINM.Load())
	assert.Equal(t, c.Now().Add(81*time.Second), src.nextWake(), "max-age 90 s: refreshed at nine tenths of it")

	c.Add(80 * time.Second)
	require.NoError(t, src.Update(t.Context()))
	assert.Equal(t, int64(1), ks.requests.Load(), "not due yet")
	c.Add(time.Second)
	require.NoError(t, src.Update(t.Context()))
	assert.Equal(t, int64(2), ks.requests.Load())
	assert.Equal(t, ks.pub.ETag(), ks.lastINM.Load())
	assert.Equal(t, int64(1), src.parses.Load(), "a 304 is not parsed")
	in := receive(t, a, p.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), in.Detail())

	// Floor and ceiling, and the refresh before the lifetime ends.
	assert.Equal(t, time.Minute, src.early(time.Minute), "never sooner than the floor")
	assert.Equal(t, 9*time.Minute, src.early(10*time.Minute))
	for _, tc := range []struct {
		cc   string
		want time.Duration
	}{{"max-age=5", time.Minute}, {"max-age=86400", 10 * time.Minute}, {"no-store", time.Minute}, {"", DefaultInterval}} {
		h := http.Header{}
		if tc.cc != "" {
			h.Set("Cache-Control", tc.cc)
		}
		got := src.lifetime(h, c.Now())
		if tc.cc == "" {
			tc.want = min(max(DefaultInterval, time.Minute), 10*time.Minute)
		}
		assert.Equal(t, tc.want, got, tc.cc)
	}
	h := http.Header{"Date": {c.Now().UTC().Format(http.TimeFormat)}, "Expires": {c.Now().Add(3 * time.Minute).UTC().Format(http.TimeFormat)}}
	assert.Equal(t, 3*time.Minute, src.lifetime(h, c.Now()), "Expires less Date")
	h = http.Header{"Cache-Control": {"public, max-age=300"}, "Age": {"120"}}
	assert.Equal(t, 3*time.Minute, src.lifetime(h, c.Now()), "max-age less Age")
}

// No fetch ever goes to a URL that came from a message: not its iss, not
// a jku or x5u header, not a reference's loc. Only the configured URL is
// refreshed.
func TestNoFetchOfMessageURL_HC21(t *testing.T) {
	c := newClock()
	trap := newKeyServer(t, time.Minute)
	forger := newPeer(t, handoff.AgentID(trap.URL+"/jwks.json"), handoff.JWS)
	trap.pub.Set(forger.key())
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, time.Minute, p.key())
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now, MinRefresh: time.Second})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)
	c.Add(time.Minute)

	// An iss that is a URL serving the signer's key, with a reference there.
	in := receive(t, a, forger.offer(t, me, c.Now(), func(o *handoff.Offer) {
		o.Refs = []ref.Ref{{Kind: ref.KindDigest, Dig: digest.SHA256([]byte("x")), Loc: trap.URL + "/ctx"}}
	}))
	assert.Equal(t, reason.UntrustedKey, in.Reason())

	// alice's iss, an unknown kid, and jku and x5u naming the trap.
	signed := offerWithHeaders(t, alice, c.Now(), forger, map[jose.HeaderKey]any{
		"jku": trap.URL + "/jwks.json", "x5u": trap.URL + "/cert.pem", "kid": "rotated-2026",
	})
	in = receive(t, a, signed)
	assert.Equal(t, reason.UntrustedKey, in.Reason())
	src.waitIdle()
	assert.Zero(t, trap.requests.Load(), "nothing named in a message is fetched")
	assert.Equal(t, int64(2), ks.requests.Load(), "the configured URL was refreshed once for the unknown kid")
}

// A redirect is refused: its target is never fetched.
func TestRedirectRefused(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	target := newKeyServer(t, time.Minute, p.key())
	ks := newKeyServer(t, time.Minute)
	ks.answer(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target.URL, http.StatusFound) })
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now})
	require.NoError(t, err)
	defer src.Close()
	assert.ErrorContains(t, src.Update(t.Context()), "redirects are refused")
	assert.Zero(t, target.requests.Load())
	why, ok := src.Trust().Withheld(alice)
	assert.True(t, ok)
	assert.Contains(t, why, "no JWK Set fetched yet")
}

// Configuration: only http(s) URLs, plain http only to loopback unless
// allowed.
func TestConfig(t *testing.T) {
	for _, u := range []string{"", "ftp://x.example/k", "/relative", "http://keys.example/jwks", "https://user:pw@x.example/"} {
		_, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: u}}})
		assert.ErrorIs(t, err, ErrConfig, u)
	}
	_, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: "http://keys.example/jwks"}}, AllowHTTP: true})
	assert.NoError(t, err)
	_, err = New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: "https://keys.example/jwks", Alg: "HS256"}}})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = New(Config{})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = New(Config{Document: "https://keys.example/trust.json", MinRefresh: time.Hour, MaxRefresh: time.Minute})
	assert.ErrorIs(t, err, ErrConfig)
}

// The whole trust document at one URL: an agent that leaves it keeps its
// keys for the grace period, then has none; Base keys override it.
func TestDocument(t *testing.T) {
	c := newClock()
	pa, pb := newPeer(t, alice, handoff.JWS), newPeer(t, bob, handoff.COSE)
	local := newPeer(t, "spiffe://l.example/agent/local", handoff.JWS)
	doc := func(ps ...*peer) []byte {
		m := map[string]any{}
		for _, p := range ps {
			jwk, _ := PublicJWK(p.key())
			m[string(p.id)] = map[string]any{"keys": []json.RawMessage{jwk}}
		}
		b, _ := json.Marshal(m)
		return b
	}
	var mu sync.Mutex
	body := doc(pa, pb)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Cache-Control", "max-age=60")
		w.Write(body)
	}))
	defer srv.Close()
	overridden := newPeer(t, alice, handoff.JWS)
	base, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{local.id: {local.key()}, alice: {overridden.key()}})
	require.NoError(t, err)
	src, err := New(Config{Document: srv.URL, Base: base, Now: c.Now, Grace: 10 * time.Minute})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)
	for _, p := range []*peer{overridden, pb, local} {
		in := receive(t, a, p.offer(t, me, c.Now(), nil))
		assert.True(t, in.Accepted(), "%s: %s", p.id, in.Detail())
	}
	in := receive(t, a, pa.offer(t, me, c.Now(), nil))
	assert.Equal(t, reason.UntrustedKey, in.Reason(), "Base overrides the document for alice")

	mu.Lock()
	body = doc(pa)
	mu.Unlock()
	c.Add(time.Minute)
	require.NoError(t, src.Update(t.Context()))
	in = receive(t, a, pb.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), "bob left the document, within grace: %s", in.Detail())
	c.Add(10 * time.Minute)
	require.NoError(t, src.Update(t.Context()))
	assert.Empty(t, src.Trust().Keys(bob), "past its grace")
	in = receive(t, a, pb.offer(t, me, c.Now(), nil))
	assert.Equal(t, reason.UntrustedKey, in.Reason())
}

// State carries the cache to a new Source: nothing is fetched until it is
// due, and then it is revalidated by its ETag.
func TestState(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, 5*time.Minute, p.key())
	cfg := Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now}
	src, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, src.Update(t.Context()))
	old := p.key()
	cur := newPeer(t, alice, handoff.JWS)
	require.NoError(t, ks.pub.Set(cur.key()))
	c.Add(5 * time.Minute)
	require.NoError(t, src.Update(t.Context()))
	require.Len(t, src.Trust().Keys(alice), 2, "the new key and the retired one")
	state, err := src.State()
	require.NoError(t, err)
	src.Close()

	c.Add(time.Minute)
	cfg.State = state
	next, err := New(cfg)
	require.NoError(t, err)
	defer next.Close()
	require.NoError(t, next.Update(t.Context()))
	assert.Equal(t, int64(2), ks.requests.Load(), "nothing fetched before it is due")
	assert.Len(t, next.Trust().Keys(alice), 2, "the retired key kept its grace across processes")
	assert.Contains(t, next.Trust().Keys(alice), old)
	c.Add(4 * time.Minute)
	require.NoError(t, next.Update(t.Context()))
	assert.Equal(t, int64(3), ks.requests.Load())
	assert.Equal(t, ks.pub.ETag(), ks.lastINM.Load())

	// A state for another URL adds nothing to fetch, and a tampered one
	// is refused whole or validated again.
	other := Config{Agents: map[handoff.AgentID]Endpoint{bob: {URL: ks.URL + "/other"}}, Now: c.Now, State: state}
	s3, err := New(other)
	require.NoError(t, err)
	assert.Empty(t, s3.Trust().Keys(bob))
	s3.Close()
	bad := strings.Replace(string(state), `"body":"`, `"body":"eyJrZXlzIjpbey`, 1)
	cfg.State = []byte(bad)
	s4, err := New(cfg)
	require.NoError(t, err)
	assert.Empty(t, s4.Trust().Keys(alice), "a cached document that fails validation is not used")
	s4.Close()
}

// Run refreshes in the background when a set's lifetime ends, without a
// test clock that sleeps: its timer is replaced.
func TestRun(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, 2*time.Minute, p.key())
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now})
	require.NoError(t, err)
	defer src.Close()
	waits := make(chan time.Duration)
	fire := make(chan time.Time)
	src.after = func(d time.Duration) <-chan time.Time { waits <- d; return fire }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- src.Run(ctx) }()
	assert.Equal(t, 108*time.Second, <-waits, "first fetch done, the next before max-age 120 s ends")
	assert.Equal(t, int64(1), ks.requests.Load())
	c.Add(108 * time.Second)
	fire <- c.Now()
	assert.Equal(t, 108*time.Second, <-waits)
	assert.Equal(t, int64(2), ks.requests.Load())
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

// After a key change the Agent's verified-element cache never reports an
// element as verified by a removed key: alice's element, cached when it
// verified, is checked again once her old key has left the trust, and an
// element of bob, who kept his key, stays cached.
func TestCacheDropsElementsOfRemovedKeys_HC21(t *testing.T) {
	c := newClock()
	pa, pb, carol := newPeer(t, alice, handoff.JWS), newPeer(t, bob, handoff.COSE), newPeer(t, "spiffe://c.example/agent/carol", handoff.JWS)
	as, bs, cs := newKeyServer(t, time.Minute, pa.key()), newKeyServer(t, time.Minute, pb.key()), newKeyServer(t, time.Minute, carol.key())
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: as.URL}, bob: {URL: bs.URL}, carol.id: {URL: cs.URL}},
		Now: c.Now, Grace: time.Minute})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)

	// alice -> bob -> carol -> me: alice's and bob's elements are cached.
	e0 := pa.offer(t, bob, c.Now(), nil)
	d0 := e0.Digest()
	e1 := pb.offer(t, carol.id, c.Now(), func(o *handoff.Offer) { o.Prev = &d0 })
	d1 := e1.Digest()
	next := func() handoff.Signed { return carol.offer(t, me, c.Now(), func(o *handoff.Offer) { o.Prev = &d1 }) }
	in := receive(t, a, e0, e1, next())
	require.True(t, in.Accepted(), in.Detail())
	require.Equal(t, handoff.ChainFull, in.Chain())

	require.NoError(t, as.pub.Set(newPeer(t, alice, handoff.JWS).key()))
	c.Add(time.Minute)
	require.NoError(t, src.Update(t.Context()))
	in = receive(t, a, e0, e1, next())
	require.True(t, in.Accepted(), in.Detail())
	assert.Equal(t, handoff.ChainFull, in.Chain(), "alice's old key within its grace")

	c.Add(time.Minute)
	require.NoError(t, src.Update(t.Context()))
	in = receive(t, a, e0, e1, next())
	require.True(t, in.Accepted(), in.Detail())
	assert.Equal(t, handoff.ChainUnverifiable, in.Chain(), "alice's element is no longer verified")
	var verified []bool
	for _, l := range in.Links() {
		verified = append(verified, l.Verified)
	}
	assert.Equal(t, []bool{false, true}, verified)
}

// The Publisher serves a JWK Set with the headers a Source reads, answers
// If-None-Match by 304, HEAD without a body, and refuses other methods.
func TestPublisher(t *testing.T) {
	p := newPeer(t, alice, handoff.JWS)
	var served []string
	var mu sync.Mutex
	pub, err := NewPublisher(PublisherConfig{MaxAge: 2 * time.Minute, OnServe: func(r *http.Request, etag string) {
		mu.Lock()
		served = append(served, r.Header.Get("User-Agent")+" "+etag)
		mu.Unlock()
	}}, p.key())
	require.NoError(t, err)
	get := func(method string, h http.Header) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/jwks.json", nil)
		for k, v := range h {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		pub.ServeHTTP(w, r)
		return w
	}
	w := get(http.MethodGet, http.Header{"User-Agent": {"peer-1"}})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/jwk-set+json", w.Header().Get("Content-Type"))
	assert.Equal(t, "public, max-age=120", w.Header().Get("Cache-Control"))
	etag := w.Header().Get("ETag")
	assert.Equal(t, pub.ETag(), etag)
	ks, err := ParseJWKSet(w.Body.Bytes(), "")
	require.NoError(t, err)
	assert.Equal(t, []handoff.TrustedKey{{Public: p.key().Public, Alg: handoff.ES256, KID: p.key().KID}}, ks)
	assert.NotContains(t, w.Body.String(), `"d"`)

	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		w = get(http.MethodGet, http.Header{"If-None-Match": {inm}})
		assert.Equal(t, http.StatusNotModified, w.Code, inm)
		assert.Empty(t, w.Body.String())
	}
	assert.Equal(t, http.StatusOK, get(http.MethodGet, http.Header{"If-None-Match": {`"other"`}}).Code)
	w = get(http.MethodHead, nil)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Empty(t, w.Body.String())
	w = get(http.MethodPost, nil)
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))

	require.NoError(t, pub.Set(p.key(), newEdPeer(t, alice).key()))
	assert.NotEqual(t, etag, pub.ETag(), "a new set, a new ETag")
	assert.Equal(t, http.StatusOK, get(http.MethodGet, http.Header{"If-None-Match": {etag}}).Code)
	mu.Lock()
	assert.Equal(t, "peer-1 "+etag, served[0])
	assert.Len(t, served, 7, "every GET, 304s included")
	mu.Unlock()
	_, err = NewPublisher(PublisherConfig{MaxAge: -time.Second})
	assert.ErrorIs(t, err, ErrConfig)
}

// reentrant is a slog.Handler that calls back into the Source, as a
// caller's handler may: it would deadlock if the Source logged under its
// lock.
type reentrant struct {
	src   **Source
	count *atomic.Int64
}

func (h reentrant) Enabled(context.Context, slog.Level) bool { return true }
func (h reentrant) Handle(context.Context, slog.Record) error {
	if *h.src != nil {
		if _, err := (*h.src).State(); err != nil {
			return err
		}
		h.count.Add(1)
	}
	return nil
}
func (h reentrant) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h reentrant) WithGroup(string) slog.Handler      { return h }

// The Logger is the caller's code: the Source never calls it with its lock
// held.
func TestLoggerRunsWithoutLock(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, time.Minute, p.key())
	var src *Source
	var n atomic.Int64
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now,
		Logger: slog.New(reentrant{src: &src, count: &n})})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context())) // "key added"
	ks.answer(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{`)) })
	c.Add(time.Minute)
	assert.Error(t, src.Update(t.Context())) // "refresh failed"
	assert.GreaterOrEqual(t, n.Load(), int64(2))
}

// Follow hands every change to every Agent that follows, one swap each;
// an error from the first call is returned.
func TestFollow(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, time.Minute, p.key())
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now})
	require.NoError(t, err)
	defer src.Close()
	a, b := receiver(t, src, c), receiver(t, src, c)
	for _, ag := range []*handoff.Agent{a, b} {
		in := receive(t, ag, p.offer(t, me, c.Now(), nil))
		assert.Equal(t, reason.UntrustedKey, in.Reason(), "nothing fetched yet")
		assert.Contains(t, in.Detail(), "no JWK Set fetched yet")
	}
	src.waitIdle() // the refresh the first unknown key started
	require.NoError(t, src.Update(t.Context()))
	assert.Equal(t, int64(1), ks.requests.Load(), "one fetch: Update found the set fresh")
	for _, ag := range []*handoff.Agent{a, b} {
		in := receive(t, ag, p.offer(t, me, c.Now(), nil))
		assert.True(t, in.Accepted(), in.Detail())
	}
	assert.ErrorIs(t, src.Follow(nil), ErrConfig)
	assert.ErrorIs(t, src.Follow(func(*handoff.Trust) error { return assert.AnError }), assert.AnError)
}

// With a whole document, a storm of forged issuers refreshes the document
// at most once per MinRefresh.
func TestDocumentUnknownIssStorm(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	jwk, err := PublicJWK(p.key())
	require.NoError(t, err)
	doc := []byte(`{"` + string(alice) + `":{"keys":[` + string(jwk) + `]}}`)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Write(doc)
	}))
	defer srv.Close()
	src, err := New(Config{Document: srv.URL, Now: c.Now, MinRefresh: time.Minute})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))
	a := receiver(t, src, c)
	c.Add(time.Minute)
	for i := range 30 {
		forger := newPeer(t, handoff.AgentID(fmt.Sprintf("spiffe://x.example/agent/%d", i)), handoff.JWS)
		in := receive(t, a, forger.offer(t, me, c.Now(), nil))
		assert.Equal(t, reason.UntrustedKey, in.Reason())
	}
	src.waitIdle()
	assert.Equal(t, int64(2), hits.Load(), "one refresh of the document for the whole storm")
	in := receive(t, a, p.offer(t, me, c.Now(), nil))
	assert.True(t, in.Accepted(), in.Detail())
}

// Run's context canceled while a fetch is under way (a normal shutdown) is
// not a failed refresh: nothing is logged at WARN, the last good set stays,
// and Run returns the context's error.
func TestRunCanceledIsNoFailedRefresh(t *testing.T) {
	c := newClock()
	p := newPeer(t, alice, handoff.JWS)
	ks := newKeyServer(t, time.Minute, p.key())
	var logs bytes.Buffer
	var mu sync.Mutex
	src, err := New(Config{Agents: map[handoff.AgentID]Endpoint{alice: {URL: ks.URL}}, Now: c.Now,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, src.Update(t.Context()))

	held := make(chan struct{})
	var once sync.Once
	ks.answer(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(held) })
		<-r.Context().Done() // the fetch hangs until the client gives up
	})
	c.Add(time.Minute) // the set is due again
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	<-held
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	assert.NotContains(t, out, "refresh failed")
	assert.NotContains(t, out, "level=WARN")
	st, err := src.State()
	require.NoError(t, err)
	assert.NotContains(t, string(st), "context canceled", "a shutdown is recorded as no endpoint's error")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
