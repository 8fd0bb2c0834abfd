package sqlstore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
	"github.com/taskgate/taskgate/ledger/postgres"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// The recovery sweep runs every few seconds over a table that only grows:
// it must read the open operations through their index, never the table.
func TestRecoverySweepUsesOpenIndex(t *testing.T) {
	ctx := context.Background()
	args := []any{string(ledger.StateAccepted), string(ledger.StateSending), string(ledger.StateRunning), time.Now().UnixMicro(), 100,
		string(ledger.StateInputRequired), ledger.LeaseQueued}
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		rows, err := s.DB().QueryContext(ctx, "EXPLAIN QUERY PLAN "+sqlstore.RecoverQuery, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(plan, "; "); !strings.Contains(got, "USING INDEX operations_open") {
			t.Fatalf("plan = %q, want a search of operations_open", got)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		s, err := postgres.Open(ctx, pgtest.Schema(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		conn, err := s.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		// An empty table is cheapest to read whole; forbid that so that
		// the plan shows whether the index can serve the query at all.
		if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
			t.Fatal(err)
		}
		pgArgs := append([]any(nil), args...)
		pgArgs[3] = time.Now()
		rows, err := conn.Query(ctx, "EXPLAIN "+sqlstore.RecoverQuery, pgArgs...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(plan, "\n"); !strings.Contains(got, "operations_open") {
			t.Fatalf("plan:\n%s\nwant a scan of operations_open", got)
		}
	})
}
