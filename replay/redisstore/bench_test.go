package redisstore

import (
	"testing"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/storetest"
)

// BenchmarkStore compares the Redis store with the memory store:
//
//	go test -run '^$' -bench . ./replay/redisstore
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, "redis", func(b *testing.B) replay.Store {
		c := testClient(b)
		return New(c, Options{Prefix: testPrefix(b, c)})
	})
}
