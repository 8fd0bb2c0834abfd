package daemon_test

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/postgres"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// stage is a provider and the configuration of a gateway in front of it on
// the ledger db.
func stage(t *testing.T, db string) (*config.Config, net.Listener) {
	t.Helper()
	return stageWith(t, db, fixtures.ConfigOptions{})
}

// stageWith is stage with the harness configuration options o.
func stageWith(t *testing.T, db string, o fixtures.ConfigOptions) (*config.Config, net.Listener) {
	t.Helper()
	sim := providersim.New(&providersim.Options{JobDuration: time.Minute})
	srv := httptest.NewServer(sim.HTTPHandler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	file := filepath.Join(t.TempDir(), "taskgate.yaml")
	cfg, err := config.Parse(strings.NewReader(fixtures.ConfigYAML(srv.URL+"/mcp", ln.Addr().String(), db, o)), file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, ln
}

func TestNoWorkerIsRefusedOnSQLite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "taskgate.db")
	cfg, ln := stage(t, "sqlite:"+path)
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Listener: ln, NoWorker: true})
	if err == nil {
		_ = d.Stop(ctx)
		t.Fatal("Start with NoWorker on SQLite succeeded, want it refused")
	}
	if !strings.Contains(err.Error(), "needs a PostgreSQL ledger") {
		t.Errorf("Start = %v, want it to say a PostgreSQL ledger is needed", err)
	}
}

// TestNoWorkerAcceptsButRunsNothing checks that a gateway without its
// worker still answers a consequential call with a task, and that the
// dispatch job it enqueued is left for another replica's worker.
func TestNoWorkerAcceptsButRunsNothing(t *testing.T) {
	url := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, ln := stage(t, url)
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Listener: ln, NoWorker: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.WithoutCancel(ctx))
	if d.Worker != nil {
		t.Fatal("the daemon started a worker with NoWorker set")
	}
	key, _, err := authn.NewAPIKey(ctx, d.Store, "t1", "test")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := fixtures.Dial(ctx, d.URL+"/mcp", key, fixtures.EraExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	task, res, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("no-worker-1", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("run_suite = task %v, %v (%s), want a task", task, err, fixtures.ResultText(res))
	}
	// A running worker would claim the job within its fetch_poll (20ms
	// here); give it many times that.
	time.Sleep(500 * time.Millisecond)
	if n, err := d.Store.OperationCount(ctx, []ledger.State{ledger.StateAccepted}); err != nil || n != 1 {
		t.Errorf("accepted operations = %d, %v; want the one, undispatched", n, err)
	}
	var jobs int
	pool := d.Store.(*postgres.Store).Pool()
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'available'").Scan(&jobs); err != nil || jobs != 1 {
		t.Errorf("available jobs = %d, %v; want the dispatch job, untaken", jobs, err)
	}
}
