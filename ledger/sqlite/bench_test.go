package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// The acceptance benchmarks compare the store's durable accepts per second
// with a raw loop that commits one operations row per transaction under the
// store's own write settings, measured in the same run: the ratio (x_raw)
// is what carries from one disk to another, not the absolute rate. Run
// them with go test -run '^$' -bench . ./ledger/sqlite/; ./bench/accept
// measures the same for fixed durations and prints the targets.

// benchWritePragmas are the settings Open gives the write connection.
const benchWritePragmas = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(full)&_txlock=immediate"

const (
	benchArgs = `{"suite":"settlement","options":{"shard":2,"retries":0},"tags":["a","b"]}`
	// benchQueueLease holds a created operation for its queued dispatch job.
	benchQueueLease = 5 * time.Minute
)

// benchDispatchArgs has the shape of the dispatch job enqueued with every
// created operation; no worker runs on a benchmark ledger.
type benchDispatchArgs struct {
	Operation int64 `json:"operation"`
}

func (benchDispatchArgs) Kind() string { return "taskgate_dispatch" }

func benchFingerprint(b *testing.B) string {
	b.Helper()
	fp, err := canon.Compute("hosted_test", "run_suite", json.RawMessage(benchArgs))
	if err != nil {
		b.Fatal(err)
	}
	return string(fp)
}

// benchLedger opens a fresh, migrated ledger file.
func benchLedger(b *testing.B) (*sqlite.Store, string) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "ledger.db")
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		s.Close()
		b.Fatal(err)
	}
	return s, path
}

// benchRawDB migrates a fresh ledger with the store, closes the store and
// reopens the file on one plain connection with the store's settings.
func benchRawDB(b *testing.B) *sql.DB {
	b.Helper()
	s, path := benchLedger(b)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+benchWritePragmas)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return db
}

// rawInsert commits the operations row acceptance inserts, alone in its
// own transaction.
func rawInsert(db *sql.DB, fp, opID string, version int64) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	now := time.Now().UnixMicro()
	if _, err := tx.Exec(`INSERT INTO operations (tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, approval_ref, retry_policy, estimate_micros, currency, ttl_ms, lease_owner, lease_until, created_at, updated_at, schema_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, $17)`,
		"bench", opID, ledger.NewTaskID(), "hosted_test", "run_suite", fp, benchArgs,
		ledger.StateAccepted, nil, "lookup_then_attach", 0, "USD", time.Hour.Milliseconds(), ledger.LeaseQueued, now+benchQueueLease.Microseconds(), now, version); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// schemaVersion is the ledger's schema version, which the raw inserts
// write as an acceptance does (migration 00006 refuses a row without it).
func schemaVersion(b *testing.B, db *sql.DB) int64 {
	b.Helper()
	var v int64
	if err := db.QueryRow(`SELECT max(version_id) FROM taskgate_schema_version`).Scan(&v); err != nil {
		b.Fatal(err)
	}
	return v
}

// rawBaseline measures the raw commit rate for about d, for the x_raw
// ratio of the benchmarks that follow in the same run.
func rawBaseline(b *testing.B, d time.Duration) float64 {
	b.Helper()
	db, fp := benchRawDB(b), benchFingerprint(b)
	version := schemaVersion(b, db)
	start := time.Now()
	n := 0
	for ; time.Since(start) < d; n++ {
		if err := rawInsert(db, fp, fmt.Sprintf("baseline-%d", n), version); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// runOps runs op b.N times from conc goroutines under the timer and
// reports ops/s, and x_raw when raw is known.
func runOps(b *testing.B, conc int, raw float64, op func(worker, seq int) error) {
	b.Helper()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	b.ResetTimer()
	for worker := range conc {
		wg.Go(func() {
			for seq := 0; next.Add(1) <= int64(b.N); seq++ {
				if err := op(worker, seq); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "ops/s")
	if raw > 0 {
		b.ReportMetric(rate/raw, "x_raw")
	}
}

// accepter returns a function that accepts opID on s and checks the decision.
func accepter(b *testing.B, s *sqlite.Store) func(opID string, want ledger.Decision) error {
	fp := benchFingerprint(b)
	return func(opID string, want ledger.Decision) error {
		res, err := s.Accept(context.Background(), &ledger.AcceptParams{
			Tenant:      "bench",
			OperationID: opID,
			Upstream:    "hosted_test",
			Tool:        "run_suite",
			Fingerprint: fp,
			Arguments:   json.RawMessage(benchArgs),
			RequestID:   ledger.NewRequestID(),
			TaskID:      ledger.NewTaskID(),
			Source:      "bench",
			RetryPolicy: "lookup_then_attach",
			TTL:         time.Hour,
			Priced:      true,
			QueueLease:  benchQueueLease,
			Enqueue: func(op *ledger.Operation) []river.InsertManyParams {
				return []river.InsertManyParams{{Args: benchDispatchArgs{Operation: op.ID}}}
			},
		})
		if err != nil {
			return fmt.Errorf("accept %s: %w", opID, err)
		}
		if res.Decision != want {
			return fmt.Errorf("accept %s decided %s (%s), want %s", opID, res.Decision, res.Reason, want)
		}
		return nil
	}
}

func BenchmarkRawInsert(b *testing.B) {
	db, fp := benchRawDB(b), benchFingerprint(b)
	version := schemaVersion(b, db)
	runOps(b, 1, 0, func(_, seq int) error { return rawInsert(db, fp, fmt.Sprintf("op-%d", seq), version) })
}

// BenchmarkAccept measures created decisions: operation, attempt, event and
// dispatch job in one durable commit.
func BenchmarkAccept(b *testing.B) {
	raw := rawBaseline(b, time.Second)
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			s, _ := benchLedger(b)
			defer s.Close()
			accept := accepter(b, s)
			runOps(b, conc, raw, func(worker, seq int) error {
				return accept(fmt.Sprintf("op-%d-%d", worker, seq), ledger.DecisionCreated)
			})
		})
	}
}

// BenchmarkAcceptAttached measures retries of stored operations: each
// goroutine resends the operation it created before the timer started.
func BenchmarkAcceptAttached(b *testing.B) {
	raw := rawBaseline(b, time.Second)
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			s, _ := benchLedger(b)
			defer s.Close()
			accept := accepter(b, s)
			for worker := range conc {
				if err := accept(fmt.Sprintf("op-%d", worker), ledger.DecisionCreated); err != nil {
					b.Fatal(err)
				}
			}
			runOps(b, conc, raw, func(worker, _ int) error {
				return accept(fmt.Sprintf("op-%d", worker), ledger.DecisionAttached)
			})
		})
	}
}
