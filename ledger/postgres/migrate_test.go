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

// Operations accepted before migration 00005 had their policy facts in an
// accepted event; the migration copies them onto the operation.
func TestMigrationCopiesAcceptancePolicy(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.Schema(t), nil)
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
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithTableName("taskgate_schema_version"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, q := range storetest.AcceptedBefore00005("now()") {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckAcceptancePolicyCopied(t, s)
}
