package replicas_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/agentproto/handoff/replay/redisstore"
	"github.com/agentproto/handoff/state"
)

// What one hop costs a shared store, measured through the public API: a
// delegate receives hopOffers distinct fresh offers from hopReceivers
// goroutines, then answers "accepted" to half of them, so that half the
// hops hold a status. For each store it reports the receive throughput as
// a multiple of the in-memory store's in the same run (x-memory), and for
// Redis the same ratio over hopRounds rounds of one pass of each store,
// alternating, each first in turn (x-memory-alternating, the median of
// the rounds' ratios, the one to read on a loaded machine; the ratio of
// the summed times is x-memory-alternating-sum), the commands per fresh
// receive and per accepted reply (from the server's INFO commandstats,
// script-internal commands included) and the server's memory per hop
// (averaged over the hops with and without a status, from MEMORY USAGE
// of each key); for PostgreSQL the same throughput ratios, the statements
// per fresh receive and per accepted reply, and the table's size per hop
// (hopPostgres). It reports figures, not pass or fail:
//
//	HANDOFF_REDIS_ADDR=127.0.0.1:6399 HANDOFF_POSTGRES_DSN=postgres://handoff@127.0.0.1:5439/postgres?sslmode=disable \
//	  go test -run '^$' -bench Hop -benchtime 1x ./replay/replicas
const (
	hopOffers    = 4000
	hopReceivers = 32
	hopRounds    = 8 // alternating passes for the throughput ratio
)

type hopWorld struct {
	delegator *handoff.Signer
	self      *handoff.Signer
	trust     *handoff.Trust
	offers    [][]byte
}

func newHopWorld(b *testing.B) *hopWorld {
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
	w := &hopWorld{delegator: key(), self: key()}
	var err error
	w.trust, err = handoff.NewTrust(map[handoff.AgentID][]handoff.TrustedKey{
		replicaFrom: {w.delegator.Key()}, replicaID: {w.self.Key()},
	})
	if err != nil {
		b.Fatal(err)
	}
	now := handoff.TimeOf(time.Now())
	for range hopOffers {
		hop, err := handoff.NewHopID(nil)
		if err != nil {
			b.Fatal(err)
		}
		s, err := w.delegator.SignOffer(&handoff.Offer{Hop: hop, Dialog: "ctx", Task: "task", Iss: replicaFrom,
			Aud: replicaID, Iat: now, Exp: now + 240})
		if err != nil {
			b.Fatal(err)
		}
		data, err := (&handoff.Handoff{Offer: s}).Encode(handoff.JSON)
		if err != nil {
			b.Fatal(err)
		}
		w.offers = append(w.offers, data)
	}
	return w
}

// receiveAll receives every offer once, from hopReceivers goroutines, and
// returns the deliveries and the time it took.
func (w *hopWorld) receiveAll(b *testing.B, a *handoff.Agent) ([]*handoff.Received, time.Duration) {
	return w.receiveBy(b, a, hopReceivers)
}

// receiveBy is receiveAll from n goroutines.
func (w *hopWorld) receiveBy(b *testing.B, a *handoff.Agent, n int) ([]*handoff.Received, time.Duration) {
	ctx := context.Background()
	out := make([]*handoff.Received, len(w.offers))
	var wg sync.WaitGroup
	start := time.Now()
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(w.offers); i += n {
				in, err := a.Receive(ctx, w.offers[i], handoff.Host{Peer: replicaFrom})
				if err != nil || !in.Accepted() {
					b.Errorf("receive %d: %v %v", i, err, in.Err())
					return
				}
				out[i] = in
			}
		}()
	}
	wg.Wait()
	return out, time.Since(start)
}

// replyHalf answers "accepted" to every other delivery, from hopReceivers
// goroutines, and returns how many it answered.
func (w *hopWorld) replyHalf(b *testing.B, a *handoff.Agent, ins []*handoff.Received) int {
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range hopReceivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 2 * g; i < len(ins); i += 2 * hopReceivers {
				if _, err := a.Reply(ctx, ins[i], state.Accepted, handoff.ReplyOptions{}); err != nil {
					b.Errorf("reply %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return (len(ins) + 1) / 2
}

// alternatingRatio runs hopRounds rounds of one pass of the memory store
// and one pass of the store open returns, alternating, each with a fresh
// store, so that a drift of the machine's load weighs on both alike; the
// order changes every round, so that a drift within a round does too. It
// returns the median of the rounds' ratios, which a burst of another
// process's load during one pass moves little (the one to read on a
// loaded machine), and the ratio of the summed times. open returns the
// round's store and what to do once its pass is over.
func (w *hopWorld) alternatingRatio(b *testing.B, open func(round int) (replay.Store, func())) (median, summed float64) {
	var mem, other time.Duration
	rounds := make([]float64, 0, hopRounds)
	for round := range hopRounds {
		var dm, do time.Duration
		passes := []func(){
			func() {
				_, dm = w.receiveAll(b, w.agent(b, replay.NewMemory(replay.MemoryOptions{})))
			},
			func() {
				st, done := open(round)
				defer done()
				_, do = w.receiveAll(b, w.agent(b, st))
			},
		}
		passes[round%2]()
		passes[1-round%2]()
		mem, other = mem+dm, other+do
		rounds = append(rounds, dm.Seconds()/do.Seconds())
	}
	sort.Float64s(rounds)
	return (rounds[(hopRounds-1)/2] + rounds[hopRounds/2]) / 2, mem.Seconds() / other.Seconds()
}

func (w *hopWorld) agent(b *testing.B, st replay.Store) *handoff.Agent {
	a, err := handoff.NewAgent(handoff.Config{ID: replicaID, Signer: w.self, Trust: w.trust, Store: st})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// redisCommands is the number of commands the server has run, from INFO
// commandstats, less the INFO commands themselves.
func redisCommands(b *testing.B, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				k, _ := strconv.ParseInt(v, 10, 64)
				n += k
			}
		}
	}
	return n
}

// redisKeyMemory is the sum of MEMORY USAGE over the keys of prefix: the
// server's memory for the store's records, without the clients' buffers.
func redisKeyMemory(b *testing.B, c *redis.Client, prefix string) int64 {
	ctx := context.Background()
	var keys []string
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	cmds := make([]*redis.IntCmd, len(keys))
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.MemoryUsage(ctx, k, 0)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, cmd := range cmds {
		n += cmd.Val()
	}
	return n
}

func BenchmarkHop(b *testing.B) {
	w := newHopWorld(b)
	// A first pass, not measured, so that the baseline does not pay for
	// warming the caches and the runtime.
	w.receiveAll(b, w.agent(b, replay.NewMemory(replay.MemoryOptions{})))
	var memory time.Duration
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
			a := w.agent(b, replay.NewMemory(replay.MemoryOptions{}))
			_, d := w.receiveAll(b, a)
			memory = d
		}
		b.ReportMetric(float64(len(w.offers))/memory.Seconds(), "receives/s")
	})
	ratio := func(b *testing.B, d time.Duration) {
		b.ReportMetric(float64(len(w.offers))/d.Seconds(), "receives/s")
		if memory > 0 {
			b.ReportMetric(memory.Seconds()/d.Seconds(), "x-memory")
		}
	}
	// bbolt syncs every acknowledged write; concurrent receivers share a
	// transaction and its sync. bolt/1 is one receiver, bolt its
	// throughput with hopReceivers, reported also as x-one-receiver.
	var boltOne time.Duration
	for _, n := range []int{1, hopReceivers} {
		name := "bolt"
		if n == 1 {
			name = "bolt/1"
		}
		b.Run(name, func(b *testing.B) {
			var d time.Duration
			for b.Loop() {
				st, err := boltstore.Open(filepath.Join(b.TempDir(), "replay.db"), boltstore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				_, d = w.receiveBy(b, w.agent(b, st), n)
				st.Close()
			}
			ratio(b, d)
			if n == 1 {
				boltOne = d
			} else if boltOne > 0 {
				b.ReportMetric(boltOne.Seconds()/d.Seconds(), "x-one-receiver")
			}
		})
	}
	b.Run("redis", func(b *testing.B) {
		addr := os.Getenv("HANDOFF_REDIS_ADDR")
		if addr == "" {
			addr = "127.0.0.1:6399"
		}
		c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, PoolSize: 2 * hopReceivers})
		defer c.Close()
		if err := c.Ping(context.Background()).Err(); err != nil {
			if os.Getenv("CI") != "" || os.Getenv("HANDOFF_REQUIRE_REDIS") == "1" {
				b.Fatalf("no Redis server at %s: %v", addr, err)
			}
			b.Skipf("no Redis server at %s: %v", addr, err)
		}
		var (
			d                     time.Duration
			perReceive, perReply  float64
			perHop, bare, perStat float64
			alternating, summed   float64
		)
		for b.Loop() {
			var rb [8]byte
			rand.Read(rb[:])
			prefix := "handoffbench-" + hex.EncodeToString(rb[:])
			st := redisstore.New(c, redisstore.Options{Prefix: prefix})
			a := w.agent(b, st)
			cmd0 := redisCommands(b, c)
			var ins []*handoff.Received
			ins, d = w.receiveAll(b, a)
			cmdR := redisCommands(b, c)
			memR := redisKeyMemory(b, c, prefix)
			cmd1 := redisCommands(b, c) // not counting the measurement's
			replied := w.replyHalf(b, a, ins)
			cmd2 := redisCommands(b, c)
			mem1 := redisKeyMemory(b, c, prefix)
			const mem0 = 0
			perReceive = float64(cmdR-cmd0) / float64(len(ins))
			perReply = float64(cmd2-cmd1) / float64(replied)
			perHop = float64(mem1-mem0) / float64(len(ins))
			bare = float64(memR-mem0) / float64(len(ins))
			perStat = float64(mem1-memR) / float64(replied)
			b.StopTimer()
			clear := func(prefix string) {
				ctx := context.Background()
				iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
				var keys []string
				for iter.Next(ctx) {
					keys = append(keys, iter.Val())
				}
				for len(keys) > 0 {
					n := min(len(keys), 1000)
					c.Del(ctx, keys[:n]...)
					keys = keys[n:]
				}
			}
			clear(prefix)
			alternating, summed = w.alternatingRatio(b, func(round int) (replay.Store, func()) {
				p := fmt.Sprintf("%s-%d", prefix, round)
				return redisstore.New(c, redisstore.Options{Prefix: p}), func() { clear(p) }
			})
			b.StartTimer()
		}
		ratio(b, d)
		b.ReportMetric(alternating, "x-memory-alternating")
		b.ReportMetric(summed, "x-memory-alternating-sum")
		b.ReportMetric(perReceive, "cmds/receive")
		b.ReportMetric(perReply, "cmds/reply")
		b.ReportMetric(perHop, "B/hop")
		b.ReportMetric(bare, "B/hop-without-status")
		b.ReportMetric(perStat, "B/status-added")
		fmt.Fprintf(os.Stderr, "redis: %.2f commands per fresh receive, %.2f per accepted reply; %.0f B per hop (half with a status), %.0f without a status, %.0f added by a status\n",
			perReceive, perReply, perHop, bare, perStat)
	})
	b.Run("postgresql", func(b *testing.B) { hopPostgres(b, w, ratio) })
}
