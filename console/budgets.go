package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/policy"
)

// budgetsData is the budgets page: every budget of the tenant, open ones
// first as the ledger lists them, and the form that creates one.
type budgetsData struct {
	Budgets []api.BudgetView
	CSRF    string
}

// budgetData is one budget's page: its terms, its current period drawn as
// a chart, its events and, while open, the form that closes it.
type budgetData struct {
	Budget api.BudgetView
	Chart  budgetChart
	Events []*ledger.BudgetEvent
	CSRF   string
}

func (c *Console) budgets(w http.ResponseWriter, r *http.Request) {
	c.budgetsWith(w, r, http.StatusOK, "")
}

// budgetsWith renders the budgets page with status and an error to show,
// for a form that was refused.
func (c *Console) budgetsWith(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := viewerFrom(r.Context())
	now := c.clock()
	list, err := c.store.BudgetList(r.Context(), &ledger.BudgetListParams{Tenant: v.tenant, IncludeClosed: true, Now: now})
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not list the budgets; the gateway log has the details, try again shortly")
		return
	}
	d := budgetsData{CSRF: v.csrf}
	for _, b := range list {
		rs, err := c.store.BudgetReservationList(r.Context(), &ledger.BudgetReservationListParams{BudgetRef: b.ID})
		if err != nil {
			c.fail(w, r, err, http.StatusInternalServerError, "could not read a budget's reservations; the gateway log has the details, try again shortly")
			return
		}
		d.Budgets = append(d.Budgets, api.ViewBudget(b, rs, now))
	}
	c.render(w, r, "budgets", status, &page{Title: "Budgets", Error: msg, Data: d})
}

func (c *Console) budget(w http.ResponseWriter, r *http.Request) {
	c.budgetWith(w, r, http.StatusOK, "")
}

// budgetWith renders the page of the budget the path names, with status
// and an error to show.
func (c *Console) budgetWith(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := viewerFrom(r.Context())
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("budget %q is not a budget ID; start from the budgets page", r.PathValue("id")))
		return
	}
	b, err := c.store.BudgetGet(r.Context(), v.tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		c.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("tenant %s has no budget %d", v.tenant, id))
		return
	}
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not read the budget; the gateway log has the details, try again shortly")
		return
	}
	rs, err := c.store.BudgetReservationList(r.Context(), &ledger.BudgetReservationListParams{BudgetRef: id})
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not read the budget's reservations; the gateway log has the details, try again shortly")
		return
	}
	events, err := c.store.BudgetEventList(r.Context(), id)
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not read the budget's events; the gateway log has the details, try again shortly")
		return
	}
	now := c.clock()
	from, to, _ := policy.BudgetWindow(b, now)
	d := budgetData{Budget: api.ViewBudget(b, rs, now), Chart: chartOf(b, rs, from, to, now), Events: events, CSRF: v.csrf}
	c.render(w, r, "budget", status, &page{Title: fmt.Sprintf("Budget %d", id), Error: msg, Data: d})
}

// createBudget creates a budget through the REST API's handler, so that
// the console's budgets follow exactly its rules, events and errors.
func (c *Console) createBudget(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		c.budgetsWith(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	if err := checkFormTarget(r.PostForm, formBudget, "new"); err != nil {
		c.budgetsWith(w, r, http.StatusBadRequest, err.Error())
		return
	}
	body := map[string]any{}
	for _, f := range []string{"tool_prefix", "run_id", "max_total_cost", "per_operation_cap", "currency", "period", "time_zone", "expires_in", "note"} {
		if v := strings.TrimSpace(r.PostFormValue(f)); v != "" {
			body[f] = v
		}
	}
	if tools := strings.Fields(strings.ReplaceAll(r.PostFormValue("tools"), ",", " ")); len(tools) > 0 {
		body["tools"] = tools
	}
	if raw := strings.TrimSpace(r.PostFormValue("max_remote_jobs")); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n <= 0 {
			c.budgetsWith(w, r, http.StatusBadRequest, fmt.Sprintf("remote-job limit %q is not a positive whole number", raw))
			return
		}
		body["max_remote_jobs"] = n
	}
	out, msg := c.callAPI(r, "/v1/budgets", body)
	if out.status != http.StatusCreated {
		c.budgetsWith(w, r, out.status, "could not create the budget: "+msg)
		return
	}
	var v api.BudgetView
	if err := json.Unmarshal(out.body.Bytes(), &v); err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "the budget was created but its answer could not be read; see the budgets page")
		return
	}
	http.Redirect(w, r, fmt.Sprintf("%s/budgets/%d", Prefix, v.ID), http.StatusSeeOther)
}

func (c *Console) closeBudget(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := r.ParseForm(); err != nil {
		c.budgetWith(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	if err := checkFormTarget(r.PostForm, formBudget, id); err != nil {
		c.budgetWith(w, r, http.StatusBadRequest, err.Error())
		return
	}
	out, msg := c.callAPI(r, "/v1/budgets/"+url.PathEscape(id)+"/close", map[string]any{})
	if out.status != http.StatusOK {
		c.budgetWith(w, r, out.status, "could not close the budget: "+msg)
		return
	}
	http.Redirect(w, r, Prefix+"/budgets/"+url.PathEscape(id), http.StatusSeeOther)
}

// callAPI posts body to the REST API's handler as the signed-in approver,
// and returns its answer and, for an error, its message.
func (c *Console) callAPI(r *http.Request, path string, body map[string]any) (*buffer, string) {
	b, _ := json.Marshal(body)
	out := &buffer{}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, path, bytes.NewReader(b))
	if err != nil {
		out.status = http.StatusBadRequest
		return out, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	c.api.ServeHTTP(out, req)
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := out.body.String()
	if json.Unmarshal(out.body.Bytes(), &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	return out, msg
}
