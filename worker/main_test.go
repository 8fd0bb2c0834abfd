package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// gatewayBinary is the taskgate binary built with crash points, shared by
// the tests that run the gateway as a real child process.
var gatewayBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "taskgate-worker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBinary, err = buildGateway(dir)
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildGateway builds cmd/taskgate with crash points compiled in.
func buildGateway(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root with go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "taskgate")
	cmd := exec.Command("go", "build", "-tags", "crashpoints", "-o", bin, "./cmd/taskgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the gateway with crash points: %w\n%s", err, out)
	}
	return bin, nil
}

// testCtx bounds a test's own work.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newHarness starts a harness whose ledger lives in the test's directory.
func newHarness(t *testing.T, opts *fixtures.Options) *fixtures.Harness {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := fixtures.New(ctx, opts)
	if err != nil {
		t.Fatalf("start the harness: %v", err)
	}
	t.Cleanup(h.Close)
	t.Cleanup(closeIdleClients)
	return h
}

// startReplica starts a second gateway process on h's ledger, stopped when
// the test ends; name says which in failures, with its output when the
// test failed.
func startReplica(t *testing.T, ctx context.Context, h *fixtures.Harness, name string) *fixtures.Replica {
	t.Helper()
	r, err := h.StartReplica(ctx)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		closeIdleClients()
		if err := r.Stop(context.Background()); err != nil {
			t.Errorf("stop %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, r.Output())
		}
	})
	return r
}

// closeIdleClients closes the test clients' idle connections before a
// gateway stops: a graceful stop waits up to five seconds for a connection
// the client's transport opened but never sent a request on.
func closeIdleClients() {
	if tr, ok := http.DefaultTransport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

func connect(t *testing.T, ctx context.Context, h *fixtures.Harness, era fixtures.Era) *mcp.ClientSession {
	t.Helper()
	cs, err := h.Connect(ctx, tenant, era)
	if err != nil {
		t.Fatalf("connect (%s): %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

const tenant = "acme"

// startTask makes the consequential call from a tasks client and returns
// the task handle the gateway answered with.
func startTask(t *testing.T, ctx context.Context, cs *mcp.ClientSession, opID string) *taskwire.Task {
	t.Helper()
	task, res, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(opID, nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call %s = task %v, result %v, error %v; want a task", opID, task, res, err)
	}
	return task
}

// awaitOperation polls the ledger until the operation satisfies done.
func awaitOperation(t *testing.T, ctx context.Context, s ledger.Store, opID string, done func(*ledger.Operation) bool) *ledger.Operation {
	t.Helper()
	var op *ledger.Operation
	testwait.Until(t, ctx, "operation "+opID+" to reach the awaited state", func() (bool, error) {
		cur, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: opID})
		if err != nil {
			return false, fmt.Errorf("read operation: %w", err)
		}
		op = cur
		return done(op), fmt.Errorf("operation is still %s (%s, review reason %q)", op.State, op.StatusMessage, op.ReviewReason)
	})
	return op
}

func ended(op *ledger.Operation) bool { return op.State.Terminal() }

func endedOrReview(op *ledger.Operation) bool {
	return op.State.Terminal() || op.State == ledger.StateReview
}

// events lists the operation's events of one kind, with their data.
func events(t *testing.T, ctx context.Context, s ledger.Store, op *ledger.Operation, kind ledger.EventKind) []map[string]any {
	t.Helper()
	evs, err := s.EventList(ctx, op.ID)
	if err != nil {
		t.Fatalf("events of %s: %v", op.OperationID, err)
	}
	var out []map[string]any
	for _, ev := range evs {
		if ev.Kind != kind {
			continue
		}
		m := map[string]any{}
		if len(ev.Data) > 0 {
			if err := json.Unmarshal(ev.Data, &m); err != nil {
				t.Fatalf("event %s data %s: %v", kind, ev.Data, err)
			}
		}
		out = append(out, m)
	}
	return out
}

// lookups is the (answer, action) of every lookup the gateway recorded.
func lookups(t *testing.T, ctx context.Context, s ledger.Store, op *ledger.Operation) [][2]string {
	t.Helper()
	var out [][2]string
	for _, ev := range events(t, ctx, s, op, ledger.EventLookup) {
		answer, _ := ev["answer"].(string)
		action, _ := ev["action"].(string)
		out = append(out, [2]string{answer, action})
	}
	return out
}

// logHistory logs the operation's event history when the test fails.
func logHistory(t *testing.T, s ledger.Store, opID string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		op, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: opID})
		if err != nil {
			t.Logf("history of %s: %v", opID, err)
			return
		}
		evs, err := s.EventList(ctx, op.ID)
		if err != nil {
			t.Logf("history of %s: %v", opID, err)
			return
		}
		for _, ev := range evs {
			t.Logf("%s %-22s %s", ev.CreatedAt.Format("15:04:05.000"), ev.Kind, ev.Data)
		}
	})
}
