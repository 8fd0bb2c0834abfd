// Package buildinfo says what this binary is: its module version, the commit
// it was built from and that commit's time, whether the tree had local
// changes, and the Go version. It reads only what the Go toolchain stamps
// into every binary (runtime/debug), so a release is described by how it was
// built; it must never hold values of its own set at link time.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Unknown stands for a field the build did not record: a binary built
// with -buildvcs=false, or by go test, has no commit.
const Unknown = "unknown"

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the main module's version: a tag (v1.2.0), a pseudo-version
	// for an untagged commit (with +dirty when the tree had changes), or
	// "dev" when the build recorded none.
	Version string
	// Revision is the commit, Time its commit time (RFC 3339).
	Revision, Time string
	// Modified is true when the tree had uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read is this binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return From(nil)
	}
	return From(bi)
}

// From reads an Info out of bi; nil gives an Info of unknowns.
func From(bi *debug.BuildInfo) Info {
	info := Info{Version: "dev", Revision: Unknown, Time: Unknown, GoVersion: Unknown}
	if bi == nil {
		return info
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				info.Revision = s.Value
			}
		case "vcs.time":
			if s.Value != "" {
				info.Time = s.Value
			}
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the account `taskgate version` prints, one field a line.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "taskgate %s\n", i.Version)
	rev := i.Revision
	if i.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(&b, "commit:  %s\n", rev)
	fmt.Fprintf(&b, "built:   %s\n", i.Time)
	fmt.Fprintf(&b, "go:      %s\n", i.GoVersion)
	return b.String()
}
