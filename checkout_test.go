package handoff_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeSection returns the shell commands of the ```sh blocks in the
// README section under heading, one per line, in order.
func readmeSection(t *testing.T, heading string) [][]string {
	t.Helper()
	md, err := os.ReadFile("README.md")
	require.NoError(t, err)
	var blocks [][]string
	in, inBlock := false, false
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "#"):
			in = strings.TrimLeft(l, "# ") == heading
		case in && l == "```sh":
			inBlock = true
			blocks = append(blocks, nil)
		case inBlock && l == "```":
			inBlock = false
		case inBlock:
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], l)
		}
	}
	require.Len(t, blocks, 2, "the section %q shows a replace directive and a workspace", heading)
	return blocks
}

// The README's two ways to depend on the module from a checkout before it
// is published, run as written in a fresh module outside this tree, with
// "../handoff" naming this checkout: each builds and runs a program that
// imports the root. Nothing is fetched (GOPROXY=off): the root's own
// dependencies are in the module cache once its tests build.
func TestREADME_FromACheckout(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts its own toolchain first on PATH
	require.NoError(t, err)
	root, err := os.Getwd()
	require.NoError(t, err)
	const program = `package main

import (
	"fmt"

	"github.com/agentproto/handoff"
)

func main() {
	hop, err := handoff.NewHopID(nil)
	fmt.Println(hop.Valid(), err)
}
`
	for i, name := range []string{"replace", "workspace"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644))
			env := []string{"GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=", "GOWORK="}
			if name == "replace" {
				env = append(env, "GOWORK=off")
			}
			run := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(goTool, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), env...)
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
				return string(out)
			}
			run("mod", "init", "example.com/app")
			for _, line := range readmeSection(t, "From a checkout, before a release")[i] {
				args := strings.Fields(strings.ReplaceAll(line, "../handoff", root))
				require.Equal(t, "go", args[0], "every line of the block is a go command: %q", line)
				run(args[1:]...)
			}
			want := "true <nil>\n"
			require.Equal(t, want, run("run", "."), "the program ran")
		})
	}
}
