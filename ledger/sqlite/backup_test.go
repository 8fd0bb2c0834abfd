package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// TestBackupWhileWriting copies a ledger that another writer keeps
// changing: the copy is checked, opens as a ledger, holds a prefix of the
// writes, and a second backup to the same file is refused.
func TestBackupWhileWriting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newStore(t)
	key := func(i int) *ledger.APIKey {
		return &ledger.APIKey{Tenant: "acme", Hash: fmt.Sprintf("%064x", i), Label: "backup", Role: ledger.RoleAgent, CreatedAt: time.Now()}
	}
	stop := make(chan struct{})
	written := make(chan int, 1)
	go func() {
		n := 0
		defer func() { written <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.KeyCreate(ctx, key(n)); err != nil {
				t.Errorf("create key %d: %v", n, err)
				cancel()
				return
			}
			n++
		}
	}()
	testwait.Until(t, ctx, "the writer has written keys", func() (bool, error) {
		keys, err := s.KeyList(ctx, "acme")
		return len(keys) >= 20, err
	})
	out := filepath.Join(t.TempDir(), "ledger.backup")
	b, err := s.Backup(ctx, out)
	close(stop)
	n := <-written
	if err != nil {
		t.Fatal(err)
	}
	if b.Path != out || b.Bytes == 0 || b.SchemaVersion == 0 {
		t.Fatalf("backup = %+v", b)
	}
	if info, err := os.Stat(out); err != nil || info.Size() != b.Bytes {
		t.Fatalf("backup file: %v, %v; reported %d bytes", info, err, b.Bytes)
	}

	if _, err := s.Backup(ctx, out); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("a second backup to %s: %v, want a refusal naming the existing file", out, err)
	}
	if info, err := os.Stat(out); err != nil || info.Size() != b.Bytes {
		t.Fatalf("the refused backup changed the file: %v, %v", info, err)
	}

	restored := filepath.Join(t.TempDir(), "taskgate.db")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(restored, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := sqlite.Open(ctx, restored, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Migrate(ctx); err != nil {
		t.Fatalf("migrate the restored ledger: %v", err)
	}
	keys, err := r.KeyList(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 20 || len(keys) > n {
		t.Fatalf("the restored ledger holds %d keys; %d were written, at least 20 before the backup", len(keys), n)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k.Hash] = true
	}
	for i := range len(keys) {
		if !seen[key(i).Hash] {
			t.Fatalf("the restored ledger lacks key %d of %d: not a prefix of the writes", i, len(keys))
		}
	}
}

// TestBackupRefusesBadPaths names the mistake instead of copying.
func TestBackupRefusesBadPaths(t *testing.T) {
	s := newStore(t)
	for name, path := range map[string]string{
		"empty":        "",
		"no directory": filepath.Join(t.TempDir(), "missing", "ledger.backup"),
		"a directory":  t.TempDir(),
	} {
		t.Run(name, func(t *testing.T) {
			if b, err := s.Backup(context.Background(), path); err == nil {
				t.Fatalf("backup to %q = %+v, want an error", path, b)
			}
		})
	}
}
