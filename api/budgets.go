package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
)

// Budget statuses in [BudgetView].
const (
	BudgetOpen    = "open"
	BudgetExpired = "expired"
	BudgetClosed  = "closed"
)

// BudgetView is a budget as the API answers it and the command line prints
// it with --json, with what its current period holds at the time of the
// answer. Money is a decimal string, never a number.
type BudgetView struct {
	ID              int64     `json:"id"`
	Tenant          string    `json:"tenant"`
	Tools           []string  `json:"tools,omitempty"`
	ToolPrefix      string    `json:"tool_prefix,omitempty"`
	RunID           string    `json:"run_id,omitempty"`
	MaxTotalCost    string    `json:"max_total_cost"`
	Currency        string    `json:"currency"`
	MaxRemoteJobs   int       `json:"max_remote_jobs"`
	Period          string    `json:"period"`
	TimeZone        string    `json:"time_zone"`
	PerOperationCap string    `json:"per_operation_cap,omitempty"`
	ExpiresAt       time.Time `json:"expires_at"`
	Note            string    `json:"note,omitempty"`
	// Status is open, expired or closed at the time of the answer.
	Status     string    `json:"status"`
	CreatedAt  time.Time `json:"created_at"`
	CreatedBy  string    `json:"created_by"`
	ClosedAt   time.Time `json:"closed_at,omitzero"`
	ClosedBy   string    `json:"closed_by,omitempty"`
	BreachedAt time.Time `json:"breached_at,omitzero"`
	// PeriodStart and PeriodEnd bound the current period (both absent for
	// a budget without one). Committed is what operations admitted in it
	// hold or settled; Remaining is the ceiling less Committed (negative
	// after a breach); the jobs likewise.
	PeriodStart         time.Time `json:"period_start,omitzero"`
	PeriodEnd           time.Time `json:"period_end,omitzero"`
	Committed           string    `json:"committed"`
	Remaining           string    `json:"remaining"`
	RemoteJobsCommitted int       `json:"remote_jobs_committed"`
	RemoteJobsRemaining int       `json:"remote_jobs_remaining"`
}

// ViewBudget returns b's view at now, with its current period's totals
// from rs, its reservations.
func ViewBudget(b *ledger.Budget, rs []*ledger.BudgetReservation, now time.Time) BudgetView {
	status := BudgetOpen
	switch {
	case !b.ClosedAt.IsZero():
		status = BudgetClosed
	case !b.Open(now):
		status = BudgetExpired
	}
	v := BudgetView{
		ID: b.ID, Tenant: b.Tenant, Tools: b.Tools, ToolPrefix: b.ToolPrefix, RunID: b.RunID,
		MaxTotalCost: b.MaxTotalCost.String(), Currency: b.MaxTotalCost.Currency, MaxRemoteJobs: b.MaxRemoteJobs,
		Period: string(b.Period), TimeZone: b.TimeZone, ExpiresAt: b.ExpiresAt.UTC(), Note: b.Note, Status: status,
		CreatedAt: b.CreatedAt.UTC(), CreatedBy: b.CreatedBy, ClosedAt: b.ClosedAt.UTC(), ClosedBy: b.ClosedBy, BreachedAt: b.BreachedAt.UTC(),
	}
	if !b.PerOperationCap.IsZero() {
		v.PerOperationCap = b.PerOperationCap.String()
	}
	// A zone the gateway does not know leaves the window all time: the
	// view still answers, and acceptance refuses to cover with it.
	from, to, _ := policy.BudgetWindow(b, now)
	v.PeriodStart, v.PeriodEnd = from, to
	used := policy.BudgetCommitted(rs, b.MaxTotalCost.Currency, from, to)
	v.Committed = used.Spend.String()
	if left, err := b.MaxTotalCost.Sub(used.Spend); err == nil {
		v.Remaining = left.String()
	}
	v.RemoteJobsCommitted, v.RemoteJobsRemaining = used.RemoteJobs, b.MaxRemoteJobs-used.RemoteJobs
	return v
}

// BudgetTerms are what an approver asks to budget, as the command line's
// flags and the POST body give them. Exactly one of ExpiresAt and
// ExpiresIn is set.
type BudgetTerms struct {
	Tools      []string
	ToolPrefix string
	RunID      string
	// MaxTotalCost and PerOperationCap are decimals such as "100.00";
	// PerOperationCap is empty for none.
	MaxTotalCost    string
	PerOperationCap string
	// Currency is empty for money.DefaultCurrency.
	Currency      string
	MaxRemoteJobs int
	// Period is empty for none; TimeZone empty for UTC.
	Period    string
	TimeZone  string
	ExpiresAt time.Time
	ExpiresIn time.Duration
	Note      string
	CreatedBy string
}

// Budget checks the terms and returns the budget to create for tenant,
// with relative expiry counted from now. A bad term is a *[FieldError].
func (t *BudgetTerms) Budget(tenant string, now time.Time) (*ledger.Budget, error) {
	currency, fe := currencyOf(t.Currency)
	if fe != nil {
		return nil, fe
	}
	if t.MaxTotalCost == "" {
		return nil, fieldError("max_total_cost", "is required: the most the operations it covers may cost in a period, e.g. 100.00")
	}
	ceiling, err := money.Parse(t.MaxTotalCost, currency)
	if err != nil {
		return nil, fieldError("max_total_cost", "%v", err)
	}
	if ceiling.Micros <= 0 {
		return nil, fieldError("max_total_cost", "%s covers nothing; give an amount above zero", ceiling)
	}
	var opCap money.Amount
	if t.PerOperationCap != "" {
		if opCap, err = money.Parse(t.PerOperationCap, currency); err != nil {
			return nil, fieldError("per_operation_cap", "%v", err)
		}
		if opCap.Micros <= 0 {
			return nil, fieldError("per_operation_cap", "%s covers no call; give an amount above zero, or none", opCap)
		}
	}
	if t.MaxRemoteJobs < 1 {
		return nil, fieldError("max_remote_jobs", "must be at least 1 (got %d)", t.MaxRemoteJobs)
	}
	period := ledger.BudgetPeriod(t.Period)
	if period == "" {
		period = ledger.BudgetPeriodNone
	}
	if !period.Valid() {
		return nil, fieldError("period", "%q is not a period; use none, day, week or month", t.Period)
	}
	zone := t.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	if _, err := time.LoadLocation(zone); err != nil {
		return nil, fieldError("time_zone", "%q is not an IANA time zone such as UTC or Europe/Berlin", t.TimeZone)
	}
	for _, tool := range t.Tools {
		if up, name, ok := strings.Cut(tool, "."); !ok || up == "" || name == "" {
			return nil, fieldError("tools", "%q is not a qualified tool name; write UPSTREAM.TOOL, e.g. hosted_test.run_suite", tool)
		}
	}
	expires, fe := expiry(t.ExpiresAt, t.ExpiresIn, now, "720h", "a budget")
	if fe != nil {
		return nil, fe
	}
	b := &ledger.Budget{
		Tenant: tenant, Tools: t.Tools, ToolPrefix: t.ToolPrefix, RunID: t.RunID, MaxTotalCost: ceiling, MaxRemoteJobs: t.MaxRemoteJobs,
		Period: period, TimeZone: zone, PerOperationCap: opCap, ExpiresAt: expires.UTC(), Note: t.Note, CreatedBy: t.CreatedBy,
	}
	if err := policy.CheckBudget(b); err != nil {
		return nil, fieldError("budget", "%s", strings.TrimPrefix(err.Error(), "budget: "))
	}
	return b, nil
}

// budgetRequest is the POST body. Amounts stay raw so that a JSON number
// can be refused with a message rather than silently rounded.
type budgetRequest struct {
	Tools           []string        `json:"tools"`
	ToolPrefix      string          `json:"tool_prefix"`
	RunID           string          `json:"run_id"`
	MaxTotalCost    json.RawMessage `json:"max_total_cost"`
	PerOperationCap json.RawMessage `json:"per_operation_cap"`
	Currency        string          `json:"currency"`
	MaxRemoteJobs   int             `json:"max_remote_jobs"`
	Period          string          `json:"period"`
	TimeZone        string          `json:"time_zone"`
	ExpiresAt       string          `json:"expires_at"`
	ExpiresIn       string          `json:"expires_in"`
	Note            string          `json:"note"`
}

func (b *budgetRequest) terms() (*BudgetTerms, *apiError) {
	t := &BudgetTerms{Tools: b.Tools, ToolPrefix: b.ToolPrefix, RunID: b.RunID, Currency: b.Currency, MaxRemoteJobs: b.MaxRemoteJobs,
		Period: b.Period, TimeZone: b.TimeZone, Note: b.Note}
	var aerr *apiError
	if t.MaxTotalCost, aerr = decimalField("max_total_cost", b.MaxTotalCost, "100.00"); aerr != nil {
		return nil, aerr
	}
	if t.PerOperationCap, aerr = decimalField("per_operation_cap", b.PerOperationCap, "100.00"); aerr != nil {
		return nil, aerr
	}
	if b.ExpiresIn != "" {
		d, err := time.ParseDuration(b.ExpiresIn)
		if err != nil || d == 0 {
			return nil, badRequest("expires_in", "expires_in %q is not a duration such as 720h", b.ExpiresIn)
		}
		t.ExpiresIn = d
	}
	if t.ExpiresAt, aerr = expiresAt(b.ExpiresAt); aerr != nil {
		return nil, aerr
	}
	return t, nil
}

// budgetAnswer is a budget with its reservations read, as an answer.
func (a *API) budgetAnswer(r *http.Request, b *ledger.Budget, now time.Time) (BudgetView, *apiError) {
	rs, err := a.store.BudgetReservationList(r.Context(), &ledger.BudgetReservationListParams{BudgetRef: b.ID})
	if err != nil {
		return BudgetView{}, a.internal(r, "could not read the budget's reservations", err)
	}
	return ViewBudget(b, rs, now), nil
}

// writeBudget answers b at now with status, or the failure to read it.
func (a *API) writeBudget(w http.ResponseWriter, r *http.Request, b *ledger.Budget, now time.Time, status int) {
	v, aerr := a.budgetAnswer(r, b, now)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, status, v)
}

func (a *API) createBudget(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := budgetTenant(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var body budgetRequest
	if aerr := a.decodeBody(w, r, &body); aerr != nil {
		writeError(w, aerr)
		return
	}
	terms, aerr := body.terms()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	terms.CreatedBy = creator(r)
	now := a.clock()
	b, err := terms.Budget(tenant, now)
	if err != nil {
		writeError(w, a.termsError(r, "budget", err))
		return
	}
	created, err := a.store.BudgetCreate(r.Context(), b)
	if err != nil {
		writeError(w, a.internal(r, "could not store the budget", err))
		return
	}
	a.log.InfoContext(r.Context(), "budget created", "tenant", tenant, "budget", created.ID, "max_total_cost", created.MaxTotalCost.Display(), "period", created.Period)
	a.writeBudget(w, r, created, now, http.StatusCreated)
}

// budgetList is the answer to GET /v1/budgets.
type budgetList struct {
	Budgets []BudgetView `json:"budgets"`
}

func (a *API) listBudgets(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := budgetTenant(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	all, aerr := allParam(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	now := a.clock()
	list, err := a.store.BudgetList(r.Context(), &ledger.BudgetListParams{Tenant: tenant, Now: now, IncludeClosed: all})
	if err != nil {
		writeError(w, a.internal(r, "could not list budgets", err))
		return
	}
	out := budgetList{Budgets: make([]BudgetView, len(list))}
	for i, b := range list {
		if out.Budgets[i], aerr = a.budgetAnswer(r, b, now); aerr != nil {
			writeError(w, aerr)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// budgetOf reads the budget the path names, or the answer to give.
func (a *API) budgetOf(r *http.Request, tenant string) (*ledger.Budget, int64, *apiError) {
	id, aerr := pathID(r, "budget")
	if aerr != nil {
		return nil, 0, aerr
	}
	b, err := a.store.BudgetGet(r.Context(), tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, id, notFound("no budget %d", id)
	}
	if err != nil {
		return nil, id, a.internal(r, "could not read the budget", err)
	}
	return b, id, nil
}

func (a *API) getBudget(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := budgetTenant(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	b, _, aerr := a.budgetOf(r, tenant)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	a.writeBudget(w, r, b, a.clock(), http.StatusOK)
}

func (a *API) closeBudget(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := budgetTenant(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	_, id, aerr := a.budgetOf(r, tenant)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	now := a.clock()
	closed, err := a.store.BudgetClose(r.Context(), tenant, id, creator(r), now)
	if err != nil {
		writeError(w, a.internal(r, "could not close the budget", err))
		return
	}
	a.log.InfoContext(r.Context(), "budget closed", "tenant", tenant, "budget", id)
	a.writeBudget(w, r, closed, now, http.StatusOK)
}

// budgetTenant is the tenant of a request about budgets, which only an
// approver credential may make: a budget lets agents spend without asking,
// so an agent must neither set one nor read what it leaves to spend.
func budgetTenant(r *http.Request) (string, *apiError) {
	return approverTenant(r, "budgets are set and read with", "an agent's credential cannot set its own budget")
}
