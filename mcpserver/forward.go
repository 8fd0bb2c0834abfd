package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/taskgate/taskgate/internal/loopback"
	"github.com/taskgate/taskgate/ledger"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/upstream"
)

// forwardPassThrough relays a tools/call of a pass-through tool as bytes
// where that answers as the SDK's handler would: a 2026-07-28 call to a
// stateless upstream as it is, others in the upstream's relay session or
// on its stdio child's connection; choosePath says which, and everything
// else goes to next. Nothing is gained by decoding a call into a server
// session and encoding it again as a client call, and that round trip was
// most of a pass-through call's cost. A relayed call must have done to it
// what that path does: a rebound Host refused, params.idempotencyKey and
// taskgate's _meta dropped, the tasks extension hidden, and the
// upstream's own HTTP errors never passed on as the client's.
func (g *Gateway) forwardPassThrough(legacy *legacySessions, next http.Handler) http.Handler {
	next = legacy.watch(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := pathRequest{w: w, r: r, legacy: legacy, next: next}
		defer q.done()
		f := pathFacts{
			Post: r.Method == http.MethodPost, Version: r.Header.Get("Mcp-Protocol-Version"),
			ToolsCall: r.Header.Get("Mcp-Method") == "tools/call", Session: r.Header.Get(sessionIDHeader) != "",
		}
		plan, need := choosePath(f)
		for need != 0 {
			if !g.learn(&q, &f, need) {
				return
			}
			plan, need = choosePath(f)
		}
		// Every plan ends on the SDK's path, which serves anything.
		for _, p := range plan {
			if g.serve(&q, p) {
				return
			}
		}
	})
}

// pathRequest is a request on its way to its path: what has been read of
// it to choose the path, for the path to use.
type pathRequest struct {
	w      http.ResponseWriter
	r      *http.Request
	legacy *legacySessions
	next   http.Handler

	sid  string // the 2025-11-25 session
	body []byte
	// call is the body read as a relayable pass-through call.
	call *passThroughCall
	// message is the request ID a 2025-11-25 message that is no relayable
	// call names: the answer's, the cancelled request's, the waiting
	// call's.
	message json.RawMessage
	// session is what relaying needs of the 2025-11-25 session.
	session *relayInfo
	// level is the log level a 2026-07-28 call's _meta names.
	level mcp.LoggingLevel
	// caps are what the call's relay declares so that its client can be
	// asked; nil for a client that cannot be.
	caps json.RawMessage

	// A call of a 2025-11-25 session is relayed in ctx, which the
	// client's notifications/cancelled for it ends (legacySessions.track);
	// tracked is false once that could not be arranged.
	ctx     context.Context
	tracked bool
	cancel  context.CancelFunc
	untrack func()
}

// done releases what serving the request held.
func (q *pathRequest) done() {
	if q.untrack != nil {
		q.untrack()
	}
	if q.cancel != nil {
		q.cancel()
	}
}

// track makes the context a call of a 2025-11-25 session is relayed in,
// once; false when the call's request ID is in flight already in the
// session, whose SDK handler then answers it.
func (q *pathRequest) track() (context.Context, bool) {
	if q.ctx == nil {
		q.ctx, q.cancel = context.WithCancel(q.r.Context())
		q.untrack, q.tracked = q.legacy.track(q.sid, q.call.id, q.cancel)
	}
	return q.ctx, q.tracked
}

// learn learns the facts need names into f, noting in q what it read for
// the path to use. On false the client has been answered (its body could
// not be read).
func (g *Gateway) learn(q *pathRequest, f *pathFacts, need pathFact) bool {
	r := q.r
	f.Known |= need
	if need&factHost != 0 {
		f.Rebound = reboundHost(r)
	}
	if need&factSession != 0 {
		q.sid = r.Header.Get(sessionIDHeader)
		f.SessionKnown = q.legacy.known(q.sid)
	}
	if need&factAccepts != 0 {
		f.JSONAndStream = acceptsJSONAndStream(r)
	}
	if need&factCall != 0 {
		body, ok := readBody(q.w, r)
		if !ok {
			return false
		}
		q.body = body
		// A 2026-07-28 call names its tool in Mcp-Name too; a 2025-11-25
		// session's has the protocol's _meta keys, which the relay sets.
		legacy := f.era() == eraSession
		mcpName := ""
		if !legacy {
			mcpName = r.Header.Get("Mcp-Name")
		}
		q.call, f.Shape = g.readPassThrough(body, mcpName, tenantOfHTTP(r), legacy)
		if q.call != nil {
			f.Upstream = q.call.up.Kind()
		}
	}
	if need&factMessage != 0 {
		f.Message, q.message = messageOf(q.body)
	}
	if c := q.call; c != nil {
		if need&factSessionRelay != 0 {
			q.session, f.SessionRelayable = q.legacy.relayable(q.sid, userOf(r), c.up.Timeout())
		}
		if need&factParked != 0 {
			f.Parked = g.parked.holds(requestState(c), userOf(r), c.up, c.tool)
		}
		if need&factLogLevel != 0 {
			var level mcp.LoggingLevel
			raw, ok := c.meta[mcp.MetaKeyLogLevel]
			f.BadLogLevel = ok && json.Unmarshal(raw, &level) != nil
			q.level = level
		}
		if need&factAskable != 0 {
			q.caps = bridgeable(c.meta)
			if q.session != nil && q.session.caps != nil {
				q.caps = q.session.caps
			}
			f.Askable = q.caps != nil
		}
	}
	return true
}

// messageOf tells what a 2025-11-25 session's message that is no
// relayable call is, with the request ID it names.
func messageOf(body []byte) (messageKind, json.RawMessage) {
	if id, ok := answerID(body); ok {
		return messageAnswer, id
	}
	if id, ok := cancelledRequest(body); ok {
		return messageCancelled, id
	}
	if id, ok := waitingCall(body); ok {
		return messageWaiting, id
	}
	return messageOther, nil
}

// serve serves q by path p; false, having written nothing, when p cannot
// serve it after all (see pathPlan).
func (g *Gateway) serve(q *pathRequest, p passThroughPath) bool {
	if q.call == nil || !p.relays() {
		return g.serveOn(q, p)
	}
	start := time.Now()
	end := func(bool) {}
	if g.tracing.On() {
		end = g.traceRelay(q, p)
	}
	served := g.serveOn(q, p)
	end(served)
	if served {
		g.metrics.observeServer("tools/call", q.call.name, "", time.Since(start))
	}
	return served
}

// serveOn is serve, with tracing set up.
func (g *Gateway) serveOn(q *pathRequest, p passThroughPath) bool {
	w, r, c := q.w, q.r, q.call
	switch p {
	case pathForward:
		f, ok := c.stateless(nil, false)
		return ok && g.forward(w, r.Context(), f, 0)
	case pathResumeParked:
		return g.resumeParked(w, r, c)
	case pathRelaySession, pathStdioMultiplex:
		return g.relayStateless(w, r, c, q.level, nil)
	case pathRelayParking, pathStdioAsking:
		return g.relayStateless(w, r, c, q.level, q.caps)
	case pathLegacyRelaySession, pathLegacyStdio, pathLegacyForward, pathLegacyForwardAsking, pathLegacyStdioAsking:
		ctx, ok := q.track()
		return ok && g.relayLegacy(w, ctx, q, p)
	case pathLegacyAnswer:
		question := q.legacy.answered(q.sid, userOf(r), q.message)
		if question == nil {
			return false
		}
		// The client's answer goes where the question came from; it
		// expects nothing back, as from the SDK's handler.
		if err := question.Answer(r.Context(), q.body); err != nil {
			g.log.Warn("an answer to an upstream's question was not delivered", "method", question.Method(), "err", err)
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	case pathLegacyCancel:
		q.legacy.cancel(q.sid, userOf(r), q.message)
		return false
	case pathLegacyCancellable:
		serveCancellable(w, r, q.legacy, q.sid, q.message, q.next)
		return true
	}
	q.next.ServeHTTP(w, r)
	return true
}

// relayStateless relays c, a 2026-07-28 call, in the upstream's relay
// session or on its stdio child's connection: without the protocol's own
// _meta keys, which describe the client to a stateless server and which
// the session already carries, with the log messages at level, and with
// its result annotated as the gateway's own server annotates one. For a
// client that declared caps, what it can be asked, the upstream's
// questions are bridged (see bridgedCall). It returns false, having
// written nothing, when the upstream offers no session.
func (g *Gateway) relayStateless(w http.ResponseWriter, r *http.Request, c *passThroughCall, level mcp.LoggingLevel, caps json.RawMessage) bool {
	meta := maps.Clone(c.meta)
	maps.DeleteFunc(meta, func(k string, _ json.RawMessage) bool {
		return strings.HasPrefix(strings.ToLower(k), "io.modelcontextprotocol/")
	})
	relayed := *c
	relayed.meta = meta
	call := relayed.relayed()
	call.LogLevel, call.ServerInfo, call.User = level, g.serverInfo, userOf(r)
	call.ClientCapabilities = c.meta[mcp.MetaKeyClientCapabilities]
	if caps == nil {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		return g.relayInSession(w, ctx, &relayed, call)
	}
	// The call may outlive this request, parked for its client's answer.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	b := &bridgedCall{cancel: cancel, user: userOf(r), up: c.up, tool: c.tool}
	defer b.served(b.serving(r))
	call.Capabilities = caps
	call.Park = func(p *upstream.ParkedCall) (string, bool) { return g.parked.park(p, b, g.stopping, c.up.Timeout()) }
	return g.relayInSession(w, ctx, &relayed, call)
}

// legacyRelayVersion is the protocol version of the sessions whose
// pass-through calls relayLegacy relays.
const legacyRelayVersion = "2025-11-25"

// relayLegacy relays q's call, a tools/call of a pass-through tool in a
// 2025-11-25 session, to its upstream as bytes by path p, in ctx. The
// session is one the SDK's handler opened for the same user, and the
// request is one the handler would accept (choosePath). The call goes in
// one of the upstream's relay sessions or on its stdio child's connection
// (upstream.RelayCall), where the upstream's questions on the call's
// stream reach a client that can answer them; or, to a stateless
// upstream, as the 2026-07-28 request it is there, with the session's
// client information (forwardAsking, for a client that can be asked,
// bridges the input_required answers it gets). Either way the upstream's
// messages mean the same to the client as they would from the SDK path.
// The client's answers to questions go back where the questions came
// from, and its notifications/cancelled for a relayed call ends it. It
// returns false, having written nothing, when p cannot take the call.
func (g *Gateway) relayLegacy(w http.ResponseWriter, ctx context.Context, q *pathRequest, p passThroughPath) bool {
	c, info, sid, legacy, user := q.call, q.session, q.sid, q.legacy, userOf(q.r)
	switch p {
	case pathLegacyForward:
		f, ok := c.stateless(info, true)
		return ok && g.forward(w, ctx, f, http.StatusOK)
	case pathLegacyForwardAsking, pathLegacyStdioAsking:
		ask := func(question question) (json.RawMessage, bool) { return legacy.ask(sid, c.id, question) }
		return g.forwardAsking(w, ctx, c, info, user, ask, p == pathLegacyForwardAsking)
	}
	call := c.relayed()
	call.LogLevel, call.User = info.logLevel, user
	// A stdio child of 2026-07-28 is told the client can be asked
	// nothing, as a stateless upstream is (stateless).
	call.ClientCapabilities = json.RawMessage(`{}`)
	if q.caps != nil {
		call.Capabilities = q.caps
		call.Asked = func(question *upstream.Question) (json.RawMessage, bool) { return legacy.ask(sid, c.id, question) }
	}
	return g.relayInSession(w, ctx, c, call)
}

// waitingCall returns the request ID of a request the SDK's handler may
// take long to answer: a tools/call (a consequential tool's waits for its
// operation) or a tasks/result.
func waitingCall(body []byte) (json.RawMessage, bool) {
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" || !validID(msg.ID) || msg.Method != "tools/call" && msg.Method != "tasks/result" {
		return nil, false
	}
	return msg.ID, true
}

// cancelledWait bounds how long a notifications/cancelled waits for the
// response of the request it cancels to end.
const cancelledWait = 5 * time.Second

// serveCancellable serves request id of session sid on the SDK's path so
// that the client's notifications/cancelled for it leaves it unanswered,
// as the specification asks of a receiver: the notification ends the
// request's response, and reaches the SDK's handler (which then stops)
// only once that response is over, so that no answer can be written to it.
func serveCancellable(w http.ResponseWriter, r *http.Request, legacy *legacySessions, sid string, id json.RawMessage, next http.Handler) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	served := make(chan struct{})
	untrack, ok := legacy.track(sid, id, func() {
		cancel()
		t := time.NewTimer(cancelledWait)
		defer t.Stop()
		select {
		case <-served:
		case <-t.C:
		}
	})
	if !ok { // a request ID already in flight: the SDK's handler refuses it
		next.ServeHTTP(w, r)
		return
	}
	defer untrack()
	defer close(served)
	next.ServeHTTP(w, r.WithContext(ctx))
}

// answerID returns the request ID of a JSON-RPC response: the answer a
// client posts to a request sent to it.
func answerID(body []byte) (json.RawMessage, bool) {
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" || msg.Method != nil || !validID(msg.ID) || (msg.Result == nil) == (msg.Error == nil) {
		return nil, false
	}
	return msg.ID, true
}

// relayInSession relays c, as call, in one of the upstream's 2025-11-25
// relay sessions. It returns false, having written nothing, when the
// upstream offers none.
func (g *Gateway) relayInSession(w http.ResponseWriter, ctx context.Context, c *passThroughCall, call *upstream.RelayedCall) bool {
	call.Unanswered = unavailable(&forwarded{up: c.up, tool: c.tool, id: c.id})
	resp, err := c.up.RelayCall(ctx, call)
	switch {
	case errors.Is(err, upstream.ErrNotForwardable):
		return false
	case err != nil && ctx.Err() != nil:
		// The client cancelled the call or went away: it expects no answer.
		return true
	case err != nil:
		g.log.Warn("relaying a pass-through call failed", "upstream", c.up.Name(), "tool", c.tool, "err", err)
		writeUnavailable(w, &forwarded{up: c.up, tool: c.tool, id: c.id})
		return true
	}
	defer resp.Body.Close()
	g.relay(w, resp)
	return true
}

// readBody reads r's body and puts it back for the next handler. On false
// the client has been answered.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("request body exceeds the limit of %d bytes", tooLarge.Limit), http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "could not read the request body", http.StatusBadRequest)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// acceptsJSONAndStream reports whether r is a POST the SDK's session
// handler takes: a JSON body, and both response kinds acceptable. Others
// are left to it to refuse.
func acceptsJSONAndStream(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return false
	}
	accept := strings.ToLower(strings.Join(r.Header.Values("Accept"), ","))
	return strings.Contains(accept, "application/json") && strings.Contains(accept, "text/event-stream")
}

// cancelledRequest returns the request ID a notifications/cancelled names.
func cancelledRequest(body []byte) (json.RawMessage, bool) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "notifications/cancelled" || len(msg.Params.RequestID) == 0 {
		return nil, false
	}
	return msg.Params.RequestID, true
}

// forward sends f upstream and relays the answer. It returns false, having
// written nothing, when the upstream cannot take forwarded requests after
// all; the caller then takes the ordinary path. A JSON-RPC error the
// upstream answers with an HTTP error status is passed on with errStatus,
// or with the upstream's status when errStatus is 0.
func (g *Gateway) forward(w http.ResponseWriter, ctx context.Context, f *forwarded, errStatus int) bool {
	resp, err := f.up.Forward(ctx, f.body, forwardHeader(f.tool))
	switch {
	case errors.Is(err, upstream.ErrNotForwardable):
		return false
	case err != nil:
		g.log.Warn("forwarding a pass-through call failed", "upstream", f.up.Name(), "tool", f.tool, "err", err)
		writeUnavailable(w, f)
		return true
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		g.relayFailure(w, f, resp, errStatus)
		return true
	}
	g.relay(w, resp)
	return true
}

// reboundHost reports whether r reached a loopback listener under a Host
// that is not loopback: a DNS rebinding attempt, which the SDK's handler
// refuses. The forwarded path leaves it to that handler.
func reboundHost(r *http.Request) bool {
	return onLoopback(r) && !loopback.Host(r.Host)
}

// writeUnavailable answers a forwarded call whose upstream could not be
// reached. What went wrong is logged, not sent: it may name hosts and
// credentials.
func writeUnavailable(w http.ResponseWriter, f *forwarded) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(unavailable(f), '\n'))
}

// unavailable is the answer to a forwarded call whose upstream did not
// answer.
func unavailable(f *forwarded) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": f.id, "error": map[string]any{
		"code": -32603, "message": fmt.Sprintf("upstream %s did not answer; try again shortly", f.up.Name()),
		"data": map[string]any{"reason": ledger.ReasonUpstreamUnavailable},
	}})
	return b
}

// relayFailure answers a forwarded call that the upstream answered with an
// HTTP error. A 400 or 404 carrying the JSON-RPC error of this request is
// the upstream's protocol answer (2026-07-28 maps -32602 and -32601 to
// them) and is passed on, with status unless it is 0; anything else — above all the upstream's 401 or
// 403, which concern taskgate's credential, not the client's — becomes
// -32603 upstream_unavailable.
func (g *Gateway) relayFailure(w http.ResponseWriter, f *forwarded, resp *http.Response, status int) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRelayedError+1))
	if (resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound) && len(body) <= maxRelayedError {
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *struct {
				Code    int64           `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data,omitempty"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.JSONRPC == "2.0" && msg.Error != nil && bytes.Equal(msg.ID, f.id) {
			if status == 0 {
				status = resp.StatusCode
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": f.id, "error": msg.Error})
			return
		}
	}
	g.log.Warn("an upstream refused a forwarded pass-through call", "upstream", f.up.Name(), "tool", f.tool, "status", resp.StatusCode)
	writeUnavailable(w, f)
}

// maxRelayedError bounds the error body of an upstream's HTTP failure that
// is read to pass it on.
const maxRelayedError = 64 << 10

// forwarded is a request ready to relay.
type forwarded struct {
	up   *upstream.Upstream
	tool string
	id   json.RawMessage
	body []byte
}

// passThroughCall is a tools/call of a pass-through tool, read to be
// relayed as bytes: the tool's upstream name, and _meta without taskgate's
// keys or the tasks extension (a pass-through call must not come back as an
// upstream task the gateway does not hold).
type passThroughCall struct {
	up *upstream.Upstream
	// name is the tool's downstream name, tool its upstream's.
	name string
	tool string
	id   json.RawMessage
	// params are the call's, less name and _meta.
	params map[string]json.RawMessage
	meta   map[string]json.RawMessage // nil when the call had none
}

// tenantOfHTTP is the tenant of an authenticated HTTP request, "" if none.
func tenantOfHTTP(r *http.Request) string {
	return authn.TenantOf(auth.TokenInfoFromContext(r.Context()))
}

// readPassThrough reads body as a pass-through call of tenant that may be
// relayed, or says what else it is.
// A 2026-07-28 call must name its tool in Mcp-Name (mcpName) too; a call of
// a 2025-11-25 session (legacy) names it in the body only, and has its
// protocol's own _meta keys dropped, since the gateway sets them.
func (g *Gateway) readPassThrough(body []byte, mcpName, tenant string, legacy bool) (*passThroughCall, callShape) {
	// Members are read by their exact names, as the SDK reads them.
	var env map[string]json.RawMessage
	if json.Unmarshal(body, &env) != nil {
		return nil, shapeOther
	}
	var jsonrpcVersion, method string
	var params map[string]json.RawMessage
	if json.Unmarshal(env["jsonrpc"], &jsonrpcVersion) != nil || jsonrpcVersion != "2.0" ||
		json.Unmarshal(env["method"], &method) != nil || method != "tools/call" ||
		!validID(env["id"]) || json.Unmarshal(env["params"], &params) != nil || params == nil {
		return nil, shapeOther
	}
	var name string
	if json.Unmarshal(params["name"], &name) != nil || (!legacy && name != mcpName) {
		return nil, shapeOther // the ordinary path answers a header mismatch
	}
	r, ok := g.route(name)
	switch {
	case !ok:
		return nil, shapeOther
	case r.consequential():
		return nil, shapeConsequential
	case r.headerArguments:
		return nil, shapeHeaderArguments
	case !isASCII(r.tool):
		return nil, shapeOther
	}
	up, ok := g.pool.Get(r.upstream)
	if !ok {
		return nil, shapeOther
	}
	// Relayed and forwarded calls go with the tenant's credential, in its
	// own relay sessions; a tenant the upstream has none for is refused
	// by the ordinary path, which says why.
	up, err := up.For(tenant)
	if err != nil {
		return nil, shapeOther
	}
	for k := range params {
		// params.task belongs to another era, or asks for a task of a tool
		// that makes none; the ordinary path answers it.
		if strings.EqualFold(k, "task") {
			return nil, shapeOther
		}
		// The operation's key is the client's with taskgate, never with
		// the upstream, which may see every tenant under one credential.
		if strings.EqualFold(k, "idempotencyKey") {
			delete(params, k)
		}
	}
	// Arguments the SDK cannot decode are the client's mistake, which the
	// ordinary path names; the upstream would answer its own error.
	if canon.CheckDoubles(params["arguments"], "arguments") != nil {
		return nil, shapeOther
	}
	c := &passThroughCall{up: up, name: name, tool: r.tool, id: env["id"], params: params}
	if raw, ok := params["_meta"]; ok {
		if c.meta, ok = forwardMeta(raw, legacy); !ok {
			return nil, shapeOther
		}
	}
	delete(params, "name")
	delete(params, "_meta")
	return c, shapePassThrough
}

// stateless returns c as the 2026-07-28 request to forward. For a call of a
// 2025-11-25 session (session is what relaying knows of it), _meta gains
// what a 2026-07-28 request carries: the protocol version, the client,
// client capabilities — none, so that the upstream asks no questions that
// could not reach the session's client, unless the client can be asked
// (forwardAsking bridges its questions) — and the log level the client
// set.
func (c *passThroughCall) stateless(session *relayInfo, legacy bool) (*forwarded, bool) {
	params := maps.Clone(c.params)
	params["name"], _ = json.Marshal(c.tool)
	meta := c.meta
	if legacy {
		meta = maps.Clone(c.meta)
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta[mcp.MetaKeyProtocolVersion] = json.RawMessage(`"2026-07-28"`)
		meta[mcp.MetaKeyClientCapabilities] = json.RawMessage(`{}`)
		if session != nil && session.caps != nil {
			meta[mcp.MetaKeyClientCapabilities] = session.caps
		}
		if session != nil && session.client != nil {
			info, err := json.Marshal(session.client)
			if err != nil {
				return nil, false
			}
			meta[mcp.MetaKeyClientInfo] = info
		}
		if session != nil && session.logLevel != "" {
			level, err := json.Marshal(session.logLevel)
			if err != nil {
				return nil, false
			}
			meta[mcp.MetaKeyLogLevel] = level
		}
	}
	if meta != nil {
		raw, err := json.Marshal(meta)
		if err != nil {
			return nil, false
		}
		params["_meta"] = raw
	}
	out, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "tools/call", "params": params})
	if err != nil {
		return nil, false
	}
	return &forwarded{up: c.up, tool: c.tool, id: c.id, body: out}, true
}

// relayed returns c as the call to relay in the upstream's relay session.
func (c *passThroughCall) relayed() *upstream.RelayedCall {
	meta := maps.Clone(c.meta)
	token := meta["progressToken"]
	delete(meta, "progressToken")
	return &upstream.RelayedCall{ID: c.id, Tool: c.tool, Params: c.params, Meta: meta, ProgressToken: token}
}

// forwardMeta drops taskgate's reserved keys and the tasks extension from
// the per-request client capabilities. Keys are matched in any case: a
// decoder into structs, like Go's, reads "Extensions" as "extensions".
// With protocolKeys, the protocol's own keys go too.
func forwardMeta(raw json.RawMessage, protocolKeys bool) (map[string]json.RawMessage, bool) {
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) != nil {
		return nil, false
	}
	for k, v := range meta {
		lower := strings.ToLower(k)
		switch {
		case strings.HasPrefix(lower, "dev.taskgate/"), protocolKeys && strings.HasPrefix(lower, "io.modelcontextprotocol/"):
			delete(meta, k)
		case strings.EqualFold(k, mcp.MetaKeyClientCapabilities):
			caps, ok := withoutTasksExtension(v)
			if !ok {
				return nil, false
			}
			meta[k] = caps
		}
	}
	return meta, true
}

// withoutTasksExtension returns client capabilities without the tasks
// extension, however its keys are spelt.
func withoutTasksExtension(raw json.RawMessage) (json.RawMessage, bool) {
	var caps map[string]json.RawMessage
	if json.Unmarshal(raw, &caps) != nil {
		return nil, false
	}
	for k, e := range caps {
		if !strings.EqualFold(k, "extensions") {
			continue
		}
		var ext map[string]json.RawMessage
		if json.Unmarshal(e, &ext) != nil {
			return nil, false
		}
		for id := range ext {
			if strings.EqualFold(id, taskwire.ExtensionID) {
				delete(ext, id)
			}
		}
		caps[k], _ = json.Marshal(ext)
	}
	out, err := json.Marshal(caps)
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

// validID reports whether id is a JSON-RPC request ID the SDK accepts: a
// string or a number.
func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		return json.Unmarshal(id, &n) == nil
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
