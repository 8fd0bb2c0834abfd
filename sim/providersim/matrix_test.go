package providersim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/taskwire"
)

// runMatrix calls run_matrix and decodes its result.
func runMatrix(ctx context.Context, t *testing.T, cs *mcp.ClientSession, args any, meta mcp.Meta) (MatrixResult, *mcp.CallToolResult) {
	t.Helper()
	res := call(ctx, t, cs, ToolRunMatrix, args, meta)
	return structured[MatrixResult](t, res), res
}

// succeededRunners is the runners of a matrix whose n jobs, numbered from
// first, all succeeded at the default final charge.
func succeededRunners(first, n int) []RunnerResult {
	out := make([]RunnerResult, n)
	for i := range out {
		out[i] = RunnerResult{JobID: fmt.Sprintf("hosted-suite-%d", first+i), Status: StatusSucceeded, ChargeUSD: "17.84"}
	}
	return out
}

// checkRunnerJobs checks that the record holds exactly the n runners of
// matrix, numbered 1..n, each with key and one charge.
func checkRunnerJobs(t *testing.T, s *Sim, matrix, key string, n int) {
	t.Helper()
	jobs := s.Jobs()
	if len(jobs) != n {
		t.Fatalf("record has %d jobs, want the %d runners of %s: %+v", len(jobs), n, matrix, jobs)
	}
	for i, j := range jobs {
		if j.Matrix != matrix || j.Runner != i+1 || j.IdempotencyKey != key {
			t.Errorf("job %d = %s of matrix %q runner %d key %q, want runner %d of %s with key %q", i, j.ID, j.Matrix, j.Runner, j.IdempotencyKey, i+1, matrix, key)
		}
	}
	if got := len(s.Charges()); got != n {
		t.Errorf("record has %d charges, want one per runner (%d)", got, n)
	}
}

func TestRunMatrixStartsOneJobPerRunner(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: shortJob})
			cs := connectHTTP(t, url, era, nil)
			ctx := testCtx(t)
			args := RunMatrixArgs{Suite: "settlement-regression", Runners: 4, Commit: "9f3c2e1", IdempotencyKey: "op-matrix"}

			got, res := runMatrix(ctx, t, cs, args, nil)
			want := MatrixResult{MatrixID: "hosted-matrix-1", Suite: "settlement-regression", Status: StatusSucceeded, Runners: succeededRunners(9912, 4)}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("run_matrix result = %+v, want %+v", got, want)
			}
			if res.IsError {
				t.Errorf("run_matrix isError = true, want false (text %q)", text(res))
			}
			wantText := "hosted-matrix-1 succeeded: suite settlement-regression, 4 runners (4 succeeded); charges 71.36 USD (4 final)"
			if txt := text(res); txt != wantText {
				t.Errorf("run_matrix text = %q, want %q", txt, wantText)
			}

			checkRunnerJobs(t, s, "hosted-matrix-1", "op-matrix", 4)
			for i, j := range s.Jobs() {
				if j.ID != want.Runners[i].JobID || j.Status != StatusSucceeded || j.KeySource != KeyFromArgument ||
					j.Commit != "9f3c2e1" || j.Protocol != era || j.Suite != "settlement-regression" {
					t.Errorf("job %d = %+v, want %s succeeded, key from the argument, commit 9f3c2e1, protocol %s", i, j, want.Runners[i].JobID, era)
				}
			}
			for i, c := range s.Charges() {
				if c.JobID != want.Runners[i].JobID || c.Amount != USD(17, 84) || c.Status != ChargeFinal {
					t.Errorf("charge %d = %+v, want a final 17.84 charge for %s", i, c, want.Runners[i].JobID)
				}
			}
			wantTotals := Totals{JobsStarted: 4, FinalCharges: 4, FinalChargeUSD: USD(71, 36)}
			if got := s.Totals(); got != wantTotals {
				t.Errorf("Totals() = %+v, want %+v", got, wantTotals)
			}

			// A repeated call with the key starts nothing and answers the same runners.
			again, _ := runMatrix(ctx, t, cs, args, nil)
			if !reflect.DeepEqual(again, want) {
				t.Errorf("repeated run_matrix = %+v, want %+v", again, want)
			}
			if got := s.Totals(); got != wantTotals {
				t.Errorf("Totals() after a repeated key = %+v, want %+v", got, wantTotals)
			}

			// The provider contract sees the runners as ordinary jobs.
			lookup := structured[LookupResult](t, call(ctx, t, cs, ToolLookupOperation, LookupArgs{IdempotencyKey: "op-matrix"}, nil))
			if lookup.Status != string(StatusSucceeded) || lookup.JobID != "hosted-suite-9912" || len(lookup.Jobs) != 4 {
				t.Fatalf("lookup_operation = %+v, want the 4 runners, hosted-suite-9912 first", lookup)
			}
			for i, ref := range lookup.Jobs {
				if ref.JobID != want.Runners[i].JobID || ref.Status != StatusSucceeded {
					t.Errorf("lookup_operation job %d = %+v, want %s succeeded", i, ref, want.Runners[i].JobID)
				}
			}
			charges := structured[ChargeList](t, call(ctx, t, cs, ToolListCharges, ListChargesArgs{IdempotencyKey: "op-matrix"}, nil))
			if len(charges.Charges) != 4 {
				t.Errorf("list_charges by key = %+v, want 4 charges", charges)
			}
			job := structured[JobInfo](t, call(ctx, t, cs, ToolGetJob, JobArgs{JobID: "hosted-suite-9914"}, nil))
			if job.Status != StatusSucceeded || job.ChargeUSD != "17.84" || job.ChargeStatus != ChargeFinal {
				t.Errorf("get_job of runner 3 = %+v, want succeeded with a final 17.84 charge", job)
			}
		})
	}
}

func TestRunMatrixKeyFromMetaAndHeader(t *testing.T) {
	tests := []struct {
		name   string
		meta   mcp.Meta
		header http.Header
		want   KeySource
	}{
		{name: "meta", meta: mcp.Meta{MetaIdempotencyKey: "op-matrix-meta"}, want: KeyFromMeta},
		{name: "header", header: http.Header{"Idempotency-Key": {"op-matrix-header"}}, want: KeyFromHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: shortJob})
			cs := connectHTTP(t, url, eraModern, tt.header)
			ctx := testCtx(t)
			args := RunMatrixArgs{Suite: "smoke", Runners: 2}
			first, _ := runMatrix(ctx, t, cs, args, tt.meta)
			second, _ := runMatrix(ctx, t, cs, args, tt.meta)
			if !reflect.DeepEqual(first, second) || len(first.Runners) != 2 {
				t.Errorf("run_matrix answered %+v then %+v, want the same 2 runners twice", first, second)
			}
			jobs := s.Jobs()
			if len(jobs) != 2 {
				t.Fatalf("record has %d jobs after a repeated key, want 2: %+v", len(jobs), jobs)
			}
			for _, j := range jobs {
				if j.KeySource != tt.want || j.IdempotencyKey == "" {
					t.Errorf("job %s key %q from %s, want a key from %s", j.ID, j.IdempotencyKey, j.KeySource, tt.want)
				}
			}
		})
	}
}

func TestRunMatrixRunnerFaults(t *testing.T) {
	tests := []struct {
		name   string
		faults Faults
		want   int
	}{
		{name: FaultExtraRunner, faults: Faults{ExtraRunner: true}, want: 5},
		{name: FaultMissingRunner, faults: Faults{MissingRunner: true}, want: 3},
		{name: "both", faults: Faults{ExtraRunner: true, MissingRunner: true}, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: tt.faults})
			cs := connectHTTP(t, url, eraModern, nil)
			ctx := testCtx(t)

			got, _ := runMatrix(ctx, t, cs, RunMatrixArgs{Suite: "smoke", Runners: 4, IdempotencyKey: "op-faulty"}, nil)
			want := MatrixResult{MatrixID: "hosted-matrix-1", Suite: "smoke", Status: StatusSucceeded, Runners: succeededRunners(9912, tt.want)}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("run_matrix of 4 under %s = %+v, want %+v", tt.name, got, want)
			}
			checkRunnerJobs(t, s, "hosted-matrix-1", "op-faulty", tt.want)

			// The estimate prices what was asked, not what the fault starts.
			est := structured[EstimateMatrixResult](t, call(ctx, t, cs, ToolEstimateMatrix, EstimateMatrixArgs{Suite: "smoke", Runners: 4}, nil))
			if est != (EstimateMatrixResult{EstimateUSD: "72.00", Runners: 4, Currency: "USD"}) {
				t.Errorf("estimate_matrix of 4 under %s = %+v, want 72.00 USD for 4 runners", tt.name, est)
			}
		})
	}
}

func TestMissingRunnerOfOneLeavesAnEmptyMatrix(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{MissingRunner: true}})
	cs := connectHTTP(t, url, eraLegacy, nil)
	ctx := testCtx(t)
	args := RunMatrixArgs{Suite: "smoke", Runners: 1, IdempotencyKey: "op-empty"}

	got, res := runMatrix(ctx, t, cs, args, nil)
	want := MatrixResult{MatrixID: "hosted-matrix-1", Suite: "smoke", Status: StatusFailed, Runners: []RunnerResult{}}
	if !res.IsError || !reflect.DeepEqual(got, want) {
		t.Errorf("run_matrix of 1 under missing_runner = %+v (isError %v), want isError with %+v", got, res.IsError, want)
	}
	if txt := text(res); !strings.Contains(txt, "hosted-matrix-1 failed") || !strings.Contains(txt, "no runner started") {
		t.Errorf("run_matrix text = %q, want it to say hosted-matrix-1 failed with no runner started", txt)
	}
	if r := s.Record(); len(r.Jobs) != 0 || len(r.Charges) != 0 {
		t.Errorf("record = %+v, want no job and no charge", r)
	}
	// The key has no job, so the next call is a new matrix.
	next, _ := runMatrix(ctx, t, cs, args, nil)
	if next.MatrixID != "hosted-matrix-2" || len(next.Runners) != 0 {
		t.Errorf("second run_matrix = %+v, want the empty hosted-matrix-2", next)
	}
}

func TestRunMatrixAnswersEveryJobOfItsKey(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{IgnoreIdempotencyKey: true, FailJobs: true}})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	args := RunMatrixArgs{Suite: "smoke", Runners: 1, IdempotencyKey: "op-many"}

	failed, res := runMatrix(ctx, t, cs, args, nil)
	wantFailed := MatrixResult{MatrixID: "hosted-matrix-1", Suite: "smoke", Status: StatusFailed, Runners: []RunnerResult{
		{JobID: "hosted-suite-9912", Status: StatusFailed, ChargeUSD: "0.00"},
	}}
	if !res.IsError || !reflect.DeepEqual(failed, wantFailed) {
		t.Errorf("run_matrix under fail_jobs = %+v (isError %v), want isError with %+v", failed, res.IsError, wantFailed)
	}

	// ignore_idempotency_key: the same key starts a second matrix.
	s.SetFaults(Faults{IgnoreIdempotencyKey: true})
	args.Runners = 2
	second, _ := runMatrix(ctx, t, cs, args, nil)
	wantSecond := MatrixResult{MatrixID: "hosted-matrix-2", Suite: "smoke", Status: StatusSucceeded, Runners: succeededRunners(9913, 2)}
	if !reflect.DeepEqual(second, wantSecond) {
		t.Errorf("run_matrix ignoring its key = %+v, want %+v", second, wantSecond)
	}

	// Honouring the key again, a call answers all three jobs, oldest first.
	s.SetFaults(Faults{})
	all, res := runMatrix(ctx, t, cs, args, nil)
	wantAll := MatrixResult{MatrixID: "hosted-matrix-1", Suite: "smoke", Status: StatusFailed,
		Runners: append(append([]RunnerResult{}, wantFailed.Runners...), wantSecond.Runners...)}
	if !res.IsError || !reflect.DeepEqual(all, wantAll) {
		t.Errorf("run_matrix with a key of two matrices = %+v (isError %v), want isError with %+v", all, res.IsError, wantAll)
	}
	wantText := "hosted-matrix-1 failed: suite smoke, 3 runners (2 succeeded, 1 failed); charges 35.68 USD (2 final, 1 refunded)"
	if txt := text(res); txt != wantText {
		t.Errorf("run_matrix text = %q, want %q", txt, wantText)
	}
	if got, want := s.Totals(), (Totals{JobsStarted: 3, FinalCharges: 2, FinalChargeUSD: USD(35, 68)}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}

	// A key run_suite used answers its job, which belongs to no matrix.
	suite, _ := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-suite"}, nil)
	fromSuite, _ := runMatrix(ctx, t, cs, RunMatrixArgs{Suite: "smoke", Runners: 3, IdempotencyKey: "op-suite"}, nil)
	wantFromSuite := MatrixResult{Suite: "smoke", Status: StatusSucceeded, Runners: []RunnerResult{{JobID: suite.JobID, Status: StatusSucceeded, ChargeUSD: "17.84"}}}
	if !reflect.DeepEqual(fromSuite, wantFromSuite) {
		t.Errorf("run_matrix with run_suite's key = %+v, want %+v", fromSuite, wantFromSuite)
	}
	if n := len(s.Jobs()); n != 4 {
		t.Errorf("record has %d jobs, want 4", n)
	}
}

func TestCancelledRunnersCancelTheMatrix(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: longJob})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolRunMatrix, Arguments: RunMatrixArgs{Suite: "nightly", Runners: 2, IdempotencyKey: "op-stop"}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call error: " + err.Error()}}}
		}
		done <- res
	}()
	testwait.Until(t, ctx, "both runners to be running", func() (bool, error) {
		return jobWithStatus(s, "hosted-suite-9912", StatusRunning) && jobWithStatus(s, "hosted-suite-9913", StatusRunning), nil
	})
	for _, id := range []string{"hosted-suite-9912", "hosted-suite-9913"} {
		if got := structured[CancelResult](t, call(ctx, t, cs, ToolCancelJob, JobArgs{JobID: id}, nil)); got.Status != StatusCancelled || !got.EffectReversed {
			t.Errorf("cancel_job %s = %+v, want cancelled with effect_reversed", id, got)
		}
	}
	res := <-done
	got := structured[MatrixResult](t, res)
	if !res.IsError || got.Status != StatusCancelled || len(got.Runners) != 2 {
		t.Fatalf("run_matrix after cancelling every runner = %+v (isError %v, %q), want isError, cancelled, 2 runners", got, res.IsError, text(res))
	}
	for _, r := range got.Runners {
		if r.Status != StatusCancelled || r.ChargeUSD != "0.00" {
			t.Errorf("runner %+v, want cancelled with charge 0.00", r)
		}
	}
}

func TestRunMatrixDroppedResponse(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{DropResponseAfterAccept: 1}})
			cs := connectHTTP(t, url, era, nil)
			args := RunMatrixArgs{Suite: "settlement-regression", Runners: 4, IdempotencyKey: "op-lost-matrix"}

			callCtx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
			defer cancel()
			_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: ToolRunMatrix, Arguments: args})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("run_matrix with a dropped response: error = %v, want the caller's deadline to expire", err)
			}
			// One call is one drop, however many runners it started.
			if got := s.Faults().DropResponseAfterAccept; got != 0 {
				t.Errorf("drops left = %d, want 0", got)
			}
			checkRunnerJobs(t, s, "hosted-matrix-1", "op-lost-matrix", 4)

			got, _ := runMatrix(testCtx(t), t, cs, args, nil)
			want := MatrixResult{MatrixID: "hosted-matrix-1", Suite: "settlement-regression", Status: StatusSucceeded, Runners: succeededRunners(9912, 4)}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("retry = %+v, want %+v", got, want)
			}
			if got, want := s.Totals(), (Totals{JobsStarted: 4, FinalCharges: 4, FinalChargeUSD: USD(71, 36)}); got != want {
				t.Errorf("Totals() = %+v, want %+v", got, want)
			}
		})
	}
}

func TestCrashAfterAcceptRecordsTheWholeMatrix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosted-test.json")
	saved := make(chan Record, 2)
	s, url := startHTTP(t, &Options{
		JobDuration: shortJob,
		StatePath:   path,
		Faults:      Faults{CrashAfterAccept: true},
		// What another process finds in the file when this one dies.
		Crash: func() {
			r, err := ReadRecord(path)
			if err != nil {
				t.Errorf("ReadRecord at the crash: %v", err)
			}
			saved <- r
		},
	})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go cs.CallTool(callCtx, &mcp.CallToolParams{Name: ToolRunMatrix, Arguments: RunMatrixArgs{Suite: "smoke", Runners: 3, IdempotencyKey: "op-crash"}})
	var r Record
	select {
	case r = <-saved:
	case <-ctx.Done():
		t.Fatal("crash_after_accept never called Crash")
	}
	cancel()
	if len(r.Jobs) != 3 {
		t.Fatalf("record at the crash has %d jobs, want all 3 runners: %+v", len(r.Jobs), r.Jobs)
	}
	for i, j := range r.Jobs {
		if j.Matrix != "hosted-matrix-1" || j.Runner != i+1 || j.IdempotencyKey != "op-crash" {
			t.Errorf("job %d at the crash = %+v, want runner %d of hosted-matrix-1 with key op-crash", i, j, i+1)
		}
	}
	testwait.Until(t, ctx, "the crashed call's runners to end", func() (bool, error) {
		return s.Totals().FinalCharges == 3, nil
	})
	if n := len(saved); n != 0 {
		t.Errorf("Crash was called %d more times, want once for one matrix", n)
	}
}

func TestRunMatrixIsNeverATask(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	ctx := testCtx(t)
	args := RunMatrixArgs{Suite: "smoke", Runners: 2}

	// A client that asks for a task in 2026-07-28 gets the answer directly.
	modern := connectTasks(t, url, eraModern, taskwire.EraExtension)
	task, res, err := taskwire.CallToolAsTask(ctx, modern, &mcp.CallToolParams{Name: ToolRunMatrix, Arguments: args}, nil)
	if err != nil || task != nil {
		t.Fatalf("run_matrix asked as a task = task %+v, error %v; want a direct answer", task, err)
	}
	if got := structured[MatrixResult](t, res); got.Status != StatusSucceeded || len(got.Runners) != 2 {
		t.Errorf("run_matrix answered directly = %+v, want 2 runners succeeded", got)
	}

	// In 2025-11-25 a task-augmented call of a tool that forbids tasks is refused.
	legacy := connectTasks(t, url, eraLegacy, taskwire.EraLegacy)
	if task, _, err := taskwire.CallToolAsTask(ctx, legacy, &mcp.CallToolParams{Name: ToolRunMatrix, Arguments: args}, nil); err == nil {
		t.Errorf("run_matrix as a legacy task = task %+v, want an error: it forbids tasks", task)
	}
	if n := len(s.Jobs()); n != 2 {
		t.Errorf("record has %d jobs, want only the 2 of the direct call", n)
	}
}

func TestEstimateMatrix(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraLegacy, nil)
	ctx := testCtx(t)
	for _, tt := range []struct {
		runners int
		want    string
	}{{1, "18.00"}, {4, "72.00"}, {MaxMatrixRunners, "1152.00"}} {
		got := structured[EstimateMatrixResult](t, call(ctx, t, cs, ToolEstimateMatrix, EstimateMatrixArgs{Suite: "smoke", Runners: tt.runners}, nil))
		if want := (EstimateMatrixResult{EstimateUSD: tt.want, Runners: tt.runners, Currency: "USD"}); got != want {
			t.Errorf("estimate_matrix of %d = %+v, want %+v", tt.runners, got, want)
		}
	}
	if n := len(s.Jobs()); n != 0 {
		t.Errorf("estimate_matrix changed the record: %d jobs, want none", n)
	}
}

func TestMatrixToolsRejectBadArguments(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	tests := []struct {
		name string
		args map[string]any
		want []string // substrings of the error text
	}{
		{name: "no runners", args: map[string]any{"suite": "smoke", "runners": 0}, want: []string{"runners", "from 1 to 64", "got 0"}},
		{name: "too many runners", args: map[string]any{"suite": "smoke", "runners": 65}, want: []string{"runners", "from 1 to 64", "got 65"}},
		{name: "runners missing", args: map[string]any{"suite": "smoke"}, want: []string{"runners"}},
		{name: "blank suite", args: map[string]any{"suite": " ", "runners": 2}, want: []string{"suite must name a test suite"}},
	}
	for _, tool := range []string{ToolRunMatrix, ToolEstimateMatrix} {
		for _, tt := range tests {
			res := call(ctx, t, cs, tool, tt.args, nil)
			if !res.IsError {
				t.Errorf("%s with %s: isError = false, want true", tool, tt.name)
				continue
			}
			for _, w := range tt.want {
				if !strings.Contains(text(res), w) {
					t.Errorf("%s with %s: error %q, want it to contain %q", tool, tt.name, text(res), w)
				}
			}
		}
	}
	if r := s.Record(); len(r.Jobs) != 0 || len(r.Charges) != 0 {
		t.Errorf("record after rejected calls = %+v, want no job and no charge", r)
	}
}

func TestMatrixToolsListing(t *testing.T) {
	s := New(nil)
	t.Cleanup(func() { s.Close() })
	res, err := connectInMemory(t, s).ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
	}
	run, est := tools[ToolRunMatrix], tools[ToolEstimateMatrix]
	if run == nil || est == nil {
		t.Fatalf("tools/list lacks run_matrix or estimate_matrix: %v", res.Tools)
	}
	a := run.Annotations
	if a == nil || a.DestructiveHint == nil || *a.DestructiveHint || a.IdempotentHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("run_matrix annotations = %+v, want destructiveHint false, idempotentHint false, openWorldHint true", a)
	}
	if a := est.Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint {
		t.Errorf("estimate_matrix annotations = %+v, want read-only and idempotent", a)
	}
	for name, want := range map[string]string{ToolRunMatrix: `"required":["suite","runners"]`, ToolEstimateMatrix: `"required":["suite","runners"]`} {
		raw, err := json.Marshal(tools[name].InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		schema := string(raw)
		if !strings.Contains(schema, want) || !strings.Contains(schema, `"runners":{`) {
			t.Errorf("%s input schema = %s, want it to contain %s", name, schema, want)
		}
	}
}

func TestMatrixStateFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosted-test.json")
	opts := &Options{JobDuration: shortJob, StatePath: path}
	s1, url := startHTTP(t, opts)
	ctx := testCtx(t)
	args := RunMatrixArgs{Suite: "smoke", Runners: 2, IdempotencyKey: "op-kept"}
	first, _ := runMatrix(ctx, t, connectHTTP(t, url, eraModern, nil), args, nil)
	s1.Close()
	saved := s1.Record()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"matrix": "hosted-matrix-1"`, `"runner": 2`, `"next_matrix_number": 2`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("state file lacks %s:\n%s", want, data)
		}
	}
	read, err := ReadRecord(path)
	if err != nil || !sameJSON(t, read, saved) {
		t.Errorf("ReadRecord = %+v, %v\nwant the saved %+v", read, err, saved)
	}
	if len(read.Jobs) != 2 || read.Jobs[1].Matrix != "hosted-matrix-1" || read.Jobs[1].Runner != 2 {
		t.Errorf("jobs read back = %+v, want runner 2 of hosted-matrix-1 last", read.Jobs)
	}

	s2, url2 := startHTTP(t, opts)
	if restored := s2.Record(); !sameJSON(t, restored, saved) {
		t.Errorf("restored record = %+v\nwant the saved %+v", restored, saved)
	}
	cs2 := connectHTTP(t, url2, eraLegacy, nil)
	again, _ := runMatrix(ctx, t, cs2, args, nil)
	if !reflect.DeepEqual(again, first) {
		t.Errorf("a known key after restart = %+v, want %+v", again, first)
	}
	next, _ := runMatrix(ctx, t, cs2, RunMatrixArgs{Suite: "smoke", Runners: 1, IdempotencyKey: "op-next"}, nil)
	if next.MatrixID != "hosted-matrix-2" || len(next.Runners) != 1 || next.Runners[0].JobID != "hosted-suite-9914" {
		t.Errorf("a new matrix after restart = %+v, want hosted-matrix-2 with hosted-suite-9914", next)
	}
}

func TestStateFileWithoutMatricesLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosted-test.json")
	// A record written before run_matrix: no matrix number, no matrix fields.
	old := `{"version": 1, "next_job_number": 9913,
	 "jobs": [{"job_id": "hosted-suite-9912", "key_source": "none", "suite": "smoke", "status": "succeeded",
	  "passed": 412, "failed": 0, "created_at": "2026-11-30T09:00:00Z", "updated_at": "2026-11-30T09:00:03Z",
	  "number": 9912, "plan": {"due_at": "2026-11-30T09:00:03Z", "invoice": true, "estimate_usd": "18.00", "final_usd": "17.84"}}],
	 "charges": [{"charge_id": "charge-9912", "job_id": "hosted-suite-9912", "amount_usd": "17.84", "currency": "USD",
	  "status": "final", "created_at": "2026-11-30T09:00:00Z", "updated_at": "2026-11-30T09:00:03Z"}]}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	s, url := startHTTP(t, &Options{JobDuration: shortJob, StatePath: path})
	if jobs := s.Jobs(); len(jobs) != 1 || jobs[0].Matrix != "" || jobs[0].Runner != 0 {
		t.Fatalf("jobs loaded from an older file = %+v, want the one job, in no matrix", jobs)
	}
	got, _ := runMatrix(testCtx(t), t, connectHTTP(t, url, eraModern, nil), RunMatrixArgs{Suite: "smoke", Runners: 1}, nil)
	if got.MatrixID != "hosted-matrix-1" || len(got.Runners) != 1 || got.Runners[0].JobID != "hosted-suite-9913" {
		t.Errorf("run_matrix over an older file = %+v, want hosted-matrix-1 with hosted-suite-9913", got)
	}
	if got, want := s.Totals(), (Totals{JobsStarted: 2, FinalCharges: 2, FinalChargeUSD: USD(35, 68)}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
}
