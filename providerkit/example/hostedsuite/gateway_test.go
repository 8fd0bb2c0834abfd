package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/providerkit"
	"github.com/taskgate/taskgate/providerkit/sqlitestore"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// behindTaskgate is the gateway configuration's upstreams for hostedsuite
// at url: the ones docs/provider-kit.md shows, whose consequential tool is
// three lines, its contract the one the server declares. The upstream is
// named as the harness's calls name it, and its calls time out after a
// second, so that a longer job's answer is lost.
func behindTaskgate(t *testing.T, url string) func(string) string {
	doc, err := os.ReadFile("../../../docs/provider-kit.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	const docURL = "    url: http://127.0.0.1:9100/mcp\n"
	if !strings.HasPrefix(block, "upstreams:\n  - name: hosted_suite\n"+docURL) {
		t.Fatalf("docs/provider-kit.md's configuration is not the one this test runs:\n%s", block)
	}
	block = strings.Replace(block, "hosted_suite", "hosted_test", 1)
	block = strings.Replace(block, docURL, "    url: "+url+"\n    timeout: 1s\n", 1)
	return func(y string) string {
		head, _, _ := strings.Cut(y, "upstreams:\n")
		return head + block
	}
}

// TestBehindTaskgate puts hostedsuite, on each job store, behind a taskgate
// gateway on the same kind of ledger, and runs the failure fixtures that
// apply to a provider that keeps its own contract: the gateway's send
// times out after the server accepted (the lookup finds the job and the
// gateway attaches), a retry with the same operation ID, a retry with a
// new one, charges reconciled into the receipt, and a cancellation. Jobs
// are counted in the server's own store.
func TestBehindTaskgate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hostedsuite")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name   string
		stores func(t *testing.T) (jobs, ledger string)
	}{
		{"SQLite", func(t *testing.T) (string, string) { return "sqlite:" + filepath.Join(t.TempDir(), "jobs.db"), "" }},
		{"PostgreSQL", func(t *testing.T) (string, string) { return pgtest.Schema(t), pgtest.Schema(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs, ledgerURL := tc.stores(t)
			behindTaskgateOn(t, bin, jobs, ledgerURL)
		})
	}
}

type stage struct {
	h    *fixtures.Harness
	cs   *mcp.ClientSession
	jobs *sql.DB
}

func behindTaskgateOn(t *testing.T, bin, jobs, ledgerURL string) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := start(t, bin, jobs)
	h, err := fixtures.New(ctx, &fixtures.Options{DB: ledgerURL, EditConfig: behindTaskgate(t, srv.url)})
	if err != nil {
		t.Fatalf("start the gateway: %v", err)
	}
	t.Cleanup(h.Close)
	cs, err := h.Connect(ctx, "acme", fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	s := &stage{h: h, cs: cs, jobs: openJobs(t, jobs)}

	t.Run("the send's answer is lost after the server accepted", func(t *testing.T) {
		const opID = "settlement-1"
		s.approve(t, ctx, opID)
		// A run of 3 seconds outlasts the gateway's upstream timeout.
		res, err := cs.CallTool(ctx, fixtures.RunSuiteCall(opID, map[string]any{"suite": "settlement", "seconds": 3}))
		if err != nil || res.IsError {
			t.Fatalf("the call: %v %s", err, fixtures.ResultText(res))
		}
		op, r := s.reconciled(t, ctx, opID)
		evs, err := h.Store.EventList(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Attached while the job ran, or took its result once it had
		// ended: either way, the job the server had.
		if got := fixtures.LookupActions(evs); len(got) == 0 || got[0] != string(provider.ActionAttach) && got[0] != string(provider.ActionFetch) {
			t.Errorf("lookup actions %v, want the first to be %s or %s", got, provider.ActionAttach, provider.ActionFetch)
		}
		if op.SendCount != 1 || r.ObservedRemoteJobs != 1 || r.DuplicateJobs != 0 {
			t.Errorf("%d sends, %d remote jobs, %d duplicates; want 1, 1, 0", op.SendCount, r.ObservedRemoteJobs, r.DuplicateJobs)
		}
		s.wantJobs(t, ctx, 1)
	})

	t.Run("a retry with the same operation ID gets the same job", func(t *testing.T) {
		const opID = "settlement-2"
		s.approve(t, ctx, opID)
		call := fixtures.RunSuiteCall(opID, map[string]any{"suite": "settlement", "seconds": 0.2})
		first, _, err := taskwire.CallToolAsTask(ctx, cs, call, nil)
		if err != nil || first == nil {
			t.Fatalf("the first call: %v, task %v", err, first)
		}
		again, _, err := taskwire.CallToolAsTask(ctx, cs, call, nil)
		if err != nil || again == nil || again.ID != first.ID {
			t.Fatalf("the retry: %v, task %+v; want task %s again", err, again, first.ID)
		}
		_, r := s.reconciled(t, ctx, opID)
		if r.ObservedRemoteJobs != 1 || r.Attempts != 2 || r.AttachedAttempts != 1 {
			t.Errorf("%d remote jobs, %d attempts, %d attached; want 1, 2, 1", r.ObservedRemoteJobs, r.Attempts, r.AttachedAttempts)
		}
		s.wantJobs(t, ctx, 2)
	})

	t.Run("a retry with a new operation ID is not covered by the approval", func(t *testing.T) {
		const opID, retry = "settlement-3", "settlement-3-retry"
		s.approve(t, ctx, opID)
		call := func(id string) (*taskwire.Task, error) {
			task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(id, map[string]any{"suite": "nightly", "seconds": 0.2}), nil)
			return task, err
		}
		if _, err := call(opID); err != nil {
			t.Fatal(err)
		}
		s.reconciled(t, ctx, opID)
		task, err := call(retry)
		if err == nil || !strings.Contains(err.Error(), `retry with operation ID "`+opID+`" instead of a new one`) {
			t.Fatalf("the retry under a new operation ID: task %+v, %v; want it refused, naming the operation to retry", task, err)
		}
		s.wantJobs(t, ctx, 3)
	})

	t.Run("cancelled while the job runs", func(t *testing.T) {
		const opID = "settlement-4"
		s.approve(t, ctx, opID)
		task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(opID, map[string]any{"suite": "settlement", "seconds": 60}), nil)
		if err != nil || task == nil {
			t.Fatalf("the call: %v, task %v", err, task)
		}
		testwait.Until(t, ctx, "the server to run the job", func() (bool, error) {
			var n int
			err := s.jobs.QueryRowContext(ctx, "SELECT count(*) FROM providerkit_jobs WHERE status = 'running'").Scan(&n)
			return n == 1, errors.Join(err, fmt.Errorf("%d jobs running", n))
		})
		if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
		op := s.operation(t, ctx, opID, ledger.StateCancelled, func(*ledger.Operation) bool { return true })
		testwait.Until(t, ctx, "the server to cancel the job", func() (bool, error) {
			var status string
			err := s.jobs.QueryRowContext(ctx, "SELECT status FROM providerkit_jobs WHERE status <> 'completed'").Scan(&status)
			return status == "cancelled", errors.Join(err, fmt.Errorf("the job is %s", status))
		})
		evs, err := h.Store.EventList(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !hasEvent(evs, ledger.EventCancellationRequested) {
			t.Errorf("events %v; want %s", kinds(evs), ledger.EventCancellationRequested)
		}
		s.wantJobs(t, ctx, 4)
	})
}

// approve records an approval of opID for one job of up to 20.00 USD.
func (s *stage) approve(t *testing.T, ctx context.Context, opID string) {
	t.Helper()
	_, err := s.h.Store.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: "acme", OperationID: opID, Tool: fixtures.RunSuiteTool,
		MaxTotalCost: money.MustParse("20.00", "USD"), MaxRemoteJobs: 1,
		RetryPolicy: ledger.RetryLookupThenAttach, ExpiresAt: time.Now().Add(time.Hour), CreatedBy: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
}

// operation waits for opID to end in state want, and done to hold.
func (s *stage) operation(t *testing.T, ctx context.Context, opID string, want ledger.State, done func(*ledger.Operation) bool) *ledger.Operation {
	t.Helper()
	var op *ledger.Operation
	ok := false
	testwait.Until(t, ctx, opID+" to get where the test wants it", func() (bool, error) {
		var err error
		op, err = s.h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: opID})
		if err != nil {
			return false, err
		}
		ok = op.State == want && done(op)
		// Ended otherwise, it will not get there.
		return ok || op.State.Terminal() && op.State != want, fmt.Errorf("%s is %s", opID, op.State)
	})
	if !ok {
		t.Fatalf("%s ended %s: %s (contract %s)", opID, op.State, op.StatusMessage, op.Contract)
	}
	return op
}

// reconciled waits for opID's receipt to show it completed with the
// server's one final charge of 18.00 USD reconciled.
func (s *stage) reconciled(t *testing.T, ctx context.Context, opID string) (*ledger.Operation, *receipt.Receipt) {
	t.Helper()
	var r *receipt.Receipt
	op := s.operation(t, ctx, opID, ledger.StateCompleted, func(op *ledger.Operation) bool {
		in, err := receipt.Load(ctx, s.h.Store, op, nil)
		if err != nil {
			return false
		}
		r = receipt.Build(in)
		return r.ReconciliationStatus == receipt.ReconciliationComplete
	})
	if r.FinalCostUSD.String() != "18.00" || len(r.Charges) != 1 || r.ReviewStatus != receipt.ReviewReady {
		t.Errorf("receipt of %s: final %s in %d charges, review %s; want 18.00 in 1, ready", opID, r.FinalCostUSD, len(r.Charges), r.ReviewStatus)
	}
	return op, r
}

// wantJobs checks the server's store holds n jobs in all.
func (s *stage) wantJobs(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	var got int
	if err := s.jobs.QueryRowContext(ctx, "SELECT count(*) FROM providerkit_jobs").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("the server's store holds %d jobs, want %d", got, n)
	}
}

// openJobs opens the server's job store for counting, as another reader.
func openJobs(t *testing.T, store string) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", store
	if path, ok := strings.CutPrefix(store, "sqlite:"); ok {
		driver, dsn = "sqlite", "file:"+path+"?mode=ro"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func hasEvent(evs []*ledger.Event, kind ledger.EventKind) bool {
	for _, e := range evs {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

func kinds(evs []*ledger.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Kind))
	}
	return out
}

// logLines is a log destination a test can wait on.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A provider that declares another contract while the gateway runs: new
// calls of the tool are refused, nothing starts, and the operation
// accepted before goes on under the contract it was accepted with; a
// gateway started again adopts the new one.
func TestADeclarationThatChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	jobsPath := filepath.Join(t.TempDir(), "jobs.db")
	jobs, err := sqlitestore.Open(ctx, jobsPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jobs.Close() })
	kit := providerkit.New(jobs, nil)
	t.Cleanup(kit.Close)
	release := make(chan struct{})
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	work := func(ctx context.Context, run *providerkit.Run) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{"passed": 412}, run.Charge(ctx, providerkit.Charge{ID: run.Job.ID + "-run", Amount: money.MustParse("18.00", "USD"), Status: providerkit.ChargeFinal})
	}
	tool := &mcp.Tool{Name: "run_suite", InputSchema: map[string]any{"type": "object"}}
	server := mcp.NewServer(&mcp.Implementation{Name: "hostedsuite", Version: "1.0.0"}, nil)
	kit.AddTool(server, tool, providerkit.Paid{Work: work, Estimate: new(money.MustParse("18.00", "USD"))})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	// A test that fails early frees the job first, so that the server's
	// Close is not left waiting for the call the job holds open.
	t.Cleanup(free)

	logs := &logLines{}
	h, err := fixtures.New(ctx, &fixtures.Options{EditConfig: behindTaskgate(t, srv.URL), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("start the gateway: %v", err)
	}
	t.Cleanup(h.Close)
	cs, err := h.Connect(ctx, "acme", fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	s := &stage{h: h, cs: cs, jobs: openJobs(t, "sqlite:"+jobsPath)}

	s.approve(t, ctx, "before")
	before, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("before", nil), nil)
	if err != nil || before == nil {
		t.Fatalf("the call before the change: %v, task %v", err, before)
	}
	s.operation(t, ctx, "before", ledger.StateRunning, func(*ledger.Operation) bool { return true })

	// The provider now asks 20.00 a run. go-sdk tells the gateway's
	// session that the tools changed.
	kit.AddTool(server, tool, providerkit.Paid{Work: work, Estimate: new(money.MustParse("20.00", "USD"))})
	changedCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	testwait.Until(t, changedCtx, "the gateway to log the change", func() (bool, error) {
		return strings.Contains(logs.String(), "takes no new calls"), errors.New("no such log line yet")
	})
	s.approve(t, ctx, "after")
	// A refusal is immediate; a call the gateway took would wait for its job.
	refusedCtx, stopRefused := context.WithTimeout(ctx, 30*time.Second)
	_, _, err = taskwire.CallToolAsTask(refusedCtx, cs, fixtures.RunSuiteCall("after", nil), nil)
	stopRefused()
	if _, reason, _ := fixtures.ErrorReason(err); reason != ledger.ReasonContractUnavailable || !strings.Contains(err.Error(), "taskgate contract show hosted_test.run_suite") {
		t.Fatalf("a call after the change: %v (reason %q); want it refused with %s, saying what to do", err, reason, ledger.ReasonContractUnavailable)
	}
	if _, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "after"}); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the refused call left an operation: %v", err)
	}

	// The operation accepted before attaches and ends under its contract.
	again, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("before", nil), nil)
	if err != nil || again == nil || again.ID != before.ID {
		t.Fatalf("the retry of the operation accepted before: %v, task %+v; want task %s", err, again, before.ID)
	}
	free()
	op, r := s.reconciled(t, ctx, "before")
	if r.EstimatedCostUSD.String() != "18.00" || !strings.Contains(string(op.Contract), `"estimate":"18.00"`) {
		t.Errorf("the operation accepted before: estimate %s, contract %s; want the 18.00 one it was accepted with", r.EstimatedCostUSD, op.Contract)
	}
	s.wantJobs(t, ctx, 1)

	// Started again, the gateway adopts what the provider declares now.
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err = h.Connect(ctx, "acme", fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	s.cs = cs
	s.approve(t, ctx, "restarted")
	testwait.Until(t, ctx, "the restarted gateway to take the call", func() (bool, error) {
		_, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("restarted", nil), nil)
		return err == nil, err
	})
	op, r = s.reconciled(t, ctx, "restarted")
	if r.EstimatedCostUSD.String() != "20.00" || !strings.Contains(string(op.Contract), `"estimate":"20.00"`) {
		t.Errorf("after the restart: estimate %s, contract %s; want the 20.00 one", r.EstimatedCostUSD, op.Contract)
	}
	s.wantJobs(t, ctx, 2)
}
