//go:build linux

package cpu

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times (USER_HZ), 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// Of is the CPU time (user and system) process pid has used, or 0 when
// /proc does not tell.
func Of(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields
	// from after it. utime and stime are fields 14 and 15 of the line.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * clockTick
}

// Machine is the busy time of all cores together since boot (every
// state but idle, iowait and steal), or 0 when /proc does not tell.
func Machine() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0
		}
		// Fields: user nice system idle iowait irq softirq steal guest
		// guest_nice. Steal is time the host gave to someone else, and
		// guest time is already counted in user.
		switch i {
		case 3, 4, 7, 8, 9:
			continue
		}
		busy += n
	}
	return time.Duration(busy) * clockTick
}
