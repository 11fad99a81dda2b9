package handoff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// heavyModules are module path prefixes that importing the root module must
// not bring: store backends, SQL drivers and agent SDKs live in nested
// modules of their own.
var heavyModules = []string{
	"github.com/redis/", "go.etcd.io/bbolt", "modernc.org/", "github.com/mattn/go-sqlite3",
	"github.com/jackc/", "github.com/go-sql-driver/", "github.com/lib/pq",
	"github.com/a2aproject/", "github.com/modelcontextprotocol/", "google.golang.org/adk",
}

// The root package links neither the store backends nor their clients:
// importing handoff costs no Redis, bbolt or SQL code (a program picks its
// backend by importing it).
func TestRootDoesNotLinkBackends(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the test suite, so it is on PATH")
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range append([]string{"database/sql",
			"github.com/agentproto/handoff/replay/", "github.com/agentproto/handoff/ledger"}, heavyModules...) {
			require.False(t, strings.HasPrefix(dep, banned), "root package links %s", dep)
		}
	}
}

// A fresh module that requires the root module and imports its packages
// names, after go mod tidy, no module of a store backend, SQL driver or
// agent SDK in its go.mod or go.sum: those live in nested modules
// (replay/boltstore, replay/redisstore, ledger, cmd/handoff, examples).
// It runs the go command outside any workspace and may fetch modules the
// cache lacks from the module proxy.
func TestFreshModuleNamesNoHeavyModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy in a new module")
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the test suite, so it is on PATH")
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	write("go.mod", "module example.com/fresh\n\ngo 1.26.0\n\n"+
		"require github.com/agentproto/handoff v0.0.0\n\n"+
		"replace github.com/agentproto/handoff => "+root+"\n")
	// Every public package of the root module.
	write("main.go", `package main

import (
	_ "github.com/agentproto/handoff"
	_ "github.com/agentproto/handoff/a2a"
	_ "github.com/agentproto/handoff/agentcard"
	_ "github.com/agentproto/handoff/cose"
	_ "github.com/agentproto/handoff/jws"
	_ "github.com/agentproto/handoff/mcp"
	_ "github.com/agentproto/handoff/replay"
	_ "github.com/agentproto/handoff/replay/storetest"
)

func main() {}
`)
	cmd := exec.Command(goBin, "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go mod tidy in a fresh module:\n%s", out)
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			for _, heavy := range heavyModules {
				require.NotContains(t, line, heavy, "%s of a fresh module that requires the root names a heavy module", name)
			}
		}
	}
	// The check is not vacuous: the root's own requirements are there.
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	require.NoError(t, err)
	require.Contains(t, string(sum), "github.com/go-jose/go-jose/v4 ")
}
