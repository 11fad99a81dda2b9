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
	require.Len(t, blocks, 2, "the section %q shows a workspace and replace directives", heading)
	return blocks
}

// The README's two ways to depend on the modules from a checkout, run as
// written in a fresh module outside this tree, with "../handoff" naming
// this checkout: a workspace of every module, and replace directives for
// integrations/a2a1hop and the modules it requires. Each builds and runs a
// program that imports the root and integrations/a2a1hop. What is not in
// the module cache comes from the GOPROXY in effect (nothing of this
// repository: the checkout serves it).
func TestREADME_FromACheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs with the go command")
	}
	goTool, err := exec.LookPath("go") // go test puts its own toolchain first on PATH
	require.NoError(t, err)
	root, err := os.Getwd()
	require.NoError(t, err)
	const program = `package main

import (
	"fmt"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/integrations/a2a1hop"
)

func main() {
	hop, err := handoff.NewHopID(nil)
	fmt.Println(hop.Valid(), err, a2a1hop.ExtensionURI != "")
}
`
	blocks := readmeSection(t, "From a checkout")
	for i, name := range []string{"workspace", "replace"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644))
			env := []string{"GOTOOLCHAIN=local", "GOFLAGS=-modcacherw", "GOWORK="}
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
			run("mod", "edit", "-go=1.26.5")
			for _, line := range blocks[i] {
				args := strings.Fields(strings.ReplaceAll(line, "../handoff", root))
				require.Equal(t, "go", args[0], "every line of the block is a go command: %q", line)
				run(args[1:]...)
			}
			want := "true <nil> true\n"
			require.Equal(t, want, run("run", "."), "the program ran")
		})
	}
}
