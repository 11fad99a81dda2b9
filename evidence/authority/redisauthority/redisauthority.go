// Package redisauthority is an authority.Ledger in Redis, shared by every
// replica of an agent: an effect performed by one is refused to all, and
// an approval's uses are spent once across them.
//
// Every check-and-record is one Lua script, which Redis runs atomically.
// All the keys of one ledger share the hash tag {prefix}, so that a Redis
// Cluster keeps them in one slot and a script may touch them together.
// Records have no expiry: run the server with persistence (AOF with
// appendfsync always, or at least everysec) and without an eviction
// policy that could drop keys (maxmemory-policy noeviction), or the
// ledger forgets what it must remember. What Redis acknowledged and then
// lost (a failover to a replica that had not yet received the write) is
// lost to the ledger too; WAIT can narrow that window, not close it.
package redisauthority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentproto/handoff/evidence/authority"
)

// DefaultPrefix starts every key when Options.Prefix is empty.
const DefaultPrefix = "handoff-authority"

// Options configure a ledger.
type Options struct {
	// Prefix names the ledger: it starts every key, as a hash tag. It must
	// not contain '{' or '}'. Ledgers with different prefixes on one
	// server are independent.
	Prefix string
}

// Ledger is an authority.Ledger in Redis. It is safe for concurrent use.
type Ledger struct {
	client redis.UniversalClient
	prefix string
}

var _ authority.Ledger = (*Ledger)(nil)

// ErrPrefix: the prefix contains a brace.
var ErrPrefix = errors.New("redisauthority: prefix must not contain '{' or '}'")

// New returns the ledger named by opts.Prefix on client.
func New(client redis.UniversalClient, opts Options) (*Ledger, error) {
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, ErrPrefix
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	return &Ledger{client: client, prefix: "{" + opts.Prefix + "}:"}, nil
}

func (l *Ledger) effectKey(name string) string { return l.prefix + "e:" + name }
func (l *Ledger) hopKey(hop string) string     { return l.prefix + "h:" + hop }
func (l *Ledger) approvalsKey(hop string) string {
	return l.prefix + "a:" + hop
}
func (l *Ledger) remainingKey(hop string) string { return l.prefix + "r:" + hop }
func (l *Ledger) idsKey() string                 { return l.prefix + "ids" }

func unavailable(err error) error { return fmt.Errorf("%w: %v", authority.ErrUnavailable, err) }

// stored is an approval as kept: its terms (Remaining apart, which is its
// own counter) and its window in milliseconds for the script.
type stored struct {
	authority.Approval
	IssuedMs  int64 `json:"issued_ms"`
	ExpiresMs int64 `json:"expires_ms"`
}

func encodeApproval(a authority.Approval) (string, error) {
	a.Remaining = 0
	b, err := json.Marshal(stored{Approval: a, IssuedMs: a.Issued.UnixMilli(), ExpiresMs: a.Expires.UnixMilli()})
	return string(b), err
}

// perform: KEYS hop, approvals, remaining, effect keys...; ARGV
// needsApproval, at (ms), action, operation id, idempotency key, hop,
// at (RFC 3339), names... It refuses, changing nothing, or records all.
var perform = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'final') == 1 then
	return {'finished', redis.call('HGET', KEYS[1], 'final')}
end
for i = 4, #KEYS do
	local v = redis.call('GET', KEYS[i])
	if v then return {'repeated', v} end
end
local approval = ''
if ARGV[1] == '1' then
	local at = tonumber(ARGV[2])
	local action, op, key = ARGV[3], ARGV[4], ARGV[5]
	local best, bestOp, bestExp
	local all = redis.call('HGETALL', KEYS[2])
	for i = 1, #all, 2 do
		local id, a = all[i], cjson.decode(all[i + 1])
		local left = tonumber(redis.call('HGET', KEYS[3], id) or '0')
		local bound = a.operation_id ~= nil and a.operation_id ~= ''
		if left > 0 and a.action == action and a.issued_ms <= at and at < a.expires_ms and
			(not bound or a.operation_id == op or a.operation_id == key) then
			local take = best == nil
			if not take and bound ~= bestOp then take = bound
			elseif not take and a.expires_ms ~= bestExp then take = a.expires_ms < bestExp
			elseif not take then take = id < best end
			if take then best, bestOp, bestExp = id, bound, a.expires_ms end
		end
	end
	if best == nil then return {'noapproval'} end
	redis.call('HINCRBY', KEYS[3], best, -1)
	approval = best
end
for i = 4, #KEYS do
	redis.call('SET', KEYS[i], cjson.encode({Name = ARGV[4 + i], Hop = ARGV[6], Action = ARGV[3], At = ARGV[7], Approval = approval}))
end
return {'ok', approval}
`)

// Perform implements authority.Ledger.
func (l *Ledger) Perform(ctx context.Context, e authority.Effect) error {
	if err := e.Validate(); err != nil {
		return err
	}
	names := e.Names()
	keys := []string{l.hopKey(e.Hop), l.approvalsKey(e.Hop), l.remainingKey(e.Hop)}
	need := "0"
	if e.NeedsApproval {
		need = "1"
	}
	at := e.At.UTC().Round(0)
	args := []any{need, at.UnixMilli(), e.Action, e.OperationID, e.IdempotencyKey, e.Hop, at.Format(time.RFC3339Nano)}
	for _, n := range names {
		keys = append(keys, l.effectKey(n))
		args = append(args, n)
	}
	res, err := perform.Run(ctx, l.client, keys, args...).StringSlice()
	if err != nil {
		return unavailable(err)
	}
	switch res[0] {
	case "ok":
		return nil
	case "finished":
		var f authority.Final
		_ = json.Unmarshal([]byte(res[1]), &f)
		return fmt.Errorf("%w: %s (%s)", authority.ErrFinished, e.Hop, f.State)
	case "noapproval":
		return fmt.Errorf("%w: %q on hop %s", authority.ErrNoApproval, e.Action, e.Hop)
	case "repeated":
		var r authority.Record
		if err := json.Unmarshal([]byte(res[1]), &r); err != nil {
			return unavailable(err)
		}
		return &authority.Refusal{Held: r}
	}
	return unavailable(fmt.Errorf("unexpected answer %q", res[0]))
}

// Lookup implements authority.Ledger.
func (l *Ledger) Lookup(ctx context.Context, name string) (authority.Record, bool, error) {
	v, err := l.client.Get(ctx, l.effectKey(name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return authority.Record{}, false, nil
	}
	if err != nil {
		return authority.Record{}, false, unavailable(err)
	}
	var r authority.Record
	if err := json.Unmarshal(v, &r); err != nil {
		return authority.Record{}, false, unavailable(err)
	}
	return r, true, nil
}

// grant: KEYS ids, approvals, remaining; ARGV id, hop, terms, uses.
var grant = redis.NewScript(`
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
	if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[3] then return 'same' end
	return 'conflict'
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
return 'granted'
`)

// Grant implements authority.Ledger. An approval under a used ID is the
// same grant when its stored terms are identical.
func (l *Ledger) Grant(ctx context.Context, a authority.Approval) error {
	a, err := a.Normalized()
	if err != nil {
		return err
	}
	terms, err := encodeApproval(a)
	if err != nil {
		return err
	}
	// An ID held under another hop is found in that hop's approvals, so
	// the script compares against the hop the ID names.
	hop, err := l.client.HGet(ctx, l.idsKey(), a.ID).Result()
	switch {
	case errors.Is(err, redis.Nil):
		hop = a.Hop
	case err != nil:
		return unavailable(err)
	}
	res, err := grant.Run(ctx, l.client, []string{l.idsKey(), l.approvalsKey(hop), l.remainingKey(hop)}, a.ID, a.Hop, terms, a.Uses).Text()
	if err != nil {
		return unavailable(err)
	}
	if res == "conflict" {
		return fmt.Errorf("%w: approval %q is recorded with other terms", authority.ErrConflict, a.ID)
	}
	return nil
}

// Approvals implements authority.Ledger.
func (l *Ledger) Approvals(ctx context.Context, hop string) ([]authority.Approval, error) {
	pipe := l.client.Pipeline()
	terms := pipe.HGetAll(ctx, l.approvalsKey(hop))
	left := pipe.HGetAll(ctx, l.remainingKey(hop))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, unavailable(err)
	}
	var out []authority.Approval
	for id, v := range terms.Val() {
		var s stored
		if err := json.Unmarshal([]byte(v), &s); err != nil {
			return nil, unavailable(err)
		}
		n, _ := strconv.Atoi(left.Val()[id])
		s.Approval.Remaining = n
		s.Approval.Issued, s.Approval.Expires = s.Approval.Issued.UTC(), s.Approval.Expires.UTC()
		out = append(out, s.Approval)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// setOnce records field of hop's hash once; the same value again is a
// no-op, another is ErrConflict.
func (l *Ledger) setOnce(ctx context.Context, hop, field string, v any, what string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	set, err := l.client.HSetNX(ctx, l.hopKey(hop), field, b).Result()
	if err != nil {
		return unavailable(err)
	}
	if set {
		return nil
	}
	held, err := l.client.HGet(ctx, l.hopKey(hop), field).Result()
	if err != nil {
		return unavailable(err)
	}
	if held == string(b) {
		return nil
	}
	return fmt.Errorf("%w: hop %s already has another %s", authority.ErrConflict, hop, what)
}

// Acknowledge implements authority.Ledger.
func (l *Ledger) Acknowledge(ctx context.Context, hop string, ack authority.Ack) error {
	if hop == "" || (ack.Decision != authority.Accepted && ack.Decision != authority.Rejected) {
		return fmt.Errorf("%w: an acknowledgement needs a hop and a decision", authority.ErrInvalid)
	}
	ack.At = ack.At.UTC().Round(0)
	return l.setOnce(ctx, hop, "ack", ack, "acknowledgement")
}

// Finish implements authority.Ledger.
func (l *Ledger) Finish(ctx context.Context, hop string, f authority.Final) error {
	if hop == "" || f.State == "" {
		return fmt.Errorf("%w: a final disposition needs a hop and a state", authority.ErrInvalid)
	}
	f.At = f.At.UTC().Round(0)
	return l.setOnce(ctx, hop, "final", f, "final disposition")
}

// Hop implements authority.Ledger.
func (l *Ledger) Hop(ctx context.Context, hop string) (authority.HopRecord, error) {
	m, err := l.client.HGetAll(ctx, l.hopKey(hop)).Result()
	if err != nil {
		return authority.HopRecord{}, unavailable(err)
	}
	var h authority.HopRecord
	if v, ok := m["ack"]; ok {
		h.Ack = &authority.Ack{}
		if err := json.Unmarshal([]byte(v), h.Ack); err != nil {
			return authority.HopRecord{}, unavailable(err)
		}
	}
	if v, ok := m["final"]; ok {
		h.Final = &authority.Final{}
		if err := json.Unmarshal([]byte(v), h.Final); err != nil {
			return authority.HopRecord{}, unavailable(err)
		}
	}
	return h, nil
}
