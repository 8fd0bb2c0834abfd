//go:build crashpoints && unix

package crashpoint

import (
	"fmt"
	"os"
	"syscall"
)

// Reach stops the whole process at the point named by TASKGATE_CRASHPOINT,
// after announcing it on stderr, so that a crash test can kill it there.
// The process stops with SIGSTOP rather than one goroutine blocking: a
// crash stops everything at once, and the worker must not go on (send,
// say) in the moments before the test's SIGKILL arrives.
func Reach(name string) {
	if os.Getenv("TASKGATE_CRASHPOINT") != name {
		return
	}
	fmt.Fprintf(os.Stderr, "CRASHPOINT %s\n", name)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	select {}
}
