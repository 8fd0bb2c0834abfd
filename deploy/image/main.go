// Command image builds taskgate's container image without a Docker daemon
// and without pulling a base image: the static, self-contained binary (see
// deploy/binary) on an empty base, as a numeric non-root user, with /data
// as the ledger's volume. It writes an OCI image layout holding every
// platform's image under one index, and for each platform a tarball that
// docker load reads. It is never part of the gateway binary.
//
//	go run ./deploy/image -out dist/image
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/taskgate/taskgate/deploy/binary"
	"github.com/taskgate/taskgate/internal/buildinfo"
)

const (
	// uid and gid run the gateway: not root, and numeric so that a
	// cluster's runAsNonRoot can check it without a passwd lookup.
	uid = 65532
	gid = 65532
	// port is the listener's default port (config: listen).
	port = "8931/tcp"
	// source is where the image's code lives (org.opencontainers.image.source).
	source = "https://github.com/taskgate/taskgate"
	// dataDir holds the SQLite ledger: the image's working directory, so
	// the default database sqlite:./taskgate.db lands on the volume.
	dataDir = "/data"
)

func main() {
	out := flag.String("out", "dist/image", "the directory to write the OCI layout (oci/) and the docker load tarballs into")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "the platforms to build, comma-separated OS/ARCH")
	repo := flag.String("repository", "taskgate", "the repository the tarballs tag the image as (REPOSITORY:VERSION)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	targets, err := parsePlatforms(*platforms)
	if err == nil {
		err = build(ctx, ".", *out, *repo, targets, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

// parsePlatforms reads the -platforms list.
func parsePlatforms(s string) ([]binary.Target, error) {
	var ts []binary.Target
	for _, p := range strings.Split(s, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || osName != "linux" || arch == "" {
			return nil, fmt.Errorf("-platforms: %q is not linux/ARCH (the image runs Linux binaries only), e.g. linux/amd64", p)
		}
		ts = append(ts, binary.Target{OS: osName, Arch: arch})
	}
	return ts, nil
}

// build makes one image per target from the module in dir and writes them
// to out: out/oci (one index) and out/taskgate-OS-ARCH.tar each.
func build(ctx context.Context, dir, out, repo string, targets []binary.Target, log io.Writer) error {
	tmp, err := os.MkdirTemp("", "taskgate-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var version string
	for _, t := range targets {
		bin := filepath.Join(tmp, t.OS+"-"+t.Arch, "taskgate")
		bi, err := binary.Build(ctx, dir, "./cmd/taskgate", t, bin)
		if err != nil {
			return err
		}
		info := buildinfo.From(bi)
		version = info.Version
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		img, err := image(b, info, t)
		if err != nil {
			return fmt.Errorf("assemble the image for %s: %w", t, err)
		}
		ref, err := name.NewTag(repo + ":" + tag(info.Version))
		if err != nil {
			return fmt.Errorf("-repository %q: %w", repo, err)
		}
		file := filepath.Join(out, "taskgate-"+t.OS+"-"+t.Arch+".tar")
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if err := tarball.WriteToFile(file, ref, img); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
		fmt.Fprintf(log, "%s: %s (docker load -i %s)\n", t, ref, file)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: t.OS, Architecture: t.Arch},
		}})
	}
	oci := filepath.Join(out, "oci")
	if err := os.RemoveAll(oci); err != nil {
		return err
	}
	p, err := layout.Write(oci, empty.Index)
	if err != nil {
		return fmt.Errorf("write the OCI layout %s: %w", oci, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag(version)})); err != nil {
		return fmt.Errorf("write the OCI layout %s: %w", oci, err)
	}
	fmt.Fprintf(log, "OCI layout: %s (tag %s)\n", oci, tag(version))
	return nil
}

var notInTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// tag is the image tag for a module version: a pseudo-version's +dirty
// becomes -dirty, since a tag cannot hold a plus sign.
func tag(version string) string { return notInTag.ReplaceAllString(version, "-") }

// image assembles the image of one platform around the taskgate binary bin.
func image(bin []byte, info buildinfo.Info, t binary.Target) (v1.Image, error) {
	created := created(info)
	files, err := rootfs(bin, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(base, configFile(info, t, created))
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "go run ./deploy/image", Comment: "taskgate " + info.Version,
	}})
	if err != nil {
		return nil, err
	}
	return img, nil
}

// created is when the image is said to be made: its commit's time, so that
// two builds of one commit give one image; the Unix epoch without one.
func created(info buildinfo.Info) time.Time {
	if t, err := time.Parse(time.RFC3339, info.Time); err == nil {
		return t.UTC()
	}
	return time.Unix(0, 0).UTC()
}

// configFile is the image's configuration: what runs, as whom, where, and
// the labels that say what it is.
func configFile(info buildinfo.Info, t binary.Target, created time.Time) *v1.ConfigFile {
	labels := map[string]string{
		"org.opencontainers.image.title":       "taskgate",
		"org.opencontainers.image.description": "A durable MCP gateway for paid and consequential tool calls",
		"org.opencontainers.image.version":     info.Version,
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	if info.Revision != buildinfo.Unknown {
		labels["org.opencontainers.image.revision"] = info.Revision
	}
	return &v1.ConfigFile{
		Architecture: t.Arch,
		OS:           t.OS,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:         fmt.Sprintf("%d:%d", uid, gid),
			Entrypoint:   []string{"/taskgate"},
			Cmd:          []string{"serve", "--config", "/etc/taskgate/taskgate.yaml"},
			WorkingDir:   dataDir,
			Env:          []string{"PATH=/"},
			ExposedPorts: map[string]struct{}{port: {}},
			Volumes:      map[string]struct{}{dataDir: {}},
			Labels:       labels,
			StopSignal:   "SIGTERM",
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}

// rootfs is the image's one layer: the binary, the user it runs as, the
// ledger's directory owned by that user, and a /tmp for the control socket.
func rootfs(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	passwd := fmt.Sprintf("root:x:0:0:root:/:/sbin/nologin\ntaskgate:x:%d:%d:taskgate:%s:/sbin/nologin\n", uid, gid, dataDir)
	group := fmt.Sprintf("root:x:0:\ntaskgate:x:%d:\n", gid)
	entries := []struct {
		name     string
		mode     int64
		uid, gid int
		body     []byte
		dir      bool
	}{
		{name: "data/", mode: 0o700, uid: uid, gid: gid, dir: true},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/taskgate/", mode: 0o755, dir: true},
		{name: "taskgate", mode: 0o755, body: bin},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
