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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/ledger"
)

const (
	crashAcks = 50
	crashIss  = "https://crash.example/agent"
	envHold   = "LEDGER_TEST_HOLD"
)

func crashHop(i int) string { return fmt.Sprintf("hop-%06d", i) }

// TestHC43CrashChild is the child process of TestHC43CrashKeepsEffectAndRecord.
// Run directly, it does nothing.
//
// It does the work of one hop after another with Do, and prints "ack <hop>"
// on stdout after each commit, as a delegate would send "completed" only
// after its step committed. It runs until it is killed. On a server it
// first prints "session <id>", the server's identifier of its one
// connection, so that the parent can wait for the server to end the
// session after the kill. With LEDGER_TEST_HOLD=n it does n steps, then
// begins the next, writes its effect and its record, prints "holding
// <hop>" and waits, its transaction open, to be killed in the middle of it.
func TestHC43CrashChild(t *testing.T) {
	p, ok := placeFromEnv()
	if !ok {
		t.Skip("child process of TestHC43CrashKeepsEffectAndRecord")
	}
	db := p.open(t)
	db.SetMaxOpenConns(1)
	l, err := ledger.NewSQL(db, testTable)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ctx := context.Background()
	if query := sessionQuery(p.dialect); query != "" {
		var id int64
		if err := db.QueryRowContext(ctx, query).Scan(&id); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Fprintf(os.Stdout, "session %d\n", id)
	}
	f := &fixture{d: p.dialect}
	hold, _ := strconv.Atoi(os.Getenv(envHold))
	deadline := time.Now().Add(2 * time.Minute) // in case the parent is gone
	for i := 0; time.Now().Before(deadline); i++ {
		hop := crashHop(i)
		if hold > 0 && i == hold {
			tx, err := db.BeginTx(ctx, nil)
			if err == nil {
				err = f.insertEffect(ctx, hop, "held")(tx)
			}
			if err == nil {
				err = l.Record(ctx, tx, crashIss, hop, digestOf(hop))
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", hop, err)
				os.Exit(3)
			}
			fmt.Fprintf(os.Stdout, "holding %s\n", hop)
			time.Sleep(time.Until(deadline))
			os.Exit(4)
		}
		err := l.Do(ctx, crashIss, hop, digestOf(hop), f.insertEffect(ctx, hop, strings.Repeat("x", 512)))
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
	if _, ok := placeFromEnv(); ok {
		t.Skip("inside the child process")
	}
	for _, b := range []backend{
		{name: "sqlite-DELETE", dialect: ledger.SQLite, journal: "DELETE"},
		{name: "sqlite-WAL", dialect: ledger.SQLite, journal: "WAL"},
		{name: "postgresql", dialect: ledger.PostgreSQL},
		{name: "mysql", dialect: ledger.MySQL},
	} {
		t.Run(b.name, func(t *testing.T) { crashOnce(t, b, 0) })
		// Killed for certain between the record and the commit.
		t.Run(b.name+"-in-transaction", func(t *testing.T) { crashOnce(t, b, 5) })
	}
}

// sessionQuery returns the statement that reads the server's identifier of
// the connection, or "" for SQLite.
func sessionQuery(d ledger.Dialect) string {
	switch d {
	case ledger.PostgreSQL:
		return `SELECT pg_backend_pid()`
	case ledger.MySQL:
		return `SELECT CONNECTION_ID()`
	}
	return ""
}

// sessionGone waits until the server has ended the session id, and with it
// rolled back any transaction it had open.
func sessionGone(t *testing.T, f *fixture, id int64) {
	t.Helper()
	query := `SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ?`
	if f.d == ledger.MySQL {
		query = `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`
	}
	deadline := time.Now().Add(30 * time.Second)
	for count(t, f.d, f.db, query, id) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the server still holds session %d of the killed process after 30s", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// crashOnce kills the child after crashAcks acknowledgements and a random
// delay, or, when hold is positive, once it holds the transaction of step
// hold open with its effect and record written.
func crashOnce(t *testing.T, b backend, hold int) {
	p := newPlace(t, b)
	db := p.open(t)
	setup(t, b.dialect, db)
	require.NoError(t, db.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^TestHC43CrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), append(p.env(), envHold+"="+strconv.Itoa(hold))...)
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
	session := int64(-1)
	ack := func(line string) {
		if hop, ok := strings.CutPrefix(line, "ack "); ok {
			acked = append(acked, hop)
		} else if id, ok := strings.CutPrefix(line, "session "); ok {
			n, err := strconv.ParseInt(id, 10, 64)
			require.NoError(t, err, line)
			session = n
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
			if hold > 0 && strings.HasPrefix(line, "holding ") {
				require.Equal(t, hold, len(acked))
				require.NoError(t, cmd.Process.Signal(os.Kill)) // SIGKILL
				killed = true
			} else if hold == 0 && len(acked) >= crashAcks {
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
	if hold == 0 {
		require.GreaterOrEqual(t, len(acked), crashAcks)
	}
	for i, hop := range acked {
		require.Equal(t, crashHop(i), hop, "acks in order")
	}

	// Reopening the database runs its recovery (SQLite); a server rolls
	// back the open transaction of a session once it sees the session end.
	// After either, no step can still complete, and an absent record shows
	// that nothing took effect.
	db = p.open(t)
	defer db.Close()
	f := &fixture{d: b.dialect, p: p, db: db}
	if b.dialect == ledger.SQLite {
		for _, suffix := range []string{"-journal", "-wal"} {
			if fi, err := os.Stat(p.where + suffix); err == nil {
				t.Logf("%s: %s%s left by the kill, %d bytes", b.name, filepath.Base(p.where), suffix, fi.Size())
			}
		}
		var check string
		require.NoError(t, db.QueryRow(`PRAGMA integrity_check`).Scan(&check))
		require.Equal(t, "ok", check)
	} else {
		require.GreaterOrEqual(t, session, int64(0), "the child printed its session")
		sessionGone(t, f, session)
	}

	effects := column(t, db, `SELECT hop FROM effects ORDER BY hop`)
	records := column(t, db, f.q(`SELECT hop FROM `+testTable+` WHERE iss = ? ORDER BY hop`), crashIss)

	// No effect without its record, no record without its effect.
	require.Equal(t, effects, records)

	// Steps are sequential: what committed is hops 0..n-1, where n is the
	// number acknowledged, or one more if the child was killed between a
	// commit and its acknowledgement.
	n := len(records)
	require.Contains(t, []int{len(acked), len(acked) + 1}, n,
		"acked %d, committed %d", len(acked), n)
	if hold > 0 {
		require.Equal(t, hold, n, "the transaction killed before its commit left nothing")
	}
	for i := range n {
		require.Equal(t, crashHop(i), records[i])
	}
	t.Logf("%s: %d acknowledged, %d committed", b.name, len(acked), n)

	l, err := ledger.NewSQL(db, testTable)
	require.NoError(t, err)
	ctx := context.Background()
	for _, hop := range acked {
		require.True(t, f.hasEffect(t, hop))
		require.True(t, f.hasRecord(t, crashIss, hop))
		o, err := l.Outcome(ctx, crashIss, hop, digestOf(hop), true)
		require.NoError(t, err)
		assert.Equal(t, ledger.TookEffect, o, hop)
	}
	next := crashHop(n)
	assert.False(t, f.hasEffect(t, next))
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
