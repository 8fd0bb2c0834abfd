//go:build crashpoints && !unix

package crashpoint

import (
	"fmt"
	"os"
)

// Reach blocks forever at the point named by TASKGATE_CRASHPOINT, after
// announcing it on stderr, so that a crash test can kill the process there.
// Without SIGSTOP the rest of the process goes on until it is killed.
func Reach(name string) {
	if os.Getenv("TASKGATE_CRASHPOINT") != name {
		return
	}
	fmt.Fprintf(os.Stderr, "CRASHPOINT %s\n", name)
	select {}
}
