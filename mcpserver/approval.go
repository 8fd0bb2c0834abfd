package mcpserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/console"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskwire"
)

// An approval comes from a human: through `taskgate approve`, the REST API
// or the console with an approver credential. A form answer to a question
// this gateway asked in the protocol comes from the client, which an agent
// may drive: nothing in it proves that a person saw the question. So a
// form is asked only where the tool's policy sets
// elicitation_max_total_cost and the call's route fits under it, and the
// approval it gives never exceeds the route's estimate, its remote jobs or
// that cap, whatever the answer says; it is recorded as given by the
// client's user, unverified. Even then an answer counts only when it
// replies to a question recorded in the ledger, asked of the same tenant
// about the same operation, tool and arguments, not yet answered and not
// expired; the question is taken when answered. On a 2025-11-25 session the
// question is asked over the session itself and its answer is the client's
// reply.

const (
	// approvalInput names taskgate's approval question among input requests.
	approvalInput = "taskgate_approval"
	// approvalStatePrefix starts the requestState of an approval question;
	// the question's nonce follows it.
	approvalStatePrefix = "taskgate-approval."
	// questionLifetime is how long a client has to answer a question.
	questionLifetime = 15 * time.Minute
	// elicitWait bounds waiting for a 2025-11-25 user's answer, so that a
	// client that never answers cannot hold the call open.
	elicitWait = 10 * time.Minute
)

// A client that declares URL-mode elicitation is not asked a form: its call
// files an approval request (and, like any call that waits for one, holds
// an operation awaiting approval) and the user is sent by URL to the
// console's page of that request, where a human signs in with an approver
// credential and decides. What the client answers says only whether the
// user agreed to open the page (2025-11-25) or that it is retrying
// (2026-07-28): the call waits for, and proceeds on, the approver's
// decision alone.

// approvalRequestStatePrefix starts the requestState of a 2026-07-28
// input_required result that sends the user to an approval request's
// page; the request's ID follows it. The retry needs nothing from it: it
// attaches to the waiting operation by its operation ID.
const approvalRequestStatePrefix = "taskgate-approval-request."

// approvalQuestion is the form that asks the user for an approval.
func approvalQuestion(a *attempt) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode: "form",
		Message: fmt.Sprintf("Approve %s for operation %q? It costs money or changes the world outside this session; %s. "+
			"Set the most it may cost in total and how many remote jobs it may start; an answer approves at most %s and %s. Declining starts nothing.",
			a.tool(), a.opID, pricedText(a.priced), a.priced.Estimate.Display(), jobsText(a.priced.RemoteJobs)),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"max_total_cost":  map[string]any{"type": "string", "title": "Spend ceiling (" + a.priced.Estimate.Currency + ")", "default": a.priced.Estimate.String()},
				"max_remote_jobs": map[string]any{"type": "integer", "title": "Remote jobs", "default": a.priced.RemoteJobs, "minimum": 1},
			},
			"required": []string{"max_total_cost"},
		},
	}
}

// formTerms is what a form answer asking for ceiling and jobs approves of
// a call priced p under cap: never more than the route's estimate and
// remote jobs, nor than the cap. An answer names the client's wishes, not
// a human's decision, so it may narrow the approval but never widen it.
func formTerms(ceiling money.Amount, jobs int, p policy.Route, cap money.Amount) (money.Amount, int) {
	ceiling.Micros = min(ceiling.Micros, p.Estimate.Micros, cap.Micros)
	return ceiling, min(jobs, p.RemoteJobs)
}

// askApproval asks for a missing approval the way the plan says: over a
// 2025-11-25 session (asked reports that an approval now exists), or by
// answering a 2026-07-28 client that declared elicitation with an
// input_required result (out) whose question is recorded first.
func (h *host) askApproval(ctx context.Context, a *attempt, way askWay) (out *taskwire.Outcome, asked bool, err error) {
	q := approvalQuestion(a)
	switch way {
	case askOnSession:
		ectx, cancel := context.WithTimeout(ctx, elicitWait)
		defer cancel()
		answer, err := a.call.Caller.Elicit(ectx, q)
		if err != nil {
			return nil, false, err
		}
		if out := h.approveFromAnswer(ctx, a, answer); out != nil {
			return out, false, nil
		}
		return nil, true, nil
	case askInResult:
		now := h.g.clock()
		question, err := h.g.store.ApprovalQuestionCreate(context.WithoutCancel(ctx), &ledger.ApprovalQuestion{
			Nonce: rand.Text(), Tenant: a.tenant, OperationID: a.opID, Tool: a.tool(), Fingerprint: a.fp,
			Estimate: a.priced.Estimate, CreatedAt: now, ExpiresAt: now.Add(questionLifetime),
		})
		if err != nil {
			return nil, false, err
		}
		a.log.Info("asked for an approval", "question", question.ID, "expires_at", question.ExpiresAt)
		return &taskwire.Outcome{Result: &mcp.CallToolResult{
			Content:       []mcp.Content{&mcp.TextContent{Text: "This call needs the user's approval before it starts."}},
			InputRequests: mcp.InputRequestMap{approvalInput: q},
			RequestState:  approvalStatePrefix + question.Nonce,
		}}, false, nil
	}
	return nil, false, nil
}

// takeApprovalAnswer does with an approval answer the call carries what
// the plan says: an answer that approves nothing is ignored, saying why in
// the log; one the plan takes either approves the call (nil) or refuses
// it (out).
func (h *host) takeApprovalAnswer(ctx context.Context, a *attempt, p *callPlan) *taskwire.Outcome {
	switch p.Answer {
	case answerIgnore:
		a.log.Warn("ignored an answer to an approval question", "why", p.IgnoredWhy)
	case answerTake:
		answer, _ := a.call.InputResponses[approvalInput].(*mcp.ElicitResult)
		return h.takeAnswer(ctx, a, p.Nonce, answer)
	}
	return nil
}

// takeAnswer honours a 2026-07-28 answer to an approval question only when
// it replies to a question this gateway asked: the question nonce names
// is outstanding and was asked of this tenant about this operation, tool
// and arguments. An answer that passes is taken (it counts once) and, when
// it accepts, becomes an approval: nil is returned, or the refusal to
// send. Any other answer is ignored, as the specification asks of
// responses to requests that are not outstanding (it may be a lost
// reply's retry); the call then goes on as if it carried none, which
// without an approval refuses it.
func (h *host) takeAnswer(ctx context.Context, a *attempt, nonce string, answer *mcp.ElicitResult) *taskwire.Outcome {
	_, err := h.g.store.ApprovalQuestionTake(context.WithoutCancel(ctx), &ledger.ApprovalQuestionTakeParams{
		Nonce: nonce, Tenant: a.tenant, OperationID: a.opID, Tool: a.tool(), Fingerprint: a.fp, Now: h.g.clock(),
	})
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		a.log.Warn("ignored an answer to an approval question", "why", "no outstanding question of this tenant about this operation, tool and arguments has that nonce")
		return nil
	case err != nil:
		a.log.Error("taking an approval question", "err", err)
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInternalError, "the answer to the approval question could not be recorded; nothing was started",
			map[string]any{"reason": "ledger_unavailable"})}
	}
	return h.approveFromAnswer(ctx, a, answer)
}

// approveFromAnswer turns the user's answer into an approval. It returns
// nil when the approval was created, or the refusal to send otherwise.
func (h *host) approveFromAnswer(ctx context.Context, a *attempt, answer *mcp.ElicitResult) *taskwire.Outcome {
	if answer == nil || answer.Action != "accept" {
		action := "no answer"
		if answer != nil {
			action = answer.Action
		}
		return h.refuse(ctx, a.log, a.denial(), ledger.ReasonApprovalDeclined,
			fmt.Sprintf("the user did not approve this call (%s); nothing was started", action), nil)
	}
	ceiling, err := money.Parse(numberText(answer.Content["max_total_cost"]), a.r.policy.Contract.Cost.Currency)
	jobs := a.priced.RemoteJobs
	if v, ok := answer.Content["max_remote_jobs"].(float64); ok && v >= 1 && v == float64(int(v)) {
		jobs = int(v)
	}
	if err != nil || ceiling.Micros <= 0 {
		return h.refuse(ctx, a.log, a.denial(), ledger.ReasonApprovalInvalid,
			"the approval's spend ceiling must be a positive decimal such as 20.00; nothing was started", nil)
	}
	asked := ceiling
	ceiling, jobs = formTerms(ceiling, jobs, a.priced, a.r.policy.ElicitationMaxTotalCost)
	ap, err := h.g.store.ApprovalCreate(context.WithoutCancel(ctx), &ledger.Approval{
		Tenant: a.tenant, OperationID: a.opID, Tool: a.tool(), MaxTotalCost: ceiling, MaxRemoteJobs: jobs,
		RetryPolicy: a.r.policy.RetryPolicy, ExpiresAt: h.g.clock().Add(24 * time.Hour), CreatedBy: ledger.ApprovedByClientUser,
	})
	if err != nil {
		a.log.Error("recording an approval given by a form answer", "err", err)
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInternalError, "the approval could not be recorded; nothing was started", map[string]any{"reason": "ledger_unavailable"})}
	}
	a.log.Info("approval given by a form answer of the client's user, unverified", "approval", ap.ID,
		"max_total_cost", ceiling.String(), "max_remote_jobs", jobs, "answer_max_total_cost", asked.String())
	return nil
}

// urlQuestion sends the user to the console's page of approval request
// req. Its elicitation ID names the request, so that the completion the
// gateway announces on a 2025-11-25 session names it too.
func (h *host) urlQuestion(a *attempt, req *ledger.ApprovalRequest) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode: "url",
		Message: fmt.Sprintf("%s for operation %q costs money or changes the world outside this session (%s). "+
			"An approver decides it in the taskgate console: open the page, sign in with an approver credential and approve or decline approval request %d. "+
			"Nothing starts until an approver approves; the call waits for the decision.",
			a.tool(), a.opID, pricedText(a.priced), req.ID),
		URL:           h.g.config().PublicURL + console.RequestPath(req.ID),
		ElicitationID: fmt.Sprintf("taskgate-approval-request-%d", req.ID),
	}
}

// askByURL sends the user of a call whose operation op waits for approval
// request req to the request's console page, the way the plan says. In a
// 2026-07-28 result it returns the input_required result to answer the
// call with (out); the client's retry attaches to op and waits. Over a
// 2025-11-25 session it asks, tells the client when the request has been
// decided where the plan announces it, and returns nil: the call goes on
// to wait for the decision.
func (h *host) askByURL(ctx context.Context, a *attempt, p *callPlan, way askWay, op *ledger.Operation, req *ledger.ApprovalRequest) *taskwire.Outcome {
	q := h.urlQuestion(a, req)
	c := &a.call.Caller
	if way == askInResult {
		a.log.Info("sent the user to the console to decide the approval request", "approval_request", req.ID)
		return &taskwire.Outcome{Result: &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
				"This call waits for an approver's decision on approval request %d at %s. Call again with the same operation ID to wait for it.", req.ID, q.URL)}},
			InputRequests: mcp.InputRequestMap{approvalInput: q},
			RequestState:  approvalRequestStatePrefix + strconv.FormatInt(req.ID, 10),
		}}
	}
	ectx, cancel := context.WithTimeout(ctx, elicitWait)
	answer, err := c.Elicit(ectx, q)
	cancel()
	if err != nil {
		a.log.Warn("sending the user to the console failed; the call waits for its approval request all the same", "approval_request", req.ID, "err", err)
		return nil
	}
	a.log.Info("sent the user to the console to decide the approval request", "approval_request", req.ID, "client_action", answer.Action)
	if p.Announce {
		go h.announceDecision(op, q.ElicitationID, c.NotifyElicitationComplete)
	}
	return nil
}

// announceDecision waits, while the gateway runs and at most as long as an
// approval request lives, for op to leave awaiting approval, and then tells
// the client that the URL elicitation id has completed.
func (h *host) announceDecision(op *ledger.Operation, id string, notify func(context.Context, *mcp.ElicitationCompleteParams) error) {
	wait := h.g.config().ApprovalRequestTTL + time.Minute
	ctx, cancel := context.WithTimeout(h.g.stopping, wait)
	defer cancel()
	cur, err := h.waitFor(ctx, op, wait, func(o *ledger.Operation) bool { return o.State != ledger.StateAwaitingApproval })
	if err != nil || cur.State == ledger.StateAwaitingApproval {
		return
	}
	nctx, ncancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ncancel()
	if err := notify(nctx, &mcp.ElicitationCompleteParams{ElicitationID: id}); err != nil {
		h.g.log.Debug("telling the client its approval request was decided", "operation_id", op.OperationID, "err", err)
	}
}

// sendToApprover sends the user of a call whose operation waits for
// approval to its request's page, the way the plan says (see
// callPlan.urlAsk). Any answer is only the client's: the call then waits
// for the approver's decision as every waiting call does.
func (h *host) sendToApprover(ctx context.Context, a *attempt, p *callPlan, way askWay, res *ledger.AcceptResult) *taskwire.Outcome {
	req := res.Request
	if req == nil {
		var err error
		if req, err = h.waitingRequest(context.WithoutCancel(ctx), res.Operation); err != nil {
			a.log.Warn("finding the approval request the operation waits for", "err", err)
			return nil
		}
	}
	return h.askByURL(ctx, a, p, way, res.Operation, req)
}

// waitingRequest is the pending approval request op waits for.
func (h *host) waitingRequest(ctx context.Context, op *ledger.Operation) (*ledger.ApprovalRequest, error) {
	list, err := h.g.store.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Tenant: op.Tenant, Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}})
	if err != nil {
		return nil, err
	}
	for _, q := range list {
		if q.OperationRef == op.ID {
			return q, nil
		}
	}
	return nil, ledger.ErrNotFound
}

// pendingRequest is what a denial says of the approval request that waits
// for a human: which one, until when, and how an approver approves it.
func pendingRequest(req *ledger.ApprovalRequest) map[string]any {
	return map[string]any{
		"id": req.ID, "status": req.Status, "expires_at": req.ExpiresAt.UTC().Format(time.RFC3339),
		"how_to_approve": fmt.Sprintf("taskgate approval-requests approve %d", req.ID),
	}
}

// numberText reads a form value that should be a decimal amount.
func numberText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// howToApprove is the command a human runs to approve the call. Every value
// is a shell word: the operation ID and the tenant are chosen by callers
// (the operation ID by the model), and a command built from them must not
// do anything but approve.
func howToApprove(a *attempt) string {
	return fmt.Sprintf("taskgate approve --tenant %s --operation-id %s --tool %s --max-total-cost %s --max-remote-jobs %d --expires-in 24h",
		inert.Shell(a.tenant), inert.Shell(a.opID), inert.Shell(a.tool()), inert.Shell(a.priced.Estimate.String()), a.priced.RemoteJobs)
}

// pricedText says what a call would start and cost, for a person asked to
// approve it.
func pricedText(p policy.Route) string {
	if p.RemoteJobs > 1 {
		return fmt.Sprintf("it would start %d remote jobs, estimated at %s in all", p.RemoteJobs, p.Estimate.Display())
	}
	return "estimated " + p.Estimate.Display()
}

// jobsText names n remote jobs.
func jobsText(n int) string {
	if n == 1 {
		return "1 remote job"
	}
	return fmt.Sprintf("%d remote jobs", n)
}
