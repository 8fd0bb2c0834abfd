package profile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartWritesBothProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "run.trace")
	stop, err := Start(cpu, tr)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stop()
	for _, path := range []string{cpu, tr} {
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("%s after stop: %v, %v; want a non-empty file", filepath.Base(path), st, err)
		}
	}
}

func TestStartFailureLeavesNothingRunning(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "missing", "run.trace"))
	if err == nil || !strings.Contains(err.Error(), "create execution trace") {
		t.Fatalf("Start with an unwritable trace = %v, want an error naming the trace", err)
	}
	// The CPU profile it had started must be stopped again, or this one
	// could not start.
	stop, err := Start(filepath.Join(dir, "again.pprof"), "")
	if err != nil {
		t.Fatalf("Start after a failed Start: %v", err)
	}
	stop()
}

func TestStartWithoutPathsDoesNothing(t *testing.T) {
	stop, err := Start("", "")
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

func TestWriteAllocs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allocs.pprof")
	if err := WriteAllocs(path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Errorf("allocation profile: %v, %v; want a non-empty file", st, err)
	}
	if err := WriteAllocs(filepath.Join(t.TempDir(), "missing", "allocs.pprof")); err == nil {
		t.Error("WriteAllocs into a missing directory succeeded, want an error")
	}
}
