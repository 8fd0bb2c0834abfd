// Package profile records the profiles a benchmark program's flags ask for
// over its whole run: a CPU profile, a runtime execution trace and an
// allocation profile. It writes only the files it is given and must never
// change what is measured beyond the profilers' own cost.
package profile

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// Start starts a CPU profile written to cpuPath and an execution trace
// written to tracePath, each only when its path is not empty. The function
// it returns stops both and closes their files; on an error nothing is left
// running.
func Start(cpuPath, tracePath string) (_ func(), err error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stopAll()
		}
	}()
	for _, p := range []struct {
		path, what string
		start      func(io.Writer) error
		stop       func()
	}{
		{cpuPath, "CPU profile", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{tracePath, "execution trace", trace.Start, trace.Stop},
	} {
		if p.path == "" {
			continue
		}
		f, err := os.Create(p.path)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", p.what, err)
		}
		stops = append(stops, func() { f.Close() })
		if err := p.start(f); err != nil {
			return nil, fmt.Errorf("start %s: %w", p.what, err)
		}
		stops = append(stops, p.stop)
	}
	return stopAll, nil
}

// WriteAllocs writes the allocation profile of the run so far to path.
func WriteAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create allocation profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write allocation profile: %w", err)
	}
	return f.Close()
}
