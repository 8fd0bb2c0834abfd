package daemon_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServingDoesNotDependOnTheSimulatedWorld: the daemon's wiring and
// everything it imports never reach the simulated provider, the fixtures
// or the demo, which live under internal/sim for trying taskgate out and
// testing it.
func TestServingDoesNotDependOnTheSimulatedWorld(t *testing.T) {
	const sim = "github.com/taskgate/taskgate/internal/sim/"
	out, err := exec.Command("go", "list", "-deps", "github.com/taskgate/taskgate/internal/daemon").CombinedOutput()
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
