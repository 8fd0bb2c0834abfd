package sqlite

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/taskgate/taskgate/ledger/storetest"
)

func TestMigrations(t *testing.T) {
	storetest.ExerciseMigrations(t, func(t *testing.T) storetest.Ledger {
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fsys, err := fs.Sub(migrations, "migrations")
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Ledger{Store: s, DB: s.DB(), Dialect: goose.DialectSQLite3, Migrations: fsys, Now: "0"}
	})
}
