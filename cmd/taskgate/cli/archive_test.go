package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/archive/archivetest"
)

func TestArchiveThenVerifyAndRead(t *testing.T) {
	l := newLedger(t)
	l.completed(t, "acme", "settlement-regression-842")
	l.completed(t, "acme", "nightly-<b>")
	open := l.accept(t, "acme", "still-open", false)
	cfg, _ := signingConfig(t, l)
	l.ok(t, "signing-keys", "create", "--config", cfg)
	for _, id := range []string{"settlement-regression-842", "nightly-<b>"} {
		l.ok(t, "receipt", "issue", id, "--config", cfg)
	}
	issued := l.ok(t, "receipt", "settlement-regression-842", "--format", "dsse")
	shown := l.ok(t, "ops", "show", "settlement-regression-842", "--json")
	jwks := writeFile(t, "keys.jwks.json", []byte(l.ok(t, "signing-keys", "list", "--jwks")))

	dir := filepath.Join(t.TempDir(), "archive")
	// An approval that still covers new work keeps its operation in the
	// ledger: its reservation counts against it.
	if out := l.ok(t, "archive", "--ended-before", "1ns", "--out", dir, "--config", cfg); !strings.Contains(out, "kept 2 approval_active") {
		t.Fatalf("archive with both approvals active printed %q, want both kept", out)
	}
	for _, id := range []string{"1", "2"} {
		l.ok(t, "approvals", "revoke", id, "--tenant", "acme")
	}
	// The revocation is a fact the receipts state: their next versions
	// are issued, as the gateway's worker would.
	for _, id := range []string{"settlement-regression-842", "nightly-<b>"} {
		l.ok(t, "receipt", "issue", id, "--config", cfg)
	}
	issued = l.ok(t, "receipt", "settlement-regression-842", "--format", "dsse")
	shown = l.ok(t, "ops", "show", "settlement-regression-842", "--json")
	out := l.ok(t, "archive", "--ended-before", "1ns", "--out", dir, "--config", cfg)
	if !strings.Contains(out, "archived 2 operations in 1 file as run 1, deleted 2 operations from the ledger") {
		t.Fatalf("archive printed %q, want both ended operations archived and deleted", out)
	}
	checkFailure(t, l.run(t, "receipt", "settlement-regression-842"), "settlement-regression-842", false)
	if got := l.ok(t, "receipt", "settlement-regression-842", "--archive", dir, "--format", "dsse"); got != issued {
		t.Fatalf("the receipt read from the archive differs from the one issued:\n%s\nwant\n%s", got, issued)
	}
	checkFailure(t, l.run(t, "ops", "show", "settlement-regression-842"), "settlement-regression-842", false)
	if got := l.ok(t, "ops", "show", "settlement-regression-842", "--archive", dir, "--json"); got != shown {
		t.Fatalf("ops show from the archive differs from ops show before it:\n%s\nwant\n%s", got, shown)
	}
	if text := l.ok(t, "ops", "show", "nightly-<b>", "--archive", dir, "--tenant", "acme"); !strings.Contains(text, "nightly-<b>") || !strings.Contains(text, "completed") {
		t.Fatalf("ops show of an archived operation as text =\n%s", text)
	}
	if yml := l.ok(t, "receipt", "nightly-<b>", "--archive", dir, "--tenant", "acme"); !strings.Contains(yml, "reconciliation_status: complete") {
		t.Fatalf("the archived receipt as yaml =\n%s", yml)
	}
	if got := l.operation(t, open); got.OperationID != "still-open" {
		t.Fatalf("the open operation is gone: %+v", got)
	}
	for _, args := range [][]string{{"verify", "--archive", dir}, {"verify", "--archive", dir, "--jwks", jwks}} {
		if out := l.ok(t, args...); !strings.Contains(out, "verifies: 1 run, 1 file, 2 operations") {
			t.Fatalf("%v printed %q", args, out)
		}
	}
	if out := l.ok(t, "archive", "--ended-before", "1ns", "--out", dir, "--config", cfg); !strings.Contains(out, "nothing to archive") {
		t.Fatalf("a second run printed %q, want nothing to archive", out)
	}

	// An edited line fails verification, naming the file, line and operation.
	files, err := filepath.Glob(filepath.Join(dir, "operations-*.jsonl.gz"))
	if err != nil || len(files) != 1 {
		t.Fatalf("archive files %v (%v), want one", files, err)
	}
	archivetest.RewriteGzip(t, files[0], func(s string) string { return strings.Replace(s, `"text":"suite passed"`, `"text":"suite failed"`, 1) })
	r := l.run(t, "verify", "--archive", dir)
	if r.code != 1 || !strings.Contains(r.stderr, filepath.Base(files[0])+" line 1") || !strings.Contains(r.stderr, `operation "settlement-regression-842"`) {
		t.Fatalf("verify of an edited archive: exit %d, stderr %q; want the file, line 1 and its operation named", r.code, r.stderr)
	}
}
