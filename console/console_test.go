package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// harness is a real gateway whose run_suite needs an approval, in front of
// the simulated provider, on a fresh SQLite ledger.
func harness(t *testing.T) *fixtures.Harness {
	t.Helper()
	h, err := fixtures.New(testCtx(t), &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func baseURL(h *fixtures.Harness) string { return strings.TrimSuffix(h.MCPURL(), "/mcp") }

// browser is an HTTP client of the gateway at base that keeps cookies,
// as a browser does.
type browser struct {
	t    *testing.T
	base string
	http *http.Client
}

func newBrowser(t *testing.T, h *fixtures.Harness) *browser {
	t.Helper()
	b := &browser{t: t, base: baseURL(h)}
	b.init()
	return b
}

func (b *browser) init() {
	b.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		b.t.Fatal(err)
	}
	b.http = &http.Client{Jar: jar}
}

// page is one answer, after redirects.
type page struct {
	status int
	url    string
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(testCtx(b.t), method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: resp.StatusCode, url: resp.Request.URL.Path, header: resp.Header, body: string(raw)}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil) }

func (b *browser) post(path string, form url.Values) page { return b.do(http.MethodPost, path, form) }

func (b *browser) signIn(credential string) page {
	b.t.Helper()
	return b.post("/console/sign-in", url.Values{"credential": {credential}})
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the page at path.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	p := b.get(path)
	m := csrfInput.FindStringSubmatch(p.body)
	if m == nil {
		b.t.Fatalf("GET %s: %d, no CSRF token in\n%s", path, p.status, p.body)
	}
	return m[1]
}

func approverKey(t *testing.T, h *fixtures.Harness, tenant string) (string, *ledger.APIKey) {
	t.Helper()
	key, k, err := authn.NewAPIKeyWithRole(testCtx(t), h.Store, tenant, "console approver", ledger.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	return key, k
}

// waitingCall makes tenant's client call run_suite as opID, which waits
// for an approval request; it returns the session and the task.
func waitingCall(t *testing.T, h *fixtures.Harness, tenant, opID string) (*mcp.ClientSession, *taskwire.Task) {
	t.Helper()
	return waitingCallOf(t, h, tenant, fixtures.RunSuiteCall(opID, nil))
}

// waitingCallOf is waitingCall of the call given.
func waitingCallOf(t *testing.T, h *fixtures.Harness, tenant string, call *mcp.CallToolParams) (*mcp.ClientSession, *taskwire.Task) {
	t.Helper()
	cs, err := h.Connect(testCtx(t), tenant, fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, call, nil)
	if err != nil || task == nil || task.Status != taskwire.StatusWorking {
		t.Fatalf("tools/call = %+v, %v; want a working task waiting for approval", task, err)
	}
	return cs, task
}

func pendingRequest(t *testing.T, h *fixtures.Harness, tenant string) *ledger.ApprovalRequest {
	t.Helper()
	list, err := h.Store.ApprovalRequestList(testCtx(t), &ledger.ApprovalRequestListParams{Tenant: tenant, Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}})
	if err != nil || len(list) != 1 {
		t.Fatalf("pending requests of %s = %+v, %v; want one", tenant, list, err)
	}
	return list[0]
}

// An approver key signs in: the session is an HttpOnly, SameSite=Strict
// cookie on /console, the inbox comes back, and every page carries the
// Content-Security-Policy.
func TestSignInWithApproverKey(t *testing.T) {
	h := harness(t)
	key, _ := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p := b.signIn(key)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/inbox" {
		t.Fatalf("sign-in = %d to %q; want 303 to the inbox\n%s", p.status, p.header.Get("Location"), p.body)
	}
	ck := p.header.Get("Set-Cookie")
	for _, want := range []string{"taskgate_console=", "Path=/console", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(ck, want) {
			t.Errorf("Set-Cookie %q lacks %s", ck, want)
		}
	}
	if strings.Contains(ck, key) || strings.Contains(ck, "Secure") {
		t.Errorf("Set-Cookie %q carries the key in the clear, or is Secure on an http public URL", ck)
	}
	if p := b.get("/console"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/inbox" {
		t.Errorf("/console = %d to %q, want 303 to the inbox", p.status, p.header.Get("Location"))
	}
	inbox := b.get("/console/inbox")
	if inbox.status != http.StatusOK || !strings.Contains(inbox.body, "<h1>Inbox</h1>") || !strings.Contains(inbox.body, "tenant <b>acme</b>") {
		t.Fatalf("inbox = %d\n%s", inbox.status, inbox.body)
	}
	csp := inbox.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(inbox.body, "<script") {
		t.Errorf("CSP %q, or the page has a script", csp)
	}
}

// An agent's key cannot sign in, and gets no cookie.
func TestAgentKeyCannotSignIn(t *testing.T) {
	h := harness(t)
	agent, err := h.Key(testCtx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, h)
	p := b.signIn(agent)
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "the console is for approvers") || p.header.Get("Set-Cookie") != "" {
		t.Fatalf("agent sign-in = %d, Set-Cookie %q\n%s", p.status, p.header.Get("Set-Cookie"), p.body)
	}
	if p := b.signIn("tgk_not-a-key"); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "malformed") {
		t.Fatalf("junk sign-in = %d\n%s", p.status, p.body)
	}
	if p := b.get("/console/inbox"); p.url != "/console/sign-in" {
		t.Fatalf("inbox without a session ended at %s (%d); want the sign-in page", p.url, p.status)
	}
}

// Without a session, pages send the browser to sign in and forms are
// refused.
func TestWithoutSession(t *testing.T) {
	h := harness(t)
	b := newBrowser(t, h)
	if p := b.get("/console/operations/op-1"); p.url != "/console/sign-in" || p.status != http.StatusOK {
		t.Fatalf("operation page without a session = %d at %s", p.status, p.url)
	}
	if p := b.post("/console/requests/1/approve", url.Values{"csrf": {"x"}}); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "not signed in") {
		t.Fatalf("approve without a session = %d\n%s", p.status, p.body)
	}
}

// A form without the session's CSRF token, or from another site, changes
// nothing.
func TestPostWithoutCSRFIsRefused(t *testing.T) {
	h := harness(t)
	waitingCall(t, h, "acme", "op-csrf")
	key, _ := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)
	q := pendingRequest(t, h, "acme")
	path := fmt.Sprintf("/console/requests/%d/approve", q.ID)
	for name, form := range map[string]url.Values{"no token": {}, "wrong token": {"csrf": {"forged"}}} {
		if p := b.post(path, form); p.status != http.StatusForbidden || !strings.Contains(p.body, "CSRF") {
			t.Errorf("%s: approve = %d\n%s", name, p.status, p.body)
		}
	}
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, baseURL(h)+path, strings.NewReader(url.Values{"csrf": {b.csrf("/console/inbox")}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := b.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("approve from another origin = %d, want 403", resp.StatusCode)
	}
	if got := pendingRequest(t, h, "acme"); got.ID != q.ID {
		t.Fatalf("request %d is no longer pending", q.ID)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

// Another tenant's operation is not reachable by URL: it reads like one
// that does not exist.
func TestOtherTenantsOperationIsNotFound(t *testing.T) {
	h := harness(t)
	_, task := waitingCall(t, h, "globex", "op-theirs")
	key, _ := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)
	for _, id := range []string{"op-theirs", task.ID, "op-nobody"} {
		if p := b.get("/console/operations/" + id); p.status != http.StatusNotFound || strings.Contains(p.body, "run_suite") {
			t.Errorf("acme's view of %s = %d\n%s", id, p.status, p.body)
		}
	}
	if p := b.get("/console/inbox"); !strings.Contains(p.body, "No approval requests are waiting") {
		t.Errorf("acme's inbox shows globex's request:\n%s", p.body)
	}
	q := pendingRequest(t, h, "globex")
	if p := b.post(fmt.Sprintf("/console/requests/%d/approve", q.ID), url.Values{"csrf": {b.csrf("/console/inbox")}, "kind": {"approval_request"}, "id": {fmt.Sprint(q.ID)}}); p.status != http.StatusNotFound {
		t.Errorf("acme approving globex's request = %d, want 404\n%s", p.status, p.body)
	}
	pendingRequest(t, h, "globex")
	theirs, _ := approverKey(t, h, "globex")
	g := newBrowser(t, h)
	g.signIn(theirs)
	if p := g.get("/console/operations/op-theirs"); p.status != http.StatusOK || !strings.Contains(p.body, "awaiting_approval") {
		t.Errorf("globex's view of its own operation = %d\n%s", p.status, p.body)
	}
}

// Approving from the inbox creates the approval through the REST API's
// rules and dispatches: the one job runs, the operation page shows it
// completed, and the receipt names the approver's credential.
func TestApproveFromInbox(t *testing.T) {
	h := harness(t)
	cs, task := waitingCall(t, h, "acme", "op-inbox")
	key, k := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)
	inbox := b.get("/console/inbox")
	q := pendingRequest(t, h, "acme")
	for _, want := range []string{fmt.Sprintf(`id="request-%d"`, q.ID), fixtures.RunSuiteTool, `name="max_total_cost" value="` + q.Estimate.String() + `"`, "op-inbox"} {
		if !strings.Contains(inbox.body, want) {
			t.Fatalf("the inbox lacks %s:\n%s", want, inbox.body)
		}
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs before the approval = %d", n)
	}
	csrf := csrfInput.FindStringSubmatch(inbox.body)[1]
	p := b.post(fmt.Sprintf("/console/requests/%d/approve", q.ID), url.Values{
		"csrf": {csrf}, "kind": {"approval_request"}, "id": {fmt.Sprint(q.ID)}, "max_total_cost": {q.Estimate.String()}, "currency": {q.Estimate.Currency}, "max_remote_jobs": {"1"},
		"retry_policy": {"lookup_then_attach"}, "expires_in": {"1h"}, "note": {"from the console"},
	})
	if p.status != http.StatusOK || p.url != "/console/operations/op-inbox" {
		t.Fatalf("approve = %d at %s\n%s", p.status, p.url, p.body)
	}
	done, err := taskwire.AwaitTask(testCtx(t), cs, task.ID, 50*time.Millisecond)
	if err != nil || done.Status != taskwire.StatusCompleted {
		t.Fatalf("task after the approval = %+v, %v", done, err)
	}
	if n := len(h.Sim.Jobs()); n != 1 {
		t.Fatalf("provider jobs = %d, want 1", n)
	}
	credential := fmt.Sprintf("api_key:%d", k.ID)
	testwait.Until(t, testCtx(t), "the operation page to show it completed", func() (bool, error) {
		p = b.get("/console/operations/op-inbox")
		return strings.Contains(p.body, `id="state" class="state-completed"`), nil
	})
	for _, want := range []string{credential, "from the console", `id="receipt"`, "op-inbox"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the operation page lacks %s:\n%s", want, p.body)
		}
	}
	if strings.Contains(p.body, `http-equiv="refresh"`) {
		t.Errorf("the page of an ended operation still reloads itself")
	}
	// The spend page shows the approval, used, against its ceiling.
	approvals, err := h.Store.ApprovalList(testCtx(t), &ledger.ApprovalListParams{Tenant: "acme"})
	if err != nil || len(approvals) != 1 {
		t.Fatalf("approvals = %+v, %v; want one", approvals, err)
	}
	spend := b.get("/console/spend")
	row := regexp.MustCompile(fmt.Sprintf(`(?s)<tr id="approval-%d">.*?</tr>`, approvals[0].ID)).FindString(spend.body)
	for _, want := range []string{"op-inbox", approvals[0].MaxTotalCost.String() + " " + approvals[0].MaxTotalCost.Currency, credential} {
		if !strings.Contains(row, want) {
			t.Errorf("the spend page's row of approval %d lacks %s:\n%s", approvals[0].ID, want, spend.body)
		}
	}
	if strings.Contains(row, "not used yet") || !strings.Contains(spend.body, "No open breaches") {
		t.Errorf("the spend page does not show the approval used without a breach:\n%s", spend.body)
	}
	// Deciding again is the REST API's conflict, shown on the inbox.
	again := b.post(fmt.Sprintf("/console/requests/%d/decline", q.ID), url.Values{"csrf": {csrf}, "kind": {"approval_request"}, "id": {fmt.Sprint(q.ID)}})
	if again.status != http.StatusConflict || !strings.Contains(again.body, "could not decline") {
		t.Errorf("declining a decided request = %d\n%s", again.status, again.body)
	}
}

// Declining from the inbox ends the waiting task with nothing started.
func TestDeclineFromInbox(t *testing.T) {
	h := harness(t)
	cs, task := waitingCall(t, h, "acme", "op-no")
	key, _ := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)
	q := pendingRequest(t, h, "acme")
	p := b.post(fmt.Sprintf("/console/requests/%d/decline", q.ID), url.Values{"csrf": {b.csrf("/console/inbox")}, "kind": {"approval_request"}, "id": {fmt.Sprint(q.ID)}, "note": {"not today"}})
	if p.status != http.StatusOK || p.url != "/console/inbox" || !strings.Contains(p.body, "No approval requests are waiting") {
		t.Fatalf("decline = %d at %s\n%s", p.status, p.url, p.body)
	}
	done, err := taskwire.AwaitTask(testCtx(t), cs, task.ID, 50*time.Millisecond)
	if err != nil || done.Status != taskwire.StatusFailed {
		t.Fatalf("task after the decline = %+v, %v", done, err)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

// A revoked key signs out within the key cache's second.
func TestRevokedKeySignsOut(t *testing.T) {
	h := harness(t)
	key, k := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	if p := b.signIn(key); p.url != "/console/inbox" {
		t.Fatalf("sign-in ended at %s (%d)", p.url, p.status)
	}
	if err := h.Store.KeyRevoke(testCtx(t), k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testwait.Until(t, testCtx(t), "the revoked key's session to end", func() (bool, error) {
		p := b.get("/console/inbox")
		return p.status == http.StatusUnauthorized && strings.Contains(p.body, "unknown or revoked"), nil
	})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the session outlived its revoked key by %s", d)
	}
	// The cookie is gone: the next page asks to sign in afresh.
	if p := b.get("/console/inbox"); p.url != "/console/sign-in" {
		t.Errorf("after the session ended, the inbox went to %s (%d)", p.url, p.status)
	}
}

// The operations list shows the tenant's operations only, filtered by
// state, tool and review.
func TestOperationsList(t *testing.T) {
	h := harness(t)
	waitingCall(t, h, "acme", "op-one")
	waitingCallOf(t, h, "acme", fixtures.RunSuiteCall("op-two", map[string]any{"suite": "smoke"}))
	waitingCall(t, h, "globex", "op-three")
	key, _ := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)
	for query, want := range map[string][]string{
		"":                         {"op-one", "op-two"},
		"?state=awaiting_approval": {"op-one", "op-two"},
		"?state=completed":         nil,
		"?tool=run_suite":          {"op-one", "op-two"},
		"?tool=run_matrix":         nil,
		"?review=1":                nil,
		"?open=1&tool=run_suite":   {"op-one", "op-two"},
		"?open=1&tool=run_matrix":  nil,
	} {
		p := b.get("/console/operations" + query)
		if p.status != http.StatusOK {
			t.Fatalf("operations%s = %d\n%s", query, p.status, p.body)
		}
		if strings.Contains(p.body, "op-three") {
			t.Errorf("operations%s shows globex's operation", query)
		}
		for _, op := range []string{"op-one", "op-two"} {
			if shown := strings.Contains(p.body, ">"+op+"</a>"); shown != slices.Contains(want, op) {
				t.Errorf("operations%s: %s shown = %v, want %v", query, op, shown, !shown)
			}
		}
		if len(want) == 0 && !strings.Contains(p.body, "No operations match") {
			t.Errorf("operations%s does not say that none match:\n%s", query, p.body)
		}
	}
	if p := b.get("/console/operations?state=bogus"); p.status != http.StatusBadRequest || !strings.Contains(p.body, `state &#34;bogus&#34; is not an operation state`) {
		t.Errorf("a state that is none = %d\n%s", p.status, p.body)
	}
}

// An operation in review is resolved from its page by the rules of
// taskgate ops resolve, and the resolution names the approver.
func TestResolveReview(t *testing.T) {
	h, err := fixtures.New(testCtx(t), &fixtures.Options{
		Config: fixtures.ConfigOptions{UpstreamTimeout: time.Second},
		Sim:    providersim.Options{Faults: providersim.Faults{DropResponseAfterAccept: 1, LookupIndeterminate: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	cs, err := h.Connect(testCtx(t), "acme", fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if _, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-lost", nil), nil); err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	testwait.Until(t, testCtx(t), "the operation to need review", func() (bool, error) {
		op, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-lost"})
		return err == nil && op.State == ledger.StateReview, err
	})
	key, k := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)
	p := b.get("/console/operations/op-lost")
	if !strings.Contains(p.body, `id="review"`) || strings.Contains(p.body, `http-equiv="refresh"`) {
		t.Fatalf("the page of an operation in review has no review forms, or reloads under them:\n%s", p.body)
	}
	csrf := csrfInput.FindStringSubmatch(p.body)[1]
	if p := b.post("/console/operations/op-lost/resolve", url.Values{"csrf": {csrf}, "kind": {"operation"}, "operation_id": {"op-lost"}, "action": {"attach"}}); p.status != http.StatusBadRequest ||
		!strings.Contains(p.body, "remote job ID") {
		t.Fatalf("attach without a job = %d\n%s", p.status, p.body)
	}
	jobs := h.Sim.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("provider jobs = %d, want 1", len(jobs))
	}
	p = b.post("/console/operations/op-lost/resolve", url.Values{"csrf": {csrf}, "kind": {"operation"}, "operation_id": {"op-lost"}, "action": {"attach"}, "job": {jobs[0].ID}, "note": {"seen at the provider"}})
	if p.status != http.StatusOK || p.url != "/console/operations/op-lost" {
		t.Fatalf("attach = %d at %s\n%s", p.status, p.url, p.body)
	}
	testwait.Until(t, testCtx(t), "the attached job to complete the operation", func() (bool, error) {
		op, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-lost"})
		return err == nil && op.State == ledger.StateCompleted, err
	})
	op, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-lost"})
	if err != nil {
		t.Fatal(err)
	}
	events, err := h.Store.EventList(testCtx(t), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var resolved []ledger.ResolvedData
	for _, e := range events {
		if e.Kind == ledger.EventResolved {
			var d ledger.ResolvedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			resolved = append(resolved, d)
		}
	}
	want := ledger.ResolvedData{Action: "attach", Actor: fmt.Sprintf("api_key:%d", k.ID), Note: "seen at the provider", RemoteJobID: jobs[0].ID}
	if len(resolved) != 1 || resolved[0] != want {
		t.Errorf("resolved events = %+v, want one %+v", resolved, want)
	}
	if p := b.post("/console/operations/op-lost/resolve", url.Values{"csrf": {csrf}, "kind": {"operation"}, "operation_id": {"op-lost"}, "action": {"fail"}}); p.status != http.StatusConflict {
		t.Errorf("failing a completed operation = %d, want 409\n%s", p.status, p.body)
	}
	if n := len(h.Sim.Jobs()); n != 1 {
		t.Errorf("provider jobs = %d, want still 1", n)
	}
}
