package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sse"
)

// relayProtocol is the protocol of the session RelayCall relays in.
const relayProtocol = "2025-11-25"

// How long an upstream that could not open a relay session is left alone
// before it is asked again: after a refusal, and after a failure that may
// pass.
const (
	relayRetryRefused   = time.Minute
	relayRetryTransient = 5 * time.Second
)

// relayResumes bounds how often a relayed call's event stream is resumed
// after the upstream closed it before the answer.
const relayResumes = 3

// maxRelayedJSON bounds a relayed call's answer when it comes as one JSON
// body rather than an event stream.
const maxRelayedJSON = 32 << 20

// errRelayRefused: the upstream cannot hold a 2025-11-25 relay session.
var errRelayRefused = errors.New("upstream offers no 2025-11-25 session")

// RelayedCall is a pass-through tools/call of a 2025-11-25 client, to be
// relayed as bytes in the gateway's own 2025-11-25 session with the
// upstream. The session is shared by every client, so the call goes out
// under a request ID and a progress token of the gateway's, and only its
// own answer and progress come back, under the client's ID and token.
type RelayedCall struct {
	// ID is the client's request ID.
	ID json.RawMessage
	// Tool is the upstream's name of the tool.
	Tool string
	// Params are the call's other params (arguments above all), sent as
	// they are.
	Params map[string]json.RawMessage
	// Meta is the request's _meta, without a progress token; may be nil.
	Meta map[string]json.RawMessage
	// ProgressToken is the client's, or nil.
	ProgressToken json.RawMessage
	// LogLevel is the level the client set: the upstream's log messages
	// on the call's stream at it or above are relayed. Empty relays none.
	LogLevel mcp.LoggingLevel
	// Unanswered is the message that ends the client's event stream when
	// the upstream's ends without the answer and cannot be resumed.
	Unanswered []byte
	// ServerInfo is set when the client speaks 2026-07-28: a result then
	// carries resultType "complete", and ServerInfo as its _meta
	// serverInfo where the upstream named none, as a result of the
	// gateway's own server does. nil leaves results as they are.
	ServerInfo json.RawMessage
}

// relaySession is the gateway's own 2025-11-25 session with an HTTP
// upstream, opened on first use. It declares no client capabilities, so
// the upstream asks it nothing but pings, which its standalone stream
// answers. It asks an upstream that logs to log at debug, the lowest
// level, and each call's messages are filtered by its client's level.
type relaySession struct {
	// lock is held (a value in it) to read or open the session.
	lock chan struct{}
	id   string // Mcp-Session-Id; empty until opened
	// jsonAnswers: the upstream answers requests with one JSON body, so
	// progress travels on the standalone stream, where a relayed call's
	// client cannot be reached; calls with a progress token are not relayed.
	jsonAnswers bool
	seq         uint64
	// stop ends the standalone stream's listener.
	stop context.CancelFunc
	// failedAt and retryAfter hold back reopening after a failure.
	failedAt   time.Time
	retryAfter time.Duration
}

// relaySent is how a relayed call went out.
type relaySent struct {
	sid   string
	id    json.RawMessage
	token json.RawMessage
}

// RelayCall sends c in the relay session and returns the upstream's
// response, holding only c's answer and progress, under c's request ID and
// progress token; the caller relays it and closes its body. It fails with
// an error wrapping ErrNotForwardable, having sent nothing, when the
// upstream is not connected, holds no relay session or could not open one
// now, or would send c's progress where it cannot be relayed; the caller
// then takes another path. A stdio upstream has no relay session: c goes
// out on its child's one connection instead (relayStdio). A session the
// upstream has forgotten (HTTP 404) is opened again and the call sent once
// more: a 404 means the call did not run. A stream the upstream ends before the answer
// is resumed from its last event, as a client of the session would; one
// that cannot be is ended with c.Unanswered. A call whose answer is given
// up on (the caller's context ended, or the upstream's timeout) is
// cancelled upstream.
func (u *Upstream) RelayCall(ctx context.Context, c *RelayedCall) (*http.Response, error) {
	if u.httpClient == nil {
		return u.relayStdio(ctx, c)
	}
	if !u.connected() {
		return nil, ErrNotForwardable
	}
	ctx, cancel := u.bound(ctx)
	start := time.Now()
	resp, sent, err := u.sendRelayed(ctx, c)
	if err != nil {
		cancel()
		if !errors.Is(err, ErrNotForwardable) && u.observe != nil {
			u.observe(u.cfg.Name, "tools/call", time.Since(start), err)
		}
		return nil, err
	}
	b := &relayedBody{u: u, call: c, sent: sent, ctx: ctx, cancel: cancel, start: start}
	if mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" {
		b.src = sse.NewEventReader(resp.Body, mcp.DefaultMaxEventSize, b.restore)
		resp.Body = b
		return resp, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRelayedJSON+1))
	resp.Body.Close()
	if err == nil && len(data) > maxRelayedJSON {
		err = fmt.Errorf("the answer exceeds %d bytes", maxRelayedJSON)
	}
	var out []byte
	if err == nil {
		if out = b.restore("", data); out == nil {
			err = errors.New("the answer is not the call's")
		}
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("upstream %s: read a relayed answer: %w", u.cfg.Name, err)
	}
	b.src = io.NopCloser(bytes.NewReader(out))
	resp.Body = b
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

const sessionIDHeader = "Mcp-Session-Id"

func (u *Upstream) connected() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conn != nil
}

// Timeout bounds one call to the upstream.
func (u *Upstream) Timeout() time.Duration { return u.timeout }

// sendRelayed posts c in the relay session, opening it first if need be,
// and returns a 2xx response and how the call went out.
func (u *Upstream) sendRelayed(ctx context.Context, c *RelayedCall) (*http.Response, relaySent, error) {
	for attempt := 0; ; attempt++ {
		sid, n, jsonAnswers, err := u.relaySession(ctx)
		if err != nil {
			return nil, relaySent{}, err
		}
		if jsonAnswers && c.ProgressToken != nil {
			return nil, relaySent{}, fmt.Errorf("%w: its progress would travel on the relay session's own stream", ErrNotForwardable)
		}
		sent := relaySent{sid: sid, id: json.RawMessage(strconv.Quote("taskgate-relay-" + strconv.FormatUint(n, 10)))}
		meta := c.Meta
		if c.ProgressToken != nil {
			sent.token = sent.id
			meta = make(map[string]json.RawMessage, len(c.Meta)+1)
			for k, v := range c.Meta {
				meta[k] = v
			}
			meta["progressToken"] = sent.token
		}
		params := make(map[string]any, len(c.Params)+2)
		for k, v := range c.Params {
			params[k] = v
		}
		params["name"] = c.Tool
		if len(meta) > 0 {
			params["_meta"] = meta
		}
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": sent.id, "method": "tools/call", "params": params})
		if err != nil {
			return nil, relaySent{}, fmt.Errorf("upstream %s: encode a relayed call: %w", u.cfg.Name, err)
		}
		resp, err := u.postRelay(ctx, sid, body)
		if err != nil {
			if ctx.Err() != nil {
				// The call may have reached the upstream before its
				// answer was given up on.
				go u.cancelRelayed(sent)
			}
			return nil, relaySent{}, err
		}
		if resp.StatusCode == http.StatusNotFound && attempt == 0 {
			resp.Body.Close()
			u.forgetRelaySession(sid)
			continue
		}
		if resp.StatusCode/100 != 2 {
			resp.Body.Close()
			return nil, relaySent{}, fmt.Errorf("upstream %s answered a relayed call with HTTP %d", u.cfg.Name, resp.StatusCode)
		}
		return resp, sent, nil
	}
}

// relaySession returns the relay session's ID, opening the session if
// need be, and the sequence number of a new request in it.
func (u *Upstream) relaySession(ctx context.Context) (string, uint64, bool, error) {
	r := &u.relay
	select {
	case r.lock <- struct{}{}:
	case <-ctx.Done():
		return "", 0, false, ctx.Err()
	}
	defer func() { <-r.lock }()
	if r.id == "" {
		if !r.failedAt.IsZero() && time.Since(r.failedAt) < r.retryAfter {
			return "", 0, false, ErrNotForwardable
		}
		// Opened for every caller, so not bound to this one's context.
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), u.timeout)
		id, jsonAnswers, err := u.openRelaySession(octx)
		cancel()
		if err != nil {
			r.failedAt, r.retryAfter = time.Now(), relayRetryTransient
			if errors.Is(err, errRelayRefused) {
				r.retryAfter = relayRetryRefused
			}
			u.logger.Info("no relay session with the upstream for now; pass-through calls take the SDK path", "err", err, "retry_after", r.retryAfter)
			return "", 0, false, fmt.Errorf("%w: %w", ErrNotForwardable, err)
		}
		lctx, stop := context.WithCancel(context.Background())
		r.id, r.jsonAnswers, r.stop, r.failedAt = id, jsonAnswers, stop, time.Time{}
		go u.listenRelay(lctx, id)
	}
	r.seq++
	return r.id, r.seq, r.jsonAnswers, nil
}

// forgetRelaySession drops the relay session sid, unless it has already
// been replaced.
func (u *Upstream) forgetRelaySession(sid string) {
	r := &u.relay
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	if r.id == sid {
		r.id = ""
		r.stop()
	}
}

// closeRelaySession ends the relay session, if one is open, as the
// upstream shuts down.
func (u *Upstream) closeRelaySession() {
	r := &u.relay
	r.lock <- struct{}{}
	sid := r.id
	if sid != "" {
		r.id = ""
		r.stop()
	}
	<-r.lock
	if sid != "" {
		u.deleteRelaySession(sid, time.Second)
	}
}

// openRelaySession initializes a 2025-11-25 session that declares no
// client capabilities, and reports whether the upstream answers requests
// with JSON bodies. An upstream that answers with another protocol version
// or without a session ID cannot hold one: errRelayRefused.
func (u *Upstream) openRelaySession(ctx context.Context) (string, bool, error) {
	init, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "taskgate-relay-init", "method": "initialize", "params": map[string]any{
		"protocolVersion": relayProtocol, "capabilities": map[string]any{}, "clientInfo": u.impl,
	}})
	if err != nil {
		return "", false, err
	}
	resp, err := u.postRelay(ctx, "", init)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	sid := resp.Header.Get(sessionIDHeader)
	if resp.StatusCode/100 != 2 {
		return "", false, fmt.Errorf("%w: initialize answered HTTP %d", errRelayRefused, resp.StatusCode)
	}
	jsonAnswers := mediaType(resp.Header.Get("Content-Type")) != "text/event-stream"
	msg, err := firstMessage(resp)
	var res struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Logging json.RawMessage `json:"logging"`
			} `json:"capabilities"`
		} `json:"result"`
	}
	switch {
	case err != nil:
		err = fmt.Errorf("read the answer to initialize: %w", err)
	case json.Unmarshal(msg, &res) != nil || res.Result == nil:
		err = fmt.Errorf("%w: initialize answered %.200s", errRelayRefused, msg)
	case res.Result.ProtocolVersion != relayProtocol || sid == "":
		err = fmt.Errorf("%w: initialize offered protocol %q and session %q", errRelayRefused, res.Result.ProtocolVersion, sid)
	}
	if err == nil {
		var ack *http.Response
		if ack, err = u.postRelay(ctx, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err == nil {
			ack.Body.Close()
			if ack.StatusCode/100 != 2 {
				err = fmt.Errorf("notifications/initialized answered HTTP %d", ack.StatusCode)
			}
		}
	}
	if err == nil && len(res.Result.Capabilities.Logging) > 0 && string(res.Result.Capabilities.Logging) != "null" {
		u.relayLogLevel(ctx, sid)
	}
	if err != nil {
		if sid != "" {
			go u.deleteRelaySession(sid, u.timeout)
		}
		return "", false, err
	}
	return sid, jsonAnswers, nil
}

// relayLogLevel asks the upstream to log at upstreamLogLevel in relay
// session sid. A refusal costs relayed calls their log messages only.
func (u *Upstream) relayLogLevel(ctx context.Context, sid string) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "taskgate-relay-log-level", "method": "logging/setLevel", "params": map[string]any{"level": upstreamLogLevel}})
	resp, err := u.postRelay(ctx, sid, body)
	if err == nil {
		var msg []byte
		msg, err = firstMessage(resp)
		resp.Body.Close()
		if err == nil && member(msg, "result") == nil {
			err = fmt.Errorf("logging/setLevel answered %.200s", msg)
		}
	}
	if err != nil {
		u.logger.Warn("the upstream refused logging/setLevel in the relay session; relayed calls get no log messages", "err", err)
	}
}

// listenRelay holds the relay session's standalone stream open, as a
// client of the session does, so that the upstream's pings reach the
// gateway and are answered, until ctx ends or the upstream has forgotten
// the session.
func (u *Upstream) listenRelay(ctx context.Context, sid string) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.cfg.URL, nil)
		if err != nil {
			return
		}
		u.relayHeaders(req, sid)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := u.httpTransport.RoundTrip(req)
		if err == nil {
			switch {
			case resp.StatusCode == http.StatusNotFound:
				resp.Body.Close()
				u.forgetRelaySession(sid)
				return
			case resp.StatusCode/100 != 2:
				// No standalone stream offered: nothing will come on it.
				resp.Body.Close()
				return
			}
			events := sse.NewEventReader(resp.Body, mcp.DefaultMaxEventSize, func(_ string, data []byte) []byte {
				u.answerRelayRequest(sid, data)
				return nil
			})
			_, _ = io.Copy(io.Discard, events)
			events.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// answerRelayRequest answers a request the upstream sent in the relay
// session: a ping with an empty result, anything else (the session
// declared no capabilities) with -32601.
func (u *Upstream) answerRelayRequest(sid string, data []byte) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(data, &msg) != nil || msg.Method == "" || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return
	}
	answer := map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{}}
	if msg.Method != "ping" {
		delete(answer, "result")
		answer["error"] = map[string]any{"code": -32601, "message": fmt.Sprintf("%s is not supported by this client", msg.Method)}
	}
	body, _ := json.Marshal(answer)
	go u.postBestEffort(sid, body)
}

// firstMessage reads the first JSON-RPC message of a JSON or event-stream
// response.
func firstMessage(resp *http.Response) ([]byte, error) {
	if mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		return io.ReadAll(io.LimitReader(resp.Body, maxRelayedJSON))
	}
	var first []byte
	r := sse.NewEventReader(resp.Body, mcp.DefaultMaxEventSize, func(_ string, data []byte) []byte {
		if first == nil && len(data) > 0 {
			first = bytes.Clone(data)
		}
		return nil
	})
	buf := make([]byte, 512)
	for first == nil {
		// Read passes on nothing: the filter drops every event.
		if _, err := r.Read(buf); err != nil && first == nil {
			return nil, err
		}
	}
	return first, nil
}

// relayHeaders sets the headers of a message in session sid (none for
// initialize), with the configured ones.
func (u *Upstream) relayHeaders(req *http.Request, sid string) {
	req.Header.Set("Mcp-Protocol-Version", relayProtocol)
	if sid != "" {
		req.Header.Set(sessionIDHeader, sid)
	}
	for k, v := range u.cfg.Headers {
		req.Header.Set(k, v)
	}
}

// postRelay posts one message in session sid.
func (u *Upstream) postRelay(ctx context.Context, sid string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	u.relayHeaders(req, sid)
	resp, err := u.httpTransport.RoundTrip(req)
	if err != nil {
		if ctx.Err() == nil {
			u.markSuspect()
		}
		return nil, fmt.Errorf("upstream %s: relay: %w", u.cfg.Name, err)
	}
	return resp, nil
}

// relayedBody is a relayed call's response body: the call's own answer and
// progress under the client's ID and token, nothing else of the shared
// session.
type relayedBody struct {
	u      *Upstream
	call   *RelayedCall
	sent   relaySent
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	src    io.ReadCloser
	// lastEventID and resumes serve resuming the stream.
	lastEventID string
	resumes     int
	// tail is the message that ends a stream cut off without the answer.
	tail     []byte
	ended    bool
	answered bool
	closed   bool
}

func (b *relayedBody) Read(p []byte) (int, error) {
	for {
		if len(b.tail) > 0 {
			n := copy(p, b.tail)
			b.tail = b.tail[n:]
			return n, nil
		}
		if b.ended {
			return 0, io.EOF
		}
		n, err := b.src.Read(p)
		if n > 0 || err == nil {
			return n, nil
		}
		if b.answered {
			return 0, err
		}
		// The stream ended before the answer.
		if b.ctx.Err() == nil && b.lastEventID != "" && b.resumes < relayResumes && b.resume() {
			continue
		}
		b.ended = true
		if errors.Is(b.ctx.Err(), context.Canceled) || b.call.Unanswered == nil {
			return 0, err // the caller gave up: nobody is waiting
		}
		b.u.logger.Warn("a relayed call's stream ended without its answer", "tool", b.call.Tool, "err", err)
		b.tail = append(append([]byte("event: message\ndata: "), b.call.Unanswered...), "\n\n"...)
	}
}

// resume reopens the call's stream after its last event, as a client of
// the session resumes one (GET with Last-Event-ID).
func (b *relayedBody) resume() bool {
	b.resumes++
	req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.u.cfg.URL, nil)
	if err != nil {
		return false
	}
	b.u.relayHeaders(req, b.sent.sid)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", b.lastEventID)
	resp, err := b.u.httpTransport.RoundTrip(req)
	if err != nil {
		return false
	}
	if resp.StatusCode/100 != 2 || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		resp.Body.Close()
		return false
	}
	b.src.Close()
	b.src = sse.NewEventReader(resp.Body, mcp.DefaultMaxEventSize, b.restore)
	return true
}

// restore passes one message of the call's stream to the client: the
// answer and progress under the client's ID and token, and log messages
// its client's level admits, as they are. A request from the upstream is
// answered here; everything else is dropped.
func (b *relayedBody) restore(id string, data []byte) []byte {
	if id != "" {
		b.lastEventID = id
	}
	if len(data) == 0 {
		return nil
	}
	if out, ok := b.answer(data); ok {
		return out
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProgressToken json.RawMessage  `json:"progressToken"`
			Level         mcp.LoggingLevel `json:"level"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil {
		return nil
	}
	if msg.Method == methodLog && len(msg.ID) == 0 {
		if logLevelAdmits(b.call.LogLevel, msg.Params.Level) {
			return data
		}
		return nil
	}
	switch {
	case msg.Method == "" && bytes.Equal(msg.ID, b.sent.id):
		out, ok := withMember(data, "id", b.call.ID)
		if ok && b.call.ServerInfo != nil {
			out, ok = completeResult(out, b.call.ServerInfo)
		}
		if !ok {
			return nil
		}
		b.gotAnswer()
		return out
	case msg.Method != "" && len(msg.ID) > 0:
		b.u.answerRelayRequest(b.sent.sid, data)
	case msg.Method == "notifications/progress" && b.sent.token != nil && bytes.Equal(msg.Params.ProgressToken, b.sent.token):
		var params map[string]json.RawMessage
		if json.Unmarshal(member(data, "params"), &params) != nil {
			return nil
		}
		params["progressToken"] = b.call.ProgressToken
		p, err := json.Marshal(params)
		if err != nil {
			return nil
		}
		out, _ := withMember(data, "params", p)
		return out
	}
	return nil
}

// answer recognises the call's answer as go-sdk and most servers spell it,
// {"jsonrpc":"2.0","id":ID,"result"|"error":…}, and puts the client's ID in
// by splicing, without decoding a result that may be large. Anything else
// takes the general path.
func (b *relayedBody) answer(data []byte) ([]byte, bool) {
	head := `{"jsonrpc":"2.0","id":` + string(b.sent.id) + `,`
	rest, ok := bytes.CutPrefix(data, []byte(head))
	if !ok || !(bytes.HasPrefix(rest, []byte(`"result":`)) || bytes.HasPrefix(rest, []byte(`"error":`))) {
		return nil, false
	}
	var annotation []byte
	if b.call.ServerInfo != nil {
		if annotation, ok = completeAnnotation(rest, b.call.ServerInfo); !ok {
			return nil, false
		}
	}
	out := make([]byte, 0, len(data)-len(b.sent.id)+len(b.call.ID)+len(annotation))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, b.call.ID...)
	out = append(out, ',')
	if annotation != nil {
		out = append(out, `"result":{`...)
		out = append(out, annotation...)
		rest = rest[len(`"result":{`):]
	}
	out = append(out, rest...)
	b.gotAnswer()
	return out, true
}

// completeAnnotation returns what a 2026-07-28 result gains after its
// opening brace, for rest, the tail of an answer from its "result" or
// "error" member: resultType and serverInfo, with a comma unless the
// result is empty; nil for an error. It fails, for the general path to
// decode the result, when rest may hold either member already (the words
// appear anywhere in it) or its result is not an object.
func completeAnnotation(rest []byte, serverInfo json.RawMessage) ([]byte, bool) {
	body, ok := bytes.CutPrefix(rest, []byte(`"result":{`))
	if !ok {
		return nil, bytes.HasPrefix(rest, []byte(`"error":`))
	}
	if bytes.Contains(body, []byte(`"resultType"`)) || bytes.Contains(body, []byte(`"_meta"`)) {
		return nil, false
	}
	a := make([]byte, 0, 96+len(serverInfo))
	a = append(a, `"resultType":"complete","_meta":{"`+mcp.MetaKeyServerInfo+`":`...)
	a = append(a, serverInfo...)
	a = append(a, '}')
	if !bytes.HasPrefix(body, []byte("}")) {
		a = append(a, ',')
	}
	return a, true
}

// completeResult returns msg, an answer, with its result annotated as
// completeAnnotation's, having decoded it: the general path.
func completeResult(msg []byte, serverInfo json.RawMessage) ([]byte, bool) {
	raw := member(msg, "result")
	if raw == nil {
		return msg, true // an error answer
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(raw, &res) != nil || res == nil {
		return nil, false
	}
	if _, ok := res["resultType"]; !ok {
		res["resultType"] = json.RawMessage(`"complete"`)
	}
	var meta map[string]json.RawMessage
	if m, ok := res["_meta"]; ok && json.Unmarshal(m, &meta) != nil {
		return nil, false
	}
	if _, ok := meta[mcp.MetaKeyServerInfo]; !ok {
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta[mcp.MetaKeyServerInfo] = serverInfo
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, false
		}
		res["_meta"] = m
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, false
	}
	return withMember(msg, "result", out)
}

func (b *relayedBody) gotAnswer() {
	b.answered = true
	if b.u.observe != nil {
		b.u.observe(b.u.cfg.Name, "tools/call", time.Since(b.start), nil)
	}
}

// Close ends the call; one not answered by then is cancelled upstream.
func (b *relayedBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	var err error
	if b.src != nil {
		err = b.src.Close()
	}
	b.cancel()
	if !b.answered {
		go b.u.cancelRelayed(b.sent)
	}
	return err
}

// cancelRelayed tells the upstream that a relayed call is no longer
// wanted.
func (u *Upstream) cancelRelayed(sent relaySent) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": sent.id}})
	u.postBestEffort(sent.sid, body)
}

func (u *Upstream) postBestEffort(sid string, body []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), u.timeout)
	defer cancel()
	resp, err := u.postRelay(ctx, sid, body)
	if err != nil {
		u.logger.Debug("relay session message not delivered", "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// deleteRelaySession ends session sid at the upstream.
func (u *Upstream) deleteRelaySession(sid string, within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u.cfg.URL, nil)
	if err != nil {
		return
	}
	u.relayHeaders(req, sid)
	if resp, err := u.httpTransport.RoundTrip(req); err == nil {
		resp.Body.Close()
	}
}

// withMember returns the JSON object msg with member key set to v.
func withMember(msg []byte, key string, v json.RawMessage) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return nil, false
	}
	m[key] = v
	out, err := json.Marshal(m)
	return out, err == nil
}

// member returns member key of the JSON object msg, or nil.
func member(msg []byte, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return nil
	}
	return m[key]
}
