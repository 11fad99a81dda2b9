package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestMain lets the test binary play the agents: run re-executes it with
// HANDOFF_CHAIN_ROLE set, as it re-executes the program.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := child(role); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestChain_SurvivesACrashMidHop(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		`tester    \| took hop \S+ from the coder \(chain full, 2 earlier hops\); running the tests`,
		`coder     \| took hop \S+ from the planner \(chain full, 1 earlier hops\); offered hop \S+ to the tester: "accepted"`,
		`demo      \| killing the coder \(SIGKILL\) while it follows hop \S+`,
		`coder     \| restarted on its files: hop \S+ to the tester \(for hop \S+\) is unresolved; following it`,
		`tester    \| tests passed; hop \S+ is now "completed"`,
		`coder     \| hop \S+ is "completed"; hop \S+ is now "completed"`,
		`planner   \| hop \S+ is "completed"; hop \S+ is now "completed"`,
		`assistant \| hop \S+ is "completed": the chain finished`,
		`files     \| hop \S+ assistant -> planner: the assistant's file says "completed" \(resolved: true\), the planner's file says "completed"`,
		`files     \| hop \S+ planner -> coder: the planner's file says "completed" \(resolved: true\), the coder's file says "completed"`,
		`files     \| hop \S+ coder -> tester: the coder's file says "completed" \(resolved: true\), the tester's file says "completed"`,
	} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// Each tool ran once: the retransmissions, before and after the
	// crash, never reached a tool again (HC-38), and the restarted coder
	// did not take its hop again.
	for _, name := range []string{"planner", "coder", "tester"} {
		if n := strings.Count(got, fmt.Sprintf("%-9s | took hop ", name)); n != 1 {
			t.Errorf("the %s's tool ran %d times:\n%s", name, n, got)
		}
	}
	// The restart came after the crash, and before the chain finished.
	kill, restart, done := strings.Index(got, "killing the coder"), strings.Index(got, "restarted on its files"), strings.Index(got, "the chain finished")
	if !(kill < restart && restart < done) {
		t.Errorf("out of order:\n%s", got)
	}
}
