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

// BenchmarkOfferStore compares the Redis OfferStore with the memory one.
func BenchmarkOfferStore(b *testing.B) {
	storetest.BenchOffers(b, "redis", func(b *testing.B) replay.OfferStore {
		c := testClient(b)
		return NewOffers(c, Options{Prefix: offerPrefix(b, c)})
	})
}
