// Command growthbench measures how many bytes of SQLite ledger one
// operation costs: it runs -ops run_suite calls through a gateway (in this
// process, with the default settings, in front of the simulated provider)
// until every one has ended and its receipt is reconciled, stops the
// gateway, checkpoints the WAL and divides the file's pages by the
// operations. It then prints what holds those bytes, table by table and
// index by index, and how many events of each kind one operation has.
// With -job-retention it first waits for River's cleaner and vacuums, as a
// gateway does on its schedule. It exits non-zero only when a measurement
// fails.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/reconcile"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "growthbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("growthbench", flag.ContinueOnError)
	ops := fs.Int("ops", 500, "operations to run to completion")
	conc := fs.Int("concurrency", 16, "calls in flight at once")
	job := fs.Duration("job", 50*time.Millisecond, "how long each job runs at the simulated provider")
	retention := fs.Duration("job-retention", 0, "worker.job_retention; set, the run waits until River's cleaner has deleted every completed job row, and the ledger is vacuumed before it is measured")
	dir := fs.String("dir", "", "directory for the ledger (default: a new temporary one, removed after)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ops < 1 || *conc < 1 {
		return errors.New("-ops and -concurrency must be at least 1")
	}
	d := *dir
	if d == "" {
		tmp, err := os.MkdirTemp("", "taskgate-growth-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		d = tmp
	}
	// The measure is the ledger's growth, not the limits: its one tenant's
	// calls must not be refused for their pace.
	o := &fixtures.Options{Dir: d, Sim: providersim.Options{JobDuration: *job}, EditConfig: func(y string) string {
		y += "limits: {call_rate: 1000000, call_burst: 1000000}\n"
		if *retention > 0 {
			y = strings.Replace(y, "worker:\n", "worker:\n  job_retention: "+retention.String()+"\n", 1)
		}
		return y
	}}
	h, err := fixtures.New(ctx, o)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := drive(ctx, h, *ops, *conc); err != nil {
		return err
	}
	path := filepath.Join(d, "taskgate.db")
	if *retention > 0 {
		if err := cleaned(ctx, path); err != nil {
			return err
		}
	}
	if err := h.Stop(ctx); err != nil {
		return err
	}
	if err := h.Store.Close(); err != nil {
		return err
	}
	h.Store = nil
	return measure(ctx, path, *ops, *retention > 0, out)
}

// cleaned waits until River's cleaner has deleted every completed job.
func cleaned(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM river_job WHERE state = 'completed'").Scan(&n); err != nil {
			return fmt.Errorf("count completed River jobs: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for River's cleaner (%d completed jobs left): %w", n, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// drive runs n calls, conc at a time, each until its task completes and
// its receipt is reconciled.
func drive(ctx context.Context, h *fixtures.Harness, n, conc int) error {
	key, err := h.Key(ctx, "acme")
	if err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		mu    sync.Mutex
		first error
	)
	for range conc {
		wg.Go(func() {
			cs, err := fixtures.Dial(ctx, h.MCPURL(), key, fixtures.EraExtension, nil)
			if err == nil {
				defer cs.Close()
			}
			for i := range next {
				if err == nil {
					err = one(ctx, h, cs, fmt.Sprintf("growth-%06d", i))
				}
				if err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func one(ctx context.Context, h *fixtures.Harness, cs *mcp.ClientSession, id string) error {
	task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(id, nil), nil)
	if err != nil {
		return fmt.Errorf("call %s: %w", id, err)
	}
	if task == nil {
		return fmt.Errorf("call %s was answered without a task", id)
	}
	done, err := taskwire.AwaitTask(ctx, cs, task.ID, 50*time.Millisecond)
	if err != nil {
		return fmt.Errorf("task of %s: %w", id, err)
	}
	if done.Status != taskwire.StatusCompleted {
		return fmt.Errorf("task of %s ended %s", id, done.Status)
	}
	for {
		op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: id})
		if err != nil {
			return err
		}
		in, err := receipt.Load(ctx, h.Store, op, nil)
		if err != nil {
			return err
		}
		if receipt.Build(in).ReconciliationStatus == receipt.ReconciliationStatus(reconcile.Complete) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// measure prints the ledger's bytes per operation and what holds them.
func measure(ctx context.Context, path string, ops int, vacuum bool, out io.Writer) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fmt.Errorf("checkpoint the WAL: %w", err)
	}
	// What the gateway's scheduled incremental vacuum does, at once.
	if vacuum {
		if _, err := db.ExecContext(ctx, "PRAGMA incremental_vacuum"); err != nil {
			return fmt.Errorf("vacuum: %w", err)
		}
	}
	var pages, size, free int64
	for q, v := range map[string]*int64{"PRAGMA page_count": &pages, "PRAGMA page_size": &size, "PRAGMA freelist_count": &free} {
		if err := db.QueryRowContext(ctx, q).Scan(v); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	fmt.Fprintf(out, "%d operations: %d bytes (%d pages of %d, %d free), %d bytes per operation\n\n",
		ops, pages*size, pages, size, free, pages*size/int64(ops))

	type part struct {
		name  string
		bytes int64
	}
	var parts []part
	rows, err := db.QueryContext(ctx, "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
	if err != nil {
		return fmt.Errorf("read dbstat: %w", err)
	}
	for rows.Next() {
		var p part
		if err := rows.Scan(&p.name, &p.bytes); err != nil {
			return err
		}
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(b.bytes, a.bytes) })
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table or index\tbytes\tbytes/op\t")
	for _, p := range parts {
		if p.bytes*100 < pages*size {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", p.name, p.bytes, p.bytes/int64(ops))
	}
	tw.Flush()

	fmt.Fprintln(out)
	rows, err = db.QueryContext(ctx, "SELECT kind, COUNT(*), SUM(LENGTH(data)) FROM events GROUP BY kind ORDER BY 3 DESC")
	if err != nil {
		return fmt.Errorf("count events: %w", err)
	}
	defer rows.Close()
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "event kind\tper op\tdata bytes/op\t")
	for rows.Next() {
		var (
			kind  string
			n, sz int64
		)
		if err := rows.Scan(&kind, &n, &sz); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%d\t\n", kind, float64(n)/float64(ops), sz/int64(ops))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var jobs int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM river_job").Scan(&jobs); err != nil {
		return fmt.Errorf("count River jobs: %w", err)
	}
	tw.Flush()
	fmt.Fprintf(out, "\nRiver job rows: %.2f per operation\n", float64(jobs)/float64(ops))
	return nil
}
