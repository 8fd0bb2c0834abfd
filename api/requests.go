package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/worker"
)

// DefaultQueueLease is how long an approved operation's dispatch job holds
// it when Options.QueueLease is zero: the worker's default lease.
const DefaultQueueLease = 30 * time.Second

// defaultApprovalLife is how long an approval given for a request lasts
// when the approver names no expiry.
const defaultApprovalLife = 24 * time.Hour

// maxNoteLength is the most characters an approver's note may have.
const maxNoteLength = 1000

// ApprovalRequestView is an approval request as the API answers it and the
// command line prints it with --json. Arguments have secret values
// redacted; money is a decimal string.
type ApprovalRequestView struct {
	ID          int64           `json:"id"`
	Tenant      string          `json:"tenant"`
	OperationID string          `json:"operation_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	Fingerprint string          `json:"fingerprint"`
	Estimate    string          `json:"estimate"`
	Currency    string          `json:"currency"`
	RemoteJobs  int             `json:"remote_jobs"`
	// OperationWaits says that an operation waits for the decision and
	// runs when approved; otherwise the client retries once it is.
	OperationWaits bool   `json:"operation_waits"`
	RequestedBy    string `json:"requested_by,omitempty"`
	// Status is pending, approved, declined, expired or cancelled at the
	// time of the answer: a pending request past its expiry is expired.
	Status     string    `json:"status"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	DecidedAt  time.Time `json:"decided_at,omitzero"`
	DecidedBy  string    `json:"decided_by,omitempty"`
	Note       string    `json:"note,omitempty"`
	ApprovalID int64     `json:"approval_id,omitempty"`
}

// ViewApprovalRequest returns q's view, with its status at now.
func ViewApprovalRequest(q *ledger.ApprovalRequest, now time.Time) ApprovalRequestView {
	status := q.Status
	if status == ledger.RequestPending && !now.Before(q.ExpiresAt) {
		status = ledger.RequestExpired
	}
	return ApprovalRequestView{
		ID: q.ID, Tenant: q.Tenant, OperationID: q.OperationID, Tool: q.Tool, Arguments: q.Arguments, Fingerprint: q.Fingerprint,
		Estimate: q.Estimate.String(), Currency: q.Estimate.Currency, RemoteJobs: max(q.RemoteJobs, 1), OperationWaits: q.OperationRef != 0,
		RequestedBy: q.RequestedBy, Status: string(status), CreatedAt: q.CreatedAt.UTC(), ExpiresAt: q.ExpiresAt.UTC(),
		DecidedAt: q.DecidedAt.UTC(), DecidedBy: q.DecidedBy, Note: q.Note, ApprovalID: q.ApprovalRef,
	}
}

// approvalRequestList is the answer to GET /v1/approval-requests.
type approvalRequestList struct {
	ApprovalRequests []ApprovalRequestView `json:"approval_requests"`
}

// ApprovalRequestDecided is the answer to approving or declining a
// request: the request as decided, and the approval an approve created.
type ApprovalRequestDecided struct {
	ApprovalRequest ApprovalRequestView `json:"approval_request"`
	Approval        *ApprovalView       `json:"approval,omitempty"`
}

// statusFilter reads ?status=: pending when absent, "all" for every
// status, or a comma-separated list.
func statusFilter(raw string) ([]ledger.ApprovalRequestStatus, *apiError) {
	switch raw {
	case "":
		return []ledger.ApprovalRequestStatus{ledger.RequestPending}, nil
	case "all":
		return nil, nil
	}
	var out []ledger.ApprovalRequestStatus
	for s := range strings.SplitSeq(raw, ",") {
		st := ledger.ApprovalRequestStatus(strings.TrimSpace(s))
		if !st.Valid() {
			return nil, badRequest("status", "status=%q is not pending, approved, declined, expired, cancelled or all", s)
		}
		out = append(out, st)
	}
	return out, nil
}

func (a *API) listApprovalRequests(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := tenant(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	statuses, aerr := statusFilter(r.URL.Query().Get("status"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	list, err := a.store.ApprovalRequestList(r.Context(), &ledger.ApprovalRequestListParams{Tenant: tenant, Statuses: statuses})
	if err != nil {
		writeError(w, a.internal(r, "could not list approval requests", err))
		return
	}
	now := a.clock()
	out := approvalRequestList{ApprovalRequests: make([]ApprovalRequestView, 0, len(list))}
	for _, q := range list {
		v := ViewApprovalRequest(q, now)
		// A request past its expiry is not waiting for anyone any more,
		// though the sweep has not yet recorded it.
		if len(statuses) == 1 && statuses[0] == ledger.RequestPending && v.Status != string(ledger.RequestPending) {
			continue
		}
		out.ApprovalRequests = append(out.ApprovalRequests, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// requestID reads the {id} of an approval request's path.
func requestID(r *http.Request) (int64, *apiError) { return pathID(r, "approval request") }

func (a *API) getApprovalRequest(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := tenant(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	id, aerr := requestID(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	q, err := a.store.ApprovalRequestGet(r.Context(), tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		writeError(w, notFound("no approval request %d", id))
		return
	}
	if err != nil {
		writeError(w, a.internal(r, "could not read the approval request", err))
		return
	}
	writeJSON(w, http.StatusOK, ViewApprovalRequest(q, a.clock()))
}

// approveBody is the body of POST /v1/approval-requests/{id}/approve: the
// terms of POST /v1/approvals but the operation and tool, which are the
// request's. Every term may be left out: the ceiling and the job limit
// default to the request's estimate and remote jobs, the expiry to 24h.
type approveBody struct {
	MaxTotalCost  json.RawMessage `json:"max_total_cost"`
	Currency      string          `json:"currency"`
	MaxRemoteJobs int             `json:"max_remote_jobs"`
	RetryPolicy   string          `json:"retry_policy"`
	ExpiresAt     string          `json:"expires_at"`
	ExpiresIn     string          `json:"expires_in"`
	Note          string          `json:"note"`
}

// declineBody is the body of POST /v1/approval-requests/{id}/decline.
type declineBody struct {
	Note string `json:"note"`
}

func checkNote(note string) *apiError {
	if n := utf8.RuneCountInString(note); n > maxNoteLength {
		return badRequest("note", "note is %d characters long; keep it to %d", n, maxNoteLength)
	}
	return nil
}

// readDecision reads what every decision on an approval request starts
// with: the approver's tenant, the request's ID from the path, and the body
// into body, whose note must be a note's length.
func (a *API) readDecision(w http.ResponseWriter, r *http.Request, body any, note *string) (string, int64, *apiError) {
	tenant, aerr := approvalWriter(r)
	if aerr != nil {
		return "", 0, aerr
	}
	id, aerr := requestID(r)
	if aerr != nil {
		return "", 0, aerr
	}
	if aerr := a.decodeBody(w, r, body); aerr != nil {
		return "", 0, aerr
	}
	if aerr := checkNote(*note); aerr != nil {
		return "", 0, aerr
	}
	return tenant, id, nil
}

func (a *API) approveApprovalRequest(w http.ResponseWriter, r *http.Request) {
	var body approveBody
	tenant, id, aerr := a.readDecision(w, r, &body, &body.Note)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	q, err := a.store.ApprovalRequestGet(r.Context(), tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		writeError(w, notFound("no approval request %d", id))
		return
	}
	if err != nil {
		writeError(w, a.internal(r, "could not read the approval request", err))
		return
	}
	b := approvalRequest{
		OperationID: q.OperationID, Tool: q.Tool, MaxTotalCost: body.MaxTotalCost, Currency: body.Currency,
		MaxRemoteJobs: body.MaxRemoteJobs, RetryPolicy: body.RetryPolicy, ExpiresAt: body.ExpiresAt, ExpiresIn: body.ExpiresIn,
	}
	if b.MaxTotalCost == nil {
		b.MaxTotalCost, _ = json.Marshal(q.Estimate.String())
		if b.Currency == "" {
			b.Currency = q.Estimate.Currency
		}
	}
	if b.MaxRemoteJobs == 0 {
		b.MaxRemoteJobs = max(q.RemoteJobs, 1)
	}
	if b.ExpiresAt == "" && b.ExpiresIn == "" {
		b.ExpiresIn = defaultApprovalLife.String()
	}
	terms, aerr := b.terms()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	terms.Requested = true
	now := a.clock()
	approval, aerr := a.approvalOf(r, terms, tenant, now)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	by := creator(r)
	d, err := a.store.ApprovalRequestDecide(r.Context(), &ledger.ApprovalRequestDecision{
		Tenant: tenant, ID: id, Outcome: ledger.RequestApproved, Approval: approval, By: by, Note: body.Note,
		Enqueue: worker.Dispatch, QueueLease: a.queueLease, Now: now,
	})
	if aerr := a.decisionError(r, id, approval, q, err); aerr != nil {
		writeError(w, aerr)
		return
	}
	av := ViewApproval(d.Approval, now)
	a.log.InfoContext(r.Context(), "approval request approved", "tenant", tenant, "approval_request", id, "approval", d.Approval.ID,
		"operation_id", q.OperationID, "tool", q.Tool, "approver", by, "max_total_cost", d.Approval.MaxTotalCost.Display())
	writeJSON(w, http.StatusOK, ApprovalRequestDecided{ApprovalRequest: ViewApprovalRequest(d.Request, now), Approval: &av})
}

func (a *API) declineApprovalRequest(w http.ResponseWriter, r *http.Request) {
	var body declineBody
	tenant, id, aerr := a.readDecision(w, r, &body, &body.Note)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	now := a.clock()
	by := creator(r)
	d, err := a.store.ApprovalRequestDecide(r.Context(), &ledger.ApprovalRequestDecision{
		Tenant: tenant, ID: id, Outcome: ledger.RequestDeclined, By: by, Note: body.Note, Now: now,
	})
	if aerr := a.decisionError(r, id, nil, nil, err); aerr != nil {
		writeError(w, aerr)
		return
	}
	a.log.InfoContext(r.Context(), "approval request declined", "tenant", tenant, "approval_request", id,
		"operation_id", d.Request.OperationID, "tool", d.Request.Tool, "approver", by)
	writeJSON(w, http.StatusOK, ApprovalRequestDecided{ApprovalRequest: ViewApprovalRequest(d.Request, now)})
}

// decisionError answers a decision the ledger refused: an unknown
// request, one decided already (409), or terms short of the request's
// route, naming the term to raise.
func (a *API) decisionError(r *http.Request, id int64, approval *ledger.Approval, q *ledger.ApprovalRequest, err error) *apiError {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ledger.ErrNotFound):
		return notFound("no approval request %d", id)
	case errors.Is(err, ledger.ErrRequestDecided):
		return &apiError{status: http.StatusConflict, code: CodeConflict, message: err.Error()}
	case errors.Is(err, ledger.ErrApprovalShort) && approval != nil && q != nil:
		field := "max_total_cost"
		if approval.MaxRemoteJobs < q.RemoteJobs {
			field = "max_remote_jobs"
		}
		return badRequest(field, "%v", err)
	}
	return a.internal(r, fmt.Sprintf("could not decide approval request %d", id), err)
}
