package redisstore

import (
	"bytes"
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/replay"
)

// dropProxy forwards TCP connections to a Redis server and, once, closes
// the connection instead of forwarding the reply to a command that carries
// the octets trigger: the server applied the command, the client never
// learns it.
type dropProxy struct {
	l       net.Listener
	target  string
	trigger []byte
	dropped atomic.Int32 // replies dropped
	seen    atomic.Int32 // commands carrying trigger
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func newDropProxy(t *testing.T, target string, trigger []byte) *dropProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &dropProxy{l: l, target: target, trigger: trigger}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) addr() string { return p.l.Addr().String() }

func (p *dropProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *dropProxy) close() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		var dropNext atomic.Bool
		p.wg.Add(2)
		// Client to server. go-redis waits for the reply of one command
		// before it writes the next on a connection, so the next reply on
		// this connection after a command carrying trigger is its reply.
		go func() {
			defer p.wg.Done()
			defer server.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					if bytes.Contains(buf[:n], p.trigger) {
						p.seen.Add(1)
						if p.dropped.Load() == 0 {
							dropNext.Store(true)
						}
					}
					if _, werr := server.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		// Server to client.
		go func() {
			defer p.wg.Done()
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 {
					if dropNext.Load() && p.dropped.CompareAndSwap(0, 1) {
						// The reply is lost with the connection.
						client.Close()
						server.Close()
						return
					}
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// TestRememberReplyLost: Redis applies the check-and-record (SET NX GET)
// but its reply is lost; go-redis, with its default options (3 retries),
// sends the command again, which finds the record the first attempt wrote. Remember
// must still report its own insert: a receiver that saw "not inserted"
// would answer "retransmission" for an offer no replica accepted, and the
// hop would be stranded (HC-33, HC-35).
func TestRememberReplyLost(t *testing.T) {
	direct := testClient(t)
	addr := os.Getenv("HANDOFF_REDIS_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	ctx := context.Background()
	prefix := testPrefix(t, direct)

	for _, tc := range []struct {
		name         string
		token        []byte
		wantInserted bool
	}{
		{"with a token", bytes.Repeat([]byte{0x5a}, replay.TokenSize), true},
		// Without a token the retry cannot tell its own record from
		// another call's: the failure the token is there to prevent.
		{"without a token", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := replay.Key{Iss: "https://delegator.example", Hop: "hop " + tc.name}
			// The hop's key is in the command and in its retry.
			proxy := newDropProxy(t, addr, []byte(New(nil, Options{Prefix: prefix}).key(k)))
			c := redis.NewClient(&redis.Options{Addr: proxy.addr()}) // default retries
			defer c.Close()
			s := New(c, Options{Prefix: prefix})
			rec := replay.Record{Digest: digest("offer"), Token: tc.token, Created: time.Now(), Expires: time.Now().Add(time.Hour)}

			held, inserted, err := s.Remember(ctx, k, rec)
			require.NoError(t, err, "the client retries after the lost reply")
			assert.Equal(t, int32(1), proxy.dropped.Load(), "one reply was dropped")
			assert.Equal(t, int32(2), proxy.seen.Load(), "the command ran twice: the call and the client's retry")
			assert.Equal(t, tc.wantInserted, inserted)
			assert.True(t, rec.Equal(held), "held %+v, want %+v", held, rec)

			// The first attempt's write landed: the record is the call's.
			got, ok, err := New(direct, Options{Prefix: prefix}).Get(ctx, k)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, tc.token, got.Token)
		})
	}
}

// TestSwapReplyLost: Redis applies the Swap script but its reply is lost;
// go-redis runs it again, which finds the state the first attempt wrote.
// Swap must still report its write: a delegate told "not swapped" would
// decide again from a record that is its own answer. Both scripts: the one
// for a caller that knows the held record whole, and the one for a caller
// that names its digest only.
func TestSwapReplyLost(t *testing.T) {
	direct := testClient(t)
	addr := os.Getenv("HANDOFF_REDIS_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		script *redis.Script
		old    func(replay.Record) replay.Record
	}{
		{"known record", knownSwapScript, func(r replay.Record) replay.Record { return r }},
		{"digest only", hopSwapScript, func(r replay.Record) replay.Record { return replay.Record{Digest: r.Digest} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.script.Load(ctx, direct).Err())
			prefix := testPrefix(t, direct)
			k := replay.Key{Iss: "https://delegator.example", Hop: "swapped"}
			rec := replay.Record{Digest: digest("offer"), Token: bytes.Repeat([]byte{0x5a}, replay.TokenSize),
				Created: time.Now(), Expires: time.Now().Add(time.Hour)}
			_, inserted, err := New(direct, Options{Prefix: prefix}).Remember(ctx, k, rec)
			require.NoError(t, err)
			require.True(t, inserted)

			proxy := newDropProxy(t, addr, []byte(tc.script.Hash()))
			c := redis.NewClient(&redis.Options{Addr: proxy.addr()}) // default retries
			defer c.Close()
			s := New(c, Options{Prefix: prefix})
			want := rec
			want.State, want.Status, want.Expires = "accepted", []byte("signed accepted"), time.Time{}
			held, swapped, err := s.Swap(ctx, k, tc.old(rec), replay.Record{State: want.State, Status: want.Status})
			require.NoError(t, err, "the client retries after the lost reply")
			assert.Equal(t, int32(1), proxy.dropped.Load(), "one reply was dropped")
			assert.Equal(t, int32(2), proxy.seen.Load(), "the script ran twice")
			assert.True(t, swapped, "a retried Swap reports its own write")
			assert.True(t, want.Equal(held), "held %+v, want %+v", held, want)
			got, ok, err := New(direct, Options{Prefix: prefix}).Get(ctx, k)
			require.NoError(t, err)
			require.True(t, ok)
			assert.True(t, want.Equal(got), "held %+v, want %+v", got, want)
		})
	}
}

// TestOfferCreateReplyLost: the reply of the Create script is lost and
// go-redis, with its default options, runs it again. Create must report
// the record it inserted, not ErrExists.
func TestOfferCreateReplyLost(t *testing.T) {
	direct := testClient(t)
	addr := os.Getenv("HANDOFF_REDIS_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	ctx := context.Background()
	require.NoError(t, createScript.Load(ctx, direct).Err())
	prefix := offerPrefix(t, direct)
	proxy := newDropProxy(t, addr, []byte(createScript.Hash()))
	c := redis.NewClient(&redis.Options{Addr: proxy.addr()}) // default retries
	defer c.Close()
	s := NewOffers(c, Options{Prefix: prefix})
	rec := replay.OfferRecord{Hop: "h", To: "t", Digest: digest("offer"), Open: true, Work: "job",
		Handoff: []byte("sent"), Created: time.Now()}
	got, err := s.Create(ctx, rec)
	require.NoError(t, err, "a retried Create reports its own insert")
	assert.Equal(t, int32(1), proxy.dropped.Load(), "one reply was dropped")
	assert.Equal(t, int32(2), proxy.seen.Load(), "the script ran twice")
	held, ok, err := NewOffers(direct, Options{Prefix: prefix}).Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, held.Equal(got))
}
