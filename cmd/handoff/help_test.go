package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHelp(t *testing.T) {
	for _, c := range commands() {
		for _, flag := range []string{"-h", "--help", "-help"} {
			t.Run(c.name+" "+flag, func(t *testing.T) {
				r := cli(t, nil, c.name, flag)
				mustCode(t, r, 0)
				assert.Empty(t, r.stderr)
				assert.True(t, strings.HasPrefix(r.stdout, "Usage: handoff "+c.name), r.stdout)
				assert.Contains(t, r.stdout, "Examples:\n  handoff "+c.name)
			})
		}
		t.Run("help "+c.name, func(t *testing.T) {
			r := cli(t, nil, "help", c.name)
			mustCode(t, r, 0)
			assert.True(t, strings.HasPrefix(r.stdout, "Usage: handoff "+c.name))
		})
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		r := cli(t, nil, args...)
		mustCode(t, r, 0)
		assert.Contains(t, r.stdout, "Commands:")
		assert.Contains(t, r.stdout, "Example:\n  handoff demo")
		for _, c := range commands() {
			assert.Contains(t, r.stdout, "  "+c.name+" ")
		}
	}
}

// The subcommands of the commands that have them: help, examples and flag
// errors name the whole command.
func TestSubcommandHelp(t *testing.T) {
	for group, subs := range map[string][]command{"evidence": evidenceCommands(), "card": cardCommands()} {
		for _, sub := range subs {
			name := group + " " + sub.name
			r := cli(t, nil, group, sub.name, "-h")
			mustCode(t, r, 0)
			assert.True(t, strings.HasPrefix(r.stdout, "Usage: handoff "+name), r.stdout)
			assert.Contains(t, r.stdout, "Examples:\n  handoff "+name)
			r = cli(t, nil, group, sub.name, "--no-such-flag")
			mustCode(t, r, 2)
			assert.Contains(t, r.stderr, "handoff "+name+": flag provided but not defined")
		}
	}
}

func TestUnknownCommandAndNoArguments(t *testing.T) {
	r := cli(t, nil, "frobnicate")
	mustCode(t, r, 2)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, `unknown command "frobnicate"`)
	assert.Contains(t, r.stderr, "Commands:")

	r = cli(t, nil)
	mustCode(t, r, 2)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "Usage: handoff COMMAND")

	r = cli(t, nil, "help", "frobnicate")
	mustCode(t, r, 2)
	assert.Empty(t, r.stdout)
}

func TestFlagErrorsName(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, nil, c.name, "--no-such-flag")
			mustCode(t, r, 2)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "handoff "+c.name+": flag provided but not defined")
			assert.Contains(t, r.stderr, "handoff "+c.name+" -h")
		})
	}
}
