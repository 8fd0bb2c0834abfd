package console_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestBudgetRunEndToEnd: an agent's run has a day budget for five of its
// calls. A real MCP client makes ten calls one after another: the first
// five run with nobody asked, the sixth waits until an approver approves
// it in the console in Chromium, the other four wait too, and the run's
// review packet names the budget, what the run spent against it and the
// calls it did not cover.
func TestBudgetRunEndToEnd(t *testing.T) {
	exe := chromiumPath(t)
	h := harness(t)
	key, k := approverKey(t, h, "acme")
	const run = "pr-81"
	b, err := h.Store.BudgetCreate(testCtx(t), &ledger.Budget{Tenant: "acme", Tools: []string{fixtures.RunSuiteTool}, RunID: run,
		MaxTotalCost: money.MustParse("90.00", "USD"), MaxRemoteJobs: 10, Period: ledger.BudgetPeriodDay, TimeZone: "UTC",
		ExpiresAt: time.Now().Add(24 * time.Hour), CreatedBy: fmt.Sprintf("api_key:%d", k.ID), Note: "pull request 81"})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := h.Connect(testCtx(t), "acme", fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	call := func(i int) *taskwire.Task {
		t.Helper()
		params := fixtures.RunSuiteCall(fmt.Sprintf("pr-81-suite-%d", i), map[string]any{"suite": fmt.Sprintf("suite-%d", i)})
		params.Meta = map[string]any{"dev.taskgate/run-id": run}
		task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, params, nil)
		if err != nil || task == nil {
			t.Fatalf("call %d = %+v, %v; want a task", i, task, err)
		}
		return task
	}
	for i := 1; i <= 5; i++ {
		done, err := taskwire.AwaitTask(testCtx(t), cs, call(i).ID, 50*time.Millisecond)
		if err != nil || done.Status != taskwire.StatusCompleted {
			t.Fatalf("call %d = %+v, %v; want completed on the budget with nobody asked", i, done, err)
		}
	}
	sixth := call(6)
	q := pendingRequest(t, h, "acme")
	if q.OperationID != "pr-81-suite-6" || len(h.Sim.Jobs()) != 5 {
		t.Fatalf("pending request %+v with %d provider jobs; want the sixth call's, and 5 jobs", q, len(h.Sim.Jobs()))
	}

	ctx, _ := chromium(t, exe)
	step, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	request := fmt.Sprintf("#request-%d", q.ID)
	if err := chromedp.Do(step, chromedp.Navigate(baseURL(h)+"/console/sign-in"), chromedp.WaitVisible(chromedp.CSS("#credential")),
		chromedp.SendKeys(chromedp.CSS("#credential"), key), chromedp.Submit(chromedp.CSS("#sign-in")), chromedp.WaitVisible(chromedp.CSS(request)),
		chromedp.SetValue(chromedp.CSS(request+" form.approve input[name=note]"), "the sixth suite of pull request 81"),
		chromedp.Click(chromedp.CSS(request+" form.approve button")), chromedp.WaitVisible(chromedp.CSS("#state"))); err != nil {
		t.Fatalf("approve the sixth call in the console: %v", err)
	}
	done, err := taskwire.AwaitTask(testCtx(t), cs, sixth.ID, 50*time.Millisecond)
	if err != nil || done.Status != taskwire.StatusCompleted || len(h.Sim.Jobs()) != 6 {
		t.Fatalf("the sixth call after the approval = %+v, %v, %d provider jobs; want completed, 6 jobs", done, err, len(h.Sim.Jobs()))
	}

	// The budget stays spent: the run's last four calls each wait for an
	// approver too, and start nothing.
	for i := 7; i <= 10; i++ {
		call(i)
		opID := fmt.Sprintf("pr-81-suite-%d", i)
		testwait.Until(t, testCtx(t), opID+" to wait for an approver", func() (bool, error) {
			op, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: opID})
			if err != nil {
				return false, err
			}
			return op.State == ledger.StateAwaitingApproval, nil
		})
	}
	if n := len(h.Sim.Jobs()); n != 6 {
		t.Fatalf("%d provider jobs after ten calls; want 6: five on the budget, one approved", n)
	}

	ops, err := h.Store.OperationList(testCtx(t), &ledger.OperationListParams{Tenant: "acme", RunID: run})
	if err != nil || len(ops) != 10 {
		t.Fatalf("operations of run %s = %d, %v; want 10", run, len(ops), err)
	}
	var p *packet.Packet
	// Settlement follows each job's charges: wait until all five settled.
	testwait.Until(t, testCtx(t), "the run's packet to count the five covered calls settled", func() (bool, error) {
		in := &packet.Input{Selection: packet.Selection{RunID: run}}
		for _, op := range ops {
			op, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{ID: op.ID})
			if err != nil {
				return false, err
			}
			rin, err := receipt.Load(testCtx(t), h.Store, op, nil)
			if err != nil {
				return false, err
			}
			in.Operations = append(in.Operations, packet.Included{Receipt: receipt.Build(rin), Approval: rin.Approval})
		}
		var err error
		if p, err = packet.Build(in); err != nil {
			return false, err
		}
		return len(p.Budgets) == 1 && p.Budgets[0].Spent.String() == "89.20", nil
	})
	if len(p.Budgets) != 1 || p.Budgets[0].ID != b.ID || len(p.Budgets[0].UsedBy) != 5 || p.Budgets[0].Spent.String() != "89.20" ||
		strings.Join(slices.Sorted(slices.Values(p.Budgets[0].NotCovered)), " ") != "pr-81-suite-10 pr-81-suite-6 pr-81-suite-7 pr-81-suite-8 pr-81-suite-9" {
		t.Fatalf("the packet's budgets = %+v; want budget %d, spent 89.20 by the five calls it covered, not covering the other five", p.Budgets, b.ID)
	}
	if md := string(p.Markdown()); !strings.Contains(md, fmt.Sprintf("| #%d |", b.ID)) || !strings.Contains(md, "the sixth suite of pull request 81") {
		t.Errorf("the packet's Markdown lacks the budget or the approver's note:\n%s", md)
	}
}
