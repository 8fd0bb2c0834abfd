package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger"
)

// TestBackupPointsAtPgDump: taskgate does not copy a PostgreSQL ledger; it
// says which tools do, and where the procedure is written.
func TestBackupPointsAtPgDump(t *testing.T) {
	s := newStore(t)
	out := filepath.Join(t.TempDir(), "ledger.backup")
	_, err := s.Backup(context.Background(), out)
	if !errors.Is(err, ledger.ErrBackupUnsupported) {
		t.Fatalf("Backup = %v, want ErrBackupUnsupported", err)
	}
	for _, want := range []string{"pg_dump", "pg_restore", "docs/operations.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
}

// TestPgDumpRestore follows the procedure docs/operations.md gives: a dump
// of the ledger's schema taken with pg_dump while the store is open,
// restored with pg_restore into a new database, opens as a ledger at the
// same schema version with the same rows.
func TestPgDumpRestore(t *testing.T) {
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP the pg_dump/pg_restore procedure: %s is not installed here", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := pgtest.BaseURL(t)
	ledgerURL := pgtest.Schema(t)
	s := open(t, ledgerURL, true)
	for i := range 5 {
		if _, err := s.KeyCreate(ctx, &ledger.APIKey{Tenant: "acme", Hash: fmt.Sprintf("%064x", i), Label: "dump", Role: ledger.RoleAgent, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(ledgerURL)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")

	dump := filepath.Join(t.TempDir(), "taskgate.dump")
	run(t, ctx, "pg_dump", "--format=custom", "--no-owner", "--schema="+schema, "--file="+dump, "--dbname="+base)

	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := "tg_restore_" + hex.EncodeToString(b)
	admin(t, ctx, base, "CREATE DATABASE "+db)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		admin(t, ctx, base, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
	})
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = "/" + db
	run(t, ctx, "pg_restore", "--no-owner", "--exit-on-error", "--dbname="+target.String(), dump)

	q := target.Query()
	q.Set("search_path", schema)
	target.RawQuery = q.Encode()
	r := open(t, target.String(), true)
	keys, err := r.KeyList(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 5 {
		t.Fatalf("the restored ledger holds %d keys, want 5", len(keys))
	}
	var want, got int64
	if err := s.Pool().QueryRow(ctx, "SELECT MAX(version_id) FROM taskgate_schema_version").Scan(&want); err != nil {
		t.Fatal(err)
	}
	if err := r.Pool().QueryRow(ctx, "SELECT MAX(version_id) FROM taskgate_schema_version").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("the restored ledger is at schema version %d, the original at %d", got, want)
	}
}

func run(t *testing.T, ctx context.Context, name string, args ...string) {
	t.Helper()
	if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func admin(t *testing.T, ctx context.Context, base, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
