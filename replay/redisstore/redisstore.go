// Package redisstore is a replay.Store kept in Redis, for receivers and
// delegates that run as several replicas and must share one memory of the
// hops they have seen.
//
// Each Store method is one round trip: Remember and Update are Lua scripts
// run with EVALSHA, so the check and the write are atomic on the server;
// Get is a GET. Every key of one hop falls in one Redis Cluster slot.
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
// # Keys and values
//
// The record of the hop (iss, hop) is kept under the string key
//
//	prefix ":{" base64url(iss) "|" base64url(hop) "}"
//
// (unpadded base64url, so no '{', '}' or '|' from iss or hop reaches the key
// and the braces are a Redis Cluster hash tag). Its value is the encoding of
// package boltstore's records: the octet 0x01, the 32-octet digest, a flags
// octet (0x01 when the record expires), Expires as 8 octets of big-endian
// Unix seconds and 4 of nanoseconds, then the state and the status, each as
// a uvarint length and that many octets.
package redisstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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
}

// Store is a replay.Store kept in Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
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
	return &Store{client: client, prefix: opts.Prefix}
}

// rememberScript returns the value held under KEYS[1], or, when there is
// none, sets it to ARGV[1], expiring at ARGV[2] Unix milliseconds unless
// ARGV[2] is empty, and returns nil.
var rememberScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
	return v
end
if ARGV[2] == '' then
	redis.call('SET', KEYS[1], ARGV[1])
else
	redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
end
return false
`)

// updateScript replaces the value held under KEYS[1] with ARGV[2], expiring
// at ARGV[3] Unix milliseconds unless ARGV[3] is empty, provided the held
// value carries the digest ARGV[1]. It returns 0 when no value is held, 1
// when the digest differs, 2 when it replaced the value, and -1 when the
// held value is not a version 1 record.
var updateScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
	return 0
end
if #v < 33 or string.byte(v, 1) ~= 1 then
	return -1
end
if string.sub(v, 2, 33) ~= ARGV[1] then
	return 1
end
if ARGV[3] == '' then
	redis.call('SET', KEYS[1], ARGV[2])
else
	redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[3])
end
return 2
`)

// Remember implements replay.Store in one round trip.
func (s *Store) Remember(ctx context.Context, k replay.Key, rec replay.Record) (replay.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.Record{}, false, err
	}
	if err := codec.Check(k, &rec); err != nil {
		return replay.Record{}, false, err
	}
	v, err := rememberScript.Run(ctx, s.client, []string{s.key(k)}, codec.Encode(rec), pxat(rec.Expires)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return clone(rec), true, nil
	case err != nil && redis.IsOOMError(err):
		return replay.Record{}, false, fmt.Errorf("redisstore: %w: %w", replay.ErrFull, err)
	case err != nil:
		return replay.Record{}, false, unavailable(err)
	}
	str, ok := v.(string)
	if !ok {
		return replay.Record{}, false, fmt.Errorf("redisstore: record for %q: unexpected reply %T", k, v)
	}
	held, err := codec.Decode([]byte(str))
	if err != nil {
		return replay.Record{}, false, fmt.Errorf("redisstore: record for %q: %w", k, err)
	}
	return held, false, nil
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
	rec, err := codec.Decode(v)
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
	n, err := updateScript.Run(ctx, s.client, []string{s.key(k)}, rec.Digest, codec.Encode(rec), pxat(rec.Expires)).Int64()
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

// Close implements replay.Store. It does not close the client.
func (s *Store) Close() error { return nil }

// key returns the Redis key of the hop k.
func (s *Store) key(k replay.Key) string {
	enc := base64.RawURLEncoding
	var b strings.Builder
	b.Grow(len(s.prefix) + 4 + enc.EncodedLen(len(k.Iss)) + enc.EncodedLen(len(k.Hop)))
	b.WriteString(s.prefix)
	b.WriteString(":{")
	b.WriteString(enc.EncodeToString([]byte(k.Iss)))
	b.WriteByte('|')
	b.WriteString(enc.EncodeToString([]byte(k.Hop)))
	b.WriteByte('}')
	return b.String()
}

// pxat returns the PXAT argument for an expiry: Unix milliseconds rounded
// up, at least 1 (already past), or empty for no expiry. A time too far
// ahead for Unix milliseconds is kept without expiry.
func pxat(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	sec := t.Unix()
	switch {
	case sec >= math.MaxInt64/1000-1:
		return ""
	case sec < 0:
		return "1"
	}
	ms := sec*1000 + int64((t.Nanosecond()+999_999)/1_000_000)
	return strconv.FormatInt(max(ms, 1), 10)
}

func unavailable(err error) error {
	return fmt.Errorf("redisstore: %w: %w", replay.ErrUnavailable, err)
}

func clone(r replay.Record) replay.Record {
	r.Digest = append([]byte(nil), r.Digest...)
	if r.Status != nil {
		r.Status = append([]byte{}, r.Status...)
	}
	return r
}
