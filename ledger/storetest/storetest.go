// Package storetest is the contract every ledger.Store implementation must
// pass. Each store's tests call [Exercise] with a factory that returns a
// fresh, migrated store, [ExerciseReplicas] with one that returns several
// stores with pools of their own on one database, as replicas hold them,
// and [ExerciseMigrations] with unmigrated ledgers and their migration
// files. The suite never depends on which database is underneath. It must
// never be imported by production code.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// Factory returns a fresh, migrated, empty store that is closed when the
// test ends.
type Factory func(t *testing.T) ledger.Store

// ProbeArgs is the job the suite enqueues with each created operation, so
// that it can count what acceptance really enqueued.
type ProbeArgs struct {
	OperationRef int64 `json:"operation_ref"`
}

// Kind implements river.JobArgs.
func (ProbeArgs) Kind() string { return "storetest_probe" }

// Exercise runs the whole contract against stores made by newStore.
func Exercise(t *testing.T, newStore Factory) {
	t.Run("Acceptance", func(t *testing.T) { t.Parallel(); testAcceptance(t, newStore) })
	t.Run("ConcurrentSameKey", func(t *testing.T) { t.Parallel(); testConcurrentSameKey(t, newStore) })
	t.Run("TenantScopedLookup", func(t *testing.T) { t.Parallel(); testTenantScopedLookup(t, newStore) })
	t.Run("ProviderKeys", func(t *testing.T) { t.Parallel(); testProviderKeys(t, newStore) })
	t.Run("DeclaredContracts", func(t *testing.T) { t.Parallel(); testDeclaredContracts(t, newStore) })
	t.Run("ClientResult", func(t *testing.T) { t.Parallel(); testClientResult(t, newStore) })
	t.Run("DeniedBeforeAcceptance", func(t *testing.T) { t.Parallel(); testDeniedBeforeAcceptance(t, newStore) })
	t.Run("Approvals", func(t *testing.T) { t.Parallel(); testApprovals(t, newStore) })
	t.Run("ConcurrentReservations", func(t *testing.T) { t.Parallel(); testConcurrentReservations(t, newStore) })
	t.Run("ApprovalRequests", func(t *testing.T) { t.Parallel(); testApprovalRequests(t, newStore) })
	t.Run("FanOutRoutes", func(t *testing.T) { t.Parallel(); testFanOutRoutes(t, newStore) })
	t.Run("Budgets", func(t *testing.T) { t.Parallel(); testBudgets(t, newStore) })
	t.Run("OperationList", func(t *testing.T) { t.Parallel(); testOperationList(t, newStore) })
	t.Run("ArchivePrune", func(t *testing.T) { t.Parallel(); testArchivePrune(t, newStore) })
	t.Run("AttemptRuns", func(t *testing.T) { t.Parallel(); testAttemptRuns(t, newStore) })
	t.Run("OperationsOfARun", func(t *testing.T) { t.Parallel(); testOperationsOfARun(t, newStore) })
	t.Run("Leases", func(t *testing.T) { t.Parallel(); testLeases(t, newStore) })
	t.Run("Transitions", func(t *testing.T) { t.Parallel(); testTransitions(t, newStore) })
	t.Run("IllegalTransitions", func(t *testing.T) { t.Parallel(); testIllegalTransitions(t, newStore) })
	t.Run("CancelOnce", func(t *testing.T) { t.Parallel(); testCancelOnce(t, newStore) })
	t.Run("StatusMessageWas", func(t *testing.T) { t.Parallel(); testStatusMessageWas(t, newStore) })
	t.Run("InputRounds", func(t *testing.T) { t.Parallel(); testInputRounds(t, newStore) })
	t.Run("ConcurrentAnswers", func(t *testing.T) { t.Parallel(); testConcurrentAnswers(t, newStore) })
	t.Run("KeyExpiry", func(t *testing.T) { t.Parallel(); testKeyExpiry(t, newStore) })
	t.Run("SigningKeys", func(t *testing.T) { t.Parallel(); testSigningKeys(t, newStore) })
	t.Run("ReceiptVersions", func(t *testing.T) { t.Parallel(); testReceiptVersions(t, newStore) })
	t.Run("ConsoleSessionEnds", func(t *testing.T) { t.Parallel(); testConsoleSessionEnds(t, newStore) })
	t.Run("SpendProperty", func(t *testing.T) { t.Parallel(); testSpendProperty(t, newStore) })
	t.Run("BadRequestInAGroup", func(t *testing.T) { t.Parallel(); testBadRequestInAGroup(t, newStore) })
	t.Run("MixedGroup", func(t *testing.T) { t.Parallel(); testMixedGroup(t, newStore) })
	t.Run("PanicInAcceptance", func(t *testing.T) { t.Parallel(); testPanicInAcceptance(t, newStore) })
	t.Run("CloseDuringAcceptance", func(t *testing.T) { t.Parallel(); testCloseDuringAcceptance(t, newStore) })
}

// call is one tools/call as a client would send it.
type call struct {
	tenant, key, args string
}

// fataler is what params needs of a testing.T or a rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func params(t fataler, c call) *ledger.AcceptParams {
	t.Helper()
	fp, err := canon.Compute("hosted_test", "run_suite", json.RawMessage(c.args))
	if err != nil {
		t.Fatalf("fingerprint %s: %v", c.args, err)
	}
	return &ledger.AcceptParams{
		Tenant:      c.tenant,
		OperationID: c.key,
		Upstream:    "hosted_test",
		Tool:        "run_suite",
		Fingerprint: string(fp),
		Arguments:   json.RawMessage(c.args),
		RequestID:   ledger.NewRequestID(),
		TaskID:      ledger.NewTaskID(),
		Source:      "storetest",
		Enqueue: func(op *ledger.Operation) []river.InsertManyParams {
			return []river.InsertManyParams{{Args: ProbeArgs{OperationRef: op.ID}}}
		},
	}
}

func accept(t *testing.T, s ledger.Store, p *ledger.AcceptParams) *ledger.AcceptResult {
	t.Helper()
	res, err := s.Accept(context.Background(), p)
	if err != nil {
		t.Fatalf("Accept(%s/%s): %v", p.Tenant, p.OperationID, err)
	}
	return res
}

// probeJobs counts the dispatch jobs acceptance enqueued.
func probeJobs(t *testing.T, s ledger.Store) int {
	t.Helper()
	jc, err := s.NewJobClient(&river.Config{})
	if err != nil {
		t.Fatalf("NewJobClient: %v", err)
	}
	res, err := jc.JobList(context.Background(), river.NewJobListParams().Kinds(ProbeArgs{}.Kind()).First(10000))
	if err != nil {
		t.Fatalf("JobList: %v", err)
	}
	return len(res.Jobs)
}

func operationCount(t *testing.T, s ledger.Store) int {
	t.Helper()
	ops, err := s.OperationList(context.Background(), &ledger.OperationListParams{Limit: 10000})
	if err != nil {
		t.Fatalf("OperationList: %v", err)
	}
	return len(ops)
}

// testAcceptance reproduces the acceptance table case by case.
func testAcceptance(t *testing.T, newStore Factory) {
	const (
		args         = `{"suite":"settlement","options":{"shard":2,"retries":0},"tags":["a","b"]}`
		argsReversed = `{"tags":["a","b"],"options":{"retries":0,"shard":2},"suite":"settlement"}`
		argsOther    = `{"suite":"settlement","options":{"shard":3,"retries":0},"tags":["a","b"]}`
	)
	type step struct {
		call     call
		decision ledger.Decision
		reason   string
		// sameTaskAs names an earlier step whose task ID this one must return.
		sameTaskAs int
	}
	tests := []struct {
		name       string
		steps      []step
		operations int
		jobs       int
		attempts   int
	}{
		{
			name: "retry with the same key and arguments returns the original task",
			steps: []step{
				{call: call{"acme", "op-1", args}, decision: ledger.DecisionCreated, sameTaskAs: -1},
				{call: call{"acme", "op-1", args}, decision: ledger.DecisionAttached, sameTaskAs: 0},
				{call: call{"acme", "op-1", args}, decision: ledger.DecisionAttached, sameTaskAs: 0},
			},
			operations: 1, jobs: 1, attempts: 3,
		},
		{
			name: "object keys in reverse order are the same operation",
			steps: []step{
				{call: call{"acme", "op-1", args}, decision: ledger.DecisionCreated, sameTaskAs: -1},
				{call: call{"acme", "op-1", argsReversed}, decision: ledger.DecisionAttached, sameTaskAs: 0},
			},
			operations: 1, jobs: 1, attempts: 2,
		},
		{
			name: "the same key from another tenant is an independent operation",
			steps: []step{
				{call: call{"acme", "op-1", args}, decision: ledger.DecisionCreated, sameTaskAs: -1},
				{call: call{"globex", "op-1", args}, decision: ledger.DecisionCreated, sameTaskAs: -1},
			},
			operations: 2, jobs: 2, attempts: 2,
		},
		{
			name: "the same key with different arguments is a conflict and starts nothing",
			steps: []step{
				{call: call{"acme", "op-1", args}, decision: ledger.DecisionCreated, sameTaskAs: -1},
				{call: call{"acme", "op-1", argsOther}, decision: ledger.DecisionConflict, reason: ledger.ReasonArgumentsDiffer, sameTaskAs: -1},
			},
			operations: 1, jobs: 1, attempts: 2,
		},
		{
			name: "two fresh keys with identical arguments make two operations",
			steps: []step{
				{call: call{"acme", "op-1", args}, decision: ledger.DecisionCreated, sameTaskAs: -1},
				{call: call{"acme", "op-2", args}, decision: ledger.DecisionCreated, sameTaskAs: -1},
			},
			operations: 2, jobs: 2, attempts: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			var results []*ledger.AcceptResult
			for i, st := range tt.steps {
				res := accept(t, s, params(t, st.call))
				if res.Decision != st.decision || res.Reason != st.reason {
					t.Fatalf("step %d %+v: decision %s (%q), want %s (%q)", i, st.call, res.Decision, res.Reason, st.decision, st.reason)
				}
				if res.Attempt == nil || res.Attempt.Decision != st.decision {
					t.Fatalf("step %d: attempt %+v not recorded with decision %s", i, res.Attempt, st.decision)
				}
				if st.sameTaskAs >= 0 && res.Operation.TaskID != results[st.sameTaskAs].Operation.TaskID {
					t.Errorf("step %d: task ID %s, want the original %s", i, res.Operation.TaskID, results[st.sameTaskAs].Operation.TaskID)
				}
				if st.decision == ledger.DecisionCreated {
					for j, prev := range results {
						if prev.Operation != nil && prev.Operation.TaskID == res.Operation.TaskID {
							t.Errorf("step %d: created operation reuses the task ID of step %d", i, j)
						}
					}
				}
				results = append(results, res)
			}
			if got := operationCount(t, s); got != tt.operations {
				t.Errorf("operations = %d, want %d", got, tt.operations)
			}
			if got := probeJobs(t, s); got != tt.jobs {
				t.Errorf("dispatch jobs enqueued = %d, want %d", got, tt.jobs)
			}
			attempts := 0
			seen := map[int64]bool{}
			for _, r := range results {
				if r.Operation == nil || seen[r.Operation.ID] {
					continue
				}
				seen[r.Operation.ID] = true
				as, err := s.AttemptList(context.Background(), r.Operation.ID)
				if err != nil {
					t.Fatalf("AttemptList: %v", err)
				}
				attempts += len(as)
			}
			if attempts != tt.attempts {
				t.Errorf("attempts recorded = %d, want %d", attempts, tt.attempts)
			}
		})
	}
}

// testConcurrentSameKey: 64 goroutines submitting one (tenant, key) at once
// produce exactly one operation, one dispatch job and 64 attempts.
func testConcurrentSameKey(t *testing.T, newStore Factory) {
	s := newStore(t)
	const n = 64
	ps := make([]*ledger.AcceptParams, n)
	for i := range ps {
		ps[i] = params(t, call{"acme", "op-concurrent", `{"suite":"all"}`})
	}
	results, errs := acceptAtOnce(context.Background(), s, ps)
	tasks := map[string]int{}
	created := 0
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("Accept: %v", errs[i])
		}
		tasks[res.Operation.TaskID]++
		if res.Decision == ledger.DecisionCreated {
			created++
		}
	}
	if created != 1 || len(tasks) != 1 {
		t.Fatalf("created = %d, distinct task IDs = %d; want 1 and 1", created, len(tasks))
	}
	if got := operationCount(t, s); got != 1 {
		t.Fatalf("operations = %d, want 1", got)
	}
	if got := probeJobs(t, s); got != 1 {
		t.Fatalf("dispatch jobs = %d, want 1", got)
	}
	op, err := s.OperationGet(context.Background(), &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-concurrent"})
	if err != nil {
		t.Fatal(err)
	}
	as, err := s.AttemptList(context.Background(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != n {
		t.Fatalf("attempts = %d, want %d", len(as), n)
	}
	ids := map[string]bool{}
	for _, a := range as {
		ids[a.RequestID] = true
	}
	if len(ids) != n {
		t.Fatalf("distinct request IDs = %d, want %d", len(ids), n)
	}
}

func testTenantScopedLookup(t *testing.T, newStore Factory) {
	s := newStore(t)
	p := params(t, call{"acme", "op-1", `{"suite":"x"}`})
	p.QueueLease = 1500 * time.Millisecond
	p.TTL = 90 * time.Second
	p.Priced, p.SecretArguments = true, []string{"token"}
	res := accept(t, s, p)
	ctx := context.Background()
	got, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", TaskID: res.Operation.TaskID})
	if err != nil || got.ID != res.Operation.ID {
		t.Fatalf("own task: %v, %v", got, err)
	}
	// What Accept returns is exactly what the ledger holds.
	if !reflect.DeepEqual(got, res.Operation) {
		t.Fatalf("Accept returned\n%+v\nthe ledger holds\n%+v", res.Operation, got)
	}
	atts, err := s.AttemptList(ctx, got.ID)
	if err != nil || len(atts) != 1 || !reflect.DeepEqual(atts[0], res.Attempt) {
		t.Fatalf("Accept returned attempt\n%+v\nthe ledger holds\n%+v (%v)", res.Attempt, atts, err)
	}
	if _, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "globex", TaskID: res.Operation.TaskID}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("another tenant's task: err = %v, want ErrNotFound", err)
	}
	if _, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", TaskID: "task-unknown"}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("unknown task: err = %v, want ErrNotFound", err)
	}
	if got.Tenant != "acme" || got.OperationID != "op-1" || got.State != ledger.StateAccepted || string(got.Arguments) != `{"suite":"x"}` ||
		!got.Priced || !slices.Equal(got.SecretArguments, []string{"token"}) {
		t.Fatalf("stored operation = %+v", got)
	}
}

func testClientResult(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	first := accept(t, s, params(t, call{"acme", "op-1", `{}`}))
	retry := accept(t, s, params(t, call{"acme", "op-1", `{}`}))
	if err := s.AttemptSetClientResult(ctx, first.Attempt.RequestID, ledger.ClientDisconnected); err != nil {
		t.Fatal(err)
	}
	if err := s.AttemptSetClientResult(ctx, retry.Attempt.RequestID, ledger.ClientDelivered); err != nil {
		t.Fatal(err)
	}
	if err := s.AttemptSetClientResult(ctx, "req-unknown", ledger.ClientDelivered); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("unknown request ID: err = %v, want ErrNotFound", err)
	}
	as, err := s.AttemptList(ctx, first.Operation.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || as[0].ClientResult != ledger.ClientDisconnected || as[1].ClientResult != ledger.ClientDelivered {
		t.Fatalf("attempts = %+v %+v", as[0], as[1])
	}
	if as[1].RemoteAccepted != ledger.No || as[0].RemoteAccepted != ledger.Unknown {
		t.Fatalf("remote knowledge: created %s, attached %s; want unknown and no", as[0].RemoteAccepted, as[1].RemoteAccepted)
	}
	evs, err := s.EventList(ctx, first.Operation.ID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[ledger.EventKind]int{}
	for _, e := range evs {
		kinds[e.Kind]++
	}
	// The created and attached attempts write their attempt rows and
	// nothing else: the events are what their clients got.
	if len(evs) != 2 || kinds[ledger.EventClientStoppedWatching] != 1 || kinds[ledger.EventClientResult] != 1 {
		t.Fatalf("event kinds = %v", kinds)
	}
}

func testDeniedBeforeAcceptance(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	att, err := s.AttemptRecord(ctx, &ledger.AttemptRecordParams{
		RequestID: ledger.NewRequestID(), Tenant: "acme", Decision: ledger.DecisionDenied, Reason: ledger.ReasonOperationIDRequired,
	})
	if err != nil || att.OperationRef != 0 || att.Reason != ledger.ReasonOperationIDRequired {
		t.Fatalf("AttemptRecord = %+v, %v", att, err)
	}
	if got := operationCount(t, s); got != 0 {
		t.Fatalf("operations = %d after a denial, want 0", got)
	}
}

func approval(tenant, key string, ceiling string, jobs int, expires time.Time) *ledger.Approval {
	return &ledger.Approval{
		Tenant: tenant, OperationID: key, Tool: "hosted_test.run_suite",
		MaxTotalCost: money.MustParse(ceiling, "USD"), MaxRemoteJobs: jobs,
		RetryPolicy: "lookup_then_attach", ExpiresAt: expires,
	}
}

func needsApproval(p *ledger.AcceptParams, estimate string) *ledger.AcceptParams {
	p.Approval = ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse(estimate, "USD")}
	return p
}

func testApprovals(t *testing.T, newStore Factory) {
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	type step struct {
		call     call
		estimate string
		decision ledger.Decision
		reason   string
	}
	tests := []struct {
		name      string
		approvals []*ledger.Approval
		steps     []step
		jobs      int
	}{
		{
			name: "no approval: denied, and the key is not consumed",
			steps: []step{
				{call{"acme", "op-1", `{"s":1}`}, "18.00", ledger.DecisionDenied, ledger.ReasonApprovalRequired},
			},
		},
		{
			name:      "one remote job: a retry under a new operation ID is denied as a retry",
			approvals: []*ledger.Approval{approval("acme", "op-1", "20.00", 1, later)},
			steps: []step{
				{call{"acme", "op-1", `{"s":1}`}, "18.00", ledger.DecisionCreated, ""},
				{call{"acme", "op-1", `{"s":1}`}, "18.00", ledger.DecisionAttached, ""},
				{call{"acme", "op-1-retry", `{"s":1}`}, "18.00", ledger.DecisionDenied, ledger.ReasonRetryUsesNewOperation},
			},
			jobs: 1,
		},
		{
			name:      "an expired approval covers nothing",
			approvals: []*ledger.Approval{approval("acme", "op-1", "20.00", 1, time.Now().Add(-time.Minute))},
			steps: []step{
				{call{"acme", "op-1", `{"s":1}`}, "18.00", ledger.DecisionDenied, ledger.ReasonApprovalExpired},
			},
		},
		{
			name:      "two cheap requests that together exceed the ceiling are stopped at the second",
			approvals: []*ledger.Approval{approval("acme", "op-1", "20.00", 5, later)},
			steps: []step{
				{call{"acme", "op-1", `{"s":1}`}, "12.00", ledger.DecisionCreated, ""},
				{call{"acme", "op-2", `{"s":1}`}, "12.00", ledger.DecisionDenied, ledger.ReasonCostCeilingExceeded},
			},
			jobs: 1,
		},
		{
			name:      "an estimate above the ceiling is refused outright",
			approvals: []*ledger.Approval{approval("acme", "op-1", "10.00", 1, later)},
			steps: []step{
				{call{"acme", "op-1", `{"s":1}`}, "18.00", ledger.DecisionDenied, ledger.ReasonCostCeilingExceeded},
			},
		},
		{
			name:      "an approval for another tenant covers nothing",
			approvals: []*ledger.Approval{approval("globex", "op-1", "20.00", 1, later)},
			steps: []step{
				{call{"acme", "op-1", `{"s":1}`}, "18.00", ledger.DecisionDenied, ledger.ReasonApprovalRequired},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			for _, a := range tt.approvals {
				if _, err := s.ApprovalCreate(ctx, a); err != nil {
					t.Fatalf("ApprovalCreate: %v", err)
				}
			}
			for i, st := range tt.steps {
				res := accept(t, s, needsApproval(params(t, st.call), st.estimate))
				if res.Decision != st.decision || res.Reason != st.reason {
					t.Fatalf("step %d %v: %s (%s: %s), want %s (%s)", i, st.call, res.Decision, res.Reason, res.Message, st.decision, st.reason)
				}
				if res.Decision == ledger.DecisionDenied && res.Message == "" {
					t.Errorf("step %d: a denial without a message", i)
				}
			}
			if got := probeJobs(t, s); got != tt.jobs {
				t.Errorf("dispatch jobs = %d, want %d", got, tt.jobs)
			}
		})
	}

	t.Run("a denial does not consume the key", func(t *testing.T) {
		s := newStore(t)
		p := needsApproval(params(t, call{"acme", "op-1", `{"s":1}`}), "18.00")
		if res := accept(t, s, p); res.Decision != ledger.DecisionDenied {
			t.Fatalf("before approval: %s", res.Decision)
		}
		if _, err := s.ApprovalCreate(ctx, approval("acme", "op-1", "20.00", 1, later)); err != nil {
			t.Fatal(err)
		}
		if res := accept(t, s, needsApproval(params(t, call{"acme", "op-1", `{"s":1}`}), "18.00")); res.Decision != ledger.DecisionCreated {
			t.Fatalf("after approval: %s (%s)", res.Decision, res.Reason)
		}
	})

	t.Run("revoked approvals cover nothing new", func(t *testing.T) {
		s := newStore(t)
		a, err := s.ApprovalCreate(ctx, approval("acme", "op-1", "20.00", 1, later))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApprovalRevoke(ctx, "globex", a.ID, time.Time{}); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("revoke by another tenant: %v, want ErrNotFound", err)
		}
		if _, err := s.ApprovalRevoke(ctx, "acme", a.ID, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if res := accept(t, s, needsApproval(params(t, call{"acme", "op-1", `{"s":1}`}), "18.00")); res.Reason != ledger.ReasonApprovalExpired {
			t.Fatalf("under a revoked approval: %s (%s)", res.Decision, res.Reason)
		}
		list, err := s.ApprovalList(ctx, &ledger.ApprovalListParams{Tenant: "acme"})
		if err != nil || len(list) != 0 {
			t.Fatalf("active approvals after revoke = %d, %v", len(list), err)
		}
	})
}

// testFanOutRoutes: a call that fans out is admitted and reserved as a
// whole (every remote job and the total estimate) or refused with nothing
// reserved, and the operation intends all its jobs.
func testFanOutRoutes(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s := newStore(t)
	a, err := s.ApprovalCreate(ctx, approval("acme", "matrix-1", "80.00", 4, time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	route := func(key string, jobs int, estimate string) *ledger.AcceptParams {
		p := params(t, call{"acme", key, fmt.Sprintf(`{"runners":%d}`, jobs)})
		p.Approval = ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse(estimate, "USD"), RemoteJobs: jobs}
		return p
	}

	// Six runners under an approval for four: refused, nothing reserved.
	if res := accept(t, s, route("matrix-1", 6, "108.00")); res.Decision != ledger.DecisionDenied || res.Reason != ledger.ReasonRemoteJobLimitReached ||
		!strings.Contains(res.Message, "would start 6 remote jobs") {
		t.Fatalf("6 runners approved for 4: %s (%s: %s), want denied with %s naming the route", res.Decision, res.Reason, res.Message, ledger.ReasonRemoteJobLimitReached)
	}
	// Four runners whose total is above the ceiling: refused too.
	if res := accept(t, s, route("matrix-1", 4, "96.00")); res.Decision != ledger.DecisionDenied || res.Reason != ledger.ReasonCostCeilingExceeded {
		t.Fatalf("4 runners over the ceiling: %s (%s: %s), want denied with %s", res.Decision, res.Reason, res.Message, ledger.ReasonCostCeilingExceeded)
	}
	if rs, err := s.ReservationList(ctx, a.ID); err != nil || len(rs) != 0 {
		t.Fatalf("reservations after refused routes = %d, %v; want none", len(rs), err)
	}

	res := accept(t, s, route("matrix-1", 4, "72.00"))
	if res.Decision != ledger.DecisionCreated || res.Operation.IntendedRemoteJobs != 4 || res.Operation.Estimate.String() != "72.00" {
		t.Fatalf("4 runners approved for 4: %s (%s), op %+v; want created intending 4 jobs at 72.00", res.Decision, res.Reason, res.Operation)
	}
	stored, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "matrix-1"})
	if err != nil || stored.IntendedRemoteJobs != 4 {
		t.Fatalf("stored operation intends %v jobs, %v; want 4", stored, err)
	}
	rs, err := s.ReservationList(ctx, a.ID)
	if err != nil || len(rs) != 1 || rs[0].RemoteJobs != 4 || rs[0].Amount.String() != "72.00" || rs[0].Status != ledger.ReservationHeld {
		t.Fatalf("reservations = %+v, %v; want one held for 4 jobs and 72.00", rs, err)
	}
	// The approval's jobs are all reserved: a retry attaches, and a call
	// under a new operation ID that repeats the arguments is a retry.
	if res := accept(t, s, route("matrix-1", 4, "72.00")); res.Decision != ledger.DecisionAttached {
		t.Fatalf("retry: %s (%s), want attached", res.Decision, res.Reason)
	}
	if res := accept(t, s, route("matrix-2", 4, "72.00")); res.Reason != ledger.ReasonRetryUsesNewOperation {
		t.Fatalf("the same matrix under a new operation ID: %s (%s), want %s", res.Decision, res.Reason, ledger.ReasonRetryUsesNewOperation)
	}
	// A single-job call intends one job, as before.
	single := accept(t, s, params(t, call{"acme", "single", `{"s":1}`}))
	if single.Decision != ledger.DecisionCreated || single.Operation.IntendedRemoteJobs != 1 {
		t.Fatalf("a call without a route: %s, intends %d; want created intending 1", single.Decision, single.Operation.IntendedRemoteJobs)
	}
}

// testConcurrentReservations: concurrent dispatches under one approval
// cannot both pass the reservation.
func testConcurrentReservations(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	a, err := s.ApprovalCreate(ctx, approval("acme", "op-base", "50.00", 3, time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	// The first operation runs under the approval by its own ID; the others
	// repeat its arguments under new IDs and draw on the same approval.
	if res := accept(t, s, needsApproval(params(t, call{"acme", "op-base", `{"s":1}`}), "10.00")); res.Decision != ledger.DecisionCreated {
		t.Fatalf("first: %s (%s)", res.Decision, res.Reason)
	}
	const n = 32
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Accept(ctx, needsApproval(params(t, call{"acme", fmt.Sprintf("op-%d", i), `{"s":1}`}), "10.00"))
			if err != nil {
				t.Errorf("Accept: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Decision == ledger.DecisionCreated {
				created++
			}
		}()
	}
	wg.Wait()
	// 3 remote jobs allowed: the first plus two more.
	if created != 2 {
		t.Fatalf("created under one approval = %d, want 2", created)
	}
	rs, err := s.ReservationList(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("reservations = %d, want 3", len(rs))
	}
}

func testOperationList(t *testing.T, newStore Factory) {
	s := newStore(t)
	for i := range 5 {
		accept(t, s, params(t, call{"acme", fmt.Sprintf("op-%d", i), `{}`}))
	}
	accept(t, s, params(t, call{"globex", "op-0", `{}`}))
	ctx := context.Background()
	ops, err := s.OperationList(ctx, &ledger.OperationListParams{Tenant: "acme", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 || ops[0].OperationID != "op-4" || ops[2].OperationID != "op-2" {
		t.Fatalf("first page = %v", ids(ops))
	}
	next, err := s.OperationList(ctx, &ledger.OperationListParams{Tenant: "acme", Limit: 3, BeforeID: ops[2].ID})
	if err != nil || len(next) != 2 || next[1].OperationID != "op-0" {
		t.Fatalf("second page = %v, %v", ids(next), err)
	}
	open, err := s.OperationList(ctx, &ledger.OperationListParams{States: []ledger.State{ledger.StateCompleted}})
	if err != nil || len(open) != 0 {
		t.Fatalf("completed operations = %v, %v", ids(open), err)
	}
}

func ids(ops []*ledger.Operation) []string {
	var out []string
	for _, o := range ops {
		out = append(out, o.Tenant+"/"+o.OperationID)
	}
	return out
}

// acceptAtOnce submits every acceptance from its own goroutine, released
// together so that they contend, and returns each one's result and error.
func acceptAtOnce(ctx context.Context, s ledger.Store, ps []*ledger.AcceptParams) ([]*ledger.AcceptResult, []error) {
	return acceptAcross(ctx, []ledger.Store{s}, ps)
}

// acceptAcross sends every attempt of ps at the same instant, the i-th
// through stores[i%len(stores)], as a load balancer spreads them over
// replicas.
func acceptAcross(ctx context.Context, stores []ledger.Store, ps []*ledger.AcceptParams) ([]*ledger.AcceptResult, []error) {
	results := make([]*ledger.AcceptResult, len(ps))
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range ps {
		wg.Go(func() {
			<-start
			results[i], errs[i] = stores[i%len(stores)].Accept(ctx, ps[i])
		})
	}
	close(start)
	wg.Wait()
	return results, errs
}

// testProviderKeys: every operation is stored with a random provider key
// of its own, fixed at acceptance and read back as written by every read,
// so no tenant can compute another's from what it knows (tenant, operation
// ID, row) and a retry sends the key the first send did.
func testProviderKeys(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	ctx := context.Background()
	s := newStore(t)
	acme := accept(t, s, params(t, call{"acme", "op-1", `{}`})).Operation
	evil := accept(t, s, params(t, call{"evil", "op-1", `{}`})).Operation
	for _, op := range []*ledger.Operation{acme, evil} {
		derived := (&ledger.Operation{ID: op.ID, Tenant: op.Tenant, OperationID: op.OperationID}).ProviderKey()
		if op.StoredProviderKey == "" || op.ProviderKey() != op.StoredProviderKey || op.ProviderKey() == derived {
			t.Fatalf("%s/%s: provider key %q, stored %q; want a stored key other than the derived %q", op.Tenant, op.OperationID, op.ProviderKey(), op.StoredProviderKey, derived)
		}
	}
	if acme.ProviderKey() == evil.ProviderKey() {
		t.Fatalf("two tenants' operations share provider key %s", acme.ProviderKey())
	}
	again := accept(t, s, params(t, call{"acme", "op-1", `{}`}))
	byID, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: acme.ID})
	if err != nil {
		t.Fatal(err)
	}
	byKey, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-1"})
	if err != nil {
		t.Fatal(err)
	}
	for what, op := range map[string]*ledger.Operation{"attached": again.Operation, "read by row": byID, "read by operation ID": byKey} {
		if op.ProviderKey() != acme.ProviderKey() {
			t.Errorf("%s: provider key %q, want %q as accepted", what, op.ProviderKey(), acme.ProviderKey())
		}
	}
}
