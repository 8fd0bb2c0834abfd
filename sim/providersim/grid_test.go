package providersim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
)

// gridRunners is succeededRunners for a matrix with browser_grid: every
// runner also carries the default final browser grid charge.
func gridRunners(first, n int) []RunnerResult {
	out := succeededRunners(first, n)
	for i := range out {
		out[i].GridChargeUSD = "1.50"
	}
	return out
}

// chargeKinds counts a list of charges by kind.
func chargeKinds(charges []Charge) map[ChargeKind]int {
	out := map[ChargeKind]int{}
	for _, c := range charges {
		out[c.Kind]++
	}
	return out
}

// wantCharge is the record's charge of a job: its own (charge-N) or the
// browser grid's (grid-charge-N).
func wantCharge(number int, kind ChargeKind, amount Micros, status ChargeStatus) ChargeInfo {
	id := fmt.Sprintf("charge-%d", number)
	if kind == ChargeKindBrowserGrid {
		id = fmt.Sprintf("grid-charge-%d", number)
	}
	return ChargeInfo{ChargeID: id, JobID: fmt.Sprintf("hosted-suite-%d", number), Kind: kind, AmountUSD: amount.String(), Currency: "USD", Status: status}
}

// infos renders the record's charges as list_charges reports them.
func infos(charges []Charge) []ChargeInfo {
	out := make([]ChargeInfo, 0, len(charges))
	for _, c := range charges {
		out = append(out, ChargeInfo{ChargeID: c.ID, JobID: c.JobID, Kind: c.Kind, AmountUSD: c.Amount.String(), Currency: c.Currency, Status: c.Status})
	}
	return out
}

// listCharges calls list_charges.
func listCharges(ctx context.Context, t *testing.T, cs *mcp.ClientSession, args ListChargesArgs) []ChargeInfo {
	t.Helper()
	res := call(ctx, t, cs, ToolListCharges, args, nil)
	if res.IsError {
		t.Fatalf("list_charges(%+v) isError: %s", args, text(res))
	}
	return structured[ChargeList](t, res).Charges
}

func TestRunMatrixWithBrowserGridBillsTwoChargesPerRunner(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: shortJob})
			cs := connectHTTP(t, url, era, nil)
			ctx := testCtx(t)
			args := RunMatrixArgs{Suite: "checkout-e2e", Runners: 4, IdempotencyKey: "op-grid", BrowserGrid: true}

			got, res := runMatrix(ctx, t, cs, args, nil)
			want := MatrixResult{MatrixID: "hosted-matrix-1", Suite: "checkout-e2e", Status: StatusSucceeded, Runners: gridRunners(9912, 4)}
			if res.IsError || !reflect.DeepEqual(got, want) {
				t.Errorf("run_matrix with browser_grid = %+v (isError %v), want %+v", got, res.IsError, want)
			}
			wantText := "hosted-matrix-1 succeeded: suite checkout-e2e, 4 runners (4 succeeded); charges 77.36 USD (8 final), 6.00 USD of it for the browser grid"
			if txt := text(res); txt != wantText {
				t.Errorf("run_matrix text = %q, want %q", txt, wantText)
			}

			// The Sim's own record: 8 charges, two per runner, each final.
			charges := s.Charges()
			if len(charges) != 8 {
				t.Fatalf("record has %d charges, want 8 (a runner and a browser grid charge for each of 4 runners): %+v", len(charges), charges)
			}
			if kinds := chargeKinds(charges); kinds[ChargeKindRunner] != 4 || kinds[ChargeKindBrowserGrid] != 4 {
				t.Errorf("charges by kind = %v, want 4 runner and 4 browser_grid", kinds)
			}
			var wantAll []ChargeInfo
			for n := 9912; n < 9916; n++ {
				wantAll = append(wantAll, wantCharge(n, ChargeKindRunner, USD(17, 84), ChargeFinal), wantCharge(n, ChargeKindBrowserGrid, USD(1, 50), ChargeFinal))
			}
			if got := infos(charges); !reflect.DeepEqual(got, wantAll) {
				t.Errorf("record's charges = %+v\nwant %+v", got, wantAll)
			}
			wantTotals := Totals{JobsStarted: 4, FinalCharges: 8, FinalChargeUSD: USD(77, 36)}
			if got := s.Totals(); got != wantTotals {
				t.Errorf("Totals() = %+v, want %+v", got, wantTotals)
			}

			// The provider contract reports both charges of a runner, with kinds.
			wantRunner3 := []ChargeInfo{wantCharge(9914, ChargeKindRunner, USD(17, 84), ChargeFinal), wantCharge(9914, ChargeKindBrowserGrid, USD(1, 50), ChargeFinal)}
			if got := listCharges(ctx, t, cs, ListChargesArgs{JobID: "hosted-suite-9914"}); !reflect.DeepEqual(got, wantRunner3) {
				t.Errorf("list_charges of runner 3 = %+v\nwant %+v", got, wantRunner3)
			}
			if got := listCharges(ctx, t, cs, ListChargesArgs{IdempotencyKey: "op-grid"}); !reflect.DeepEqual(got, wantAll) {
				t.Errorf("list_charges by key = %+v\nwant %+v", got, wantAll)
			}
			job := structured[JobInfo](t, call(ctx, t, cs, ToolGetJob, JobArgs{JobID: "hosted-suite-9914"}, nil))
			if job.ChargeUSD != "17.84" || job.ChargeStatus != ChargeFinal || job.GridChargeUSD != "1.50" || job.GridChargeStatus != ChargeFinal {
				t.Errorf("get_job of runner 3 = %+v, want its own final 17.84 charge and a final 1.50 browser grid charge", job)
			}

			// A repeat with the key returns the key's jobs, whatever its browser_grid says.
			args.BrowserGrid = false
			again, _ := runMatrix(ctx, t, cs, args, nil)
			if !reflect.DeepEqual(again, want) {
				t.Errorf("repeated run_matrix without browser_grid = %+v, want the key's runners %+v", again, want)
			}
			if got := s.Totals(); got != wantTotals {
				t.Errorf("Totals() after a repeated key = %+v, want %+v", got, wantTotals)
			}
		})
	}
}

func TestRunMatrixWithoutBrowserGridBillsRunnersOnly(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	// browser_grid given as false is the same as leaving it out.
	got, _ := runMatrix(ctx, t, cs, map[string]any{"suite": "smoke", "runners": 4, "idempotency_key": "op-plain", "browser_grid": false}, nil)
	want := MatrixResult{MatrixID: "hosted-matrix-1", Suite: "smoke", Status: StatusSucceeded, Runners: succeededRunners(9912, 4)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("run_matrix without browser_grid = %+v, want %+v", got, want)
	}
	charges := s.Charges()
	if kinds := chargeKinds(charges); len(charges) != 4 || kinds[ChargeKindRunner] != 4 {
		t.Errorf("record's charges = %+v, want 4, all of kind runner", charges)
	}
	if got, want := s.Totals(), (Totals{JobsStarted: 4, FinalCharges: 4, FinalChargeUSD: USD(71, 36)}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
	job := structured[JobInfo](t, call(ctx, t, cs, ToolGetJob, JobArgs{JobID: "hosted-suite-9912"}, nil))
	if job.ChargeUSD != "17.84" || job.GridChargeUSD != "" || job.GridChargeStatus != "" {
		t.Errorf("get_job of a runner without browser grid = %+v, want its own charge and no grid charge", job)
	}
	// run_suite's charge is of kind suite.
	suite, _ := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke"}, nil)
	if got := listCharges(ctx, t, cs, ListChargesArgs{JobID: suite.JobID}); len(got) != 1 || got[0].Kind != ChargeKindSuite {
		t.Errorf("list_charges of a run_suite job = %+v, want one charge of kind suite", got)
	}
}

func TestBrowserGridChargesEndWithTheirRunner(t *testing.T) {
	t.Run(FaultFailJobs, func(t *testing.T) {
		s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{FailJobs: true}})
		cs := connectHTTP(t, url, eraLegacy, nil)
		got, res := runMatrix(testCtx(t), t, cs, RunMatrixArgs{Suite: "smoke", Runners: 2, BrowserGrid: true}, nil)
		wantRunners := []RunnerResult{
			{JobID: "hosted-suite-9912", Status: StatusFailed, ChargeUSD: "0.00", GridChargeUSD: "0.00"},
			{JobID: "hosted-suite-9913", Status: StatusFailed, ChargeUSD: "0.00", GridChargeUSD: "0.00"},
		}
		if !res.IsError || got.Status != StatusFailed || !reflect.DeepEqual(got.Runners, wantRunners) {
			t.Errorf("run_matrix under fail_jobs = %+v (isError %v), want failed runners %+v", got, res.IsError, wantRunners)
		}
		charges := s.Charges()
		if len(charges) != 4 || chargeKinds(charges)[ChargeKindBrowserGrid] != 2 {
			t.Fatalf("record's charges = %+v, want 4, two of kind browser_grid", charges)
		}
		for _, c := range charges {
			if c.Status != ChargeRefunded || c.Amount != 0 {
				t.Errorf("charge %+v, want refunded at 0.00", c)
			}
		}
		if got, want := s.Totals(), (Totals{JobsStarted: 2}); got != want {
			t.Errorf("Totals() = %+v, want %+v", got, want)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		s, url := startHTTP(t, &Options{JobDuration: longJob})
		cs := connectHTTP(t, url, eraModern, nil)
		ctx := testCtx(t)
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolRunMatrix, Arguments: RunMatrixArgs{Suite: "nightly", Runners: 1, IdempotencyKey: "op-grid-stop", BrowserGrid: true}})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call error: " + err.Error()}}}
			}
			done <- res
		}()
		testwait.Until(t, ctx, "the runner to be running", func() (bool, error) {
			return jobWithStatus(s, "hosted-suite-9912", StatusRunning), nil
		})
		pending := []ChargeInfo{wantCharge(9912, ChargeKindRunner, USD(18, 0), ChargePending), wantCharge(9912, ChargeKindBrowserGrid, USD(2, 0), ChargePending)}
		if got := listCharges(ctx, t, cs, ListChargesArgs{JobID: "hosted-suite-9912"}); !reflect.DeepEqual(got, pending) {
			t.Errorf("list_charges of a running runner = %+v\nwant %+v", got, pending)
		}
		if got := structured[CancelResult](t, call(ctx, t, cs, ToolCancelJob, JobArgs{JobID: "hosted-suite-9912"}, nil)); got.Status != StatusCancelled || !got.EffectReversed {
			t.Errorf("cancel_job = %+v, want cancelled with effect_reversed", got)
		}
		res := <-done
		got := structured[MatrixResult](t, res)
		wantRunners := []RunnerResult{{JobID: "hosted-suite-9912", Status: StatusCancelled, ChargeUSD: "0.00", GridChargeUSD: "0.00"}}
		if !res.IsError || got.Status != StatusCancelled || !reflect.DeepEqual(got.Runners, wantRunners) {
			t.Errorf("run_matrix after cancelling = %+v (isError %v, %q), want cancelled %+v", got, res.IsError, text(res), wantRunners)
		}
		refunded := []ChargeInfo{wantCharge(9912, ChargeKindRunner, 0, ChargeRefunded), wantCharge(9912, ChargeKindBrowserGrid, 0, ChargeRefunded)}
		if got := infos(s.Charges()); !reflect.DeepEqual(got, refunded) {
			t.Errorf("record's charges after cancel = %+v\nwant %+v", got, refunded)
		}
	})

	t.Run(FaultNoInvoice, func(t *testing.T) {
		s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{NoInvoice: true}})
		cs := connectHTTP(t, url, eraModern, nil)
		got, _ := runMatrix(testCtx(t), t, cs, RunMatrixArgs{Suite: "smoke", Runners: 2, BrowserGrid: true}, nil)
		for _, r := range got.Runners {
			if r.Status != StatusSucceeded || r.ChargeUSD != "" || r.GridChargeUSD != "" {
				t.Errorf("runner %+v, want succeeded with no charge of either kind", r)
			}
		}
		if n := len(s.Charges()); n != 0 {
			t.Errorf("record has %d charges, want none", n)
		}
	})

	t.Run(FaultOvercharge, func(t *testing.T) {
		s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{Overcharge: USD(23, 10)}})
		cs := connectHTTP(t, url, eraModern, nil)
		got, _ := runMatrix(testCtx(t), t, cs, RunMatrixArgs{Suite: "smoke", Runners: 1, BrowserGrid: true}, nil)
		want := []RunnerResult{{JobID: "hosted-suite-9912", Status: StatusSucceeded, ChargeUSD: "23.10", GridChargeUSD: "1.50"}}
		if !reflect.DeepEqual(got.Runners, want) {
			t.Errorf("runners under overcharge = %+v, want %+v: overcharge bills the runner, not the grid", got.Runners, want)
		}
		if got, want := s.Totals(), (Totals{JobsStarted: 1, FinalCharges: 2, FinalChargeUSD: USD(24, 60)}); got != want {
			t.Errorf("Totals() = %+v, want %+v", got, want)
		}
	})
}

func TestBrowserGridAmountsAreOptions(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, GridEstimate: USD(3, 25), GridFinalCharge: USD(2, 5)})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	est := structured[EstimateMatrixResult](t, call(ctx, t, cs, ToolEstimateMatrix, EstimateMatrixArgs{Suite: "smoke", Runners: 2, BrowserGrid: true}, nil))
	if est.EstimateUSD != "42.50" {
		t.Errorf("estimate_matrix of 2 with a 3.25 grid estimate = %+v, want 42.50", est)
	}
	got, _ := runMatrix(ctx, t, cs, RunMatrixArgs{Suite: "smoke", Runners: 1, BrowserGrid: true}, nil)
	if len(got.Runners) != 1 || got.Runners[0].GridChargeUSD != "2.05" {
		t.Errorf("run_matrix with a 2.05 grid final charge = %+v, want grid_charge_usd 2.05", got)
	}
	if total := s.Totals().FinalChargeUSD; total != USD(19, 89) {
		t.Errorf("final charges sum to %s, want 19.89", total)
	}

	for _, opts := range []Options{{GridEstimate: -1}, {GridFinalCharge: -1}} {
		if _, err := Open(&opts); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("Open(%+v) error = %v, want one saying the amount is negative", opts, err)
		}
	}
}

func TestEstimateMatrixWithBrowserGrid(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraLegacy, nil)
	ctx := testCtx(t)
	for _, tt := range []struct {
		runners int
		grid    bool
		want    string
	}{{4, true, "80.00"}, {1, true, "20.00"}, {4, false, "72.00"}} {
		got := structured[EstimateMatrixResult](t, call(ctx, t, cs, ToolEstimateMatrix, EstimateMatrixArgs{Suite: "smoke", Runners: tt.runners, BrowserGrid: tt.grid}, nil))
		if want := (EstimateMatrixResult{EstimateUSD: tt.want, Runners: tt.runners, Currency: "USD"}); got != want {
			t.Errorf("estimate_matrix of %d with browser_grid %v = %+v, want %+v", tt.runners, tt.grid, got, want)
		}
	}
	if n := len(s.Jobs()); n != 0 {
		t.Errorf("estimate_matrix changed the record: %d jobs, want none", n)
	}
}

func TestBrowserGridInToolSchemas(t *testing.T) {
	s := New(nil)
	t.Cleanup(func() { s.Close() })
	res, err := connectInMemory(t, s).ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, tool := range res.Tools {
		if tool.Name != ToolRunMatrix && tool.Name != ToolEstimateMatrix {
			continue
		}
		seen++
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		if p, ok := schema.Properties["browser_grid"]; !ok || p.Type != "boolean" {
			t.Errorf("%s input schema = %s, want a boolean browser_grid property", tool.Name, raw)
		}
		if !reflect.DeepEqual(schema.Required, []string{"suite", "runners"}) {
			t.Errorf("%s requires %v, want only suite and runners: browser_grid is optional", tool.Name, schema.Required)
		}
	}
	if seen != 2 {
		t.Errorf("tools/list has %d of run_matrix and estimate_matrix, want both", seen)
	}
}

func TestBrowserGridStateFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosted-test.json")
	opts := &Options{JobDuration: shortJob, StatePath: path}
	s1, url := startHTTP(t, opts)
	ctx := testCtx(t)
	args := RunMatrixArgs{Suite: "smoke", Runners: 2, IdempotencyKey: "op-grid-kept", BrowserGrid: true}
	first, _ := runMatrix(ctx, t, connectHTTP(t, url, eraModern, nil), args, nil)
	s1.Close()
	saved := s1.Record()
	if len(saved.Charges) != 4 {
		t.Fatalf("saved record has %d charges, want 4: %+v", len(saved.Charges), saved.Charges)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"charge_id": "grid-charge-9913"`, `"kind": "browser_grid"`, `"kind": "runner"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("state file lacks %s:\n%s", want, data)
		}
	}
	if read, err := ReadRecord(path); err != nil || !sameJSON(t, read, saved) {
		t.Errorf("ReadRecord = %+v, %v\nwant the saved %+v", read, err, saved)
	}

	s2, url2 := startHTTP(t, opts)
	if restored := s2.Record(); !sameJSON(t, restored, saved) {
		t.Errorf("restored record = %+v\nwant the saved %+v", restored, saved)
	}
	cs2 := connectHTTP(t, url2, eraLegacy, nil)
	want := []ChargeInfo{wantCharge(9913, ChargeKindRunner, USD(17, 84), ChargeFinal), wantCharge(9913, ChargeKindBrowserGrid, USD(1, 50), ChargeFinal)}
	if got := listCharges(ctx, t, cs2, ListChargesArgs{JobID: "hosted-suite-9913"}); !reflect.DeepEqual(got, want) {
		t.Errorf("list_charges after restart = %+v\nwant %+v", got, want)
	}
	if again, _ := runMatrix(ctx, t, cs2, args, nil); !reflect.DeepEqual(again, first) {
		t.Errorf("a known key after restart = %+v, want %+v", again, first)
	}
}

func TestBrowserGridRunnerResumesFromStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosted-test.json")
	clock := newFakeClock()
	opts := &Options{JobDuration: longJob, Clock: clock.Now, StatePath: path}
	s1, url := startHTTP(t, opts)
	ctx := testCtx(t)
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go connectHTTP(t, url, eraModern, nil).CallTool(callCtx, &mcp.CallToolParams{Name: ToolRunMatrix, Arguments: RunMatrixArgs{Suite: "smoke", Runners: 2, BrowserGrid: true}})
	testwait.Until(t, ctx, "both runners to carry pending charges", func() (bool, error) {
		return len(s1.Charges()) == 4, nil
	})
	s1.Close()
	cancel()

	// A new process over the same file, its clock past the runners' end,
	// finishes them with the amounts their plans fixed.
	clock.Advance(2 * longJob)
	s2, _ := startHTTP(t, opts)
	testwait.Until(t, ctx, "the resumed runners to end", func() (bool, error) {
		return s2.Totals().FinalCharges == 4, nil
	})
	var want []ChargeInfo
	for _, n := range []int{9912, 9913} {
		want = append(want, wantCharge(n, ChargeKindRunner, USD(17, 84), ChargeFinal), wantCharge(n, ChargeKindBrowserGrid, USD(1, 50), ChargeFinal))
	}
	if got := infos(s2.Charges()); !reflect.DeepEqual(got, want) {
		t.Errorf("charges of the resumed runners = %+v\nwant %+v", got, want)
	}
	if got := s2.Totals().FinalChargeUSD; got != USD(38, 68) {
		t.Errorf("final charges sum to %s, want 38.68", got)
	}
}

func TestStateFileWithoutChargeKindsLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosted-test.json")
	// A record written before charge kinds: one charge per job, no kind, no
	// browser grid in any plan. The first job is run_suite's, the second a
	// matrix runner.
	old := `{"version": 1, "next_job_number": 9914, "next_matrix_number": 2,
	 "jobs": [
	  {"job_id": "hosted-suite-9912", "idempotency_key": "op-old", "key_source": "argument", "suite": "smoke", "status": "succeeded",
	   "passed": 412, "failed": 0, "created_at": "2026-11-30T09:00:00Z", "updated_at": "2026-11-30T09:00:03Z",
	   "number": 9912, "plan": {"due_at": "2026-11-30T09:00:03Z", "invoice": true, "estimate_usd": "18.00", "final_usd": "17.84"}},
	  {"job_id": "hosted-suite-9913", "idempotency_key": "op-old-matrix", "key_source": "argument", "suite": "smoke", "matrix": "hosted-matrix-1", "runner": 1,
	   "status": "succeeded", "passed": 412, "failed": 0, "created_at": "2026-11-30T09:00:00Z", "updated_at": "2026-11-30T09:00:03Z",
	   "number": 9913, "plan": {"due_at": "2026-11-30T09:00:03Z", "invoice": true, "estimate_usd": "18.00", "final_usd": "17.84"}}],
	 "charges": [
	  {"charge_id": "charge-9912", "job_id": "hosted-suite-9912", "amount_usd": "17.84", "currency": "USD",
	   "status": "final", "created_at": "2026-11-30T09:00:00Z", "updated_at": "2026-11-30T09:00:03Z"},
	  {"charge_id": "charge-9913", "job_id": "hosted-suite-9913", "amount_usd": "17.84", "currency": "USD",
	   "status": "final", "created_at": "2026-11-30T09:00:00Z", "updated_at": "2026-11-30T09:00:03Z"}]}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []ChargeInfo{wantCharge(9912, ChargeKindSuite, USD(17, 84), ChargeFinal), wantCharge(9913, ChargeKindRunner, USD(17, 84), ChargeFinal)}
	read, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := infos(read.Charges); !reflect.DeepEqual(got, want) {
		t.Errorf("ReadRecord of an older file: charges %+v\nwant %+v", got, want)
	}

	s, url := startHTTP(t, &Options{JobDuration: shortJob, StatePath: path})
	if got := infos(s.Charges()); !reflect.DeepEqual(got, want) {
		t.Errorf("charges loaded from an older file = %+v\nwant %+v", got, want)
	}
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	if got := listCharges(ctx, t, cs, ListChargesArgs{IdempotencyKey: "op-old"}); !reflect.DeepEqual(got, want[:1]) {
		t.Errorf("list_charges of the older run_suite job = %+v, want %+v", got, want[:1])
	}
	job := structured[JobInfo](t, call(ctx, t, cs, ToolGetJob, JobArgs{JobID: "hosted-suite-9913"}, nil))
	if job.ChargeUSD != "17.84" || job.GridChargeUSD != "" {
		t.Errorf("get_job of the older runner = %+v, want its own charge and no grid charge", job)
	}
	next, _ := runMatrix(ctx, t, cs, RunMatrixArgs{Suite: "smoke", Runners: 1, BrowserGrid: true}, nil)
	if next.MatrixID != "hosted-matrix-2" || !reflect.DeepEqual(next.Runners, gridRunners(9914, 1)) {
		t.Errorf("run_matrix over an older file = %+v, want hosted-matrix-2 with hosted-suite-9914 and its grid charge", next)
	}
	if got, want := s.Totals(), (Totals{JobsStarted: 3, FinalCharges: 4, FinalChargeUSD: USD(55, 2)}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
}

func TestRunSuiteSummaryNamesTheBrowserGridCharge(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	runMatrix(ctx, t, cs, RunMatrixArgs{Suite: "smoke", Runners: 1, IdempotencyKey: "op-shared", BrowserGrid: true}, nil)
	// run_suite with a key a matrix used answers the key's first job, a
	// runner with a browser grid charge: charge_usd is its own charge.
	got, res := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-shared"}, nil)
	if got.JobID != "hosted-suite-9912" || got.ChargeUSD != "17.84" {
		t.Errorf("run_suite = %+v, want hosted-suite-9912 with its own charge 17.84", got)
	}
	wantText := "hosted-suite-9912 succeeded: suite smoke, 412 passed, 0 failed; charge 17.84 USD final, browser grid charge 1.50 USD final"
	if txt := text(res); txt != wantText {
		t.Errorf("run_suite text = %q, want %q", txt, wantText)
	}
	if n := len(s.Jobs()); n != 1 {
		t.Errorf("record has %d jobs, want 1", n)
	}
}
