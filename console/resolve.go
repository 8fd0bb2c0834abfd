package console

import (
	"net/http"
	"strings"

	"github.com/taskgate/taskgate/worker"
)

// Resolution actions a review form may ask for: those of taskgate ops
// resolve.
const (
	resolveAttach          = "attach"
	resolveResend          = "resend"
	resolveFail            = "fail"
	resolveAcceptDuplicate = "accept-duplicate"
	resolveCancelDuplicate = "cancel-duplicate"
)

// resolve records the approver's resolution of an operation through
// worker.Resolve, the code path of taskgate ops resolve, with its rules;
// the resolved event names the approver's credential.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	op, ok := c.findOperation(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		c.operationPage(w, r, op, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	if err := checkFormTarget(r.PostForm, formOperation, op.OperationID); err != nil {
		c.operationPage(w, r, op, http.StatusBadRequest, err.Error())
		return
	}
	v := viewerFrom(r.Context())
	job := strings.TrimSpace(r.PostFormValue("job"))
	res := worker.Resolution{Actor: v.credential, Note: r.PostFormValue("note")}
	action := r.PostFormValue("action")
	if job == "" && (action == resolveAttach || action == resolveAcceptDuplicate || action == resolveCancelDuplicate) {
		c.operationPage(w, r, op, http.StatusBadRequest, "name the provider's remote job ID for this resolution")
		return
	}
	switch action {
	case resolveAttach:
		res.Attach = job
	case resolveResend:
		res.Resend = true
	case resolveFail:
		res.Fail = true
	case resolveAcceptDuplicate:
		res.AcceptDuplicate = job
	case resolveCancelDuplicate:
		res.CancelDuplicate = job
	default:
		c.operationPage(w, r, op, http.StatusBadRequest, "choose a resolution: attach a remote job, re-send, fail, or accept or cancel a duplicate job")
		return
	}
	if _, err := worker.Resolve(r.Context(), c.store, op, res); err != nil {
		c.operationPage(w, r, op, http.StatusConflict, "could not resolve the operation: "+err.Error())
		return
	}
	c.log.InfoContext(r.Context(), "operation resolved in the console", "tenant", v.tenant, "operation_id", op.OperationID,
		"action", action, "approver", v.credential)
	http.Redirect(w, r, operationPath(op.OperationID, op.TaskID), http.StatusSeeOther)
}
