package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/ledger/storetest"
)

// template is a migrated, empty ledger that each test copies: migrating
// once keeps the suite fast under the race detector.
var template string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "taskgate-sqlite-test")
	if err != nil {
		panic(err)
	}
	template = filepath.Join(dir, "template.db")
	s, err := sqlite.Open(context.Background(), template, nil)
	if err != nil {
		panic(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		panic(err)
	}
	s.Close()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func newStore(t *testing.T) ledger.Store {
	t.Helper()
	return openCopy(t, 1)[0]
}

// openCopy opens n stores on one new copy of the template, each with a
// connection pool of its own.
func openCopy(t *testing.T, n int) []ledger.Store {
	t.Helper()
	path := copyTemplate(t)
	stores := make([]ledger.Store, n)
	for i := range stores {
		s, err := sqlite.Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	return stores
}

// copyTemplate returns the path of a new copy of the template.
func copyTemplate(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStore(t *testing.T) {
	storetest.Exercise(t, newStore)
}

// TestChain runs the hash chain contract; its tests change rows directly
// through the write connection.
func TestChain(t *testing.T) {
	storetest.ExerciseChain(t, func(t *testing.T) storetest.Ledger {
		s := newStore(t).(*sqlite.Store)
		return storetest.Ledger{Store: s, DB: s.DB()}
	})
}

// TestReplicas runs the contract's replica part on one file that two
// processes' worth of stores open.
func TestReplicas(t *testing.T) {
	storetest.ExerciseReplicas(t, openCopy)
}

func TestOpenRejectsCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not-a-db")
	if err := os.WriteFile(path, []byte(strings.Repeat("this is not sqlite\n", 400)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(context.Background(), path, nil)
	if err == nil || !strings.Contains(err.Error(), "not a SQLite database") {
		t.Fatalf("Open(corrupt) error = %v, want one naming a non-SQLite file", err)
	}
}

func TestOpenRejectsMissingDirectory(t *testing.T) {
	_, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "missing", "ledger.db"), nil)
	if err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("Open(missing dir) error = %v", err)
	}
}

func TestMigrateTwiceIsHarmless(t *testing.T) {
	s := newStore(t)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
}

func TestDurableSettings(t *testing.T) {
	s := newStore(t).(*sqlite.Store)
	var sync int
	if err := s.DB().QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if sync != 2 { // FULL
		t.Fatalf("synchronous = %d, want 2 (FULL)", sync)
	}
}
