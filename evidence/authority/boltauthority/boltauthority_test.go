package boltauthority_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	})
}

// The child processes of the tests below: one Perform, its outcome on
// stdout, then (for "kill") waiting to be killed.
const childEnv = "HANDOFF_BOLTAUTHORITY_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

func child(spec string) int {
	// mode|path|op|start (unix nanoseconds)
	parts := strings.Split(spec, "|")
	mode, path, op := parts[0], parts[1], parts[2]
	var start int64
	fmt.Sscan(parts[3], &start)
	l, err := boltauthority.Open(path, boltauthority.Options{Shared: mode == "replica"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	err = l.Perform(context.Background(), authority.Effect{Hop: "sha-256:hop", Action: "refund.issue", OperationID: op, At: time.Now()})
	switch {
	case err == nil:
		fmt.Println("allowed")
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

// An effect is recorded, the process is killed with SIGKILL (nothing
// closed, nothing flushed), and the ledger opened again refuses the same
// operation id, as either kind of name.
func TestSIGKILLThenSameOperationRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authority.db")
	cmd, out := startChild(t, fmt.Sprintf("kill|%s|op-1042|0", path))
	require.True(t, out.Scan())
	require.Equal(t, "allowed", out.Text())
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err := cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit))
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())

	l := open(t, path, boltauthority.Options{})
	ctx := context.Background()
	err = l.Perform(ctx, authority.Effect{Hop: "sha-256:hop", Action: "refund.issue", OperationID: "op-1042", At: time.Now()})
	require.ErrorIs(t, err, authority.ErrRepeated)
	err = l.Perform(ctx, authority.Effect{Hop: "sha-256:other", Action: "ledger.read", IdempotencyKey: "op-1042", At: time.Now()})
	require.ErrorIs(t, err, authority.ErrRepeated)
	rec, ok, err := l.Lookup(ctx, "op-1042")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "refund.issue", rec.Action)
}

// Two replicas, two processes on one shared file, present the same
// operation id at the same moment: exactly one is allowed.
func TestTwoReplicaProcessesOneAllowed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authority.db")
	l := open(t, path, boltauthority.Options{Shared: true}) // creates the file
	_ = l
	for round := range 3 {
		start := time.Now().Add(500 * time.Millisecond).UnixNano()
		op := fmt.Sprintf("op-race-%d", round)
		var cmds []*exec.Cmd
		var outs []*bufio.Scanner
		for range 2 {
			cmd, out := startChild(t, fmt.Sprintf("replica|%s|%s|%d", path, op, start))
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		var got []string
		for i, out := range outs {
			require.True(t, out.Scan())
			got = append(got, out.Text())
			require.NoError(t, cmds[i].Wait())
		}
		require.ElementsMatch(t, []string{"allowed", "refused"}, got, "round %d", round)
	}
}
