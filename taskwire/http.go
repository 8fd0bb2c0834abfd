package taskwire

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/canon"
)

// HTTPOptions configures [NewHTTPHandler].
type HTTPOptions struct {
	// Streamable configures both go-sdk handlers behind the router. Its
	// Stateless field is ignored: the router chooses per request.
	// MaxRequestBodyBytes also bounds what the router reads (zero means
	// mcp.DefaultMaxRequestBodyBytes, negative means no limit).
	// SessionTimeout applies to sessions (2025-11-25 and earlier);
	// PropagateRequestCancellation to 2026-07-28 requests.
	Streamable mcp.StreamableHTTPOptions
	// StatelessServer, when set, serves the 2026-07-28 requests, and the
	// server given to NewHTTPHandler only sessions; set up both with
	// [Install]. Server options that concern sessions, such as KeepAlive,
	// then need not apply to stateless requests, which have no client to
	// ping.
	StatelessServer *mcp.Server
}

// NewHTTPHandler serves server (set up with [Install]) over Streamable HTTP
// in both protocol eras.
//
// A go-sdk StreamableHTTPHandler is either stateful, and then never
// negotiates 2026-07-28, or stateless, and then cannot send legacy
// server-to-client requests. The handler therefore holds one of each over the
// same server and routes every request: 2026-07-28 traffic
// (Mcp-Protocol-Version >= 2026-07-28, a per-request _meta protocol version,
// or server/discover) to the stateless handler, everything else (initialize,
// Mcp-Session-Id traffic, GET and DELETE) to the stateful one.
//
// Before the SDK sees a POST body, the handler bounds its size (413 beyond
// the limit), answers a body that is not JSON with the JSON-RPC parse error
// (-32700, id null, HTTP 400) where the SDK would answer plain text, applies
// the inbound shim that keeps params.task and params.idempotencyKey, and
// checks on 2026-07-28 tasks/get, tasks/update and tasks/cancel that the
// Mcp-Name header equals params.taskId (-32020 with HTTP 400 otherwise). A
// 2026-07-28 tools/call whose arguments hold a number beyond a double's
// range, which the SDK's header check cannot decode, is answered -32602 with
// data.reason [ReasonInvalidArguments] and data.path (HTTP 400), as the
// middleware of [Install] answers it in a session.
//
// Authentication belongs outside: wrap the returned handler with
// auth.RequireBearerToken, whose TokenInfo reaches [Caller.TokenInfo] through
// the request context.
//
// A session's keepalive pings (mcp.ServerOptions.KeepAlive) reach its
// client only over a standalone stream (HTTP GET). A session that has never
// opened one is not pinged — the ping could not arrive, and the SDK would
// close a live session for it — and is left to the idle timeout
// (StreamableHTTPOptions.SessionTimeout); a session that has opened one is
// pinged as usual.
func NewHTTPHandler(server *mcp.Server, opts *HTTPOptions) http.Handler {
	var so mcp.StreamableHTTPOptions
	statelessServer := server
	if opts != nil {
		so = opts.Streamable
		if opts.StatelessServer != nil {
			statelessServer = opts.StatelessServer
		}
	}
	limit := so.MaxRequestBodyBytes
	if limit == 0 {
		limit = mcp.DefaultMaxRequestBodyBytes
	}
	stateful, stateless := so, so
	stateful.Stateless = false
	stateless.Stateless = true
	h := &httpRouter{
		limit:     limit,
		server:    server,
		stateful:  mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &stateful),
		stateless: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return statelessServer }, &stateless),
	}
	server.AddSendingMiddleware(h.pingOnlyListening)
	return h
}

type httpRouter struct {
	limit     int64
	server    *mcp.Server
	stateful  http.Handler
	stateless http.Handler
	// listening holds the IDs of the sessions that have opened a
	// standalone stream, until the session ends.
	listening sync.Map
}

// pingOnlyListening answers a keepalive ping to a session that never opened
// a standalone stream with -32601, which ends that session's keepalive
// instead of the session.
func (h *httpRouter) pingOnlyListening(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "ping" {
			ss, ok := req.GetSession().(*mcp.ServerSession)
			if ok && ss != nil {
				if _, listening := h.listening.Load(ss.ID()); !listening {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the client has no standalone stream to be pinged on"}
				}
			}
		}
		return next(ctx, method, req)
	}
}

// streamOpened calls opened once the SDK accepts a standalone stream's GET
// (answers 200), so that a refused GET — another user's session ID — marks
// nothing.
type streamOpened struct {
	http.ResponseWriter
	opened      func()
	wroteHeader bool
}

func (s *streamOpened) WriteHeader(code int) {
	if !s.wroteHeader {
		s.wroteHeader = true
		if code == http.StatusOK {
			s.opened()
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *streamOpened) Write(b []byte) (int, error) {
	if !s.wroteHeader {
		s.WriteHeader(http.StatusOK) // what the server does implicitly
	}
	return s.ResponseWriter.Write(b)
}

func (s *streamOpened) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *streamOpened) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// noteListening records that session id opened a standalone stream, and
// forgets it when the session ends.
func (h *httpRouter) noteListening(id string) {
	if _, loaded := h.listening.LoadOrStore(id, struct{}{}); loaded {
		return
	}
	for ss := range h.server.Sessions() {
		if ss.ID() == id {
			go func() {
				_ = ss.Wait()
				h.listening.Delete(id)
			}()
			return
		}
	}
	h.listening.Delete(id) // no such session: the SDK refuses the GET
}

// probe is what the router reads from a single JSON-RPC message.
type probe struct {
	ID              json.RawMessage
	Method          string
	TaskID          json.RawMessage
	Arguments       json.RawMessage
	ProtocolVersion string
}

// readProbe reads the members the router needs from one JSON-RPC message.
// It reads them by their exact names, as the SDK does (encoding/json would
// also match "TASKID" to a taskId field), and refuses a message that spells
// one of them twice in any case: the router and the SDK must never read
// different values. A body that is not a JSON object gives nil and no error;
// the SDK answers it.
func readProbe(body []byte) (*probe, *jsonrpc.Error) {
	env, err := members(body, "jsonrpc", "id", "method", "params")
	if env == nil {
		return nil, err
	}
	p := &probe{ID: env["id"]}
	if err != nil {
		return p, err
	}
	if json.Unmarshal(env["method"], &p.Method) != nil {
		p.Method = ""
	}
	params, err := members(env["params"], "taskId", "_meta", "name")
	if err != nil {
		return p, err
	}
	p.TaskID = params["taskId"]
	p.Arguments = params["arguments"]
	meta, err := members(params["_meta"], mcp.MetaKeyProtocolVersion)
	if err != nil {
		return p, err
	}
	if json.Unmarshal(meta[mcp.MetaKeyProtocolVersion], &p.ProtocolVersion) != nil {
		p.ProtocolVersion = ""
	}
	return p, nil
}

// members decodes a JSON object's members by their exact names. It returns
// nil for anything that is not an object, and an error (with the members)
// when one of watched is spelt more than once, in any case.
func members(raw json.RawMessage, watched ...string) (map[string]json.RawMessage, *jsonrpc.Error) {
	if trimmed := bytes.TrimSpace(raw); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, nil
	}
	out := map[string]json.RawMessage{}
	seen := map[string]int{}
	var dup *jsonrpc.Error
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil
		}
		for _, w := range watched {
			if strings.EqualFold(key, w) {
				if seen[w]++; seen[w] > 1 && dup == nil {
					dup = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("invalid request: the member %q is spelt more than once; send it once, as %q", w, w)}
				}
			}
		}
		out[key] = v
	}
	return out, dup
}

func (h *httpRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Body == nil {
		handler := h.pick(r, nil)
		if id := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodGet && handler == h.stateful && id != "" {
			w = &streamOpened{ResponseWriter: w, opened: func() { h.noteListening(id) }}
		}
		handler.ServeHTTP(w, r)
		return
	}
	if h.limit > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, h.limit)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "failed to read request body", http.StatusBadRequest)
		return
	}
	if !json.Valid(body) {
		writeParseError(w, body)
		return
	}
	p, perr := readProbe(body)
	if perr != nil {
		writeRPCError(w, http.StatusBadRequest, p.ID, perr)
		return
	}
	handler := h.pick(r, p)
	if handler == h.stateless && p != nil {
		if werr := checkTaskName(r.Header, p); werr != nil {
			writeRPCError(w, http.StatusBadRequest, p.ID, werr)
			return
		}
		// The SDK's header check decodes the arguments into doubles and
		// fails on one beyond their range with -32020 "failed to extract
		// name"; the client's mistake is its arguments.
		if p.Method == methodCallTool {
			if err := canon.CheckDoubles(p.Arguments, "arguments"); err != nil {
				writeRPCError(w, http.StatusBadRequest, p.ID, errUnreadableArguments(err))
				return
			}
		}
	}
	body = shimBody(body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	handler.ServeHTTP(w, r)
}

// pick returns the handler for r: stateless for 2026-07-28 traffic,
// stateful for everything else.
func (h *httpRouter) pick(r *http.Request, p *probe) http.Handler {
	if r.Header.Get("Mcp-Protocol-Version") >= protocolExtension {
		return h.stateless
	}
	if p != nil && (p.Method == methodDiscover || p.ProtocolVersion >= protocolExtension) {
		return h.stateless
	}
	return h.stateful
}

// checkTaskName validates the Mcp-Name header of a 2026-07-28 task request.
func checkTaskName(header http.Header, p *probe) *jsonrpc.Error {
	if p.Method != methodTasksGet && p.Method != methodTasksUpdate && p.Method != methodTasksCancel {
		return nil
	}
	var taskID string
	if len(p.TaskID) > 0 && json.Unmarshal(p.TaskID, &taskID) != nil {
		return nil // not a string: the method handler rejects the params
	}
	raw := header.Get("Mcp-Name")
	if raw == "" {
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("missing required Mcp-Name header for method %q", p.Method)}
	}
	name, ok := decodeHeaderValue(raw)
	if !ok {
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "header mismatch: Mcp-Name header contains invalid Base64 encoding"}
	}
	if name != taskID {
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("header mismatch: Mcp-Name header value %q does not match params.taskId %q", raw, taskID)}
	}
	return nil
}

// writeParseError answers a body that is not JSON as JSON-RPC 2.0 says: a
// -32700 error whose id is null, since no id could be read. The SDK would
// answer plain text. The status is 400, as the MCP transport asks for a body
// it cannot accept.
func writeParseError(w http.ResponseWriter, body []byte) {
	msg := "parse error: the request body is not valid JSON"
	var se *json.SyntaxError
	if len(bytes.TrimSpace(body)) == 0 {
		msg += " (it is empty)"
	} else if err := json.Unmarshal(body, &struct{}{}); errors.As(err, &se) {
		msg += fmt.Sprintf(" (%v, at offset %d)", se, se.Offset)
	}
	msg += "; send one JSON-RPC message as a JSON object"
	out, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": jsonrpc.CodeParseError, "message": msg},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(out)
}

func writeRPCError(w http.ResponseWriter, status int, rawID json.RawMessage, werr *jsonrpc.Error) {
	var idv any
	if len(rawID) > 0 {
		_ = json.Unmarshal(rawID, &idv)
	}
	id, err := jsonrpc.MakeID(idv)
	if err != nil {
		id = jsonrpc.ID{}
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: werr})
	if err != nil {
		http.Error(w, werr.Message, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}

// Header values that are not plain printable ASCII travel base64-encoded
// (SEP-2243).
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

func decodeHeaderValue(v string) (string, bool) {
	inner, ok := strings.CutPrefix(v, base64Prefix)
	if !ok {
		return v, true
	}
	inner, ok = strings.CutSuffix(inner, base64Suffix)
	if !ok {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(b), true
}

func encodeHeaderValue(v string) string {
	needs := strings.HasPrefix(v, " ") || strings.HasPrefix(v, "\t") || strings.HasSuffix(v, " ") || strings.HasSuffix(v, "\t") ||
		(strings.HasPrefix(v, base64Prefix) && strings.HasSuffix(v, base64Suffix))
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			needs = true
			break
		}
	}
	if !needs {
		return v
	}
	return base64Prefix + base64.StdEncoding.EncodeToString([]byte(v)) + base64Suffix
}
