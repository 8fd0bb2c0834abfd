package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestBudgetFromTheConsole: an approver creates a budget with the
// console's form; two calls run on it without anyone, a third waits in
// the inbox; the budget's page draws what was committed and closes it.
func TestBudgetFromTheConsole(t *testing.T) {
	h := harness(t)
	key, k := approverKey(t, h, "acme")
	credential := fmt.Sprintf("api_key:%d", k.ID)
	b := newBrowser(t, h)
	b.signIn(key)
	csrf := b.csrf("/console/budgets")
	form := url.Values{"csrf": {csrf}, "kind": {"budget"}, "id": {"new"}, "tools": {fixtures.RunSuiteTool}, "max_total_cost": {"40.00"},
		"currency": {"USD"}, "max_remote_jobs": {"5"}, "period": {"day"}, "time_zone": {"Europe/Berlin"}, "expires_in": {"24h"}, "note": {"CI on pull requests"}}
	if p := b.post("/console/budgets", url.Values{"csrf": {csrf}, "kind": {"budget"}, "id": {"7"}}); p.status != http.StatusBadRequest {
		t.Fatalf("a create form naming budget 7 = %d at %s", p.status, p.url)
	}
	p := b.post("/console/budgets", form)
	m := regexp.MustCompile(`^/console/budgets/(\d+)$`).FindStringSubmatch(p.url)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("create = %d at %s\n%s", p.status, p.url, p.body)
	}
	id := m[1]
	budgets, err := h.Store.BudgetList(testCtx(t), &ledger.BudgetListParams{Tenant: "acme"})
	if err != nil || len(budgets) != 1 || budgets[0].CreatedBy != credential || budgets[0].TimeZone != "Europe/Berlin" {
		t.Fatalf("budgets = %+v, %v; want one set by %s", budgets, err, credential)
	}

	for i := range 2 {
		cs, task := waitingCallOf(t, h, "acme", fixtures.RunSuiteCall(fmt.Sprintf("ci-%d", i), map[string]any{"suite": fmt.Sprintf("suite-%d", i)}))
		done, err := taskwire.AwaitTask(testCtx(t), cs, task.ID, 50*time.Millisecond)
		if err != nil || done.Status != taskwire.StatusCompleted {
			t.Fatalf("call %d on the budget = %+v, %v; want completed without an approver", i, done, err)
		}
	}
	waitingCallOf(t, h, "acme", fixtures.RunSuiteCall("ci-2", map[string]any{"suite": "suite-2"}))
	q := pendingRequest(t, h, "acme")
	if q.OperationID != "ci-2" {
		t.Fatalf("pending request %+v, want the third call's", q)
	}
	if n := len(h.Sim.Jobs()); n != 2 {
		t.Fatalf("provider jobs = %d, want 2", n)
	}

	var page string
	testwait.Until(t, testCtx(t), "the budget page to count both calls settled", func() (bool, error) {
		page = b.get("/console/budgets/" + id).body
		return strings.Contains(page, "35.68 committed"), nil
	})
	for _, want := range []string{`<svg`, `<polyline id="committed" points="`, `id="ceiling"`, "4.32 USD</b>", "CI on pull requests", credential, "budget_created", `id="close-budget"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the budget page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("the budget page has a script")
	}
	spend := b.get("/console/spend")
	for _, want := range []string{`id="spend-budgets"`, "/console/budgets/" + id, `id="days"`, "hosted_test.run_suite", "35.68 USD"} {
		if !strings.Contains(spend.body, want) {
			t.Errorf("the spend page lacks %s:\n%s", want, spend.body)
		}
	}
	closed := b.post("/console/budgets/"+id+"/close", url.Values{"csrf": {csrf}, "kind": {"budget"}, "id": {id}})
	if closed.status != http.StatusOK || !strings.Contains(closed.body, "Status: <b>closed</b>") || strings.Contains(closed.body, `id="close-budget"`) {
		t.Fatalf("close = %d\n%s", closed.status, closed.body)
	}
	if list := b.get("/console/budgets"); !strings.Contains(list.body, fmt.Sprintf(`<tr id="budget-%s">`, id)) || !strings.Contains(list.body, "closed") {
		t.Errorf("the budgets page does not list the closed budget:\n%s", list.body)
	}
}
