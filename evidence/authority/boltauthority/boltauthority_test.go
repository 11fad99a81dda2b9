package boltauthority_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/authoritytest"
	"github.com/agentproto/handoff/evidence/authority/boltauthority"
)

func open(t *testing.T, path string, opts boltauthority.Options) *boltauthority.Ledger {
	t.Helper()
	l, err := boltauthority.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLedger(t *testing.T) {
	authoritytest.Run(t, func(t *testing.T) authority.Ledger {
		return open(t, filepath.Join(t.TempDir(), "authority.db"), boltauthority.Options{})
	}, authoritytest.Options{
		Reopen: func(t *testing.T, l authority.Ledger) authority.Ledger {
			b := l.(*boltauthority.Ledger)
			require.NoError(t, b.Close())
			return open(t, b.Path(), boltauthority.Options{})
		},
	})
}

func TestLedgerShared(t *testing.T) {
	authoritytest.Run(t, func(t *testing.T) authority.Ledger {
		return open(t, filepath.Join(t.TempDir(), "authority.db"), boltauthority.Options{Shared: true})
	}, authoritytest.Options{
		Replica: func(t *testing.T, l authority.Ledger) authority.Ledger {
			return open(t, l.(*boltauthority.Ledger).Path(), boltauthority.Options{Shared: true})
		},
		Where: func(l authority.Ledger) string { return l.(*boltauthority.Ledger).Path() },
	})
}

// The child processes of the tests below: one Perform (and for "call" the
// record of its outcome), what came of it on stdout, then (for "kill")
// waiting to be killed.
const childEnv = "HANDOFF_BOLTAUTHORITY_CHILD"

func TestMain(m *testing.M) {
	authoritytest.ChildMain(func(path string) (authority.Ledger, error) {
		return boltauthority.Open(path, boltauthority.Options{Shared: true})
	})
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

// theCall is the call the "call" children claim, as evidence.Guard.Do
// does before it runs the tool.
func theCall(op string) authority.Effect {
	return authority.Effect{Hop: "sha-256:hop", Chain: []string{"sha-256:root"}, Action: "refund.issue", Tool: "refund",
		OperationID: op, Key: "sha-256:key-" + op, Args: "sha-256:args", Claim: true, At: time.Unix(1793000000, 0)}
}

func child(spec string) int {
	// mode|path|op|start (unix nanoseconds)
	parts := strings.Split(spec, "|")
	mode, path, op := parts[0], parts[1], parts[2]
	var start int64
	fmt.Sscan(parts[3], &start)
	l, err := boltauthority.Open(path, boltauthority.Options{Shared: mode != "kill"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	e := authority.Effect{Hop: "sha-256:hop", Action: "refund.issue", OperationID: op, At: time.Now()}
	if mode == "call" {
		e = theCall(op)
	}
	err = l.Perform(context.Background(), e)
	switch {
	case err == nil && mode == "call":
		// The effect runs once; its outcome is recorded.
		err = l.Settle(context.Background(), e, authority.Outcome{Result: []byte("refund re_" + strconv.Itoa(os.Getpid())), At: time.Now()})
		fmt.Println("allowed", err)
	case err == nil:
		fmt.Println("allowed")
	case errors.Is(err, authority.ErrInFlight):
		fmt.Println("in-flight")
	case errors.Is(err, authority.ErrReplayed):
		fmt.Println("replayed")
	case errors.Is(err, authority.ErrRepeated):
		fmt.Println("refused")
	default:
		fmt.Println("error", err)
	}
	if mode == "kill" {
		select {} // killed here, with nothing closed
	}
	return 0
}

func startChild(t *testing.T, spec string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+spec)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	return cmd, bufio.NewScanner(out)
}

// kill sends SIGKILL to the child and requires that it died of it.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err := cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit))
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
}

// An effect is recorded, the process is killed with SIGKILL (nothing
// closed, nothing flushed), and the ledger opened again refuses the same
// operation id, as either kind of name, in its hop's scope.
func TestSIGKILLThenSameOperationRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authority.db")
	cmd, out := startChild(t, fmt.Sprintf("kill|%s|op-1042|0", path))
	require.True(t, out.Scan())
	require.Equal(t, "allowed", out.Text())
	kill(t, cmd)

	l := open(t, path, boltauthority.Options{})
	ctx := context.Background()
	err := l.Perform(ctx, authority.Effect{Hop: "sha-256:hop", Action: "refund.issue", OperationID: "op-1042", At: time.Now()})
	require.ErrorIs(t, err, authority.ErrRepeated)
	err = l.Perform(ctx, authority.Effect{Hop: "sha-256:hop", Action: "ledger.read", IdempotencyKey: "op-1042", At: time.Now()})
	require.ErrorIs(t, err, authority.ErrRepeated)
	rs, err := l.Lookup(ctx, "op-1042")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, "refund.issue", rs[0].Action)
}

// Two replicas, two processes on one shared file, present the same
// operation id at the same moment: exactly one is allowed.
func TestTwoReplicaProcessesOneAllowed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authority.db")
	open(t, path, boltauthority.Options{Shared: true}) // creates the file
	for round := range 3 {
		got := race(t, "replica", path, fmt.Sprintf("op-race-%d", round))
		require.ElementsMatch(t, []string{"allowed", "refused"}, got, "round %d", round)
	}
}

// Two replica processes present one call (same key, same arguments) at
// the same moment: one effect, whose outcome is recorded; the other is
// answered in flight or replayed, never performed.
func TestTwoReplicaProcessesOneCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authority.db")
	l := open(t, path, boltauthority.Options{Shared: true})
	for round := range 3 {
		op := fmt.Sprintf("op-call-%d", round)
		got := race(t, "call", path, op)
		require.Contains(t, got, "allowed <nil>", "round %d", round)
		require.Subset(t, []string{"allowed <nil>", "in-flight", "replayed"}, got, "round %d", round)
		require.NotEqual(t, got[0], got[1], "round %d: one effect", round)
		err := l.Perform(context.Background(), theCall(op))
		var r *authority.Refusal
		require.True(t, errors.As(err, &r))
		require.ErrorIs(t, err, authority.ErrReplayed)
		require.True(t, strings.HasPrefix(string(r.Held.Outcome.Result), "refund re_"))
	}
}

// race starts two children of mode presenting op at the same moment and
// returns what each printed.
func race(t *testing.T, mode, path, op string) []string {
	t.Helper()
	start := time.Now().Add(500 * time.Millisecond).UnixNano()
	var cmds []*exec.Cmd
	var outs []*bufio.Scanner
	for range 2 {
		cmd, out := startChild(t, fmt.Sprintf("%s|%s|%s|%d", mode, path, op, start))
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	var got []string
	for i, out := range outs {
		require.True(t, out.Scan())
		got = append(got, out.Text())
		require.NoError(t, cmds[i].Wait())
	}
	return got
}

// The file is in the layout the package documentation gives ("File
// format"), which readers of the file alone ("handoff evidence audit")
// rely on: each record as JSON under authority.EffectKey(name, hop) in
// "effects", each approval as JSON under its hop, a zero octet and its ID
// in "approvals".
func TestFileFormat(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "authority.db")
	l := open(t, path, boltauthority.Options{})
	a := authority.Approval{ID: "ap-1", Hop: "sha-256:hop3", Chain: []string{"sha-256:hop1", "sha-256:hop2"}, Action: "refund.issue",
		OperationID: "op-1", Tool: "refund", Args: "sha-256:args", Approver: "finance-lead", Issued: time.Unix(1793000000, 0),
		Expires: time.Unix(1793003600, 0), Source: authority.SourceOperator, Evidence: []byte("console:finance-lead")}
	require.NoError(t, l.Grant(ctx, a))
	e := authority.Effect{Hop: a.Hop, Chain: a.Chain, Action: a.Action, Tool: a.Tool, OperationID: "op-1", Key: "sha-256:key",
		Args: a.Args, NeedsApproval: true, Claim: true, At: time.Unix(1793000001, 0)}
	require.NoError(t, l.Perform(ctx, e))
	require.NoError(t, l.Settle(ctx, e, authority.Outcome{Result: []byte("re_77"), At: time.Unix(1793000002, 0)}))
	recs, err := l.Lookup(ctx, "op-1")
	require.NoError(t, err)
	as, err := l.Approvals(ctx, a.Hop)
	require.NoError(t, err)
	require.NoError(t, l.Close())

	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		var r authority.Record
		require.NoError(t, json.Unmarshal(tx.Bucket([]byte("effects")).Get(authority.EffectKey("op-1", a.Hop)), &r))
		require.Equal(t, recs, []authority.Record{r})
		require.Equal(t, a.Chain, r.Chain)
		var got authority.Approval
		require.NoError(t, json.Unmarshal(tx.Bucket([]byte("approvals")).Get(append([]byte(a.Hop+"\x00"), a.ID...)), &got))
		require.Equal(t, as, []authority.Approval{got})
		require.Equal(t, a.Hop, string(tx.Bucket([]byte("ids")).Get([]byte(a.ID))))
		require.NotNil(t, tx.Bucket([]byte("hops")))
		return nil
	}))
}

// A ledger opened read-only (an audit) reads what a writer recorded,
// refuses every write with ErrUnavailable, and refuses a bbolt file that
// holds no ledger.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "authority.db")
	w := open(t, path, boltauthority.Options{})
	e := authority.Effect{Hop: "sha-256:hop1", Action: "refund", OperationID: "op-1", At: time.Unix(1793000000, 0)}
	require.NoError(t, w.Perform(ctx, e))
	require.NoError(t, w.Close())

	r, err := boltauthority.Open(path, boltauthority.Options{ReadOnly: true})
	require.NoError(t, err)
	defer r.Close()
	recs, err := r.Lookup(ctx, "op-1")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.ErrorIs(t, r.Perform(ctx, authority.Effect{Hop: "sha-256:hop1", Action: "refund", OperationID: "op-2", At: time.Unix(1793000000, 0)}), authority.ErrUnavailable)
	recs, err = r.Lookup(ctx, "op-2")
	require.NoError(t, err)
	require.Empty(t, recs, "nothing was written")

	empty := filepath.Join(t.TempDir(), "empty.db")
	db, err := bolt.Open(empty, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = boltauthority.Open(empty, boltauthority.Options{ReadOnly: true})
	require.ErrorIs(t, err, authority.ErrUnavailable)
	_, err = boltauthority.Open(filepath.Join(t.TempDir(), "missing.db"), boltauthority.Options{ReadOnly: true})
	require.ErrorIs(t, err, authority.ErrUnavailable)
}
