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

func TestMigrationCopiesAcceptancePolicy(t *testing.T) {
	s, err := Open(context.Background(), pgtest.Schema(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(s.Pool())
	defer db.Close()
	storetest.MigrationCopiesAcceptancePolicy(t, storetest.Ledger{Store: s, DB: db, Dialect: goose.DialectPostgres, Migrations: fsys, Now: "now()"})
}
