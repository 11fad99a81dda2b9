package boltstore

import (
	"testing"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/storetest"
)

// BenchmarkStore compares the bbolt store with the memory store:
//
//	go test -run '^$' -bench . ./replay/boltstore
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, "bolt", func(b *testing.B) replay.Store {
		return openTemp(b, Options{MaxEntries: 1 << 30})
	})
}
