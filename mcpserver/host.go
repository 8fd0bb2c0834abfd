package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/taskwire"
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
// operation, accepted in one transaction before anything is answered.
func (h *host) CallTool(ctx context.Context, call *taskwire.ToolCall) (*taskwire.Outcome, error) {
	r, ok := h.g.route(call.Name)
	if !ok || !r.consequential() {
		return &taskwire.Outcome{Pass: true}, nil
	}
	g := h.g
	ctx = g.withDelivery(ctx, call.Caller.Header)
	tenant := h.tenant(&call.Caller)
	if tenant == "" {
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidRequest, "this gateway needs an authenticated tenant for consequential tools", map[string]any{"reason": "unauthenticated"})}, nil
	}
	requestID := ledger.NewRequestID()
	source := "mcp/" + call.Caller.Era.String()
	if call.Caller.ProtocolVersion != "" {
		source = "mcp/" + call.Caller.ProtocolVersion
	}
	log := g.log.With("tenant", tenant, "tool", call.Name, "request_id", requestID)

	args, opID, err := operationID(call)
	if err != nil {
		return h.refuse(ctx, log, tenant, opID, "", requestID, source, "invalid_arguments", err.Error(), nil), nil
	}
	fp, err := canon.Compute(r.upstream, r.tool, args)
	if err != nil {
		data := map[string]any{}
		var ie *canon.InputError
		if errors.As(err, &ie) {
			data["path"] = ie.Path
		}
		return h.refuse(ctx, log, tenant, opID, "", requestID, source, "invalid_arguments", err.Error(), data), nil
	}
	if opID == "" {
		if w := r.policy.DeriveOperationID; w > 0 {
			window := g.clock().UTC().Truncate(w)
			opID = fmt.Sprintf("derived-%s-%d", fp[:32], window.Unix())
		} else {
			return h.refuse(ctx, log, tenant, "", string(fp), requestID, source, ledger.ReasonOperationIDRequired,
				fmt.Sprintf("%s has real-world cost or effects and needs an operation ID: add the argument %q with a unique value for this one piece of work (for example %q), and reuse exactly that value if you retry", call.Name, OperationIDArgument, "op-"+ledger.NewRequestID()[4:]),
				map[string]any{"argument": OperationIDArgument}), nil
		}
	}
	log = log.With("operation_id", opID)

	estimate := money.Zero(r.policy.Contract.Cost.Currency)
	if e := r.policy.Contract.Cost; e.Estimate != nil || e.EstimateTool != nil {
		up, ok := g.pool.Get(r.upstream)
		if ok {
			var perr error
			estimate, perr = r.contract.Estimate(ctx, worker.ProviderCaller(up), args)
			if perr != nil {
				return h.refuse(ctx, log, tenant, opID, string(fp), requestID, source, "estimate_unavailable",
					"the call could not be priced before it runs, so it was not started: "+perr.Error(), nil), nil
			}
		}
	}

	// A 2026-07-28 client answering the approval question asked earlier.
	if answer, ok := call.InputResponses[approvalInput].(*mcp.ElicitResult); ok && r.policy.Approval == "required" {
		if out := h.approveFromAnswer(ctx, log, answer, r, tenant, opID, string(fp), requestID, source); out != nil {
			return out, nil
		}
	}
	accept := func(requestID string) (*ledger.AcceptResult, error) {
		return g.store.Accept(context.WithoutCancel(ctx), &ledger.AcceptParams{
			Tenant: tenant, OperationID: opID, Upstream: r.upstream, Tool: r.tool,
			Fingerprint: string(fp), Arguments: args, RequestID: requestID, TaskID: ledger.NewTaskID(),
			Source: source, RetryPolicy: r.policy.RetryPolicy, TTL: g.cfg.TaskTTL, Priced: r.contract.Priced(),
			SecretArguments: r.policy.SecretArguments,
			Approval:        ledger.ApprovalRequirement{Required: r.policy.Approval == "required", Estimate: estimate},
			Jobs:            worker.Dispatch,
			QueueLease:      g.cfg.Worker.Lease,
		})
	}
	res, err := accept(requestID)
	if err == nil && res.Decision == ledger.DecisionDenied && res.Reason == ledger.ReasonApprovalRequired {
		// Ask the user in the protocol, where the client can show a form.
		out, asked, aerr := h.askApproval(ctx, log, call, r, tenant, opID, estimate)
		switch {
		case aerr != nil:
			log.Warn("asking for an approval failed; answering with how to approve", "err", aerr)
		case out != nil:
			return out, nil
		case asked:
			requestID = ledger.NewRequestID()
			res, err = accept(requestID)
		}
	}
	if err != nil {
		log.Error("acceptance failed", "err", err)
		g.metrics.errors.WithLabelValues("acceptance_failed").Inc()
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInternalError, "the gateway could not record this call; nothing was started; retry with the same operation ID", map[string]any{"reason": "ledger_unavailable"})}, nil
	}
	crashpoint.Reach(crashpoint.AfterAcceptCommit)
	g.metrics.decisions.WithLabelValues(string(res.Decision), res.Reason).Inc()
	log.Info("attempt decided", "decision", res.Decision, "reason", res.Reason)

	switch res.Decision {
	case ledger.DecisionConflict:
		h.delivered(ctx, requestID)
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidParams, res.Message,
			map[string]any{"reason": res.Reason, "operation_id": opID})}, nil
	case ledger.DecisionDenied:
		h.delivered(ctx, requestID)
		data := map[string]any{"reason": res.Reason, "operation_id": opID, "tool": r.upstream + "." + r.tool}
		if res.Reason == ledger.ReasonApprovalRequired || res.Reason == ledger.ReasonApprovalExpired {
			data["how_to_approve"] = fmt.Sprintf("taskgate approve --tenant %s --operation-id %s --tool %s.%s --max-cost %s --max-remote-jobs 1 --expires-in 24h",
				tenant, opID, r.upstream, r.tool, estimate)
		}
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidParams, res.Message, data)}, nil
	}

	op := res.Operation
	if call.Caller.Era != taskwire.EraNone {
		out := &taskwire.Outcome{Task: h.task(op)}
		h.finishAttempt(ctx, log, requestID)
		return out, nil
	}
	return h.await(ctx, log, r, op, requestID)
}

// approvalInput names taskgate's approval question among input requests.
const approvalInput = "taskgate_approval"

// approvalQuestion is the form that asks the user for an approval.
func approvalQuestion(r *route, opID string, estimate money.Amount) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode: "form",
		Message: fmt.Sprintf("Approve %s.%s for operation %q? It costs money or changes the world outside this session; estimated %s. "+
			"Set the most it may cost in total and how many remote jobs it may start. Declining starts nothing.",
			r.upstream, r.tool, opID, estimate.Display()),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"max_total_cost_usd": map[string]any{"type": "string", "title": "Spend ceiling (" + estimate.Currency + ")", "default": estimate.String()},
				"max_remote_jobs":    map[string]any{"type": "integer", "title": "Remote jobs", "default": 1, "minimum": 1},
			},
			"required": []string{"max_total_cost_usd"},
		},
	}
}

// askApproval asks for a missing approval where the client can be asked:
// synchronously on a 2025-11-25 session (asked reports that an approval
// now exists), or by answering a 2026-07-28 client with an input_required
// result (out). Neither is possible: nil, false, nil.
func (h *host) askApproval(ctx context.Context, log *slog.Logger, call *taskwire.ToolCall, r *route, tenant, opID string, estimate money.Amount) (*taskwire.Outcome, bool, error) {
	q := approvalQuestion(r, opID, estimate)
	switch {
	case call.Caller.Elicit != nil:
		answer, err := call.Caller.Elicit(ctx, q)
		if err != nil {
			return nil, false, err
		}
		if out := h.approveFromAnswer(ctx, log, answer, r, tenant, opID, "", ledger.NewRequestID(), "mcp/elicitation"); out != nil {
			return out, false, nil
		}
		return nil, true, nil
	case clientElicits(call.Caller.Meta):
		return &taskwire.Outcome{Result: &mcp.CallToolResult{
			Content:       []mcp.Content{&mcp.TextContent{Text: "This call needs the user's approval before it starts."}},
			InputRequests: mcp.InputRequestMap{approvalInput: q},
			RequestState:  "taskgate-approval",
		}}, false, nil
	}
	return nil, false, nil
}

// clientElicits reports whether a 2026-07-28 request declares elicitation
// among its per-request client capabilities.
func clientElicits(meta map[string]any) bool {
	caps, _ := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any)
	_, ok := caps["elicitation"]
	return ok
}

// approveFromAnswer turns the user's answer into an approval. It returns
// nil when the approval was created, or the refusal to send otherwise.
func (h *host) approveFromAnswer(ctx context.Context, log *slog.Logger, answer *mcp.ElicitResult, r *route, tenant, opID, fp, requestID, source string) *taskwire.Outcome {
	if answer == nil || answer.Action != "accept" {
		action := "no answer"
		if answer != nil {
			action = answer.Action
		}
		return h.refuse(ctx, log, tenant, opID, fp, requestID, source, "approval_declined",
			fmt.Sprintf("the user did not approve this call (%s); nothing was started", action), nil)
	}
	ceiling, err := money.Parse(numberText(answer.Content["max_total_cost_usd"]), r.policy.Contract.Cost.Currency)
	jobs := 1
	if v, ok := answer.Content["max_remote_jobs"].(float64); ok && v >= 1 && v == float64(int(v)) {
		jobs = int(v)
	}
	if err != nil || ceiling.Micros <= 0 {
		return h.refuse(ctx, log, tenant, opID, fp, requestID, source, "approval_invalid",
			"the approval's spend ceiling must be a positive decimal such as 20.00; nothing was started", nil)
	}
	a, err := h.g.store.ApprovalCreate(context.WithoutCancel(ctx), &ledger.Approval{
		Tenant: tenant, OperationID: opID, Tool: r.upstream + "." + r.tool, MaxTotalCost: ceiling, MaxRemoteJobs: jobs,
		RetryPolicy: r.policy.RetryPolicy, ExpiresAt: h.g.clock().Add(24 * time.Hour), CreatedBy: "elicitation",
	})
	if err != nil {
		return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInternalError, "the approval could not be recorded; nothing was started", map[string]any{"reason": "ledger_unavailable"})}
	}
	log.Info("approval given through elicitation", "approval", a.ID, "max_total_cost", ceiling.String(), "max_remote_jobs", jobs)
	return nil
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

// await serves a client without tasks: it blocks until the operation ends
// or the configured wait elapses, then answers what is known.
func (h *host) await(ctx context.Context, log *slog.Logger, r *route, op *ledger.Operation, requestID string) (*taskwire.Outcome, error) {
	wait := h.g.cfg.Wait
	if r.policy.Wait > 0 {
		wait = r.policy.Wait
	}
	final, err := h.waitFor(ctx, op, wait)
	if ctx.Err() != nil {
		h.record(log, requestID, ledger.ClientDisconnected)
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if !final.State.Terminal() {
		h.record(log, requestID, ledger.ClientTimedOut)
		retry := h.g.cfg.PollInterval.Milliseconds()
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

// waitFor polls the ledger until op ends, d elapses or ctx ends.
func (h *host) waitFor(ctx context.Context, op *ledger.Operation, d time.Duration) (*ledger.Operation, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		cur, err := h.g.store.OperationGet(context.WithoutCancel(ctx), &ledger.OperationGetParams{ID: op.ID})
		if err != nil {
			return nil, err
		}
		if cur.State.Terminal() {
			return cur, nil
		}
		select {
		case <-ctx.Done():
			return cur, nil
		case <-deadline.C:
			return cur, nil
		case <-tick.C:
		}
	}
}

// refuse records an attempt denied before acceptance and answers it. The
// operation ID is not consumed.
func (h *host) refuse(ctx context.Context, log *slog.Logger, tenant, opID, fp, requestID, source, reason, msg string, data map[string]any) *taskwire.Outcome {
	if _, err := h.g.store.AttemptRecord(context.WithoutCancel(ctx), &ledger.AttemptRecordParams{
		RequestID: requestID, Tenant: tenant, OperationID: opID, Fingerprint: fp,
		Decision: ledger.DecisionDenied, Reason: reason, Source: source,
	}); err != nil {
		log.Error("record a refused attempt", "err", err)
	}
	h.g.metrics.decisions.WithLabelValues(string(ledger.DecisionDenied), reason).Inc()
	log.Info("attempt refused", "reason", reason)
	if data == nil {
		data = map[string]any{}
	}
	data["reason"] = reason
	if opID != "" {
		data["operation_id"] = opID
	}
	h.delivered(ctx, requestID)
	return &taskwire.Outcome{Err: rpcError(jsonrpc.CodeInvalidParams, msg, data)}
}

// finishAttempt records whether the client was still there to be answered.
func (h *host) finishAttempt(ctx context.Context, log *slog.Logger, requestID string) {
	if ctx.Err() != nil {
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
// operation_id argument, which is stripped from the arguments either way.
func operationID(call *taskwire.ToolCall) (json.RawMessage, string, error) {
	args := call.Arguments
	var fromArg string
	if len(args) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, "", fmt.Errorf("tool arguments must be a JSON object: %w", err)
		}
		if raw, ok := m[OperationIDArgument]; ok {
			if err := json.Unmarshal(raw, &fromArg); err != nil {
				return nil, "", fmt.Errorf("argument %q must be a string", OperationIDArgument)
			}
			delete(m, OperationIDArgument)
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
	if len(id) > 255 {
		return nil, "", fmt.Errorf("the operation ID is %d characters long; use at most 255", len(id))
	}
	return args, id, nil
}

// task is an operation as a task.
func (h *host) task(op *ledger.Operation) *taskwire.Task {
	t := &taskwire.Task{
		ID: op.TaskID, Status: taskwire.Status(op.State.TaskStatus()), StatusMessage: op.StatusMessage,
		CreatedAt: op.CreatedAt, LastUpdatedAt: op.UpdatedAt, PollInterval: h.g.cfg.PollInterval,
	}
	if op.TTL > 0 {
		ttl := op.TTL
		t.TTL = &ttl
	}
	if op.State == ledger.StateReview {
		t.StatusMessage = "waiting for a human to resolve it (" + op.ReviewReason + "): " + op.StatusMessage
	}
	switch op.State {
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
	if op.TTL > 0 && h.g.clock().After(op.CreatedAt.Add(op.TTL)) {
		return nil, taskwire.ErrTaskExpired
	}
	return op, nil
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
// reversed.
func (h *host) CancelTask(ctx context.Context, c *taskwire.Caller, taskID string) (*taskwire.Task, error) {
	op, err := h.load(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	p := &ledger.TransitionParams{
		OperationRef: op.ID, CancelRequested: true,
		Events: []ledger.EventParams{{Kind: ledger.EventCancellationRequested, Data: map[string]any{
			"era": c.Era.String(), "state": op.State, "after_effect": op.State == ledger.StateCompleted,
		}}},
		Jobs: []river.InsertManyParams{{Args: worker.CancelArgs{Operation: op.ID}}},
	}
	if !op.State.Terminal() {
		p.To = ledger.StateCancelled
		p.StatusMessage = ptr("cancelled by request; the provider is being asked to stop")
	}
	op, err = h.g.store.Transition(context.WithoutCancel(ctx), p)
	if err != nil {
		return nil, err
	}
	h.g.log.Info("cancellation requested", "tenant", op.Tenant, "operation_id", op.OperationID, "state", op.State)
	return h.task(op), nil
}

// UpdateTask implements taskwire.Host. taskgate's tasks never ask for
// input, so there is nothing outstanding to answer; responses are ignored
// as the specification asks.
func (h *host) UpdateTask(ctx context.Context, c *taskwire.Caller, taskID string, _ map[string]json.RawMessage) error {
	_, err := h.load(ctx, c, taskID)
	return err
}

// ListTasks implements taskwire.Host: only the caller's own tasks.
func (h *host) ListTasks(ctx context.Context, c *taskwire.Caller, cursor string) ([]*taskwire.Task, string, error) {
	tenant := h.tenant(c)
	if tenant == "" {
		return nil, "", nil
	}
	var before int64
	if cursor != "" {
		v, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || v <= 0 {
			return nil, "", taskwire.ErrInvalidCursor
		}
		before = v
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
		next = strconv.FormatInt(ops[len(ops)-1].ID, 10)
	}
	return tasks, next, nil
}

// WaitTask implements taskwire.Host (the legacy blocking tasks/result).
func (h *host) WaitTask(ctx context.Context, c *taskwire.Caller, taskID string) (*taskwire.Task, error) {
	op, err := h.load(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	for !op.State.Terminal() {
		final, err := h.waitFor(ctx, op, time.Hour)
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		op = final
	}
	return h.task(op), nil
}

func ptr[T any](v T) *T { return &v }

func statusOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
