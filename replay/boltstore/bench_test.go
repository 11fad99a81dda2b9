package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

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

// BenchmarkOfferStore compares the bbolt OfferStore with the memory one.
func BenchmarkOfferStore(b *testing.B) {
	storetest.BenchOffers(b, "bolt", func(b *testing.B) replay.OfferStore {
		s, err := OpenOffers(filepath.Join(b.TempDir(), "offers.db"), OfferOptions{})
		require.NoError(b, err)
		return s
	})
}
