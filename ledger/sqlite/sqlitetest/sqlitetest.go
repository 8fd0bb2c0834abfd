// Package sqlitetest opens a fresh, migrated SQLite ledger for a test in
// the test's own temporary directory, closed when the test ends.
//
// It is test support: the gateway's serving code must never import it.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/taskgate/taskgate/ledger/sqlite"
)

// Open returns a migrated ledger in a new file under t.TempDir, closed by
// t's cleanup; it fails t if the ledger cannot be opened or migrated.
func Open(t testing.TB) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
