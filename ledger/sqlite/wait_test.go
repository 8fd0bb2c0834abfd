package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// An acceptance waiting behind a group that cannot commit (another process
// holds the write lock) gives up when its context ends, and is withdrawn:
// it never commits later.
func TestWaitingAcceptanceHonoursItsContext(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec("INSERT INTO api_keys (tenant, key_hash, label, role, created_at) VALUES ('x', 'hash', '', 'caller', 0)"); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			_ = lock.Rollback()
		}
	}
	defer release()

	params := func(opID string) *ledger.AcceptParams {
		fp, err := canon.Compute("hosted_test", "run_suite", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return &ledger.AcceptParams{Tenant: "acme", OperationID: opID, Upstream: "hosted_test", Tool: "run_suite",
			Fingerprint: string(fp), Arguments: json.RawMessage(`{}`), RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID()}
	}
	// The first acceptance leads and waits for the lock: its group holds
	// the store's one write connection, in BEGIN IMMEDIATE behind the lock.
	first := make(chan error, 1)
	go func() {
		_, err := s.Accept(ctx, params("op-first"))
		first <- err
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	testwait.Until(t, wctx, "the first acceptance to wait for the lock on the write connection", func() (bool, error) {
		return s.DB().Stats().InUse == 1, nil
	})

	late := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := s.Accept(wctx, params("op-late"))
		late <- err
	}()
	select {
	case err := <-late:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting acceptance: %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		release()
		t.Fatal("an acceptance with a 100ms deadline was still waiting 5s later, behind the held lock")
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("first acceptance after the lock was released: %v", err)
	}
	if _, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-late"}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the withdrawn acceptance: %v, want ErrNotFound", err)
	}
}
