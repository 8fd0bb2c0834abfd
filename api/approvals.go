package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// Approval statuses in [ApprovalView].
const (
	ApprovalActive  = "active"
	ApprovalExpired = "expired"
	ApprovalRevoked = "revoked"
)

// ApprovalView is an approval as the API answers it and the command line
// prints it with --json. Money is a decimal string ("20.00"), never a
// number.
type ApprovalView struct {
	ID            int64     `json:"id"`
	Tenant        string    `json:"tenant"`
	OperationID   string    `json:"operation_id"`
	Tool          string    `json:"tool"`
	MaxTotalCost  string    `json:"max_total_cost"`
	Currency      string    `json:"currency"`
	MaxRemoteJobs int       `json:"max_remote_jobs"`
	RetryPolicy   string    `json:"retry_policy"`
	ExpiresAt     time.Time `json:"expires_at"`
	// Status is active, expired or revoked at the time of the answer.
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// ViewApproval returns a's view, with its status at now.
func ViewApproval(a *ledger.Approval, now time.Time) ApprovalView {
	status := ApprovalActive
	switch {
	case !a.RevokedAt.IsZero():
		status = ApprovalRevoked
	case !a.Active(now):
		status = ApprovalExpired
	}
	return ApprovalView{
		ID: a.ID, Tenant: a.Tenant, OperationID: a.OperationID, Tool: a.Tool,
		MaxTotalCost: a.MaxTotalCost.String(), Currency: a.MaxTotalCost.Currency,
		MaxRemoteJobs: a.MaxRemoteJobs, RetryPolicy: string(a.RetryPolicy), ExpiresAt: a.ExpiresAt.UTC(),
		Status: status, CreatedAt: a.CreatedAt.UTC(), CreatedBy: a.CreatedBy, RevokedAt: a.RevokedAt.UTC(),
	}
}

// ApprovalTerms are what a human asks to approve, as the command line's
// flags and the POST body give them. Exactly one of ExpiresAt and ExpiresIn
// is set.
type ApprovalTerms struct {
	OperationID string
	// Tool is qualified by its upstream: "hosted_test.run_suite".
	Tool string
	// MaxTotalCost is a decimal such as "20.00".
	MaxTotalCost string
	// Currency is empty for money.DefaultCurrency.
	Currency      string
	MaxRemoteJobs int
	// RetryPolicy is empty for lookup_then_attach.
	RetryPolicy string
	ExpiresAt   time.Time
	ExpiresIn   time.Duration
	CreatedBy   string
	// Requested says the terms decide an approval request, whose
	// operation the ledger already holds: its ID is approved as it is,
	// even one outside the alphabet of [ledger.CheckID] that a ledger from
	// before that rule may hold.
	Requested bool
}

// Approval checks the terms and returns the approval to create for tenant,
// with relative expiry counted from now. A bad term is a *[FieldError].
func (t *ApprovalTerms) Approval(tenant string, now time.Time) (*ledger.Approval, error) {
	if t.OperationID == "" {
		return nil, fieldError("operation_id", "is required: the operation ID the agent will call the tool with")
	}
	// The gateway accepts no new operation with an ID outside the
	// alphabet, so an approval given in advance for one could cover
	// nothing; it is refused with the words the agent's call would get.
	if !t.Requested {
		if err := ledger.CheckID("operation ID", t.OperationID); err != nil {
			return nil, fieldError("operation_id", "%s", err.Error())
		}
	}
	if up, tool, ok := strings.Cut(t.Tool, "."); !ok || up == "" || tool == "" {
		return nil, fieldError("tool", "%q is not a qualified tool name; write UPSTREAM.TOOL, e.g. hosted_test.run_suite", t.Tool)
	}
	currency, fe := currencyOf(t.Currency)
	if fe != nil {
		return nil, fe
	}
	if t.MaxTotalCost == "" {
		return nil, fieldError("max_total_cost", "is required: the most the operation may cost, e.g. 20.00")
	}
	ceiling, err := money.Parse(t.MaxTotalCost, currency)
	if err != nil {
		return nil, fieldError("max_total_cost", "%v", err)
	}
	if ceiling.Micros < 0 {
		return nil, fieldError("max_total_cost", "%s is negative; a ceiling is zero or more", ceiling)
	}
	if t.MaxRemoteJobs < 1 {
		return nil, fieldError("max_remote_jobs", "must be at least 1 (got %d)", t.MaxRemoteJobs)
	}
	policy := ledger.RetryPolicy(t.RetryPolicy)
	if policy == "" {
		policy = ledger.RetryLookupThenAttach
	}
	if !policy.Valid() {
		return nil, fieldError("retry_policy", "%q is not a retry policy; use %s or %s", t.RetryPolicy, ledger.RetryLookupThenAttach, ledger.RetryNoAutomaticResend)
	}
	expires, fe := expiry(t.ExpiresAt, t.ExpiresIn, now, "24h", "an approval")
	if fe != nil {
		return nil, fe
	}
	return &ledger.Approval{
		Tenant: tenant, OperationID: t.OperationID, Tool: t.Tool, MaxTotalCost: ceiling,
		MaxRemoteJobs: t.MaxRemoteJobs, RetryPolicy: policy, ExpiresAt: expires.UTC(), CreatedBy: t.CreatedBy,
	}, nil
}

// approvalRequest is the POST body. The amount stays raw so that a JSON
// number can be refused with a message rather than silently rounded.
type approvalRequest struct {
	OperationID   string          `json:"operation_id"`
	Tool          string          `json:"tool"`
	MaxTotalCost  json.RawMessage `json:"max_total_cost"`
	Currency      string          `json:"currency"`
	MaxRemoteJobs int             `json:"max_remote_jobs"`
	RetryPolicy   string          `json:"retry_policy"`
	ExpiresAt     string          `json:"expires_at"`
	ExpiresIn     string          `json:"expires_in"`

	// MaxTotalCostUSD is the deprecated name of MaxTotalCost, accepted
	// until the next release.
	MaxTotalCostUSD json.RawMessage `json:"max_total_cost_usd"`
}

// deprecations says which fields the body gave under a deprecated name.
func (b *approvalRequest) deprecations() []string {
	if b.MaxTotalCostUSD == nil {
		return nil
	}
	return []string{"max_total_cost_usd is deprecated and will be removed in the next release; send max_total_cost"}
}

// terms turns the body into ApprovalTerms, checking what only the wire
// form can get wrong.
func (b *approvalRequest) terms() (*ApprovalTerms, *apiError) {
	t := &ApprovalTerms{
		OperationID: b.OperationID, Tool: b.Tool, Currency: b.Currency,
		MaxRemoteJobs: b.MaxRemoteJobs, RetryPolicy: b.RetryPolicy,
	}
	amount, field := b.MaxTotalCost, "max_total_cost"
	if b.MaxTotalCostUSD != nil {
		if b.MaxTotalCost != nil {
			return nil, badRequest("max_total_cost_usd", "max_total_cost_usd is the deprecated name of max_total_cost; send only max_total_cost")
		}
		amount, field = b.MaxTotalCostUSD, "max_total_cost_usd"
	}
	var aerr *apiError
	if t.MaxTotalCost, aerr = decimalField(field, amount, "20.00"); aerr != nil {
		return nil, aerr
	}
	if t.MaxTotalCost == "" && strings.HasPrefix(strings.TrimSpace(string(amount)), `"`) {
		return nil, badRequest(field, "%s is empty; send a decimal string such as \"20.00\"", field)
	}
	if b.ExpiresIn != "" {
		d, err := time.ParseDuration(b.ExpiresIn)
		if err != nil {
			return nil, badRequest("expires_in", "expires_in %q is not a duration such as 24h or 90m", b.ExpiresIn)
		}
		if d == 0 {
			return nil, badRequest("expires_in", "expires_in is zero; an approval must expire in the future")
		}
		t.ExpiresIn = d
	}
	if t.ExpiresAt, aerr = expiresAt(b.ExpiresAt); aerr != nil {
		return nil, aerr
	}
	return t, nil
}

// approvalOf is the approval terms give tenant at now, or the answer to a
// request whose terms do not make one.
func (a *API) approvalOf(r *http.Request, terms *ApprovalTerms, tenant string, now time.Time) (*ledger.Approval, *apiError) {
	approval, err := terms.Approval(tenant, now)
	if err != nil {
		return nil, a.termsError(r, "approval", err)
	}
	return approval, nil
}

func (a *API) createApproval(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := approvalWriter(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var body approvalRequest
	if aerr := a.decodeBody(w, r, &body); aerr != nil {
		writeError(w, aerr)
		return
	}
	for _, d := range body.deprecations() {
		w.Header().Add("Warning", `299 - "`+d+`"`)
		a.log.WarnContext(r.Context(), "deprecated request field", "tenant", tenant, "path", r.URL.Path, "warning", d)
	}
	terms, aerr := body.terms()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	terms.CreatedBy = creator(r)
	now := a.clock()
	approval, aerr := a.approvalOf(r, terms, tenant, now)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	created, err := a.store.ApprovalCreate(r.Context(), approval)
	if err != nil {
		writeError(w, a.internal(r, "could not store the approval", err))
		return
	}
	a.log.InfoContext(r.Context(), "approval created", "tenant", tenant, "approval", created.ID,
		"operation_id", created.OperationID, "tool", created.Tool, "max_total_cost", created.MaxTotalCost.Display())
	writeJSON(w, http.StatusCreated, ViewApproval(created, now))
}

// approvalList is the answer to GET /v1/approvals.
type approvalList struct {
	Approvals []ApprovalView `json:"approvals"`
}

func (a *API) listApprovals(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := tenant(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	all, aerr := allParam(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	p := &ledger.ApprovalListParams{Tenant: tenant, OperationID: r.URL.Query().Get("operation_id"), IncludeRevoked: all}
	list, err := a.store.ApprovalList(r.Context(), p)
	if err != nil {
		writeError(w, a.internal(r, "could not list approvals", err))
		return
	}
	now := a.clock()
	out := approvalList{Approvals: make([]ApprovalView, len(list))}
	for i, ap := range list {
		out.Approvals[i] = ViewApproval(ap, now)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) revokeApproval(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := approvalWriter(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	id, aerr := pathID(r, "approval")
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	now := a.clock()
	revoked, err := a.store.ApprovalRevoke(r.Context(), tenant, id, now)
	if errors.Is(err, ledger.ErrNotFound) {
		writeError(w, notFound("no approval %d", id))
		return
	}
	if err != nil {
		writeError(w, a.internal(r, "could not revoke the approval", err))
		return
	}
	a.log.InfoContext(r.Context(), "approval revoked", "tenant", tenant, "approval", id)
	writeJSON(w, http.StatusOK, ViewApproval(revoked, now))
}

// approvalWriter is the tenant of a request that writes approvals.
func approvalWriter(r *http.Request) (string, *apiError) {
	return approverTenant(r, "creating or revoking approvals needs",
		"the credential sent may call tools and read approvals and receipts only")
}
