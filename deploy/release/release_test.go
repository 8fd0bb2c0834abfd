package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestDebVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.0":                             "1.2.0",
		"v1.3.0-rc.1":                        "1.3.0~rc.1",
		"v0.0.0-20261202113643-01f54f84c8de": "0.0.0~20261202113643.01f54f84c8de",
		"v0.0.0-20261202113643-01f54f84c8de+dirty": "0.0.0~20261202113643.01f54f84c8de+dirty",
		"dev": "0.0.0~dev",
	} {
		if got := debVersion(in); got != want {
			t.Errorf("debVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestChecksums checks that sha256sum -c accepts the SHA256SUMS written,
// and rejects it once a file changes.
func TestChecksums(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum on this machine")
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"b.tar.gz": "bee", "a.deb": "ay"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sums, err := checksums(dir, []string{"b.tar.gz", "a.deb"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	check := exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.deb"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	check = exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = dir
	if out, err := check.CombinedOutput(); err == nil {
		t.Fatalf("sha256sum -c accepted a changed file:\n%s", out)
	}
}
