package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// TestIncrementalVacuumGivesSpaceBack: a new ledger is created with
// incremental auto_vacuum, and the pages that deleted rows free are given
// back on the store's schedule.
func TestIncrementalVacuumGivesSpaceBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), &sqlite.Options{VacuumEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db := s.DB()
	if mode := pragma(t, db, "auto_vacuum"); mode != 2 {
		t.Fatalf("auto_vacuum = %d, want 2 (incremental)", mode)
	}
	for _, q := range []string{
		"CREATE TABLE filler (b blob)",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO filler SELECT randomblob(4000) FROM n",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	full := pragma(t, db, "page_count")
	if _, err := db.ExecContext(ctx, "DROP TABLE filler"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, ctx, "the 500 pages dropped to be given back", func() (bool, error) {
		return pragma(t, db, "page_count") <= full-500 && pragma(t, db, "freelist_count") == 0, nil
	})
}

// TestBackupTurnsOnIncrementalVacuum: the backup of a ledger created
// without auto_vacuum has it, so restoring it converts the ledger.
func TestBackupTurnsOnIncrementalVacuum(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=auto_vacuum(none)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, "CREATE TABLE created_before (x)"); err != nil {
		t.Fatal(err)
	}
	if mode := pragma(t, old, "auto_vacuum"); mode != 0 {
		t.Fatalf("the old ledger's auto_vacuum = %d, want 0", mode)
	}
	old.Close()
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if mode := pragma(t, s.DB(), "auto_vacuum"); mode != 0 {
		t.Fatalf("opening changed the old ledger's auto_vacuum to %d; only a VACUUM can", mode)
	}
	out := filepath.Join(t.TempDir(), "ledger.backup")
	if _, err := s.Backup(ctx, out); err != nil {
		t.Fatal(err)
	}
	b, err := sql.Open("sqlite", "file:"+out+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if mode := pragma(t, b, "auto_vacuum"); mode != 2 {
		t.Fatalf("the backup's auto_vacuum = %d, want 2 (incremental)", mode)
	}
}

func pragma(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow("PRAGMA " + name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}
