package taskwire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sse"
)

// The go-sdk client sends typed params and decodes typed results, and both
// drop what the task designs add: params.task and params.idempotencyKey on
// the way out, CreateTaskResult, capabilities.tasks and execution.taskSupport
// on the way back. The client shim rewrites messages on the wire:
//
//   - outgoing tools/call: _meta[metaTask] becomes params.task (2025-11-25)
//     or a per-request declaration of the extension (2026-07-28), and
//     _meta[MetaIdempotencyKey] becomes params.idempotencyKey;
//   - outgoing 2026-07-28 tasks/get, tasks/update, tasks/cancel: the
//     extension is declared, and over HTTP Mcp-Name is set to the task ID;
//   - incoming task replies (flat or wrapped) become a CallToolResult with
//     the task in _meta[metaTask], which [TaskFromResult] reads;
//   - incoming initialize results copy capabilities.tasks into _meta, and
//     tools/list results copy each tool's execution into the tool's _meta.
//
// Incoming rewrites go by shape, not by the request they answer: the shapes
// are reserved by the specification, and responses of resumed SSE streams
// arrive without their request.

// WrapClientTransport returns t with the client shim applied.
//
// For *mcp.StreamableClientTransport the shim runs in the HTTP client's
// RoundTripper (see [WrapRoundTripper]), so the SDK connection keeps all its
// behaviour (protocol-version header, standalone SSE stream); t's HTTPClient
// is copied, not modified. For any other transport the shim wraps the
// connection.
func WrapClientTransport(t mcp.Transport) mcp.Transport {
	if st, ok := t.(*mcp.StreamableClientTransport); ok {
		wrapped := *st
		hc := http.DefaultClient
		if st.HTTPClient != nil {
			hc = st.HTTPClient
		}
		client := *hc
		client.Transport = WrapRoundTripper(hc.Transport)
		wrapped.HTTPClient = &client
		return &wrapped
	}
	return &clientTransport{inner: t}
}

type clientTransport struct{ inner mcp.Transport }

func (t *clientTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &clientConn{Connection: conn}, nil
}

type clientConn struct{ mcp.Connection }

func (c *clientConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok {
		if params, _, changed := clientRewriteParams(req.Method, req.Params); changed {
			msg = &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params, Extra: req.Extra}
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *clientConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil && len(resp.Result) > 0 {
		if result, changed := clientRewriteResult(resp.Result); changed {
			msg = &jsonrpc.Response{ID: resp.ID, Result: result, Error: resp.Error, Extra: resp.Extra}
		}
	}
	return msg, err
}

// WrapRoundTripper returns an http.RoundTripper applying the client shim to
// MCP Streamable HTTP traffic over rt (nil means http.DefaultTransport),
// including the Mcp-Name header of 2026-07-28 tasks/get, tasks/update and
// tasks/cancel. Use it when building the HTTP client of a
// StreamableClientTransport yourself; [WrapClientTransport] does it for you.
// Applying the shim twice is harmless.
func WrapRoundTripper(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &shimRoundTripper{next: rt}
}

type shimRoundTripper struct{ next http.RoundTripper }

func (t *shimRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req
	if req.Method == http.MethodPost && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("taskwire: reading request body: %w", err)
		}
		body, name := clientRewriteBody(body)
		out = req.Clone(req.Context())
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if name != "" {
			out.Header.Set("Mcp-Name", encodeHeaderValue(name))
		}
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("taskwire: reading response body: %w", err)
		}
		if len(body) > maxResponseBody {
			return nil, fmt.Errorf("taskwire: the response body exceeds %d bytes", maxResponseBody)
		}
		body = clientRewriteIncoming(body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	case "text/event-stream":
		resp.Body = sse.NewReader(resp.Body, mcp.DefaultMaxEventSize, clientRewriteMessage)
	}
	return resp, nil
}

// maxResponseBody bounds a JSON response body the shim reads whole, as
// mcp.DefaultMaxEventSize bounds one server-sent event.
const maxResponseBody = mcp.DefaultMaxEventSize

func mediaType(v string) string {
	t, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// clientRewriteBody applies the outgoing shim to an HTTP request body of one
// message, returning the Mcp-Name value to set, if any.
func clientRewriteBody(body []byte) ([]byte, string) {
	var env map[string]json.RawMessage
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &env) != nil {
		return body, ""
	}
	var method string
	if json.Unmarshal(env["method"], &method) != nil {
		return body, ""
	}
	params, name, changed := clientRewriteParams(method, env["params"])
	if !changed {
		return body, name
	}
	env["params"] = params
	out, err := marshalJSON(env)
	if err != nil {
		return body, ""
	}
	return out, name
}

// clientRewriteIncoming applies the incoming shim to a response body of one
// message or a batch.
func clientRewriteIncoming(body []byte) []byte { return rewriteBody(body, clientRewriteMessage) }

// clientRewriteMessage rewrites the result of one incoming response.
func clientRewriteMessage(msg []byte) []byte {
	if !bytes.Contains(msg, []byte(`"result"`)) {
		return msg
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(msg, &env) != nil {
		return msg
	}
	result, ok := env["result"]
	if !ok {
		return msg
	}
	result, changed := clientRewriteResult(result)
	if !changed {
		return msg
	}
	env["result"] = result
	out, err := marshalJSON(env)
	if err != nil {
		return msg
	}
	return out
}

// clientRewriteParams applies the outgoing shim to one request's params. It
// returns the new params, the task ID to send as Mcp-Name (2026-07-28 task
// methods only) and whether anything changed.
func clientRewriteParams(method string, raw json.RawMessage) (json.RawMessage, string, bool) {
	switch method {
	case methodCallTool, methodTasksGet, methodTasksUpdate, methodTasksCancel:
	default:
		return raw, "", false
	}
	var params map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &params) != nil || params == nil {
		return raw, "", false
	}
	meta := map[string]json.RawMessage{}
	if m, ok := params["_meta"]; ok && json.Unmarshal(m, &meta) != nil {
		return raw, "", false
	}
	var version string
	_ = json.Unmarshal(meta[mcp.MetaKeyProtocolVersion], &version)
	modern := version >= protocolExtension

	var name string
	changed := false
	if method == methodCallTool {
		if marker, ok := meta[metaTask]; ok {
			delete(meta, metaTask)
			changed = true
			if modern {
				if declareExtension(meta) != nil {
					return raw, "", false
				}
			} else {
				params["task"] = marker
			}
		}
		if key, ok := meta[MetaIdempotencyKey]; ok {
			delete(meta, MetaIdempotencyKey)
			params["idempotencyKey"] = key
			changed = true
		}
	} else if modern {
		if declareExtension(meta) != nil {
			return raw, "", false
		}
		changed = true
		_ = json.Unmarshal(params["taskId"], &name)
	}
	if !changed {
		return raw, name, false
	}
	var err error
	if len(meta) == 0 {
		delete(params, "_meta")
	} else if params["_meta"], err = marshalJSON(meta); err != nil {
		return raw, "", false
	}
	out, err := marshalJSON(params)
	if err != nil {
		return raw, "", false
	}
	return out, name, true
}

// declareExtension adds the tasks extension to the per-request client
// capabilities in meta.
func declareExtension(meta map[string]json.RawMessage) error {
	caps := map[string]json.RawMessage{}
	if raw, ok := meta[mcp.MetaKeyClientCapabilities]; ok {
		if err := json.Unmarshal(raw, &caps); err != nil {
			return err
		}
	}
	exts := map[string]json.RawMessage{}
	if raw, ok := caps["extensions"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &exts); err != nil {
			return err
		}
	}
	if _, ok := exts[ExtensionID]; ok {
		return nil
	}
	exts[ExtensionID] = json.RawMessage(`{}`)
	var err error
	if caps["extensions"], err = marshalJSON(exts); err != nil {
		return err
	}
	meta[mcp.MetaKeyClientCapabilities], err = marshalJSON(caps)
	return err
}

// clientRewriteResult applies the incoming shim to one result object.
func clientRewriteResult(raw json.RawMessage) (json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return raw, false
	}
	var rt string
	_ = json.Unmarshal(fields["resultType"], &rt)
	switch {
	case rt == resultTypeTask:
		task := make(map[string]json.RawMessage, len(fields))
		for k, v := range fields {
			if k != "_meta" && k != "resultType" {
				task[k] = v
			}
		}
		b, err := marshalJSON(task)
		if err != nil {
			return raw, false
		}
		return taskReply(fields["_meta"], b)
	case fields["task"] != nil && fields["content"] == nil && isTaskObject(fields["task"]):
		return taskReply(fields["_meta"], fields["task"])
	case fields["protocolVersion"] != nil && fields["serverInfo"] != nil && fields["capabilities"] != nil:
		var caps map[string]json.RawMessage
		if json.Unmarshal(fields["capabilities"], &caps) != nil || caps["tasks"] == nil {
			return raw, false
		}
		return copyIntoMeta(fields, metaTasksCapability, caps["tasks"])
	case fields["tools"] != nil:
		return copyToolExecution(fields)
	}
	return raw, false
}

func isTaskObject(raw json.RawMessage) bool {
	var t struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	return json.Unmarshal(raw, &t) == nil && t.TaskID != "" && t.Status != ""
}

// taskReply builds the CallToolResult that carries a task reply.
func taskReply(rawMeta, task json.RawMessage) (json.RawMessage, bool) {
	out, changed := copyIntoMeta(map[string]json.RawMessage{
		"content": json.RawMessage(`[]`),
		"_meta":   rawMeta,
	}, metaTask, task)
	return out, changed
}

// copyIntoMeta sets _meta[key] = value in the object fields.
func copyIntoMeta(fields map[string]json.RawMessage, key string, value json.RawMessage) (json.RawMessage, bool) {
	meta := map[string]json.RawMessage{}
	if raw := fields["_meta"]; len(raw) > 0 && string(raw) != "null" {
		if json.Unmarshal(raw, &meta) != nil {
			return nil, false
		}
	}
	meta[key] = value
	var err error
	if fields["_meta"], err = marshalJSON(meta); err != nil {
		return nil, false
	}
	out, err := marshalJSON(fields)
	if err != nil {
		return nil, false
	}
	return out, true
}

// copyToolExecution copies each tool's execution into the tool's _meta.
func copyToolExecution(fields map[string]json.RawMessage) (json.RawMessage, bool) {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(fields["tools"], &tools) != nil {
		return nil, false
	}
	changed := false
	for i, tool := range tools {
		exec, ok := tool["execution"]
		if !ok || tool == nil {
			continue
		}
		b, ok := copyIntoMeta(tool, metaExecution, exec)
		if !ok || json.Unmarshal(b, &tools[i]) != nil {
			return nil, false
		}
		changed = true
	}
	if !changed {
		return nil, false
	}
	b, err := marshalJSON(tools)
	if err != nil {
		return nil, false
	}
	fields["tools"] = b
	out, err := marshalJSON(fields)
	if err != nil {
		return nil, false
	}
	return out, true
}
