package daemon_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServingDoesNotDependOnTheSimulatedWorld: the daemon's wiring and
// everything it imports never reach the simulated provider, the fixtures
// or the demo, which live under sim/ for trying taskgate out and
// testing it.
func TestServingDoesNotDependOnTheSimulatedWorld(t *testing.T) {
	const sim = "github.com/taskgate/taskgate/sim/"
	out, err := exec.Command("go", "list", "-deps", "github.com/taskgate/taskgate/daemon").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps named only %q; expected the daemon's whole tree", deps)
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, sim) {
			t.Errorf("the daemon depends on %s", dep)
		}
	}
}

// TestInternalHoldsOnlyLeaves: the packages under the module's internal/
// are leaves, as in the go-sdk: none imports, in its code or its tests, a
// package of this module outside internal/, so that no layer reaches up
// through them.
func TestInternalHoldsOnlyLeaves(t *testing.T) {
	const module = "github.com/taskgate/taskgate/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", module+"internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 5 {
		t.Fatalf("go list named only %q; expected every package under internal/", lines)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) && !strings.HasPrefix(imp, module+"internal/") {
				t.Errorf("%s imports %s, a package outside internal/", fields[0], imp)
			}
		}
	}
}
