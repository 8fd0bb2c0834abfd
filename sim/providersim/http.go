package providersim

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/taskwire"
)

// HTTPHandler returns the simulator's HTTP handler: MCP over Streamable HTTP at
// /mcp, and the record as JSON at GET /sim/record.
//
// /mcp serves both protocol eras: 2026-07-28 traffic statelessly, 2025-11-25
// in sessions (see [taskwire.NewHTTPHandler]). Plain tools/call works in
// both; a client that uses tasks gets run_suite as a task in either.
func (s *Sim) HTTPHandler() http.Handler { return s.handler }

func (s *Sim) newHTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", taskwire.NewHTTPHandler(s.server, &taskwire.HTTPOptions{
		Streamable: mcp.StreamableHTTPOptions{
			// A 2026-07-28 caller that stops waiting ends the handler, as
			// it does for a legacy caller through notifications/cancelled.
			PropagateRequestCancellation: true,
			Logger:                       s.logger,
		},
	}))
	mux.HandleFunc("GET /sim/record", s.serveRecord)
	return mux
}

func (s *Sim) serveRecord(w http.ResponseWriter, _ *http.Request) {
	data, err := json.Marshal(s.Record())
	if err != nil {
		http.Error(w, "encoding the record: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}
