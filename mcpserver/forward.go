package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/upstream"
)

// forwardPassThrough relays a 2026-07-28 tools/call of a pass-through tool
// to its Streamable HTTP upstream as bytes. Such a request is stateless on
// both sides, so nothing is gained by decoding it into a server session and
// encoding it again as a client call, and that round trip was most of a
// pass-through call's cost. Everything else — consequential tools, other
// methods, older protocols, stdio upstreams, anything unusual — takes the
// ordinary path through next.
func (g *Gateway) forwardPassThrough(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		version := r.Header.Get("Mcp-Protocol-Version")
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "tools/call" || version < "2026-07-28" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, fmt.Sprintf("request body exceeds the limit of %d bytes", tooLarge.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "could not read the request body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		f, ok := g.forwardable(body, r.Header.Get("Mcp-Name"))
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
		h.Set("Mcp-Protocol-Version", version)
		h.Set("Mcp-Method", "tools/call")
		h.Set("Mcp-Name", f.tool)
		resp, err := f.up.Forward(r.Context(), f.body, h)
		switch {
		case errors.Is(err, upstream.ErrNotForwardable):
			next.ServeHTTP(w, r)
			return
		case err != nil:
			g.log.Warn("forwarding a pass-through call failed", "upstream", f.up.Name(), "tool", f.tool, "err", err)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": f.id, "error": map[string]any{
				"code": -32603, "message": fmt.Sprintf("upstream %s did not answer: %v", f.up.Name(), err),
				"data": map[string]any{"reason": "upstream_unavailable"},
			}})
			return
		}
		defer resp.Body.Close()
		g.relay(w, resp)
	})
}

// forwarded is a request ready to relay.
type forwarded struct {
	up   *upstream.Upstream
	tool string
	id   json.RawMessage
	body []byte
}

// forwardable rewrites a pass-through tools/call for its upstream: the
// tool's upstream name, and _meta without taskgate's keys or the tasks
// extension (a pass-through call must not come back as an upstream task the
// gateway does not hold).
func (g *Gateway) forwardable(body []byte, mcpName string) (*forwarded, bool) {
	var env struct {
		JSONRPC string                     `json:"jsonrpc"`
		ID      json.RawMessage            `json:"id"`
		Method  string                     `json:"method"`
		Params  map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &env) != nil || env.JSONRPC != "2.0" || env.Method != "tools/call" || len(env.ID) == 0 || env.Params == nil {
		return nil, false
	}
	var name string
	if json.Unmarshal(env.Params["name"], &name) != nil || name != mcpName {
		return nil, false // the ordinary path answers a header mismatch
	}
	r, ok := g.route(name)
	if !ok || r.consequential() || !isASCII(r.tool) {
		return nil, false
	}
	up, ok := g.pool.Get(r.upstream)
	if !ok || !up.CanForward() {
		return nil, false
	}
	if _, legacy := env.Params["task"]; legacy {
		return nil, false
	}
	env.Params["name"], _ = json.Marshal(r.tool)
	if raw, ok := env.Params["_meta"]; ok {
		meta, ok := forwardMeta(raw)
		if !ok {
			return nil, false
		}
		env.Params["_meta"] = meta
	}
	out, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": env.ID, "method": "tools/call", "params": env.Params})
	if err != nil {
		return nil, false
	}
	return &forwarded{up: up, tool: r.tool, id: env.ID, body: out}, true
}

// forwardMeta drops taskgate's reserved keys and the tasks extension from
// the per-request client capabilities.
func forwardMeta(raw json.RawMessage) (json.RawMessage, bool) {
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) != nil {
		return nil, false
	}
	for k := range meta {
		if strings.HasPrefix(k, "dev.taskgate/") {
			delete(meta, k)
		}
	}
	const capsKey = "io.modelcontextprotocol/clientCapabilities"
	if c, ok := meta[capsKey]; ok {
		var caps map[string]json.RawMessage
		if json.Unmarshal(c, &caps) != nil {
			return nil, false
		}
		if e, ok := caps["extensions"]; ok {
			var ext map[string]json.RawMessage
			if json.Unmarshal(e, &ext) != nil {
				return nil, false
			}
			delete(ext, taskwire.ExtensionID)
			caps["extensions"], _ = json.Marshal(ext)
		}
		meta[capsKey], _ = json.Marshal(caps)
	}
	out, err := json.Marshal(meta)
	return out, err == nil
}

// relay copies the upstream's response, flushing event-stream chunks as
// they arrive so that progress reaches the client when it is sent.
func (g *Gateway) relay(w http.ResponseWriter, resp *http.Response) {
	for _, k := range []string{"Content-Type", "Cache-Control"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	bp := g.relayBuffers.Get().(*[]byte)
	defer g.relayBuffers.Put(bp)
	buf := *bp
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
