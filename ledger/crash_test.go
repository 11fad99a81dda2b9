package ledger_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/ledger"
)

// Environment of the child process of the crash test.
const (
	crashEnvDB      = "LEDGER_CRASH_TEST_DB"
	crashEnvJournal = "LEDGER_CRASH_TEST_JOURNAL"
	crashAcks       = 50
	crashIss        = "https://crash.example/agent"
)

func crashHop(i int) string { return fmt.Sprintf("hop-%06d", i) }

// TestHC43CrashChild is the child process of TestHC43CrashKeepsEffectAndRecord.
// Run directly, it does nothing.
//
// It does the work of one hop after another with Do, and prints "ack <hop>"
// on stdout after each commit, as a delegate would send "completed" only
// after its step committed. It runs until it is killed.
func TestHC43CrashChild(t *testing.T) {
	path := os.Getenv(crashEnvDB)
	if path == "" {
		t.Skip("child process of TestHC43CrashKeepsEffectAndRecord")
	}
	db := openDB(t, path, os.Getenv(crashEnvJournal))
	l, err := ledger.NewSQL(db, testTable)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute) // in case the parent is gone
	for i := 0; time.Now().Before(deadline); i++ {
		hop := crashHop(i)
		err := l.Do(ctx, crashIss, hop, digestOf(hop), insertEffect(ctx, hop, strings.Repeat("x", 512)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", hop, err)
			os.Exit(3)
		}
		if _, err := fmt.Fprintf(os.Stdout, "ack %s\n", hop); err != nil {
			os.Exit(3)
		}
	}
	os.Exit(4)
}

// HC-43: a process killed at an arbitrary point (SIGKILL, no cleanup) never
// leaves an effect without its record or a record without its effect, and
// every step it acknowledged has both.
func TestHC43CrashKeepsEffectAndRecord(t *testing.T) {
	if os.Getenv(crashEnvDB) != "" {
		t.Skip("inside the child process")
	}
	for _, journal := range []string{"DELETE", "WAL"} {
		t.Run(journal, func(t *testing.T) { crashOnce(t, journal) })
	}
}

func crashOnce(t *testing.T, journal string) {
	path := filepath.Join(t.TempDir(), "crash.db")
	db := openDB(t, path, journal)
	setup(t, db)
	require.NoError(t, db.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^TestHC43CrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvDB+"="+path, crashEnvJournal+"="+journal)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	var acked []string
	ack := func(line string) {
		if hop, ok := strings.CutPrefix(line, "ack "); ok {
			acked = append(acked, hop)
		}
	}
	timeout := time.After(90 * time.Second)
	killed := false
	for !killed {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("child ended before it was killed, after %d acks; stderr:\n%s", len(acked), stderr.String())
			}
			ack(line)
			if len(acked) >= crashAcks {
				// A random delay lets the kill land anywhere in a step:
				// in the effect, the record, the commit, or between the
				// commit and its acknowledgement.
				time.Sleep(time.Duration(rand.Int64N(int64(20 * time.Millisecond))))
				require.NoError(t, cmd.Process.Signal(os.Kill)) // SIGKILL
				killed = true
			}
		case <-timeout:
			_ = cmd.Process.Kill()
			t.Fatalf("only %d acks before the timeout; stderr:\n%s", len(acked), stderr.String())
		}
	}
	// Lines written before the kill are acknowledgements too.
	for line := range lines {
		ack(line)
	}
	err = cmd.Wait()
	require.Error(t, err, "the child was killed")
	require.GreaterOrEqual(t, len(acked), crashAcks)
	for i, hop := range acked {
		require.Equal(t, crashHop(i), hop, "acks in order")
	}

	for _, suffix := range []string{"-journal", "-wal"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			t.Logf("%s: %s%s left by the kill, %d bytes", journal, filepath.Base(path), suffix, fi.Size())
		}
	}

	// Reopening the database runs its recovery; after it, no step can
	// still complete, and an absent record shows that nothing took effect.
	db = openDB(t, path, journal)
	defer db.Close()
	var check string
	require.NoError(t, db.QueryRow(`PRAGMA integrity_check`).Scan(&check))
	require.Equal(t, "ok", check)

	effects := column(t, db, `SELECT hop FROM effects ORDER BY hop`)
	records := column(t, db, `SELECT hop FROM `+testTable+` WHERE iss = ? ORDER BY hop`, crashIss)

	// No effect without its record, no record without its effect.
	require.Equal(t, effects, records)

	// Steps are sequential: what committed is hops 0..n-1, where n is the
	// number acknowledged, or one more if the child was killed between a
	// commit and its acknowledgement.
	n := len(records)
	require.Contains(t, []int{len(acked), len(acked) + 1}, n,
		"acked %d, committed %d", len(acked), n)
	for i := range n {
		require.Equal(t, crashHop(i), records[i])
	}
	t.Logf("%s: %d acknowledged, %d committed", journal, len(acked), n)

	l, err := ledger.NewSQL(db, testTable)
	require.NoError(t, err)
	ctx := context.Background()
	for _, hop := range acked {
		require.True(t, hasEffect(t, db, hop))
		require.True(t, hasRecord(t, db, crashIss, hop))
		o, err := l.Outcome(ctx, crashIss, hop, digestOf(hop), true)
		require.NoError(t, err)
		assert.Equal(t, ledger.TookEffect, o, hop)
	}
	next := crashHop(n)
	assert.False(t, hasEffect(t, db, next))
	o, err := l.Outcome(ctx, crashIss, next, digestOf(next), true)
	require.NoError(t, err)
	assert.Equal(t, ledger.NoEffect, o, "after recovery the interrupted step cannot complete")
}

func column(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	require.NoError(t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	sort.Strings(out)
	return out
}
