package main

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/taskgate/taskgate/deploy/binary"
)

// TestImage builds the image for linux/amd64 (one platform: the program
// builds the others the same way), reads its configuration back from both
// the docker load tarball and the OCI layout, and runs the binary taken out
// of its layer.
func TestImage(t *testing.T) {
	out := t.TempDir()
	var log strings.Builder
	target := binary.Target{OS: "linux", Arch: "amd64"}
	if err := build(context.Background(), "../..", out, "taskgate", []binary.Target{target}, &log); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(filepath.Join(out, "taskgate-linux-amd64.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	version := c.Labels["org.opencontainers.image.version"]
	if cf.OS != "linux" || cf.Architecture != "amd64" || c.User != "65532:65532" ||
		strings.Join(c.Entrypoint, " ") != "/taskgate" || c.WorkingDir != "/data" {
		t.Errorf("config: os %s arch %s user %q entrypoint %q workdir %q, want linux amd64 65532:65532 /taskgate /data",
			cf.OS, cf.Architecture, c.User, c.Entrypoint, c.WorkingDir)
	}
	if _, ok := c.ExposedPorts["8931/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want only 8931/tcp", c.ExposedPorts)
	}
	if _, ok := c.Volumes["/data"]; !ok || len(c.Volumes) != 1 {
		t.Errorf("volumes %v, want only /data", c.Volumes)
	}
	if version == "" || c.Labels["org.opencontainers.image.source"] != "https://github.com/taskgate/taskgate" || c.Labels["org.opencontainers.image.title"] != "taskgate" {
		t.Errorf("labels %v, want the version, the source and the title", c.Labels)
	}
	// A checkout git can read gives the commit; one it cannot gives none,
	// and then the label is left out rather than said to be "unknown".
	if rev, ok := c.Labels["org.opencontainers.image.revision"]; ok && len(rev) != 40 {
		t.Errorf("revision label %q, want a commit hash", rev)
	}

	// The OCI layout holds the same image under one index tagged with the version.
	p, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Manifests) != 1 || rm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tag(version) {
		t.Fatalf("the layout's index.json = %+v, want one index tagged %s", rm.Manifests, tag(version))
	}
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// The tarball keeps the config and layers, not the manifest: compare configs.
	want, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.OS != "linux" || im.Manifests[0].Platform.Architecture != "amd64" {
		t.Fatalf("the image index = %+v, want one linux/amd64 image", im.Manifests)
	}
	li, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := li.ConfigName(); err != nil || got != want {
		t.Fatalf("the layout's image has config %s (%v), the tarball's %s", got, err, want)
	}

	// The files: the binary, and /data owned by the user the image runs as.
	bin := filepath.Join(t.TempDir(), "taskgate")
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	seen := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[strings.TrimSuffix(h.Name, "/")] = h
		if h.Name == "taskgate" {
			f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := seen["data"]; d == nil || d.Typeflag != tar.TypeDir || d.Uid != 65532 || d.Gid != 65532 || d.Mode != 0o700 {
		t.Errorf("/data = %+v, want a directory 0700 owned by 65532:65532", d)
	}
	if h := seen["taskgate"]; h == nil || h.Mode != 0o755 {
		t.Fatalf("/taskgate = %+v, want an executable file", h)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the image's linux/amd64 binary cannot run on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	got, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("the image's taskgate version: %v\n%s", err, got)
	}
	if !strings.HasPrefix(string(got), "taskgate "+version+"\n") || !strings.Contains(string(got), "go:      "+runtime.Version()+"\n") {
		t.Errorf("the image's taskgate version printed\n%s\nwant taskgate %s, built by %s", got, version, runtime.Version())
	}
}

func TestParsePlatforms(t *testing.T) {
	got, err := parsePlatforms("linux/amd64, linux/arm64")
	if err != nil || len(got) != 2 || got[0] != (binary.Target{OS: "linux", Arch: "amd64"}) || got[1] != (binary.Target{OS: "linux", Arch: "arm64"}) {
		t.Errorf("parsePlatforms = %v, %v", got, err)
	}
	for _, bad := range []string{"darwin/arm64", "amd64", "linux/", ""} {
		if _, err := parsePlatforms(bad); err == nil {
			t.Errorf("parsePlatforms(%q) accepted it", bad)
		}
	}
}

func TestTag(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.0": "v1.2.0",
		"v0.0.0-20261202120000-01f54f8c0ffe+dirty": "v0.0.0-20261202120000-01f54f8c0ffe-dirty",
		"dev": "dev",
	} {
		if got := tag(in); got != want {
			t.Errorf("tag(%q) = %q, want %q", in, got, want)
		}
	}
}
