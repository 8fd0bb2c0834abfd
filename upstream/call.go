package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
	// ElicitationComplete receives the notifications/elicitation/complete
	// of URL-mode elicitations that a 2025-11-25 upstream sends in the
	// session of a call that passes Elicit.
	ElicitationComplete func(ctx context.Context, p *mcp.ElicitationCompleteParams)
	// CreateMessage answers the sampling/createMessage requests a
	// 2025-11-25 upstream sends during this call. Without it they get
	// -32601, as from a client without sampling.
	CreateMessage func(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error)
	// ListRoots answers roots/list in a call that passes Elicit or
	// CreateMessage. Other calls' roots/list get the gateway's own answer,
	// an empty list.
	ListRoots func(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
	// Capabilities are the calling client's, declared to the upstream in
	// the session of a call that passes Elicit or CreateMessage (HTTP).
	// Nil declares what the funcs set answer.
	Capabilities *mcp.ClientCapabilities
	// ClientCapabilities are what a 2026-07-28 session's call declares per
	// request in place of the gateway's own: the calling client's, so that
	// the upstream asks only what it can answer. Nil declares the
	// gateway's; a 2025-11-25 session ignores it.
	ClientCapabilities json.RawMessage
	// Log receives the upstream's notifications/message sent during this
	// call, in wire order with its progress, all of them before the call
	// returns. Over HTTP they are the messages on the call's response
	// stream; over stdio, those read while it is the only call in flight.
	// Log runs on the connection's reader and must not block for long.
	Log func(*mcp.LoggingMessageParams)
	// LogLevel is the level a 2026-07-28 upstream is asked to log at for
	// this call (per request); empty with Log set asks for debug. A
	// 2025-11-25 session is set to debug once, for every call.
	LogLevel mcp.LoggingLevel
}

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
	if opts.Log != nil && c.protocol >= protocolExtension {
		level := opts.LogLevel
		if level == "" {
			level = upstreamLogLevel
		}
		if p.Meta == nil {
			p.Meta = mcp.Meta{}
		}
		p.Meta[mcp.MetaKeyLogLevel] = level
	}
	if opts.ClientCapabilities != nil && c.protocol >= protocolExtension {
		if p.Meta == nil {
			p.Meta = mcp.Meta{}
		}
		p.Meta[mcp.MetaKeyClientCapabilities] = opts.ClientCapabilities
	}
	logs := &logSink{fn: opts.Log}
	defer logs.close()
	ctx = withCallLog(withCallHeader(ctx, opts.Header), logs)

	cs, release, err := u.sessionFor(ctx, c, askerOf(opts), opts.Log != nil, asTask)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	if u.httpClient == nil {
		defer u.logs.track(logs)()
	}

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
	p.Meta = outgoingMeta(params.Meta)
	return &p
}

// sessionFor picks the session a tool call runs on and returns a func
// releasing it; see the package documentation for why. a is the call's
// asker, nil for a call that cannot be asked anything; logs: the call
// wants the upstream's log messages.
func (u *Upstream) sessionFor(ctx context.Context, c *conn, a *asker, logs, asTask bool) (*mcp.ClientSession, func(), error) {
	legacy := c.protocol < protocolExtension
	switch {
	case a == nil || !legacy:
		if err := c.gate.share(ctx); err != nil {
			return nil, nil, fmt.Errorf("upstream %s: waiting for a call that may ask its client to finish: %w", u.cfg.Name, err)
		}
		return c.cs, c.gate.unshare, nil
	case u.httpClient != nil && !(asTask && c.era == taskwire.EraLegacy):
		cs, err := u.openCallSession(ctx, c, a, logs)
		if err != nil {
			return nil, nil, err
		}
		return cs, func() { u.closeCallSession(cs) }, nil
	default:
		if err := c.gate.hold(ctx); err != nil {
			return nil, nil, fmt.Errorf("upstream %s: waiting for the session to be free for a call that may ask its client: %w", u.cfg.Name, err)
		}
		c.route.set(a)
		return c.cs, func() {
			c.route.set(nil)
			c.gate.unhold()
		}, nil
	}
}

// openCallSession opens a 2025-11-25 HTTP session (c's protocol) for one
// call, declaring its client's capabilities; every request the upstream
// sends in it goes to a. With logs, the session is asked to log.
func (u *Upstream) openCallSession(ctx context.Context, c *conn, a *asker, logs bool) (*mcp.ClientSession, error) {
	transport := &mcp.StreamableClientTransport{Endpoint: u.sdkURL, HTTPClient: u.httpClient}
	// The call's own headers belong to the call, not to the session's
	// handshake and streams.
	hctx := context.WithValue(withCallHeader(ctx, nil), sessionCapabilitiesKey{}, a.caps)
	cs, err := u.client.Connect(hctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: c.protocol})
	if err != nil {
		return nil, fmt.Errorf("upstream %s: opening a session for a call that may ask its client: %w", u.cfg.Name, err)
	}
	route := &askRoute{}
	route.set(a)
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
	if logs {
		u.askToLog(hctx, cs)
	}
	return cs, nil
}

// askToLog sets a 2025-11-25 session's log level to upstreamLogLevel, if
// the upstream logs at all. An upstream that refuses only costs its
// clients its log messages, not the session.
func (u *Upstream) askToLog(ctx context.Context, cs *mcp.ClientSession) {
	res := cs.InitializeResult()
	if res == nil || res.Capabilities == nil || res.Capabilities.Logging == nil || res.ProtocolVersion >= protocolExtension {
		return
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: upstreamLogLevel}); err != nil {
		u.logger.Warn("the upstream refused logging/setLevel; its log messages will not reach clients", "error", err)
	}
}

func (u *Upstream) closeCallSession(cs *mcp.ClientSession) {
	u.mu.Lock()
	delete(u.routes, cs)
	u.mu.Unlock()
	if err := cs.Close(); err != nil {
		u.logger.Debug("closing a call's session", "error", err)
	}
}

// GetTask polls an upstream task with tasks/get. In the 2026-07-28 design
// the task carries its result, error or input requests inline.
func (u *Upstream) GetTask(ctx context.Context, taskID string) (*taskwire.Task, error) {
	var t *taskwire.Task
	err := u.onSession(ctx, func(ctx context.Context, c *conn) (err error) {
		t, err = taskwire.GetTask(ctx, c.cs, taskID)
		return err
	})
	return t, err
}

// TaskResult returns the tool result of a terminal upstream task: inline
// from tasks/get on a 2026-07-28 upstream, from tasks/result (which blocks
// until the task ends, within the timeout) on a 2025-11-25 one. A task that
// failed with a JSON-RPC error returns that error (a *jsonrpc.Error).
//
// While a 2025-11-25 upstream's tasks/result blocks, the task may ask its
// question there, with elicitation/create tagged with the task: elicit
// answers it. Without elicit the upstream gets an error and may ask again
// on a later tasks/result. Each elicit's context ends with TaskResult's
// call, and TaskResult returns only once they have all returned. A
// 2026-07-28 task shows its question in tasks/get instead (see GetTask).
func (u *Upstream) TaskResult(ctx context.Context, taskID string, elicit func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)) (*mcp.CallToolResult, error) {
	ctx, cancel := u.bound(ctx)
	defer cancel()
	defer u.trackRequest()()
	c, err := u.current(ctx)
	if err != nil {
		return nil, err
	}
	if c.protocol < protocolExtension {
		if elicit != nil {
			defer u.answerTask(ctx, taskID, elicit)()
		}
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

// UpdateTask answers the input requests of a 2026-07-28 upstream task
// with tasks/update, keyed as the task keyed them. The upstream ignores
// answers to keys it no longer waits on, so answering again is harmless.
func (u *Upstream) UpdateTask(ctx context.Context, taskID string, responses map[string]json.RawMessage) error {
	return u.onSession(ctx, func(ctx context.Context, c *conn) error {
		return taskwire.UpdateTask(ctx, c.cs, taskID, responses)
	})
}

// onSession runs one tasks/* request, fn, on the current session, within
// the upstream's timeout; fn's error is named with the upstream.
func (u *Upstream) onSession(ctx context.Context, fn func(context.Context, *conn) error) error {
	ctx, cancel := u.bound(ctx)
	defer cancel()
	defer u.trackRequest()()
	c, err := u.current(ctx)
	if err != nil {
		return err
	}
	if err := fn(ctx, c); err != nil {
		return fmt.Errorf("upstream %s: %w", u.cfg.Name, err)
	}
	return nil
}

// CancelTask asks the upstream to cancel a task with tasks/cancel. Success
// means the request was accepted, not that the task's effect was reversed.
func (u *Upstream) CancelTask(ctx context.Context, taskID string) error {
	return u.onSession(ctx, func(ctx context.Context, c *conn) error {
		_, err := taskwire.CancelTask(ctx, c.cs, taskID)
		return err
	})
}
