package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/evidence/authority"
)

// writeLedger writes records and approvals into a bbolt file in the layout
// of evidence/authority/boltauthority's documentation (its own test holds
// boltauthority to that layout).
func writeLedger(t *testing.T, path string, records []authority.Record, approvals []authority.Approval) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		buckets := map[string]*bolt.Bucket{}
		for _, n := range []string{"effects", "approvals", "ids", "hops"} {
			b, err := tx.CreateBucketIfNotExists([]byte(n))
			require.NoError(t, err)
			buckets[n] = b
		}
		for _, r := range records {
			v, err := json.Marshal(r)
			require.NoError(t, err)
			require.NoError(t, buckets["effects"].Put(authority.EffectKey(r.Name, r.Hop), v))
		}
		for _, a := range approvals {
			v, err := json.Marshal(a)
			require.NoError(t, err)
			require.NoError(t, buckets["approvals"].Put(append(append([]byte(a.Hop), 0), a.ID...), v))
			require.NoError(t, buckets["ids"].Put([]byte(a.ID), []byte(a.Hop)))
		}
		return nil
	}))
}

// hopDigest is the handoff digest of a made-up offer.
func hopDigest(s string) string { return digest.SHA256([]byte(s)).String() }

// An effect done at depth 3 (triage to payments to the refunds bot to a
// partner's agent), approved by the finance lead, then retried twice: the
// audit names the hop, the chain it came through, the call, its outcome,
// the retries suppressed, and who approved it. The same name on a hop of
// another chain is another effect, listed apart.
func TestEvidenceAudit(t *testing.T) {
	at := time.Unix(evNow, 0).UTC()
	h1, h2, h3, other := hopDigest("triage to payments"), hopDigest("payments to the bot"), hopDigest("the bot to the partner"), hopDigest("elsewhere")
	rec := authority.Record{Name: "re-1042", Hop: h3, Chain: []string{h1, h2}, Action: "refund.issue", Tool: "refund",
		Key: hopDigest("the call's key"), Args: hopDigest(`{"amount":640}`), At: at, Approval: "ap-77",
		Outcome: &authority.Outcome{Result: []byte(`{"refund":"re_77"}`), At: at.Add(time.Second)}, Replays: 2}
	elsewhere := authority.Record{Name: "re-1042", Hop: other, Action: "ledger.read", At: at, InFlight: true, Key: hopDigest("k")}
	ap := authority.Approval{ID: "ap-77", Hop: h3, Chain: []string{h1, h2}, Action: "refund.issue", OperationID: "re-1042",
		Tool: "refund", Args: rec.Args, Uses: 1, Remaining: 0, Approver: "finance-lead", Issued: at.Add(-time.Minute),
		Expires: at.Add(time.Hour), Source: authority.SourceOperator, Evidence: []byte("console:finance-lead")}
	path := filepath.Join(t.TempDir(), "authority.db")
	writeLedger(t, path, []authority.Record{rec, elsewhere}, []authority.Approval{ap})

	r := cli(t, nil, "evidence", "audit", "--ledger", path, "re-1042")
	mustCode(t, r, 0)
	assert.Empty(t, r.stderr)
	for _, want := range []string{
		`effect "re-1042"`,
		"  chain     " + h1 + " > " + h2 + " > " + h3 + " (this hop)\n",
		"  action    refund.issue (tool refund)\n",
		"  arguments " + rec.Args + "\n",
		"  key       " + rec.Key + "\n",
		`  result    18 octets: "{\"refund\":\"re_77\"}"`,
		"  retries   2 refused as the same call",
		"  approval  ap-77 by finance-lead (operator)",
		`  operator  "console:finance-lead"`,
		"  state     in flight",
		"  approval  none needed",
	} {
		assert.Contains(t, r.stdout, want)
	}
	// Ordered by hop.
	first, second := strings.Index(r.stdout, "  hop       "+h3), strings.Index(r.stdout, "  hop       "+other)
	require.True(t, first >= 0 && second >= 0)
	assert.Equal(t, h3 < other, first < second)

	r = cli(t, nil, "evidence", "audit", "--json", "--ledger", path, "re-1042")
	mustCode(t, r, 0)
	var trails []authority.Trail
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &trails))
	require.Len(t, trails, 2)
	for _, tr := range trails {
		if tr.Record.Hop == h3 {
			assert.Equal(t, []string{h1, h2}, tr.Record.Chain)
			require.NotNil(t, tr.Approval)
			assert.Equal(t, "finance-lead", tr.Approval.Approver)
			assert.Equal(t, 2, tr.Record.Replays)
		} else {
			assert.True(t, tr.Record.InFlight)
			assert.Nil(t, tr.Approval)
		}
	}

	// Nothing under another name: a negative answer.
	r = cli(t, nil, "evidence", "audit", "--ledger", path, "re-1043")
	mustCode(t, r, 1)
	assert.Equal(t, "no effect recorded under \"re-1043\"\n", r.stdout)
	r = cli(t, nil, "evidence", "audit", "--json", "--ledger", path, "re-1043")
	mustCode(t, r, 1)
	assert.Equal(t, "[]\n", r.stdout)
}

func TestEvidenceAuditRefusals(t *testing.T) {
	dir := t.TempDir()
	notLedger := filepath.Join(dir, "other.db")
	db, err := bolt.Open(notLedger, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"re-1042"}, "--ledger FILE is required"},
		{[]string{"--ledger", notLedger}, "one OPERATION expected"},
		{[]string{"--ledger", notLedger, "a", "b"}, "one OPERATION expected"},
		{[]string{"--ledger", filepath.Join(dir, "missing.db"), "re-1042"}, "--ledger:"},
		{[]string{"--ledger", notLedger, "re-1042"}, "--ledger: authority: ledger unavailable: " + notLedger + " holds no authority ledger"},
		{[]string{"--ledger", writeFile(t, filepath.Join(dir, "text"), []byte("not bbolt")), "re-1042"}, "--ledger:"},
	} {
		r := cli(t, nil, append([]string{"evidence", "audit"}, c.args...)...)
		mustCode(t, r, 2)
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, "handoff evidence audit: "+c.want, c.args)
	}
}
