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

func (l *Ledger) effectKey(name, hop string) string {
	return l.prefix + "e:" + string(authority.EffectKey(name, hop))
}
func (l *Ledger) nameKey(name string) string { return l.prefix + "n:" + name }
func (l *Ledger) hopKey(hop string) string   { return l.prefix + "h:" + hop }
func (l *Ledger) approvalsKey(hop string) string {
	return l.prefix + "a:" + hop
}
func (l *Ledger) remainingKey(hop string) string { return l.prefix + "r:" + hop }
func (l *Ledger) evidenceKey(hop string) string  { return l.prefix + "v:" + hop }
func (l *Ledger) idsKey() string                 { return l.prefix + "ids" }

func unavailable(err error) error { return fmt.Errorf("%w: %v", authority.ErrUnavailable, err) }

// stored is an approval as kept: its terms (Remaining and Evidence apart,
// which are kept beside it) and its window in milliseconds for the
// script. Two presentations of one grant have the same terms.
type stored struct {
	authority.Approval
	IssuedMs  int64 `json:"issued_ms"`
	ExpiresMs int64 `json:"expires_ms"`
}

func encodeApproval(a authority.Approval) (string, error) {
	a.Remaining, a.Evidence = 0, nil
	b, err := json.Marshal(stored{Approval: a, IssuedMs: a.Issued.UnixMilli(), ExpiresMs: a.Expires.UnixMilli()})
	return string(b), err
}

// An effect's record is a hash: name, hop, chain (a JSON array), action,
// tool, key, args, at (RFC 3339), approval, in_flight ("1" while a claim
// is not settled), outcome (JSON) and replays, each present only when
// set.

// perform: KEYS hop, approvals, remaining, then the effect's keys in its
// own hop (one per name), in each hop of its chain (one per name, hop
// after hop), and the names' index keys; ARGV needsApproval, at (ms),
// action, operation id, idempotency key, hop, at (RFC 3339), call key,
// args, tool, claim, chain (JSON or ""), the count of names, the count of
// chain hops, the names, then marker ("1" for a record that is not an
// effect: authority.Effect.Marker). It refuses, changing nothing but the
// count of a suppressed retry, or records all, and notes in the hop's
// hash ("effects") that the hop took an effect unless it is a marker.
var perform = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'final') == 1 then
	return {'finished', redis.call('HGET', KEYS[1], 'final')}
end
local n, c = tonumber(ARGV[13]), tonumber(ARGV[14])
for i = 4, 3 + n * (c + 1) do
	if redis.call('EXISTS', KEYS[i]) == 1 then
		if i < 4 + n and ARGV[8] ~= '' and redis.call('HGET', KEYS[i], 'key') == ARGV[8] then
			redis.call('HINCRBY', KEYS[i], 'replays', 1)
		end
		local held = redis.call('HGETALL', KEYS[i])
		table.insert(held, 1, 'repeated')
		return held
	end
end
local approval = ''
if ARGV[1] == '1' then
	local at = tonumber(ARGV[2])
	local action, op, key, args, tool = ARGV[3], ARGV[4], ARGV[5], ARGV[9], ARGV[10]
	local best, bestOp, bestExp
	local mismatch = false
	local all = redis.call('HGETALL', KEYS[2])
	for i = 1, #all, 2 do
		local id, a = all[i], cjson.decode(all[i + 1])
		local left = tonumber(redis.call('HGET', KEYS[3], id) or '0')
		local bound = type(a.operation_id) == 'string' and a.operation_id ~= ''
		local named = bound and (a.operation_id == op or a.operation_id == key)
		local live = left > 0 and a.action == action and a.issued_ms <= at and at < a.expires_ms
		local call = (type(a.tool) ~= 'string' or a.tool == '' or a.tool == tool) and
			(type(a.args) ~= 'string' or a.args == '' or a.args == args)
		if live and (not bound or named) and call then
			local take = best == nil
			if not take and bound ~= bestOp then take = bound
			elseif not take and a.expires_ms ~= bestExp then take = a.expires_ms < bestExp
			elseif not take then take = id < best end
			if take then best, bestOp, bestExp = id, bound, a.expires_ms end
		elseif live and named then
			mismatch = true
		end
	end
	if best == nil then
		if mismatch then return {'mismatch'} end
		return {'noapproval'}
	end
	redis.call('HINCRBY', KEYS[3], best, -1)
	approval = best
end
for i = 1, n do
	local k = KEYS[3 + i]
	redis.call('HSET', k, 'name', ARGV[14 + i], 'hop', ARGV[6], 'action', ARGV[3], 'at', ARGV[7])
	for f, v in pairs({chain = ARGV[12], tool = ARGV[10], key = ARGV[8], args = ARGV[9], approval = approval}) do
		if v ~= '' then redis.call('HSET', k, f, v) end
	end
	if ARGV[11] == '1' then redis.call('HSET', k, 'in_flight', '1') end
	redis.call('SADD', KEYS[3 + n * (c + 1) + i], ARGV[6])
end
if ARGV[15 + n] ~= '1' then redis.call('HSET', KEYS[1], 'effects', '1') end
return {'ok', approval}
`)

// Perform implements authority.Ledger.
func (l *Ledger) Perform(ctx context.Context, e authority.Effect) error {
	if err := e.Validate(); err != nil {
		return err
	}
	names := e.Names()
	keys := []string{l.hopKey(e.Hop), l.approvalsKey(e.Hop), l.remainingKey(e.Hop)}
	for _, hop := range append([]string{e.Hop}, e.Chain...) {
		for _, n := range names {
			keys = append(keys, l.effectKey(n, hop))
		}
	}
	for _, n := range names {
		keys = append(keys, l.nameKey(n))
	}
	need, claim := "0", "0"
	if e.NeedsApproval {
		need = "1"
	}
	if e.Claim {
		claim = "1"
	}
	chain := ""
	if len(e.Chain) > 0 {
		b, err := json.Marshal(e.Chain)
		if err != nil {
			return err
		}
		chain = string(b)
	}
	at := e.At.UTC().Round(0)
	args := []any{need, at.UnixMilli(), e.Action, e.OperationID, e.IdempotencyKey, e.Hop, at.Format(time.RFC3339Nano),
		e.Key, e.Args, e.Tool, claim, chain, len(names), len(e.Chain)}
	for _, n := range names {
		args = append(args, n)
	}
	marker := "0"
	if e.Marker {
		marker = "1"
	}
	args = append(args, marker)
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
		return authority.NoApproval(e, authority.ErrNoApproval)
	case "mismatch":
		return authority.NoApproval(e, authority.ErrApprovalMismatch)
	case "repeated":
		r, err := decodeRecord(pairs(res[1:]))
		if err != nil {
			return unavailable(err)
		}
		return e.Refuse(r)
	}
	return unavailable(fmt.Errorf("unexpected answer %q", res[0]))
}

// pairs makes a flat field, value list into a map.
func pairs(fv []string) map[string]string {
	m := make(map[string]string, len(fv)/2)
	for i := 0; i+1 < len(fv); i += 2 {
		m[fv[i]] = fv[i+1]
	}
	return m
}

// decodeRecord reads a record's hash.
func decodeRecord(m map[string]string) (authority.Record, error) {
	r := authority.Record{Name: m["name"], Hop: m["hop"], Action: m["action"], Tool: m["tool"], Key: m["key"],
		Args: m["args"], Approval: m["approval"], InFlight: m["in_flight"] == "1"}
	var err error
	if r.At, err = time.Parse(time.RFC3339Nano, m["at"]); err != nil {
		return r, err
	}
	if v, ok := m["chain"]; ok {
		if err := json.Unmarshal([]byte(v), &r.Chain); err != nil {
			return r, err
		}
	}
	if v, ok := m["outcome"]; ok {
		r.Outcome = &authority.Outcome{}
		if err := json.Unmarshal([]byte(v), r.Outcome); err != nil {
			return r, err
		}
	}
	if v, ok := m["replays"]; ok {
		if r.Replays, err = strconv.Atoi(v); err != nil {
			return r, err
		}
	}
	return r, nil
}

// settle: KEYS the effect's keys in its own hop, one per name; ARGV the
// call key, the outcome (JSON). Every record must be a claim of the call,
// in flight or settled with the same outcome; then the claims in flight
// are settled, all at once.
var settle = redis.NewScript(`
for i = 1, #KEYS do
	local h = redis.call('HMGET', KEYS[i], 'key', 'in_flight', 'outcome')
	if h[1] ~= ARGV[1] then return {'noclaim', tostring(i)} end
	if h[2] ~= '1' and h[3] ~= ARGV[2] then return {'settled', tostring(i)} end
end
for i = 1, #KEYS do
	if redis.call('HGET', KEYS[i], 'in_flight') == '1' then
		redis.call('HSET', KEYS[i], 'outcome', ARGV[2])
		redis.call('HDEL', KEYS[i], 'in_flight')
	end
end
return {'ok'}
`)

// Settle implements authority.Ledger.
func (l *Ledger) Settle(ctx context.Context, e authority.Effect, o authority.Outcome) error {
	if err := e.ValidateSettle(); err != nil {
		return err
	}
	enc, err := json.Marshal(authority.NormalizedOutcome(o))
	if err != nil {
		return err
	}
	names := e.Names()
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = l.effectKey(n, e.Hop)
	}
	res, err := settle.Run(ctx, l.client, keys, e.Key, string(enc)).StringSlice()
	if err != nil {
		return unavailable(err)
	}
	switch res[0] {
	case "ok":
		return nil
	case "noclaim", "settled":
		i, _ := strconv.Atoi(res[1])
		what := "holds no claim of this call"
		if res[0] == "settled" {
			what = "is settled already with another outcome"
		}
		return fmt.Errorf("%w: %q %s on hop %s", authority.ErrConflict, names[max(i-1, 0)], what, e.Hop)
	}
	return unavailable(fmt.Errorf("unexpected answer %q", res[0]))
}

// Lookup implements authority.Ledger.
func (l *Ledger) Lookup(ctx context.Context, name string) ([]authority.Record, error) {
	hops, err := l.client.SMembers(ctx, l.nameKey(name)).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	sort.Strings(hops)
	pipe := l.client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(hops))
	for i, h := range hops {
		cmds[i] = pipe.HGetAll(ctx, l.effectKey(name, h))
	}
	if len(hops) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, unavailable(err)
		}
	}
	out := make([]authority.Record, 0, len(hops))
	for _, c := range cmds {
		r, err := decodeRecord(c.Val())
		if err != nil {
			return nil, unavailable(err)
		}
		out = append(out, r)
	}
	return out, nil
}

// grant: KEYS ids, approvals, remaining, evidence; ARGV id, hop, terms,
// uses, evidence.
var grant = redis.NewScript(`
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
	if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[3] then return 'same' end
	return 'conflict'
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[4], ARGV[1], ARGV[5]) end
return 'granted'
`)

// Grant implements authority.Ledger. An approval under a used ID is the
// same grant when its stored terms are identical (its evidence aside).
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
	res, err := grant.Run(ctx, l.client, []string{l.idsKey(), l.approvalsKey(hop), l.remainingKey(hop), l.evidenceKey(hop)},
		a.ID, a.Hop, terms, a.Uses, string(a.Evidence)).Text()
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
	evidence := pipe.HGetAll(ctx, l.evidenceKey(hop))
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
		if v, ok := evidence.Val()[id]; ok {
			s.Approval.Evidence = []byte(v)
		}
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
	h.Effects = m["effects"] == "1"
	return h, nil
}
