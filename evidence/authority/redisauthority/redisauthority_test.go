package redisauthority_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/authoritytest"
	"github.com/agentproto/handoff/evidence/authority/redisauthority"
)

// The tests use the Redis server at HANDOFF_REDIS_ADDR (default
// 127.0.0.1:6399; .ci/redis.sh starts one). When none answers they are
// skipped, unless CI is set or HANDOFF_REQUIRE_REDIS=1, when they fail.

const defaultAddr = "127.0.0.1:6399"

func required() bool {
	return os.Getenv("CI") != "" || os.Getenv("HANDOFF_REQUIRE_REDIS") == "1"
}

func addr() string {
	if a := os.Getenv("HANDOFF_REDIS_ADDR"); a != "" {
		return a
	}
	return defaultAddr
}

// client returns a new client (its own connection pool: one replica) of
// the test server.
func client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, ContextTimeoutEnabled: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		msg := fmt.Sprintf("no Redis server answers at %s: %v", addr(), err)
		if required() {
			t.Fatalf("%s (required: CI or HANDOFF_REQUIRE_REDIS=1 is set)", msg)
		}
		t.Skipf("%s; run .ci/redis.sh or set HANDOFF_REDIS_ADDR (CI=1 or HANDOFF_REQUIRE_REDIS=1 turns this skip into a failure)", msg)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// prefix is a fresh ledger name, so that tests on one server are
// independent.
func prefix(t *testing.T) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "test-authority-" + hex.EncodeToString(b)
}

type named struct {
	*redisauthority.Ledger
	prefix string
}

func TestLedger(t *testing.T) {
	authoritytest.Run(t, func(t *testing.T) authority.Ledger {
		p := prefix(t)
		l, err := redisauthority.New(client(t), redisauthority.Options{Prefix: p})
		require.NoError(t, err)
		return named{l, p}
	}, authoritytest.Options{
		// Two replicas: two clients, two connection pools, one ledger.
		Replica: func(t *testing.T, l authority.Ledger) authority.Ledger {
			r, err := redisauthority.New(client(t), redisauthority.Options{Prefix: l.(named).prefix})
			require.NoError(t, err)
			return r
		},
		// A restart: a new client on the same server.
		Reopen: func(t *testing.T, l authority.Ledger) authority.Ledger {
			r, err := redisauthority.New(client(t), redisauthority.Options{Prefix: l.(named).prefix})
			require.NoError(t, err)
			return named{r, l.(named).prefix}
		},
		// A client process killed between a claim and its outcome.
		Where: func(l authority.Ledger) string { return l.(named).prefix },
	})
}

func TestMain(m *testing.M) {
	authoritytest.ChildMain(func(prefix string) (authority.Ledger, error) {
		return redisauthority.New(redis.NewClient(&redis.Options{Addr: addr()}), redisauthority.Options{Prefix: prefix})
	})
	os.Exit(m.Run())
}

func TestPrefix(t *testing.T) {
	_, err := redisauthority.New(nil, redisauthority.Options{Prefix: "a{b}"})
	require.ErrorIs(t, err, redisauthority.ErrPrefix)
}

// A ledger whose server does not answer refuses, never allows.
func TestUnavailableRefuses(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	l, err := redisauthority.New(c, redisauthority.Options{})
	require.NoError(t, err)
	err = l.Perform(context.Background(), authority.Effect{Hop: "h", Action: "a", OperationID: "op", At: time.Now()})
	require.ErrorIs(t, err, authority.ErrUnavailable)
}
