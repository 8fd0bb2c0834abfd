package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// routeInsert puts an operation of acme's run_suite with opID straight
// into the ledger, past acceptance and its rule on operation IDs, as a
// ledger written before that rule could hold it. With review set it waits
// in review with an open duplicate remote job, so that its page carries
// every resolution form; otherwise it waits for an approval request. No
// worker takes it up by itself.
func routeInsert(t *testing.T, h *fixtures.Harness, opID string, review bool) *ledger.Operation {
	t.Helper()
	ctx := testCtx(t)
	estimate, err := money.Parse("5.00", "USD")
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Store.Accept(ctx, &ledger.AcceptParams{
		Tenant: "acme", OperationID: opID, Upstream: "hosted_test", Tool: "run_suite",
		Fingerprint: "route-test-" + url.PathEscape(opID), Arguments: json.RawMessage(`{"suite":"settlement"}`),
		RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", RetryPolicy: ledger.RetryLookupThenAttach, TTL: time.Hour,
		Approval: ledger.ApprovalRequirement{Required: !review, Estimate: estimate, RemoteJobs: 1, Request: ledger.RequestWait, RequestTTL: time.Hour},
		// A queued lease keeps recovery away while the test sets it up.
		Enqueue: func(*ledger.Operation) []river.InsertManyParams { return nil }, QueueLease: time.Hour,
	})
	if err != nil || res.Decision != ledger.DecisionCreated {
		t.Fatalf("insert operation %q = %+v, %v", opID, res, err)
	}
	if !review {
		return res.Operation
	}
	dup := true
	reason := "provider_lookup_indeterminate"
	op, err := h.Store.Transition(ctx, &ledger.TransitionParams{OperationRef: res.Operation.ID, To: ledger.StateReview, ReviewReason: &reason,
		RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: "hosted-suite-dup-" + fmt.Sprint(res.Operation.ID),
			Kind: ledger.JobKindProviderJob, Status: ledger.JobRunning, Duplicate: &dup}}})
	if err != nil {
		t.Fatalf("send operation %q to review: %v", opID, err)
	}
	return op
}

// routeResolutions lists the resolutions of op recorded so far.
func routeResolutions(t *testing.T, h *fixtures.Harness, op *ledger.Operation) []string {
	t.Helper()
	events, err := h.Store.EventList(testCtx(t), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events {
		if e.Kind == ledger.EventResolved {
			var d ledger.ResolvedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d.Action)
		}
	}
	return out
}

// routeStillPending fails the test unless q is still pending with its
// operation still waiting and no approval for it.
func routeStillPending(t *testing.T, h *fixtures.Harness, q *ledger.ApprovalRequest, after string) {
	t.Helper()
	ctx := testCtx(t)
	got, err := h.Store.ApprovalRequestGet(ctx, "acme", q.ID)
	if err != nil || got.Status != ledger.RequestPending {
		t.Fatalf("after %s, approval request %d = %+v, %v; want still pending", after, q.ID, got, err)
	}
	op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: q.OperationID})
	if err != nil || op.State != ledger.StateAwaitingApproval {
		t.Fatalf("after %s, operation %s = %+v, %v; want still awaiting approval", after, q.OperationID, op, err)
	}
	approvals, err := h.Store.ApprovalList(ctx, &ledger.ApprovalListParams{Tenant: "acme", OperationID: q.OperationID})
	if err != nil || len(approvals) != 0 {
		t.Fatalf("after %s, approvals of %s = %+v, %v; want none", after, q.OperationID, approvals, err)
	}
}

// An operation ID that climbs out of its path to another approval
// request's approve route, inserted straight into the ledger, routes no
// console form in a real Chromium: each of its page's forms (attach,
// re-send, fail, accept and cancel a duplicate) and the inbox's approve of
// its own request act on that operation or request only, and the approval
// request it aims at stays pending.
func TestBrowserHostileOperationIDRoutesNoForm(t *testing.T) {
	exe := chromiumPath(t)
	h := harness(t)
	waitingCall(t, h, "acme", "op-big")
	target := pendingRequest(t, h, "acme")
	aim := fmt.Sprintf("../requests/%d/approve?", target.ID)
	key, _ := approverKey(t, h, "acme")

	ctx, run := chromium(t, exe)
	base := baseURL(h)
	run("sign in as the approver", chromedp.Navigate(base+"/console/sign-in"), chromedp.WaitVisible(chromedp.CSS("#credential")),
		chromedp.SendKeys(chromedp.CSS("#credential"), key), chromedp.Submit(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#request-%d", target.ID))))

	for _, tc := range []struct {
		action, form string
		job          bool
	}{
		{"attach", "#resolve-attach", true},
		{"resend", "#resolve-resend", false},
		{"fail", "#resolve-fail", false},
		{"accept-duplicate", "form.accept-duplicate", false},
		{"cancel-duplicate", "form.cancel-duplicate", false},
	} {
		opID := aim + "x=" + tc.action
		op := routeInsert(t, h, opID, true)
		var fill []chromedp.Action[chromedp.Void]
		if tc.job {
			fill = append(fill, chromedp.SendKeys(chromedp.CSS(tc.form+" input[name=job]"), "hosted-suite-dup-"+fmt.Sprint(op.ID)))
		}
		sel := tc.form + ` button[type=submit]`
		run("open "+tc.action+"'s operation", chromedp.Navigate(base+"/console/operations/"+url.PathEscape(opID)),
			chromedp.WaitVisible(chromedp.CSS("#review")))
		run("click "+tc.action, append(fill, chromedp.Click(chromedp.CSS(sel)))...)
		testwait.Until(t, testCtx(t), "the "+tc.action+" click to be recorded somewhere", func() (bool, error) {
			got, err := h.Store.ApprovalRequestGet(testCtx(t), "acme", target.ID)
			if err != nil {
				return false, err
			}
			return got.Status != ledger.RequestPending || len(routeResolutions(t, h, op)) > 0, nil
		})
		routeStillPending(t, h, target, "clicking "+tc.action)
		if got := routeResolutions(t, h, op); len(got) != 1 || got[0] != strings.ReplaceAll(tc.action, "-", "_") {
			t.Fatalf("resolutions of %q = %q, want one %s", opID, got, tc.action)
		}
		// The approver lands on the page of the operation resolved, and the
		// next step starts from there, not during the redirect.
		want := base + "/console/operations/" + url.PathEscape(opID)
		testwait.Until(t, testCtx(t), "the browser to show "+want, func() (bool, error) {
			step, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			loc, err := chromedp.Run(step, chromedp.Location())
			return err == nil && loc == want, nil
		})
		run("wait for the page", chromedp.WaitVisible(chromedp.CSS("#state")))
	}

	// The hostile operation's own approval request, approved in the inbox,
	// approves that request only.
	own := routeInsert(t, h, aim+"x=inbox", false)
	all, err := h.Store.ApprovalRequestList(testCtx(t), &ledger.ApprovalRequestListParams{Tenant: "acme"})
	var list []*ledger.ApprovalRequest
	for _, q := range all {
		if q.OperationID == own.OperationID {
			list = append(list, q)
		}
	}
	if err != nil || len(list) != 1 {
		t.Fatalf("approval requests of %q = %+v, %v; want one", own.OperationID, list, err)
	}
	mine := fmt.Sprintf("#request-%d", list[0].ID)
	run("approve the hostile operation's request in the inbox", chromedp.Navigate(base+"/console/inbox"), chromedp.WaitVisible(chromedp.CSS(mine)),
		chromedp.Click(chromedp.CSS(mine+" form.approve button")))
	testwait.Until(t, testCtx(t), "the inbox approval to be recorded somewhere", func() (bool, error) {
		for _, id := range []int64{target.ID, list[0].ID} {
			got, err := h.Store.ApprovalRequestGet(testCtx(t), "acme", id)
			if err != nil || got.Status != ledger.RequestPending {
				return true, err
			}
		}
		return false, nil
	})
	routeStillPending(t, h, target, "approving the hostile operation's request")
	testwait.Until(t, testCtx(t), "the hostile operation's own request to be approved", func() (bool, error) {
		got, err := h.Store.ApprovalRequestGet(testCtx(t), "acme", list[0].ID)
		return err == nil && got.Status == ledger.RequestApproved, err
	})
}

// A form whose hidden kind or ID names another object than its path is
// refused with 400, and changes nothing.
func TestFormForAnotherObjectIsRefused(t *testing.T) {
	h := harness(t)
	waitingCall(t, h, "acme", "op-waits")
	q := pendingRequest(t, h, "acme")
	op := routeInsert(t, h, "op-review", true)
	key, _ := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)
	csrf := b.csrf("/console/inbox")
	approve := fmt.Sprintf("/console/requests/%d/approve", q.ID)
	id := fmt.Sprint(q.ID)
	for _, tc := range []struct {
		name, path string
		form       url.Values
		say        string
	}{
		{"approve without kind or ID", approve, url.Values{}, "approval_request"},
		{"approve by an operation's form", approve, url.Values{"kind": {"operation"}, "operation_id": {"op-review"}, "action": {"fail"}}, "approval_request"},
		{"approve of another request", approve, url.Values{"kind": {"approval_request"}, "id": {id + "0"}}, "request &#34;" + id + "&#34;"},
		{"decline of another request", fmt.Sprintf("/console/requests/%d/decline", q.ID), url.Values{"kind": {"approval_request"}, "id": {"1" + id}}, "request &#34;" + id + "&#34;"},
		{"resolve without kind or ID", "/console/operations/op-review/resolve", url.Values{"action": {"fail"}}, "operation"},
		{"resolve by a request's form", "/console/operations/op-review/resolve", url.Values{"kind": {"approval_request"}, "id": {id}, "action": {"fail"}}, "operation"},
		{"resolve of another operation", "/console/operations/op-review/resolve", url.Values{"kind": {"operation"}, "operation_id": {"op-waits"}, "action": {"fail"}}, "op-review"},
		{"resolve by task ID of another operation", "/console/operations/" + op.TaskID + "/resolve", url.Values{"kind": {"operation"}, "operation_id": {"op-waits"}, "action": {"fail"}}, "op-review"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("csrf", csrf)
			p := b.post(tc.path, tc.form)
			if p.status != http.StatusBadRequest || !strings.Contains(p.body, "reload") || !strings.Contains(p.body, tc.say) {
				t.Fatalf("POST %s = %d; want 400 naming %q and saying to reload\n%s", tc.path, p.status, tc.say, p.body)
			}
		})
	}
	routeStillPending(t, h, q, "the refused forms")
	if got, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{ID: op.ID}); err != nil || got.State != ledger.StateReview || len(routeResolutions(t, h, op)) != 0 {
		t.Fatalf("op-review after the refused forms = %+v, %v; want still in review, unresolved", got, err)
	}
	// The same forms with the right kind and ID go through.
	p := b.post("/console/operations/"+op.TaskID+"/resolve", url.Values{"csrf": {csrf}, "kind": {"operation"}, "operation_id": {"op-review"}, "action": {"fail"}})
	if p.status != http.StatusOK || len(routeResolutions(t, h, op)) != 1 {
		t.Fatalf("resolve with its own kind and ID = %d\n%s", p.status, p.body)
	}
	p = b.post(approve, url.Values{"csrf": {csrf}, "kind": {"approval_request"}, "id": {id}})
	if p.status != http.StatusOK || p.url != "/console/operations/op-waits" {
		t.Fatalf("approve with its own kind and ID = %d at %s\n%s", p.status, p.url, p.body)
	}
}

// IDs outside the alphabet that a ledger already holds are shown and
// routed escaped: links and form actions carry them percent-encoded, the
// page shows bidi and zero-width characters as visible escapes, and the
// link leads to the operation's own page.
func TestHostileIDsAreEscapedAndMarked(t *testing.T) {
	h := harness(t)
	climb := "../requests/1/approve?x="
	bidi := "bidi-\u202etxt.exe\u200b"
	routeInsert(t, h, climb, true)
	routeInsert(t, h, bidi, false)
	key, _ := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)
	list := b.get("/console/operations")
	for _, want := range []string{
		`href="/console/operations/..%2Frequests%2F1%2Fapprove%3Fx="`,
		`href="/console/operations/bidi-%E2%80%AEtxt.exe%E2%80%8B"`,
		`bidi-<span class="ctl">\u{202E}</span>txt.exe<span class="ctl">\u{200B}</span>`,
	} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the operations list lacks %s:\n%s", want, list.body)
		}
	}
	if strings.Contains(list.body, "\u202e") || strings.Contains(list.body, "\u200b") {
		t.Errorf("the operations list shows a bidi or zero-width character as it is")
	}
	inbox := b.get("/console/inbox")
	if !strings.Contains(inbox.body, `href="/console/operations/bidi-%E2%80%AEtxt.exe%E2%80%8B"`) || strings.Contains(inbox.body, "\u202e") {
		t.Errorf("the inbox does not escape and mark the bidi operation ID:\n%s", inbox.body)
	}
	page := b.get("/console/operations/" + url.PathEscape(climb))
	if page.status != http.StatusOK || !strings.Contains(page.body, `id="review"`) {
		t.Fatalf("the climbing operation's page = %d\n%s", page.status, page.body)
	}
	if n := strings.Count(page.body, `action="/console/operations/..%2Frequests%2F1%2Fapprove%3Fx=/resolve"`); n != 5 {
		t.Errorf("the climbing operation's page has %d escaped resolve forms, want 5:\n%s", n, page.body)
	}
	if strings.Contains(page.body, `action="/console/operations/../`) {
		t.Errorf("a form action on the page climbs out of its path:\n%s", page.body)
	}
	if p := b.get("/console/operations/" + url.PathEscape(bidi)); p.status != http.StatusOK || strings.Contains(p.body, "\u202e") ||
		!strings.Contains(p.body, `<title>Operation bidi-\u{202E}txt.exe\u{200B}`) {
		t.Errorf("the bidi operation's page = %d, shows the character as it is or has it in its title:\n%s", p.status, p.body)
	}
	if p := b.get("/console/operations/" + url.PathEscape(bidi) + "/receipt"); p.status != http.StatusOK || strings.ContainsAny(p.body, "\u202e\u200b") ||
		!strings.Contains(p.body, `bidi-<span class="ctl">\u{202E}</span>txt.exe<span class="ctl">\u{200B}</span>`) {
		t.Errorf("the bidi operation's receipt page = %d, shows the character as it is or not as a mark:\n%s", p.status, p.body)
	}
	if p := b.get("/console/operations/" + url.PathEscape(climb) + "/receipt"); p.status != http.StatusOK ||
		!strings.Contains(p.body, `href="/console/operations/..%2Frequests%2F1%2Fapprove%3Fx="`) || strings.Contains(p.body, `href="/console/operations/../`) {
		t.Errorf("the climbing operation's receipt page = %d, or a link on it climbs out of its path:\n%s", p.status, p.body)
	}
}
