// Package redisstore is a replay.Store kept in Redis, for receivers and
// delegates that run as several replicas and must share one memory of the
// hops they have seen.
//
// Each Store method is one round trip. Remember is one command, SET with
// NX and GET (Redis 7.0 or later), which writes the record unless a value
// is held and returns the value held before; the commands of concurrent
// Remember calls are sent together, as one pipeline; Get is a GET; Update,
// Swap and Release are Lua scripts run with EVALSHA, so the check and the
// write are atomic on the server. Swap for a caller that knows the held
// record whole is one SET XX GET inside its script. Every key of one hop
// falls in one Redis Cluster slot.
//
// # Per-issuer share
//
// By default the store's cap is the server's: maxmemory, with the
// noeviction policy. A record takes about 230 bytes of it without a
// status and about 390 with a JWS status (MEMORY USAGE of its key, for the
// default prefix, a hop of 22 characters and an issuer of 32; see "Keys
// and values" for how a status is kept): a maxmemory of 1 GiB holds about
// 4.6 million hops without a status, about 2.7 million with a JWS status.
// One trusted delegator that floods the server could then fill it, and
// every other delegator's fresh offer would be refused with
// replay.ErrFull until the flood's records expire (at their exp plus the
// skew: a "rejected" for an offer refused by a later check is not kept
// longer). Options.MaxPerIssuer bounds the live records of each
// issuer instead. The store then keeps, for each issuer, a sorted set of
// its record keys scored by their expiry (prefix ":i:{" base64url(iss)
// "}"), which Remember prunes of expired members and counts, and which
// Update, Swap and Release keep current, in the same scripts. Its cost:
// Remember becomes a script of up to six commands (one round trip), and
// each record takes a set member as well (BENCHMARKS.md gives the bytes).
// The set and the record are different keys in different hash slots, so
// the share needs a single Redis primary (with replicas if wanted), not
// Redis Cluster. Size maxmemory for MaxPerIssuer times the number of
// trusted delegators, so that the issuers' shares, not the server,
// bound the store.
//
// # Failing closed
//
// Any error from Redis (a refused connection, a timeout, a server that is
// loading, read-only or out of memory) is returned as an error wrapping
// replay.ErrUnavailable, or replay.ErrFull when Remember cannot write for
// lack of memory; it is never reported as an absent record. The caller
// must then refuse the offer.
//
// # Server configuration
//
// The store relies on the server to keep records until they expire:
//
//   - maxmemory-policy must be noeviction (the default). Any other policy
//     lets Redis evict live records, which the draft forbids; with
//     noeviction a full server makes Remember fail with replay.ErrFull.
//   - A delegate that must keep its answers across a restart of Redis
//     (HC-34) needs persistence that does not lose acknowledged writes:
//     appendonly yes with appendfsync always, or replication with WAIT
//     (not done by this package).
//
// Expiry is the server's: a record with an expiry is written with PXAT,
// rounded up to the next millisecond, and disappears when the server's
// clock reaches it. The clocks of the server and of the replicas must be
// synchronised.
//
// The client's timeouts bound every call; set ContextTimeoutEnabled in its
// options for context deadlines to bound network waits too.
//
// # Idempotent check-and-record
//
// go-redis retries a command whose reply was lost (MaxRetries, 3 by
// default). When Redis applied the check-and-record but its reply was
// lost, the retry finds the record the first attempt wrote. The record
// carries the token of the call (replay.Record.Token), so Remember still
// reports its own insert, as the contract of package replay requires.
//
// # Keys and values
//
// The record of the hop (iss, hop) is kept under the string key
//
//	prefix ":{" base64url(iss) "|" base64url(hop) "}"
//
// (unpadded base64url, so no '{', '}' or '|' from iss or hop reaches the key
// and the braces are a Redis Cluster hash tag). Its value is version 3 of
// the encoding of package replay/internal/codec: version, digest, token
// and creation time first, then the expiry, the state and the status, as
// in boltstore's values (version 2), except for the status. A JWS status
// is kept as its three parts decoded from base64url, its header and
// payload as copies from a dictionary made of the record's hop, iss and
// offer digest (which the status names again) and of the members this
// library signs: about 160 octets for a status of 540. It is kept so only
// when it gives back the octets as signed (HC-39), and as they are
// otherwise. Records of version 2, written before, are read, and written
// in version 3 when they next change: Swap compares the octets held with
// old's encoding, and when those differ while the values are old's (a
// record of version 2, or a status another build kept in another valid
// form) it tries once more against the octets held, in a second round
// trip. A replica that predates version 3 refuses a version 3 record as
// malformed (it fails closed): upgrade the replicas sharing a server
// together. Untaken scans the keys of the prefix (SCAN, on every master
// of a cluster): its cost grows with the number of keys the server holds.
package redisstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/internal/codec"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "handoff"

// Options configures a Store. The zero value is usable.
type Options struct {
	// Prefix starts every key the store writes; empty means DefaultPrefix.
	// It must not contain '{' or '}'. Stores with different prefixes on
	// one server are independent.
	Prefix string
	// Now returns the current time, from which Untaken reports ages; nil
	// means time.Now. Expiry is the server's clock in any case.
	Now func() time.Time
	// MaxPerIssuer, when positive, bounds the live records held for one
	// issuer (Key.Iss): Remember returns replay.ErrIssuerFull beyond it,
	// so that one delegator cannot fill the server and make it refuse the
	// others' fresh offers. Zero means no share: the server's maxmemory
	// is then the only cap. See "Per-issuer share" in the package
	// documentation for its cost and its limits.
	MaxPerIssuer int
}

// Store is a replay.Store kept in Redis. It is safe for concurrent use.
type Store struct {
	client    redis.UniversalClient
	prefix    string
	now       func() time.Time
	maxIssuer int
	sets      *setBatch
}

// setBatch sends the SET NX GET of concurrent Remember calls together, as
// one pipeline: one write and one read of a connection for all the calls
// that arrived while the previous pipeline was on its way, or before the
// goroutine that sends it ran, instead of one each. Each call is still
// one command, and waits for its own reply (or its context); a call whose
// context ends first may still be applied, as any call whose reply is
// lost may (see "Records written by a call that failed" in package
// replay).
type setBatch struct {
	client redis.UniversalClient

	mu       sync.Mutex
	queue    []*setCall
	flushing bool
}

type setCall struct {
	ctx  context.Context
	key  string
	val  []byte
	args redis.SetArgs
	done chan struct{}
	res  []byte
	err  error
}

// set runs SET key val with args and returns its reply.
func (b *setBatch) set(ctx context.Context, key string, val []byte, args redis.SetArgs) ([]byte, error) {
	c := &setCall{ctx: ctx, key: key, val: val, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	start := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if start {
		go b.flush()
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flush sends what is queued, one pipeline at a time, until nothing is.
func (b *setBatch) flush() {
	for {
		// Let the goroutines that are ready to run reach the queue
		// first: when the receivers keep the processors busy, the
		// pipeline then carries the calls of all those that finished
		// their work meanwhile instead of one (about a third less
		// server CPU per command, BENCHMARKS.md); when nothing else
		// is ready, Gosched returns at once.
		runtime.Gosched()
		b.mu.Lock()
		q := b.queue
		b.queue = nil
		if len(q) == 0 {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		ctx, cancel := patience(q)
		cmds := make([]*redis.StatusCmd, len(q))
		_, _ = b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range q {
				cmds[i] = p.SetArgs(ctx, c.key, c.val, c.args)
			}
			return nil
		})
		cancel()
		for i, c := range q {
			c.res, c.err = cmds[i].Bytes()
			close(c.done)
		}
	}
}

// patience returns the context of a pipeline for the calls q: it ends at
// the latest of their deadlines, or never when one of them has none (the
// client's timeouts bound it then, as they bound that call alone), so that
// the pipeline waits as long as its most patient caller.
func patience(q []*setCall) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, c := range q {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(context.Background(), last)
}

var _ replay.Store = (*Store)(nil)

// New returns a store that keeps its records through client. Close does not
// close the client. New panics if opts.Prefix contains '{' or '}', which
// would break the hash tag of its keys.
func New(client redis.UniversalClient, opts Options) *Store {
	if strings.ContainsAny(opts.Prefix, "{}") {
		panic("redisstore: Options.Prefix contains '{' or '}'")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{client: client, prefix: opts.Prefix, now: opts.Now, maxIssuer: max(opts.MaxPerIssuer, 0),
		sets: &setBatch{client: client}}
}

// keys returns the keys a script of hop k touches: the record's, and the
// issuer's set when the store keeps a share.
func (s *Store) keys(k replay.Key) []string {
	if s.maxIssuer > 0 {
		return []string{s.key(k), s.issuerKey(k.Iss)}
	}
	return []string{s.key(k)}
}

// issuerKey is the key of the sorted set of iss's record keys:
// prefix ":i:{" base64url(iss) "}".
func (s *Store) issuerKey(iss string) string {
	return s.prefix + ":i:{" + base64.RawURLEncoding.EncodeToString([]byte(iss)) + "}"
}

// updateScript replaces the state, status and expiry of the value held
// under KEYS[1] with those of ARGV[2] (a version 3 encoding without token
// or creation time), expiring at ARGV[3] Unix milliseconds unless ARGV[3]
// is empty, provided the held value carries the digest ARGV[1]. The held
// value's identity (its octets 2 to ARGV[4]: digest, token, creation time)
// is kept, after ARGV[2]'s version octet; a version 1 value, which has
// none, is replaced by ARGV[2]. When ARGV[5] is not empty, the held value
// must carry it as its token (octets 47 to 62, counting from 1, with bit 0
// of octet 34 set). It returns 0 when no value is held, 1 when the digest
// or token differs, 2 when it replaced the value, and -1 when the held
// value is not a record of version 1, 2 or 3.
var updateScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
	return 0
end
local ver = string.byte(v, 1)
local n = tonumber(ARGV[4])
if #v < 33 or (ver ~= 1 and ver ~= 2 and ver ~= 3) or (ver ~= 1 and #v < n) then
	return -1
end
if string.sub(v, 2, 33) ~= ARGV[1] then
	return 1
end
if ARGV[5] ~= '' and (ver == 1 or string.byte(v, 34) % 2 ~= 1 or string.sub(v, 47, 62) ~= ARGV[5]) then
	return 1
end
local nv = ARGV[2]
if ver ~= 1 then
	nv = string.sub(ARGV[2], 1, 1) .. string.sub(v, 2, n) .. string.sub(ARGV[2], n + 1)
end
if ARGV[3] == '' then
	redis.call('SET', KEYS[1], nv)
else
	redis.call('SET', KEYS[1], nv, 'PXAT', ARGV[3])
end
if KEYS[2] then
	redis.call('ZADD', KEYS[2], 'XX', ARGV[3] == '' and '+inf' or ARGV[3], KEYS[1])
end
return 2
`)

// hopSwapScript replaces the expiry, state and status of the value held
// under KEYS[1] (a version 2 or 3 record) with ARGV[4] (the version 3
// encoding of the new expiry, state and status: flags octet onwards; the
// value written is of version 3), expiring at ARGV[5] Unix
// milliseconds unless ARGV[5] is empty, provided the held value carries
// the digest ARGV[1], the token ARGV[2] unless ARGV[2] is empty, and as its
// state and status ARGV[3] (their encoding, from the state's length on).
// ARGV[6] is codec.IdentitySize and ARGV[7] codec.StateOffset. It returns
// 0 when no value is held, 1 when the digest or token differs, -1 when the
// held value is not a record of version 2 or 3, and otherwise the value held
// after the call, prefixed by "1" when it carries ARGV[4] (written now, or
// already) and "0" when its state or status differ from ARGV[3].
var hopSwapScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
	return 0
end
local id = tonumber(ARGV[6])
local so = tonumber(ARGV[7])
if #v < so or (string.byte(v, 1) ~= 2 and string.byte(v, 1) ~= 3) then
	return -1
end
if string.sub(v, 2, 33) ~= ARGV[1] then
	return 1
end
if ARGV[2] ~= '' and (string.byte(v, 34) % 2 ~= 1 or string.sub(v, 47, 62) ~= ARGV[2]) then
	return 1
end
if string.byte(v, 1) == 3 and string.sub(v, id + 1) == ARGV[4] then
	return '1' .. v
end
if string.sub(v, so + 1) ~= ARGV[3] then
	return '0' .. v
end
local nv = '\3' .. string.sub(v, 2, id) .. ARGV[4]
if ARGV[5] == '' then
	redis.call('SET', KEYS[1], nv)
else
	redis.call('SET', KEYS[1], nv, 'PXAT', ARGV[5])
end
if KEYS[2] then
	redis.call('ZADD', KEYS[2], 'XX', ARGV[5] == '' and '+inf' or ARGV[5], KEYS[1])
end
return '1' .. nv
`)

// knownSwapScript is hopSwapScript for a caller that knows the held
// record's identity (its token and creation time): ARGV[1] is the whole new
// value, written at once with SET XX GET, which returns the value it
// replaced, so that the usual swap costs one command inside the script
// instead of a GET and a SET. When the value replaced is not the one
// expected (ARGV[2], its identity and, from the state on, its state and
// status), it is written back at once, with its own expiry, before the
// script returns, so that no other command ever sees the new value. ARGV[3]
// is the new value's PXAT or empty, ARGV[4] codec.IdentitySize and ARGV[5]
// codec.StateOffset. It returns what hopSwapScript returns.
var knownSwapScript = redis.NewScript(`
local id = tonumber(ARGV[4])
local so = tonumber(ARGV[5])
local v
if ARGV[3] == '' then
	v = redis.call('SET', KEYS[1], ARGV[1], 'XX', 'GET')
else
	v = redis.call('SET', KEYS[1], ARGV[1], 'XX', 'GET', 'PXAT', ARGV[3])
end
if not v then
	return 0
end
if v == ARGV[1] then
	return '1' .. v
end
if string.sub(v, 1, id) == string.sub(ARGV[2], 1, id) and string.sub(v, so + 1) == string.sub(ARGV[2], so + 1) then
	if KEYS[2] then
		redis.call('ZADD', KEYS[2], 'XX', ARGV[3] == '' and '+inf' or ARGV[3], KEYS[1])
	end
	return '1' .. ARGV[1]
end
-- Not the value expected: put it back as it was, expiry included.
local px = nil
if #v >= so and (string.byte(v, 1) == 2 or string.byte(v, 1) == 3) and string.byte(v, id + 1) % 2 == 1 then
	local sec = 0
	for i = id + 2, id + 9 do
		sec = sec * 256 + string.byte(v, i)
	end
	local ns = 0
	for i = id + 10, id + 13 do
		ns = ns * 256 + string.byte(v, i)
	end
	if string.byte(v, id + 2) >= 128 then
		px = 1
	else
		px = math.max(sec * 1000 + math.ceil(ns / 1000000), 1)
	end
end
if px then
	redis.call('SET', KEYS[1], v, 'PXAT', string.format('%.0f', px))
else
	redis.call('SET', KEYS[1], v)
end
if #v < so or (string.byte(v, 1) ~= 2 and string.byte(v, 1) ~= 3) then
	return -1
end
if string.sub(v, 2, 33) ~= string.sub(ARGV[2], 2, 33) or string.sub(v, 34, id) ~= string.sub(ARGV[2], 34, id) then
	return 1
end
return '0' .. v
`)

// releaseScript deletes the value held under KEYS[1] provided it carries
// the digest ARGV[1] and an empty state, whose length octet is at offset
// ARGV[2] in a version 2 or 3 value and ARGV[3] in a version 1 value
// (counting from 0). It returns 0 when no value is held, 1 when the digest
// differs, 2 when the state is set, 3 when it deleted the value, and -1
// when the held value is not a record of version 1, 2 or 3.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
	return 0
end
local ver = string.byte(v, 1)
local off
if ver == 2 or ver == 3 then
	off = tonumber(ARGV[2])
elseif ver == 1 then
	off = tonumber(ARGV[3])
else
	return -1
end
if #v <= off then
	return -1
end
if string.sub(v, 2, 33) ~= ARGV[1] then
	return 1
end
if string.byte(v, off + 1) ~= 0 then
	return 2
end
redis.call('DEL', KEYS[1])
if KEYS[2] then
	redis.call('ZREM', KEYS[2], KEYS[1])
end
return 3
`)

// shareRememberScript is Remember with a per-issuer share: KEYS[2] is the
// sorted set of the issuer's record keys, each scored by its expiry in
// Unix milliseconds (+inf for none). It returns the value held under
// KEYS[1] if any; else it drops the set's members that expired by the
// server's clock and, when ARGV[3] or more remain, returns 1; else it
// writes ARGV[1] under KEYS[1], expiring at ARGV[2] unless ARGV[2] is
// empty, adds KEYS[1] to the set and returns 0.
var shareRememberScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
	return v
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
	return 1
end
if ARGV[2] == '' then
	redis.call('SET', KEYS[1], ARGV[1])
	redis.call('ZADD', KEYS[2], '+inf', KEYS[1])
else
	redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
	redis.call('ZADD', KEYS[2], ARGV[2], KEYS[1])
end
return 0
`)

// Remember implements replay.Store in one round trip and one command:
// SET with NX and GET (Redis 7.0 or later), which writes the record unless
// a value is held and returns the value held before.
func (s *Store) Remember(ctx context.Context, k replay.Key, rec replay.Record) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, &rec); err != nil {
		return replay.Record{}, false, err
	}
	if s.maxIssuer > 0 {
		return s.rememberShared(ctx, k, rec)
	}
	args := redis.SetArgs{Mode: "NX", Get: true}
	if !rec.Expires.IsZero() {
		ms, err := expiryMillis(rec.Expires)
		if err != nil {
			return replay.Record{}, false, err
		}
		args.ExpireAt = time.UnixMilli(ms)
	}
	v, err := s.sets.set(ctx, s.key(k), codec.EncodeKeyed(k, rec), args)
	switch {
	case errors.Is(err, redis.Nil):
		return clone(rec), true, nil
	case err != nil && redis.IsOOMError(err):
		return replay.Record{}, false, fmt.Errorf("redisstore: %w: %w", replay.ErrFull, err)
	case err != nil:
		return replay.Record{}, false, unavailable(err)
	}
	held, err := codec.DecodeKeyed(k, v)
	if err != nil {
		return replay.Record{}, false, fmt.Errorf("redisstore: record for %q: %w", k, err)
	}
	// A retry of this call (by the client, after a lost reply) finds the
	// record its first attempt wrote.
	return held, replay.Written(held, rec), nil
}

// rememberShared is Remember with the per-issuer share, in one round trip.
func (s *Store) rememberShared(ctx context.Context, k replay.Key, rec replay.Record) (replay.Record, bool, error) {
	px, err := expiryArg(rec.Expires)
	if err != nil {
		return replay.Record{}, false, err
	}
	v, err := shareRememberScript.Run(ctx, s.client, s.keys(k), codec.EncodeKeyed(k, rec), px, s.maxIssuer).Result()
	switch {
	case err != nil && redis.IsOOMError(err):
		return replay.Record{}, false, fmt.Errorf("redisstore: %w: %w", replay.ErrFull, err)
	case err != nil:
		return replay.Record{}, false, unavailable(err)
	}
	switch v := v.(type) {
	case int64:
		if v == 0 {
			return clone(rec), true, nil
		}
		return replay.Record{}, false, replay.ErrIssuerFull
	case string:
		held, err := codec.DecodeKeyed(k, []byte(v))
		if err != nil {
			return replay.Record{}, false, fmt.Errorf("redisstore: record for %q: %w", k, err)
		}
		return held, replay.Written(held, rec), nil
	}
	return replay.Record{}, false, fmt.Errorf("redisstore: record for %q: unexpected reply %T", k, v)
}

// Get implements replay.Store.
func (s *Store) Get(ctx context.Context, k replay.Key) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, nil); err != nil {
		return replay.Record{}, false, err
	}
	v, err := s.client.Get(ctx, s.key(k)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return replay.Record{}, false, nil
	case err != nil:
		return replay.Record{}, false, unavailable(err)
	}
	rec, err := codec.DecodeKeyed(k, v)
	if err != nil {
		return replay.Record{}, false, fmt.Errorf("redisstore: record for %q: %w", k, err)
	}
	return rec, true, nil
}

// Update implements replay.Store in one round trip.
func (s *Store) Update(ctx context.Context, k replay.Key, rec replay.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := codec.Check(k, &rec); err != nil {
		return err
	}
	tail := rec
	tail.Token, tail.Created = nil, time.Time{}
	px, err := expiryArg(rec.Expires)
	if err != nil {
		return err
	}
	n, err := updateScript.Run(ctx, s.client, s.keys(k), rec.Digest, codec.EncodeKeyed(k, tail), px,
		codec.IdentitySize, rec.Token).Int64()
	if err != nil {
		return unavailable(err)
	}
	switch n {
	case 0:
		return replay.ErrNotFound
	case 1:
		return replay.ErrConflict
	case 2:
		return nil
	case -1:
		return fmt.Errorf("redisstore: record for %q: %w", k, codec.ErrMalformed)
	}
	return fmt.Errorf("redisstore: record for %q: unexpected reply %d", k, n)
}

// Swap implements replay.Store in one round trip.
//
// The scripts compare the held value's octets with old's encoding. A
// record written in another encoding of the same values (version 2, from
// before version 3) differs in its octets only: when the held record
// carries old's values, Swap is tried once more against the held octets
// themselves, in a second round trip.
func (s *Store) Swap(ctx context.Context, k replay.Key, old, new replay.Record) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, &old); err != nil {
		return replay.Record{}, false, err
	}
	px, err := expiryArg(new.Expires)
	if err != nil {
		return replay.Record{}, false, err
	}
	known := len(old.Token) == replay.TokenSize && !old.Created.IsZero()
	var want []byte // old's encoding: whole when known, else from the state on
	if known {
		want = codec.EncodeKeyed(k, old)
	} else {
		want = codec.EncodeKeyed(k, replay.Record{Digest: old.Digest, State: old.State, Status: old.Status})[codec.StateOffset:]
	}
	for retried := false; ; retried = true {
		held, heldOctets, swapped, err := s.swap(ctx, k, old, new, known, want, px)
		if err != nil || swapped || retried || !sameValues(held, old, known) {
			return held, swapped, err
		}
		if known {
			want = heldOctets
		} else {
			want = heldOctets[codec.StateOffset:]
		}
	}
}

// sameValues reports whether held carries the state and status of old
// and, when known, its whole identity.
func sameValues(held, old replay.Record, known bool) bool {
	if known {
		return held.Equal(old)
	}
	return held.State == old.State && bytes.Equal(held.Status, old.Status)
}

// swap is one attempt of Swap, with want the held value's expected
// octets (whole when known, from the state on otherwise). It returns the
// held record and its octets.
func (s *Store) swap(ctx context.Context, k replay.Key, old, new replay.Record, known bool, want []byte, px string) (replay.Record, []byte, bool, error) {
	var (
		res any
		err error
	)
	if known {
		// old names the held record's whole identity, as the records
		// Remember and Get return do: the new value is known in full.
		next := old
		next.State, next.Status, next.Expires = new.State, new.Status, new.Expires
		res, err = knownSwapScript.Run(ctx, s.client, s.keys(k), codec.EncodeKeyed(k, next), want, px,
			codec.IdentitySize, codec.StateOffset).Result()
	} else {
		// new's tail, from the expiry on.
		newTail := codec.EncodeKeyed(k, replay.Record{Digest: old.Digest, Expires: new.Expires, State: new.State, Status: new.Status})[codec.IdentitySize:]
		res, err = hopSwapScript.Run(ctx, s.client, s.keys(k), old.Digest, old.Token, want, newTail, px,
			codec.IdentitySize, codec.StateOffset).Result()
	}
	if err != nil {
		return replay.Record{}, nil, false, unavailable(err)
	}
	switch v := res.(type) {
	case int64:
		switch v {
		case 0:
			return replay.Record{}, nil, false, replay.ErrNotFound
		case 1:
			return replay.Record{}, nil, false, replay.ErrConflict
		case -1:
			return replay.Record{}, nil, false, fmt.Errorf("redisstore: record for %q: %w", k, codec.ErrMalformed)
		}
	case string:
		if len(v) > 0 && (v[0] == '0' || v[0] == '1') {
			b := []byte(v[1:])
			held, err := codec.DecodeKeyed(k, b)
			if err != nil {
				return replay.Record{}, nil, false, fmt.Errorf("redisstore: record for %q: %w", k, err)
			}
			return held, b, v[0] == '1', nil
		}
	}
	return replay.Record{}, nil, false, fmt.Errorf("redisstore: record for %q: unexpected reply %v", k, res)
}

// Release implements replay.Store in one round trip.
func (s *Store) Release(ctx context.Context, k replay.Key, digest []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := codec.Check(k, &replay.Record{Digest: digest}); err != nil {
		return err
	}
	n, err := releaseScript.Run(ctx, s.client, s.keys(k), digest, codec.StateOffset, codec.StateOffset1).Int64()
	if err != nil {
		return unavailable(err)
	}
	switch n {
	case 0:
		return replay.ErrNotFound
	case 1:
		return replay.ErrConflict
	case 2:
		return replay.ErrTaken
	case 3:
		return nil
	case -1:
		return fmt.Errorf("redisstore: record for %q: %w", k, codec.ErrMalformed)
	}
	return fmt.Errorf("redisstore: record for %q: unexpected reply %d", k, n)
}

// Untaken implements replay.Store. It scans every key of the store's
// prefix, on every master of a cluster, and reads each.
func (s *Store) Untaken(ctx context.Context, createdBefore time.Time) ([]replay.Untaken, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now()
	var (
		mu  sync.Mutex
		out []replay.Untaken
	)
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, globEscape(s.prefix)+":{*", 512).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for len(keys) > 0 {
			batch := keys[:min(len(keys), 512)]
			keys = keys[len(batch):]
			cmds := make([]*redis.StringCmd, len(batch))
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, key := range batch {
					cmds[i] = p.Get(ctx, key)
				}
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			for i, cmd := range cmds {
				v, err := cmd.Bytes()
				if errors.Is(err, redis.Nil) {
					continue // expired or released meanwhile
				}
				if err != nil {
					return err
				}
				k, ok := s.parseKey(batch[i])
				if !ok {
					continue // not a record of this store
				}
				rec, err := codec.DecodeKeyed(k, v)
				if err != nil {
					return fmt.Errorf("record for %q: %w", k, err)
				}
				if rec.State != "" || (!rec.Created.IsZero() && !rec.Created.Before(createdBefore)) {
					continue
				}
				u := replay.Untaken{Key: k, Record: rec}
				if !rec.Created.IsZero() {
					u.Age = now.Sub(rec.Created)
				}
				mu.Lock()
				out = append(out, u)
				mu.Unlock()
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.client)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("redisstore: %w: %w", ctxErr, err)
		}
		if errors.Is(err, codec.ErrMalformed) {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		return nil, unavailable(err)
	}
	replay.SortUntaken(out)
	return out, nil
}

// parseKey is the inverse of key.
func (s *Store) parseKey(key string) (replay.Key, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+":{")
	if !ok {
		return replay.Key{}, false
	}
	rest, ok = strings.CutSuffix(rest, "}")
	if !ok {
		return replay.Key{}, false
	}
	iss, hop, ok := strings.Cut(rest, "|")
	if !ok {
		return replay.Key{}, false
	}
	enc := base64.RawURLEncoding
	i, err1 := enc.DecodeString(iss)
	h, err2 := enc.DecodeString(hop)
	if err1 != nil || err2 != nil {
		return replay.Key{}, false
	}
	return replay.Key{Iss: string(i), Hop: string(h)}, true
}

// globEscape escapes the characters special to Redis's glob-style MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Close implements replay.Store. It does not close the client.
func (s *Store) Close() error { return nil }

// key returns the Redis key of the hop k.
func (s *Store) key(k replay.Key) string {
	enc := base64.RawURLEncoding
	b := make([]byte, 0, len(s.prefix)+4+enc.EncodedLen(len(k.Iss))+enc.EncodedLen(len(k.Hop)))
	b = append(b, s.prefix...)
	b = append(b, ":{"...)
	b = enc.AppendEncode(b, []byte(k.Iss))
	b = append(b, '|')
	b = enc.AppendEncode(b, []byte(k.Hop))
	b = append(b, '}')
	return string(b)
}

// pxat returns the PXAT argument for an expiry: Unix milliseconds rounded
// up, at least 1 (already past), or empty for no expiry. A time too far
// ahead for Unix milliseconds cannot be kept: ok is false, and the caller
// refuses the record with replay.ErrExpiry rather than keep it for less.
func pxat(t time.Time) (arg string, ok bool) {
	if t.IsZero() {
		return "", true
	}
	sec := t.Unix()
	switch {
	case sec >= math.MaxInt64/1000-1:
		return "", false
	case sec < 0:
		return "1", true
	}
	ms := sec*1000 + int64((t.Nanosecond()+999_999)/1_000_000)
	return strconv.FormatInt(max(ms, 1), 10), true
}

// expiryArg is pxat, or an error wrapping replay.ErrExpiry.
func expiryArg(t time.Time) (string, error) {
	arg, ok := pxat(t)
	if !ok {
		return "", fmt.Errorf("redisstore: %w: %s is past Unix milliseconds", replay.ErrExpiry, t)
	}
	return arg, nil
}

// expiryMillis is the PXAT of t as a number, or an error wrapping
// replay.ErrExpiry. t is not zero.
func expiryMillis(t time.Time) (int64, error) {
	arg, err := expiryArg(t)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(arg, 10, 64)
}

func unavailable(err error) error {
	return fmt.Errorf("redisstore: %w: %w", replay.ErrUnavailable, err)
}

func clone(r replay.Record) replay.Record {
	r.Digest = append([]byte(nil), r.Digest...)
	if r.Token != nil {
		r.Token = append([]byte(nil), r.Token...)
	}
	r.Created = r.Created.Round(0)
	r.Expires = r.Expires.Round(0)
	if r.Status != nil {
		r.Status = append([]byte{}, r.Status...)
	}
	return r
}
