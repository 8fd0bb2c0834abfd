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
)

// RequestPath is the path of approval request id's own page: where a
// URL-mode elicitation sends the user, to sign in as an approver and
// decide that one request.
func RequestPath(id int64) string {
	return Prefix + "/requests/" + url.PathEscape(strconv.FormatInt(id, 10))
}

// returnTo is where a sign-in that started at path goes afterwards: path
// itself when it is an approval request's page, the one place a URL-mode
// elicitation sends a user who is not signed in yet; "" (the inbox) for
// anything else, so that no link can send a sign-in elsewhere.
func returnTo(path string) string {
	raw, ok := strings.CutPrefix(path, Prefix+"/requests/")
	if id, err := strconv.ParseInt(raw, 10, 64); !ok || err != nil || id <= 0 || RequestPath(id) != path {
		return ""
	}
	return path
}

// signInPath is the sign-in page for a visit to path that needs one.
func signInPath(path string) string {
	if next := returnTo(path); next != "" {
		return Prefix + "/sign-in?next=" + url.QueryEscape(next)
	}
	return Prefix + "/sign-in"
}

// requestData is one approval request's page.
type requestData struct {
	inboxRequest
	// Pending says the request still waits for a decision, so the page
	// offers the approve and decline forms.
	Pending bool
	// OperationPath is built here, its ID escaped as one path segment,
	// never by the template from stored text.
	OperationPath string
}

// request shows the viewer's approval request named by the path's {id},
// whatever its status, with the forms to decide it while it is pending.
// The request is looked up by the ID in the path and the viewer's tenant
// only: another tenant's reads exactly like a missing one.
func (c *Console) request(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("%q is not an approval request ID; start from the inbox", raw))
		return
	}
	q, err := c.store.ApprovalRequestGet(r.Context(), v.tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		c.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("no approval request %d; start from the inbox", id))
		return
	}
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not load the approval request; the gateway log has the details, try again shortly")
		return
	}
	view := api.ViewApprovalRequest(q, c.clock())
	var args bytes.Buffer
	if json.Indent(&args, view.Arguments, "", "  ") != nil {
		args.Reset()
		args.Write(view.Arguments)
	}
	d := requestData{inboxRequest: inboxRequest{ApprovalRequestView: view, ArgumentsText: args.String()},
		Pending:       view.Status == string(ledger.RequestPending),
		OperationPath: operationPath(view.OperationID, "")}
	p := &page{Title: fmt.Sprintf("Approval request %d", id), Data: d}
	c.render(w, r, "request", http.StatusOK, p)
}

// decisionForms is what the "decide" template, the approve and decline
// forms of one approval request, shows: the request's ID (a number, so
// safe in the forms' paths), its proposed terms and the session's CSRF
// token.
type decisionForms struct {
	CSRF, Estimate, Currency string
	ID                       int64
	RemoteJobs               int
}

// decision gathers what the "decide" template needs, for a page that shows
// a request's forms inside its own range or with.
func decision(csrf string, id int64, estimate, currency string, remoteJobs int) decisionForms {
	return decisionForms{CSRF: csrf, ID: id, Estimate: estimate, Currency: currency, RemoteJobs: remoteJobs}
}
