package providersim

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRunSuiteOneJobOneFinalCharge(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: shortJob})
			cs := connectHTTP(t, url, era, nil)
			ctx := testCtx(t)

			got, res := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "settlement-regression", Commit: "9f3c2e1", IdempotencyKey: "op-1"}, nil)
			want := SuiteResult{JobID: "hosted-suite-9912", Status: StatusSucceeded, Suite: "settlement-regression", Passed: suiteTests, ChargeUSD: "17.84"}
			if got != want {
				t.Errorf("run_suite result = %+v, want %+v", got, want)
			}
			if res.IsError {
				t.Errorf("run_suite isError = true, want false (text %q)", text(res))
			}
			if txt := text(res); strings.Contains(txt, "\n") || !strings.Contains(txt, "hosted-suite-9912 succeeded") {
				t.Errorf("run_suite text = %q, want one line naming hosted-suite-9912 succeeded", txt)
			}

			jobs := s.Jobs()
			if len(jobs) != 1 {
				t.Fatalf("record has %d jobs, want 1: %+v", len(jobs), jobs)
			}
			j := jobs[0]
			if j.ID != "hosted-suite-9912" || j.Status != StatusSucceeded || j.IdempotencyKey != "op-1" ||
				j.KeySource != KeyFromArgument || j.Commit != "9f3c2e1" || j.Protocol != era {
				t.Errorf("job = %+v, want hosted-suite-9912 succeeded, key op-1 from the argument, commit 9f3c2e1, protocol %s", j, era)
			}
			charges := s.Charges()
			if len(charges) != 1 {
				t.Fatalf("record has %d charges, want 1: %+v", len(charges), charges)
			}
			if c := charges[0]; c.JobID != j.ID || c.Amount != USD(17, 84) || c.Status != ChargeFinal || c.Currency != "USD" {
				t.Errorf("charge = %+v, want a final 17.84 USD charge for %s", c, j.ID)
			}
			if got, want := s.Totals(), (Totals{JobsStarted: 1, FinalCharges: 1, FinalChargeUSD: USD(17, 84)}); got != want {
				t.Errorf("Totals() = %+v, want %+v", got, want)
			}
		})
	}
}

func TestIdempotencyKeySources(t *testing.T) {
	tests := []struct {
		name   string
		args   RunSuiteArgs
		meta   mcp.Meta
		header http.Header
		want   KeySource
	}{
		{name: "argument", args: RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-arg"}, want: KeyFromArgument},
		{name: "meta", args: RunSuiteArgs{Suite: "smoke"}, meta: mcp.Meta{MetaIdempotencyKey: "op-meta"}, want: KeyFromMeta},
		{name: "header", args: RunSuiteArgs{Suite: "smoke"}, header: http.Header{"Idempotency-Key": {"op-header"}}, want: KeyFromHeader},
	}
	for _, era := range eras {
		for _, tt := range tests {
			t.Run(era+"/"+tt.name, func(t *testing.T) {
				s, url := startHTTP(t, &Options{JobDuration: shortJob})
				cs := connectHTTP(t, url, era, tt.header)
				ctx := testCtx(t)

				first, _ := runSuite(ctx, t, cs, tt.args, tt.meta)
				second, _ := runSuite(ctx, t, cs, tt.args, tt.meta)
				if first.JobID != "hosted-suite-9912" || second.JobID != first.JobID {
					t.Errorf("job IDs = %s, %s; want hosted-suite-9912 twice", first.JobID, second.JobID)
				}
				jobs := s.Jobs()
				if len(jobs) != 1 {
					t.Fatalf("record has %d jobs after a repeated key, want 1: %+v", len(jobs), jobs)
				}
				if jobs[0].KeySource != tt.want {
					t.Errorf("key source = %q, want %q", jobs[0].KeySource, tt.want)
				}
				if n := len(s.Charges()); n != 1 {
					t.Errorf("record has %d charges, want 1", n)
				}
			})
		}
	}
}

func TestArgumentKeyWinsOverMetaAndHeader(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraModern, http.Header{"Idempotency-Key": {"op-header"}})
	ctx := testCtx(t)
	runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-arg"}, mcp.Meta{MetaIdempotencyKey: "op-meta"})
	runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke"}, mcp.Meta{MetaIdempotencyKey: "op-meta"})
	jobs := s.Jobs()
	if len(jobs) != 2 {
		t.Fatalf("record has %d jobs, want 2: %+v", len(jobs), jobs)
	}
	if jobs[0].IdempotencyKey != "op-arg" || jobs[0].KeySource != KeyFromArgument {
		t.Errorf("first job key = %q from %s, want op-arg from the argument", jobs[0].IdempotencyKey, jobs[0].KeySource)
	}
	if jobs[1].IdempotencyKey != "op-meta" || jobs[1].KeySource != KeyFromMeta {
		t.Errorf("second job key = %q from %s, want op-meta from _meta", jobs[1].IdempotencyKey, jobs[1].KeySource)
	}
}

func TestNoKeyStartsAJobEachTime(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	first, _ := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke"}, nil)
	second, _ := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke"}, nil)
	if first.JobID != "hosted-suite-9912" || second.JobID != "hosted-suite-9913" {
		t.Errorf("job IDs = %s, %s; want hosted-suite-9912, hosted-suite-9913", first.JobID, second.JobID)
	}
	if got, want := s.Totals(), (Totals{JobsStarted: 2, FinalCharges: 2, FinalChargeUSD: USD(35, 68)}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
	for _, j := range s.Jobs() {
		if j.KeySource != KeyNone || j.IdempotencyKey != "" {
			t.Errorf("job %s key = %q from %s, want none", j.ID, j.IdempotencyKey, j.KeySource)
		}
	}
}

func TestIgnoreIdempotencyKeyStartsDuplicates(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{IgnoreIdempotencyKey: true}})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	args := RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-dup"}
	runSuite(ctx, t, cs, args, nil)
	runSuite(ctx, t, cs, args, nil)
	if got, want := s.Totals(), (Totals{JobsStarted: 2, FinalCharges: 2, FinalChargeUSD: USD(35, 68)}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
	lookup := structured[LookupResult](t, call(ctx, t, cs, ToolLookupOperation, LookupArgs{IdempotencyKey: "op-dup"}, nil))
	if lookup.JobID != "hosted-suite-9912" || len(lookup.Jobs) != 2 || lookup.Jobs[1].JobID != "hosted-suite-9913" {
		t.Errorf("lookup_operation = %+v, want first job hosted-suite-9912 and both jobs listed oldest first", lookup)
	}
	charges := structured[ChargeList](t, call(ctx, t, cs, ToolListCharges, ListChargesArgs{IdempotencyKey: "op-dup"}, nil))
	if len(charges.Charges) != 2 {
		t.Errorf("list_charges by key = %+v, want two charges", charges)
	}
}

func TestConcurrentCallsWithOneKeyMakeOneJob(t *testing.T) {
	s := New(&Options{JobDuration: shortJob})
	t.Cleanup(func() { s.Close() })
	cs := connectInMemory(t, s)
	ctx := testCtx(t)
	const calls = 8
	ids := make(chan string, calls)
	for range calls {
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolRunSuite, Arguments: RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-race"}})
			if err != nil {
				ids <- "error: " + err.Error()
				return
			}
			ids <- structured[SuiteResult](t, res).JobID
		}()
	}
	for range calls {
		if id := <-ids; id != "hosted-suite-9912" {
			t.Errorf("a concurrent run_suite answered %q, want hosted-suite-9912", id)
		}
	}
	if n := len(s.Jobs()); n != 1 {
		t.Errorf("record has %d jobs after %d concurrent calls with one key, want 1", n, calls)
	}
}

func TestDropResponseAfterAccept(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{DropResponseAfterAccept: 1}})
			cs := connectHTTP(t, url, era, nil)
			args := RunSuiteArgs{Suite: "settlement-regression", IdempotencyKey: "op-lost"}

			callCtx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
			defer cancel()
			_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: ToolRunSuite, Arguments: args})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("run_suite with a dropped response: error = %v, want the caller's deadline to expire", err)
			}
			if got := s.Faults().DropResponseAfterAccept; got != 0 {
				t.Errorf("drops left = %d, want 0", got)
			}

			// The provider accepted the work although the caller saw nothing.
			jobs := s.Jobs()
			if len(jobs) != 1 || jobs[0].IdempotencyKey != "op-lost" {
				t.Fatalf("record = %+v, want the one job the lost call started", jobs)
			}
			ctx := testCtx(t)
			lookup := structured[LookupResult](t, call(ctx, t, cs, ToolLookupOperation, LookupArgs{IdempotencyKey: "op-lost"}, nil))
			if lookup.JobID != jobs[0].ID || (lookup.Status != string(StatusRunning) && lookup.Status != string(StatusSucceeded) && lookup.Status != string(StatusQueued)) {
				t.Errorf("lookup_operation = %+v, want %s accepted (queued, running or succeeded)", lookup, jobs[0].ID)
			}

			// A retry with the same key gets the original job, not a new one.
			got, _ := runSuite(ctx, t, cs, args, nil)
			if got.JobID != jobs[0].ID || got.Status != StatusSucceeded {
				t.Errorf("retry = %+v, want %s succeeded", got, jobs[0].ID)
			}
			if got, want := s.Totals(), (Totals{JobsStarted: 1, FinalCharges: 1, FinalChargeUSD: USD(17, 84)}); got != want {
				t.Errorf("Totals() = %+v, want %+v", got, want)
			}
		})
	}
}

func TestLookupDelayHidesYoungJobs(t *testing.T) {
	clock := newFakeClock()
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Clock: clock.Now, Faults: Faults{LookupDelay: time.Minute}})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-late"}, nil)

	before := structured[LookupResult](t, call(ctx, t, cs, ToolLookupOperation, LookupArgs{IdempotencyKey: "op-late"}, nil))
	if before.Status != LookupNotFound || before.JobID != "" || len(before.Jobs) != 0 {
		t.Errorf("lookup_operation before the delay = %+v, want not_found with no jobs", before)
	}
	if jobs := s.Jobs(); len(jobs) != 1 || jobs[0].Status != StatusSucceeded {
		t.Errorf("record = %+v, want the job the lagging index hides", jobs)
	}
	clock.Advance(time.Minute)
	after := structured[LookupResult](t, call(ctx, t, cs, ToolLookupOperation, LookupArgs{IdempotencyKey: "op-late"}, nil))
	if after.Status != string(StatusSucceeded) || after.JobID != "hosted-suite-9912" || len(after.Jobs) != 1 {
		t.Errorf("lookup_operation after the delay = %+v, want hosted-suite-9912 succeeded", after)
	}
}

func TestLookupIndeterminate(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob})
	cs := connectHTTP(t, url, eraLegacy, nil)
	ctx := testCtx(t)
	runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-1"}, nil)

	s.SetFaults(Faults{LookupIndeterminate: true})
	res := call(ctx, t, cs, ToolLookupOperation, LookupArgs{IdempotencyKey: "op-1"}, nil)
	if !res.IsError || !strings.Contains(text(res), "index unavailable") {
		t.Errorf("lookup_operation under lookup_indeterminate = isError %v %q, want isError with \"index unavailable\"", res.IsError, text(res))
	}

	s.SetFaults(Faults{})
	lookup := structured[LookupResult](t, call(ctx, t, cs, ToolLookupOperation, LookupArgs{IdempotencyKey: "op-1"}, nil))
	if lookup.Status != string(StatusSucceeded) {
		t.Errorf("lookup_operation after clearing the fault = %+v, want succeeded", lookup)
	}
	unknown := structured[LookupResult](t, call(ctx, t, cs, ToolLookupOperation, LookupArgs{IdempotencyKey: "op-never"}, nil))
	if unknown.Status != LookupNotFound || len(unknown.Jobs) != 0 {
		t.Errorf("lookup_operation of an unknown key = %+v, want not_found", unknown)
	}
}

func TestOvercharge(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{Overcharge: USD(23, 10)}})
	cs := connectHTTP(t, url, eraModern, nil)
	got, _ := runSuite(testCtx(t), t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-1"}, nil)
	if got.ChargeUSD != "23.10" {
		t.Errorf("run_suite charge_usd = %q, want 23.10", got.ChargeUSD)
	}
	if got, want := s.Totals(), (Totals{JobsStarted: 1, FinalCharges: 1, FinalChargeUSD: USD(23, 10)}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
}

func TestNoInvoice(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{NoInvoice: true}})
	cs := connectHTTP(t, url, eraModern, nil)
	ctx := testCtx(t)
	got, res := runSuite(ctx, t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-1"}, nil)
	if got.Status != StatusSucceeded || got.ChargeUSD != "" || res.IsError {
		t.Errorf("run_suite = %+v (isError %v), want succeeded with no charge_usd", got, res.IsError)
	}
	if n := len(s.Charges()); n != 0 {
		t.Errorf("record has %d charges, want none", n)
	}
	list := structured[ChargeList](t, call(ctx, t, cs, ToolListCharges, ListChargesArgs{JobID: got.JobID}, nil))
	if len(list.Charges) != 0 {
		t.Errorf("list_charges = %+v, want none", list)
	}
}

func TestFailJobs(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{FailJobs: true}})
	cs := connectHTTP(t, url, eraLegacy, nil)
	got, res := runSuite(testCtx(t), t, cs, RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-1"}, nil)
	want := SuiteResult{JobID: "hosted-suite-9912", Status: StatusFailed, Suite: "smoke", Passed: suiteTests - failedSuiteFailed, Failed: failedSuiteFailed, ChargeUSD: "0.00"}
	if !res.IsError || got != want {
		t.Errorf("run_suite = %+v (isError %v), want isError with %+v", got, res.IsError, want)
	}
	charges := s.Charges()
	if len(charges) != 1 || charges[0].Status != ChargeRefunded || charges[0].Amount != 0 {
		t.Errorf("charges = %+v, want one refunded charge of 0.00", charges)
	}
	if got := s.Totals().FinalChargeUSD; got != 0 {
		t.Errorf("final charge sum = %s, want 0.00", got)
	}
}
