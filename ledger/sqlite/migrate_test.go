package sqlite

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/taskgate/taskgate/ledger"
)

// Operations accepted before migration 00005 had their policy facts in an
// accepted event; the migration copies them onto the operation.
func TestMigrationCopiesAcceptancePolicy(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.DB(), fsys, goose.WithTableName("taskgate_schema_version"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO operations (id, tenant, operation_id, task_id, upstream, tool, fingerprint, arguments, state, created_at, updated_at)
			VALUES (1, 'acme', 'op-priced', 'task-1', 'hosted_test', 'run_suite', 'fp', '{}', 'completed', 0, 0),
			       (2, 'acme', 'op-plain', 'task-2', 'hosted_test', 'run_suite', 'fp', '{}', 'completed', 0, 0)`,
		`INSERT INTO events (operation_ref, kind, data, created_at) VALUES
			(1, 'accepted', '{"approval":0,"priced":true,"request_id":"req-1","secret_arguments":["token","key"]}', 0),
			(2, 'accepted', '{"approval":0,"priced":false,"request_id":"req-2"}', 0)`,
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		id     int64
		priced bool
		secret []string
	}{{1, true, []string{"token", "key"}}, {2, false, nil}} {
		op, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: want.id})
		if err != nil {
			t.Fatal(err)
		}
		if op.Priced != want.priced || !slices.Equal(op.SecretArguments, want.secret) {
			t.Errorf("operation %d: priced %v, secret %q; want %v, %q", want.id, op.Priced, op.SecretArguments, want.priced, want.secret)
		}
	}
}
