//go:build crashpoints

package crashpoint

import (
	"fmt"
	"os"
)

// Reach stops the process at the point named by TASKGATE_CRASHPOINT, after
// announcing it on stderr, so that a crash test can kill it there. Where
// the system allows, the whole process stops (stopProcess) rather than the
// one goroutine: a crash stops everything at once, and the worker must not
// go on (send, say) in the moments before the test's SIGKILL arrives.
func Reach(name string) {
	if os.Getenv("TASKGATE_CRASHPOINT") != name {
		return
	}
	fmt.Fprintf(os.Stderr, "CRASHPOINT %s\n", name)
	stopProcess()
	select {}
}
