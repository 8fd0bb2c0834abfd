// Package binary builds the taskgate command as it ships: static
// (CGO_ENABLED=0), with -tags selfcontained (time zone data and fallback
// CA roots compiled in), paths trimmed, and stamped with the commit it was
// built from, which taskgate version then prints. It is used by the programs
// that make the image and the release archives and is never part of the
// gateway binary.
package binary

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Target is a platform a binary is built for.
type Target struct {
	OS, Arch string
}

func (t Target) String() string { return t.OS + "/" + t.Arch }

// Build compiles the command in pkg (./cmd/taskgate, relative to dir, the
// module's root) for t into out, and returns the build information stamped
// into it.
func Build(ctx context.Context, dir, pkg string, t Target, out string) (*buildinfo.BuildInfo, error) {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	// -buildvcs=true on the command line wins over a -buildvcs=false in
	// GOFLAGS, and fails rather than ship a binary that cannot name its commit
	// when git is missing.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=true", "-tags", "selfcontained", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build taskgate for %s: %w\n%s", t, err, b)
	}
	bi, err := buildinfo.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("read the build information of %s: %w", out, err)
	}
	return bi, nil
}
