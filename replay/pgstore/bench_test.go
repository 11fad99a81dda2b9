package pgstore

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/storetest"
)

// BenchmarkStore compares the PostgreSQL store with the memory store in
// the same run (metric x-memory):
//
//	go test -run '^$' -bench . ./replay/pgstore
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, "postgresql", func(b *testing.B) replay.Store {
		db := testDB(b, nil)
		return mustOpen(b, db, Options{Table: testTable(b, db)})
	})
}

// BenchmarkOfferStore compares the PostgreSQL OfferStore with the memory
// one.
func BenchmarkOfferStore(b *testing.B) {
	storetest.BenchOffers(b, "postgresql", func(b *testing.B) replay.OfferStore {
		db := testDB(b, nil)
		return mustOpenOffers(b, db, Options{Table: testTable(b, db)})
	})
}

// BenchmarkReceive measures what a delegate's Receive of a fresh offer
// costs with each store: the whole check (decode, signature, rules) and
// the store's check-and-record, first with the memory store (the
// baseline), then with PostgreSQL, which also reports the statements sent
// to the server per receive (roundtrips/op) and its time per receive as a
// multiple of the memory store's (x-memory).
func BenchmarkReceive(b *testing.B) {
	key := func() *handoff.Signer {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		s, err := handoff.NewSigner(k, handoff.JWS, nil)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	const from, self = handoff.AgentID("spiffe://a.example/agent/planner"), handoff.AgentID("spiffe://b.example/agent/coder")
	delegator, me := key(), key()
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{from: {delegator.Key()}, self: {me.Key()}})
	if err != nil {
		b.Fatal(err)
	}
	offers := func(n int) [][]byte {
		out := make([][]byte, n)
		now := handoff.TimeOf(time.Now())
		for i := range out {
			hop, err := handoff.NewHopID(nil)
			if err != nil {
				b.Fatal(err)
			}
			s, err := delegator.SignOffer(&handoff.Offer{Hop: hop, Dialog: "ctx", Task: "t", Iss: from, Aud: self, Iat: now, Exp: now + 120})
			if err != nil {
				b.Fatal(err)
			}
			if out[i], err = (&handoff.Handoff{Offer: s}).Encode(handoff.JSON); err != nil {
				b.Fatal(err)
			}
		}
		return out
	}
	versusMemory(b, func(b *testing.B, st replay.Store, start func()) {
		a, err := handoff.NewAgent(handoff.Config{ID: self, Signer: me, Trust: trust, Store: st})
		if err != nil {
			b.Fatal(err)
		}
		data := offers(b.N)
		ctx := context.Background()
		start()
		for i := range b.N {
			in, err := a.Receive(ctx, data[i], handoff.Host{Peer: from})
			if err != nil {
				b.Fatal(err)
			}
			if !in.Accepted() {
				b.Fatalf("offer %d not accepted: %v", i, in.Reason())
			}
		}
	})
}

// BenchmarkSwap measures a reply's write, a Swap from the remembered
// state to "accepted" on a hop of its own, with each store: first the
// memory store (the baseline), then PostgreSQL, which also reports the
// statements sent per Swap (roundtrips/op) and its time per Swap as a
// multiple of the memory store's (x-memory).
func BenchmarkSwap(b *testing.B) {
	versusMemory(b, func(b *testing.B, st replay.Store, start func()) {
		ctx := context.Background()
		keys := make([]replay.Key, b.N)
		recs := make([]replay.Record, b.N)
		for i := range b.N {
			tok, err := replay.NewToken(nil)
			if err != nil {
				b.Fatal(err)
			}
			keys[i] = replay.Key{Iss: "https://delegator.example/agents/a1", Hop: "hop-" + hex.EncodeToString(tok)}
			recs[i] = replay.Record{Digest: digest(string(tok)), Token: tok, Created: time.Now(), Expires: time.Now().Add(time.Hour)}
			if _, ok, err := st.Remember(ctx, keys[i], recs[i]); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
		start()
		for i := range b.N {
			_, swapped, err := st.Swap(ctx, keys[i], recs[i], replay.Record{State: "accepted", Status: []byte("accepted")})
			if err != nil || !swapped {
				b.Fatal(swapped, err)
			}
		}
	})
}

// versusMemory runs measure with the memory store (the baseline), then
// with a PostgreSQL store, for which it reports the statements sent to
// the server per operation (roundtrips/op) and the time per operation as
// a multiple of the memory store's (x-memory). measure calls start once
// its setup is done, before the b.N operations it measures.
func versusMemory(b *testing.B, measure func(b *testing.B, st replay.Store, start func())) {
	per := func(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
	var baseline float64
	b.Run("memory", func(b *testing.B) {
		st := replay.NewMemory(replay.MemoryOptions{MaxEntries: 1 << 24})
		defer st.Close()
		measure(b, st, b.ResetTimer)
		b.StopTimer()
		baseline = per(b)
	})
	b.Run("postgresql", func(b *testing.B) {
		c := &counter{}
		db := testDB(b, c)
		st := mustOpen(b, db, Options{Table: testTable(b, db)})
		defer st.Close()
		var before int64
		measure(b, st, func() { before = c.n.Load(); b.ResetTimer() })
		b.StopTimer()
		b.ReportMetric(float64(c.n.Load()-before)/float64(b.N), "roundtrips/op")
		if baseline > 0 {
			b.ReportMetric(per(b)/baseline, "x-memory")
		}
	})
}
