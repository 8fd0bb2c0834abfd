package providersim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
)

// longJob outlives every test; only cancel_job or Close ends it.
const longJob = time.Hour

// startRunning starts run_suite in the background and waits until the record
// shows the job running. The returned channel yields the call's result.
func startRunning(t *testing.T, s *Sim, cs *mcp.ClientSession, key string) (string, <-chan *mcp.CallToolResult) {
	t.Helper()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: ToolRunSuite, Arguments: RunSuiteArgs{Suite: "nightly", IdempotencyKey: key}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call error: " + err.Error()}}}
		}
		done <- res
	}()
	var id string
	testwait.Until(t, testCtx(t), "a running job for "+key, func() (bool, error) {
		for _, j := range s.Jobs() {
			if j.IdempotencyKey == key && j.Status == StatusRunning {
				id = j.ID
				return true, nil
			}
		}
		return false, nil
	})
	return id, done
}

func TestCancelRunningJobReversesItsEffect(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: longJob})
			cs := connectHTTP(t, url, era, nil)
			ctx := testCtx(t)
			id, done := startRunning(t, s, cs, "op-cancel")

			pending := structured[ChargeList](t, call(ctx, t, cs, ToolListCharges, ListChargesArgs{JobID: id}, nil))
			if len(pending.Charges) != 1 || pending.Charges[0].Status != ChargePending || pending.Charges[0].AmountUSD != "18.00" {
				t.Errorf("charges of a running job = %+v, want one pending 18.00", pending)
			}

			got := structured[CancelResult](t, call(ctx, t, cs, ToolCancelJob, JobArgs{JobID: id}, nil))
			if got.JobID != id || got.Status != StatusCancelled || !got.EffectReversed {
				t.Errorf("cancel_job of a running job = %+v, want cancelled with effect_reversed", got)
			}
			res := <-done
			if r := structured[SuiteResult](t, res); !res.IsError || r.Status != StatusCancelled || r.ChargeUSD != "0.00" {
				t.Errorf("the waiting run_suite answered %+v (isError %v), want isError, cancelled, charge 0.00", r, res.IsError)
			}
			charges := s.Charges()
			if len(charges) != 1 || charges[0].Status != ChargeRefunded || charges[0].Amount != 0 {
				t.Errorf("charges = %+v, want one refunded charge of 0.00", charges)
			}
			if !jobWithStatus(s, id, StatusCancelled) {
				t.Errorf("record = %+v, want %s cancelled", s.Jobs(), id)
			}

			again := structured[CancelResult](t, call(ctx, t, cs, ToolCancelJob, JobArgs{JobID: id}, nil))
			if again.Status != StatusCancelled || !again.EffectReversed {
				t.Errorf("cancelling again = %+v, want cancelled, effect_reversed", again)
			}
		})
	}
}

func TestCancelCompletedJobChangesNothing(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	run, _ := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-1"}, nil)
	before := s.Record()

	got := structured[CancelResult](t, call(ctx, t, cs, ToolCancelJob, JobArgs{JobID: run.JobID}, nil))
	want := CancelResult{JobID: run.JobID, Status: StatusSucceeded, EffectReversed: false, Message: "job already completed; the effect was not reversed"}
	if got != want {
		t.Errorf("cancel_job of a completed job = %+v, want %+v", got, want)
	}
	if after := s.Record(); !sameJSON(t, before, after) {
		t.Errorf("cancelling a completed job changed the record:\nbefore %+v\nafter  %+v", before, after)
	}

	unknown := call(ctx, t, cs, ToolCancelJob, JobArgs{JobID: "hosted-suite-1"}, nil)
	if !unknown.IsError || !strings.Contains(text(unknown), `no job "hosted-suite-1"`) {
		t.Errorf("cancel_job of an unknown job = isError %v %q, want isError naming the job", unknown.IsError, text(unknown))
	}
}

func TestGetJobListChargesAndEstimate(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraLegacy, nil)
	ctx := testCtx(t)
	run, _ := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-1"}, nil)

	job := structured[JobInfo](t, call(ctx, t, cs, ToolGetJob, JobArgs{JobID: run.JobID}, nil))
	if job.JobID != run.JobID || job.Status != StatusSucceeded || job.Suite != "smoke" || job.ChargeUSD != "17.84" ||
		job.ChargeStatus != ChargeFinal || job.Result == nil || *job.Result != (JobOutcome{Passed: suiteTests}) {
		t.Errorf("get_job = %+v, want %s succeeded with a final 17.84 charge and its result", job, run.JobID)
	}
	missing := call(ctx, t, cs, ToolGetJob, JobArgs{JobID: "hosted-suite-42"}, nil)
	if !missing.IsError || !strings.Contains(text(missing), `no job "hosted-suite-42"`) {
		t.Errorf("get_job of an unknown job = isError %v %q, want isError naming the job", missing.IsError, text(missing))
	}

	wantCharge := ChargeInfo{ChargeID: "charge-9912", JobID: run.JobID, Kind: ChargeKindSuite, AmountUSD: "17.84", Currency: "USD", Status: ChargeFinal}
	for _, args := range []ListChargesArgs{{JobID: run.JobID}, {IdempotencyKey: "op-1"}} {
		list := structured[ChargeList](t, call(ctx, t, cs, ToolListCharges, args, nil))
		if len(list.Charges) != 1 || list.Charges[0] != wantCharge {
			t.Errorf("list_charges(%+v) = %+v, want [%+v]", args, list, wantCharge)
		}
	}
	none := structured[ChargeList](t, call(ctx, t, cs, ToolListCharges, ListChargesArgs{IdempotencyKey: "op-never"}, nil))
	if none.Charges == nil || len(none.Charges) != 0 {
		t.Errorf("list_charges of an unknown key = %+v, want an empty list", none)
	}
	for _, args := range []ListChargesArgs{{}, {JobID: run.JobID, IdempotencyKey: "op-1"}} {
		if res := call(ctx, t, cs, ToolListCharges, args, nil); !res.IsError {
			t.Errorf("list_charges(%+v) isError = false, want true: it takes exactly one of job_id and idempotency_key", args)
		}
	}

	est := structured[EstimateResult](t, call(ctx, t, cs, ToolEstimateSuite, EstimateArgs{Suite: "smoke"}, nil))
	if est != (EstimateResult{EstimateUSD: "18.00", Currency: "USD"}) {
		t.Errorf("estimate_suite = %+v, want 18.00 USD", est)
	}
	if n := len(s.Jobs()); n != 1 {
		t.Errorf("read-only tools changed the record: %d jobs, want 1", n)
	}
}

func TestToolsListing(t *testing.T) {
	s := New(nil)
	t.Cleanup(func() { s.Close() })
	cs := connectInMemory(t, s)
	res, err := cs.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
	}
	for _, name := range []string{ToolRunSuite, ToolLookupOperation, ToolGetJob, ToolListCharges, ToolCancelJob, ToolEstimateSuite} {
		tool, ok := tools[name]
		if !ok {
			t.Errorf("tools/list lacks %s", name)
			continue
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if !bytes.Contains(schema, []byte(`"type":"object"`)) {
			t.Errorf("%s input schema = %s, want an object schema", name, schema)
		}
	}
	run := tools[ToolRunSuite]
	if run == nil {
		t.Fatal("no run_suite")
	}
	a := run.Annotations
	if a == nil || a.DestructiveHint == nil || *a.DestructiveHint || a.IdempotentHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("run_suite annotations = %+v, want destructiveHint false, idempotentHint false, openWorldHint true", a)
	}
	schema, _ := json.Marshal(run.InputSchema)
	for _, want := range []string{`"required":["suite"]`, `"idempotency_key"`, `"commit"`} {
		if !bytes.Contains(schema, []byte(want)) {
			t.Errorf("run_suite input schema = %s, want it to contain %s", schema, want)
		}
	}
	empty := call(testCtx(t), t, cs, ToolRunSuite, RunSuiteArgs{Suite: " "}, nil)
	if !empty.IsError || len(s.Jobs()) != 0 {
		t.Errorf("run_suite with a blank suite = isError %v, %d jobs; want isError and no job", empty.IsError, len(s.Jobs()))
	}
}

func TestRecordOverHTTPMatchesTheSim(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{FailJobs: true}})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-1"}, nil)
	s.SetFaults(Faults{})
	runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-2"}, nil)

	resp, err := http.Get(url + "/sim/record")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /sim/record = %s %q, want 200 application/json", resp.Status, resp.Header.Get("Content-Type"))
	}
	var got Record
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := Record{Jobs: s.Jobs(), Charges: s.Charges(), Totals: s.Totals()}
	if !sameJSON(t, got, want) {
		t.Errorf("GET /sim/record = %+v\nwant %+v", got, want)
	}
	if len(got.Jobs) != 2 || len(got.Charges) != 2 || got.Totals.FinalChargeUSD != USD(17, 84) {
		t.Errorf("record = %+v, want two jobs, two charges (one refunded), 17.84 final", got)
	}
}

func TestStateFileSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosted-test.json")
	clock := newFakeClock()
	crashed := make(chan string, 1)
	opts := &Options{
		JobDuration: shortJob,
		Clock:       clock.Now,
		StatePath:   path,
		Crash:       func() { crashed <- "crash" },
	}
	s1, url := startHTTP(t, opts)
	cs1 := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	runSuite(ctx, t, cs1, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-done"}, nil)

	// The next job is accepted, then the process "dies" before answering.
	s1.SetFaults(Faults{CrashAfterAccept: true, SlowBy: longJob})
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go cs1.CallTool(callCtx, &mcp.CallToolParams{Name: ToolRunSuite, Arguments: RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-crash"}})
	select {
	case <-crashed:
	case <-ctx.Done():
		t.Fatal("crash_after_accept never called Crash")
	}
	cancel()
	testwait.Until(t, testCtx(t), "the crashed job to be running", func() (bool, error) { return jobWithStatus(s1, "hosted-suite-9913", StatusRunning), nil })
	s1.Close()
	saved := s1.Record()
	// Another process reads the same record from the file.
	if read, err := ReadRecord(path); err != nil || !sameJSON(t, read, saved) {
		t.Errorf("ReadRecord = %+v, %v\nwant the saved %+v", read, err, saved)
	}

	// A new process over the same file, its clock past the job's end.
	clock.Advance(2 * longJob)
	s2, url2 := startHTTP(t, opts)
	restored := s2.Record()
	if len(restored.Jobs) != 2 || restored.Jobs[0] != saved.Jobs[0] || restored.Jobs[1].ID != "hosted-suite-9913" ||
		restored.Jobs[1].IdempotencyKey != "op-crash" {
		t.Fatalf("restored jobs = %+v\nwant the saved %+v", restored.Jobs, saved.Jobs)
	}
	testwait.Until(t, testCtx(t), "the resumed job to succeed", func() (bool, error) { return jobWithStatus(s2, "hosted-suite-9913", StatusSucceeded), nil })
	if got, want := s2.Totals(), (Totals{JobsStarted: 2, FinalCharges: 2, FinalChargeUSD: USD(35, 68)}); got != want {
		t.Errorf("Totals() after restart = %+v, want %+v", got, want)
	}

	cs2 := connectHTTP(t, url2, eraLegacy, nil)
	again, _ := runSuite(ctx, t, cs2, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-done"}, nil)
	if again.JobID != "hosted-suite-9912" {
		t.Errorf("a known key after restart answered %s, want hosted-suite-9912", again.JobID)
	}
	fresh, _ := runSuite(ctx, t, cs2, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-new"}, nil)
	if fresh.JobID != "hosted-suite-9914" {
		t.Errorf("a new job after restart is %s, want hosted-suite-9914", fresh.JobID)
	}
}

func TestOpenRejectsABadStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if r, err := ReadRecord(path); err != nil || len(r.Jobs) != 0 || len(r.Charges) != 0 {
		t.Errorf("ReadRecord of a missing file = %+v, %v; want an empty record", r, err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecord(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadRecord of a corrupt state file = %v, want an error naming %s", err, path)
	}
	s, err := Open(&Options{StatePath: path})
	if err == nil {
		s.Close()
		t.Fatal("Open over a corrupt state file succeeded, want an error")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("Open error = %v, want it to name %s", err, path)
	}
	defer func() {
		if recover() == nil {
			t.Error("New with a StatePath did not panic, want a panic pointing to Open")
		}
	}()
	New(&Options{StatePath: path})
}

func TestCloseStopsJobsAndReleasesCallers(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: longJob})
	cs := connectHTTP(t, url, eraModern, nil)
	id, done := startRunning(t, s, cs, "op-long")

	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if res := <-done; !res.IsError || !strings.Contains(text(res), "shut down") {
		t.Errorf("the waiting run_suite answered isError %v %q, want an error saying the simulator shut down", res.IsError, text(res))
	}
	// No job goroutine is left to move the job on.
	if !jobWithStatus(s, id, StatusRunning) {
		t.Errorf("record = %+v, want %s left running", s.Jobs(), id)
	}
	after := call(testCtx(t), t, cs, ToolRunSuite, RunSuiteArgs{Suite: "smoke"}, nil)
	if !after.IsError || len(s.Jobs()) != 1 {
		t.Errorf("run_suite after Close = isError %v with %d jobs, want isError and no new job", after.IsError, len(s.Jobs()))
	}
	s.Close() // a second Close is harmless
}

func TestSlowJobsTakeLonger(t *testing.T) {
	s := New(&Options{JobDuration: shortJob, Faults: Faults{SlowBy: longJob}})
	t.Cleanup(func() { s.Close() })
	cs := connectInMemory(t, s)
	id, _ := startRunning(t, s, cs, "op-slow")
	// Stop the job: a slow job is still running long after JobDuration.
	job := structured[CancelResult](t, call(testCtx(t), t, cs, ToolCancelJob, JobArgs{JobID: id}, nil))
	if job.Status != StatusCancelled {
		t.Errorf("cancel_job of a slow job = %+v, want it cancelled while still running", job)
	}
}

func TestServeStdio(t *testing.T) {
	s := New(&Options{JobDuration: shortJob})
	t.Cleanup(func() { s.Close() })
	transport, served := serveStdio(t, s)

	client := mcp.NewClient(&mcp.Implementation{Name: "providersim-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(testCtx(t), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	first, _ := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke"}, mcp.Meta{MetaIdempotencyKey: "op-stdio"})
	second, _ := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-stdio"}, nil)
	if first.JobID != second.JobID || first.Status != StatusSucceeded {
		t.Errorf("run_suite over stdio = %+v then %+v, want the same succeeded job", first, second)
	}
	if jobs := s.Jobs(); len(jobs) != 1 || jobs[0].KeySource != KeyFromMeta {
		t.Errorf("record = %+v, want one job keyed from _meta", jobs)
	}

	cs.Close()
	served(ctx)
}

// sameJSON compares two values by their JSON encoding.
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}
