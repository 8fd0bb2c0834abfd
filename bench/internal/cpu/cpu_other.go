//go:build !linux

package cpu

import "time"

// Of and Machine are read from /proc; elsewhere they are zero.
func Of(pid int) time.Duration { return 0 }
func Machine() time.Duration   { return 0 }
