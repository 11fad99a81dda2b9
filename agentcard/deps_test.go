package agentcard_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package links the standard library, the root module and what the
// root module already requires: no JOSE, JCS or A2A library of its own.
func TestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.Module.Path}}{{end}}", ".").Output()
	require.NoError(t, err)
	allowed := []string{"github.com/agentproto/handoff", "github.com/go-jose/go-jose/v4", "github.com/veraison/go-cose",
		"github.com/fxamacker/cbor/v2", "github.com/x448/float16", "github.com/go-json-experiment/json", "github.com/gowebpki/jcs"}
	mods := strings.Fields(string(out))
	require.Contains(t, mods, "github.com/gowebpki/jcs", "the listing is of the package's modules")
	for _, m := range mods {
		require.True(t, slices.Contains(allowed, m), "agentcard links module %s", m)
	}
}
