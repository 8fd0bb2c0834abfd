package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskgate/taskgate/bench/internal/cpu"
	"github.com/taskgate/taskgate/bench/internal/load"
	"github.com/taskgate/taskgate/bench/internal/report"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// versionExtension is the protocol version the clients negotiate.
const versionExtension = "2026-07-28"

// rawTable is the raw loop's table: one row per committed transaction.
const rawTable = "raw_insert"

func measureAll(ctx context.Context, o *options, progress io.Writer) (_ *results, err error) {
	rep := &results{Machine: machineFacts(o)}
	var w *world
	role(ctx, "client", func(ctx context.Context) { w, err = newWorld(ctx, o, progress) })
	if err != nil {
		return nil, err
	}
	defer w.close()
	rep.Machine.Schema = w.schema
	if err := readServer(ctx, w, &rep.Machine); err != nil {
		return nil, err
	}
	if _, err := w.store.Pool().Exec(ctx, `CREATE TABLE `+rawTable+` (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		worker integer NOT NULL,
		seq integer NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("create %s: %w", rawTable, err)
	}

	// Rounds run every step in turn, so that a burst of load from
	// elsewhere on the machine spreads over all steps instead of one.
	steps := []step{{kind: stepRaw}, {kind: stepCeiling}}
	if o.passThrough {
		steps = append(steps, step{kind: stepPass, replicas: 1})
	}
	for _, n := range o.replicas {
		steps = append(steps, step{kind: stepAccept, replicas: n})
	}
	got := make([][]measurement, len(steps))
	for round := 1; round <= o.rounds; round++ {
		for i, st := range steps {
			var m measurement
			role(ctx, "client", func(ctx context.Context) {
				fmt.Fprintf(progress, "round %d/%d: %s ...\n", round, o.rounds, st.describe(o.clients))
				switch st.kind {
				case stepRaw:
					m, err = measureRaw(ctx, w, round)
				case stepCeiling:
					m, err = measureCeiling(ctx, w, round)
				case stepPass:
					m, err = measurePass(ctx, w, round)
				default:
					m, err = measureAccept(ctx, w, st.replicas, round, progress)
				}
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", st.describe(o.clients), err)
			}
			got[i] = append(got[i], m)
		}
	}
	for _, ms := range got {
		rep.Measurements = append(rep.Measurements, median(ms))
	}
	rep.Ratios = ratios(rep.Measurements)
	return rep, nil
}

// step is one measurement of a round.
type step struct {
	kind     string
	replicas int
}

const (
	stepRaw     = "raw insert"
	stepCeiling = "MCP ceiling"
	stepPass    = "pass-through"
	stepAccept  = "accept"
)

func (s step) describe(clients int) string {
	switch s.kind {
	case stepRaw:
		return fmt.Sprintf("raw insert, %d connections", clients)
	case stepCeiling:
		return fmt.Sprintf("MCP ceiling (echo tool on a go-sdk server, no gateway, no database), %d clients", clients)
	case stepPass:
		return fmt.Sprintf("pass-through of the echo tool, %d replica(s), %d clients", s.replicas, clients)
	}
	return fmt.Sprintf("accept, %d replica(s), %d clients", s.replicas, clients)
}

// readServer fills in the server's version and commit settings.
func readServer(ctx context.Context, w *world, m *machine) error {
	pool := w.store.Pool()
	for _, s := range []struct {
		sql string
		to  *string
	}{
		{"SELECT version()", &m.Postgres},
		{"SHOW synchronous_commit", &m.SynchronousCommit},
		{"SHOW fsync", &m.Fsync},
		{"SHOW wal_sync_method", &m.WALSyncMethod},
	} {
		if err := pool.QueryRow(ctx, s.sql).Scan(s.to); err != nil {
			return fmt.Errorf("%s: %w", s.sql, err)
		}
	}
	// Encryption costs both ends CPU per message; sslmode=prefer (pgx's
	// default) uses it whenever the server offers it, loopback included.
	var ssl bool
	if err := pool.QueryRow(ctx, "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)").Scan(&ssl); err != nil {
		return fmt.Errorf("read pg_stat_ssl: %w", err)
	}
	m.TLS = ssl
	// "PostgreSQL 15.2 (Debian ...) on x86_64-pc-linux-gnu, compiled by
	// ...": the first two words say enough.
	if f := splitWords(m.Postgres, 2); f != "" {
		m.Postgres = f
	}
	return nil
}

func splitWords(s string, n int) string {
	words := 0
	for i, r := range s {
		if r == ' ' {
			if words++; words == n {
				return s[:i]
			}
		}
	}
	return s
}

// measureRaw commits one single-row INSERT per transaction (autocommit)
// from as many pool connections as there are clients: the database's
// commit rate under the same concurrency.
func measureRaw(ctx context.Context, w *world, round int) (measurement, error) {
	cfg, err := pgxpool.ParseConfig(w.url)
	if err != nil {
		return measurement{}, err
	}
	cfg.MaxConns, cfg.MinConns = int32(w.o.clients), int32(w.o.clients)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return measurement{}, fmt.Errorf("connect to %s: %w", dburl.Describe(w.base), err)
	}
	defer pool.Close()
	var before int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+rawTable).Scan(&before); err != nil {
		return measurement{}, err
	}
	m, total, err := drive(ctx, w, w.o.clients, nil, func(ctx context.Context, worker, seq int) error {
		_, err := pool.Exec(ctx, "INSERT INTO "+rawTable+" (worker, seq) VALUES ($1, $2)", round*1_000_000+worker, seq)
		return err
	})
	if err != nil {
		return measurement{}, err
	}
	var after int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+rawTable).Scan(&after); err != nil {
		return measurement{}, err
	}
	if after-before != total {
		return measurement{}, fmt.Errorf("%s gained %d rows, but %d inserts reported success", rawTable, after-before, total)
	}
	m.Name, m.Commits, m.CallsPerCommit = stepRaw, total, 1
	return m, nil
}

// measureCeiling drives the clients' calls of the echo tool on the echo
// server directly: what an MCP call costs with no gateway and no database,
// the most any MCP call can reach here.
func measureCeiling(ctx context.Context, w *world, round int) (measurement, error) {
	sessions, err := dialSpread(ctx, w.o.clients, []string{w.echoURL}, w.key)
	if err != nil {
		return measurement{}, err
	}
	defer closeAll(sessions)
	prefix := fmt.Sprintf("r%d-ceiling-", round)
	m, _, err := drive(ctx, w, w.o.clients, nil, func(ctx context.Context, worker, seq int) error {
		return echo(ctx, sessions[worker].cs, echoTool, fmt.Sprintf("%s%d-%d", prefix, worker, seq))
	})
	if err != nil {
		return measurement{}, err
	}
	m.Name = stepCeiling
	return m, nil
}

// measurePass starts one replica and drives the clients' calls of the echo
// tool through it, a non-consequential tool the gateway passes on to the
// echo server, and checks that no call left an operation in the ledger.
func measurePass(ctx context.Context, w *world, round int) (_ measurement, err error) {
	rs, err := w.startReplicas(ctx, 1)
	if err != nil {
		return measurement{}, err
	}
	defer func() {
		if serr := stopReplicas(rs); err == nil && serr != nil {
			err = fmt.Errorf("stop the replicas: %w", serr)
		}
	}()
	sessions, err := dialSpread(ctx, w.o.clients, replicaURLs(rs), w.key)
	if err != nil {
		return measurement{}, err
	}
	defer closeAll(sessions)
	before, err := countLedger(ctx, w)
	if err != nil {
		return measurement{}, err
	}
	tool := echoUpstream + "." + echoTool
	prefix := fmt.Sprintf("r%d-pass-", round)
	m, _, err := drive(ctx, w, w.o.clients, rs, func(ctx context.Context, worker, seq int) error {
		return echo(ctx, sessions[worker].cs, tool, fmt.Sprintf("%s%d-%d", prefix, worker, seq))
	})
	if err != nil {
		return measurement{}, err
	}
	after, err := countLedger(ctx, w)
	if err != nil {
		return measurement{}, err
	}
	if d := after.operations - before.operations; d != 0 {
		return measurement{}, fmt.Errorf("the ledger gained %d operations from pass-through calls", d)
	}
	m.Name, m.Replicas = stepPass, 1
	return m, nil
}

// measureAccept starts n replicas, spreads the clients over them and drives
// consequential calls that each create an operation, then checks that the
// ledger holds exactly the operations and dispatch jobs the calls were
// answered for, that no job was taken and that nothing reached the
// provider.
func measureAccept(ctx context.Context, w *world, n, round int, progress io.Writer) (_ measurement, err error) {
	stats0, err := tableStats(ctx, w)
	if err != nil {
		return measurement{}, err
	}
	rs, err := w.startReplicas(ctx, n)
	if err != nil {
		return measurement{}, err
	}
	stopped := false
	defer func() {
		if stopped {
			return
		}
		if serr := stopReplicas(rs); err == nil && serr != nil {
			err = fmt.Errorf("stop the replicas: %w", serr)
		}
	}()
	sessions, err := dialSpread(ctx, w.o.clients, replicaURLs(rs), w.key)
	if err != nil {
		return measurement{}, err
	}
	defer closeAll(sessions)
	before, err := countLedger(ctx, w)
	if err != nil {
		return measurement{}, err
	}
	prefix := fmt.Sprintf("r%d-n%d-", round, n)
	m, total, err := drive(ctx, w, w.o.clients, rs, func(ctx context.Context, worker, seq int) error {
		opID := fmt.Sprintf("%s%d-%d", prefix, worker, seq)
		task, res, err := taskwire.CallToolAsTask(ctx, sessions[worker].cs, fixtures.RunSuiteCall(opID, nil), nil)
		if err != nil {
			return fmt.Errorf("call %s for %s: %w", fixtures.RunSuiteTool, opID, err)
		}
		if task == nil {
			return fmt.Errorf("%s for %s answered without a task: %s", fixtures.RunSuiteTool, opID, fixtures.ResultText(res))
		}
		return nil
	})
	if err != nil {
		return measurement{}, err
	}
	after, err := countLedger(ctx, w)
	if err != nil {
		return measurement{}, err
	}
	if err := after.check(before, total, w.sim); err != nil {
		return measurement{}, err
	}
	if m.Commits, err = countCommits(ctx, w, prefix); err != nil {
		return measurement{}, err
	}
	m.CallsPerCommit = float64(total) / float64(max(m.Commits, 1))
	m.Name, m.Replicas = stepAccept, n
	if w.o.verbose {
		// A backend reports its table statistics when it ends at the
		// latest: stop the replicas first.
		stopped = true
		closeAll(sessions)
		if err := stopReplicas(rs); err != nil {
			return measurement{}, fmt.Errorf("stop the replicas: %w", err)
		}
		stats1, err := tableStats(ctx, w)
		if err != nil {
			return measurement{}, err
		}
		printStats(progress, stats0, stats1, total)
	}
	return m, nil
}

// tableCounts are PostgreSQL's cumulative statistics of one table.
type tableCounts struct{ ins, upd, del, seqScan, idxScan int64 }

// tableStats reads the statistics of every table in the run's schema.
func tableStats(ctx context.Context, w *world) (map[string]tableCounts, error) {
	rows, err := w.store.Pool().Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, coalesce(seq_scan, 0), coalesce(idx_scan, 0)
		FROM pg_stat_user_tables WHERE schemaname = $1`, w.schema)
	if err != nil {
		return nil, fmt.Errorf("read table statistics: %w", err)
	}
	defer rows.Close()
	out := map[string]tableCounts{}
	for rows.Next() {
		var (
			name string
			c    tableCounts
		)
		if err := rows.Scan(&name, &c.ins, &c.upd, &c.del, &c.seqScan, &c.idxScan); err != nil {
			return nil, err
		}
		out[name] = c
	}
	return out, rows.Err()
}

// printStats shows, per call, what the calls did to each table that
// changed: rows inserted, updated and deleted, and scans.
func printStats(w io.Writer, before, after map[string]tableCounts, calls int64) {
	fmt.Fprintf(w, "  per call, over %d calls (warm-up included):\n", calls)
	for _, name := range slices.Sorted(maps.Keys(after)) {
		a, b := after[name], before[name]
		d := tableCounts{a.ins - b.ins, a.upd - b.upd, a.del - b.del, a.seqScan - b.seqScan, a.idxScan - b.idxScan}
		f := func(n int64) float64 { return float64(n) / float64(calls) }
		// Tables the calls did not touch (migrations, the key) are left out.
		if max(f(d.ins), f(d.upd), f(d.del), f(d.seqScan), f(d.idxScan)) < 0.005 {
			continue
		}
		fmt.Fprintf(w, "    %-24s ins %.2f  upd %.2f  del %.2f  seq scans %.2f  index scans %.2f\n", name, f(d.ins), f(d.upd), f(d.del), f(d.seqScan), f(d.idxScan))
	}
}

// countCommits counts the transactions that wrote the rows of the
// operations whose IDs start with prefix: acceptances (operation, attempt
// and dispatch job commit together) and the records of what each client
// got (the attempt's update and its event). Every row version carries the
// ID of the transaction that wrote it (xmin), so the count needs nothing
// of the database's server-wide statistics, which other work shares.
func countCommits(ctx context.Context, w *world, prefix string) (int64, error) {
	var n int64
	err := w.store.Pool().QueryRow(ctx, `SELECT count(DISTINCT x) FROM (
			SELECT xmin::text AS x FROM operations WHERE operation_id LIKE $1
			UNION ALL SELECT xmin::text FROM attempts WHERE operation_id LIKE $1
			UNION ALL SELECT e.xmin::text FROM events e JOIN operations o ON o.id = e.operation_ref WHERE o.operation_id LIKE $1
		) AS written`, prefix+"%").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the transactions: %w", err)
	}
	return n, nil
}

// ledgerCounts are the rows an acceptance writes, and the dispatch jobs
// that have left the queue.
type ledgerCounts struct {
	operations, attempts, jobs, taken int64
}

func countLedger(ctx context.Context, w *world) (ledgerCounts, error) {
	var c ledgerCounts
	err := w.store.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM operations),
		(SELECT count(*) FROM attempts),
		(SELECT count(*) FROM river_job WHERE kind = 'taskgate_dispatch'),
		(SELECT count(*) FROM river_job WHERE kind = 'taskgate_dispatch' AND (state <> 'available' OR attempt > 0))`).
		Scan(&c.operations, &c.attempts, &c.jobs, &c.taken)
	if err != nil {
		return c, fmt.Errorf("count the ledger's rows: %w", err)
	}
	return c, nil
}

// check compares the rows a measurement added with the calls answered.
func (c ledgerCounts) check(before ledgerCounts, answered int64, sim *providersim.Sim) error {
	var errs []error
	for _, d := range []struct {
		what string
		got  int64
	}{
		{"operations", c.operations - before.operations},
		{"attempts", c.attempts - before.attempts},
		{"dispatch jobs", c.jobs - before.jobs},
	} {
		if d.got != answered {
			errs = append(errs, fmt.Errorf("the ledger gained %d %s, but %d calls were answered with a new task", d.got, d.what, answered))
		}
	}
	if c.taken > 0 {
		errs = append(errs, fmt.Errorf("%d dispatch jobs were taken although no replica runs a worker", c.taken))
	}
	if jobs := len(sim.Jobs()); jobs > 0 {
		errs = append(errs, fmt.Errorf("the provider holds %d jobs, but no job should have been dispatched", jobs))
	}
	return errors.Join(errs...)
}

// drive calls op from conc goroutines through the warm-up and the measured
// window, and returns the window's measurement, with the cores the
// replicas, this process and the machine used in it, and the calls made in
// all. A call still hanging well after the window ends is an error.
func drive(ctx context.Context, w *world, conc int, rs []*replica, op load.Op) (measurement, int64, error) {
	o := w.o
	var share cpuShare
	win, err := load.Run(ctx, load.Options{
		Workers:  conc,
		Warmup:   o.warmup,
		Duration: o.duration,
		Grace:    30 * time.Second,
		Meter: func() func() {
			// The backends are read first and last, so that the
			// queries reading them fall outside the window of the rest.
			pg0 := w.backendsCPU(ctx)
			t0, self0, host0, gates0, up0 := time.Now(), cpu.Self(), cpu.Machine(), replicasCPU(rs), w.echoCPU()
			return func() {
				s := time.Since(t0).Seconds()
				share = cpuShare{
					Gateways: (replicasCPU(rs) - gates0).Seconds() / s,
					Upstream: (w.echoCPU() - up0).Seconds() / s,
					Bench:    (cpu.Self() - self0).Seconds() / s,
					Machine:  (cpu.Machine() - host0).Seconds() / s,
				}
				share.Postgres = max(w.backendsCPU(ctx)-pg0, 0).Seconds() / s
			}
		},
	}, op)
	if err != nil {
		return measurement{}, 0, err
	}
	m := measurement{
		Clients: conc, Calls: win.Calls, Seconds: win.Seconds, PerSecond: win.PerSecond(),
		P50Ms: win.PercentileMs(50), P99Ms: win.PercentileMs(99), CPU: share,
	}
	if r := m.PerSecond; r > 0 {
		m.GatewayMsPerCall = share.Gateways / r * 1000
		m.PostgresMsPerCall = share.Postgres / r * 1000
		m.UpstreamMsPerCall = share.Upstream / r * 1000
		m.BenchMsPerCall = share.Bench / r * 1000
	}
	return m, win.Total, nil
}

// echoCPU is the CPU time the echo server's process has used; zero in
// process.
func (w *world) echoCPU() time.Duration {
	if w.echoProc == nil {
		return 0
	}
	return w.echoProc.cpu()
}

func replicasCPU(rs []*replica) time.Duration {
	var t time.Duration
	for _, r := range rs {
		t += r.cpu()
	}
	return t
}

func machineFacts(o *options) machine {
	m := machine{
		Machine:     report.ThisMachine(),
		Database:    dburl.Describe(o.postgres),
		Gateways:    "child processes (taskgate serve --no-worker)",
		GOGC:        o.gogc,
		DurationSec: o.duration.Seconds(),
		WarmupSec:   o.warmup.Seconds(),
		Clients:     o.clients,
		Rounds:      o.rounds,
	}
	if o.inProcess {
		m.Gateways = "daemons in this process (NoWorker)"
	}
	return m
}
