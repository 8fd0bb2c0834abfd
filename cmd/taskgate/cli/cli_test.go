package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/money"
)

// ledgerFile is a migrated SQLite ledger that both the test and the
// command line open, as two processes would.
type ledgerFile struct {
	store ledger.Store
	db    string // the --db value naming it
}

func newLedger(t *testing.T) *ledgerFile {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return &ledgerFile{store: s, db: "sqlite:" + path}
}

// result is what one run of the command line left behind.
type result struct {
	code           int
	stdout, stderr string
}

// run runs taskgate with args against l's ledger.
func (l *ledgerFile) run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, append([]string{"--db", l.db}, args...), &stdout, &stderr, func(string) string { return "" })
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// ok runs taskgate and fails the test unless it exits 0.
func (l *ledgerFile) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := l.run(t, args...)
	if r.code != 0 {
		t.Fatalf("taskgate %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// checkFailure checks that r is one failure: exit 1, an "Error:" line
// containing want, and for a usage error a "Try:" line after it.
func checkFailure(t *testing.T, r result, want string, usage bool) {
	t.Helper()
	if r.code != 1 {
		t.Errorf("exit = %d, want 1 (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "Error: ") || !strings.Contains(lines[0], want) {
		t.Errorf("stderr = %q, want an Error: line containing %q", r.stderr, want)
	}
	switch {
	case usage && (len(lines) != 2 || !strings.HasPrefix(lines[1], "Try: taskgate ")):
		t.Errorf("stderr = %q, want an Error: line and a Try: hint", r.stderr)
	case !usage && len(lines) != 1:
		t.Errorf("stderr = %q, want one Error: line", r.stderr)
	}
}

// apiServer serves the REST API on l's ledger behind the real authn
// middleware.
func (l *ledgerFile) apiServer(t *testing.T) string {
	t.Helper()
	authr, err := authn.New(&authn.Options{Store: l.store, ResourceURL: "http://127.0.0.1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.New(&api.Options{Store: l.store}).Register(mux)
	srv := httptest.NewServer(authr.Middleware(mux))
	t.Cleanup(srv.Close)
	return srv.URL
}

// get sends an authenticated GET and returns the status and body.
func get(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(res.Body); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body.Bytes()
}

// accept creates an operation of tenant running hosted_test.run_suite.
func (l *ledgerFile) accept(t *testing.T, tenant, operationID string, approval bool) *ledger.Operation {
	t.Helper()
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.store.Accept(context.Background(), &ledger.AcceptParams{
		Tenant: tenant, OperationID: operationID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: args, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
		RetryPolicy: "lookup_then_attach", Priced: true,
		Approval: ledger.ApprovalRequirement{Required: approval, Estimate: money.MustParse("18.00", "USD")},
	})
	if err != nil {
		t.Fatalf("Accept(%s): %v", operationID, err)
	}
	if res.Decision != ledger.DecisionCreated {
		t.Fatalf("Accept(%s) = %s (%s), want created", operationID, res.Decision, res.Reason)
	}
	return res.Operation
}

// sending moves an accepted operation to "send started", where a worker
// takes it before a remote job can be bound or a result stored.
func (l *ledgerFile) sending(t *testing.T, op *ledger.Operation) *ledger.Operation {
	t.Helper()
	out, err := l.store.Transition(context.Background(), &ledger.TransitionParams{
		OperationRef: op.ID, From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// operation reloads an operation from the ledger.
func (l *ledgerFile) operation(t *testing.T, op *ledger.Operation) *ledger.Operation {
	t.Helper()
	got, err := l.store.OperationGet(context.Background(), &ledger.OperationGetParams{ID: op.ID})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// jobCount counts the queued River jobs of kind.
func (l *ledgerFile) jobCount(t *testing.T, kind string) int {
	t.Helper()
	jc, err := l.store.NewJobClient(&river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := jc.JobList(context.Background(), river.NewJobListParams().Kinds(kind).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Jobs)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
