package keyset

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package links the standard library and the root module only: it
// brings no JWKS library and no module the root does not already need.
func TestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.Module.Path}}{{end}}", ".").Output()
	require.NoError(t, err)
	allowed := []string{"github.com/agentproto/handoff", "github.com/go-jose/go-jose/v4", "github.com/veraison/go-cose",
		"github.com/fxamacker/cbor/v2", "github.com/x448/float16", "github.com/go-json-experiment/json", "github.com/gowebpki/jcs",
		"github.com/transparency-dev/merkle"}
	for _, m := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			ok = ok || m == a
		}
		require.True(t, ok, "keyset links module %s", m)
	}
}
