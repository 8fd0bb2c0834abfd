// Package legacyhttp makes a Streamable HTTP MCP handler look like a server
// that predates protocol 2026-07-28, for tests that need one behind a
// server that speaks both: a go-sdk client then falls back to initialize
// with 2025-11-25. It is for tests only and must never be on taskgate's
// serving path.
package legacyhttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// RefuseDiscover wraps h so that server/discover is a method it does not
// know (-32601); every other request reaches h as it came. seen, when not
// nil, is called with the method of each POSTed message before it is
// passed on.
func RefuseDiscover(h http.Handler, seen func(method string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			_ = json.Unmarshal(body, &msg) // a batch or garbage is h's to refuse
			if seen != nil && msg.Method != "" {
				seen(msg.Method)
			}
			if msg.Method == "server/discover" {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, msg.ID)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}
