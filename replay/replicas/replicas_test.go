package replicas_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/agentproto/handoff/replay/redisstore"
	"github.com/agentproto/handoff/state"
)

// Several replicas of one agent behind a load balancer must share their
// (iss, hop) memory, or an offer replayed to a second replica is accepted
// twice (HC-33, HC-35, HC-53, HC-59).

func redisClient(t *testing.T) *redis.Client {
	addr := os.Getenv("HANDOFF_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6399"
	}
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second})
	if err := c.Ping(context.Background()).Err(); err != nil {
		_ = c.Close()
		msg := fmt.Sprintf("no Redis server at %s: %v", addr, err)
		if os.Getenv("CI") != "" || os.Getenv("HANDOFF_REQUIRE_REDIS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; run .ci/redis.sh")
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type replicaSet struct {
	delegator *handoff.Signer
	trust     *handoff.Trust
	replicas  []*handoff.Agent
}

const (
	replicaID   = handoff.AgentID("spiffe://b.example/agent/coder")
	replicaFrom = handoff.AgentID("spiffe://a.example/agent/planner")
)

func newReplicaSet(t *testing.T, stores []replay.Store) *replicaSet {
	key := func() *handoff.Signer {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		s, err := handoff.NewSigner(k, handoff.JWS, nil)
		require.NoError(t, err)
		return s
	}
	rs := &replicaSet{delegator: key()}
	self := key() // one identity, one key, shared by every replica
	var err error
	rs.trust, err = handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{
		replicaFrom: {rs.delegator.Key()}, replicaID: {self.Key()},
	})
	require.NoError(t, err)
	for _, st := range stores {
		a, err := handoff.NewAgent(handoff.Config{ID: replicaID, Signer: self, Trust: rs.trust, Store: st})
		require.NoError(t, err)
		rs.replicas = append(rs.replicas, a)
	}
	return rs
}

func (rs *replicaSet) offer(t *testing.T, hop handoff.HopID, task string) []byte {
	now := handoff.TimeOf(time.Now())
	s, err := rs.delegator.SignOffer(&handoff.Offer{Hop: hop, Dialog: "ctx", Task: task, Iss: replicaFrom,
		Aud: replicaID, Iat: now, Exp: now + 120})
	require.NoError(t, err)
	b, err := (&handoff.Handoff{Offer: s}).Encode(handoff.JSON)
	require.NoError(t, err)
	return b
}

// storm has every replica receive data from n goroutines at once and
// returns the results.
func (rs *replicaSet) storm(t *testing.T, data []byte, n int) []*handoff.Received {
	var mu sync.Mutex
	var out []*handoff.Received
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, a := range rs.replicas {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(a *handoff.Agent) {
				defer wg.Done()
				<-start
				in, err := a.Receive(context.Background(), data, handoff.Host{Peer: replicaFrom})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				out = append(out, in)
				mu.Unlock()
			}(a)
		}
	}
	close(start)
	wg.Wait()
	return out
}

func replicaScenario(t *testing.T, stores []replay.Store) {
	ctx := context.Background()
	rs := newReplicaSet(t, stores)
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	first := rs.offer(t, hop, "first")

	// The same offer, 32 goroutines on each of 3 replicas: one acceptance.
	results := rs.storm(t, first, 32)
	require.Len(t, results, 96)
	var accepted, retrans int
	var winner *handoff.Received
	winnerAgent := -1
	for _, in := range results {
		switch {
		case in.Accepted():
			accepted++
			winner = in
		case in.Retransmission():
			retrans++
		}
	}
	assert.Equal(t, 1, accepted, "exactly one acceptance in total")
	assert.Equal(t, 95, retrans, "every other answer is a retransmission")
	require.NotNil(t, winner)

	// The replica that took the work answers; any replica then resends the
	// identical last status to a retransmission (HC-39).
	for i, a := range rs.replicas {
		if st, err := a.Reply(ctx, winner, state.Accepted, handoff.ReplyOptions{}); err == nil {
			winnerAgent = i
			for _, b := range rs.replicas {
				in, err := b.Receive(ctx, first, handoff.Host{Peer: replicaFrom})
				require.NoError(t, err)
				require.True(t, in.Retransmission())
				last, ok := in.LastStatus()
				require.True(t, ok)
				assert.Equal(t, st.Octets, last.Octets)
			}
			break
		}
	}
	require.GreaterOrEqual(t, winnerAgent, 0)

	// An equivocating second offer for the same (iss, hop) is never
	// accepted by any replica.
	second := rs.offer(t, hop, "second")
	var eq atomic.Int32
	for _, in := range rs.storm(t, second, 32) {
		assert.False(t, in.Accepted())
		if in.Reason() == reason.Equivocation {
			eq.Add(1)
		}
	}
	assert.Equal(t, int32(96), eq.Load())

	// Two different offers for one fresh (iss, hop), raced: at most one
	// accepted across all replicas.
	hop2, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	a, b := rs.offer(t, hop2, "a"), rs.offer(t, hop2, "b")
	var wg sync.WaitGroup
	var wins atomic.Int32
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			data := a
			if i%2 == 1 {
				data = b
			}
			in, err := rs.replicas[i%len(rs.replicas)].Receive(ctx, data, handoff.Host{})
			if assert.NoError(t, err) && in.Accepted() {
				wins.Add(1)
			}
		}(i)
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
}

func TestReplicas_SharedRedis(t *testing.T) {
	c := redisClient(t)
	prefix := fmt.Sprintf("replicas-%d", time.Now().UnixNano())
	var stores []replay.Store
	for i := 0; i < 3; i++ {
		stores = append(stores, redisstore.New(c, redisstore.Options{Prefix: prefix}))
	}
	replicaScenario(t, stores)
}

func TestReplicas_SharedBoltFile(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "hops.db"), boltstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	replicaScenario(t, []replay.Store{st, st, st})
}

// A replica whose store cannot answer refuses: it never accepts (fail
// closed).
func TestReplicas_RedisDownRefuses(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	rs := newReplicaSet(t, []replay.Store{redisstore.New(c, redisstore.Options{})})
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	in, err := rs.replicas[0].Receive(context.Background(), rs.offer(t, hop, "x"), handoff.Host{})
	require.Error(t, err)
	assert.ErrorIs(t, err, handoff.ErrStore)
	assert.ErrorIs(t, err, replay.ErrUnavailable)
	assert.Nil(t, in)
}
