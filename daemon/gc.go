package daemon

import (
	"runtime/debug"
	"strconv"
)

// GCPercent is the garbage-collection target a gateway process runs with
// unless GOGC is set. The MCP SDK allocates a 32 KiB buffer for every
// message it decodes; with Go's default target of 100, a gateway's small
// live heap is then collected hundreds of times a second, and collection
// becomes the largest cost of a pass-through call. Memory use stays small
// either way: the live heap is what grows slowly, not the garbage.
const GCPercent = 400

// TuneGC applies GCPercent unless the environment sets GOGC, and returns
// the setting in effect, for display.
func TuneGC(getenv func(string) string) string {
	if v := getenv("GOGC"); v != "" {
		return v
	}
	debug.SetGCPercent(GCPercent)
	return strconv.Itoa(GCPercent) + " (taskgate's default)"
}
