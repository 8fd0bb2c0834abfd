package cli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/internal/pgtest"
)

func TestBackup(t *testing.T) {
	l := newLedger(t)
	l.completed(t, "acme", "op-1")
	out := filepath.Join(t.TempDir(), "taskgate.backup")
	if got := l.ok(t, "backup", "--out", out); !strings.HasPrefix(got, "backed up ledger "+l.db+" to "+out+": ") || !strings.HasSuffix(got, ", integrity ok\n") {
		t.Errorf("backup printed %q", got)
	}
	restored := &ledgerFile{db: "sqlite:" + out}
	if got := restored.ok(t, "verify"); !strings.Contains(got, "holds: 1 operation") {
		t.Errorf("verify of the backup printed %q", got)
	}
	checkFailure(t, l.run(t, "backup", "--out", out), "exists; name a new file", false)
	checkFailure(t, l.run(t, "backup"), "backup needs --out FILE", true)
}

func TestBackupOfPostgresPointsAtPgDump(t *testing.T) {
	url := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, []string{"--db", url, "backup", "--out", filepath.Join(t.TempDir(), "x")}, &stdout, &stderr, func(string) string { return "" })
	checkFailure(t, result{code: code, stdout: stdout.String(), stderr: stderr.String()}, "pg_dump --format=custom", false)
}
