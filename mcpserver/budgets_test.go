package mcpserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestBudgetsFalseWantsAPerson: one budget covers every hosted_test tool;
// run_suite, with budgets at their default, runs on it with nobody asked,
// while run_matrix, whose policy says budgets: false, waits for an
// approver and starts no job.
func TestBudgetsFalseWantsAPerson(t *testing.T) {
	g := startGateway(t, gatewayOptions{yaml: func(y string) string {
		y = strings.Replace(y, "run_suite:\n        consequential: true\n        approval: none",
			"run_suite:\n        consequential: true\n        approval: required", 1)
		return strings.Replace(y, "run_matrix:\n        consequential: true\n        approval: required",
			"run_matrix:\n        consequential: true\n        approval: required\n        budgets: false", 1)
	}})
	ctx := testCtx(t)
	if _, err := g.store.BudgetCreate(ctx, &ledger.Budget{Tenant: "acme", ToolPrefix: "hosted_test.",
		MaxTotalCost: money.MustParse("1000.00", "USD"), MaxRemoteJobs: 20, Period: ledger.BudgetPeriodNone,
		ExpiresAt: time.Now().Add(time.Hour), CreatedBy: "test", Note: "covers the suite tools"}); err != nil {
		t.Fatal(err)
	}
	cs := g.connect(t, fixtures.EraExtension)

	suite, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-on-budget", nil), nil)
	if err != nil || suite == nil {
		t.Fatalf("run_suite = %+v, %v; want a task", suite, err)
	}
	if done := awaitTask(t, cs, suite.ID); done.Status != taskwire.StatusCompleted {
		t.Fatalf("run_suite ended %s (%s); want completed on the budget", done.Status, done.StatusMessage)
	}

	matrix, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunMatrixCall("op-wants-a-person", "x", 2), nil)
	if err != nil || matrix == nil {
		t.Fatalf("run_matrix = %+v, %v; want a task", matrix, err)
	}
	testwait.Until(t, ctx, "run_matrix waits for an approver", func() (bool, error) {
		op, _ := opEvents(t, g, "op-wants-a-person")
		return op.State == ledger.StateAwaitingApproval, nil
	})
	if jobs := g.sim.Jobs(); len(jobs) != 1 {
		t.Errorf("the provider has %d jobs; want 1, run_suite's, and none of run_matrix's", len(jobs))
	}
}
