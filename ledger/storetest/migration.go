package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
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

// ExerciseMigrations runs the migration tests, each on a fresh, unmigrated
// ledger from newLedger.
func ExerciseMigrations(t *testing.T, newLedger func(t *testing.T) Ledger) {
	t.Run("CopiesAcceptancePolicy", func(t *testing.T) { t.Parallel(); migrationCopiesAcceptancePolicy(t, newLedger(t)) })
	t.Run("RefusesOlderBinaries", func(t *testing.T) { t.Parallel(); migrationRefusesOlderBinaries(t, newLedger(t)) })
	t.Run("RefusesNewerSchema", func(t *testing.T) { t.Parallel(); migrateRefusesNewerSchema(t, newLedger(t)) })
	t.Run("MarksPlaintextSecrets", func(t *testing.T) { t.Parallel(); migrationMarksPlaintextSecrets(t, newLedger(t)) })
	t.Run("RecordsRuns", func(t *testing.T) { t.Parallel(); migrationRecordsRuns(t, newLedger(t)) })
	t.Run("StartsChains", func(t *testing.T) { t.Parallel(); migrationStartsChains(t, newLedger(t)) })
	t.Run("KeepsDerivedProviderKeys", func(t *testing.T) { t.Parallel(); migrationKeepsDerivedProviderKeys(t, newLedger(t)) })
}

// migrationKeepsDerivedProviderKeys checks migration 00014: an operation
// accepted before it keeps the provider key it was sent with (derived
// from tenant, operation ID and row), so that a lookup after the upgrade
// still finds its job; one accepted after it gets a random key; and a
// binary older than it, which would store no key, may not accept.
func migrationKeepsDerivedProviderKeys(t *testing.T, l Ledger) {
	ctx := context.Background()
	migrateTo(t, l, 13)
	insert := func(id int) string {
		return fmt.Sprintf(`INSERT INTO operations (id, tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, retry_policy, estimate_micros, currency, ttl_ms, created_at, updated_at, intended_remote_jobs, priced, schema_version)
			VALUES (%d, 'acme', 'op-%d', 'task-%d', 'hosted_test', 'run_suite', 'fp', '{}', 'running', 'lookup_then_attach', 0, 'USD', 0, %s, %s, 1, false, 13)`,
			id, id, id, l.Now, l.Now)
	}
	if _, err := l.DB.ExecContext(ctx, insert(1001)); err != nil {
		t.Fatal(err)
	}
	if err := l.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := l.Store.OperationGet(ctx, &ledger.OperationGetParams{ID: 1001})
	if err != nil {
		t.Fatal(err)
	}
	derived := (&ledger.Operation{ID: 1001, Tenant: "acme", OperationID: "op-1001"}).ProviderKey()
	if old.StoredProviderKey != "" || old.ProviderKey() != derived {
		t.Errorf("operation accepted before the migration: stored key %q, provider key %q; want none stored and the derived %q",
			old.StoredProviderKey, old.ProviderKey(), derived)
	}
	fresh := accept(t, l.Store, params(t, call{"acme", "op-new", `{}`})).Operation
	if fresh.StoredProviderKey == "" || fresh.ProviderKey() == (&ledger.Operation{ID: fresh.ID, Tenant: "acme", OperationID: "op-new"}).ProviderKey() {
		t.Errorf("operation accepted after the migration has provider key %q, stored %q; want a random one stored", fresh.ProviderKey(), fresh.StoredProviderKey)
	}
	if _, err := l.DB.ExecContext(ctx, insert(1002)); err == nil || !strings.Contains(err.Error(), "older than the ledger schema (version 14)") {
		t.Errorf("a binary of schema 13 accepting after the migration: %v; want it refused as older than the ledger schema", err)
	}
}

// migrationStartsChains checks migration 00010: the events of operations
// accepted before it have no hash, so their chains start at the migration
// and say so; what is recorded after it is chained and verified, an
// operation accepted after it is chained from its creation, and a binary
// older than it can neither record an event of an operation nor accept
// one.
func migrationStartsChains(t *testing.T, l Ledger) {
	ctx := context.Background()
	migrateTo(t, l, 9)
	for _, q := range []string{
		`INSERT INTO operations (id, tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, retry_policy, estimate_micros, currency, ttl_ms, created_at, updated_at, intended_remote_jobs, priced, schema_version)
		VALUES (1001, 'acme', 'op-running', 'task-1', 'hosted_test', 'run_suite', 'fp', '{}', 'running', 'lookup_then_attach', 0, 'USD', 0, ` + l.Now + `, ` + l.Now + `, 1, false, 9),
		       (1002, 'acme', 'op-quiet', 'task-2', 'hosted_test', 'run_suite', 'fp', '{}', 'accepted', 'lookup_then_attach', 0, 'USD', 0, ` + l.Now + `, ` + l.Now + `, 1, false, 9)`,
		`INSERT INTO events (operation_ref, kind, data, created_at) VALUES
			(1001, 'send_started', '{"send":1,"worker":"w1"}', ` + l.Now + `),
			(1001, 'remote_job_bound', '{"remote_job_id":"job-1"}', ` + l.Now + `)`,
	} {
		if _, err := l.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Store.Transition(ctx, &ledger.TransitionParams{OperationRef: 1001, From: []ledger.State{ledger.StateRunning}, To: ledger.StateCompleted,
		Events: []ledger.EventParams{{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{RemoteJobID: "job-1"}}}}); err != nil {
		t.Fatalf("record an event of an operation accepted before the migration: %v", err)
	}
	created := accept(t, l.Store, params(t, call{"acme", "op-new", `{}`})).Operation
	if _, err := l.Store.Transition(ctx, &ledger.TransitionParams{OperationRef: created.ID,
		Events: []ledger.EventParams{{Kind: ledger.EventSendStarted, Data: ledger.SendStartedData{Send: 1, Worker: "w1"}}}}); err != nil {
		t.Fatal(err)
	}
	cs, err := l.Store.ChainList(ctx, &ledger.ChainListParams{})
	if err != nil || len(cs) != 3 {
		t.Fatalf("ChainList: %d chains, %v; want 3", len(cs), err)
	}
	byID := map[string]*ledger.Chain{}
	for _, c := range cs {
		byID[c.OperationID] = c
	}
	for id, want := range map[string]ledger.ChainCheck{
		"op-running": {Chained: 1, Unchained: 2, FromMigration: true},
		"op-quiet":   {FromMigration: true},
		"op-new":     {Chained: 1},
	} {
		c := byID[id]
		if c == nil {
			t.Fatalf("ChainList read no chain of %s", id)
		}
		if got := c.Check(); got != want {
			t.Errorf("%s/%s (head %q): check %+v, want %+v", c.Tenant, c.OperationID, c.Head, got, want)
		}
	}
	if running, quiet, fresh := byID["op-running"], byID["op-quiet"], byID["op-new"]; running.Events[2].PrevHash != ledger.ChainStartMigration ||
		quiet.Head != ledger.ChainStartMigration || fresh.Events[0].PrevHash != "" {
		t.Errorf("chains start after %q, with head %q, and after %q; want the migration, the migration and the operation's creation",
			running.Events[2].PrevHash, quiet.Head, fresh.Events[0].PrevHash)
	}

	// What a binary of schema 9 writes.
	for name, q := range map[string]string{
		"an event": `INSERT INTO events (operation_ref, kind, data, created_at) VALUES (1002, 'send_started', '{}', ` + l.Now + `)`,
		"an operation": `INSERT INTO operations (tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, retry_policy, estimate_micros, currency, ttl_ms, created_at, updated_at, intended_remote_jobs, priced, schema_version)
			VALUES ('acme', 'op-old', 'task-old', 'hosted_test', 'run_suite', 'fp', '{}', 'accepted', 'lookup_then_attach', 0, 'USD', 0, ` + l.Now + `, ` + l.Now + `, 1, false, 9)`,
	} {
		_, err := l.DB.ExecContext(ctx, q)
		if err == nil || !strings.Contains(err.Error(), "older than the ledger schema (version ") {
			t.Errorf("a binary of schema 9 writing %s after the migration: %v; want it refused as older than the ledger schema", name, err)
		}
	}
	// An event of no operation stays outside every chain, in any version.
	if _, err := l.DB.ExecContext(ctx, `INSERT INTO events (kind, data, created_at) VALUES ('denied', '{}', `+l.Now+`)`); err != nil {
		t.Errorf("an event of no operation without a hash: %v", err)
	}
}

// migrationMarksPlaintextSecrets checks migration 00007: operations
// accepted before it hold their secret arguments in plain text; the
// migration says so, so that SecretsReseal reports (or, with a key, seals)
// them.
func migrationMarksPlaintextSecrets(t *testing.T, l Ledger) {
	ctx := context.Background()
	migrateTo(t, l, 6)
	if _, err := l.DB.ExecContext(ctx, `INSERT INTO operations (id, tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, retry_policy, estimate_micros, currency, ttl_ms, created_at, updated_at, intended_remote_jobs, priced, secret_arguments, schema_version)
		VALUES (1, 'acme', 'op-secret', 'task-1', 'hosted_test', 'run_suite', 'fp', '{"token":"sk-old"}', 'running', 'lookup_then_attach', 0, 'USD', 0, `+l.Now+`, `+l.Now+`, 1, false, '["token"]', 6),
		       (2, 'acme', 'op-plain', 'task-2', 'hosted_test', 'run_suite', 'fp', '{}', 'running', 'lookup_then_attach', 0, 'USD', 0, `+l.Now+`, `+l.Now+`, 1, false, NULL, 6)`); err != nil {
		t.Fatal(err)
	}
	if err := l.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]ledger.SecretsAtRest{1: ledger.SecretsPlaintext, 2: ledger.SecretsNone} {
		op, err := l.Store.OperationGet(ctx, &ledger.OperationGetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if op.SecretsAtRest != want {
			t.Errorf("operation %d: secrets at rest %q, want %q", id, op.SecretsAtRest, want)
		}
	}
	rep, err := l.Store.SecretsReseal(ctx, nil)
	if err != nil || rep.Plaintext != 1 {
		t.Fatalf("report after the migration: %+v, %v; want one operation in plain text", rep, err)
	}
}

// migrationCopiesAcceptancePolicy checks migration 00005: operations
// accepted before it kept whether their tool is priced and which arguments
// are secret in accepted events; the migration copies both onto the
// operations.
func migrationCopiesAcceptancePolicy(t *testing.T, l Ledger) {
	t.Helper()
	ctx := context.Background()
	migrateTo(t, l, 4)
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

// migrationRefusesOlderBinaries checks migration 00006: once it has run, a
// binary from before it cannot accept an operation (its INSERT leaves the
// newer columns unset), nor can one that writes an older schema version,
// while operations accepted before the migration still change state.
func migrationRefusesOlderBinaries(t *testing.T, l Ledger) {
	ctx := context.Background()
	p := migrateTo(t, l, 5)
	// What the binaries of schemas 4 and 5 insert for an acceptance.
	insert4 := func(id int) string {
		return fmt.Sprintf(`INSERT INTO operations (tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, retry_policy, estimate_micros, currency, ttl_ms, created_at, updated_at, intended_remote_jobs)
			VALUES ('acme', 'op-%d', 'task-%d', 'hosted_test', 'run_suite', 'fp', '{}', 'accepted', 'lookup_then_attach', 0, 'USD', 0, %s, %s, 1)`,
			id, id, l.Now, l.Now)
	}
	insert5 := func(id int) string {
		return fmt.Sprintf(`INSERT INTO operations (tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, retry_policy, estimate_micros, currency, ttl_ms, created_at, updated_at, intended_remote_jobs, priced, secret_arguments)
			VALUES ('acme', 'op-%d', 'task-%d', 'hosted_test', 'run_suite', 'fp', '{}', 'accepted', 'lookup_then_attach', 0, 'USD', 0, %s, %s, 1, true, '["token"]')`,
			id, id, l.Now, l.Now)
	}
	if _, err := l.DB.ExecContext(ctx, insert4(1)); err != nil {
		t.Fatalf("accept before the migration: %v", err)
	}
	if err := l.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{"schema 4": insert4(2), "schema 5": insert5(3)} {
		_, err := l.DB.ExecContext(ctx, q)
		if err == nil || !strings.Contains(err.Error(), "older than the ledger schema") {
			t.Errorf("a binary of %s accepting after the migration: %v; want it refused as older than the ledger schema", name, err)
		}
	}
	if _, err := l.DB.ExecContext(ctx, `UPDATE operations SET state = 'failed' WHERE operation_id = 'op-1'`); err != nil {
		t.Errorf("an operation accepted before the migration cannot change state: %v", err)
	}
	res := accept(t, l.Store, params(t, call{"acme", "op-new", `{}`}))
	var version int64
	if err := l.DB.QueryRowContext(ctx, fmt.Sprintf(`SELECT schema_version FROM operations WHERE id = %d`, res.Operation.ID)).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if latest := lastMigration(t, p); version != latest {
		t.Errorf("schema_version of a new operation = %d, want %d", version, latest)
	}
}

// migrateRefusesNewerSchema: a binary whose migrations end before the
// ledger's version refuses to run against it, and says so.
func migrateRefusesNewerSchema(t *testing.T, l Ledger) {
	ctx := context.Background()
	if err := l.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DB.ExecContext(ctx, `INSERT INTO `+sqlstore.SchemaVersionTable+` (version_id, is_applied) VALUES (999, true)`); err != nil {
		t.Fatal(err)
	}
	err := l.Store.Migrate(ctx)
	if !errors.Is(err, ledger.ErrSchemaNewer) || !strings.Contains(err.Error(), "schema version 999") {
		t.Fatalf("Migrate against a newer schema = %v; want ErrSchemaNewer naming version 999", err)
	}
}

// migrateTo applies l's ledger migrations up to version and returns the
// provider that did.
func migrateTo(t *testing.T, l Ledger, version int64) *goose.Provider {
	t.Helper()
	p, err := sqlstore.NewMigrations(l.Dialect, l.DB, l.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return p
}

func lastMigration(t *testing.T, p *goose.Provider) int64 {
	t.Helper()
	sources := p.ListSources()
	if len(sources) == 0 {
		t.Fatal("no migrations")
	}
	return sources[len(sources)-1].Version
}
