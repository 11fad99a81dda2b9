package handoff

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The root package links neither the store backends nor their clients:
// importing handoff costs no Redis, bbolt or SQL code (a program picks its
// backend by importing it).
func TestRootDoesNotLinkBackends(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the test suite, so it is on PATH")
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/redis/", "go.etcd.io/bbolt", "modernc.org/", "database/sql",
			"github.com/agentproto/handoff/replay/", "github.com/agentproto/handoff/ledger"} {
			require.False(t, strings.HasPrefix(dep, banned), "root package links %s", dep)
		}
	}
}
