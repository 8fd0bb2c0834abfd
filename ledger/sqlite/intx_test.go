package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// A panic inside a write transaction rolls it back: SQLite has one write
// connection, and a transaction left open would hold it for good.
func TestPanicInTransactionFreesTheWriter(t *testing.T) {
	s := newStore(t).(interface {
		InTx(context.Context, func(sqlstore.Tx) error) error
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the caller")
			}
		}()
		_ = s.InTx(context.Background(), func(tx sqlstore.Tx) error {
			if _, err := tx.Exec(context.Background(), `INSERT INTO api_keys (tenant, key_hash, label, role, created_at) VALUES ('acme', 'h', '', 'caller', 0)`); err != nil {
				t.Error(err)
			}
			panic("boom")
		})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	err := s.InTx(ctx, func(tx sqlstore.Tx) error {
		return tx.QueryRow(ctx, `SELECT count(*) FROM api_keys`).Scan(&n)
	})
	if err != nil {
		t.Fatalf("a transaction after the panic: %v", err)
	}
	if n != 0 {
		t.Fatalf("%d api keys after the panicking transaction, want it rolled back", n)
	}
}

// An acceptance waiting for the write connection commits before the other
// writes that wait with it, whatever their number: a tenant's backlog of
// worker writes does not stand between another tenant's call and the
// ledger. Each waiting write notes whether the acceptance had committed
// when its turn came.
func TestAcceptanceGoesBeforeWaitingWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	insertKey := func(tx sqlstore.Tx, label string) error {
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (tenant, key_hash, label, role, created_at) VALUES ('flood', ?, ?, 'caller', 0)`, "hash-"+label, label)
		return err
	}
	// One write holds the connection until released.
	holding, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.InTx(ctx, func(tx sqlstore.Tx) error {
			close(holding)
			<-release
			return insertKey(tx, "first")
		})
	}()
	<-holding

	const waiting = 8
	var (
		started sync.WaitGroup
		mu      sync.Mutex
		before  int // waiting writes that ran before the acceptance committed
	)
	errs := make(chan error, waiting)
	for i := range waiting {
		started.Add(1)
		go func() {
			started.Done()
			errs <- s.InTx(ctx, func(tx sqlstore.Tx) error {
				var n int
				if err := tx.QueryRow(ctx, `SELECT count(*) FROM operations WHERE operation_id = 'op-b'`).Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					mu.Lock()
					before++
					mu.Unlock()
				}
				return insertKey(tx, fmt.Sprintf("waiting-%d", i))
			})
		}()
	}
	started.Wait()
	waits := s.DB().Stats().WaitCount
	fp, err := canon.Compute("hosted_test", "run_suite", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		_, err := s.Accept(ctx, &ledger.AcceptParams{Tenant: "b", OperationID: "op-b", Upstream: "hosted_test", Tool: "run_suite",
			Fingerprint: string(fp), Arguments: json.RawMessage(`{}`), RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID()})
		accepted <- err
	}()
	testwait.Until(t, ctx, "the acceptance to wait for the write connection", func() (bool, error) {
		return s.DB().Stats().WaitCount > waits, nil
	})
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the write that held the connection: %v", err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("the acceptance: %v", err)
	}
	for range waiting {
		if err := <-errs; err != nil {
			t.Fatalf("a waiting write: %v", err)
		}
	}
	if before != 0 {
		t.Fatalf("%d of the %d writes waiting with the acceptance went before it, want none", before, waiting)
	}
}
