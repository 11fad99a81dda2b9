package evidence

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// evidenceOnly are the modules this package brings in that the root
// package must not link.
// go-json-experiment is the root's own strict JSON decoder (codec.go) since
// the root decodes with jsontext; jcs (number formatting) and x/text (NFC)
// are the evidence package's alone.
var evidenceOnly = []string{"github.com/gowebpki/jcs", "golang.org/x/text"}

func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the test suite, so it is on PATH")
	out, err := exec.Command(goBin, "list", "-deps", pkg).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

func linked(deps []string, prefix string) bool {
	for _, d := range deps {
		if d == prefix || strings.HasPrefix(d, prefix+"/") {
			return true
		}
	}
	return false
}

// Importing the root package costs nothing of the evidence package: its
// JCS and strict JSON dependencies stay out of the root's import graph.
func TestRootDoesNotLinkEvidenceDependencies(t *testing.T) {
	root := goListDeps(t, "github.com/agentproto/handoff")
	mine := goListDeps(t, "github.com/agentproto/handoff/evidence")
	for _, m := range evidenceOnly {
		require.True(t, linked(mine, m), "the evidence package links %s (else this test proves nothing)", m)
		require.False(t, linked(root, m), "the root package links %s", m)
	}
	require.False(t, linked(root, "github.com/agentproto/handoff/evidence"))
}
