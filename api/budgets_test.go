package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

const budgetBody = `{"tool_prefix":"hosted_test.","max_total_cost":"100.00","max_remote_jobs":10,"period":"day",
	"time_zone":"Europe/Berlin","per_operation_cap":"25.00","expires_in":"720h","note":"CI suites on pull requests"}`

func budgetView(t *testing.T, r response, want int) api.BudgetView {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d %s, want %d", r.status, r.body, want)
	}
	var v api.BudgetView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("answer %s: %v", r.body, err)
	}
	return v
}

// TestBudgetLifecycle: an approver creates, reads, lists and closes a
// budget; each change names the approver's credential.
func TestBudgetLifecycle(t *testing.T) {
	f := newFixture(t, 0)
	v := budgetView(t, f.do(t, http.MethodPost, "/v1/budgets", f.acmeApprover, budgetBody), http.StatusCreated)
	if v.Tenant != "acme" || v.MaxTotalCost != "100.00" || v.PerOperationCap != "25.00" || v.Period != "day" || v.TimeZone != "Europe/Berlin" ||
		v.Status != api.BudgetOpen || v.Remaining != "100.00" || v.RemoteJobsRemaining != 10 || !strings.HasPrefix(v.CreatedBy, "api_key:") ||
		v.PeriodStart.IsZero() || v.PeriodEnd.Sub(v.PeriodStart).Hours() != 24 {
		t.Fatalf("created budget = %+v", v)
	}
	path := "/v1/budgets/" + itoa(v.ID)
	if got := budgetView(t, f.do(t, http.MethodGet, path, f.acmeApprover, ""), http.StatusOK); got.ID != v.ID || got.Note != "CI suites on pull requests" {
		t.Fatalf("GET %s = %+v", path, got)
	}
	if r := f.do(t, http.MethodGet, path, f.otherApprover, ""); r.status != http.StatusNotFound {
		t.Fatalf("another tenant's approver GET %s: %d %s, want 404", path, r.status, r.body)
	}
	closed := budgetView(t, f.do(t, http.MethodPost, path+"/close", f.acmeApprover, ""), http.StatusOK)
	if closed.Status != api.BudgetClosed || closed.ClosedBy != v.CreatedBy {
		t.Fatalf("closed budget = %+v", closed)
	}
	var l struct {
		Budgets []api.BudgetView `json:"budgets"`
	}
	r := f.do(t, http.MethodGet, "/v1/budgets", f.acmeApprover, "")
	if err := json.Unmarshal(r.body, &l); err != nil || r.status != http.StatusOK || len(l.Budgets) != 0 {
		t.Fatalf("open budgets after closing: %d %s", r.status, r.body)
	}
	r = f.do(t, http.MethodGet, "/v1/budgets?all=true", f.acmeApprover, "")
	if err := json.Unmarshal(r.body, &l); err != nil || len(l.Budgets) != 1 {
		t.Fatalf("all budgets: %d %s", r.status, r.body)
	}
	events, err := f.store.BudgetEventList(context.Background(), v.ID)
	if err != nil || len(events) != 2 || events[0].By != v.CreatedBy || events[1].Kind != ledger.BudgetClosed || events[1].By != v.CreatedBy {
		t.Fatalf("budget events = %+v, %v", events, err)
	}
}

// TestAgentsCannotSetBudgets: the key an agent calls tools with can
// neither create, read nor close a budget.
func TestAgentsCannotSetBudgets(t *testing.T) {
	f := newFixture(t, 0)
	r := f.do(t, http.MethodPost, "/v1/budgets", f.acme, budgetBody)
	if code, msg, _ := apiError(t, r); r.status != http.StatusForbidden || code != api.CodeForbidden || !strings.Contains(msg, "approver") {
		t.Errorf("agent key POST /v1/budgets: %d %s, want 403 forbidden naming the approver role", r.status, r.body)
	}
	if got, err := f.store.BudgetList(context.Background(), &ledger.BudgetListParams{Tenant: "acme", IncludeClosed: true}); err != nil || len(got) != 0 {
		t.Fatalf("after the agent's POST the ledger holds %+v, %v; want no budget", got, err)
	}
	v := budgetView(t, f.do(t, http.MethodPost, "/v1/budgets", f.acmeApprover, budgetBody), http.StatusCreated)
	for _, req := range []struct{ method, path string }{{http.MethodGet, "/v1/budgets"}, {http.MethodGet, "/v1/budgets/" + itoa(v.ID)}, {http.MethodPost, "/v1/budgets/" + itoa(v.ID) + "/close"}} {
		if r := f.do(t, req.method, req.path, f.acme, ""); r.status != http.StatusForbidden {
			t.Errorf("agent key %s %s: %d %s, want 403", req.method, req.path, r.status, r.body)
		}
	}
	if b, err := f.store.BudgetGet(context.Background(), "acme", v.ID); err != nil || !b.ClosedAt.IsZero() {
		t.Fatalf("budget after the agent's close = %+v, %v; want open", b, err)
	}
}

func TestBudgetBadInput(t *testing.T) {
	f := newFixture(t, 0)
	tests := []struct{ name, body, field string }{
		{"a number for money", `{"max_total_cost":100,"max_remote_jobs":1,"expires_in":"24h"}`, "max_total_cost"},
		{"no ceiling", `{"max_remote_jobs":1,"expires_in":"24h"}`, "max_total_cost"},
		{"no jobs", `{"max_total_cost":"10.00","expires_in":"24h"}`, "max_remote_jobs"},
		{"unknown period", `{"max_total_cost":"10.00","max_remote_jobs":1,"period":"fortnight","expires_in":"24h"}`, "period"},
		{"unknown zone", `{"max_total_cost":"10.00","max_remote_jobs":1,"period":"day","time_zone":"Mars/Olympus","expires_in":"24h"}`, "time_zone"},
		{"unqualified tool", `{"tools":["run_suite"],"max_total_cost":"10.00","max_remote_jobs":1,"expires_in":"24h"}`, "tools"},
		{"no expiry", `{"max_total_cost":"10.00","max_remote_jobs":1}`, "expires_in"},
		{"unknown field", `{"max_total_cost":"10.00","max_remote_jobs":1,"expires_in":"24h","tenant":"globex"}`, "tenant"},
	}
	for _, tt := range tests {
		r := f.do(t, http.MethodPost, "/v1/budgets", f.acmeApprover, tt.body)
		if code, _, field := apiError(t, r); r.status != http.StatusBadRequest || code != api.CodeInvalidRequest || field != tt.field {
			t.Errorf("%s: %d %s, want 400 on field %s", tt.name, r.status, r.body, tt.field)
		}
	}
}

// TestBudgetMetrics: /metrics shows what each open budget has left of its
// ceiling and its remote jobs, read from the ledger at the scrape.
func TestBudgetMetrics(t *testing.T) {
	f := newFixture(t, 0)
	v := budgetView(t, f.do(t, http.MethodPost, "/v1/budgets", f.acmeApprover, budgetBody), http.StatusCreated)
	reg := prometheus.NewRegistry()
	reg.MustRegister(api.NewBudgetCollector(f.store, slog.New(slog.DiscardHandler), clock))
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.store.Accept(context.Background(), &ledger.AcceptParams{Tenant: "acme", OperationID: "pr-81-suite", Upstream: "hosted_test", Tool: "run_suite",
		Fingerprint: string(fp), Arguments: args, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", Now: clock(),
		Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("18.00", "USD")}})
	if err != nil || res.Decision != ledger.DecisionCreated {
		t.Fatalf("a call the budget covers: %+v, %v", res, err)
	}
	want := fmt.Sprintf(`
# HELP taskgate_budget_remaining What is left of an open budget's total-cost ceiling in its current period, in its currency; negative after a breach.
# TYPE taskgate_budget_remaining gauge
taskgate_budget_remaining{budget="%d",currency="USD",tenant="acme"} 82
# HELP taskgate_budget_remote_jobs_remaining How many remote jobs an open budget has left in its current period.
# TYPE taskgate_budget_remote_jobs_remaining gauge
taskgate_budget_remote_jobs_remaining{budget="%d",currency="USD",tenant="acme"} 9
`, v.ID, v.ID)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "taskgate_budget_remaining", "taskgate_budget_remote_jobs_remaining"); err != nil {
		t.Fatal(err)
	}
}
