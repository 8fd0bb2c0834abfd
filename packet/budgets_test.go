package packet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
)

// underBudget is op covered by budget 3, holding or settled at amount.
func underBudget(in *receipt.Input, status ledger.ReservationStatus, amount string) *receipt.Input {
	usd := money.MustParse(amount, "USD")
	in.Budgets = []*ledger.Budget{{ID: 3, Tenant: "acme", ToolPrefix: "hosted_test.", RunID: run, MaxTotalCost: money.MustParse("40.00", "USD"),
		MaxRemoteJobs: 5, Period: ledger.BudgetPeriodDay, TimeZone: "Europe/Berlin", ExpiresAt: at(24 * time.Hour)}}
	in.BudgetReservations = []*ledger.BudgetReservation{{BudgetRef: 3, OperationRef: in.Operation.ID, Amount: money.MustParse("18.00", "USD"),
		Settled: usd, RemoteJobs: 1, Status: status}}
	return in
}

// waited is in, whose call waited for an approver's decision of its
// approval request.
func waited(in *receipt.Input) *receipt.Input {
	in.ApprovalRequest = &ledger.ApprovalRequest{ID: 12, Tenant: "acme", OperationID: in.Operation.OperationID, OperationRef: in.Operation.ID,
		Tool: "hosted_test.run_suite", Status: ledger.RequestApproved, DecidedBy: "api_key:9", CreatedAt: at(0), DecidedAt: at(time.Minute), ApprovalRef: in.Approval.ID}
	return in
}

// TestBudgetsOfTheRun: the packet totals what the run's operations spent
// against each budget that covered them, in JSON its schema accepts and in
// Markdown.
func TestBudgetsOfTheRun(t *testing.T) {
	p, err := packet.Build(&packet.Input{Selection: packet.Selection{RunID: run}, Operations: provisional(
		underBudget(clean(), ledger.ReservationSettled, "17.84"), underBudget(duplicateCancelled(), ledger.ReservationSettled, "17.84"), waited(costBreach()),
	)})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Budgets) != 1 || p.Budgets[0].ID != 3 || p.Budgets[0].Spent.String() != "35.68" || len(p.Budgets[0].UsedBy) != 2 ||
		p.Budgets[0].RunID != run || p.Budgets[0].TimeZone != "Europe/Berlin" || len(p.Budgets[0].NotCovered) != 1 || p.Budgets[0].NotCovered[0] != "suite-breach" {
		t.Fatalf("budgets = %+v, want budget 3 spent 35.68 by two operations, not covering suite-breach", p.Budgets)
	}
	b, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := resolvedSchema(t).Validate(decode(t, b)); err != nil {
		t.Errorf("a packet with budgets does not match the schema: %v", err)
	}
	md := p.Markdown()
	if !strings.Contains(string(md), "### Budgets") || !strings.Contains(string(md), "| #3 | `hosted_test.*`") || !strings.Contains(string(md), "35.68 USD") {
		t.Errorf("Markdown = %s; want a budgets table naming budget 3 and 35.68 USD", md)
	}
}
