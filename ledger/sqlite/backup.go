package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
)

// Backup copies the ledger to path with VACUUM INTO, a read transaction:
// the copy is one consistent snapshot of the WAL, and writers go on while
// it is taken. The copy is synced and then opened read-only and checked
// (integrity_check, and the schema version the ledger had) before Backup
// reports it; a copy that fails a check is removed.
func (s *Store) Backup(ctx context.Context, path string) (*ledger.Backup, error) {
	if path == "" {
		return nil, errors.New("the backup file is not named; give --out FILE")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("backup file %s: %w", path, err)
	}
	if _, err := os.Lstat(abs); err == nil {
		return nil, fmt.Errorf("backup file %s exists; name a new file, a backup never overwrites one", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("backup file %s: %w", path, err)
	}
	// A connection of its own: the read pool's are query-only, which
	// SQLite applies to VACUUM INTO's output too, and the write
	// connection would hold every writer back for the whole copy. The
	// version is read on it just before the copy; only a migration
	// changes it.
	db, err := sql.Open("sqlite", "file:"+s.drv.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("open the ledger %s for backup: %w", s.drv.path, err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open the ledger %s for backup: %w", s.drv.path, err)
	}
	defer conn.Close()
	version, err := schemaVersion(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("read the schema version of the ledger %s: %w", s.drv.path, err)
	}
	// An absolute path never reads as a "file:" URI, whatever it holds.
	// The copy gives deleted rows' space back on its own schedule
	// whatever the ledger was created with: restoring a backup converts
	// an older ledger.
	if _, err := conn.ExecContext(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
		return nil, fmt.Errorf("prepare the backup of the ledger %s: %w", s.drv.path, err)
	}
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", abs); err != nil {
		_ = os.Remove(abs)
		return nil, fmt.Errorf("copy the ledger %s to %s: %w", s.drv.path, path, err)
	}
	b, err := checkBackup(ctx, abs, version)
	if err != nil {
		_ = os.Remove(abs)
		return nil, fmt.Errorf("backup %s of the ledger %s: %w; it was removed", path, s.drv.path, err)
	}
	b.Path = path
	return b, nil
}

// checkBackup syncs the copy at path and its directory, then opens it
// read-only and checks that SQLite finds it whole and that it is at
// version.
func checkBackup(ctx context.Context, path string, version int64) (*ledger.Backup, error) {
	if err := syncFile(path); err != nil {
		return nil, err
	}
	if err := syncFile(filepath.Dir(path)); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=query_only(1)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var integrity string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check(1)").Scan(&integrity); err != nil {
		return nil, fmt.Errorf("check its integrity: %w", err)
	}
	if integrity != "ok" {
		return nil, fmt.Errorf("SQLite finds it damaged: %s", integrity)
	}
	got, err := schemaVersion(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("read its schema version: %w", err)
	}
	if got != version {
		return nil, fmt.Errorf("it is at schema version %d, the ledger at %d", got, version)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return &ledger.Backup{Bytes: info.Size(), SchemaVersion: got}, nil
}

// schemaVersion reads the newest ledger migration applied.
func schemaVersion(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version_id), 0) FROM "+sqlstore.SchemaVersionTable+" WHERE is_applied").Scan(&v)
	return v, err
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}
