//go:build !unix

package main

import "time"

// processCPU reports nothing where getrusage is unavailable.
func processCPU() time.Duration { return 0 }
