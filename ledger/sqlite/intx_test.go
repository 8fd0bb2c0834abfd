package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
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
