package worker_test

import (
	"cmp"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// Each case drives the gateway into "send started, outcome unknown" — its
// run_suite call to the provider is never answered and times out — and
// checks what the gateway did with the provider's lookup answer, per
// the "look up, then attach" table (docs/provider-contract.md, "The lookup").
func TestLookupAnswers(t *testing.T) {
	tests := []struct {
		name         string
		script       providerScript
		safeAfter    *time.Duration
		wantLookup   [2]string // (answer, action) of the lookup event
		wantState    ledger.State
		wantReason   string // review reason
		wantRunSuite int    // run_suite calls the provider got
		wantSends    int
	}{
		{
			name:       "not_found without not_found_safe_after",
			script:     providerScript{lookupStatus: "not_found"},
			wantLookup: [2]string{"not_found", "require_review"}, wantState: ledger.StateReview,
			wantReason: ledger.ReasonLookupNotFoundUnsafe, wantRunSuite: 1, wantSends: 1,
		},
		{
			name:       "not_found with not_found_safe_after",
			script:     providerScript{lookupStatus: "not_found", jobStatus: "succeeded", answerFrom: 2},
			safeAfter:  new(time.Duration(0)),
			wantLookup: [2]string{"not_found", "resend"}, wantState: ledger.StateCompleted,
			wantRunSuite: 2, wantSends: 2,
		},
		{
			name:       "accepted",
			script:     providerScript{lookupStatus: "queued", jobStatus: "succeeded"},
			wantLookup: [2]string{"accepted", "attach_to_existing_job"}, wantState: ledger.StateCompleted,
			wantRunSuite: 1, wantSends: 1,
		},
		{
			name:       "running",
			script:     providerScript{lookupStatus: "running", jobStatus: "succeeded"},
			wantLookup: [2]string{"running", "attach_to_existing_job"}, wantState: ledger.StateCompleted,
			wantRunSuite: 1, wantSends: 1,
		},
		{
			name:       "completed",
			script:     providerScript{lookupStatus: "succeeded", jobStatus: "succeeded"},
			wantLookup: [2]string{"completed", "fetch_result"}, wantState: ledger.StateCompleted,
			wantRunSuite: 1, wantSends: 1,
		},
		{
			name:       "failed",
			script:     providerScript{lookupStatus: "failed", jobStatus: "failed"},
			wantLookup: [2]string{"failed", "record_failure"}, wantState: ledger.StateFailed,
			wantRunSuite: 1, wantSends: 1,
		},
		{
			name:       "indeterminate",
			script:     providerScript{lookupStatus: "reindexing"},
			wantLookup: [2]string{"indeterminate", "require_review"}, wantState: ledger.StateReview,
			wantReason: ledger.ReasonLookupIndeterminate, wantRunSuite: 1, wantSends: 1,
		},
		{
			name:       "lookup error",
			script:     providerScript{lookupFails: true},
			wantLookup: [2]string{"indeterminate", "require_review"}, wantState: ledger.StateReview,
			wantReason: ledger.ReasonLookupFailed, wantRunSuite: 1, wantSends: 1,
		},
		{
			// A job that exists but has no name cannot be attached: asking
			// again would only loop.
			name:       "running without a job ID",
			script:     providerScript{lookupStatus: "running", lookupNoJobID: true, jobStatus: "succeeded"},
			wantLookup: [2]string{"running", "require_review"}, wantState: ledger.StateReview,
			wantReason: ledger.ReasonLookupIndeterminate, wantRunSuite: 1, wantSends: 1,
		},
		{
			name:       "completed without a job ID",
			script:     providerScript{lookupStatus: "succeeded", lookupNoJobID: true, jobStatus: "succeeded"},
			wantLookup: [2]string{"completed", "require_review"}, wantState: ledger.StateReview,
			wantReason: ledger.ReasonLookupIndeterminate, wantRunSuite: 1, wantSends: 1,
		},
		{
			// An internal error from the upstream may come after the
			// provider started the work: it is looked up, not failed.
			name:       "internal error answered",
			script:     providerScript{lookupStatus: "succeeded", jobStatus: "succeeded", runSuiteError: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "worker crashed"}},
			wantLookup: [2]string{"completed", "fetch_result"}, wantState: ledger.StateCompleted,
			wantRunSuite: 1, wantSends: 1,
		},
		{
			name:       "server-defined error answered",
			script:     providerScript{lookupStatus: "running", jobStatus: "succeeded", runSuiteError: &jsonrpc.Error{Code: -32050, Message: "gateway timeout"}},
			wantLookup: [2]string{"running", "attach_to_existing_job"}, wantState: ledger.StateCompleted,
			wantRunSuite: 1, wantSends: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			p := startScripted(t, tt.script)
			g := startGateway(t, p.url, fixtures.ConfigOptions{
				UpstreamTimeout: 300 * time.Millisecond, NotFoundSafeAfter: tt.safeAfter, Lease: time.Second,
			})
			opID := "op-lookup-" + strings.ReplaceAll(tt.name, " ", "-")
			op := g.settle(t, ctx, opID)

			if op.State != tt.wantState || op.ReviewReason != tt.wantReason {
				t.Errorf("operation = %s (review reason %q, %s), want %s (%q)", op.State, op.ReviewReason, op.StatusMessage, tt.wantState, tt.wantReason)
			}
			if got := lookups(t, ctx, g.Store, op); !slices.Equal(got, [][2]string{tt.wantLookup}) {
				t.Errorf("lookups (answer, action) = %v, want [%v]", got, tt.wantLookup)
			}
			if got := p.counter.count("run_suite"); got != tt.wantRunSuite {
				t.Errorf("run_suite calls at the provider = %d, want %d", got, tt.wantRunSuite)
			}
			// The send carried the operation's provider key, and the lookup
			// asked for exactly that key.
			sends, looked := p.idempotencyKeys()
			key := func(k string) bool { return k == op.ProviderKey() }
			if len(looked) == 0 || !allOf(sends, key) || !allOf(looked, key) {
				t.Errorf("idempotency keys of run_suite %v and lookup_operation %v, want at least one lookup and every key %q",
					sends, looked, op.ProviderKey())
			}
			if op.SendCount != tt.wantSends {
				t.Errorf("send count = %d, want %d", op.SendCount, tt.wantSends)
			}
			checkEndState(t, op, tt.wantState)
			if tt.wantState == ledger.StateCompleted || tt.wantState == ledger.StateFailed {
				jobs, err := g.Store.RemoteJobList(ctx, op.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) != 1 || jobs[0].RemoteJobID != scriptedJob || !jobs[0].Intended {
					t.Errorf("remote jobs = %+v, want the one intended job %s", jobs, scriptedJob)
				}
			}
		})
	}
}

// checkEndState checks what the operation stored for its end state: the
// provider's result, or the failure a client is answered with.
func checkEndState(t *testing.T, op *ledger.Operation, want ledger.State) {
	t.Helper()
	switch want {
	case ledger.StateCompleted:
		var res mcp.CallToolResult
		if err := json.Unmarshal(op.Result, &res); err != nil {
			t.Fatalf("stored result %s: %v", op.Result, err)
		}
		if res.IsError || fixtures.ResultJob(&res) != scriptedJob {
			t.Errorf("stored result = %s, want job %s's result", op.Result, scriptedJob)
		}
	case ledger.StateFailed:
		if !strings.Contains(string(op.Error), scriptedJob) || !strings.Contains(string(op.Error), "not re-run") {
			t.Errorf("stored error = %s, want one naming %s and saying it is not re-run", op.Error, scriptedJob)
		}
	}
}

// The same decisions against the simulated provider, which answers from
// its own job record: its response to the accepted run_suite call is lost.
func TestLookupAgainstProviderRecord(t *testing.T) {
	tests := []struct {
		name         string
		faults       providersim.Faults
		job          time.Duration // how long the provider's job runs; default 1s
		safeAfter    *time.Duration
		wantLookup   [2]string
		wantState    ledger.State
		wantReason   string
		wantRunSuite int
		wantJobs     int
	}{
		{
			// The lagging index says not_found although the job exists; the
			// contract allows a re-send, and the provider honours the
			// operation's key: still one job.
			name:       "not_found from a lagging index, re-sent with the key",
			faults:     providersim.Faults{DropResponseAfterAccept: 1, LookupDelay: time.Minute},
			safeAfter:  new(time.Duration(0)),
			wantLookup: [2]string{"not_found", "resend"}, wantState: ledger.StateCompleted,
			wantRunSuite: 2, wantJobs: 1,
		},
		{
			name:       "not_found from a lagging index, no safe delay",
			faults:     providersim.Faults{DropResponseAfterAccept: 1, LookupDelay: time.Minute},
			wantLookup: [2]string{"not_found", "require_review"}, wantState: ledger.StateReview,
			wantReason: ledger.ReasonLookupNotFoundUnsafe, wantRunSuite: 1, wantJobs: 1,
		},
		{
			name:       "running job attached",
			faults:     providersim.Faults{DropResponseAfterAccept: 1},
			job:        3 * time.Second,
			wantLookup: [2]string{"running", "attach_to_existing_job"}, wantState: ledger.StateCompleted,
			wantRunSuite: 1, wantJobs: 1,
		},
		{
			name:       "lookup error",
			faults:     providersim.Faults{DropResponseAfterAccept: 1, LookupIndeterminate: true},
			wantLookup: [2]string{"indeterminate", "require_review"}, wantState: ledger.StateReview,
			wantReason: ledger.ReasonLookupFailed, wantRunSuite: 1, wantJobs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			sim := providersim.New(&providersim.Options{JobDuration: cmp.Or(tt.job, time.Second), Faults: tt.faults})
			counter := countCalls(sim.HTTPHandler())
			srv := httptest.NewServer(counter)
			t.Cleanup(func() {
				srv.CloseClientConnections()
				srv.Close()
				sim.Close()
			})
			g := startGateway(t, srv.URL+"/mcp", fixtures.ConfigOptions{
				UpstreamTimeout: 500 * time.Millisecond, NotFoundSafeAfter: tt.safeAfter, Lease: time.Second,
			})
			opID := "op-sim-" + strings.ReplaceAll(tt.name, " ", "-")
			op := g.settle(t, ctx, opID)

			if op.State != tt.wantState || op.ReviewReason != tt.wantReason {
				t.Errorf("operation = %s (review reason %q, %s), want %s (%q)", op.State, op.ReviewReason, op.StatusMessage, tt.wantState, tt.wantReason)
			}
			if got := lookups(t, ctx, g.Store, op); !slices.Equal(got, [][2]string{tt.wantLookup}) {
				t.Errorf("lookups (answer, action) = %v, want [%v]", got, tt.wantLookup)
			}
			if got := counter.count("run_suite"); got != tt.wantRunSuite {
				t.Errorf("run_suite calls at the provider = %d, want %d", got, tt.wantRunSuite)
			}
			jobs := sim.Jobs()
			if len(jobs) != tt.wantJobs {
				t.Fatalf("provider jobs = %+v, want %d", jobs, tt.wantJobs)
			}
			for _, j := range jobs {
				if j.IdempotencyKey != op.ProviderKey() {
					t.Errorf("provider job %s has key %q, want the operation's provider key %q", j.ID, j.IdempotencyKey, op.ProviderKey())
				}
			}
			if tt.wantState == ledger.StateCompleted {
				var res mcp.CallToolResult
				if err := json.Unmarshal(op.Result, &res); err != nil {
					t.Fatalf("stored result %s: %v", op.Result, err)
				}
				if got := fixtures.ResultJob(&res); got != jobs[0].ID {
					t.Errorf("stored result names job %q, want %q", got, jobs[0].ID)
				}
			}
		})
	}
}

func allOf[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if !f(v) {
			return false
		}
	}
	return true
}
