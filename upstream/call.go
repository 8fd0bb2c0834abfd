package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/taskwire"
)

// CallOptions are the per-call plumbing of one tool call. A nil
// *CallOptions is a call without any.
type CallOptions struct {
	// Header holds extra HTTP headers for this one call, such as the
	// provider's Idempotency-Key. They go on the call's POST only; they do
	// not replace the configured headers (the gateway's own credential) or
	// the headers the MCP transport sets. Ignored for stdio upstreams.
	Header http.Header
	// Progress receives the upstream's progress notifications for this
	// call, in wire order, all of them before the call returns; later ones
	// (a 2025-11-25 task's progress after CallToolAsTask returned) are
	// dropped. Its ProgressToken is the one params carried (nil if none):
	// the token sent upstream is taskgate's own, unique per call. Progress
	// runs on the connection's reader and must not block for long.
	Progress func(*mcp.ProgressNotificationParams)
	// Elicit answers the elicitation/create requests a 2025-11-25 upstream
	// sends during this call. Without it they are declined. See the package
	// documentation for how requests are routed.
	Elicit func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
}

type elicitFunc = func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)

// CallTool calls a tool plainly and returns the upstream's result, including
// a 2026-07-28 input_required result (NeedsInput), which is returned as it
// is. An upstream that answers with a task anyway gets an
// *UnrequestedTaskError. params is not modified.
func (u *Upstream) CallTool(ctx context.Context, params *mcp.CallToolParams, opts *CallOptions) (*mcp.CallToolResult, error) {
	_, res, err := u.call(ctx, params, opts, false, nil)
	return res, err
}

// CallToolAsTask calls a tool and lets the upstream answer with a task: it
// returns the task when the upstream made one, else the direct result. On a
// 2026-07-28 upstream the extension is declared and the upstream decides; on
// a 2025-11-25 upstream that offers tasks params.task is sent with ttl (nil
// leaves the retention to the upstream); otherwise, and when the
// configuration turns tasks off, the call is plain.
func (u *Upstream) CallToolAsTask(ctx context.Context, params *mcp.CallToolParams, ttl *time.Duration, opts *CallOptions) (*taskwire.Task, *mcp.CallToolResult, error) {
	return u.call(ctx, params, opts, true, ttl)
}

func (u *Upstream) call(ctx context.Context, params *mcp.CallToolParams, opts *CallOptions, asTask bool, ttl *time.Duration) (*taskwire.Task, *mcp.CallToolResult, error) {
	if params == nil || params.Name == "" {
		return nil, nil, fmt.Errorf("upstream %s: a tool call needs params naming the tool", u.cfg.Name)
	}
	if opts == nil {
		opts = &CallOptions{}
	}
	asTask = asTask && u.cfg.Tasks != "off"
	ctx, cancel := u.bound(ctx)
	defer cancel()
	c, err := u.current(ctx)
	if err != nil {
		return nil, nil, err
	}

	p := u.outgoing(params)
	if opts.Progress != nil {
		token := "taskgate-" + strconv.FormatUint(u.tokens.Add(1), 10)
		p.SetProgressToken(token)
		unregister := u.progress.register(token, opts.Progress, params.GetProgressToken())
		defer unregister()
	}
	ctx = withCallHeader(ctx, opts.Header)

	cs, release, err := u.sessionFor(ctx, c, opts.Elicit, asTask)
	if err != nil {
		return nil, nil, err
	}
	defer release()

	what := "tools/call " + params.Name
	if asTask {
		task, res, err := taskwire.CallToolAsTask(ctx, cs, p, ttl)
		if err != nil {
			return nil, nil, fmt.Errorf("upstream %s: %s: %w", u.cfg.Name, what, err)
		}
		return task, res, nil
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		return nil, nil, fmt.Errorf("upstream %s: %s: %w", u.cfg.Name, what, err)
	}
	if task, err := taskwire.TaskFromResult(res); err != nil || task != nil {
		if err != nil {
			return nil, nil, fmt.Errorf("upstream %s: %s: %w", u.cfg.Name, what, err)
		}
		return nil, nil, &UnrequestedTaskError{Upstream: u.cfg.Name, Tool: params.Name, Task: task}
	}
	return nil, res, nil
}

// UnrequestedTaskError is CallTool's error when the upstream answered a
// plain call with a task, which it must not do: the work runs upstream as
// Task, to be followed with GetTask.
type UnrequestedTaskError struct {
	Upstream string
	Tool     string
	Task     *taskwire.Task
}

func (e *UnrequestedTaskError) Error() string {
	return fmt.Sprintf("upstream %s answered a plain call of %s with task %s, which it was not asked for; the work runs upstream: follow the task with GetTask",
		e.Upstream, e.Tool, e.Task.ID)
}

// outgoing copies params for sending: the protocol's own _meta keys
// (io.modelcontextprotocol/*) are dropped, because the go-sdk fills in its
// own and would keep a caller's; so is a caller's progress token, which
// names nothing on this connection.
func (u *Upstream) outgoing(params *mcp.CallToolParams) *mcp.CallToolParams {
	p := *params
	p.Meta = maps.Clone(params.Meta)
	for k := range p.Meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") || k == "progressToken" {
			delete(p.Meta, k)
		}
	}
	if len(p.Meta) == 0 {
		p.Meta = nil
	}
	return &p
}

// sessionFor picks the session a tool call runs on and returns a func
// releasing it; see the package documentation for why.
func (u *Upstream) sessionFor(ctx context.Context, c *conn, elicit elicitFunc, asTask bool) (*mcp.ClientSession, func(), error) {
	legacy := c.protocol < protocolExtension
	switch {
	case elicit == nil || !legacy:
		if err := c.gate.share(ctx); err != nil {
			return nil, nil, fmt.Errorf("upstream %s: waiting for a call that may elicit to finish: %w", u.cfg.Name, err)
		}
		return c.cs, c.gate.unshare, nil
	case u.httpClient != nil && !(asTask && c.era == taskwire.EraLegacy):
		cs, err := u.openCallSession(ctx, elicit)
		if err != nil {
			return nil, nil, err
		}
		return cs, func() { u.closeCallSession(cs) }, nil
	default:
		if err := c.gate.hold(ctx); err != nil {
			return nil, nil, fmt.Errorf("upstream %s: waiting for the session to be free for a call that may elicit: %w", u.cfg.Name, err)
		}
		c.route.set(elicit)
		return c.cs, func() {
			c.route.set(nil)
			c.gate.unhold()
		}, nil
	}
}

// openCallSession opens an HTTP session for one call, whose elicitation
// requests all go to elicit.
func (u *Upstream) openCallSession(ctx context.Context, elicit elicitFunc) (*mcp.ClientSession, error) {
	transport := &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: u.httpClient}
	// The call's own headers belong to the call, not to the session's
	// handshake and streams.
	cs, err := u.client.Connect(withCallHeader(ctx, nil), transport, nil)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: opening a session for a call that may elicit: %w", u.cfg.Name, err)
	}
	route := &elicitRoute{}
	route.set(elicit)
	u.mu.Lock()
	closed := u.closed
	if !closed {
		u.routes[cs] = route
	}
	u.mu.Unlock()
	if closed {
		cs.Close()
		return nil, &notConnectedError{name: u.cfg.Name, cause: errors.New("the upstream pool is closed")}
	}
	return cs, nil
}

func (u *Upstream) closeCallSession(cs *mcp.ClientSession) {
	u.mu.Lock()
	delete(u.routes, cs)
	u.mu.Unlock()
	if err := cs.Close(); err != nil {
		u.logger.Debug("closing a call's session", "error", err)
	}
}

// elicitRoute names the call, if any, that answers a session's elicitation
// requests.
type elicitRoute struct{ fn atomic.Pointer[elicitFunc] }

func (r *elicitRoute) set(fn elicitFunc) {
	if fn == nil {
		r.fn.Store(nil)
		return
	}
	r.fn.Store(&fn)
}

func (r *elicitRoute) get() elicitFunc {
	if p := r.fn.Load(); p != nil {
		return *p
	}
	return nil
}

// elicit is the client's elicitation handler: it routes a request to the
// call that holds its session, and declines what belongs to no call.
func (u *Upstream) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if _, ok := req.Params.Meta[taskwire.RelatedTaskMetaKey]; ok {
		u.logger.Info("declined an elicitation for an upstream task: task input is not answered here", "message", req.Params.Message)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	u.mu.Lock()
	route := u.routes[req.Session]
	u.mu.Unlock()
	var fn elicitFunc
	if route != nil {
		fn = route.get()
	}
	if fn == nil {
		u.logger.Info("declined an elicitation no call asked to answer", "message", req.Params.Message)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return fn(ctx, req.Params)
}

// GetTask polls an upstream task with tasks/get. In the 2026-07-28 design
// the task carries its result, error or input requests inline.
func (u *Upstream) GetTask(ctx context.Context, taskID string) (*taskwire.Task, error) {
	ctx, cancel := u.bound(ctx)
	defer cancel()
	c, err := u.current(ctx)
	if err != nil {
		return nil, err
	}
	t, err := taskwire.GetTask(ctx, c.cs, taskID)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", u.cfg.Name, err)
	}
	return t, nil
}

// TaskResult returns the tool result of a terminal upstream task: inline
// from tasks/get on a 2026-07-28 upstream, from tasks/result (which blocks
// until the task ends, within the timeout) on a 2025-11-25 one. A task that
// failed with a JSON-RPC error returns that error (a *jsonrpc.Error).
func (u *Upstream) TaskResult(ctx context.Context, taskID string) (*mcp.CallToolResult, error) {
	ctx, cancel := u.bound(ctx)
	defer cancel()
	c, err := u.current(ctx)
	if err != nil {
		return nil, err
	}
	if c.protocol < protocolExtension {
		res, err := taskwire.TaskResult(ctx, c.cs, taskID)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", u.cfg.Name, err)
		}
		return res, nil
	}
	t, err := taskwire.GetTask(ctx, c.cs, taskID)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", u.cfg.Name, err)
	}
	switch {
	case !t.Status.IsTerminal():
		return nil, fmt.Errorf("upstream %s: task %s is %s, not finished; poll it with GetTask until it is", u.cfg.Name, taskID, t.Status)
	case t.Error != nil:
		return nil, fmt.Errorf("upstream %s: task %s failed: %w", u.cfg.Name, taskID, t.Error)
	case len(t.Result) == 0:
		return nil, fmt.Errorf("upstream %s: task %s ended %s without a result", u.cfg.Name, taskID, t.Status)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(t.Result, &res); err != nil {
		return nil, fmt.Errorf("upstream %s: decoding the result of task %s: %w", u.cfg.Name, taskID, err)
	}
	return &res, nil
}

// CancelTask asks the upstream to cancel a task with tasks/cancel. Success
// means the request was accepted, not that the task's effect was reversed.
func (u *Upstream) CancelTask(ctx context.Context, taskID string) error {
	ctx, cancel := u.bound(ctx)
	defer cancel()
	c, err := u.current(ctx)
	if err != nil {
		return err
	}
	if _, err := taskwire.CancelTask(ctx, c.cs, taskID); err != nil {
		return fmt.Errorf("upstream %s: %w", u.cfg.Name, err)
	}
	return nil
}
