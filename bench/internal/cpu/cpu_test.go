package cpu

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// Work done by this process shows in Self and, on Linux, in Of(its pid)
// and Machine; /proc counts in ticks of 10ms.
func TestWorkShows(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Of and Machine read /proc")
	}
	self0, of0, machine0 := Self(), Of(os.Getpid()), Machine()
	deadline := time.Now().Add(time.Minute)
	x := 1
	for Self()-self0 < 100*time.Millisecond || Of(os.Getpid())-of0 < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("a minute of work: Self grew %s, Of %s; want at least 100ms and 50ms", Self()-self0, Of(os.Getpid())-of0)
		}
		for i := range 1_000_000 {
			x = x*31 + i
		}
	}
	if Machine() <= machine0 {
		t.Errorf("Machine did not grow while this process worked (%d)", x)
	}
	if Of(-1) != 0 {
		t.Errorf("Of a process that does not exist = %s, want 0", Of(-1))
	}
}
