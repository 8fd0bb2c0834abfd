package storetest

import (
	"context"
	"database/sql"
	"io/fs"
	"slices"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/taskgate/taskgate/ledger"
)

// Ledger is a store with the database handle its migrations run on.
type Ledger struct {
	Store ledger.Store
	DB    *sql.DB
	// Dialect and Migrations are the store's goose dialect and migration
	// files.
	Dialect    goose.Dialect
	Migrations fs.FS
	// Now is the dialect's SQL for a creation time.
	Now string
}

// MigrationCopiesAcceptancePolicy checks migration 00005 on l's fresh,
// unmigrated ledger: operations accepted before it kept whether their tool
// is priced and which arguments are secret in accepted events; the
// migration copies both onto the operations.
func MigrationCopiesAcceptancePolicy(t *testing.T, l Ledger) {
	t.Helper()
	ctx := context.Background()
	p, err := goose.NewProvider(l.Dialect, l.DB, l.Migrations, goose.WithTableName("taskgate_schema_version"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO operations (id, tenant, operation_id, task_id, upstream, tool, fingerprint, arguments, state, created_at, updated_at)
			VALUES (1, 'acme', 'op-priced', 'task-1', 'hosted_test', 'run_suite', 'fp', '{}', 'completed', ` + l.Now + `, ` + l.Now + `),
			       (2, 'acme', 'op-plain', 'task-2', 'hosted_test', 'run_suite', 'fp', '{}', 'completed', ` + l.Now + `, ` + l.Now + `)`,
		`INSERT INTO events (operation_ref, kind, data, created_at) VALUES
			(1, 'accepted', '{"approval":0,"priced":true,"request_id":"req-1","secret_arguments":["token","key"]}', ` + l.Now + `),
			(2, 'accepted', '{"approval":0,"priced":false,"request_id":"req-2"}', ` + l.Now + `)`,
	} {
		if _, err := l.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		id     int64
		priced bool
		secret []string
	}{{1, true, []string{"token", "key"}}, {2, false, nil}} {
		op, err := l.Store.OperationGet(ctx, &ledger.OperationGetParams{ID: want.id})
		if err != nil {
			t.Fatal(err)
		}
		if op.Priced != want.priced || !slices.Equal(op.SecretArguments, want.secret) {
			t.Errorf("operation %d: priced %v, secret %q; want %v, %q", want.id, op.Priced, op.SecretArguments, want.priced, want.secret)
		}
	}
}
