package postgres

import (
	"context"
	"io/fs"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger/storetest"
)

func TestMigrations(t *testing.T) {
	storetest.ExerciseMigrations(t, func(t *testing.T) storetest.Ledger {
		s, err := Open(context.Background(), pgtest.Schema(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fsys, err := fs.Sub(migrations, "migrations")
		if err != nil {
			t.Fatal(err)
		}
		db := stdlib.OpenDBFromPool(s.Pool())
		t.Cleanup(func() { db.Close() })
		return storetest.Ledger{Store: s, DB: db, Dialect: goose.DialectPostgres, Migrations: fsys, Now: "now()"}
	})
}
