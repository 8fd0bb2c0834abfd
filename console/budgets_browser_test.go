package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestBudgetInChromium: in Chromium, an approver creates a day budget with
// the console's form; three calls run on it, a fourth waits; the budget's
// page draws the period's consumption as an SVG with no script on the
// page. With TASKGATE_CONSOLE_SCREENSHOTS set it saves that page as
// console-budget.png for the docs.
func TestBudgetInChromium(t *testing.T) {
	exe := chromiumPath(t)
	h := harness(t)
	key, _ := approverKey(t, h, "acme")
	ctx, run := chromium(t, exe, chromedp.WindowSize(1280, 1000))
	base := baseURL(h)
	run("sign in as the approver", chromedp.Navigate(base+"/console/sign-in"), chromedp.WaitVisible(chromedp.CSS("#credential")),
		chromedp.SendKeys(chromedp.CSS("#credential"), key), chromedp.Submit(chromedp.CSS("#sign-in")), chromedp.WaitVisible(chromedp.CSS("nav")))
	run("create a budget", chromedp.Navigate(base+"/console/budgets"), chromedp.WaitVisible(chromedp.CSS("#create-budget")),
		chromedp.SendKeys(chromedp.CSS("#create-budget input[name=tool_prefix]"), "hosted_test."),
		chromedp.SendKeys(chromedp.CSS("#create-budget input[name=max_total_cost]"), "100.00"),
		chromedp.SendKeys(chromedp.CSS("#create-budget input[name=max_remote_jobs]"), "10"),
		chromedp.SendKeys(chromedp.CSS("#create-budget input[name=per_operation_cap]"), "25.00"),
		chromedp.SendKeys(chromedp.CSS("#create-budget input[name=note]"), "CI suites on pull requests"),
		chromedp.Click(chromedp.CSS("#create-budget button")), chromedp.WaitVisible(chromedp.CSS("#chart")))
	budgets, err := h.Store.BudgetList(testCtx(t), &ledger.BudgetListParams{Tenant: "acme"})
	if err != nil || len(budgets) != 1 || budgets[0].ToolPrefix != "hosted_test." || budgets[0].PerOperationCap.String() != "25.00" {
		t.Fatalf("budgets = %+v, %v; want the one the form set", budgets, err)
	}
	for i := range 3 {
		cs, task := waitingCallOf(t, h, "acme", fixtures.RunSuiteCall(fmt.Sprintf("pr-%d", 80+i), map[string]any{"suite": fmt.Sprintf("suite-%d", i)}))
		if done, err := taskwire.AwaitTask(testCtx(t), cs, task.ID, 50*time.Millisecond); err != nil || done.Status != taskwire.StatusCompleted {
			t.Fatalf("call %d = %+v, %v; want completed on the budget", i, done, err)
		}
	}
	// A matrix of four runners (72.00) is over what is left: it waits.
	waitingCallOf(t, h, "acme", fixtures.RunMatrixCall("nightly-matrix-17", "nightly", 4))
	pendingRequest(t, h, "acme")

	page := fmt.Sprintf("%s/console/budgets/%d", base, budgets[0].ID)
	testwait.Until(t, testCtx(t), "the budget page to count the three calls settled", func() (bool, error) {
		step, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := chromedp.Do(step, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#period"))); err != nil {
			return false, nil
		}
		text, err := chromedp.Run(step, chromedp.Text(chromedp.CSS("#period")))
		return err == nil && strings.Contains(text, "53.52 committed"), nil
	})
	step, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	scripts, err := chromedp.Run(step, chromedp.Evaluate[int](`document.scripts.length`))
	if err != nil || scripts != 0 {
		t.Fatalf("scripts on the budget page = %d, %v; want none", scripts, err)
	}
	points, err := chromedp.Run(step, chromedp.Evaluate[int](`document.querySelector("#committed").points.numberOfItems`))
	if err != nil || points != 8 {
		t.Fatalf("the chart's committed line has %d points, %v; want 8 (start, three steps of two, now)", points, err)
	}
	if dir := os.Getenv(screenshotsEnv); dir != "" {
		png, err := chromedp.Run(step, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "console-budget.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", filepath.Join(dir, "console-budget.png"))
	}
}
