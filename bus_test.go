package parley_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestOnlyCmdSeesTheBus holds the bus seam: no package of the module but
// cmd/parley depends on natsbus, directly or through another package, so
// that every bus user reaches the bus through the interfaces of bus.go.
// Tests may import it (go list's Deps leaves test files out), and so may
// internal/bustest, the tests' own helper, which no package may import.
func TestOnlyCmdSeesTheBus(t *testing.T) {
	const adapter, helper = "parley/natsbus", "parley/internal/bustest"
	allowed := []string{"parley/cmd/parley", adapter, helper}
	// The module root is this package's directory, where go test runs.
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	var seen, users, cmdDeps []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := fields[0]
		seen = append(seen, pkg)
		if pkg == "parley/cmd/parley" {
			cmdDeps = fields[1:]
		}
		if slices.Contains(fields[1:], helper) ||
			slices.Contains(fields[1:], adapter) && !slices.Contains(allowed, pkg) {
			users = append(users, pkg)
		}
	}
	// Guard against a go list that listed nothing useful (and so found
	// nothing wrong).
	for _, want := range []string{"parley", "parley/cmd/parley", adapter, helper, "parley/gateway", "parley/presence"} {
		if !slices.Contains(seen, want) {
			t.Fatalf("go list did not list %s; got %v", want, seen)
		}
	}
	if !slices.Contains(cmdDeps, adapter) {
		t.Fatalf("cmd/parley does not depend on %s: the check reads the wrong field", adapter)
	}
	if len(users) > 0 {
		t.Errorf("packages that depend on %s or %s outside cmd/parley: %v (take the interfaces of bus.go instead)",
			adapter, helper, users)
	}
}
