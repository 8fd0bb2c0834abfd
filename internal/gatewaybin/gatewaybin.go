// Package gatewaybin builds the taskgate command, as shipped (pure Go),
// for tests that run it as a process of their own. It holds no test logic
// and imports nothing of this module.
package gatewaybin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build compiles the command in cmdDir (cmd/taskgate, as a path from the
// calling test's package) into a new temporary directory named after
// pattern. remove deletes the directory; it is a no-op after an error.
func Build(cmdDir, pattern string) (binary string, remove func(), err error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", func() {}, err
	}
	remove = func() { os.RemoveAll(dir) }
	binary = filepath.Join(dir, "taskgate")
	build := exec.Command("go", "build", "-o", binary, cmdDir)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		remove()
		return "", func() {}, fmt.Errorf("build %s: %w\n%s", cmdDir, err, out)
	}
	return binary, remove, nil
}
