package taskwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/canon"
)

// Options configures [Install].
type Options struct {
	// Logger receives Host failures that are answered with -32603.
	// If nil, nothing is logged.
	Logger *slog.Logger
}

// taskIDParams are the params of tasks/get, tasks/result, tasks/cancel and
// tasks/update.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// listParams are the params of tasks/list.
type listParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// legacyTaskCapability is capabilities.tasks of a 2025-11-25 server that
// lists, cancels and runs tools/call as tasks.
var legacyTaskCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// Install makes server speak MCP Tasks in both eras on behalf of host: it
// registers the tasks/* methods, a receiving middleware that routes
// tools/call through the Host and enforces the era rules (subscriptions/listen
// for task notifications included), and the capability
// advertisement (the extension in server/discover, capabilities.tasks in
// 2025-11-25 initialize results, execution.taskSupport in 2025-11-25
// tools/list results).
//
// Install the middleware before serving. Serve the server through
// [NewHTTPHandler] or [NewStdioTransport]: only they deliver params.task and
// params.idempotencyKey, which the go-sdk drops while parsing.
func Install(server *mcp.Server, host Host, opts *Options) error {
	if server == nil || host == nil {
		return errors.New("taskwire: Install needs a non-nil server and host")
	}
	s := &serverTasks{host: host, logger: slog.New(slog.DiscardHandler)}
	if opts != nil && opts.Logger != nil {
		s.logger = opts.Logger
	}
	for method, register := range map[string]func() error{
		methodTasksGet:    func() error { return mcp.AddReceivingCustomMethod(server, methodTasksGet, s.get) },
		methodTasksResult: func() error { return mcp.AddReceivingCustomMethod(server, methodTasksResult, s.result) },
		methodTasksList:   func() error { return mcp.AddReceivingCustomMethod(server, methodTasksList, s.list) },
		methodTasksCancel: func() error { return mcp.AddReceivingCustomMethod(server, methodTasksCancel, s.cancel) },
		methodTasksUpdate: func() error { return mcp.AddReceivingCustomMethod(server, methodTasksUpdate, s.update) },
	} {
		if err := register(); err != nil {
			return fmt.Errorf("taskwire: registering %s (the go-sdk may now implement tasks itself; check its release notes): %w", method, err)
		}
	}
	server.AddReceivingMiddleware(s.middleware)
	return nil
}

type serverTasks struct {
	host   Host
	logger *slog.Logger
}

type callerKey struct{}

// callerFrom returns the Caller the middleware attached to ctx.
func callerFrom(ctx context.Context) (*Caller, error) {
	c, ok := ctx.Value(callerKey{}).(*Caller)
	if !ok {
		return nil, errInternal("taskwire middleware did not run for this request")
	}
	return c, nil
}

func (s *serverTasks) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case methodInitialize:
			return s.patchInitialize(next(ctx, method, req))
		case methodDiscover:
			res, err := next(ctx, method, req)
			if dr, ok := res.(*mcp.DiscoverResult); ok && err == nil && dr.Capabilities != nil {
				dr.Capabilities.AddExtension(ExtensionID, nil)
			}
			return res, err
		case methodListTools:
			res, err := next(ctx, method, req)
			if err != nil || requestProtocolVersion(req) != protocolLegacy {
				return res, err
			}
			return s.patchToolList(res)
		case methodCallTool:
			return s.callTool(ctx, next, method, req)
		case methodSubscriptionsListen:
			if err := checkListen(req); err != nil {
				return nil, err
			}
			return next(ctx, method, req)
		case methodTasksGet, methodTasksResult, methodTasksList, methodTasksCancel, methodTasksUpdate:
			c, err := taskMethodCaller(method, req)
			if err != nil {
				return nil, err
			}
			return next(context.WithValue(ctx, callerKey{}, c), method, req)
		default:
			return next(ctx, method, req)
		}
	}
}

// patchInitialize adds capabilities.tasks to a 2025-11-25 initialize result,
// which the SDK's ServerCapabilities cannot express.
func (s *serverTasks) patchInitialize(res mcp.Result, err error) (mcp.Result, error) {
	ir, ok := res.(*mcp.InitializeResult)
	if err != nil || !ok || ir.ProtocolVersion != protocolLegacy {
		return res, err
	}
	body, err := patchObject(ir, func(obj map[string]json.RawMessage) error {
		caps := map[string]json.RawMessage{}
		if raw, ok := obj["capabilities"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &caps); err != nil {
				return err
			}
		}
		caps["tasks"] = legacyTaskCapability
		b, err := marshalJSON(caps)
		obj["capabilities"] = b
		return err
	})
	if err != nil {
		return nil, s.internal(methodInitialize, fmt.Errorf("advertising capabilities.tasks: %w", err))
	}
	return &rawResult{body: body}, nil
}

// patchToolList adds execution.taskSupport to the tools of a 2025-11-25
// tools/list result, which the SDK's Tool cannot express.
func (s *serverTasks) patchToolList(res mcp.Result) (mcp.Result, error) {
	body, err := patchObject(res, func(obj map[string]json.RawMessage) error {
		var tools []map[string]json.RawMessage
		if err := json.Unmarshal(obj["tools"], &tools); err != nil {
			return err
		}
		for _, tool := range tools {
			var name string
			if err := json.Unmarshal(tool["name"], &name); err != nil {
				return err
			}
			support := s.host.TaskSupport(name)
			if support == TaskOptional || support == TaskRequired {
				tool["execution"] = json.RawMessage(`{"taskSupport":"` + string(support) + `"}`)
			}
		}
		b, err := marshalJSON(tools)
		obj["tools"] = b
		return err
	})
	if err != nil {
		return nil, s.internal(methodListTools, fmt.Errorf("advertising execution.taskSupport: %w", err))
	}
	return &rawResult{body: body}, nil
}

// patchObject marshals v, lets patch edit its top-level fields and returns
// the new JSON.
func patchObject(v any, patch func(map[string]json.RawMessage) error) (json.RawMessage, error) {
	b, err := marshalJSON(v)
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	if err := patch(obj); err != nil {
		return nil, err
	}
	return marshalJSON(obj)
}

// callTool routes a tools/call through the Host.
func (s *serverTasks) callTool(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	ctr, ok := req.(*mcp.CallToolRequest)
	if !ok || ctr.Params == nil {
		return next(ctx, method, req)
	}
	p := ctr.Params
	// The 2026-07-28 HTTP router answers this before the SDK, which cannot
	// decode such arguments; a session or stdio request gets here with them.
	if err := canon.CheckDoubles(p.Arguments, "arguments"); err != nil {
		return nil, errUnreadableArguments(err)
	}
	internal := takeInternalMeta(p.Meta)
	version := requestProtocolVersion(req)
	c := newCaller(req, version, p.Meta, internal.requestID)
	// Tool handlers behind Pass see the _meta the client sent, nothing more.
	p.Meta = c.Meta

	if internal.idempotencyKey != nil {
		key, ok := internal.idempotencyKey.(string)
		if !ok || key == "" {
			return nil, errInvalidParams("params.idempotencyKey must be a non-empty string")
		}
		c.IdempotencyKey = key
	}

	support := s.host.TaskSupport(p.Name)
	switch {
	case version >= protocolExtension:
		// params.task is not part of this era and is ignored.
		c.TasksDeclared = extensionDeclared(req)
		if c.TasksDeclared && support != TaskForbidden && support != "" {
			c.Era = EraExtension
		} else if support == TaskRequired {
			return nil, errMissingCapability()
		}
	case version == protocolLegacy && internal.hasTask:
		c.TasksDeclared = true
		if support != TaskOptional && support != TaskRequired {
			return nil, errMethodNotFound("tool %q does not support task-augmented calls (execution.taskSupport is forbidden)", p.Name)
		}
		ttl, err := parseRequestedTTL(internal.task)
		if err != nil {
			return nil, err
		}
		c.Era = EraLegacy
		c.RequestedTTL = ttl
	case support == TaskRequired:
		return nil, errTaskRequired(p.Name, version)
	}

	out, err := s.host.CallTool(ctx, &ToolCall{
		Caller:         *c,
		Name:           p.Name,
		Arguments:      p.Arguments,
		ProgressToken:  p.GetProgressToken(),
		InputResponses: p.InputResponses,
		RequestState:   p.RequestState,
	})
	if err != nil {
		if gone(ctx, err) {
			// A client that stops waiting is no fault of the gateway's.
			s.logger.Info("the client went away before its answer", "method", method, "error", err)
			return nil, hostError(err)
		}
		return nil, s.internal(method, err)
	}
	return s.outcome(ctx, next, method, req, c, out)
}

// outcome turns the Host's answer into the tools/call response.
func (s *serverTasks) outcome(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request, c *Caller, out *Outcome) (mcp.Result, error) {
	set := 0
	for _, b := range []bool{out != nil && out.Task != nil, out != nil && out.Result != nil, out != nil && out.Err != nil, out != nil && out.Pass} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, s.internal(method, errors.New("host outcome must set exactly one of Task, Result, Err and Pass"))
	}
	switch {
	case out.Pass:
		return next(ctx, method, req)
	case out.Err != nil:
		var werr *jsonrpc.Error
		if errors.As(out.Err, &werr) {
			return nil, werr
		}
		return nil, s.internal(method, out.Err)
	case out.Result != nil:
		res, err := directResult(c, out.Result)
		if err != nil {
			return nil, s.internal(method, err)
		}
		return res, nil
	}
	if out.Task.ID == "" {
		return nil, s.internal(method, errors.New("host returned a task without an ID"))
	}
	switch c.Era {
	case EraExtension:
		return newExtensionCreateResult(out.Task), nil
	case EraLegacy:
		return newLegacyCreateResult(out.Task), nil
	default:
		return nil, s.internal(method, fmt.Errorf("host returned task %s to a caller that cannot receive tasks", out.Task.ID))
	}
}

// directResult prepares a Host's direct answer. The SDK sets resultType on
// a CallToolResult only inside its own tools/call handler, so on 2026-07-28
// the answer is re-encoded with resultType "complete".
func directResult(c *Caller, r *mcp.CallToolResult) (mcp.Result, error) {
	res := *r
	if res.Content == nil {
		res.Content = []mcp.Content{} // the SDK's own handler avoids "content":null too
	}
	if c.ProtocolVersion < protocolExtension {
		return &res, nil
	}
	resultType := resultTypeComplete
	if len(res.InputRequests) > 0 {
		resultType = resultTypeInputRequired
	}
	body, err := patchObject(&res, func(obj map[string]json.RawMessage) error {
		if _, ok := obj["resultType"]; !ok {
			obj["resultType"] = json.RawMessage(`"` + resultType + `"`)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the tool result: %w", err)
	}
	return &rawResult{body: body}, nil
}

// gone reports whether err says that the request's client cancelled it or
// went away. A Host ends a wait with context.Canceled when the request it
// serves is over, which in a 2025-11-25 session need not end the handler's
// own context; a deadline is the client's only when that context ended.
func gone(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) || ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded)
}

func (s *serverTasks) internal(method string, err error) *jsonrpc.Error {
	s.logger.Warn("task host failed", "method", method, "error", err)
	return hostError(err)
}

// checkListen refuses a subscriptions/listen that asks for task
// notifications from a client that did not declare the extension, as
// SEP-2663 requires. A declaring client is acknowledged without the task
// IDs, since no notifications/tasks are sent: it polls tasks/get.
func checkListen(req mcp.Request) error {
	meta, _ := requestMeta(req)
	_, asked := meta[metaTaskIDs]
	delete(meta, metaTaskIDs)
	if asked && requestProtocolVersion(req) >= protocolExtension && !extensionDeclared(req) {
		return errMissingCapability()
	}
	return nil
}

// taskMethodCaller checks that method exists in the request's era and returns
// its Caller.
func taskMethodCaller(method string, req mcp.Request) (*Caller, error) {
	meta, hasParams := requestMeta(req)
	internal := takeInternalMeta(meta)
	version := requestProtocolVersion(req)
	c := newCaller(req, version, meta, internal.requestID)
	switch {
	case version >= protocolExtension:
		if method == methodTasksResult || method == methodTasksList {
			return nil, errMethodNotFound("%s is not part of the tasks extension on protocol %s; poll tasks/get instead", method, version)
		}
		if !extensionDeclared(req) {
			return nil, errMissingCapability()
		}
		c.Era, c.TasksDeclared = EraExtension, true
	case version == protocolLegacy:
		if method == methodTasksUpdate {
			return nil, errMethodNotFound("%s is not part of protocol %s", method, version)
		}
		c.Era, c.TasksDeclared = EraLegacy, true
	default:
		return nil, errMethodNotFound("%s needs protocol %s or %s with tasks; this session uses %q", method, protocolLegacy, protocolExtension, version)
	}
	if !hasParams && method != methodTasksList {
		return nil, errInvalidParams("%s needs params.taskId", method)
	}
	return c, nil
}

func (s *serverTasks) get(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
	c, err := callerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if p.TaskID == "" {
		return nil, errInvalidParams("%s needs params.taskId", methodTasksGet)
	}
	t, err := s.host.GetTask(ctx, c, p.TaskID)
	if err != nil {
		return nil, s.hostFailure(methodTasksGet, err)
	}
	if c.Era == EraLegacy {
		return newLegacyTaskResult(t), nil
	}
	res, err := newExtensionGetResult(t)
	if err != nil {
		return nil, s.internal(methodTasksGet, err)
	}
	return res, nil
}

// result is the blocking 2025-11-25 tasks/result: it returns exactly what the
// tools/call would have returned, tagged with related-task _meta.
func (s *serverTasks) result(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
	c, err := callerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if p.TaskID == "" {
		return nil, errInvalidParams("%s needs params.taskId", methodTasksResult)
	}
	t, err := s.host.WaitTask(ctx, c, p.TaskID)
	if err != nil {
		return nil, s.hostFailure(methodTasksResult, err)
	}
	switch {
	case t.Error != nil:
		return nil, t.Error
	case len(t.Result) > 0:
		body, err := withMetaValue(t.Result, RelatedTaskMetaKey, map[string]string{"taskId": t.ID})
		if err != nil {
			return nil, s.internal(methodTasksResult, fmt.Errorf("task %s holds a result that is not a JSON object: %w", t.ID, err))
		}
		return &rawResult{body: body}, nil
	case t.Status == StatusCancelled:
		return nil, errInternal("Task %s was cancelled before it produced a result", t.ID)
	default:
		return nil, s.internal(methodTasksResult, fmt.Errorf("host returned task %s in status %q without a result or error", t.ID, t.Status))
	}
}

func (s *serverTasks) list(ctx context.Context, _ *mcp.ServerSession, p *listParams) (mcp.Result, error) {
	c, err := callerFrom(ctx)
	if err != nil {
		return nil, err
	}
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	tasks, next, err := s.host.ListTasks(ctx, c, cursor)
	if err != nil {
		return nil, s.hostFailure(methodTasksList, err)
	}
	return newLegacyListResult(tasks, next), nil
}

func (s *serverTasks) cancel(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
	c, err := callerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if p.TaskID == "" {
		return nil, errInvalidParams("%s needs params.taskId", methodTasksCancel)
	}
	if c.Era == EraExtension {
		// Cancellation is an acknowledgement, also for terminal tasks.
		if _, err := s.host.CancelTask(ctx, c, p.TaskID); err != nil {
			return nil, s.hostFailure(methodTasksCancel, err)
		}
		return newAckResult(), nil
	}
	before, err := s.host.GetTask(ctx, c, p.TaskID)
	if err != nil {
		return nil, s.hostFailure(methodTasksCancel, err)
	}
	if st := legacyStatus(before); st.IsTerminal() {
		return nil, errCancelTerminal(st)
	}
	t, err := s.host.CancelTask(ctx, c, p.TaskID)
	if err != nil {
		return nil, s.hostFailure(methodTasksCancel, err)
	}
	if st := legacyStatus(t); st.IsTerminal() && st != StatusCancelled {
		// The work finished before the cancellation took effect.
		return nil, errCancelTerminal(st)
	}
	return newLegacyTaskResult(t), nil
}

func (s *serverTasks) update(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
	c, err := callerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if p.TaskID == "" {
		return nil, errInvalidParams("%s needs params.taskId", methodTasksUpdate)
	}
	if err := s.host.UpdateTask(ctx, c, p.TaskID, p.InputResponses); err != nil {
		return nil, s.hostFailure(methodTasksUpdate, err)
	}
	return newAckResult(), nil
}

// hostFailure maps a Host error, logging only the unexpected ones; a
// request whose client went away is not unexpected.
func (s *serverTasks) hostFailure(method string, err error) *jsonrpc.Error {
	var werr *jsonrpc.Error
	if errors.Is(err, ErrTaskNotFound) || errors.Is(err, ErrTaskExpired) || errors.Is(err, ErrInvalidCursor) ||
		errors.As(err, &werr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return hostError(err)
	}
	return s.internal(method, err)
}

// internalMeta holds the reserved _meta values the inbound shims set.
type internalMeta struct {
	hasTask        bool
	task           any
	idempotencyKey any
	requestID      string
}

// takeInternalMeta removes the reserved keys from meta and returns them.
func takeInternalMeta(meta map[string]any) internalMeta {
	var im internalMeta
	if meta == nil {
		return im
	}
	im.task, im.hasTask = meta[metaTask]
	im.idempotencyKey = meta[MetaIdempotencyKey]
	im.requestID, _ = meta[metaRequestID].(string)
	delete(meta, metaTask)
	delete(meta, MetaIdempotencyKey)
	delete(meta, metaRequestID)
	return im
}

// parseRequestedTTL reads the ttl of a legacy params.task.
func parseRequestedTTL(task any) (*time.Duration, error) {
	if task == nil {
		return nil, nil
	}
	obj, ok := task.(map[string]any)
	if !ok {
		return nil, errInvalidParams("params.task must be an object like {\"ttl\": 60000}")
	}
	raw, ok := obj["ttl"]
	if !ok || raw == nil {
		return nil, nil
	}
	ms, ok := raw.(float64)
	if !ok || ms < 0 || ms != math.Trunc(ms) || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
		return nil, errInvalidParams("params.task.ttl must be a non-negative integer number of milliseconds")
	}
	d := time.Duration(ms) * time.Millisecond
	return &d, nil
}

// newCaller builds the Caller of req with Era left at EraNone.
func newCaller(req mcp.Request, version string, meta map[string]any, requestID string) *Caller {
	c := &Caller{ProtocolVersion: version, RequestID: requestID, Meta: meta}
	if extra := req.GetExtra(); extra != nil {
		c.TokenInfo = extra.TokenInfo
		c.Header = extra.Header
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		c.SessionID = ss.ID()
	}
	if version >= protocolExtension {
		c.ElicitationDeclared, c.ElicitationURL = perRequestElicitation(req)
	} else if CanElicit(req) {
		ss := req.GetSession().(*mcp.ServerSession)
		c.ElicitationDeclared = true
		c.ElicitationURL = SessionClientCapabilities(req).Elicitation.URL != nil
		c.Elicit = ss.Elicit
		c.NotifyElicitationComplete = ss.NotifyElicitationComplete
	}
	return c
}

// CanElicit reports whether the server may send elicitation/create to the
// client of req over its session: a session of protocol 2025-11-25 or
// earlier whose client declared elicitation in initialize. A 2026-07-28
// request has no session to send it on (its client is asked with input
// requests instead) and answers false.
func CanElicit(req mcp.Request) bool {
	caps := SessionClientCapabilities(req)
	return caps != nil && caps.Elicitation != nil
}

// SessionClientCapabilities returns the capabilities the client of req
// declared in initialize when the server may send it requests over its
// session (elicitation/create, sampling/createMessage, roots/list): a
// session of protocol 2025-11-25 or earlier. It is nil for a 2026-07-28
// request, whose client is asked with input requests instead.
func SessionClientCapabilities(req mcp.Request) *mcp.ClientCapabilities {
	if req == nil || requestProtocolVersion(req) >= protocolExtension {
		return nil
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return nil
	}
	if ip := ss.InitializeParams(); ip != nil {
		return ip.Capabilities
	}
	return nil
}

// perRequestElicitation reports whether a 2026-07-28 request declares
// elicitation among its per-request client capabilities, and whether it
// declares URL mode (elicitation.url) among them.
func perRequestElicitation(req mcp.Request) (declared, url bool) {
	meta, _ := requestMeta(req)
	raw, ok := meta[mcp.MetaKeyClientCapabilities]
	if !ok {
		return false, false
	}
	// Maps, not structs: the keys must be spelt exactly, as the SDK reads
	// them.
	var caps map[string]json.RawMessage
	if remarshal(raw, &caps) != nil {
		return false, false
	}
	v, ok := caps["elicitation"]
	if !ok || string(v) == "null" {
		return false, false
	}
	var modes map[string]json.RawMessage
	if json.Unmarshal(v, &modes) != nil {
		return true, false
	}
	u, ok := modes["url"]
	return true, ok && string(u) != "null"
}

// requestMeta returns the _meta of req's params and whether params exist.
func requestMeta(req mcp.Request) (map[string]any, bool) {
	p := req.GetParams()
	if p == nil {
		return nil, false
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, false
	}
	return p.GetMeta(), true
}

// requestProtocolVersion is the protocol version of req: the per-request
// _meta version for 2026-07-28 and later, otherwise the version the session
// was initialized with.
func requestProtocolVersion(req mcp.Request) string {
	if meta, _ := requestMeta(req); meta != nil {
		if v, ok := meta[mcp.MetaKeyProtocolVersion].(string); ok && v >= protocolExtension {
			return v
		}
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return ""
	}
	ip := ss.InitializeParams()
	if ip == nil {
		return ""
	}
	if ip.ProtocolVersion >= protocolExtension {
		// The initialize handshake never negotiates 2026-07-28 or later; the
		// SDK answers such a client with 2025-11-25.
		return protocolLegacy
	}
	return ip.ProtocolVersion
}

// extensionDeclared reports whether the request's per-request client
// capabilities declare the tasks extension.
func extensionDeclared(req mcp.Request) bool {
	cr, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	})
	if !ok {
		return false
	}
	caps := cr.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok = caps.Extensions[ExtensionID]
	return ok
}
