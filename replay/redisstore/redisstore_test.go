package redisstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/internal/codec"
	"github.com/agentproto/handoff/replay/storetest"
)

// The tests use the Redis server at HANDOFF_REDIS_ADDR (default
// 127.0.0.1:6399; .ci/redis.sh starts one). When none answers they are
// skipped, unless CI is set or HANDOFF_REQUIRE_REDIS=1, when they fail.
// The restart and memory tests start their own redis-server from PATH.

const defaultAddr = "127.0.0.1:6399"

func required() bool {
	return os.Getenv("CI") != "" || os.Getenv("HANDOFF_REQUIRE_REDIS") == "1"
}

// missing skips or fails the test for a missing dependency.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("%s (required: CI or HANDOFF_REQUIRE_REDIS=1 is set)", msg)
	}
	t.Skipf("%s; run .ci/redis.sh or set HANDOFF_REDIS_ADDR (CI=1 or HANDOFF_REQUIRE_REDIS=1 turns this skip into a failure)", msg)
}

func clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		ContextTimeoutEnabled: true,
	}
}

// testClient returns a client of the shared test server.
func testClient(t testing.TB) *redis.Client {
	t.Helper()
	addr := os.Getenv("HANDOFF_REDIS_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	probeOpts := clientOptions(addr)
	probeOpts.MaxRetries, probeOpts.DialerRetries = -1, 1
	probe := redis.NewClient(probeOpts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := probe.Ping(ctx).Err()
	probe.Close()
	if err != nil {
		missing(t, "no Redis server answers at %s: %v", addr, err)
	}
	c := redis.NewClient(clientOptions(addr))
	t.Cleanup(func() { c.Close() })
	return c
}

// testPrefix returns a prefix no other test uses, and deletes its keys when
// the test ends.
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	var b [8]byte
	rand.Read(b[:])
	prefix := "handofftest-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return prefix
}

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func TestStore(t *testing.T) {
	c := testClient(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return New(c, Options{Prefix: testPrefix(t, c)})
	}, storetest.Options{
		RealTime: true,
		Reopen: func(t *testing.T, closed replay.Store, now func() time.Time) replay.Store {
			// A new store over the same server and prefix: nothing is
			// kept in the client.
			return New(c, Options{Prefix: closed.(*Store).prefix})
		},
	})
}

// TestStoreIssuerShare runs the suite against a store that keeps a
// per-issuer share: among others, its IssuerShare subtest floods one
// issuer and checks that another's fresh record is still taken.
func TestStoreIssuerShare(t *testing.T) {
	c := testClient(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return New(c, Options{Prefix: testPrefix(t, c), MaxPerIssuer: 40})
	}, storetest.Options{
		RealTime:     true,
		MaxPerIssuer: 40,
		Reopen: func(t *testing.T, closed replay.Store, now func() time.Time) replay.Store {
			return New(c, Options{Prefix: closed.(*Store).prefix, MaxPerIssuer: 40})
		},
	})
}

// TestIssuerShareFloodedServer: with the documented setting (a server
// whose maxmemory holds the shares, and MaxPerIssuer), a trusted
// delegator that floods the store to its cap is refused with
// ErrIssuerFull, and another delegator's fresh offer is still accepted.
func TestIssuerShareFloodedServer(t *testing.T) {
	srv := startServer(t, "--maxmemory", "8mb", "--maxmemory-policy", "noeviction", "--appendonly", "no")
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	const share = 2000
	s := New(c, Options{MaxPerIssuer: share})
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	flooded := 0
	for i := range 10 * share {
		_, inserted, err := s.Remember(ctx, replay.Key{Iss: "https://flooder.example", Hop: fmt.Sprint("f", i)},
			replay.Record{Digest: digest(fmt.Sprint(i)), Token: bytes.Repeat([]byte{1}, replay.TokenSize), Expires: exp})
		if err != nil {
			require.ErrorIs(t, err, replay.ErrIssuerFull, "the flooder meets its share, not the server's cap")
			flooded = i
			break
		}
		require.True(t, inserted)
	}
	require.Equal(t, share, flooded)
	for i := range 100 {
		_, inserted, err := s.Remember(ctx, replay.Key{Iss: "https://innocent.example", Hop: fmt.Sprint("i", i)},
			replay.Record{Digest: digest(fmt.Sprint(i)), Expires: exp})
		require.NoError(t, err, "an innocent delegator's fresh offer during the flood")
		assert.True(t, inserted)
	}
}

func TestKey(t *testing.T) {
	s := New(nil, Options{})
	for _, k := range []replay.Key{
		{Iss: "a", Hop: "b"},
		{Iss: "a}|{b", Hop: "}{|"},
		{Iss: "{", Hop: "}"},
		{Iss: "\x00\xff", Hop: "é"},
	} {
		key := s.key(k)
		require.True(t, strings.HasPrefix(key, DefaultPrefix+":{"), key)
		require.True(t, strings.HasSuffix(key, "}"), key)
		assert.Equal(t, 1, strings.Count(key, "{"), key)
		assert.Equal(t, 1, strings.Count(key, "}"), key)
		// The hash tag is the text between the braces: both parts decode
		// back to the key.
		tag := key[strings.IndexByte(key, '{')+1 : len(key)-1]
		iss, hop, ok := strings.Cut(tag, "|")
		require.True(t, ok, key)
		gotIss, err := base64.RawURLEncoding.DecodeString(iss)
		require.NoError(t, err)
		gotHop, err := base64.RawURLEncoding.DecodeString(hop)
		require.NoError(t, err)
		assert.Equal(t, k, replay.Key{Iss: string(gotIss), Hop: string(gotHop)})
	}
	assert.Equal(t, "p:{YQ|Yg}", New(nil, Options{Prefix: "p"}).key(replay.Key{Iss: "a", Hop: "b"}))
	assert.Panics(t, func() { New(nil, Options{Prefix: "a{b"}) })
	assert.Panics(t, func() { New(nil, Options{Prefix: "a}"}) })
}

func TestPXAT(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Unix(math.MaxInt64/1000-2, 0), "9223372036854773000"},
		{time.Time{}, ""},
		{time.Unix(1, 0), "1000"},
		{time.Unix(1, 1), "1001"},
		{time.Unix(1, 999_000_000), "1999"},
		{time.Unix(1, 999_000_001), "2000"},
		{time.Unix(0, 0), "1"},
		{time.Unix(-5, 0), "1"},
		{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), "253402214400000"},
	} {
		got, ok := pxat(tc.t)
		assert.True(t, ok, "%v", tc.t)
		assert.Equal(t, tc.want, got, "%v", tc.t)
	}
	// A time past Unix milliseconds is refused, never kept for less (nor
	// kept for ever).
	for _, tt := range []time.Time{time.Unix(math.MaxInt64/1000-1, 0), time.Unix(1<<62, 0)} {
		_, ok := pxat(tt)
		assert.False(t, ok, "%v", tt)
		_, err := expiryArg(tt)
		assert.ErrorIs(t, err, replay.ErrExpiry)
	}
}

// closedAddr returns an address on which nothing listens.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func requireUnavailable(t *testing.T, s *Store, k replay.Key, rec replay.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, inserted, err := s.Remember(ctx, k, rec)
	assert.ErrorIs(t, err, replay.ErrUnavailable, "Remember")
	assert.False(t, inserted, "Remember must never report an insert it could not make")
	assert.Nil(t, held.Digest)
	_, ok, err := s.Get(ctx, k)
	assert.ErrorIs(t, err, replay.ErrUnavailable, "Get")
	assert.False(t, ok)
	assert.ErrorIs(t, s.Update(ctx, k, rec), replay.ErrUnavailable, "Update")
}

func TestOutage(t *testing.T) {
	opts := clientOptions(closedAddr(t))
	opts.MaxRetries, opts.DialerRetries = -1, 1
	c := redis.NewClient(opts)
	defer c.Close()
	s := New(c, Options{})
	requireUnavailable(t, s, replay.Key{Iss: "iss", Hop: "hop"}, replay.Record{Digest: digest("offer")})
}

func TestTimeout(t *testing.T) {
	// A server that accepts connections and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	opts := clientOptions(l.Addr().String())
	opts.ReadTimeout = 100 * time.Millisecond
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	defer c.Close()
	s := New(c, Options{})
	start := time.Now()
	requireUnavailable(t, s, replay.Key{Iss: "iss", Hop: "hop"}, replay.Record{Digest: digest("offer")})
	assert.Less(t, time.Since(start), 8*time.Second)

	// A context deadline bounds the wait as well.
	opts.ReadTimeout = time.Minute
	c2 := redis.NewClient(opts)
	defer c2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, inserted, err := New(c2, Options{}).Remember(ctx, replay.Key{Iss: "iss", Hop: "hop"}, replay.Record{Digest: digest("offer")})
	assert.ErrorIs(t, err, replay.ErrUnavailable)
	assert.False(t, inserted)
	assert.Less(t, time.Since(start), 15*time.Second)
}

func TestMalformedValue(t *testing.T) {
	c := testClient(t)
	s := New(c, Options{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	k := replay.Key{Iss: "iss", Hop: "hop"}
	for _, bad := range []string{"", "\x02", "\x01short", "\x01" + strings.Repeat("\x00", 45) + "\xff"} {
		require.NoError(t, c.Set(ctx, s.key(k), bad, 0).Err())
		_, ok, err := s.Get(ctx, k)
		assert.Error(t, err, "Get of %q", bad)
		assert.False(t, ok)
		_, inserted, err := s.Remember(ctx, k, replay.Record{Digest: digest("x")})
		assert.Error(t, err, "Remember over %q", bad)
		assert.False(t, inserted)
		assert.Error(t, s.Update(ctx, k, replay.Record{Digest: digest("x")}), "Update over %q", bad)
	}
	// A key of another type is an error too.
	require.NoError(t, c.Del(ctx, s.key(k)).Err())
	require.NoError(t, c.LPush(ctx, s.key(k), "x").Err())
	_, inserted, err := s.Remember(ctx, k, replay.Record{Digest: digest("x")})
	assert.Error(t, err)
	assert.False(t, inserted)
}

// server is a redis-server run by a test.
type server struct {
	t    *testing.T
	args []string
	addr string
	cmd  *exec.Cmd
	log  *bytes.Buffer
}

// startServer starts redis-server on a free port with the given
// configuration, in a temporary directory kept across restarts.
func startServer(t *testing.T, conf ...string) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server is not on PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	args := append([]string{bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", t.TempDir(), "--save", "", "--daemonize", "no",
	}, conf...)
	s := &server{t: t, args: args, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.log = new(bytes.Buffer)
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	require.NoError(s.t, s.cmd.Start())
	c := redis.NewClient(clientOptions(s.addr))
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.kill()
			s.t.Fatalf("redis-server on %s did not answer: %v\n%s", s.addr, err, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the server abruptly, as a crash would.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// TestRestart kills a server with an append-only file synced on every
// write, checks that the store fails closed meanwhile, restarts it over the
// same directory and checks that every acknowledged record is still held.
func TestRestart(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	opts := clientOptions(srv.addr)
	opts.MaxRetries, opts.DialerRetries = -1, 1
	c := redis.NewClient(opts)
	defer c.Close()
	s := New(c, Options{})
	ctx := context.Background()

	key := func(i int) replay.Key {
		return replay.Key{Iss: "https://delegator.example", Hop: fmt.Sprint("hop-", i)}
	}
	exp := time.Now().Add(time.Hour)
	const n = 200
	recs := make([]replay.Record, n)
	for i := range n {
		recs[i] = replay.Record{Digest: digest(fmt.Sprint(i)), Expires: exp}
		switch i % 3 {
		case 1:
			recs[i].Expires = time.Time{}
		case 2:
			recs[i].Expires = time.Now().Add(-time.Second) // expired
		}
		_, inserted, err := s.Remember(ctx, key(i), recs[i])
		require.NoError(t, err)
		require.True(t, inserted)
		if i%5 == 0 && i%3 != 2 {
			recs[i].State, recs[i].Status = "completed", []byte(fmt.Sprint("status ", i))
			require.NoError(t, s.Update(ctx, key(i), recs[i]))
		}
	}

	srv.kill()
	requireUnavailable(t, s, key(n), replay.Record{Digest: digest("during the outage")})

	srv.start()
	for i := range n {
		got, ok, err := s.Get(ctx, key(i))
		require.NoError(t, err, "Get after the restart")
		if i%3 == 2 {
			assert.False(t, ok, "expired record %d", i)
			continue
		}
		if assert.True(t, ok, "record %d", i) {
			assert.True(t, recs[i].Equal(got), "record %d: got %+v, want %+v", i, got, recs[i])
		}
	}
	held, inserted, err := s.Remember(ctx, key(0), replay.Record{Digest: digest("equivocating offer")})
	require.NoError(t, err)
	assert.False(t, inserted)
	assert.True(t, recs[0].Equal(held))
	_, inserted, err = s.Remember(ctx, key(n), replay.Record{Digest: digest("after the outage")})
	require.NoError(t, err)
	assert.True(t, inserted, "the record refused during the outage was never written")
}

// TestServerFull fills a server that may not evict and checks that new hops
// are refused with ErrFull while held ones are still answered.
func TestServerFull(t *testing.T) {
	srv := startServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction", "--appendonly", "no")
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	s := New(c, Options{})
	ctx := context.Background()
	status := bytes.Repeat([]byte{0xa5}, 8<<10)
	key := func(i int) replay.Key { return replay.Key{Iss: "iss", Hop: fmt.Sprint(i)} }
	full := -1
	for i := range 10000 {
		_, inserted, err := s.Remember(ctx, key(i), replay.Record{Digest: digest(fmt.Sprint(i)), Status: status})
		if err != nil {
			require.ErrorIs(t, err, replay.ErrFull)
			assert.False(t, inserted)
			full = i
			break
		}
		require.True(t, inserted)
	}
	require.Greater(t, full, 0, "the server never filled up")
	for i := range full {
		held, inserted, err := s.Remember(ctx, key(i), replay.Record{Digest: digest("other")})
		require.NoError(t, err, "Remember of held hop %d in a full server", i)
		assert.False(t, inserted)
		assert.Equal(t, digest(fmt.Sprint(i)), held.Digest)
	}
	_, ok, err := s.Get(ctx, key(full))
	require.NoError(t, err)
	assert.False(t, ok)
}

// offerPrefix returns a prefix no other test uses, and deletes the keys of
// its OfferStore when the test ends.
func offerPrefix(t testing.TB, c redis.UniversalClient) string {
	var b [8]byte
	rand.Read(b[:])
	prefix := "handofftest-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, "{"+prefix+"}:*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return prefix
}

func TestOfferStore(t *testing.T) {
	c := testClient(t)
	prefixes := map[replay.OfferStore]string{}
	var mu sync.Mutex
	storetest.RunOffers(t, func(t *testing.T, now func() time.Time) replay.OfferStore {
		p := offerPrefix(t, c)
		s := NewOffers(c, Options{Prefix: p})
		mu.Lock()
		prefixes[s] = p
		mu.Unlock()
		return s
	}, storetest.OfferOptions{
		RealTime: true,
		Reopen: func(t *testing.T, closed replay.OfferStore, now func() time.Time) replay.OfferStore {
			// A new store over the same server and prefix, as another
			// process would open it: nothing is kept in the client.
			mu.Lock()
			defer mu.Unlock()
			s := NewOffers(c, Options{Prefix: prefixes[closed]})
			prefixes[s] = prefixes[closed]
			return s
		},
	})
}

func TestOfferStoreOutage(t *testing.T) {
	opts := clientOptions(closedAddr(t))
	opts.MaxRetries, opts.DialerRetries = -1, 1
	c := redis.NewClient(opts)
	defer c.Close()
	s := NewOffers(c, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec := replay.OfferRecord{Hop: "h", To: "t", Digest: digest("offer"), Open: true, Work: "w", Version: 1}
	_, err := s.Create(ctx, rec)
	assert.ErrorIs(t, err, replay.ErrUnavailable, "Create")
	_, ok, err := s.Get(ctx, "h")
	assert.ErrorIs(t, err, replay.ErrUnavailable, "Get")
	assert.False(t, ok)
	_, err = s.Swap(ctx, rec, rec)
	assert.ErrorIs(t, err, replay.ErrUnavailable, "Swap")
	assert.ErrorIs(t, s.Delete(ctx, "h", 1), replay.ErrUnavailable, "Delete")
	_, err = s.List(ctx, replay.OfferQuery{})
	assert.ErrorIs(t, err, replay.ErrUnavailable, "List")
}

// The keys of one OfferStore share one Redis Cluster hash tag, whatever
// the hop or work.
func TestOfferKeys(t *testing.T) {
	s := NewOffers(nil, Options{Prefix: "p"})
	for _, k := range []string{s.recKey("a}{b"), s.workKey("{w}"), s.allKey(), s.seqKey()} {
		assert.True(t, strings.HasPrefix(k, "{p}:"), k)
		assert.Equal(t, 1, strings.Count(k, "{"), k)
		assert.Equal(t, 1, strings.Count(k, "}"), k)
	}
	assert.Panics(t, func() { NewOffers(nil, Options{Prefix: "a{"}) })
}

// TestOfferStoreServerRestart kills a server with an append-only file
// synced on every write: the store fails closed meanwhile, and after the
// restart every acknowledged record, the work it holds (HC-42) and the
// Version sequence are as before.
func TestOfferStoreServerRestart(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	opts := clientOptions(srv.addr)
	opts.MaxRetries, opts.DialerRetries = -1, 1
	c := redis.NewClient(opts)
	defer c.Close()
	s := NewOffers(c, Options{})
	ctx := context.Background()
	open, err := s.Create(ctx, replay.OfferRecord{Hop: "a", To: "t", Digest: digest("a"), Open: true, Work: "job",
		Handoff: []byte("sent"), Created: time.Now()})
	require.NoError(t, err)
	done, err := s.Create(ctx, replay.OfferRecord{Hop: "b", To: "t", Digest: digest("b"), State: "completed"})
	require.NoError(t, err)

	srv.kill()
	_, err = s.Create(ctx, replay.OfferRecord{Hop: "c", To: "t", Digest: digest("c")})
	require.ErrorIs(t, err, replay.ErrUnavailable)
	_, _, err = s.Get(ctx, "a")
	require.ErrorIs(t, err, replay.ErrUnavailable)

	srv.start()
	got, ok, err := s.Get(ctx, "a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, open.Equal(got))
	got, ok, err = s.Get(ctx, "b")
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, done.Equal(got))
	_, err = s.Create(ctx, replay.OfferRecord{Hop: "a2", To: "t", Digest: digest("a2"), Open: true, Work: "job"})
	require.ErrorIs(t, err, replay.ErrBusy)
	c2, err := s.Create(ctx, replay.OfferRecord{Hop: "c", To: "t", Digest: digest("c")})
	require.NoError(t, err)
	assert.Greater(t, c2.Version, done.Version, "the Version sequence survives the restart")
}

// A server that accepts connections and never answers: every OfferStore
// call returns within its context's deadline, failing closed.
func TestOfferStoreDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	opts := clientOptions(l.Addr().String())
	opts.ReadTimeout = time.Minute // only the context bounds the wait
	c := redis.NewClient(opts)
	defer c.Close()
	s := NewOffers(c, Options{})
	rec := replay.OfferRecord{Hop: "h", To: "t", Digest: digest("offer"), Version: 1}
	for name, call := range map[string]func(ctx context.Context) error{
		"Create": func(ctx context.Context) error { _, err := s.Create(ctx, rec); return err },
		"Get":    func(ctx context.Context) error { _, _, err := s.Get(ctx, "h"); return err },
		"Swap":   func(ctx context.Context) error { _, err := s.Swap(ctx, rec, rec); return err },
		"Delete": func(ctx context.Context) error { return s.Delete(ctx, "h", 1) },
		"List":   func(ctx context.Context) error { _, err := s.List(ctx, replay.OfferQuery{}); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := call(ctx)
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded, name)
		assert.Less(t, time.Since(start), 5*time.Second, name)
	}
}

// TestKnownSwapPutsBack: a Swap whose old names a whole record that is not
// the one held writes the new value with SET XX GET and puts the held one
// back in the same script: afterwards the held value and its expiry are
// exactly as before, whether the state or the identity differed.
func TestKnownSwapPutsBack(t *testing.T) {
	c := testClient(t)
	s := New(c, Options{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	k := replay.Key{Iss: "https://delegator.example", Hop: "put back"}
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond).Add(123456 * time.Nanosecond)
	rec := replay.Record{Digest: digest("offer"), Token: bytes.Repeat([]byte{1}, replay.TokenSize), Created: time.Now(), Expires: exp}
	_, inserted, err := s.Remember(ctx, k, rec)
	require.NoError(t, err)
	require.True(t, inserted)
	before, err := c.PExpireTime(ctx, s.key(k)).Result()
	require.NoError(t, err)

	stale := rec
	stale.State = "accepted" // not the held state
	other := rec
	other.Token = bytes.Repeat([]byte{2}, replay.TokenSize) // another call's record
	for name, old := range map[string]replay.Record{"state": stale, "token": other} {
		held, swapped, err := s.Swap(ctx, k, old, replay.Record{State: "completed", Status: []byte("s")})
		if name == "token" {
			require.ErrorIs(t, err, replay.ErrConflict)
		} else {
			require.NoError(t, err)
			assert.True(t, rec.Equal(held), "held %+v", held)
		}
		assert.False(t, swapped)
		got, ok, err := s.Get(ctx, k)
		require.NoError(t, err)
		require.True(t, ok)
		assert.True(t, rec.Equal(got), "%s: the held record is back: %+v", name, got)
		after, err := c.PExpireTime(ctx, s.key(k)).Result()
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s: and its expiry", name)
	}
}

// A signed JWS status (HC-39) comes back from the store as the octets
// that were signed, and is kept in fewer octets than it has: as its
// parts decoded, with the hop, the offer's digest and the iss that the
// record's key and digest already hold taken from them.
func TestCompactStatus(t *testing.T) {
	c := testClient(t)
	s := New(c, Options{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	k := replay.Key{Iss: "spiffe://a.example/agent/planner", Hop: "7v6A2yG2tcNW7fxOG6jPDA"}
	d := digest("offer")
	enc := base64.RawURLEncoding
	status := []byte(enc.EncodeToString([]byte(`{"alg":"ES256","kid":"NVHfCESQL4okopBPVP_qYNIkcFRe0AMcQJ4it8koMyY","typ":"agent-handoff+jwt"}`)) +
		"." + enc.EncodeToString([]byte(`{"v":1,"type":"status","hop":"`+k.Hop+`","offer":{"alg":"sha-256","val":"`+
		enc.EncodeToString(d)+`"},"iss":"spiffe://b.example/agent/coder","aud":"`+k.Iss+`","iat":1796164754,"state":"accepted"}`)) +
		"." + enc.EncodeToString(bytes.Repeat([]byte{0xa5, 0x5a, 0x3c, 0xc3}, 16)))
	rec := replay.Record{Digest: d, Token: bytes.Repeat([]byte{1}, replay.TokenSize), Created: time.Now()}
	held, inserted, err := s.Remember(ctx, k, rec)
	require.NoError(t, err)
	require.True(t, inserted)
	next := replay.Record{State: "accepted", Status: status}
	held, swapped, err := s.Swap(ctx, k, held, next)
	require.NoError(t, err)
	require.True(t, swapped)
	assert.Equal(t, status, held.Status)
	got, ok, err := s.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, status, got.Status, "the status octets as signed")
	v, err := c.Get(ctx, s.key(k)).Bytes()
	require.NoError(t, err)
	assert.Less(t, len(v), 80+len(status)/3, "value of %d octets for a status of %d", len(v), len(status))
	// A retried Swap (a lost reply) finds its own write.
	_, swapped, err = s.Swap(ctx, k, rec, next)
	require.NoError(t, err)
	assert.True(t, swapped, "a retried Swap reports its own write")
}

// A record written in the encoding of version 2 (before version 3) is
// read, swapped, updated and released as before; a Swap against it, whose
// old is encoded in version 3, finds the values it expects and writes.
func TestVersion2Records(t *testing.T) {
	c := testClient(t)
	s := New(c, Options{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	status := []byte("e30.e30.c2lnbmF0dXJl") // a JWS form, kept compact in version 3
	for _, known := range []bool{true, false} {
		k := replay.Key{Iss: "https://delegator.example", Hop: fmt.Sprint("v2 ", known)}
		rec := replay.Record{Digest: digest("offer"), Token: bytes.Repeat([]byte{1}, replay.TokenSize),
			Created: time.Unix(1893456000, 5), State: "accepted", Status: status}
		v2 := codec.Encode(rec)
		require.NoError(t, c.Set(ctx, s.key(k), v2, 0).Err())
		require.NotEqual(t, v2[1:], codec.EncodeKeyed(k, rec)[1:], "the encodings differ")
		got, ok, err := s.Get(ctx, k)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, rec.Equal(got))

		old := rec
		if !known {
			old.Token, old.Created = nil, time.Time{}
		}
		done := rec
		done.State, done.Status, done.Expires = "completed", []byte("e30.e30.ZG9uZQ"), time.Now().Add(time.Hour).Round(time.Millisecond)
		held, swapped, err := s.Swap(ctx, k, old, replay.Record{State: done.State, Status: done.Status, Expires: done.Expires})
		require.NoError(t, err, "known %v", known)
		require.True(t, swapped, "known %v: Swap against a version 2 record", known)
		assert.True(t, done.Equal(held), "known %v: %+v", known, held)
		mustGetRecord(t, s, k, done)
		v, err := c.Get(ctx, s.key(k)).Bytes()
		require.NoError(t, err)
		assert.Equal(t, byte(codec.Version3), v[0], "written in version 3")
	}

	// Update and Release of version 2 records.
	k := replay.Key{Iss: "https://delegator.example", Hop: "v2 update"}
	rec := replay.Record{Digest: digest("offer"), Token: bytes.Repeat([]byte{1}, replay.TokenSize), Created: time.Unix(1893456000, 5)}
	require.NoError(t, c.Set(ctx, s.key(k), codec.Encode(rec), 0).Err())
	upd := rec
	upd.State, upd.Status = "accepted", status
	require.NoError(t, s.Update(ctx, k, upd))
	mustGetRecord(t, s, k, upd)
	kr := replay.Key{Iss: "https://delegator.example", Hop: "v2 release"}
	require.NoError(t, c.Set(ctx, s.key(kr), codec.Encode(rec), 0).Err())
	require.NoError(t, s.Release(ctx, kr, rec.Digest))
	_, ok, err := s.Get(ctx, kr)
	require.NoError(t, err)
	assert.False(t, ok)
}

func mustGetRecord(t *testing.T, s *Store, k replay.Key, want replay.Record) {
	t.Helper()
	got, ok, err := s.Get(context.Background(), k)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, want.Equal(got), "got %+v, want %+v", got, want)
}
