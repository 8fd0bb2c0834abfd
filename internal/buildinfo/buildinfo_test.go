package buildinfo_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/taskgate/taskgate/internal/buildinfo"
)

func TestFrom(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "-trimpath", Value: "true"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "01f54f8c0ffee"},
		{Key: "vcs.time", Value: "2026-12-02T12:00:00Z"},
		{Key: "vcs.modified", Value: "false"},
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want buildinfo.Info
	}{
		{"no build information", nil,
			buildinfo.Info{Version: "dev", Revision: "unknown", Time: "unknown", GoVersion: "unknown"}},
		{"go test or go run: devel, no VCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			buildinfo.Info{Version: "dev", Revision: "unknown", Time: "unknown", GoVersion: "go1.26.8"}},
		{"a tagged release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs},
			buildinfo.Info{Version: "v1.2.0", Revision: "01f54f8c0ffee", Time: "2026-12-02T12:00:00Z", GoVersion: "go1.26.8"}},
		{"a checkout with changes", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Version: "v0.0.0-20261202120000-01f54f8c0ffe+dirty"},
			Settings: append(vcs[:4:4], debug.BuildSetting{Key: "vcs.modified", Value: "true"})},
			buildinfo.Info{Version: "v0.0.0-20261202120000-01f54f8c0ffe+dirty", Revision: "01f54f8c0ffee", Time: "2026-12-02T12:00:00Z", Modified: true, GoVersion: "go1.26.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildinfo.From(tc.bi); got != tc.want {
				t.Errorf("From = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := buildinfo.Info{Version: "v1.2.0", Revision: "abc", Time: "2026-12-02T12:00:00Z", Modified: true, GoVersion: "go1.26.8"}.String()
	want := "taskgate v1.2.0\ncommit:  abc (modified)\nbuilt:   2026-12-02T12:00:00Z\ngo:      go1.26.8\n"
	if got != want {
		t.Errorf("String =\n%s\nwant\n%s", got, want)
	}
}

// A test binary has build information, but no module version or commit.
func TestReadInTest(t *testing.T) {
	got := buildinfo.Read()
	if got.GoVersion != runtime.Version() || got.Version != "dev" {
		t.Errorf("Read = %+v, want version dev built by %s", got, runtime.Version())
	}
}
