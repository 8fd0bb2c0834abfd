package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	sqlite3 "modernc.org/sqlite"

	"github.com/taskgate/taskgate/bench/internal/load"
	"github.com/taskgate/taskgate/bench/internal/report"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// writePragmas are the settings ledger/sqlite opens its write connection
// with; the raw loop must run under the same ones. measureAll checks that
// both connections report the same synchronous and journal_mode.
const writePragmas = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(full)&_txlock=immediate"

// The operation every acceptance asks for. Its fingerprint is computed once:
// fingerprinting is the caller's work, not the store's.
const (
	benchTenant   = "bench"
	benchUpstream = "hosted_test"
	benchTool     = "run_suite"
	benchArgs     = `{"suite":"settlement","options":{"shard":2,"retries":0},"tags":["a","b"]}`
	// queueLease holds a created operation for its queued dispatch job,
	// as the gateway asks for.
	queueLease = 5 * time.Minute
)

// dispatchArgs has the shape of the dispatch job (worker.DispatchArgs) that
// the gateway enqueues with every created operation, so that River writes
// the same row; no worker ever runs on a benchmark ledger.
type dispatchArgs struct {
	Operation int64 `json:"operation"`
}

func (dispatchArgs) Kind() string { return "taskgate_dispatch" }

func dispatchJobs(op *ledger.Operation) []river.InsertManyParams {
	return []river.InsertManyParams{{Args: dispatchArgs{Operation: op.ID}}}
}

func measureAll(ctx context.Context, o *options, progress io.Writer) (*results, error) {
	root, err := os.MkdirTemp(o.dir, "taskgate-acceptbench-")
	if err != nil {
		return nil, fmt.Errorf("create a scratch directory in %s: %w", o.dir, err)
	}
	defer os.RemoveAll(root)
	fp, err := canon.Compute(benchUpstream, benchTool, json.RawMessage(benchArgs))
	if err != nil {
		return nil, fmt.Errorf("fingerprint the benchmark arguments: %w", err)
	}
	rep := &results{Machine: machineFacts(o)}

	type step struct {
		name   string
		conc   int
		replay bool
	}
	steps := []step{
		{"raw insert", 1, false},
		{"accept", 1, false},
		{"accept", o.concurrency, false},
		{"replay", 1, true},
		{"replay", o.concurrency, true},
	}
	// Rounds run every step in turn, so that a burst of load from
	// elsewhere on the machine spreads over all steps instead of one.
	got := make([][]measurement, len(steps))
	var rawSettings settings
	for round := 1; round <= o.rounds; round++ {
		for i, st := range steps {
			fmt.Fprintf(progress, "round %d/%d: %s c=%d ...\n", round, o.rounds, st.name, st.conc)
			path := filepath.Join(root, fmt.Sprintf("r%d-%d.db", round, i))
			var (
				m   measurement
				err error
			)
			if i == 0 {
				m, rawSettings, err = measureRaw(ctx, path, o, string(fp))
			} else {
				var pragmas string
				m, pragmas, err = measureAccept(ctx, path, o, string(fp), st.conc, st.replay)
				if err == nil && pragmas != rawSettings.pragmas {
					err = fmt.Errorf("the store runs with %s but the raw loop ran with %s; the comparison would be unfair", pragmas, rawSettings.pragmas)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("%s c=%d: %w", st.name, st.conc, err)
			}
			m.Name = st.name
			got[i] = append(got[i], m)
		}
	}
	rep.Machine.SQLiteVersion = rawSettings.version
	rep.Machine.Synchronous = rawSettings.synchronous
	rep.Machine.JournalMode = rawSettings.journalMode
	for _, ms := range got {
		rep.Measurements = append(rep.Measurements, median(ms))
	}
	raw, accept1, acceptN, replay1, replayN := rep.Measurements[0], rep.Measurements[1], rep.Measurements[2], rep.Measurements[3], rep.Measurements[4]
	n := o.concurrency
	rep.Ratios = []report.Ratio{
		newRatio("accept c=1 / raw", accept1, raw, 0.70),
		newRatio(fmt.Sprintf("accept c=%d / raw", n), acceptN, raw, 4.0),
		newRatio("replay c=1 / raw", replay1, raw, 0),
		newRatio(fmt.Sprintf("replay c=%d / raw", n), replayN, raw, 0),
		newRatio(fmt.Sprintf("accept c=%d / accept c=1", n), acceptN, accept1, 0),
	}
	return rep, nil
}

// median returns the measurement with the median rate, carrying the rate of
// every round.
func median(ms []measurement) measurement {
	m, rounds := load.Median(ms, func(m measurement) float64 { return m.OpsPerSec })
	m.Rounds = rounds
	return m
}

// settings are what a write connection reports about itself.
type settings struct {
	version, synchronous, journalMode string
	// pragmas summarises synchronous and journal_mode for comparison.
	pragmas string
}

func readSettings(ctx context.Context, db *sql.DB) (settings, error) {
	var (
		s    settings
		sync int
	)
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&s.version); err != nil {
		return s, err
	}
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return s, err
	}
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&s.journalMode); err != nil {
		return s, err
	}
	s.synchronous = map[int]string{0: "off", 1: "normal", 2: "full", 3: "extra"}[sync]
	s.pragmas = fmt.Sprintf("synchronous=%s journal_mode=%s", s.synchronous, s.journalMode)
	return s, nil
}

// measureRaw migrates a fresh ledger with the store, closes the store, and
// commits one operations row per transaction on a plain connection with the
// store's write settings: the disk's durable single-writer commit rate.
func measureRaw(ctx context.Context, path string, o *options, fp string) (measurement, settings, error) {
	var st settings
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		return measurement{}, st, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return measurement{}, st, err
	}
	if err := s.Close(); err != nil {
		return measurement{}, st, err
	}

	db, err := sql.Open("sqlite", "file:"+path+"?"+writePragmas)
	if err != nil {
		return measurement{}, st, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if st, err = readSettings(ctx, db); err != nil {
		return measurement{}, st, err
	}
	// Migration 00006 refuses an operation without the schema version an
	// acceptance writes; read it once, outside the measured loop.
	var version int64
	if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM taskgate_schema_version`).Scan(&version); err != nil {
		return measurement{}, st, fmt.Errorf("read the ledger's schema version: %w", err)
	}
	commits, err := countCommits(ctx, db)
	if err != nil {
		return measurement{}, st, err
	}
	defer commits.stop(ctx)

	m, total, err := drive(ctx, 1, o, commits, func(ctx context.Context, worker, seq int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		now := time.Now().UnixMicro()
		if _, err := tx.ExecContext(ctx, `INSERT INTO operations (tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
				state, approval_ref, retry_policy, estimate_micros, currency, ttl_ms, lease_owner, lease_until, created_at, updated_at, schema_version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, $17)`,
			benchTenant, fmt.Sprintf("op-%d-%d", worker, seq), ledger.NewTaskID(), benchUpstream, benchTool,
			fp, benchArgs, ledger.StateAccepted, nil, "lookup_then_attach", 0, "USD", time.Hour.Milliseconds(), ledger.LeaseQueued, now+queueLease.Microseconds(), now, version); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return measurement{}, st, err
	}
	if err := expectRows(ctx, db, map[string]int64{"operations": total}); err != nil {
		return measurement{}, st, err
	}
	return m, st, nil
}

// measureAccept drives the real store's Accept from conc goroutines on a
// fresh ledger. With replay, each goroutine first owns one created
// operation and then resends it, so every measured call is attached.
func measureAccept(ctx context.Context, path string, o *options, fp string, conc int, replay bool) (measurement, string, error) {
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		return measurement{}, "", err
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		return measurement{}, "", err
	}
	st, err := readSettings(ctx, s.DB())
	if err != nil {
		return measurement{}, "", err
	}

	args := json.RawMessage(benchArgs)
	accept := func(ctx context.Context, opID string, want ledger.Decision) error {
		res, err := s.Accept(ctx, &ledger.AcceptParams{
			Tenant:      benchTenant,
			OperationID: opID,
			Upstream:    benchUpstream,
			Tool:        benchTool,
			Fingerprint: fp,
			Arguments:   args,
			RequestID:   ledger.NewRequestID(),
			TaskID:      ledger.NewTaskID(),
			Source:      "bench",
			RetryPolicy: "lookup_then_attach",
			TTL:         time.Hour,
			Priced:      true,
			Enqueue:     dispatchJobs,
			QueueLease:  queueLease,
		})
		if err != nil {
			return fmt.Errorf("accept %s: %w", opID, err)
		}
		if res.Decision != want {
			return fmt.Errorf("accept %s decided %s (%s), want %s", opID, res.Decision, res.Reason, want)
		}
		return nil
	}
	seeded := int64(0)
	if replay {
		for w := range conc {
			if err := accept(ctx, fmt.Sprintf("op-%d", w), ledger.DecisionCreated); err != nil {
				return measurement{}, "", err
			}
		}
		seeded = int64(conc)
	}

	commits, err := countCommits(ctx, s.DB())
	if err != nil {
		return measurement{}, "", err
	}
	m, total, err := drive(ctx, conc, o, commits, func(ctx context.Context, worker, seq int) error {
		if replay {
			return accept(ctx, fmt.Sprintf("op-%d", worker), ledger.DecisionAttached)
		}
		return accept(ctx, fmt.Sprintf("op-%d-%d", worker, seq), ledger.DecisionCreated)
	})
	if serr := commits.stop(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return measurement{}, "", err
	}
	created := seeded + total
	if replay {
		created = seeded
	}
	if err := expectRows(ctx, s.DB(), map[string]int64{
		"operations": created,
		"attempts":   seeded + total,
		"river_job":  created,
	}); err != nil {
		return measurement{}, "", err
	}
	return m, st.pragmas, nil
}

// expectRows checks that each table holds exactly the rows the measurement
// says it committed, so that no number in the table is a lost write.
func expectRows(ctx context.Context, db *sql.DB, want map[string]int64) error {
	for _, table := range slices.Sorted(maps.Keys(want)) {
		var got int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&got); err != nil {
			return fmt.Errorf("count %s: %w", table, err)
		}
		if got != want[table] {
			return fmt.Errorf("%s holds %d rows after the run, want %d: a call reported success that the database does not show", table, got, want[table])
		}
	}
	return nil
}

// commitCounter counts the write transactions SQLite commits on a
// connection, through SQLite's commit hook. It counts nothing (and reports
// no commits) when the connection offers no hooks, e.g. behind a wrapping
// driver.
type commitCounter struct {
	db     *sql.DB
	hooked bool
	n      atomic.Int64
}

// countCommits registers the hook on db's connection; db must be limited
// to one connection, so that the hooked connection is the one that writes.
func countCommits(ctx context.Context, db *sql.DB) (*commitCounter, error) {
	c := &commitCounter{db: db}
	err := withHooks(ctx, db, func(h sqlite3.HookRegisterer) {
		h.RegisterCommitHook(func() int32 { c.n.Add(1); return 0 })
		c.hooked = true
	})
	if err != nil {
		return nil, fmt.Errorf("count commits: %w", err)
	}
	return c, nil
}

func (c *commitCounter) load() int64 { return c.n.Load() }

func (c *commitCounter) stop(ctx context.Context) error {
	if !c.hooked {
		return nil
	}
	return withHooks(ctx, c.db, func(h sqlite3.HookRegisterer) { h.RegisterCommitHook(nil) })
}

func withHooks(ctx context.Context, db *sql.DB, f func(sqlite3.HookRegisterer)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		if h, ok := dc.(sqlite3.HookRegisterer); ok {
			f(h)
		}
		return nil
	})
}

// drive calls op from conc goroutines through o's warm-up and measured
// window, and returns the window's measurement, with the commits SQLite
// made in the window, and the calls made in all.
func drive(ctx context.Context, conc int, o *options, commits *commitCounter, op load.Op) (measurement, int64, error) {
	var inWindow int64
	w, err := load.Run(ctx, load.Options{
		Workers:  conc,
		Warmup:   o.warmup,
		Duration: o.duration,
		Meter: func() func() {
			c0 := commits.load()
			return func() { inWindow = commits.load() - c0 }
		},
	}, op)
	if err != nil {
		return measurement{}, 0, err
	}
	m := measurement{
		Concurrency: conc, Ops: w.Calls, Seconds: w.Seconds, Commits: inWindow,
		OpsPerSec: w.PerSecond(), P50Ms: w.PercentileMs(50), P99Ms: w.PercentileMs(99),
	}
	if inWindow > 0 {
		m.OpsPerCommit = float64(w.Calls) / float64(inWindow)
	}
	return m, w.Total, nil
}
