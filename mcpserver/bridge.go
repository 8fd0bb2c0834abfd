package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sse"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/upstream"
)

// A 2026-07-28 client's call relayed in a 2025-11-25 session cannot be
// asked a question on its stream: the upstream's elicitation, sampling or
// roots request reaches the client as an input_required result instead
// (upstream.RelayedCall.Park), and the client's next call, naming the
// requestState it was given, carries the answer back into the call that
// still waits upstream.

// bridgedCall is one such call, from its first request to its answer.
type bridgedCall struct {
	// cancel ends the call upstream.
	cancel context.CancelFunc
	user   string
	up     *upstream.Upstream
	tool   string

	mu sync.Mutex
	// stop detaches the call from the request being served, the gen-th,
	// whose end would otherwise end the call; parked: that request ended
	// with a question.
	stop   func() bool
	gen    int
	parked bool
}

// serving ties the call to r, the request now serving it: the client going
// away ends it. It returns r's turn, for served.
func (b *bridgedCall) serving(r *http.Request) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	b.stop, b.parked = context.AfterFunc(r.Context(), b.cancel), false
	return b.gen
}

// served is called as the request of turn gen ends: a call that did not
// park for a question has ended, unless a later request serves it already.
func (b *bridgedCall) served(gen int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gen == b.gen && !b.parked {
		b.stop()
		b.cancel()
	}
}

// parkedFor detaches the call from the request serving it, which ends
// with a question.
func (b *bridgedCall) parkedFor() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stop()
	b.parked = true
}

// parkedCall is a bridged call waiting for its client's answer.
type parkedCall struct {
	p    *upstream.ParkedCall
	call *bridgedCall
	// release ends the wait for the answer's deadline.
	release context.CancelFunc
}

// parkedCalls hold the bridged calls waiting for an answer, by the
// requestState their client was given.
type parkedCalls struct {
	mu      sync.Mutex
	byState map[string]parkedCall
}

// park holds p, a question of call, until its client answers, the call's
// upstream gives up on it (within) or the gateway stops (until ends), and
// returns the requestState the client names it by: random, so that nobody
// else's call can name it.
func (pc *parkedCalls) park(p *upstream.ParkedCall, call *bridgedCall, until context.Context, within time.Duration) (string, bool) {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false
	}
	state := "taskgate-" + base64.RawURLEncoding.EncodeToString(b[:])
	call.parkedFor()
	pc.mu.Lock()
	if pc.byState == nil {
		pc.byState = map[string]parkedCall{}
	}
	deadline, release := context.WithTimeout(until, within)
	pc.byState[state] = parkedCall{p: p, call: call, release: release}
	pc.mu.Unlock()
	context.AfterFunc(deadline, func() {
		if c, ok := pc.take(state, call.user, call.up, call.tool); ok {
			c.p.Abandon()
		}
	})
	return state, true
}

// take returns, and forgets, the parked call state names, if user made it
// to tool of up.
func (pc *parkedCalls) take(state, user string, up *upstream.Upstream, tool string) (parkedCall, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	c, ok := pc.byState[state]
	if !ok || c.call.user != user || c.call.up != up || c.call.tool != tool {
		return parkedCall{}, false
	}
	delete(pc.byState, state)
	c.release()
	return c, true
}

// bridgeable returns the capabilities a 2026-07-28 call's relay session
// declares so that the upstream may ask its client: those of its
// per-request clientCapabilities that can be asked, or nil.
func bridgeable(meta map[string]json.RawMessage) json.RawMessage {
	raw, ok := meta[mcp.MetaKeyClientCapabilities]
	if !ok {
		return nil
	}
	var caps askingCaps
	if json.Unmarshal(raw, &caps) != nil {
		return nil
	}
	return caps.declared()
}

// holds reports whether state names a call parked for user's call of
// tool of up, as take would find it.
func (pc *parkedCalls) holds(state, user string, up *upstream.Upstream, tool string) bool {
	if state == "" {
		return false
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	c, ok := pc.byState[state]
	return ok && c.call.user == user && c.call.up == up && c.call.tool == tool
}

// requestState is the requestState c names, "" for none.
func requestState(c *passThroughCall) string {
	raw, ok := c.params["requestState"]
	if !ok {
		return ""
	}
	var state string
	if json.Unmarshal(raw, &state) != nil {
		return ""
	}
	return state
}

// resumeParked answers a parked call with the client's call c, which names
// it by its requestState, and relays the rest of the call. It returns
// false, having written nothing, when c names no call parked for it.
func (g *Gateway) resumeParked(w http.ResponseWriter, r *http.Request, c *passThroughCall) bool {
	parked, ok := g.parked.take(requestState(c), userOf(r), c.up, c.tool)
	if !ok {
		return false
	}
	var responses map[string]json.RawMessage
	_ = json.Unmarshal(c.params["inputResponses"], &responses)
	answer, ok := responses[parked.p.Key()]
	if !ok {
		// Without its answer the call cannot go on; the client hears why.
		parked.p.Abandon()
		writeInvalidParams(w, c.id, "inputResponses has no answer to "+parked.p.Key()+", which the requestState asks for", "inputResponses."+parked.p.Key())
		return true
	}
	defer parked.call.served(parked.call.serving(r))
	resp, err := parked.p.Resume(r.Context(), c.id, answer)
	if err != nil {
		g.log.Warn("an answer to an upstream's question was not delivered", "upstream", c.up.Name(), "tool", c.tool, "err", err)
		writeUnavailable(w, &forwarded{up: c.up, tool: c.tool, id: c.id})
		return true
	}
	defer resp.Body.Close()
	g.relay(w, resp)
	return true
}

// writeInvalidParams answers request id with -32602, message and the path
// of the missing value, as an invalid argument is answered.
func writeInvalidParams(w http.ResponseWriter, id json.RawMessage, message, path string) {
	e, _ := json.Marshal(rpcError(jsonrpc.CodeInvalidParams, message, map[string]any{"reason": taskwire.ReasonInvalidArguments, "path": path}))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(append(answerWith(id, e), '\n'))
}

// A 2025-11-25 client that can be asked, calling a stateless upstream or a
// stdio child whose session is 2026-07-28, is asked by input_required
// results there: forwardAsking turns each of their input requests into a
// request of its own on the call's stream, and sends the call again with
// the answers, as the go-sdk's client does on the SDK path.

// maxInputRounds bounds the input_required rounds of one bridged call.
const maxInputRounds = 16

// forwardAsking forwards c, declaring the client's capabilities, and
// bridges the upstream's input_required answers to the client, asked
// through ask: to a stateless HTTP upstream (viaForward) or on a
// 2026-07-28 stdio child's connection. It returns false, having written
// nothing, when the upstream cannot take the call after all.
func (g *Gateway) forwardAsking(w http.ResponseWriter, ctx context.Context, c *passThroughCall, info *relayInfo, user string, ask func(question) (json.RawMessage, bool), viaForward bool) bool {
	// The whole call, its client's answers included, is bounded as the SDK
	// path bounds it.
	ctx, cancel := context.WithTimeout(ctx, c.up.Timeout())
	defer cancel()
	started := false
	send := func(msg []byte) {
		_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", oneLine(msg))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	call := c
	for round := 0; ; round++ {
		resp, f, err := sendAsking(ctx, call, info, user, viaForward)
		switch {
		case errors.Is(err, upstream.ErrNotForwardable) && !started:
			return false
		case err != nil:
			g.log.Warn("forwarding a pass-through call failed", "upstream", f.up.Name(), "tool", f.tool, "err", err)
			if !started {
				writeUnavailable(w, f)
			} else {
				send(unavailable(f))
			}
			return true
		case resp.StatusCode/100 != 2:
			if !started {
				g.relayFailure(w, f, resp, http.StatusOK)
			} else {
				send(unavailable(f))
			}
			resp.Body.Close()
			return true
		}
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		answer := passEvents(resp, f.id, send)
		resp.Body.Close()
		if answer == nil {
			if ctx.Err() == nil {
				send(unavailable(f))
			}
			return true
		}
		requests, state, ok := inputRequired(answer)
		if !ok || round == maxInputRounds {
			send(answer)
			return true
		}
		responses, failure := askInputs(ctx, requests, ask, send)
		if failure != nil {
			send(answerWith(f.id, failure))
			return true
		}
		call = call.retried(responses, state)
	}
}

// sendAsking sends one round of a call of a 2025-11-25 client that can be
// asked, declaring its capabilities: forwarded to a stateless upstream
// (viaForward), or relayed to a stdio child whose session is 2026-07-28
// (which, too, asks in the call's answer).
func sendAsking(ctx context.Context, c *passThroughCall, info *relayInfo, user string, viaForward bool) (*http.Response, *forwarded, error) {
	if viaForward {
		f, ok := c.stateless(info, true)
		if !ok {
			return nil, &forwarded{up: c.up, tool: c.tool, id: c.id}, upstream.ErrNotForwardable
		}
		resp, err := f.up.Forward(ctx, f.body, forwardHeader(f.tool))
		return resp, f, err
	}
	f := &forwarded{up: c.up, tool: c.tool, id: c.id}
	call := c.relayed()
	call.LogLevel, call.Capabilities, call.ClientCapabilities, call.User = info.logLevel, info.caps, info.caps, user
	call.Unanswered = unavailable(f)
	resp, err := c.up.RelayCall(ctx, call)
	return resp, f, err
}

// oneLine returns msg, a JSON message, without line breaks, to go in one
// event's data line: an upstream's may be pretty-printed, or have come as
// several data lines.
func oneLine(msg []byte) []byte {
	if !bytes.ContainsAny(msg, "\r\n") {
		return msg
	}
	var b bytes.Buffer
	if json.Compact(&b, msg) != nil {
		// Not JSON: the client would refuse it anyway, but the stream
		// stays whole.
		return bytes.ReplaceAll(bytes.ReplaceAll(msg, []byte("\r"), nil), []byte("\n"), nil)
	}
	return b.Bytes()
}

// forwardHeader is the HTTP header of a forwarded tools/call of tool.
func forwardHeader(tool string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", tool)
	return h
}

// passEvents sends every message of resp but the answer to request id,
// which it returns; nil when the response ended without it.
func passEvents(resp *http.Response, id json.RawMessage, send func([]byte)) []byte {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardedJSON))
		if err != nil || len(body) == 0 {
			return nil
		}
		return body
	}
	var answer []byte
	events := sse.NewEventReader(resp.Body, mcp.DefaultMaxEventSize, func(_ string, data []byte) []byte {
		if len(data) == 0 || answer != nil {
			return nil
		}
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(data, &env) == nil && env.Method == "" && bytes.Equal(bytes.TrimSpace(env.ID), bytes.TrimSpace(id)) {
			answer = bytes.Clone(data)
			return nil
		}
		send(data)
		return nil
	})
	buf := make([]byte, 512)
	for answer == nil {
		if _, err := events.Read(buf); err != nil {
			break
		}
	}
	events.Close()
	return answer
}

// maxForwardedJSON bounds a forwarded call's answer that comes as one JSON
// body and must be read whole.
const maxForwardedJSON = 32 << 20

// inputRequired returns the input requests and request state of an
// input_required answer; false for any other.
func inputRequired(answer []byte) (map[string]json.RawMessage, json.RawMessage, bool) {
	if !bytes.Contains(answer, []byte(`"input_required"`)) {
		return nil, nil, false
	}
	var msg struct {
		Result *struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  json.RawMessage            `json:"requestState"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &msg) != nil || msg.Result == nil || msg.Result.ResultType != "input_required" || len(msg.Result.InputRequests) == 0 {
		return nil, nil, false
	}
	return msg.Result.InputRequests, msg.Result.RequestState, true
}

// askInputs asks the client each input request, as a request on the call's
// stream, and returns the answers by their keys; or the JSON-RPC error the
// call ends with, when the client refused one or went away.
func askInputs(ctx context.Context, requests map[string]json.RawMessage, ask func(question) (json.RawMessage, bool), send func([]byte)) (map[string]json.RawMessage, json.RawMessage) {
	answers := make(map[string]json.RawMessage, len(requests))
	for _, key := range slices.Sorted(maps.Keys(requests)) {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(requests[key], &req) != nil || req.Method == "" {
			return nil, inputFailure(fmt.Sprintf("the upstream's input request %q names no method", key))
		}
		q := &inputQuestion{method: req.Method, answer: make(chan []byte, 1)}
		id, ok := ask(q)
		if !ok {
			return nil, inputFailure("the client's session ended")
		}
		msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": req.Method, "params": req.Params})
		if err != nil {
			return nil, inputFailure(err.Error())
		}
		send(msg)
		select {
		case got := <-q.answer:
			var resp struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(got, &resp) != nil || resp.Error != nil || resp.Result == nil {
				if resp.Error != nil {
					return nil, resp.Error
				}
				return nil, inputFailure("the client's answer to " + req.Method + " is not a result")
			}
			answers[key] = resp.Result
		case <-ctx.Done():
			return nil, inputFailure("the call ended before the client answered")
		}
	}
	return answers, nil
}

// inputQuestion is a bridged input request: its answer goes back to the
// call that waits for it.
type inputQuestion struct {
	method string
	answer chan []byte
}

func (q *inputQuestion) Method() string { return q.method }

func (q *inputQuestion) Answer(_ context.Context, msg []byte) error {
	select {
	case q.answer <- bytes.Clone(msg):
		return nil
	default:
		return errors.New("the question was answered already")
	}
}

// retried is c sent again with the client's answers to an input_required
// result, and its request state.
func (c *passThroughCall) retried(responses map[string]json.RawMessage, state json.RawMessage) *passThroughCall {
	out := *c
	out.params = maps.Clone(c.params)
	out.params["inputResponses"], _ = json.Marshal(responses)
	if state != nil {
		out.params["requestState"] = state
	} else {
		delete(out.params, "requestState")
	}
	return &out
}

// inputFailure is the error a bridged call ends with when its input could
// not be asked or answered: the upstream's question went unanswered.
func inputFailure(message string) json.RawMessage {
	b, _ := json.Marshal(rpcError(jsonrpc.CodeInternalError, message, map[string]any{"reason": ledger.ReasonUpstreamInputRequired}))
	return b
}

// answerWith is the answer to request id that is the error e.
func answerWith(id, e json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]json.RawMessage{"jsonrpc": json.RawMessage(`"2.0"`), "id": id, "error": e})
	return b
}
