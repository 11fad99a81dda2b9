package handofftest_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// modulesOf lists the modules the packages pkgs link, outside the standard
// library.
func modulesOf(t *testing.T, pkgs ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command runs the test suite, so it is on PATH: %v", err)
	}
	args := append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}"}, pkgs...)
	out, err := exec.Command(goBin, args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mods := strings.Fields(string(out))
	slices.Sort(mods)
	return slices.Compact(mods)
}

// The kit links no module the root package does not link already: a
// framework that imports handoff gets the kit at no cost in dependencies,
// and the kit's API is the standard testing interfaces (no testify).
func TestKitAddsNoDependency(t *testing.T) {
	root := modulesOf(t, "..")
	kit := modulesOf(t, ".")
	if len(kit) == 0 || !slices.Contains(kit, "github.com/agentproto/handoff") {
		t.Fatalf("go list found no modules for the kit: %v", kit)
	}
	for _, m := range kit {
		if !slices.Contains(root, m) {
			t.Errorf("the kit links module %s, which the root package does not", m)
		}
	}
	if slices.Contains(kit, "github.com/stretchr/testify") {
		t.Error("the kit links testify")
	}
}
