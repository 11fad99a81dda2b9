package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses shared by every command.
const (
	exitOK    = 0 // success: accepted, valid, written
	exitNo    = 1 // a definite negative answer: not accepted, not valid
	exitUsage = 2 // usage error or I/O error; stdout holds no answer
)

// env is what a command may touch: its standard streams. Commands never
// call os.Exit or use os.Stdout directly, so that tests can run them.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

type command struct {
	name    string
	summary string
	run     func(e *env, args []string) int
}

func commands() []command {
	return []command{
		{"keygen", "generate a signing key (private JWK) and print its public JWK", runKeygen},
		{"offer", "sign an offer and write the Handoff object that carries it", runOffer},
		{"verify", "run the draft's receive checks on a Handoff (JSON answer)", runVerify},
		{"status", "sign a status answering an offer", runStatus},
		{"verify-status", "check a signed status against its offer (JSON answer)", runVerifyStatus},
		{"inspect", "show a Handoff or signed element, UNVERIFIED, as a chain tree", runInspect},
		{"digest", "print the handoff digest of each signed element", runDigest},
		{"demo", "run a three-agent demonstration on built-in keys", runDemo},
		{"evidence", "handoff packages: template, check, digest, audit", runEvidence},
		{"card", "sign an A2A AgentCard, or verify its signatures for an agent", runCard},
		{"gateway", "serve signed handoffs in front of an A2A agent or client in any language", runGateway},
		{"conformance", "run the conformance vectors against another verify command", runConformance},
	}
}

// run is the whole program: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage())
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return run([]string{args[1], "-h"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, topUsage())
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
	}
	fmt.Fprintf(stderr, "handoff: unknown command %q\n\n", args[0])
	fmt.Fprint(stderr, topUsage())
	return exitUsage
}

func topUsage() string {
	var b strings.Builder
	b.WriteString(`Usage: handoff COMMAND [flags] [arguments]

Signed handoffs between agents (IETF draft "Signed Handoff Context for
Agentic Dialogs"): sign offers and statuses, verify them, inspect them.

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-14s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Flags take one or two dashes (-now or --now) and may follow the arguments.
Run "handoff COMMAND -h" for a command's flags and examples.

Exit status: 0 success (accepted, valid), 1 a negative answer (not
accepted, not valid), 2 usage or I/O error.

Example:
  handoff demo
`)
	return b.String()
}

// groupUsage is the help of a command with subcommands: head, the
// subcommands with their summaries, then tail.
func groupUsage(head string, subs []command, tail string) string {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("\nSubcommands:\n")
	for _, c := range subs {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString(tail)
	return b.String()
}

// runGroup runs the subcommand args[0] of the command name.
func (e *env) runGroup(name string, subs []command, usage func() string, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage())
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(e.stdout, usage())
		return exitOK
	}
	for _, c := range subs {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
	}
	if strings.HasPrefix(args[0], "-") {
		return e.usagef(name, "flag provided but not defined: %s", args[0])
	}
	fmt.Fprintf(e.stderr, "handoff %s: unknown subcommand %q\n\n", name, args[0])
	fmt.Fprint(e.stderr, usage())
	return exitUsage
}

// newFlagSet returns a FlagSet that reports nothing itself: parse prints
// help and errors.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// usageText assembles a command's help: synopsis and description, the
// flags with their defaults, then the examples.
func usageText(fs *flag.FlagSet, head, examples string) string {
	var flags bytes.Buffer
	fs.SetOutput(&flags)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	var b strings.Builder
	b.WriteString(strings.TrimRight(head, "\n"))
	b.WriteString("\n")
	if flags.Len() > 0 {
		b.WriteString("\nFlags:\n")
		b.Write(flags.Bytes())
	}
	b.WriteString("\nExamples:\n")
	b.WriteString(strings.TrimRight(examples, "\n"))
	b.WriteString("\n")
	return b.String()
}

// parse parses args, flags and positional arguments in any order ("--"
// ends the flags). On -h it prints the usage on stdout; on a bad flag it
// reports on stderr. ok is false when the command must return code.
func (e *env) parse(fs *flag.FlagSet, usage func() string, args []string) (pos []string, code int, ok bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(e.stdout, usage())
			return nil, exitOK, false
		}
		if err != nil {
			return nil, e.usagef(fs.Name(), "%v", err), false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usagef reports a usage error and returns exitUsage.
func (e *env) usagef(cmd, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "handoff %s: %s\nRun 'handoff %s -h' for usage.\n", cmd, once(fmt.Sprintf(format, args...)), cmd)
	return exitUsage
}

// failf reports an I/O or setup error and returns exitUsage.
func (e *env) failf(cmd, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "handoff %s: %s\n", cmd, once(fmt.Sprintf(format, args...)))
	return exitUsage
}

// warnf prints a warning that does not change the outcome.
func (e *env) warnf(cmd, format string, args ...any) {
	fmt.Fprintf(e.stderr, "handoff %s: warning: %s\n", cmd, once(fmt.Sprintf(format, args...)))
}

// once drops the library's "handoff: " from a message that the command's
// own "handoff CMD: " already begins, so that it is said once.
func once(msg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(msg, "handoff: "), ": handoff: ", ": ")
}

// maxInput bounds what is read from a file or stdin: more than any input
// the library accepts (a Handoff object is at most 512 KiB by default), so
// that an oversize input is reported by the library's own limit check.
const maxInput = 4 << 20

// readInput reads a file, or stdin for "-", up to maxInput+1 octets.
func (e *env) readInput(path string) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = e.stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, fmt.Errorf("%s is a directory", path)
		}
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", displayName(path), err)
	}
	return b, nil
}

func displayName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// writeOutput writes data to path, or to stdout when path is "" or "-".
func (e *env) writeOutput(path string, data []byte) error {
	if path == "" || path == "-" {
		_, err := e.stdout.Write(data)
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// printJSON writes v as one indented JSON object followed by a newline.
func (e *env) printJSON(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := e.stdout.Write(b.Bytes())
	return err
}
