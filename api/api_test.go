package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite/sqlitetest"
	"github.com/taskgate/taskgate/money"
)

// clock is the API's clock in these tests, so that expiry is exact.
func clock() time.Time { return time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC) }

// fixture is the API on a real SQLite ledger behind the real authn
// middleware, with an API key for each of two tenants.
type fixture struct {
	store       ledger.Store
	url         string
	acme, other string // agent API keys of tenants acme and globex
	// acmeApprover and otherApprover are approver keys of the same tenants.
	acmeApprover, otherApprover string
}

func newFixture(t *testing.T, maxBody int64) *fixture {
	t.Helper()
	ctx := context.Background()
	s := sqlitetest.Open(t)
	authr, err := authn.New(&authn.Options{Store: s, ResourceURL: "http://127.0.0.1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.New(&api.Options{Store: s, Clock: clock, MaxBodyBytes: maxBody}).Register(mux)
	srv := httptest.NewServer(authr.Middleware(mux))
	t.Cleanup(srv.Close)
	f := &fixture{store: s, url: srv.URL}
	if f.acme, _, err = authn.NewAPIKey(ctx, s, "acme", "test"); err != nil {
		t.Fatal(err)
	}
	if f.other, _, err = authn.NewAPIKey(ctx, s, "globex", "test"); err != nil {
		t.Fatal(err)
	}
	if f.acmeApprover, _, err = authn.NewAPIKeyWithRole(ctx, s, "acme", "reviewer", ledger.RoleApprover); err != nil {
		t.Fatal(err)
	}
	if f.otherApprover, _, err = authn.NewAPIKeyWithRole(ctx, s, "globex", "reviewer", ledger.RoleApprover); err != nil {
		t.Fatal(err)
	}
	return f
}

// response is one HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (f *fixture) do(t *testing.T, method, path, key, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// apiError decodes the JSON error object of r.
func apiError(t *testing.T, r response) (code, message, field string) {
	t.Helper()
	var e struct {
		Error struct {
			Code, Message, Field string
		} `json:"error"`
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("answer %d %s is not a JSON error object (%v)", r.status, r.body, err)
	}
	return e.Error.Code, e.Error.Message, e.Error.Field
}

func approval(t *testing.T, r response, want int) api.ApprovalView {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d %s, want %d", r.status, r.body, want)
	}
	var v api.ApprovalView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("answer %s: %v", r.body, err)
	}
	return v
}

func list(t *testing.T, r response) []api.ApprovalView {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("list: status %d %s, want 200", r.status, r.body)
	}
	var l struct {
		Approvals []api.ApprovalView `json:"approvals"`
	}
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("list answer %s: %v", r.body, err)
	}
	if l.Approvals == nil {
		t.Fatalf("list answer %s has no approvals array", r.body)
	}
	return l.Approvals
}

const goodBody = `{"operation_id":"settlement-regression-842","tool":"hosted_test.run_suite","max_total_cost":"20.00",
	"max_remote_jobs":1,"retry_policy":"lookup_then_attach","expires_in":"24h"}`

func TestApprovalLifecycle(t *testing.T) {
	now := clock()
	f := newFixture(t, 0)
	v := approval(t, f.do(t, http.MethodPost, "/v1/approvals", f.acmeApprover, goodBody), http.StatusCreated)
	want := api.ApprovalView{
		ID: v.ID, Tenant: "acme", OperationID: "settlement-regression-842", Tool: "hosted_test.run_suite",
		MaxTotalCost: "20.00", Currency: "USD", MaxRemoteJobs: 1, RetryPolicy: "lookup_then_attach",
		ExpiresAt: now.Add(24 * time.Hour), Status: api.ApprovalActive, CreatedAt: v.CreatedAt, CreatedBy: v.CreatedBy,
	}
	if v != want {
		t.Errorf("created %+v\nwant    %+v", v, want)
	}
	if !strings.HasPrefix(v.CreatedBy, "api_key:") {
		t.Errorf("created_by = %q, want the API key that created it", v.CreatedBy)
	}
	stored, err := f.store.ApprovalGet(context.Background(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Tenant != "acme" || stored.MaxTotalCost != money.MustParse("20", "USD") {
		t.Errorf("stored %+v, want acme's approval of 20.00 USD", stored)
	}

	// A tenant in the body is not a field: the tenant only ever comes
	// from the key.
	r := f.do(t, http.MethodPost, "/v1/approvals", f.otherApprover, strings.Replace(goodBody, `{`, `{"tenant":"acme",`, 1))
	if code, _, field := apiError(t, r); r.status != http.StatusBadRequest || code != api.CodeInvalidRequest || field != "tenant" {
		t.Errorf("POST with a tenant field: %d %s, want 400 naming tenant", r.status, r.body)
	}

	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals", f.acme, "")); len(got) != 1 || got[0] != v {
		t.Errorf("acme's list = %+v, want [%+v]", got, v)
	}
	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals?operation_id=settlement-regression-842", f.acme, "")); len(got) != 1 {
		t.Errorf("acme's list for the operation = %+v, want the approval", got)
	}
	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals?operation_id=another", f.acme, "")); len(got) != 0 {
		t.Errorf("acme's list for another operation = %+v, want none", got)
	}
	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals?all=true", f.other, "")); len(got) != 0 {
		t.Errorf("globex's list = %+v, want none of acme's", got)
	}

	path := "/v1/approvals/" + itoa(v.ID)
	r = f.do(t, http.MethodDelete, path, f.otherApprover, "")
	if code, _, _ := apiError(t, r); r.status != http.StatusNotFound || code != api.CodeNotFound {
		t.Errorf("globex revoking acme's approval: %d %s, want 404", r.status, r.body)
	}
	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals", f.acme, "")); len(got) != 1 || got[0].Status != api.ApprovalActive {
		t.Fatalf("after globex's attempt, acme's list = %+v, want the approval still active", got)
	}
	revoked := approval(t, f.do(t, http.MethodDelete, path, f.acmeApprover, ""), http.StatusOK)
	if revoked.Status != api.ApprovalRevoked || !revoked.RevokedAt.Equal(now) {
		t.Errorf("revoked = %+v, want status revoked at %s", revoked, now)
	}
	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals", f.acme, "")); len(got) != 0 {
		t.Errorf("after revoke, acme's list = %+v, want none", got)
	}
	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals?all=true", f.acme, "")); len(got) != 1 || got[0].Status != api.ApprovalRevoked {
		t.Errorf("after revoke, acme's list?all=true = %+v, want the revoked approval", got)
	}
	if r := f.do(t, http.MethodDelete, "/v1/approvals/999999", f.acmeApprover, ""); r.status != http.StatusNotFound {
		t.Errorf("revoking an unknown approval: %d %s, want 404", r.status, r.body)
	}

	atBody := strings.Replace(goodBody, `"expires_in":"24h"`, `"expires_at":"2026-09-03T00:00:00+02:00","currency":"eur"`, 1)
	at := approval(t, f.do(t, http.MethodPost, "/v1/approvals", f.acmeApprover, atBody), http.StatusCreated)
	if !at.ExpiresAt.Equal(time.Date(2026, 9, 2, 22, 0, 0, 0, time.UTC)) || at.Currency != "EUR" {
		t.Errorf("expires_at and currency = %s %s, want 2026-09-02T22:00:00Z EUR", at.ExpiresAt, at.Currency)
	}
}

// The ceiling's old name, max_total_cost_usd, is accepted until the next
// release: it creates the same approval as max_total_cost, and the answer
// carries a Warning naming the new name. Both at once is refused.
func TestApprovalDeprecatedCeilingName(t *testing.T) {
	f := newFixture(t, 0)
	cr := f.do(t, http.MethodPost, "/v1/approvals", f.acmeApprover, goodBody)
	current := approval(t, cr, http.StatusCreated)
	if w := cr.header.Get("Warning"); w != "" {
		t.Errorf("POST with max_total_cost: Warning %q, want none", w)
	}
	oldBody := strings.Replace(strings.Replace(goodBody, `"max_total_cost"`, `"max_total_cost_usd"`, 1), `settlement-regression-842`, `old-name-op`, 1)
	r := f.do(t, http.MethodPost, "/v1/approvals", f.acmeApprover, oldBody)
	old := approval(t, r, http.StatusCreated)
	if want := `299 - "max_total_cost_usd is deprecated and will be removed in the next release; send max_total_cost"`; r.header.Get("Warning") != want {
		t.Errorf("POST with max_total_cost_usd: Warning %q, want %q", r.header.Get("Warning"), want)
	}
	if old.MaxTotalCost != current.MaxTotalCost || old.Currency != current.Currency || old.MaxRemoteJobs != current.MaxRemoteJobs {
		t.Errorf("max_total_cost_usd created %+v, max_total_cost %+v; want the same terms", old, current)
	}
	if !strings.Contains(string(r.body), `"max_total_cost": "20.00"`) || strings.Contains(string(r.body), "max_total_cost_usd") {
		t.Errorf("answer %s, want the ceiling under max_total_cost only", r.body)
	}

	for _, tc := range []struct {
		name, body, field, wantInText string
	}{
		{"both names", strings.Replace(goodBody, `{`, `{"max_total_cost_usd":"20.00",`, 1), "max_total_cost_usd", "send only max_total_cost"},
		{"old name with a JSON number", strings.Replace(oldBody, `"20.00"`, `20.5`, 1), "max_total_cost_usd", `max_total_cost_usd must be a decimal string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, http.MethodPost, "/v1/approvals", f.acmeApprover, tc.body)
			code, msg, field := apiError(t, r)
			if r.status != http.StatusBadRequest || code != api.CodeInvalidRequest || field != tc.field || !strings.Contains(msg, tc.wantInText) {
				t.Errorf("got %d %s/%q field %q; want 400, field %q, a message containing %q", r.status, code, msg, field, tc.field, tc.wantInText)
			}
		})
	}
}

func TestApprovalBadInput(t *testing.T) {
	f := newFixture(t, 512)
	for _, tc := range []struct {
		name       string
		body       string
		status     int
		field      string
		wantInText string
	}{
		{"amount as a JSON number", strings.Replace(goodBody, `"20.00"`, `20.5`, 1), 400, "max_total_cost", `must be a decimal string such as "20.00"`},
		{"amount as an exponent", strings.Replace(goodBody, `"20.00"`, `"1e3"`, 1), 400, "max_total_cost", `"1e3" is not a decimal number`},
		{"amount missing", strings.Replace(goodBody, `"max_total_cost":"20.00",`, ``, 1), 400, "max_total_cost", "is required"},
		{"amount empty", strings.Replace(goodBody, `"20.00"`, `""`, 1), 400, "max_total_cost", "is empty"},
		{"negative amount", strings.Replace(goodBody, `"20.00"`, `"-1"`, 1), 400, "max_total_cost", "negative"},
		{"unknown field", strings.Replace(goodBody, `{`, `{"max_cost":"20.00",`, 1), 400, "max_cost", `unknown field "max_cost"`},
		{"jobs as a string", strings.Replace(goodBody, `"max_remote_jobs":1`, `"max_remote_jobs":"1"`, 1), 400, "max_remote_jobs", "max_remote_jobs must be a JSON number"},
		{"zero jobs", strings.Replace(goodBody, `"max_remote_jobs":1`, `"max_remote_jobs":0`, 1), 400, "max_remote_jobs", "at least 1"},
		{"unknown retry policy", strings.Replace(goodBody, `lookup_then_attach`, `always_resend`, 1), 400, "retry_policy", `"always_resend" is not a retry policy`},
		{"unqualified tool", strings.Replace(goodBody, `hosted_test.run_suite`, `run_suite`, 1), 400, "tool", "not a qualified tool name"},
		{"no operation ID", strings.Replace(goodBody, `"operation_id":"settlement-regression-842",`, ``, 1), 400, "operation_id", "is required"},
		{"operation ID that climbs a path", strings.Replace(goodBody, `settlement-regression-842`, `../requests/1/approve?x=`, 1), 400, "operation_id", `"/" (U+002F) at byte 2`},
		{"operation ID with a bidi override", strings.Replace(goodBody, `settlement-regression-842`, `bidi-\u202etxt.exe`, 1), 400, "operation_id", `"\u202e" (U+202E) at byte 5`},
		{"operation ID that is a dot segment", strings.Replace(goodBody, `settlement-regression-842`, `..`, 1), 400, "operation_id", "dot segment"},
		{"both expiries", strings.Replace(goodBody, `"expires_in":"24h"`, `"expires_in":"24h","expires_at":"2026-09-03T00:00:00Z"`, 1), 400, "expires_in", "exactly one of expires_in"},
		{"no expiry", strings.Replace(goodBody, `,"expires_in":"24h"`, ``, 1), 400, "expires_in", "exactly one of expires_in"},
		{"bad duration", strings.Replace(goodBody, `"24h"`, `"a day"`, 1), 400, "expires_in", "not a duration"},
		{"past expiry", strings.Replace(goodBody, `"expires_in":"24h"`, `"expires_at":"2026-08-31T00:00:00Z"`, 1), 400, "expires_at", "not in the future"},
		{"bad time", strings.Replace(goodBody, `"expires_in":"24h"`, `"expires_at":"tomorrow"`, 1), 400, "expires_at", "not an RFC 3339 time"},
		{"not JSON", `operation_id=x`, 400, "", "not valid JSON"},
		{"truncated JSON", `{"operation_id":"x"`, 400, "", "ends in the middle"},
		{"two objects", goodBody + goodBody, 400, "", "trailing data"},
		{"empty body", ``, 400, "", "empty"},
		{"too large", strings.Replace(goodBody, `settlement-regression-842`, strings.Repeat("x", 600), 1), 413, "", "larger than 512 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, http.MethodPost, "/v1/approvals", f.acmeApprover, tc.body)
			code, msg, field := apiError(t, r)
			wantCode := api.CodeInvalidRequest
			if tc.status == http.StatusRequestEntityTooLarge {
				wantCode = api.CodeTooLarge
			}
			if r.status != tc.status || code != wantCode || field != tc.field || !strings.Contains(msg, tc.wantInText) {
				t.Errorf("got %d %s/%q field %q; want %d %s, field %q, a message containing %q", r.status, code, msg, field, tc.status, wantCode, tc.field, tc.wantInText)
			}
			if tc.field != "" && !strings.Contains(msg, tc.field) {
				t.Errorf("message %q does not name the field %s", msg, tc.field)
			}
		})
	}
	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals?all=true", f.acme, "")); len(got) != 0 {
		t.Errorf("after only bad input, acme has approvals %+v, want none", got)
	}
}

func TestAuthenticationAndRouting(t *testing.T) {
	f := newFixture(t, 0)
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
		code                    string // "" when authn answers (not JSON)
	}{
		{"no key", http.MethodGet, "/v1/approvals", "", 401, ""},
		{"unknown key", http.MethodGet, "/v1/approvals", authn.APIKeyPrefix + strings.Repeat("A", 52), 401, ""},
		{"no key on receipt", http.MethodGet, "/v1/operations/x/receipt", "", 401, ""},
		{"no key on revoke", http.MethodDelete, "/v1/approvals/1", "", 401, ""},
		{"PUT approvals", http.MethodPut, "/v1/approvals", f.acme, 405, api.CodeMethodNotAllowed},
		{"GET one approval", http.MethodGet, "/v1/approvals/1", f.acme, 405, api.CodeMethodNotAllowed},
		{"POST receipt", http.MethodPost, "/v1/operations/x/receipt", f.acme, 405, api.CodeMethodNotAllowed},
		{"unknown path", http.MethodGet, "/v1/operations", f.acme, 404, api.CodeNotFound},
		{"bad approval ID", http.MethodDelete, "/v1/approvals/first", f.acmeApprover, 400, api.CodeInvalidRequest},
		{"bad all", http.MethodGet, "/v1/approvals?all=maybe", f.acme, 400, api.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, tc.method, tc.path, tc.key, "")
			if r.status != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, r.status, r.body, tc.status)
			}
			if tc.status == http.StatusUnauthorized && !strings.Contains(r.header.Get("WWW-Authenticate"), "resource_metadata=") {
				t.Errorf("401 without a WWW-Authenticate challenge: %v", r.header)
			}
			if tc.code == "" {
				return
			}
			if code, _, _ := apiError(t, r); code != tc.code {
				t.Errorf("code = %s, want %s", code, tc.code)
			}
			if tc.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}
}

// TestAgentsCannotWriteApprovals: the key an agent calls tools with reads
// its tenant's approvals but cannot create or revoke one; only an approver
// key can.
func TestAgentsCannotWriteApprovals(t *testing.T) {
	f := newFixture(t, 0)
	r := f.do(t, http.MethodPost, "/v1/approvals", f.acme, goodBody)
	if code, msg, _ := apiError(t, r); r.status != http.StatusForbidden || code != api.CodeForbidden ||
		!strings.Contains(msg, "approver") || !strings.Contains(msg, authn.ScopeApprove) {
		t.Errorf("agent key POST /v1/approvals: %d %s, want 403 forbidden naming the approver role and scope", r.status, r.body)
	}
	if got, err := f.store.ApprovalList(context.Background(), &ledger.ApprovalListParams{Tenant: "acme", IncludeRevoked: true}); err != nil || len(got) != 0 {
		t.Fatalf("after the agent's POST the ledger holds %+v, %v; want no approval", got, err)
	}
	v := approval(t, f.do(t, http.MethodPost, "/v1/approvals", f.acmeApprover, goodBody), http.StatusCreated)
	path := "/v1/approvals/" + itoa(v.ID)
	r = f.do(t, http.MethodDelete, path, f.acme, "")
	if code, _, _ := apiError(t, r); r.status != http.StatusForbidden || code != api.CodeForbidden {
		t.Errorf("agent key DELETE %s: %d %s, want 403 forbidden", path, r.status, r.body)
	}
	if got := list(t, f.do(t, http.MethodGet, "/v1/approvals", f.acme, "")); len(got) != 1 || got[0].Status != api.ApprovalActive {
		t.Errorf("agent key GET /v1/approvals = %+v, want the approval, still active", got)
	}
}

// TestNoTenantIsUnauthorized serves the API without the middleware: the
// handlers refuse to act for nobody rather than for an empty tenant.
func TestNoTenantIsUnauthorized(t *testing.T) {
	f := newFixture(t, 0)
	mux := http.NewServeMux()
	api.New(&api.Options{Store: f.store}).Register(mux)
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/v1/approvals", nil),
		httptest.NewRequest(http.MethodPost, "/v1/approvals", strings.NewReader(goodBody)),
		httptest.NewRequest(http.MethodDelete, "/v1/approvals/1", nil),
		httptest.NewRequest(http.MethodGet, "/v1/operations/x/receipt", nil),
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		r := response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
		if code, _, _ := apiError(t, r); r.status != http.StatusUnauthorized || code != api.CodeUnauthenticated {
			t.Errorf("%s %s without a tenant: %d %s, want 401 unauthenticated", req.Method, req.URL.Path, r.status, r.body)
		}
	}
}

func TestReceipt(t *testing.T) {
	now := clock()
	f := newFixture(t, 0)
	op := completedOperation(t, f.store, "acme", "settlement-regression-842")
	for _, tc := range []struct {
		query, contentType, want string
	}{
		{"", "application/yaml", "  final_cost_usd: 17.84\n"},
		{"?format=yaml", "application/yaml", "  final_cost_usd: 17.84\n"},
		{"?format=json", "application/json", `"final_cost_usd": "17.84"`},
		{"?format=md", "text/markdown; charset=utf-8", "**`settlement-regression-842`** — 1 remote job, 0 duplicates, 17.84 USD final, reconciliation complete, ready for review\n"},
	} {
		for _, id := range []string{op.OperationID, op.TaskID} {
			r := f.do(t, http.MethodGet, "/v1/operations/"+id+"/receipt"+tc.query, f.acme, "")
			if r.status != http.StatusOK || r.header.Get("Content-Type") != tc.contentType || !bytes.Contains(r.body, []byte(tc.want)) {
				t.Errorf("GET receipt of %s%s: %d %s\n%s\nwant 200 %s containing %q", id, tc.query, r.status, r.header.Get("Content-Type"), r.body, tc.contentType, tc.want)
			}
		}
	}
	r := f.do(t, http.MethodGet, "/v1/operations/settlement-regression-842/receipt?format=json", f.acme, "")
	var doc struct {
		Receipt struct {
			GeneratedAt time.Time `json:"generated_at"`
			Tenant      string    `json:"tenant"`
		} `json:"paid_tool_retry_receipt"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Receipt.GeneratedAt.Equal(now) || doc.Receipt.Tenant != "acme" {
		t.Errorf("receipt generated_at %s tenant %q, want the API clock %s and acme", doc.Receipt.GeneratedAt, doc.Receipt.Tenant, now)
	}

	for _, id := range []string{op.OperationID, op.TaskID, "no-such-operation"} {
		r := f.do(t, http.MethodGet, "/v1/operations/"+id+"/receipt", f.other, "")
		if code, msg, _ := apiError(t, r); r.status != http.StatusNotFound || code != api.CodeNotFound || strings.Contains(msg, "acme") {
			t.Errorf("globex asking for %s: %d %s, want 404 that says nothing of acme", id, r.status, r.body)
		}
	}
	r = f.do(t, http.MethodGet, "/v1/operations/settlement-regression-842/receipt?format=pdf", f.acme, "")
	if _, msg, field := apiError(t, r); r.status != http.StatusBadRequest || field != "format" || !strings.Contains(msg, "yaml, json, md, dsse or sigstore-bundle") {
		t.Errorf("format=pdf: %d %s, want 400 naming format", r.status, r.body)
	}
}

// completedOperation puts a finished operation of tenant in the ledger:
// accepted under an approval, one remote job bound, a final charge of
// 17.84.
func completedOperation(t *testing.T, s ledger.Store, tenant, operationID string) *ledger.Operation {
	t.Helper()
	ctx := context.Background()
	if _, err := s.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: tenant, OperationID: operationID, Tool: "hosted_test.run_suite", MaxTotalCost: money.MustParse("20.00", "USD"),
		MaxRemoteJobs: 1, RetryPolicy: "lookup_then_attach", ExpiresAt: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Accept(ctx, &ledger.AcceptParams{
		Tenant: tenant, OperationID: operationID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: args, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
		RetryPolicy: "lookup_then_attach", Priced: true,
		Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("18.00", "USD")},
	})
	if err != nil || res.Decision != ledger.DecisionCreated {
		t.Fatalf("Accept = %+v, %v; want created", res, err)
	}
	// Through "send started", as a worker goes.
	if _, err := s.Transition(ctx, &ledger.TransitionParams{
		OperationRef: res.Operation.ID, From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending,
	}); err != nil {
		t.Fatal(err)
	}
	final := money.MustParse("17.84", "USD")
	intended := true
	op, err := s.Transition(ctx, &ledger.TransitionParams{
		OperationRef: res.Operation.ID, From: []ledger.State{ledger.StateSending}, To: ledger.StateCompleted,
		Result: json.RawMessage(`{"content":[{"type":"text","text":"suite passed"}]}`),
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: "hosted_test", RemoteJobID: "hosted-suite-9912", Kind: "provider_job", Status: ledger.JobCompleted, Intended: &intended,
		}},
		Charges:     []*ledger.ChargeUpsert{{RemoteJobID: "hosted-suite-9912", ProviderChargeID: "ch-9912", Amount: final, Status: ledger.ChargeFinal, Source: "test"}},
		Creator:     &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes},
		Reservation: &ledger.ReservationUpdate{Status: ledger.ReservationSettled, Settled: final},
		// An event starts the chain a receipt is issued over.
		Events: []ledger.EventParams{{Kind: ledger.EventRemoteJobBound, Data: ledger.RemoteJobData{RemoteJobID: "hosted-suite-9912"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
