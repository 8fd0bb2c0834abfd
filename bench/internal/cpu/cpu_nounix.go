//go:build !unix

package cpu

import "time"

// Self reports nothing where getrusage is unavailable.
func Self() time.Duration { return 0 }
