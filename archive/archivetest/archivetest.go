// Package archivetest holds what tests and benchmarks of archives share: a
// ledger filled with ended, reconciled operations whose receipts are
// issued ([Fill]), and a way to change an archive file's content in place,
// as someone tampering with it would. It is never imported by the gateway.
package archivetest

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"
)

// RewriteGzip replaces the uncompressed content of the gzip file at path
// by what edit makes of it; an edit that changes nothing fails the test.
func RewriteGzip(t testing.TB, path string, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	edited := edit(string(plain))
	if edited == string(plain) {
		t.Fatal("the edit changed nothing")
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(edited)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}
