// Command retentionbench simulates a month of a gateway with retention on,
// in compressed time, and prints the SQLite ledger's size day by day until
// it is steady: each simulated day it fills the ledger with -ops/-days
// completed operations with issued receipts (archivetest.Fill, the
// operations of the archive tests: one remote job, one charge, no polls),
// archives those that ended more than -after days before, deletes the
// tombstones whose IDs were released -ids days after their end, gives
// freed pages back (incremental vacuum) and measures the file. A simulated
// day lasts as long as its work takes; the cut-offs are the real times at
// which days began. It must never touch a ledger it did not create, and
// exits non-zero only when something failed.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	_ "modernc.org/sqlite"

	"github.com/taskgate/taskgate/archive"
	"github.com/taskgate/taskgate/archive/archivetest"
	"github.com/taskgate/taskgate/signingkeys"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "retentionbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("retentionbench", flag.ContinueOnError)
	ops := fs.Int("ops", 100000, "operations in the simulated month")
	days := fs.Int("days", 30, "simulated days")
	after := fs.Int("after", 7, "retention.archive.after, in simulated days")
	ids := fs.Int("ids", 1, "retention.operation_ids, in simulated days")
	dir := fs.String("dir", "", "directory for the ledger and the archive (default a new temporary directory, removed afterwards)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *days < 1 || *ops < *days || *after < *ids || *ids < 1 {
		return fmt.Errorf("need -days ≥ 1, -ops ≥ -days and -after ≥ -ids ≥ 1 (got %d, %d, %d, %d)", *days, *ops, *after, *ids)
	}
	work := *dir
	if work == "" {
		tmp, err := os.MkdirTemp("", "retentionbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	path := filepath.Join(work, "taskgate.db")
	s, ring, err := archivetest.OpenLedger(ctx, "sqlite:"+path, work)
	if err != nil {
		return err
	}
	defer s.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	out := filepath.Join(work, "archive")
	signer := signingkeys.NewSigner(s, ring)

	fmt.Fprintf(stdout, "a month of %d operations in %d simulated days; archived %d days after their end, IDs released after %d\n\n", *ops, *days, *after, *ids)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "day\toperations in ledger\ttombstones\tledger MB\tbytes/operation\tarchived\tarchive ops/s\tarchive MB\t")
	start := make([]time.Time, *days)
	perDay := *ops / *days
	var archived int
	var archiveBytes int64
	var peak int64
	for d := range *days {
		start[d] = time.Now()
		if err := archivetest.Fill(ctx, s, ring, "acme", fmt.Sprintf("day%02d-", d), perDay); err != nil {
			return err
		}
		var rate string
		if d >= *after {
			t0 := time.Now()
			res, err := archive.Run(ctx, s, signer, &archive.Options{Out: out, EndedBefore: start[d-*after+1], Retention: 0})
			if err != nil {
				return err
			}
			archived += res.Pruned
			for _, f := range res.Files {
				archiveBytes += f.Bytes
			}
			rate = fmt.Sprintf("%.0f", float64(res.Pruned)/time.Since(t0).Seconds())
		}
		if d >= *ids {
			// The tombstones' KeyUntil is their operations' end (Retention
			// 0 above): those of days ids or more back are released.
			for {
				n, err := s.TombstonesExpire(ctx, start[d-*ids+1], 5000)
				if err != nil {
					return err
				}
				if n < 5000 {
					break
				}
			}
		}
		size, err := settle(ctx, db)
		if err != nil {
			return err
		}
		peak = max(peak, size)
		var live, stones int
		if err := db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM operations), (SELECT COUNT(*) FROM archived_operations)").Scan(&live, &stones); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.0f\t%d\t%s\t%.1f\t\n", d+1, live, stones, float64(size)/1e6, float64(size)/float64(max(live, 1)), archived, rate, float64(archiveBytes)/1e6)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nlargest ledger: %.1f MB; %d operations archived into %.1f MB\n", float64(peak)/1e6, archived, float64(archiveBytes)/1e6)
	return nil
}

// settle checkpoints the WAL into the database file, gives every free page
// back and returns the file's size: what the ledger holds, not what it once
// held.
func settle(ctx context.Context, db *sql.DB) (int64, error) {
	for _, q := range []string{"PRAGMA incremental_vacuum", "PRAGMA wal_checkpoint(TRUNCATE)"} {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", q, err)
		}
		for rows.Next() {
		}
		rows.Close()
	}
	var size int64
	if err := db.QueryRowContext(ctx, "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").Scan(&size); err != nil {
		return 0, err
	}
	return size, nil
}
