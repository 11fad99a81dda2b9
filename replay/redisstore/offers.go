package redisstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/internal/codec"
)

// OfferStore is a replay.OfferStore kept in Redis, for a delegator that
// runs as several replicas: HC-42 (one unresolved hop per work) then holds
// across all of them. It is safe for concurrent use.
//
// Every key of one store carries the hash tag {prefix}, so a Redis Cluster
// keeps them in one slot and each Lua script (Create, Swap, Delete) is
// atomic over all the keys it touches:
//
//	"{" prefix "}:o:" base64url(hop)   hash: v (Version), b (the record's codec
//	                                   encoding, without Version), w (Work), o ("1" when Open)
//	"{" prefix "}:w:" base64url(work)  the hop of the Open record that holds work
//	"{" prefix "}:all"                 set of the hops held, for List
//	"{" prefix "}:seq"                 the last Version given (INCR)
//
// A record with an expiry is expired by the server (PEXPIREAT); List drops
// the hops of records gone from the set. The server configuration that
// package redisstore asks for (noeviction, persistence for a delegator that
// must survive a restart of Redis) applies here too. List reads every
// record of the store.
type OfferStore struct {
	client redis.UniversalClient
	tag    string
}

var _ replay.OfferStore = (*OfferStore)(nil)

// NewOffers returns an OfferStore that keeps its records through client
// under opts.Prefix (DefaultPrefix when empty). Close does not close the
// client. NewOffers panics if opts.Prefix contains '{' or '}'.
func NewOffers(client redis.UniversalClient, opts Options) *OfferStore {
	if strings.ContainsAny(opts.Prefix, "{}") {
		panic("redisstore: Options.Prefix contains '{' or '}'")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	return &OfferStore{client: client, tag: "{" + opts.Prefix + "}"}
}

func (s *OfferStore) recKey(hop string) string {
	return s.tag + ":o:" + base64.RawURLEncoding.EncodeToString([]byte(hop))
}

func (s *OfferStore) workKey(work string) string {
	return s.tag + ":w:" + base64.RawURLEncoding.EncodeToString([]byte(work))
}

func (s *OfferStore) allKey() string { return s.tag + ":all" }
func (s *OfferStore) seqKey() string { return s.tag + ":seq" }

// createScript: KEYS record, work, all, seq; ARGV value, hop, work, open,
// pxat. Returns {1} when the hop is held with another value, {2, hop} when
// an Open record holds the work, {0, version} when it inserted the record
// or holds it already with this very value (a retried Create).
var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
	if redis.call('HGET', KEYS[1], 'b') == ARGV[1] then
		return {0, redis.call('HGET', KEYS[1], 'v')}
	end
	return {1}
end
local lock = ARGV[4] == '1' and ARGV[3] ~= ''
if lock then
	local h = redis.call('GET', KEYS[2])
	if h then
		return {2, h}
	end
end
local v = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], 'v', v, 'b', ARGV[1], 'w', ARGV[3], 'o', ARGV[4])
if ARGV[5] ~= '' then
	redis.call('PEXPIREAT', KEYS[1], ARGV[5])
end
if lock then
	redis.call('SET', KEYS[2], ARGV[2])
end
redis.call('SADD', KEYS[3], ARGV[2])
return {0, v}
`)

// swapScript: KEYS record, work, seq; ARGV old version, value, open, pxat,
// hop. Returns {0} when no record is held, {1} when its version differs,
// {2, version} when it replaced it.
var swapScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'v')
if not cur then
	return {0}
end
if cur ~= ARGV[1] then
	return {1}
end
local was = redis.call('HGET', KEYS[1], 'o')
local v = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'v', v, 'b', ARGV[2], 'o', ARGV[3])
if ARGV[4] ~= '' then
	redis.call('PEXPIREAT', KEYS[1], ARGV[4])
else
	redis.call('PERSIST', KEYS[1])
end
if was == '1' and ARGV[3] ~= '1' and redis.call('GET', KEYS[2]) == ARGV[5] then
	redis.call('DEL', KEYS[2])
end
return {2, v}
`)

// deleteScript: KEYS record, work, all; ARGV version, hop. Returns 0 when
// no record is held, 1 when its version differs, 2 when it deleted it.
var deleteScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'v')
if not cur then
	return 0
end
if cur ~= ARGV[1] then
	return 1
end
local was = redis.call('HGET', KEYS[1], 'o')
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[2])
if was == '1' and redis.call('GET', KEYS[2]) == ARGV[2] then
	redis.call('DEL', KEYS[2])
end
return 2
`)

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// value is the stored encoding of rec: without its Version, which the
// hash keeps apart.
func value(rec replay.OfferRecord) []byte {
	rec.Version = 0
	return codec.EncodeOffer(rec)
}

// Create implements replay.OfferStore in one round trip.
func (s *OfferStore) Create(ctx context.Context, rec replay.OfferRecord) (replay.OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return replay.OfferRecord{}, err
	}
	if err := replay.CheckOffer(rec); err != nil {
		return replay.OfferRecord{}, err
	}
	rec = rec.Clone()
	px, err := expiryArg(rec.Expires)
	if err != nil {
		return replay.OfferRecord{}, err
	}
	res, err := createScript.Run(ctx, s.client,
		[]string{s.recKey(rec.Hop), s.workKey(rec.Work), s.allKey(), s.seqKey()},
		value(rec), rec.Hop, rec.Work, flag(rec.Open), px).Slice()
	if err != nil {
		return replay.OfferRecord{}, s.fail(ctx, err)
	}
	code, arg, err := reply(res)
	if err != nil {
		return replay.OfferRecord{}, err
	}
	switch code {
	case 0:
		if rec.Version, err = version(arg); err != nil {
			return replay.OfferRecord{}, err
		}
		return rec, nil
	case 1:
		return replay.OfferRecord{}, replay.ErrExists
	case 2:
		return replay.OfferRecord{}, &replay.BusyError{Work: rec.Work, Hop: arg}
	}
	return replay.OfferRecord{}, fmt.Errorf("redisstore: unexpected reply %v", res)
}

// Get implements replay.OfferStore.
func (s *OfferStore) Get(ctx context.Context, hop string) (replay.OfferRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return replay.OfferRecord{}, false, err
	}
	if hop == "" {
		return replay.OfferRecord{}, false, replay.ErrInvalid
	}
	vals, err := s.client.HMGet(ctx, s.recKey(hop), "v", "b").Result()
	if err != nil {
		return replay.OfferRecord{}, false, s.fail(ctx, err)
	}
	return decodeHash(hop, vals)
}

// decodeHash decodes the fields v and b of a record's hash; both nil means
// no record.
func decodeHash(hop string, vals []any) (replay.OfferRecord, bool, error) {
	if len(vals) != 2 {
		return replay.OfferRecord{}, false, fmt.Errorf("redisstore: offer record for %q: unexpected reply", hop)
	}
	if vals[0] == nil && vals[1] == nil {
		return replay.OfferRecord{}, false, nil
	}
	v, ok1 := vals[0].(string)
	b, ok2 := vals[1].(string)
	if !ok1 || !ok2 {
		return replay.OfferRecord{}, false, fmt.Errorf("redisstore: offer record for %q: %w", hop, codec.ErrMalformed)
	}
	rec, err := codec.DecodeOffer([]byte(b))
	if err != nil {
		return replay.OfferRecord{}, false, fmt.Errorf("redisstore: offer record for %q: %w", hop, err)
	}
	if rec.Version != 0 || rec.Hop != hop {
		return replay.OfferRecord{}, false, fmt.Errorf("redisstore: offer record for %q: %w", hop, codec.ErrMalformed)
	}
	if rec.Version, err = version(v); err != nil {
		return replay.OfferRecord{}, false, fmt.Errorf("redisstore: offer record for %q: %w", hop, err)
	}
	return rec, true, nil
}

// Swap implements replay.OfferStore in one round trip.
func (s *OfferStore) Swap(ctx context.Context, old, new replay.OfferRecord) (replay.OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return replay.OfferRecord{}, err
	}
	if err := replay.CheckSwap(old, new); err != nil {
		return replay.OfferRecord{}, err
	}
	new = new.Clone()
	px, err := expiryArg(new.Expires)
	if err != nil {
		return replay.OfferRecord{}, err
	}
	// Work never changes, and a Version is never given twice: when the
	// held Version is old's, the held Work is old's.
	res, err := swapScript.Run(ctx, s.client,
		[]string{s.recKey(old.Hop), s.workKey(old.Work), s.seqKey()},
		strconv.FormatUint(old.Version, 10), value(new), flag(new.Open), px, old.Hop).Slice()
	if err != nil {
		return replay.OfferRecord{}, s.fail(ctx, err)
	}
	code, arg, err := reply(res)
	if err != nil {
		return replay.OfferRecord{}, err
	}
	switch code {
	case 0:
		return replay.OfferRecord{}, replay.ErrNotFound
	case 1:
		return replay.OfferRecord{}, replay.ErrConflict
	case 2:
		if new.Version, err = version(arg); err != nil {
			return replay.OfferRecord{}, err
		}
		return new, nil
	}
	return replay.OfferRecord{}, fmt.Errorf("redisstore: unexpected reply %v", res)
}

// Delete implements replay.OfferStore in two round trips: a read of the
// record's Work, then the conditional delete.
func (s *OfferStore) Delete(ctx context.Context, hop string, version uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if hop == "" {
		return replay.ErrInvalid
	}
	work, err := s.client.HGet(ctx, s.recKey(hop), "w").Result()
	switch {
	case errors.Is(err, redis.Nil):
		return replay.ErrNotFound
	case err != nil:
		return s.fail(ctx, err)
	}
	// Should the record change between the two calls, its Version changes
	// too and the delete is refused.
	n, err := deleteScript.Run(ctx, s.client, []string{s.recKey(hop), s.workKey(work), s.allKey()},
		strconv.FormatUint(version, 10), hop).Int64()
	if err != nil {
		return s.fail(ctx, err)
	}
	switch n {
	case 0:
		return replay.ErrNotFound
	case 1:
		return replay.ErrConflict
	case 2:
		return nil
	}
	return fmt.Errorf("redisstore: unexpected reply %d", n)
}

// List implements replay.OfferStore: it reads every record of the store,
// in pipelined batches, and filters them.
func (s *OfferStore) List(ctx context.Context, q replay.OfferQuery) ([]replay.OfferRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hops, err := s.client.SMembers(ctx, s.allKey()).Result()
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	var (
		out  []replay.OfferRecord
		gone []any
	)
	for len(hops) > 0 {
		batch := hops[:min(len(hops), 512)]
		hops = hops[len(batch):]
		cmds := make([]*redis.SliceCmd, len(batch))
		if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, hop := range batch {
				cmds[i] = p.HMGet(ctx, s.recKey(hop), "v", "b")
			}
			return nil
		}); err != nil {
			return nil, s.fail(ctx, err)
		}
		for i, cmd := range cmds {
			rec, ok, err := decodeHash(batch[i], cmd.Val())
			if err != nil {
				return nil, err
			}
			if !ok {
				gone = append(gone, batch[i])
				continue
			}
			if q.Match(rec) {
				out = append(out, rec)
			}
		}
	}
	if len(gone) > 0 {
		// Expired records leave their hop in the set.
		s.prune(ctx, gone)
	}
	replay.SortOffers(out)
	return out, nil
}

// pruneScript removes from the set KEYS[1] each hop ARGV[i] whose record
// key KEYS[i+1] no longer exists (atomically: a hop created again since
// keeps its place).
var pruneScript = redis.NewScript(`
for i = 1, #ARGV do
	if redis.call('EXISTS', KEYS[i + 1]) == 0 then
		redis.call('SREM', KEYS[1], ARGV[i])
	end
end
return 0
`)

// prune drops from the set the hops whose records are gone. It is best
// effort: after an error they are left for the next List.
func (s *OfferStore) prune(ctx context.Context, hops []any) {
	keys := []string{s.allKey()}
	for _, h := range hops {
		keys = append(keys, s.recKey(h.(string)))
	}
	_ = pruneScript.Run(ctx, s.client, keys, hops...).Err()
}

// Close implements replay.OfferStore. It does not close the client.
func (s *OfferStore) Close() error { return nil }

func (s *OfferStore) fail(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("redisstore: %w: %w", ctxErr, err)
	}
	return unavailable(err)
}

// reply splits a script's reply {code[, arg]}.
func reply(res []any) (int64, string, error) {
	if len(res) == 0 {
		return 0, "", fmt.Errorf("redisstore: empty reply")
	}
	code, ok := res[0].(int64)
	if !ok {
		return 0, "", fmt.Errorf("redisstore: unexpected reply %v", res)
	}
	var arg string
	if len(res) > 1 {
		switch a := res[1].(type) {
		case string:
			arg = a
		case int64:
			arg = strconv.FormatInt(a, 10)
		default:
			return 0, "", fmt.Errorf("redisstore: unexpected reply %v", res)
		}
	}
	return code, arg, nil
}

func version(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("redisstore: version %q: %w", s, codec.ErrMalformed)
	}
	return v, nil
}
