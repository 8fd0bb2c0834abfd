// Package api holds taskgate's REST endpoints for approvals and receipts;
// the tenant always comes from authentication.
//
// The handlers run behind [authn.Authenticator.Middleware]: they read the
// tenant from the request's auth.TokenInfo and never from a path, query or
// body, so a caller can only ever see and change its own tenant's approvals
// and receipts. Only approver credentials (scope taskgate:approve) may
// create or revoke approvals: an agent's key must never let it approve its
// own spend. Another tenant's approval or operation answers 404, exactly
// like one that does not exist. Every answer these handlers write, including
// every error, is JSON (receipts excepted, which come in the format asked
// for); the 401 of the authentication in front of them and the 413 of the
// gateway's body limit are not theirs:
//
//	{"error": {"code": "invalid_request", "message": "...", "field": "max_total_cost"}}
//
// This package must never decide spend policy (that is package policy), call
// a provider, or accept an amount of money as a float.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/ledger"
)

// DefaultMaxBodyBytes caps a request body when Options.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// Error codes in the JSON error object.
const (
	CodeInvalidRequest   = "invalid_request"
	CodeUnauthenticated  = "unauthenticated"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeConflict         = "conflict"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTooLarge         = "request_too_large"
	CodeInternal         = "internal_error"
)

// Options configure [New].
type Options struct {
	// Store is the ledger. Required.
	Store ledger.Store
	// Logger receives failures the client is not told the details of. Nil
	// discards.
	Logger *slog.Logger
	// Clock decides expiry times and receipts' generation time. Nil means
	// time.Now.
	Clock func() time.Time
	// MaxBodyBytes caps a request body; a larger one is answered 413. Zero
	// means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// QueueLease is how long an approved request's dispatch job holds its
	// operation before recovery may take it (the worker's lease). Zero
	// means DefaultQueueLease.
	QueueLease time.Duration
}

// API serves the REST endpoints. It is safe for concurrent use.
type API struct {
	store   ledger.Store
	log     *slog.Logger
	clock   func() time.Time
	maxBody int64
	// queueLease: see Options.QueueLease.
	queueLease time.Duration
}

// New returns the API over opts.Store. It panics if opts or opts.Store is
// nil: that is a wiring mistake, not something a request can cause.
func New(opts *Options) *API {
	if opts == nil || opts.Store == nil {
		panic("api.New: a ledger store is required")
	}
	a := &API{store: opts.Store, log: opts.Logger, clock: opts.Clock, maxBody: opts.MaxBodyBytes}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.clock == nil {
		a.clock = time.Now
	}
	if a.maxBody <= 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	a.queueLease = opts.QueueLease
	if a.queueLease <= 0 {
		a.queueLease = DefaultQueueLease
	}
	return a
}

// Register adds the endpoints to mux:
//
//	POST   /v1/approvals                  create an approval (approver credentials only)
//	GET    /v1/approvals                  list approvals (?operation_id=, ?all=true includes revoked)
//	DELETE /v1/approvals/{id}             revoke an approval (approver credentials only)
//	GET    /v1/operations/{id}/receipt    an operation's receipt (?format=yaml|json|md), signed when the ledger has an active signing key
//	GET    /v1/approval-requests          list approval requests (?status=pending by default, a comma-separated list, or all)
//	GET    /v1/approval-requests/{id}     one approval request
//	POST   /v1/approval-requests/{id}/approve   approve it, with the terms of POST /v1/approvals (approver credentials only)
//	POST   /v1/approval-requests/{id}/decline   decline it, with a note (approver credentials only)
//	POST   /v1/budgets                    create a budget (approver credentials only, as every budget endpoint)
//	GET    /v1/budgets                    list open budgets with their current period's totals (?all=true includes closed and expired)
//	GET    /v1/budgets/{id}               one budget
//	POST   /v1/budgets/{id}/close         close a budget: it covers no new call, and keeps what it holds
//
// Writing approvals, and deciding approval requests, needs the scope
// authn.ScopeApprove; without it the answer is 403 with code forbidden. A
// request decided already answers 409 with code conflict.
// Other methods on those paths answer 405 and other paths under /v1/ 404,
// both as JSON. The caller wraps mux (or the handler it is mounted in) with
// [authn.Authenticator.Middleware].
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/approvals", a.createApproval)
	mux.HandleFunc("GET /v1/approvals", a.listApprovals)
	mux.HandleFunc("/v1/approvals", methodNotAllowed("GET, HEAD, POST"))
	mux.HandleFunc("DELETE /v1/approvals/{id}", a.revokeApproval)
	mux.HandleFunc("/v1/approvals/{id}", methodNotAllowed("DELETE"))
	mux.HandleFunc("GET /v1/approval-requests", a.listApprovalRequests)
	mux.HandleFunc("/v1/approval-requests", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("GET /v1/approval-requests/{id}", a.getApprovalRequest)
	mux.HandleFunc("/v1/approval-requests/{id}", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("POST /v1/approval-requests/{id}/approve", a.approveApprovalRequest)
	mux.HandleFunc("/v1/approval-requests/{id}/approve", methodNotAllowed("POST"))
	mux.HandleFunc("POST /v1/approval-requests/{id}/decline", a.declineApprovalRequest)
	mux.HandleFunc("/v1/approval-requests/{id}/decline", methodNotAllowed("POST"))
	mux.HandleFunc("POST /v1/budgets", a.createBudget)
	mux.HandleFunc("GET /v1/budgets", a.listBudgets)
	mux.HandleFunc("/v1/budgets", methodNotAllowed("GET, HEAD, POST"))
	mux.HandleFunc("GET /v1/budgets/{id}", a.getBudget)
	mux.HandleFunc("/v1/budgets/{id}", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("POST /v1/budgets/{id}/close", a.closeBudget)
	mux.HandleFunc("/v1/budgets/{id}/close", methodNotAllowed("POST"))
	mux.HandleFunc("GET /v1/operations/{id}/receipt", a.getReceipt)
	mux.HandleFunc("/v1/operations/{id}/receipt", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, code: CodeNotFound,
			message: fmt.Sprintf("no endpoint %s; see /v1/approvals, /v1/approval-requests, /v1/budgets and /v1/operations/{id}/receipt", r.URL.Path)})
	})
}

// tenant returns the authenticated tenant of r, or an error to answer.
func tenant(r *http.Request) (string, *apiError) {
	t := authn.TenantOf(auth.TokenInfoFromContext(r.Context()))
	if t == "" {
		return "", &apiError{status: http.StatusUnauthorized, code: CodeUnauthenticated,
			message: "this request carries no authenticated tenant; send Authorization: Bearer <taskgate API key or OAuth token>"}
	}
	return t, nil
}

// approverTenant is the tenant of r when its credential may write
// approvals or budgets: agents call tools with the same tenant, and must not
// approve their own spend. The refusal starts with what needs the approver
// credential and ends with why the one sent does not do.
func approverTenant(r *http.Request, what, why string) (string, *apiError) {
	t, aerr := tenant(r)
	if aerr != nil {
		return "", aerr
	}
	if authn.HasScope(auth.TokenInfoFromContext(r.Context()), authn.ScopeApprove) {
		return t, nil
	}
	return "", &apiError{status: http.StatusForbidden, code: CodeForbidden,
		message: what + " an approver credential: an API key of role approver " +
			"(taskgate keys create --role approver) or an OAuth token with scope " + authn.ScopeApprove + "; " + why}
}

// pathID reads the positive {id} of r's path; noun names what it identifies.
func pathID(r *http.Request, noun string) (int64, *apiError) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("id", "%s id %q is not a positive number", noun, raw)
	}
	return id, nil
}

// allParam reads ?all=, false when absent.
func allParam(r *http.Request) (bool, *apiError) {
	v := r.URL.Query().Get("all")
	if v == "" {
		return false, nil
	}
	all, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("all", "all=%q is not true or false", v)
	}
	return all, nil
}

// termsError answers terms that make no approval or budget: a bad term
// names its field; anything else is the gateway's failure to check them.
func (a *API) termsError(r *http.Request, what string, err error) *apiError {
	var fe *FieldError
	if errors.As(err, &fe) {
		return badRequest(fe.Field, "%s", fe.Error())
	}
	return a.internal(r, "could not check the "+what, err)
}

// creator names the credential that created something, for the ledger's
// record: "api_key:7" or "jwt:<subject>".
func creator(r *http.Request) string {
	return authn.CredentialID(auth.TokenInfoFromContext(r.Context()))
}

// apiError is an answer that is not a success.
type apiError struct {
	status  int
	code    string
	message string
	field   string
}

func badRequest(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, field: field, message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, code: CodeNotFound, message: fmt.Sprintf(format, args...)}
}

// internal logs err in full and answers 500 without its details, which may
// name database internals.
func (a *API) internal(r *http.Request, what string, err error) *apiError {
	a.log.ErrorContext(r.Context(), what, "method", r.Method, "path", r.URL.Path, "err", err)
	return &apiError{status: http.StatusInternalServerError, code: CodeInternal,
		message: what + "; the gateway log has the details, try again shortly"}
}

// errorBody is the JSON shape of every error.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request field at fault, for bad input.
	Field string `json:"field,omitempty"`
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, errorBody{errorObject{Code: e.code, Message: e.message, Field: e.field}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		// Every value written here is built from plain fields; failing to
		// encode one is a programming error worth a 500, not a panic.
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal_error","message":"could not encode the answer"}}`)
	}
	header(w, "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// header sets what every answer carries: its type, and that it is private
// to the caller and not to be sniffed into something else.
func header(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
			message: fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, allow)})
	}
}

// decodeBody reads exactly one JSON object from r's body into v, refusing
// unknown fields, trailing data and bodies over the size limit.
func (a *API) decodeBody(w http.ResponseWriter, r *http.Request, v any) *apiError {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, a.maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var (
		tooLarge *http.MaxBytesError
		typeErr  *json.UnmarshalTypeError
		syntax   *json.SyntaxError
	)
	switch {
	case errors.As(err, &tooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: CodeTooLarge,
			message: fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit)}
	case errors.Is(err, io.EOF):
		return badRequest("", "the request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the request body ends in the middle of its JSON")
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return badRequest(typeErr.Field, "%s must be a JSON %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntax):
		return badRequest("", "the request body is not valid JSON: %v", err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return badRequest(strings.Trim(name, `"`), "unknown field %s", name)
	default:
		return badRequest("", "the request body is not a valid JSON object: %v", err)
	}
}

// jsonKind names a Go kind as the JSON type a client should send.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "bool":
		return "boolean"
	case kind == "struct", kind == "map":
		return "object"
	case kind == "slice", kind == "array":
		return "array"
	}
	return kind
}
