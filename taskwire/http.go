package taskwire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures [NewHTTPHandler].
type HTTPOptions struct {
	// Streamable configures both go-sdk handlers behind the router. Its
	// Stateless field is ignored: the router chooses per request.
	// MaxRequestBodyBytes also bounds what the router reads (zero means
	// mcp.DefaultMaxRequestBodyBytes, negative means no limit).
	Streamable mcp.StreamableHTTPOptions
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
// the limit), applies the inbound shim that keeps params.task and
// params.idempotencyKey, and checks on 2026-07-28 tasks/get, tasks/update and
// tasks/cancel that the Mcp-Name header equals params.taskId (-32020 with
// HTTP 400 otherwise).
//
// Authentication belongs outside: wrap the returned handler with
// auth.RequireBearerToken, whose TokenInfo reaches [Caller.TokenInfo] through
// the request context.
func NewHTTPHandler(server *mcp.Server, opts *HTTPOptions) http.Handler {
	var so mcp.StreamableHTTPOptions
	if opts != nil {
		so = opts.Streamable
	}
	limit := so.MaxRequestBodyBytes
	if limit == 0 {
		limit = mcp.DefaultMaxRequestBodyBytes
	}
	getServer := func(*http.Request) *mcp.Server { return server }
	stateful, stateless := so, so
	stateful.Stateless = false
	stateless.Stateless = true
	return &httpRouter{
		limit:     limit,
		stateful:  mcp.NewStreamableHTTPHandler(getServer, &stateful),
		stateless: mcp.NewStreamableHTTPHandler(getServer, &stateless),
	}
}

type httpRouter struct {
	limit     int64
	stateful  http.Handler
	stateless http.Handler
}

// probe is what the router reads from a single JSON-RPC message.
type probe struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		TaskID json.RawMessage `json:"taskId"`
		Meta   struct {
			ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	} `json:"params"`
}

func (h *httpRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Body == nil {
		h.pick(r, nil).ServeHTTP(w, r)
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
	var p *probe
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' {
		p = new(probe)
		if json.Unmarshal(trimmed, p) != nil {
			p = nil
		}
	}
	handler := h.pick(r, p)
	if handler == h.stateless && p != nil {
		if werr := checkTaskName(r.Header, p); werr != nil {
			writeRPCError(w, http.StatusBadRequest, p.ID, werr)
			return
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
	if p != nil && (p.Method == methodDiscover || p.Params.Meta.ProtocolVersion >= protocolExtension) {
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
	if len(p.Params.TaskID) > 0 && json.Unmarshal(p.Params.TaskID, &taskID) != nil {
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
