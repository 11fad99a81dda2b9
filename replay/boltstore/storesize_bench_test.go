package boltstore

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/internal/codec"
)

// BenchmarkReceiveStoreSize measures the receive of a fresh offer against
// a bbolt store holding 1,000,000 records, against the same receive with
// an empty store, in one run: the metric x-empty of the full store's run is
// its time per receive as a multiple of the mean of the empty store's runs
// before and after it. Each iteration receives a distinct offer signed
// beforehand; run it with a fixed count so that every offer is fresh:
//
//	go test -run '^$' -bench ReceiveStoreSize -benchtime 1000x ./replay/boltstore
func BenchmarkReceiveStoreSize(b *testing.B) {
	const (
		from = handoff.AgentID("spiffe://a.example/agent/planner")
		self = handoff.AgentID("spiffe://b.example/agent/coder")
	)
	signer := func() *handoff.Signer {
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
	delegator, me := signer(), signer()
	trust, err := handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{from: {delegator.Key()}, self: {me.Key()}})
	if err != nil {
		b.Fatal(err)
	}
	now := handoff.TimeOf(time.Now())
	offers := make([][]byte, 2048)
	for i := range offers {
		hop, _ := handoff.NewHopID(nil)
		s, err := delegator.SignOffer(&handoff.Offer{Hop: hop, Dialog: "ctx", Iss: from, Aud: self, Iat: now, Exp: now + 240})
		if err != nil {
			b.Fatal(err)
		}
		if offers[i], err = (&handoff.Handoff{Offer: s}).Encode(handoff.JSON); err != nil {
			b.Fatal(err)
		}
	}
	// per[round] holds each run's time per receive of that round's
	// sub-benchmark: -count runs each sub-benchmark count times in a row,
	// so that the k-th full run is paired with the k-th empty runs.
	var per [3][]float64
	for round, size := range []int{0, 1_000_000, 0} {
		b.Run(fmt.Sprint("records=", size), func(b *testing.B) {
			st := openTemp(b, Options{MaxEntries: 2 * size, MaxPerIssuer: -1, ReclaimEvery: -1})
			defer st.Close()
			fillBolt(b, st, size)
			var file int64
			if size > 0 {
				fi, err := os.Stat(st.Path())
				if err != nil {
					b.Fatal(err)
				}
				file = fi.Size()
			}
			a, err := handoff.NewAgent(handoff.Config{ID: self, Signer: me, Trust: trust, Store: st})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			runtime.GC() // the filling's garbage is not the receive's
			i := 0
			for b.Loop() {
				in, err := a.Receive(ctx, offers[i%len(offers)], handoff.Host{})
				if err != nil || (i < len(offers) && !in.Accepted()) {
					b.Fatal(err, in.Reason())
				}
				i++
			}
			if file > 0 {
				b.ReportMetric(float64(file)/float64(size), "file-B/record")
			}
			per[round] = append(per[round], float64(b.Elapsed().Nanoseconds())/float64(b.N))
			if k := len(per[2]) - 1; round == 2 && k < len(per[0]) && k < len(per[1]) {
				b.ReportMetric(per[1][k]/((per[0][k]+per[2][k])/2), "x-empty")
			}
		})
	}
}

// fillBolt writes n records of other hops, of 16 issuers, live for an
// hour, in a few large transactions, with their index entries and counts.
func fillBolt(b *testing.B, s *Store, n int) {
	if n == 0 {
		return
	}
	exp := time.Now().Add(time.Hour)
	type kv struct{ k, v []byte }
	recs := make([]kv, n)
	for i := range recs {
		d := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		k := replay.Key{Iss: fmt.Sprint("spiffe://filler.example/agent/", i%16), Hop: fmt.Sprintf("%x", d[:11])}
		recs[i] = kv{recordKey(k), codec.Encode(replay.Record{Digest: d[:], Token: d[:16], Created: time.Now(), Expires: exp})}
	}
	slices.SortFunc(recs, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	const per = 100_000
	for start := 0; start < n; start += per {
		err := s.db.Update(func(tx *bolt.Tx) error {
			r, idx, meta := buckets(tx)
			r.FillPercent, idx.FillPercent = 0.9, 0.9
			iss := tx.Bucket(bucketIssuers)
			for _, e := range recs[start:min(start+per, n)] {
				if err := r.Put(e.k, e.v); err != nil {
					return err
				}
				if err := idx.Put(indexKey(exp, e.k), nil); err != nil {
					return err
				}
				if err := addIssuer(iss, e.k, 1); err != nil {
					return err
				}
			}
			c, err := getCount(meta)
			if err != nil {
				return err
			}
			return putCount(meta, c+uint64(min(per, n-start)))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
