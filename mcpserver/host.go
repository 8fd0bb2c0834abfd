package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/telemetry"
	"github.com/taskgate/taskgate/worker"
)

// host keeps every task in the ledger; it implements taskwire.Host.
type host struct {
	g             *Gateway
	defaultTenant string
}

var _ taskwire.Host = (*host)(nil)

func (h *host) tenant(c *taskwire.Caller) string {
	if t := authn.TenantOf(c.TokenInfo); t != "" {
		return t
	}
	return h.defaultTenant
}

// TaskSupport implements taskwire.Host.
func (h *host) TaskSupport(name string) taskwire.TaskSupport {
	r, ok := h.g.route(name)
	if !ok && h.g.gatewayTool(name) {
		// Whatever task a call of the gateway's own tool asks for, it
		// reaches CallTool, which refuses it saying why.
		return taskwire.TaskOptional
	}
	if !ok || !r.consequential() {
		return taskwire.TaskForbidden
	}
	if r.policy.RequireTask {
		return taskwire.TaskRequired
	}
	return taskwire.TaskOptional
}

// rpcError is a JSON-RPC error with data a model can act on.
func rpcError(code int64, msg string, data map[string]any) *jsonrpc.Error {
	e := &jsonrpc.Error{Code: code, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	return e
}

// CallTool implements taskwire.Host: a consequential call becomes an
// operation, accepted in one transaction before anything is answered. It
// identifies the call, prices it, plans it (planCall) and carries out the
// plan in order: an approval answer the call carries, the acceptance (with
// the approval form it may ask), the answer to a refusal, the user sent to
// the approver, answers the call carries, and what the call gets.
func (h *host) CallTool(ctx context.Context, call *taskwire.ToolCall) (*taskwire.Outcome, error) {
	r, out := h.routeOf(call)
	if out != nil {
		return out, nil
	}
	ctx, cancel := h.g.requestContext(ctx, call.Caller.Header)
	defer cancel()
	// Validate and identify, price, plan.
	a, out, err := h.identify(ctx, call, r)
	if out != nil || err != nil {
		return out, err
	}
	if out, err := h.price(ctx, a); out != nil || err != nil {
		return out, err
	}
	facts, caps := factsOf(call)
	p := planCall(facts, caps, r.policy, a.priced, h.g.config().Wait)

	// Carry the plan out.
	if out := h.takeApprovalAnswer(ctx, a, &p); out != nil {
		return out, nil
	}
	requestID, res, out := h.accept(ctx, a, &p)
	if out != nil {
		return out, nil
	}
	if out := h.refusal(ctx, a, &p, requestID, res); out != nil {
		return out, nil
	}
	op := res.Operation
	if res.Request != nil {
		a.log.Info("the call waits for an approval request", "approval_request", res.Request.ID, "expires_at", res.Request.ExpiresAt)
	}
	if way := p.urlAsk(res.Decision, op.State); way != askNone {
		if out := h.sendToApprover(ctx, a, &p, way, res); out != nil {
			h.finishAttempt(ctx, a.log, requestID)
			return out, nil
		}
	}
	if p.answers(op.TaskID) {
		if err := h.answerInCall(ctx, call, op, requestID); err != nil {
			a.log.Error("recording the answers the call carries", "err", err)
			return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInternalError, "the answers this call carries could not be recorded; call again with the same arguments and answers",
				map[string]any{"reason": "ledger_unavailable", "operation_id": op.OperationID})}, nil
		}
	}
	return h.respond(ctx, a, &p, op, requestID)
}

// routeOf is the route of a consequential call; otherwise the outcome
// that passes the call through, or refuses a call of a tool the gateway
// keeps for itself.
func (h *host) routeOf(call *taskwire.ToolCall) (*route, *taskwire.Outcome) {
	r, ok := h.g.route(call.Name)
	if !ok && h.g.gatewayTool(call.Name) {
		return nil, &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidParams,
			fmt.Sprintf("unknown tool %q: taskgate keeps it for itself, to look up, fetch, price and cancel operations under its own credential, so no client may call it; "+
				"a task's status and result come from tasks/get, a cancellation from tasks/cancel, and an operator who wants it shared by every tenant can set expose: true on it", call.Name),
			map[string]any{"reason": ReasonToolReservedForGateway, "tool": call.Name})}
	}
	if !ok || !r.consequential() {
		return nil, &taskwire.Outcome{Pass: true}
	}
	return r, nil
}

// attempt is what carrying out one consequential call needs to know of
// it once identified.
type attempt struct {
	log    *slog.Logger
	call   *taskwire.ToolCall
	r      *route
	tenant string
	opID   string
	fp     string
	// args are the arguments sent upstream, without the operation ID and
	// the contract's key argument.
	args json.RawMessage
	// priced is what the call would start and its estimated total.
	priced policy.Route
	// requestID, source and runID record the attempt.
	requestID string
	source    string
	runID     string
}

func (a *attempt) tool() string { return a.r.upstream + "." + a.r.tool }

// denial is the record of the attempt refused before acceptance, with the
// operation ID and fingerprint known so far.
func (a *attempt) denial() *ledger.AttemptRecordParams {
	return &ledger.AttemptRecordParams{RequestID: a.requestID, Tenant: a.tenant, OperationID: a.opID, Fingerprint: a.fp, Source: a.source,
		RunID: a.runID, SessionID: a.call.Caller.SessionID}
}

// identify validates a consequential call and names it: its tenant, this
// attempt's request, its run, its operation ID and its fingerprint. A call
// it cannot name is refused (out) without consuming an operation ID.
func (h *host) identify(ctx context.Context, call *taskwire.ToolCall, r *route) (*attempt, *taskwire.Outcome, error) {
	g := h.g
	tenant := h.tenant(&call.Caller)
	if tenant == "" {
		return nil, &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidRequest, "this gateway needs an authenticated tenant for consequential tools", map[string]any{"reason": "unauthenticated"})}, nil
	}
	a := &attempt{call: call, r: r, tenant: tenant, requestID: ledger.NewRequestID(), source: "mcp/" + call.Caller.Era.String()}
	if call.Caller.ProtocolVersion != "" {
		a.source = "mcp/" + call.Caller.ProtocolVersion
	}
	log := g.log.With("tenant", tenant, "tool", call.Name, "request_id", a.requestID)
	a.log = log

	// Every attempt of this call, whatever becomes of it, records the run
	// and session it came with (no run when the run ID is refused).
	runID, runErr := runIDOf(&call.Caller)
	a.runID = runID
	args, opID, err := operationID(call, r)
	if err != nil {
		return nil, h.refuse(ctx, log, a.denial(), taskwire.ReasonInvalidArguments, err.Error(), inputErrorData(err)), nil
	}
	if opID != "" {
		// An ID outside the alphabet is refused before anything is kept
		// under it: it could steer a route or a display built from it.
		if err := ledger.CheckID("operation ID", opID); err != nil {
			return nil, h.refuse(ctx, log, a.denial(), ledger.ReasonInvalidOperationID, err.Error(), idErrorData(err)), nil
		}
	}
	a.opID, a.args = opID, args
	if runErr != nil {
		data := idErrorData(runErr)
		data["meta"] = MetaRunID
		return nil, h.refuse(ctx, log, a.denial(), ReasonInvalidRunID, runErr.Error(), data), nil
	}
	fp, err := canon.Compute(r.upstream, r.tool, args)
	if err != nil {
		return nil, h.refuse(ctx, log, a.denial(), taskwire.ReasonInvalidArguments, err.Error(), inputErrorData(err)), nil
	}
	a.fp = string(fp)
	if opID == "" {
		if opID, err = h.continuedOperation(ctx, call, fp); err != nil {
			log.Error("looking up the operation a call answers for", "err", err)
			return nil, &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInternalError, "the gateway could not look up the operation this call answers for; call again with the same arguments and answers",
				map[string]any{"reason": "ledger_unavailable"})}, nil
		}
	}
	if opID == "" {
		if w := r.policy.DeriveOperationID; w > 0 {
			window := g.clock().UTC().Truncate(w)
			opID = fmt.Sprintf("derived-%s-%d", fp[:32], window.Unix())
		} else {
			return nil, h.refuse(ctx, log, a.denial(), ledger.ReasonOperationIDRequired,
				fmt.Sprintf("%s has real-world cost or effects and needs an operation ID: add the argument %q with a unique value for this one piece of work (for example %q), and reuse exactly that value if you retry", call.Name, OperationIDArgument, "op-"+ledger.NewRequestID()[4:]),
				map[string]any{"argument": OperationIDArgument}), nil
		}
	}
	a.opID = opID
	a.log = log.With("operation_id", opID)
	if runID != "" {
		a.log = a.log.With("run_id", runID)
	}
	return a, nil, nil
}

// price sets what the call would start and cost, asked with the tenant's
// credential for its upstream. Where the upstream is down or has no
// credential for the tenant, a retry of an operation accepted before
// attaches to it, sending nothing, and keeps the route it was accepted
// with; a new one is refused (out).
func (h *host) price(ctx context.Context, a *attempt) (*taskwire.Outcome, error) {
	g, r := h.g, a.r
	up, ok := g.pool.Get(r.upstream)
	credentialMissing := false
	if ok {
		// Everything done for the call — the estimate here, the worker's
		// send, lookups and cancels — goes with the tenant's credential.
		tu, err := up.For(a.tenant)
		credentialMissing = err != nil
		up = tu
	}
	connected := ok && !credentialMissing && up.Connected()
	contractMissing := r.contract.Unavailable != ""
	if !connected || contractMissing {
		existing, err := g.store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: a.tenant, OperationID: a.opID})
		switch {
		case errors.Is(err, ledger.ErrNotFound) && contractMissing:
			return h.refuse(ctx, a.log, a.denial(), ledger.ReasonContractUnavailable,
				r.contract.Unavailable+"; the call was not accepted and nothing was started", nil), nil
		case errors.Is(err, ledger.ErrNotFound) && credentialMissing:
			return h.refuse(ctx, a.log, a.denial(), ledger.ReasonTenantCredentialMissing, tenantCredentialText(r.upstream, a.call.Name), nil), nil
		case errors.Is(err, ledger.ErrNotFound):
			return h.refuse(ctx, a.log, a.denial(), ledger.ReasonUpstreamUnavailable,
				fmt.Sprintf("upstream %s of %s is not connected, so the call was not accepted and nothing was started; retry with the same operation ID once it is back", r.upstream, a.call.Name), nil), nil
		case err != nil:
			return nil, fmt.Errorf("look up operation %s while its upstream is down, has no credential for the tenant or its contract is unavailable: %w", a.opID, err)
		case contractMissing:
			a.log.Info("the tool's declared contract is unavailable; the retry attaches to its operation, which keeps the contract it was accepted with", "state", existing.State)
		case credentialMissing:
			a.log.Info("the upstream has no credential for the tenant; the retry attaches to its operation, which sends nothing until it has one", "state", existing.State)
		default:
			a.log.Info("the upstream is down; the retry attaches to its operation, which dispatches when the upstream is back", "state", existing.State)
		}
	}
	a.priced = policy.Route{RemoteJobs: 1, Estimate: money.Zero(r.policy.Contract.Cost.Currency)}
	if !connected || contractMissing {
		return nil, nil
	}
	priced, err := r.contract.Route(ctx, worker.ProviderCaller(up), a.args)
	if err != nil {
		return h.refuse(ctx, a.log, a.denial(), ledger.ReasonEstimateUnavailable,
			"the call could not be priced before it runs, so it was not started: "+err.Error(), nil), nil
	}
	a.priced = priced
	return nil, nil
}

// accept decides the attempt in the ledger. Where the acceptance denies
// the call for want of an approval and the plan asks its client a form,
// the client is asked, and a call it approves is accepted again as a new
// attempt. It returns the request ID of the attempt decided last and the
// acceptance, or the answer when the call ends here (out).
func (h *host) accept(ctx context.Context, a *attempt, p *callPlan) (string, *ledger.AcceptResult, *taskwire.Outcome) {
	requestID := a.requestID
	res, err := h.acceptOnce(ctx, a, p, requestID)
	if err == nil {
		if way := p.formAsk(res.Decision, res.Reason); way != askNone {
			// The answer is an attempt of its own, recorded as the form's.
			q := *a
			q.requestID, q.source = ledger.NewRequestID(), "mcp/elicitation"
			out, asked, aerr := h.askApproval(ctx, &q, way)
			switch {
			case aerr != nil:
				a.log.Warn("asking for an approval failed; answering with how to approve", "err", aerr)
			case out != nil:
				return "", nil, out
			case asked:
				requestID = ledger.NewRequestID()
				res, err = h.acceptOnce(ctx, a, p, requestID)
			}
		}
	}
	if err != nil {
		// Usually nothing was recorded, but a commit whose answer was lost
		// may have been: the message promises only what holds either way.
		a.log.Error("acceptance failed", "err", err)
		h.g.metrics.errors.WithLabelValues("acceptance_failed").Inc()
		return "", nil, &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInternalError, "the gateway could not confirm that it recorded this call; retry with the same operation ID: if the call was recorded, the retry attaches to it, so nothing runs twice", map[string]any{"reason": "ledger_unavailable"})}
	}
	crashpoint.Reach(crashpoint.AfterAcceptCommit)
	h.g.metrics.decisions.WithLabelValues(string(res.Decision), res.Reason).Inc()
	a.log.Info("attempt decided", "decision", res.Decision, "reason", res.Reason)
	return requestID, res, nil
}

// acceptOnce runs one acceptance of the call as attempt requestID, with
// what its plan requires.
func (h *host) acceptOnce(ctx context.Context, a *attempt, p *callPlan, requestID string) (*ledger.AcceptResult, error) {
	g, r := h.g, a.r
	if g.limits != nil {
		// The tenant's other acceptances go first: one with many calls
		// at once does not fill the ledger's commits ahead of another's.
		release, err := g.limits.Accept(ctx, a.tenant)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	// The attempt is the request's span; acceptance is a step within it.
	parent, attempt := telemetry.Parent(ctx), ctx
	ctx, span := g.tracing.StartStep(ctx, "taskgate.accept", nil, telemetry.AttrOperationID.String(a.opID), telemetry.AttrTenant.String(a.tenant))
	defer span.End()
	res, err := g.store.Accept(context.WithoutCancel(ctx), &ledger.AcceptParams{
		Tenant: a.tenant, OperationID: a.opID, Upstream: r.upstream, Tool: r.tool,
		Fingerprint: a.fp, Arguments: a.args, KeyArgument: keyArgument(r), RequestID: requestID, TaskID: ledger.NewTaskID(),
		Source: a.source, RunID: a.runID, SessionID: a.call.Caller.SessionID,
		RetryPolicy: r.policy.RetryPolicy, TTL: g.config().TaskTTL, Priced: r.contract.Priced(),
		SecretArguments: r.policy.SecretArguments,
		// A declared contract is kept with the operation, which runs under
		// it whatever the provider declares later.
		Contract:     r.contract.Declaration,
		InputChannel: p.Channel,
		Approval: ledger.ApprovalRequirement{Required: p.ApprovalRequired, Estimate: a.priced.Estimate, RemoteJobs: a.priced.RemoteJobs,
			Request: p.Request, NoBudgets: !p.Budgets, RequestTTL: g.config().ApprovalRequestTTL, RequestedBy: authn.CredentialID(a.call.Caller.TokenInfo)},
		Enqueue:     worker.Dispatch,
		QueueLease:  g.config().Worker.Lease,
		TraceParent: parent,
	})
	if err != nil {
		telemetry.Fail(span, "ledger_unavailable", 0)
		return nil, err
	}
	span.SetAttributes(telemetry.AttrDecision.String(string(res.Decision)))
	traceAttempt(attempt, a.tenant, a.opID, res.Decision)
	return res, nil
}

// refusal answers a call whose acceptance gives it no operation to go on
// with: a conflict, a denial, or an attachment to a cancelled operation;
// nil for any other.
func (h *host) refusal(ctx context.Context, a *attempt, p *callPlan, requestID string, res *ledger.AcceptResult) *taskwire.Outcome {
	switch res.Decision {
	case ledger.DecisionConflict:
		h.delivered(ctx, requestID)
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidParams, res.Message,
			map[string]any{"reason": res.Reason, "operation_id": a.opID})}
	case ledger.DecisionDenied:
		h.delivered(ctx, requestID)
		data := map[string]any{"reason": res.Reason, "operation_id": a.opID, "tool": a.tool()}
		if res.Reason == ledger.ReasonApprovalRequired || res.Reason == ledger.ReasonApprovalExpired {
			data["how_to_approve"] = howToApprove(a)
		}
		if req := res.Request; req != nil {
			data["approval_request"] = pendingRequest(req)
		}
		if p.Answer == answerIgnore && p.Ignored.told() {
			data["answer_ignored"] = p.IgnoredWhy
		}
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidParams, res.Message, data)}
	}
	if op := res.Operation; res.Decision == ledger.DecisionAttached && op.State == ledger.StateCancelled {
		h.delivered(ctx, requestID)
		return &taskwire.Outcome{Err: cancelledOperation(op)}
	}
	return nil
}

// respond answers the accepted call as its plan says: with its task, or
// the first question before it; or, for a client without tasks, with what
// comes of the operation within its wait.
func (h *host) respond(ctx context.Context, a *attempt, p *callPlan, op *ledger.Operation, requestID string) (*taskwire.Outcome, error) {
	step := p.replyFor(op.TaskID)
	if step == replyAwait || step == replyAwaitOrAsk {
		return h.await(ctx, a.log, op, requestID, step == replyAwaitOrAsk, p.Wait)
	}
	out := &taskwire.Outcome{Task: h.task(op)}
	if step == replyQuestionFirst {
		q, err := h.questionBeforeTask(ctx, op, p.QuestionWait)
		if err != nil {
			return nil, err
		}
		if q != nil {
			a.log.Info("the upstream's first question goes to the client in the call's result, before its task")
			out = q
		}
	}
	h.finishAttempt(ctx, a.log, requestID)
	return out, nil
}

// ReasonOperationCancelled answers a call that attaches to an operation
// that was cancelled: it will not run again under its operation ID.
const ReasonOperationCancelled = "operation_cancelled"

// cancelledOperation answers a call of op, which was cancelled. Its
// message alone tells a model what happened and what to do, since some
// clients show a model nothing of an error but its message.
func cancelledOperation(op *ledger.Operation) *jsonrpc.Error {
	return rpcError(jsonrpc.CodeInvalidParams, fmt.Sprintf(
		"Operation %q was cancelled (%s). This call started nothing, and calling again with operation_id %q only repeats this answer: "+
			"to run this or any other work now, call again with a new operation_id.",
		op.OperationID, statusOr(op.StatusMessage, "cancelled by request"), op.OperationID),
		map[string]any{"reason": ReasonOperationCancelled, "operation_id": op.OperationID, "task_id": op.TaskID, "status": string(op.State)})
}

// questionBeforeTask waits, up to wait (the tool's input_before_task),
// for the first send of a call from a client that takes tasks to come
// back, and returns the question it asks in the call's result, as a tool
// that gathers input before it runs as a task answers (SEP-2663): the call
// with the answer then gets the task. It returns nil, for the call to get
// its task, when the send comes back with anything but a first question
// of elicitations.
func (h *host) questionBeforeTask(ctx context.Context, op *ledger.Operation, wait time.Duration) (*taskwire.Outcome, error) {
	cur, err := h.waitFor(ctx, op, wait, func(o *ledger.Operation) bool {
		return o.State != ledger.StateAccepted && o.State != ledger.StateSending
	})
	if err != nil || cur.State != ledger.StateInputRequired || cur.SendCount > 1 {
		return nil, err
	}
	return questionOutcome(cur)
}

// await serves a client without tasks: it blocks until the operation ends,
// wait elapses or the gateway shuts down, then answers what is known. A
// client that can be asked in the result (askable) is answered as soon as
// the operation waits on a question, with that question.
func (h *host) await(ctx context.Context, log *slog.Logger, op *ledger.Operation, requestID string, askable bool, wait time.Duration) (*taskwire.Outcome, error) {
	final, err := h.waitFor(ctx, op, wait, endsOrAsks(askable))
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil && h.g.stopping.Err() == nil {
		h.record(log, requestID, ledger.ClientDisconnected)
		return nil, ctx.Err()
	}
	if askable && final.State == ledger.StateInputRequired {
		out, err := questionOutcome(final)
		if err != nil {
			return nil, err
		}
		if out != nil {
			log.Info("the upstream's question goes to the client in the call's result")
			h.finishAttempt(ctx, log, requestID)
			return out, nil
		}
	}
	if !final.State.Terminal() {
		h.record(log, requestID, ledger.ClientTimedOut)
		retry := h.g.config().PollInterval.Milliseconds()
		return &taskwire.Outcome{Result: &mcp.CallToolResult{
			IsError: true,
			Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
				"Operation %q is still running (%s). Nothing new was started. Call this tool again with the same operation_id %q to get its result; do not use a new operation_id.",
				op.OperationID, statusOr(final.StatusMessage, string(final.State)), op.OperationID)}},
			StructuredContent: map[string]any{"operation_id": op.OperationID, "task_id": op.TaskID, "status": "working", "retry_after_ms": retry},
		}}, nil
	}
	out, err := outcomeOf(final)
	if err != nil {
		return nil, err
	}
	h.finishAttempt(ctx, log, requestID)
	return out, nil
}

// outcomeOf is a terminal operation's answer to a client without tasks.
func outcomeOf(op *ledger.Operation) (*taskwire.Outcome, error) {
	switch op.State {
	case ledger.StateCompleted:
		var res mcp.CallToolResult
		if err := json.Unmarshal(op.Result, &res); err != nil {
			return nil, fmt.Errorf("stored result of operation %q is unreadable: %w", op.OperationID, err)
		}
		return &taskwire.Outcome{Result: &res}, nil
	case ledger.StateFailed:
		var e jsonrpc.Error
		if len(op.Error) == 0 || json.Unmarshal(op.Error, &e) != nil {
			e = jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: statusOr(op.StatusMessage, "the operation failed")}
		}
		return &taskwire.Outcome{Err: &e}, nil
	default:
		return &taskwire.Outcome{Result: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: fmt.Sprintf("Operation %q was cancelled.", op.OperationID)}}}}, nil
	}
}

// endsOrAsks is waitFor's done for a caller waiting on op's end, and,
// when askable, on a question it can be asked.
func endsOrAsks(askable bool) func(*ledger.Operation) bool {
	return func(op *ledger.Operation) bool {
		return op.State.Terminal() || askable && op.State == ledger.StateInputRequired
	}
}

// waitFor polls the ledger until done holds for op, d elapses or ctx
// ends, and returns op as last read. It polls soon at first, when a quick
// operation may be about to move, then backs off to the advertised poll
// interval.
func (h *host) waitFor(ctx context.Context, op *ledger.Operation, d time.Duration, done func(*ledger.Operation) bool) (*ledger.Operation, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	pause := firstPoll
	longest := max(h.g.config().PollInterval, firstPoll)
	for {
		cur, err := h.g.store.OperationGet(context.WithoutCancel(ctx), &ledger.OperationGetParams{ID: op.ID})
		if err != nil {
			return nil, err
		}
		if done(cur) {
			return cur, nil
		}
		next := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			next.Stop()
			return cur, nil
		case <-deadline.C:
			next.Stop()
			return cur, nil
		case <-next.C:
		}
		pause = min(2*pause, longest)
	}
}

// firstPoll is the first pause of waitFor.
const firstPoll = 100 * time.Millisecond

// refuse records the attempt rec describes as denied before acceptance,
// for reason, and answers it. The operation ID is not consumed.
func (h *host) refuse(ctx context.Context, log *slog.Logger, rec *ledger.AttemptRecordParams, reason, msg string, data map[string]any) *taskwire.Outcome {
	rec.Decision, rec.Reason = ledger.DecisionDenied, reason
	rec.TraceParent = telemetry.Parent(ctx)
	traceAttempt(ctx, rec.Tenant, rec.OperationID, ledger.DecisionDenied)
	if _, err := h.g.store.AttemptRecord(context.WithoutCancel(ctx), rec); err != nil {
		log.Error("record a refused attempt", "err", err)
	}
	h.g.metrics.decisions.WithLabelValues(string(ledger.DecisionDenied), reason).Inc()
	log.Info("attempt refused", "reason", reason)
	if data == nil {
		data = map[string]any{}
	}
	data["reason"] = reason
	if rec.OperationID != "" {
		data["operation_id"] = rec.OperationID
	}
	h.delivered(ctx, rec.RequestID)
	return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidParams, msg, data)}
}

// finishAttempt records whether the client was still there to be answered.
// Over HTTP the request's delivery knows; otherwise a context that ended
// before the gateway began shutting down means the client left.
func (h *host) finishAttempt(ctx context.Context, log *slog.Logger, requestID string) {
	if deliveryFrom(ctx) == nil && ctx.Err() != nil && h.g.stopping.Err() == nil {
		h.record(log, requestID, ledger.ClientDisconnected)
		return
	}
	h.delivered(ctx, requestID)
}

func (h *host) delivered(ctx context.Context, requestID string) {
	if d := deliveryFrom(ctx); d != nil {
		// The HTTP layer knows whether the response was written; once its
		// request is over it has said so already.
		if r := d.add(requestID); r != "" {
			h.record(h.g.log, requestID, r)
		}
		return
	}
	h.record(h.g.log, requestID, ledger.ClientDelivered)
}

func (h *host) record(log *slog.Logger, requestID string, r ledger.ClientResult) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.g.store.AttemptSetClientResult(ctx, requestID, r); err != nil {
		log.Warn("record client result", "client_result", r, "err", err)
	}
}

// operationID takes the operation ID from its three sources, in order:
// params.idempotencyKey, _meta["dev.taskgate/operation-id"], and the
// operation_id argument, which is stripped from the arguments either way,
// as is the provider contract's key argument. Arguments that carry either
// are checked as they came before it is stripped: stripping decodes and
// encodes them, which would merge duplicate keys and replace invalid UTF-8
// that canon must refuse.
func operationID(call *taskwire.ToolCall, r *route) (json.RawMessage, string, error) {
	args := call.Arguments
	var fromArg string
	if len(args) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, "", fmt.Errorf("tool arguments must be a JSON object: %w", err)
		}
		raw, hasID := m[OperationIDArgument]
		key := keyArgument(r)
		_, hasKey := m[key]
		hasKey = hasKey && key != ""
		if hasID || hasKey {
			if _, err := canon.Compute(r.upstream, r.tool, args); err != nil {
				return nil, "", err
			}
		}
		if hasID {
			if err := json.Unmarshal(raw, &fromArg); err != nil {
				return nil, "", fmt.Errorf("argument %q must be a string", OperationIDArgument)
			}
			delete(m, OperationIDArgument)
		}
		// A value in the contract's key argument is the client's guess at
		// taskgate's key: it is discarded, and neither reaches the
		// provider nor counts in the fingerprint.
		if hasKey {
			delete(m, key)
		}
		if hasID || hasKey {
			b, err := json.Marshal(m)
			if err != nil {
				return nil, "", err
			}
			args = b
		}
	}
	id := call.Caller.IdempotencyKey
	if id == "" {
		id, _ = call.Caller.Meta[MetaOperationID].(string)
	}
	if id == "" {
		id = fromArg
	}
	return args, id, nil
}

// idErrorData names, for the client, the character [ledger.CheckID]
// refused and its byte offset.
func idErrorData(err error) map[string]any {
	data := map[string]any{}
	var ie *ledger.IDError
	if errors.As(err, &ie) && ie.Offset >= 0 {
		data["position"] = ie.Offset
		data["character"] = ie.Char
	}
	return data
}

// MetaRunID is the _meta key of a tools/call that names the agent run the
// call belongs to: every attempt records it, and a review packet selects
// a run's operations by it.
const MetaRunID = "dev.taskgate/run-id"

// ReasonInvalidRunID refuses a call whose _meta run ID is not a string
// [ledger.CheckID] allows; nothing is recorded under it and nothing starts.
const ReasonInvalidRunID = "invalid_run_id"

// runIDOf reads the call's run ID from _meta; empty when it names none. A
// run ID is shown in review packets, logs and pull-request comments and
// selects a run on the command line, so one outside the alphabet of
// operation IDs is refused rather than changed: a changed ID would
// silently split the run.
func runIDOf(c *taskwire.Caller) (string, error) {
	v, ok := c.Meta[MetaRunID]
	if !ok || v == nil {
		return "", nil
	}
	id, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("_meta %q must be a string naming the agent run, such as \"ci-4711\"", MetaRunID)
	}
	if err := ledger.CheckID("run ID", id); err != nil {
		return "", fmt.Errorf("_meta %q: %w", MetaRunID, err)
	}
	return id, nil
}

// inputErrorData names where canon found bad input, for the client.
func inputErrorData(err error) map[string]any {
	data := map[string]any{}
	var ie *canon.InputError
	if errors.As(err, &ie) {
		data["path"] = ie.Path
	}
	return data
}

// task is an operation as a task.
func (h *host) task(op *ledger.Operation) *taskwire.Task {
	t := &taskwire.Task{
		ID: op.TaskID, Status: taskwire.Status(op.State.TaskStatus()), StatusMessage: op.StatusMessage,
		CreatedAt: op.CreatedAt, LastUpdatedAt: op.UpdatedAt, PollInterval: h.g.config().PollInterval,
	}
	t.TTL = taskTTL(op)
	if op.State == ledger.StateReview {
		t.StatusMessage = "waiting for a human to resolve it (" + op.ReviewReason + "): " + op.StatusMessage
	}
	switch op.State {
	case ledger.StateInputRequired:
		q, err := questions(op)
		if err != nil {
			h.g.log.Error("reading an operation's question", "operation_id", op.OperationID, "err", err)
		}
		t.InputRequests = q
	case ledger.StateCompleted:
		t.Result = op.Result
	case ledger.StateFailed:
		var e jsonrpc.Error
		if json.Unmarshal(op.Error, &e) == nil && e.Message != "" {
			t.Error = &e
		} else {
			t.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: statusOr(op.StatusMessage, "the operation failed")}
		}
	}
	return t
}

// taskTTL is the ttl the wire shows of op's task, counted from creation;
// nil for unlimited. A task is kept TTL after it ends and never expires
// while it runs, so until it ends its retention is unlimited: a number
// counted from now would grow on every tasks/get, and one counted from
// creation would tell a client that uses createdAt + ttl as a backstop to
// give up on a task that is still running. Once it ends, the number is
// fixed.
func taskTTL(op *ledger.Operation) *time.Duration {
	if op.TTL <= 0 || !op.State.Terminal() {
		return nil
	}
	ttl := (max(retainedFrom(op).Sub(op.CreatedAt), 0) + op.TTL).Truncate(time.Millisecond)
	return &ttl
}

// load finds the caller's task; another tenant's is answered exactly like
// an unknown one.
func (h *host) load(ctx context.Context, c *taskwire.Caller, taskID string) (*ledger.Operation, error) {
	tenant := h.tenant(c)
	if tenant == "" {
		return nil, taskwire.ErrTaskNotFound
	}
	op, err := h.g.store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, TaskID: taskID})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, taskwire.ErrTaskNotFound
	}
	if err != nil {
		return nil, err
	}
	if op.TTL > 0 && op.State.Terminal() && h.g.clock().After(retainedFrom(op).Add(op.TTL)) {
		return nil, taskwire.ErrTaskExpired
	}
	return op, nil
}

// retainedFrom is when an operation's retention starts counting: when it
// ended, or (for a row that names no end) when it was created. An operation
// that has not ended never expires: its task stays reachable however long
// it runs.
func retainedFrom(op *ledger.Operation) time.Time {
	if op.EndedAt.After(op.CreatedAt) {
		return op.EndedAt
	}
	return op.CreatedAt
}

// GetTask implements taskwire.Host.
func (h *host) GetTask(ctx context.Context, c *taskwire.Caller, taskID string) (*taskwire.Task, error) {
	op, err := h.load(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	return h.task(op), nil
}

// CancelTask implements taskwire.Host. Cancellation is recorded as its own
// event and carried to the provider by the worker; an operation that has
// not ended becomes cancelled at once (the legacy era requires it before
// the answer), while the provider's answer says whether the effect was
// reversed. A task is cancelled once: a client that asks again (Claude
// Code asks twice) gets the task as the first request left it. Under the
// tool's client_cancel: before_send, a cancel after the send is recorded
// and the operation goes on (keptCancel).
func (h *host) CancelTask(ctx context.Context, c *taskwire.Caller, taskID string) (*taskwire.Task, error) {
	ctx = context.WithoutCancel(ctx)
	op, err := h.load(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	for range 3 {
		if !op.CancelRequestedAt.IsZero() {
			return h.task(op), nil
		}
		policy := h.clientCancel(op)
		next, err := h.g.store.Transition(ctx, cancelTransition(op, c.Era, policy))
		switch {
		case err == nil:
			log := h.g.log.With("tenant", next.Tenant, "operation_id", next.OperationID, "state", next.State)
			if policy.Keeps(op) {
				log.Info("cancellation requested; the tool's policy keeps the job that was sent", "client_cancel", policy)
				return h.keptCancel(c, next)
			}
			log.Info("cancellation requested")
			return h.task(next), nil
		case errors.Is(err, ledger.ErrCancelRequested):
			// Another request was recorded between the read and the
			// change: this one gets the answer that one left.
			if op, err = h.g.store.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID}); err != nil {
				return nil, err
			}
			if op.CancelRequestedAt.IsZero() {
				return h.keptCancel(c, op)
			}
			return h.task(op), nil
		case errors.Is(err, ledger.ErrStateChanged):
			// It moved on between the read and the change: decide again
			// on what it is now.
			if op, err = h.g.store.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID}); err != nil {
				return nil, err
			}
		default:
			return nil, err
		}
	}
	return nil, fmt.Errorf("operation %s kept changing while its cancellation was recorded; ask again", op.OperationID)
}

// clientCancel is the client_cancel policy of op's tool as configured
// now; honour for a tool the configuration no longer has.
func (h *host) clientCancel(op *ledger.Operation) ledger.ClientCancel {
	if u := h.g.catalog.Upstream(op.Upstream); u != nil {
		if t := u.Tools[op.Tool]; t != nil && t.ClientCancel != "" {
			return t.ClientCancel
		}
	}
	return ledger.ClientCancelHonour
}

// ReasonCancelKeptByPolicy answers a 2025-11-25 tasks/cancel that the
// tool's client_cancel policy keeps from cancelling a call already sent.
const ReasonCancelKeptByPolicy = "cancel_kept_by_policy"

// keptCancel answers a cancel that op's policy kept from cancelling it. A
// 2026-07-28 client gets the acknowledgement the extension requires (the
// task may end other than cancelled; its status message says why). The
// 2025-11-25 spec requires a task that a cancel answers to be cancelled,
// and this one goes on: its client is told so with an error instead.
func (h *host) keptCancel(c *taskwire.Caller, op *ledger.Operation) (*taskwire.Task, error) {
	if c.Era != taskwire.EraLegacy || op.State.Terminal() {
		return h.task(op), nil
	}
	tool := op.Upstream + "." + op.Tool
	return nil, rpcError(jsonrpc.CodeInvalidParams, fmt.Sprintf(
		"Task %s was not cancelled: its call was already sent to the provider, and tool %s keeps a job once it is sent (client_cancel: %s), "+
			"so the job runs to its end and is reconciled. The request to cancel is recorded on operation %q and its receipt; the task's result comes from tasks/result.",
		op.TaskID, tool, ledger.ClientCancelBeforeSend, op.OperationID),
		map[string]any{"reason": ReasonCancelKeptByPolicy, "operation_id": op.OperationID, "task_id": op.TaskID, "client_cancel": string(ledger.ClientCancelBeforeSend)})
}

// cancelTransition records the first request to cancel op, made by a
// client of era under the tool's policy. Where the policy keeps op's
// work, only the request is recorded (and, while op runs, its status
// says so). Otherwise an operation that has not ended ends cancelled,
// with a status saying what is being done about it; one that ended keeps
// its end, and the request is recorded against it.
func cancelTransition(op *ledger.Operation, era taskwire.Era, policy ledger.ClientCancel) *ledger.TransitionParams {
	data := ledger.CancellationRequestedData{AfterEffect: op.State == ledger.StateCompleted, Era: era.String(), State: op.State}
	if policy.Keeps(op) {
		data.KeptBy = policy
		p := &ledger.TransitionParams{
			OperationRef: op.ID, CancelOnce: true,
			Events: []ledger.EventParams{{Kind: ledger.EventCancellationRequested, Data: data}},
		}
		if !op.State.Terminal() {
			// The guard keeps the status from outliving the state it
			// describes.
			p.From, p.StatusMessage = []ledger.State{op.State}, new(worker.KeptCancelStatus)
		}
		return p
	}
	p := &ledger.TransitionParams{
		OperationRef: op.ID, CancelRequested: true, CancelOnce: true,
		Events:  []ledger.EventParams{{Kind: ledger.EventCancellationRequested, Data: data}},
		Enqueue: []river.InsertManyParams{{Args: worker.CancelArgs{Operation: op.ID}}},
	}
	if op.State.Terminal() {
		return p
	}
	// The state guard makes "nothing was sent" hold when it commits: a
	// send that started meanwhile fails the change, which is decided again.
	p.From, p.To = []ledger.State{op.State}, ledger.StateCancelled
	p.StatusMessage = new(worker.CancelStatus(op.SendCount > 0, nil, false))
	if op.State == ledger.StateInputRequired {
		// The question dies with the task.
		p.Input = &ledger.InputUpdate{}
	}
	return p
}

// UpdateTask implements taskwire.Host: it records answers to the
// question the task waits on; any other responses are ignored, as the
// specification asks.
func (h *host) UpdateTask(ctx context.Context, c *taskwire.Caller, taskID string, responses map[string]json.RawMessage) error {
	op, err := h.load(ctx, c, taskID)
	if err != nil {
		return err
	}
	return h.answer(ctx, op, c.RequestID, responses)
}

// ListTasks implements taskwire.Host: only the caller's own tasks.
func (h *host) ListTasks(ctx context.Context, c *taskwire.Caller, cursor string) ([]*taskwire.Task, string, error) {
	tenant := h.tenant(c)
	if tenant == "" {
		return nil, "", nil
	}
	// The cursor is the last task ID of the previous page: it says
	// nothing a page did not, where a row ID would count every tenant's
	// operations, and another tenant's task is no cursor.
	var before int64
	if cursor != "" {
		op, err := h.g.store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, TaskID: cursor})
		if errors.Is(err, ledger.ErrNotFound) {
			return nil, "", taskwire.ErrInvalidCursor
		}
		if err != nil {
			return nil, "", err
		}
		before = op.ID
	}
	const page = 50
	ops, err := h.g.store.OperationList(ctx, &ledger.OperationListParams{Tenant: tenant, Limit: page, BeforeID: before})
	if err != nil {
		return nil, "", err
	}
	tasks := make([]*taskwire.Task, len(ops))
	for i, op := range ops {
		tasks[i] = h.task(op)
	}
	next := ""
	if len(ops) == page {
		next = ops[len(ops)-1].TaskID
	}
	return tasks, next, nil
}

// WaitTask implements taskwire.Host (the legacy blocking tasks/result). The
// wait ends with the HTTP request that asked, and when the gateway shuts
// down, which the client is told, so that it asks again.
func (h *host) WaitTask(ctx context.Context, c *taskwire.Caller, taskID string) (*taskwire.Task, error) {
	ctx, cancel := h.g.requestContext(ctx, c.Header)
	defer cancel()
	op, err := h.load(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	for !op.State.Terminal() {
		if op.State == ledger.StateInputRequired && c.Elicit != nil {
			if err := h.askOnResult(ctx, c, op); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				h.g.log.Warn("asking the upstream's question on tasks/result", "operation_id", op.OperationID, "err", err)
				t := time.NewTimer(questionPause)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, ctx.Err()
				case <-t.C:
				}
			}
		}
		final, err := h.waitFor(ctx, op, time.Hour, endsOrAsks(c.Elicit != nil))
		if err != nil {
			return nil, err
		}
		if h.g.stopping.Err() != nil {
			return nil, rpcError(jsonrpc.CodeInternalError, "the gateway is shutting down; call tasks/result again, here or on another replica: the task goes on",
				map[string]any{"reason": "shutting_down", "task_id": taskID})
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		op = final
	}
	return h.task(op), nil
}

func statusOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ReasonToolReservedForGateway refuses a call of a tool that a provider
// contract calls (provider.GatewayTools): it belongs to the gateway.
const ReasonToolReservedForGateway = "tool_reserved_for_gateway"
