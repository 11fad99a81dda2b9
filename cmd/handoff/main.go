// Command handoff creates, verifies and inspects signed handoffs of the IETF
// draft "Signed Handoff Context for Agentic Dialogs".
//
// Run "handoff -h" for the commands, and "handoff COMMAND -h" for each
// command's flags and examples. The verify command's output and exit status
// are a stable contract for scripts and test suites (see docs/cli.md).
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
