package providerkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/providerkit"
	"github.com/taskgate/taskgate/providerkit/sqlitestore"
)

// suite is a paid tool's work for the tests: it counts its runs, charges
// 18.00 USD pending when it starts and final when it ends, and waits for
// release (or its context) before it ends.
type suite struct {
	runs    atomic.Int32
	release chan struct{}
	started chan string // job IDs, as each run starts
}

func newSuite() *suite {
	return &suite{release: make(chan struct{}), started: make(chan string, 16)}
}

func (s *suite) work(ctx context.Context, run *providerkit.Run) (any, error) {
	s.runs.Add(1)
	charge := providerkit.Charge{ID: run.Job.ID + "-compute", Amount: money.MustParse("18.00", "USD"), Kind: "compute", Status: providerkit.ChargePending}
	if err := run.Charge(ctx, charge); err != nil {
		return nil, err
	}
	s.started <- run.Job.ID
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var args struct{ Suite string }
	if err := json.Unmarshal(run.Job.Arguments, &args); err != nil {
		return nil, err
	}
	charge.Status = providerkit.ChargeFinal
	if err := run.Charge(context.WithoutCancel(ctx), charge); err != nil {
		return nil, err
	}
	return map[string]any{"suite": args.Suite, "passed": 412}, nil
}

var runSuite = &mcp.Tool{
	Name:        "run_suite",
	Description: "Runs a hosted test suite; billed per run.",
	InputSchema: map[string]any{"type": "object", "properties": map[string]any{"suite": map[string]any{"type": "string"}}},
}

// world is a kit-built server on a SQLite job store and a go-sdk client
// connected to it.
type world struct {
	path   string
	kit    *providerkit.Kit
	suite  *suite
	client *mcp.ClientSession
	closed sync.Once
}

func newWorld(t *testing.T, path string, s *suite) *world {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	kit := providerkit.New(store, &providerkit.Options{Poll: 10 * time.Millisecond})
	server := mcp.NewServer(&mcp.Implementation{Name: "hosted-test", Version: "1.0.0"}, nil)
	kit.AddTool(server, runSuite, providerkit.Paid{Work: s.work, Estimate: new(money.MustParse("18.00", "USD"))})
	if err := kit.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{path: path, kit: kit, suite: s, client: cs}
	t.Cleanup(w.close)
	return w
}

func (w *world) close() {
	w.closed.Do(func() {
		w.client.Close()
		w.kit.Close()
	})
}

func (w *world) call(ctx context.Context, name, key string, args map[string]any) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if key != "" {
		p.Meta = mcp.Meta{providerkit.KeyMeta: key}
	}
	return w.client.CallTool(ctx, p)
}

// structured decodes a result's structured content into v.
func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

type jobAnswer struct {
	JobID  string          `json:"job_id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

func TestOneJobPerKey(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, filepath.Join(t.TempDir(), "jobs.db"), newSuite())
	// Three calls with one key, at once: one job, one run of the work.
	var wg sync.WaitGroup
	answers := make([]jobAnswer, 3)
	for i := range answers {
		wg.Go(func() {
			res, err := w.call(ctx, "run_suite", "key-1", map[string]any{"suite": "settlement"})
			if err != nil || res.IsError {
				t.Errorf("call %d: %v, %+v", i, err, res)
				return
			}
			structured(t, res, &answers[i])
		})
	}
	id := <-w.suite.started
	close(w.suite.release)
	wg.Wait()
	for i, a := range answers {
		if a.JobID != id || a.Status != "completed" || string(a.Result) != `{"passed":412,"suite":"settlement"}` {
			t.Errorf("answer %d = %+v; want job %s completed with its result", i, a, id)
		}
	}
	// After the job ended, the key still answers with it.
	res, err := w.call(ctx, "run_suite", "key-1", map[string]any{"suite": "settlement"})
	var a jobAnswer
	if err == nil {
		structured(t, res, &a)
	}
	if err != nil || a.JobID != id || a.Status != "completed" {
		t.Errorf("a call after the end = %+v, %v; want job %s", a, err, id)
	}
	if n := w.suite.runs.Load(); n != 1 {
		t.Errorf("the work ran %d times, want once", n)
	}
}

func TestACallWithoutAKeyIsRefused(t *testing.T) {
	w := newWorld(t, filepath.Join(t.TempDir(), "jobs.db"), newSuite())
	_, err := w.call(t.Context(), "run_suite", "", map[string]any{"suite": "settlement"})
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpc.Message, providerkit.KeyMeta) {
		t.Fatalf("a call without a key = %v; want -32602 naming %s", err, providerkit.KeyMeta)
	}
	if n := w.suite.runs.Load(); n != 0 {
		t.Errorf("the work ran %d times, want never", n)
	}
}

// The contract tools answer what the gateway asks after a lost response.
func TestContractTools(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, filepath.Join(t.TempDir(), "jobs.db"), newSuite())
	lookup := func(key string) (out struct {
		Status string `json:"status"`
		JobID  string `json:"job_id"`
		Jobs   []struct {
			JobID  string `json:"job_id"`
			Status string `json:"status"`
		} `json:"jobs"`
	}) {
		t.Helper()
		res, err := w.call(ctx, providerkit.LookupTool, "", map[string]any{"idempotency_key": key})
		if err != nil || res.IsError {
			t.Fatalf("lookup_operation(%s): %v, %+v", key, err, res)
		}
		structured(t, res, &out)
		return out
	}
	if l := lookup("key-1"); l.Status != "not_found" || l.JobID != "" || len(l.Jobs) != 0 {
		t.Fatalf("lookup of an unknown key = %+v; want not_found", l)
	}

	// The send's answer is lost: the client gives up while the job runs.
	sendCtx, cancel := context.WithCancel(ctx)
	sent := make(chan error, 1)
	go func() {
		_, err := w.call(sendCtx, "run_suite", "key-1", map[string]any{"suite": "settlement"})
		sent <- err
	}()
	id := <-w.suite.started
	cancel()
	<-sent
	if l := lookup("key-1"); l.Status != "running" || l.JobID != id || len(l.Jobs) != 1 || l.Jobs[0].JobID != id {
		t.Fatalf("lookup while the job runs = %+v; want running, %s", l, id)
	}
	charges := func() (out struct {
		Charges []struct {
			ChargeID, JobID, Amount, Currency, Kind, Status string
		} `json:"charges"`
	}) {
		t.Helper()
		res, err := w.call(ctx, providerkit.ListChargesTool, "", map[string]any{"job_id": id})
		if err != nil || res.IsError {
			t.Fatalf("list_charges: %v, %+v", err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		// The field names are the contract's: charge_id, job_id, amount, ….
		r := strings.NewReplacer(`"charge_id"`, `"ChargeID"`, `"job_id"`, `"JobID"`)
		if err := json.Unmarshal([]byte(r.Replace(string(b))), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if c := charges(); len(c.Charges) != 1 || c.Charges[0].ChargeID != id+"-compute" || c.Charges[0].Amount != "18.00" || c.Charges[0].Currency != "USD" || c.Charges[0].Status != "pending" || c.Charges[0].Kind != "compute" {
		t.Fatalf("charges while the job runs = %+v; want one pending 18.00 USD compute", c)
	}
	close(w.suite.release)
	var job jobAnswer
	for job.Status != "completed" {
		res, err := w.call(ctx, providerkit.GetJobTool, "", map[string]any{"job_id": id})
		if err != nil {
			t.Fatal(err)
		}
		structured(t, res, &job)
	}
	if string(job.Result) != `{"passed":412,"suite":"settlement"}` {
		t.Errorf("get_job result = %s", job.Result)
	}
	if l := lookup("key-1"); l.Status != "completed" {
		t.Errorf("lookup after the end = %+v; want completed", l)
	}
	if c := charges(); len(c.Charges) != 1 || c.Charges[0].Status != "final" {
		t.Errorf("charges after the end = %+v; want the one charge, final", c)
	}
	res, err := w.call(ctx, providerkit.GetJobTool, "", map[string]any{"job_id": "job_nope"})
	if err != nil || !res.IsError {
		t.Errorf("get_job of an unknown job = %+v, %v; want a tool error", res, err)
	}
}

func TestCancelJob(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, filepath.Join(t.TempDir(), "jobs.db"), newSuite())
	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := w.call(ctx, "run_suite", "key-1", map[string]any{"suite": "settlement"})
		if err != nil {
			t.Error(err)
		}
		answer <- res
	}()
	id := <-w.suite.started
	res, err := w.call(ctx, providerkit.CancelJobTool, "", map[string]any{"job_id": id})
	var job jobAnswer
	if err == nil {
		structured(t, res, &job)
	}
	if err != nil || job.Status != "cancelled" {
		t.Fatalf("cancel_job = %+v, %v; want cancelled", job, err)
	}
	res = <-answer
	structured(t, res, &job)
	if !res.IsError || job.JobID != id || job.Status != "cancelled" {
		t.Errorf("the waiting call's answer = %+v (isError %v); want job %s cancelled, an error", job, res.IsError, id)
	}
}

// A server that stops mid-job resumes the job when it starts again: the
// retry gets the job it had, and the work's charge is recorded once.
func TestResumeAfterRestart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "jobs.db")
	first := newWorld(t, path, newSuite())
	sendCtx, cancel := context.WithCancel(ctx)
	go first.call(sendCtx, "run_suite", "key-1", map[string]any{"suite": "settlement"})
	id := <-first.suite.started
	cancel()
	first.close()

	s := newSuite()
	close(s.release)
	second := newWorld(t, path, s)
	// Bounded: without the resumed work, the retry would wait for ever.
	retryCtx, cancelRetry := context.WithTimeout(ctx, 30*time.Second)
	defer cancelRetry()
	res, err := second.call(retryCtx, "run_suite", "key-1", map[string]any{"suite": "settlement"})
	if err != nil {
		t.Fatal(err)
	}
	var job jobAnswer
	structured(t, res, &job)
	if job.JobID != id || job.Status != "completed" {
		t.Errorf("the retry after the restart = %+v; want job %s, completed", job, id)
	}
	if got := <-s.started; got != id {
		t.Errorf("the resumed work ran job %s, want %s", got, id)
	}
	if n := s.runs.Load(); n != 1 {
		t.Errorf("after the restart the work ran %d times, want once", n)
	}
	res, err = second.call(ctx, providerkit.ListChargesTool, "", map[string]any{"job_id": id})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.StructuredContent); strings.Count(string(b), "charge_id") != 1 || !strings.Contains(string(b), `"final"`) {
		t.Errorf("charges after the restart = %s; want one, final", b)
	}
}
