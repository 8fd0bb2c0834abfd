// Command release builds taskgate's release into one directory: a .tar.gz
// archive per platform (linux and darwin, amd64 and arm64), a Debian
// package per Linux architecture (with -nfpm), a CycloneDX SBOM of the
// shipped binary's modules (with -cyclonedx), and SHA256SUMS over all of
// them, which sha256sum -c checks. make release runs it with the pinned
// tools (deploy/tool). It is never part of the gateway binary.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/deploy/binary"
	"github.com/taskgate/taskgate/internal/buildinfo"
)

// targets are the platforms a release ships for.
var targets = []binary.Target{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}, {OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}}

// extras are the files every archive carries beside the binary.
var extras = []string{"README.md", "config/taskgate.example.yaml", "docs/install.md"}

func main() {
	out := flag.String("out", "dist", "the directory the release is written into; an earlier release there is removed, other files (make image's image/) stay")
	nfpm := flag.String("nfpm", "", "the nfpm binary (deploy/tool nfpm); unset: no Debian packages")
	cyclonedx := flag.String("cyclonedx", "", "the cyclonedx-gomod binary (deploy/tool cyclonedx-gomod); unset: no SBOM")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := release(ctx, *out, *nfpm, *cyclonedx); err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

func release(ctx context.Context, out, nfpm, cyclonedx string) error {
	if err := clean(out); err != nil {
		return err
	}
	work := filepath.Join(out, ".build")
	var files []string
	for _, t := range targets {
		bin := filepath.Join(work, t.OS+"-"+t.Arch, "taskgate")
		bi, err := binary.Build(ctx, ".", "./cmd/taskgate", t, bin)
		if err != nil {
			return err
		}
		info := buildinfo.From(bi)
		name := fmt.Sprintf("taskgate_%s_%s_%s.tar.gz", info.Version, t.OS, t.Arch)
		if err := archive(filepath.Join(out, name), bin, info); err != nil {
			return fmt.Errorf("archive %s: %w", name, err)
		}
		files = append(files, name)
		fmt.Println(name)
		if t.OS == "linux" && nfpm != "" {
			deb, err := debian(ctx, nfpm, out, bin, t, info)
			if err != nil {
				return err
			}
			files = append(files, deb)
			fmt.Println(deb)
		}
		if t.OS == "linux" && t.Arch == "amd64" && cyclonedx != "" {
			sbom := fmt.Sprintf("taskgate_%s.cdx.json", info.Version)
			// The SBOM lists what the shipped binary was built from, read
			// out of its own build information.
			cmd := exec.CommandContext(ctx, cyclonedx, "bin", "-json", "-output", filepath.Join(out, sbom), bin)
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("SBOM: %s: %w\n%s", cyclonedx, err, b)
			}
			files = append(files, sbom)
			fmt.Println(sbom)
		}
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	sums, err := checksums(out, files)
	if err != nil {
		return err
	}
	fmt.Println("SHA256SUMS")
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums), 0o644)
}

// clean removes an earlier release from out: its archives, packages,
// SBOM and checksums.
func clean(out string) error {
	old, err := filepath.Glob(filepath.Join(out, "taskgate_*"))
	if err != nil {
		return err
	}
	for _, f := range append(old, filepath.Join(out, "SHA256SUMS"), filepath.Join(out, ".build")) {
		if err := os.RemoveAll(f); err != nil {
			return err
		}
	}
	return nil
}

// archive writes bin and the extras into a .tar.gz under taskgate/, with
// the commit's time on every entry so that one commit gives one archive.
func archive(path, bin string, info buildinfo.Info) error {
	mtime := time.Unix(0, 0).UTC()
	if t, err := time.Parse(time.RFC3339, info.Time); err == nil {
		mtime = t
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	add := func(src, name string, mode int64) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: "taskgate/" + name, Mode: mode, Size: int64(len(b)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	}
	if err := add(bin, "taskgate", 0o755); err != nil {
		return err
	}
	for _, x := range extras {
		if err := add(x, filepath.Base(x), 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// debian builds the Debian package of bin with nfpm from deploy/nfpm.yaml,
// which takes the binary from dist/.deb/taskgate.
func debian(ctx context.Context, nfpm, out, bin string, t binary.Target, info buildinfo.Info) (string, error) {
	staged := filepath.Join("dist", ".deb", "taskgate")
	if err := os.MkdirAll(filepath.Dir(staged), 0o755); err != nil {
		return "", err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(staged, b, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(filepath.Dir(staged))
	version := debVersion(info.Version)
	name := fmt.Sprintf("taskgate_%s_%s.deb", version, t.Arch)
	cmd := exec.CommandContext(ctx, nfpm, "package", "--config", "deploy/nfpm.yaml", "--packager", "deb", "--target", filepath.Join(out, name))
	cmd.Env = append(os.Environ(), "GOARCH="+t.Arch, "TASKGATE_DEB_VERSION="+version)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("Debian package for %s: %s: %w\n%s", t, nfpm, err, b)
	}
	return name, nil
}

// debVersion is a module version as Debian orders versions: without the v,
// and with a pre-release or pseudo-version suffix after ~, so that it sorts
// before the release it leads to.
func debVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	if v == "" || v[0] < '0' || v[0] > '9' {
		return "0.0.0~" + strings.ReplaceAll(v, "-", ".")
	}
	if i := strings.IndexByte(v, '-'); i >= 0 {
		v = v[:i] + "~" + strings.ReplaceAll(v[i+1:], "-", ".")
	}
	return v
}

// checksums is the SHA256SUMS text for files in dir, in the format
// sha256sum -c reads.
func checksums(dir string, files []string) (string, error) {
	slices.Sort(files)
	var b strings.Builder
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
	}
	return b.String(), nil
}
