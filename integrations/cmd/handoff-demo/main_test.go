package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play an agent when the demo starts it as
// one (envRole set), as the demo's own binary does.
func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(child(role, os.Getenv(envDir)))
	}
	os.Exit(m.Run())
}

func TestDemo_SeparateProcesses(t *testing.T) {
	out := runDemo(t, false)
	checkAccount(t, out)
	if !strings.Contains(out, "started as process") {
		t.Error("no agent process was started")
	}
	// The call in flight when tester-2 was killed failed, and the account
	// gives its whole reason.
	failed := 0
	for _, l := range strings.Split(out, "\n") {
		_, after, ok := strings.Cut(l, "tester-2: call failed (")
		if !ok {
			continue
		}
		failed++
		reason, ok := strings.CutSuffix(after, "); asking again with the identical Handoff")
		if !ok || strings.Contains(reason, "…") || !strings.Contains(reason, "tools/call") {
			t.Errorf("the reason of a failed call is not given whole: %q", l)
		}
	}
	if failed == 0 {
		t.Error("the call to the killed tester-2 was not reported failed")
	}
}

// -h describes what the demo does, not only its flags.
func TestUsage_DescribesTheDemo(t *testing.T) {
	var o options
	fs := newFlags(&o, flag.ContinueOnError)
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	if err := fs.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	help := buf.String()
	for _, want := range []string{
		"Usage: handoff-demo [-in-process] [-keep]\n\nhandoff-demo runs five agents on loopback",
		"drives one task through them",
		"kills it (SIGKILL), rotates its key and\nstarts it again",
		"sends a forged offer, which the planner refuses",
		"exits 0 when every step went as described",
		"\nFlags:\n  -in-process\n", "  -keep\n",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("-h lacks %q:\n%s", want, help)
		}
	}
	if err := fs.Parse([]string{"-in-process", "-keep"}); err != nil || !o.InProcess || !o.Keep {
		t.Errorf("flags not set: %v %+v", err, o)
	}
}

func TestDemo_InProcess(t *testing.T) {
	checkAccount(t, runDemo(t, true))
}

func runDemo(t *testing.T, inProcess bool) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var buf bytes.Buffer
	if err := run(ctx, &buf, options{InProcess: inProcess, Exe: exe}); err != nil {
		t.Fatalf("demo: %v\n%s", err, buf.String())
	}
	t.Log("\n" + buf.String())
	return buf.String()
}

// checkAccount checks the account the demo prints, hop by hop.
func checkAccount(t *testing.T, out string) {
	t.Helper()
	count := func(s string) int { return strings.Count(out, s) }
	for _, want := range []string{
		// Every hop accepted with its full, mixed chain.
		"planner   | hop ", "chain full: assistant -jws-> planner\n",
		"chain full: assistant -jws-> planner -cose-> coder\n",
		"chain full: assistant -jws-> planner -cose-> coder -jws-> tester-1",
		"chain full: assistant -jws-> planner -cose-> coder -jws-> tester-2",
		// The crash and the hop that survived it.
		"killing tester-2 (SIGKILL)",
		"was taken before the crash (the store still knows it)",
		`tester-2: retransmission answered: status "completed"`,
		// The assistant's hop over A2A 1.0, its retransmission and the forgery.
		"offering the task to planner over A2A 1.0",
		`assistant | status "completed"`,
		"answered with the identical",
		"REFUSED: bad-signature at the signature check; the executor does not run",
		"refused (task TASK_STATE_REJECTED), with no status: a status answers only an offer whose signature verified, and this one's did not\n",
		// Keys over HTTP, and tester-2's key rotated while it was down.
		"--- rotating tester-2's key while it is down",
		"coder     | keys: now trusts tester-2's new key",
		"its earlier key stays trusted for the 1m0s grace period",
		"tester-2  | keys: every peer has fetched the set with its current key",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the account lacks %q", want)
		}
	}
	// The tests ran once per tester: tester-2's were never started again
	// after the restart, only finished by the restarted agent.
	if n := count("tester-1  | working on hop"); n != 1 {
		t.Errorf("tester-1 worked %d times", n)
	}
	if n := count("tester-2  | working on hop"); n != 1 {
		t.Errorf("tester-2's tool ran %d times", n)
	}
	if n := count("RETRANSMISSION, not processed again; the tool does not run"); n < 1 {
		t.Error("no retransmission reached the restarted tester-2")
	}
	// Every agent trusted every peer's published key before the first
	// offer, and the restarted tester-2 again.
	if n := count("keys: trusts the keys its peers publish at their URLs"); n != 6 {
		t.Errorf("%d agents reported trusting their peers' keys, want 6", n)
	}
	if i := strings.Index(out, "keys: trusts the keys its peers publish"); i < 0 || i > strings.Index(out, "offering the task to planner") {
		t.Error("an offer was sent before every agent trusted its peers' keys")
	}
	// The status signed by the new key reached the coder only after every
	// peer had fetched it.
	rotated := strings.Index(out, "tester-2  | keys: every peer has fetched")
	if done := strings.Index(out, `tester-2: retransmission answered: status "completed"`); done < rotated {
		t.Error(`tester-2's "completed" was verified before every peer had its new key`)
	}
	if n := count("from assistant (jws): ACCEPTED"); n != 1 {
		t.Errorf("the planner accepted %d offers from the assistant, want 1", n)
	}
}
