// Command archivebench measures how fast taskgate archive moves ended,
// reconciled operations out of a ledger: it fills a fresh ledger of its own
// with -n completed operations whose receipts are issued, then archives
// them all while one client keeps accepting new operations, and prints the
// archive's throughput (operations per second, written, signed, read back
// and deleted), the archive's size, and the slowest acceptance during the
// run. It exits non-zero only when something failed. It must never touch a
// ledger it did not create.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/taskgate/taskgate/archive"
	"github.com/taskgate/taskgate/archive/archivetest"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/signingkeys"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "archivebench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("archivebench", flag.ContinueOnError)
	n := fs.Int("n", 10000, "operations to archive")
	batch := fs.Int("batch", ledger.DefaultArchiveBatch, "operations deleted per transaction")
	dir := fs.String("dir", "", "directory for the ledger and the archive (default a new temporary directory, removed afterwards)")
	db := fs.String("db", "", "an empty PostgreSQL database URL to use instead of SQLite in -dir")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 {
		return fmt.Errorf("-n must be at least 1, got %d", *n)
	}
	work := *dir
	if work == "" {
		tmp, err := os.MkdirTemp("", "archivebench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	ledgerURL := *db
	if ledgerURL == "" {
		ledgerURL = "sqlite:" + filepath.Join(work, "taskgate.db")
	}
	s, ring, err := archivetest.OpenLedger(ctx, ledgerURL, work)
	if err != nil {
		return err
	}
	defer s.Close()

	start := time.Now()
	if err := archivetest.Fill(ctx, s, ring, "acme", "archived-", *n); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "filled the ledger (%s) with %d completed operations with issued receipts in %s\n", dburl.Describe(ledgerURL), *n, time.Since(start).Round(time.Millisecond))

	// One client accepts new operations throughout the run.
	stop := make(chan struct{})
	var (
		wg        sync.WaitGroup
		latencies []time.Duration
		acceptErr error
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			if _, err := s.Accept(ctx, archivetest.AcceptParams("acme", fmt.Sprintf("live-%06d", i))); err != nil {
				acceptErr = err
				return
			}
			latencies = append(latencies, time.Since(t0))
		}
	})
	out := filepath.Join(work, "archive")
	start = time.Now()
	res, err := archive.Run(ctx, s, signingkeys.NewSigner(s, ring), &archive.Options{Out: out, EndedBefore: time.Now(), Retention: 24 * time.Hour, Batch: *batch})
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if acceptErr != nil {
		return fmt.Errorf("an acceptance failed during the archive: %w", acceptErr)
	}
	if res.Pruned != *n {
		return fmt.Errorf("archived %d and pruned %d of %d operations (skipped %v)", res.Operations, res.Pruned, *n, res.Skipped)
	}
	var size int64
	for _, f := range res.Files {
		size += f.Bytes
	}
	start = time.Now()
	rep, err := archive.Verify(ctx, out, signingkeysOf(ctx, s))
	if err != nil {
		return err
	}
	if rep.Problem != nil {
		return fmt.Errorf("the archive does not verify: %w", rep.Problem)
	}
	verified := time.Since(start)
	slices.Sort(latencies)
	fmt.Fprintf(stdout, "archived %d operations in %s: %.0f operations/s (batch %d), %d bytes compressed (%.0f bytes/operation)\n",
		res.Pruned, elapsed.Round(time.Millisecond), float64(res.Pruned)/elapsed.Seconds(), *batch, size, float64(size)/float64(res.Pruned))
	fmt.Fprintf(stdout, "verified the archive offline in %s: %.0f operations/s\n", verified.Round(time.Millisecond), float64(rep.Operations)/verified.Seconds())
	if len(latencies) > 0 {
		fmt.Fprintf(stdout, "%d acceptances during the run: p50 %s, p99 %s, max %s\n", len(latencies),
			latencies[len(latencies)/2].Round(time.Microsecond), latencies[len(latencies)*99/100].Round(time.Microsecond), latencies[len(latencies)-1].Round(time.Microsecond))
	}
	return nil
}

// signingkeysOf returns the ledger's signing keys to verify with; none
// when they cannot be read, which verification then reports.
func signingkeysOf(ctx context.Context, s ledger.Store) receipt.PublicKeys {
	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		return nil
	}
	return signingkeys.PublicKeys(keys)
}
