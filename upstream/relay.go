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
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sse"
)

// relayProtocol is the protocol of the session RelayCall relays in.
const relayProtocol = "2025-11-25"

// relayIDPrefix begins the request IDs and progress tokens of relayed
// calls, in a relay session or on a stdio child's connection: strings,
// which the go-sdk's own request IDs never are, and apart from the SDK
// path's "taskgate-N" tokens, so a message read names a relayed call or
// none.
const relayIDPrefix = "taskgate-relay-"

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
	// Capabilities are the client capabilities of a client that can be
	// asked questions (elicitation, sampling, roots), as the relay session
	// declares them: the call goes in a relay session of User's that
	// declares exactly these, and Asked carries the upstream's questions to
	// the client. nil: the shared session that declares none.
	Capabilities json.RawMessage
	// User is who makes the call: the tenant's user its credential names.
	User string
	// Asked is given each request the upstream sends on the call's stream
	// (elicitation/create, sampling/createMessage, roots/list) when
	// Capabilities are set. It returns the request ID the client is to see
	// the question under, for the client's answer to be handed to
	// Question.Answer, or false to have the question refused.
	Asked func(q *Question) (json.RawMessage, bool)
	// Park, for a 2026-07-28 client that declared Capabilities in its
	// request, turns the upstream's question into an input_required result:
	// the client asks its user and calls again with the answer. Park is
	// given the call, parked, and returns the requestState that the
	// client's next call names it by; the response ends after the
	// input_required result, and the call waits upstream for
	// ParkedCall.Resume. Returning false refuses the question. Asked is
	// not used when Park is set.
	Park func(p *ParkedCall) (requestState string, ok bool)
	// ClientCapabilities, for a 2026-07-28 client, are those its request
	// declared, which a call in a 2026-07-28 stdio session declares in
	// place of the gateway's, as the SDK path's call does.
	ClientCapabilities json.RawMessage
	// ServerInfo is set when the client speaks 2026-07-28: a result then
	// carries resultType "complete", and ServerInfo as its _meta
	// serverInfo where the upstream named none, as a result of the
	// gateway's own server does. nil leaves results as they are.
	ServerInfo json.RawMessage
}

// relaySession is the gateway's own 2025-11-25 session with an HTTP
// upstream, opened on first use. The shared one declares no client
// capabilities, so the upstream asks it nothing but pings, which its
// standalone stream answers; each of the others declares one set of
// capabilities of clients that can be asked, and the upstream's questions
// on a call's stream go to that call's client. It asks an upstream that
// logs to log at debug, the lowest level, and each call's messages are
// filtered by its client's level.
type relaySession struct {
	// caps are the client capabilities its initialize declares; nil for
	// none.
	caps json.RawMessage
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

// maxAskingRelays bounds the relay sessions for clients that can be
// asked, one per user and set of capabilities; a call that finds no room
// takes the SDK path.
const maxAskingRelays = 32

// relayFor returns the relay session that declares caps for user, made on
// first use, or nil when there is no room for another. A session that can
// be asked is one user's alone: what an upstream keeps of a session (the
// roots it was told, above all) must not pass to another tenant.
func (u *Upstream) relayFor(user string, caps json.RawMessage) *relaySession {
	if caps == nil {
		return &u.relay
	}
	key := user + "\x00" + string(caps)
	u.askingMu.Lock()
	defer u.askingMu.Unlock()
	if r := u.asking[key]; r != nil {
		return r
	}
	if len(u.asking) >= maxAskingRelays {
		return nil
	}
	if u.asking == nil {
		u.asking = map[string]*relaySession{}
	}
	r := &relaySession{lock: make(chan struct{}, 1), caps: caps}
	u.asking[key] = r
	return r
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
		resp.Body = b.newView()
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
		b.close()
		return nil, fmt.Errorf("upstream %s: read a relayed answer: %w", u.cfg.Name, err)
	}
	b.src = io.NopCloser(bytes.NewReader(out))
	resp.Body = b.newView()
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
	r := u.relayFor(c.User, c.Capabilities)
	if r == nil {
		return nil, relaySent{}, fmt.Errorf("%w: it holds %d relay sessions for clients that can be asked already", ErrNotForwardable, maxAskingRelays)
	}
	for attempt := 0; ; attempt++ {
		sid, n, jsonAnswers, err := u.relaySession(ctx, r)
		if err != nil {
			return nil, relaySent{}, err
		}
		if jsonAnswers && (c.ProgressToken != nil || c.Capabilities != nil) {
			return nil, relaySent{}, fmt.Errorf("%w: its progress or questions would travel on the relay session's own stream", ErrNotForwardable)
		}
		sent := relaySent{sid: sid, id: json.RawMessage(strconv.Quote(relayIDPrefix + strconv.FormatUint(n, 10)))}
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
			u.forgetRelaySession(r, sid)
			continue
		}
		if resp.StatusCode/100 != 2 {
			resp.Body.Close()
			return nil, relaySent{}, fmt.Errorf("upstream %s answered a relayed call with HTTP %d", u.cfg.Name, resp.StatusCode)
		}
		return resp, sent, nil
	}
}

// relaySession returns relay session r's ID, opening the session if need
// be, and the sequence number of a new request in it.
func (u *Upstream) relaySession(ctx context.Context, r *relaySession) (string, uint64, bool, error) {
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
		id, jsonAnswers, err := u.openRelaySession(octx, r.caps)
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
		go u.listenRelay(lctx, r, id)
	}
	r.seq++
	return r.id, r.seq, r.jsonAnswers, nil
}

// forgetRelaySession drops r's session sid, unless it has already been
// replaced.
func (u *Upstream) forgetRelaySession(r *relaySession, sid string) {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	if r.id == sid {
		r.id = ""
		r.stop()
	}
}

// closeRelaySessions ends the relay sessions that are open, as the
// upstream shuts down.
func (u *Upstream) closeRelaySessions() {
	u.askingMu.Lock()
	rs := []*relaySession{&u.relay}
	for _, r := range u.asking {
		rs = append(rs, r)
	}
	u.askingMu.Unlock()
	for _, r := range rs {
		u.closeRelaySession(r)
	}
}

// closeRelaySession ends r's session, if one is open.
func (u *Upstream) closeRelaySession(r *relaySession) {
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

// openRelaySession initializes a 2025-11-25 session that declares caps
// (none when nil), and reports whether the upstream answers requests with
// JSON bodies. An upstream that answers with another protocol version or
// without a session ID cannot hold one: errRelayRefused.
func (u *Upstream) openRelaySession(ctx context.Context, caps json.RawMessage) (string, bool, error) {
	if caps == nil {
		caps = json.RawMessage(`{}`)
	}
	init, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "taskgate-relay-init", "method": "initialize", "params": map[string]any{
		"protocolVersion": relayProtocol, "capabilities": caps, "clientInfo": u.impl,
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
func (u *Upstream) listenRelay(ctx context.Context, r *relaySession, sid string) {
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
				u.forgetRelaySession(r, sid)
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

// answerRelayRequest answers a request the upstream sent in a relay
// session that no client is asked: a ping with an empty result, anything
// else with -32601 (a question on the standalone stream names no call
// whose client could answer it).
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
	// view is the body being read now (relayView); nil while the call is
	// parked for its client's answer. parking: the input_required result
	// that parks it is being read out. asked numbers the call's questions.
	view    atomic.Pointer[relayView]
	parking bool
	asked   int
}

// buffered is how much of the event being read src holds still.
func buffered(src io.Reader) int {
	if b, ok := src.(interface{ Buffered() int }); ok {
		return b.Buffered()
	}
	return 0
}

// relayView is the body one request reads of a relayed call: the call's
// first request, or, once a question parked the call, the request that
// answered it. Only the call's current view reads and closes it; an
// earlier one reads as ended and closes nothing, so that the call waits
// upstream for ParkedCall.Resume or Abandon.
type relayView struct{ b *relayedBody }

func (b *relayedBody) newView() *relayView {
	v := &relayView{b: b}
	b.view.Store(v)
	return v
}

func (v *relayView) Read(p []byte) (int, error) {
	if v.b.view.Load() != v {
		return 0, io.EOF
	}
	return v.b.read(p)
}

func (v *relayView) Close() error {
	if v.b.view.Load() != v {
		return nil
	}
	return v.b.close()
}

func (b *relayedBody) read(p []byte) (int, error) {
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
		if b.parking && buffered(b.src) == 0 {
			// The input_required result has been read whole: the request
			// that reads it ends here, and the call waits upstream.
			b.parking = false
			b.view.Store(nil)
		}
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
		if out, ok := b.ask(msg.Method, msg.ID, data); ok {
			return out
		}
		b.u.answerRelayRequest(b.sent.sid, data)
	case msg.Method == methodElicitationComplete && b.call.Asked != nil:
		return data
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

// ask passes a question the upstream sent on the call's stream to the
// call's client, under the ID Asked gives it.
func (b *relayedBody) ask(method string, id json.RawMessage, data []byte) ([]byte, bool) {
	if b.call.Asked == nil && b.call.Park == nil {
		return nil, false
	}
	switch method {
	case methodElicit, methodCreateMessage, methodListRoots:
	default:
		return nil, false
	}
	q := &Question{u: b.u, sid: b.sent.sid, id: bytes.Clone(id), method: method}
	if b.call.Park != nil {
		return b.park(q, member(data, "params"))
	}
	clientID, ok := b.call.Asked(q)
	if !ok {
		return nil, false
	}
	return withMember(data, "id", clientID)
}

// park ends the response with q as the input_required result of a
// 2026-07-28 call, and parks the call until its client answers.
func (b *relayedBody) park(q *Question, params json.RawMessage) ([]byte, bool) {
	b.asked++
	key := "taskgate-ask-" + strconv.Itoa(b.asked)
	p := &ParkedCall{b: b, q: q, key: key}
	state, ok := b.call.Park(p)
	if !ok {
		return nil, false
	}
	method, _ := json.Marshal(q.method)
	request := map[string]json.RawMessage{"method": method}
	if params != nil {
		request["params"] = params
	}
	result, err := json.Marshal(map[string]any{
		"resultType": "input_required", "inputRequests": map[string]any{key: request}, "requestState": state,
		"_meta": map[string]json.RawMessage{mcp.MetaKeyServerInfo: b.call.ServerInfo},
	})
	if err != nil {
		return nil, false
	}
	out, err := json.Marshal(map[string]json.RawMessage{"jsonrpc": json.RawMessage(`"2.0"`), "id": b.call.ID, "result": result})
	if err != nil {
		return nil, false
	}
	b.parking = true
	// A call its client never comes back for ends with the upstream's
	// timeout, as any relayed call does.
	context.AfterFunc(b.ctx, p.Abandon)
	return out, true
}

// ParkedCall is a relayed call of a 2026-07-28 client whose upstream
// asked a question, which reached the client as an input_required result
// under Key; the call waits upstream for the answer.
type ParkedCall struct {
	mu  sync.Mutex
	b   *relayedBody
	q   *Question
	key string
	// done: resumed or abandoned.
	done bool
}

// Key is the inputRequests key the client answers under.
func (p *ParkedCall) Key() string { return p.key }

// Resume sends the client's answer (its inputResponses entry) to the
// upstream and returns the call's response again, to relay as before:
// its answer comes under id, the request ID of the client's new call. A
// call already resumed, or abandoned, or whose upstream refused the
// answer fails.
func (p *ParkedCall) Resume(ctx context.Context, id json.RawMessage, answer json.RawMessage) (*http.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return nil, errors.New("the call is no longer waiting for this answer")
	}
	p.done = true
	msg, err := json.Marshal(map[string]json.RawMessage{"jsonrpc": json.RawMessage(`"2.0"`), "id": p.q.id, "result": answer})
	if err == nil {
		err = p.q.Answer(ctx, msg)
	}
	b := p.b
	if err != nil {
		b.close()
		return nil, err
	}
	b.call.ID = id
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream")
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: b.newView(), ContentLength: -1}, nil
}

// Abandon ends a parked call that will not be resumed, cancelling it
// upstream. It does nothing to a call already resumed.
func (p *ParkedCall) Abandon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	p.b.close()
}

// Question is a request the upstream sent a relayed call's client.
type Question struct {
	u      *Upstream
	sid    string
	id     json.RawMessage
	method string
}

// Method is the question's JSON-RPC method.
func (q *Question) Method() string { return q.method }

// Answer sends the client's response to the question, msg, to the
// upstream under the ID the upstream asked with.
func (q *Question) Answer(ctx context.Context, msg []byte) error {
	out, ok := withMember(msg, "id", q.id)
	if !ok {
		return errors.New("the answer is not a JSON object")
	}
	ctx, cancel := q.u.bound(ctx)
	defer cancel()
	resp, err := q.u.postRelay(ctx, q.sid, out)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("upstream %s answered the answer to %s with HTTP %d", q.u.cfg.Name, q.method, resp.StatusCode)
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

// close ends the call; one not answered by then is cancelled upstream.
func (b *relayedBody) close() error {
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
