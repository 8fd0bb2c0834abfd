package upstream

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sseEvent begins one message of a relayed call's event stream.
const sseEvent = "event: message\ndata: "

// requestMeta is what the go-sdk adds to the _meta of every request in a
// 2026-07-28 session beside the protocol version: its client information
// and capabilities, as it sent them with server/discover. A relayed call
// carries the same bytes, so the child sees what the SDK would send.
type requestMeta struct {
	clientInfo         json.RawMessage
	clientCapabilities json.RawMessage
}

// stdioCall is one relayed call in flight on a stdio connection. The
// connection's reader appends the call's messages, framed as events, to
// queue; the call's body reads them from there.
type stdioCall struct {
	call *RelayedCall
	// wake has room for one signal: the queue grew or the call ended.
	wake chan struct{}

	mu       sync.Mutex
	queue    []byte
	answered bool // the answer is in queue
	over     bool // nothing more comes: answered or given up on

	releaseOnce sync.Once
	release     func() // returns the session's gate and log routing
}

// push appends one event, framed from the pieces of its message, unless
// the call is over. The answer ends the call.
func (s *stdioCall) push(answer bool, msg ...[]byte) {
	s.mu.Lock()
	if !s.over {
		s.queue = append(s.queue, sseEvent...)
		for _, m := range msg {
			s.queue = append(s.queue, m...)
		}
		s.queue = append(s.queue, "\n\n"...)
		s.answered, s.over = answer, answer
	}
	s.mu.Unlock()
	s.signal()
}

func (s *stdioCall) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// end ends a call not answered, with tail as its last event if it is not
// nil, and reports whether the call was still waiting.
func (s *stdioCall) end(tail []byte) bool {
	s.mu.Lock()
	waiting := !s.over
	if waiting {
		s.over = true
		if tail != nil {
			s.queue = append(append(append(s.queue, sseEvent...), tail...), "\n\n"...)
		}
	}
	s.mu.Unlock()
	if waiting {
		s.signal()
	}
	return waiting
}

func (s *stdioCall) done() { s.releaseOnce.Do(s.release) }

// deliverAnswer passes the call's answer on under the client's ID: the
// result as it is (annotated for a 2026-07-28 client as relayedBody does)
// or the child's error. A result that cannot be annotated is not an
// answer the SDK path could give either: the call ends unanswered.
func (s *stdioCall) deliverAnswer(resp *jsonrpc.Response) {
	defer s.done()
	member, value := `,"result":`, validUTF8(resp.Result)
	switch {
	case resp.Error != nil:
		e, err := json.Marshal(resp.Error)
		if err != nil {
			s.end(s.call.Unanswered)
			return
		}
		member, value = `,"error":`, validUTF8(e)
	case len(value) == 0:
		value = []byte("null")
	case bytes.ContainsAny(value, "\r\n"):
		// A line break ends an event's line: keep the data on one.
		var b bytes.Buffer
		if json.Compact(&b, value) != nil {
			s.end(s.call.Unanswered)
			return
		}
		value = b.Bytes()
	}
	head := []byte(`{"jsonrpc":"2.0","id":`)
	if s.call.ServerInfo == nil {
		s.push(true, head, s.call.ID, []byte(member), value, []byte("}"))
		return
	}
	rest := slices.Concat([]byte(member[1:]), value, []byte("}"))
	annotation, ok := completeAnnotation(rest, s.call.ServerInfo)
	switch {
	case ok && annotation == nil: // an error
		s.push(true, head, s.call.ID, []byte(member), value, []byte("}"))
	case ok:
		s.push(true, head, s.call.ID, []byte(`,"result":{`), annotation, value[1:], []byte("}"))
	default:
		out, ok := completeResult(slices.Concat(head, s.call.ID, []byte(member), value, []byte("}")), s.call.ServerInfo)
		if !ok {
			s.end(s.call.Unanswered)
			return
		}
		s.push(true, out)
	}
}

// deliverProgress passes on a notifications/progress params object of the
// call's under the client's token.
func (s *stdioCall) deliverProgress(raw json.RawMessage) {
	if !wantsProgress(s.call) {
		return
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(validUTF8(raw), &params) != nil {
		return
	}
	params["progressToken"] = s.call.ProgressToken
	p, err := json.Marshal(params)
	if err != nil {
		return
	}
	s.push(false, []byte(`{"jsonrpc":"2.0","method":"`+methodProgress+`","params":`), p, []byte("}"))
}

// deliverLog passes on a log message routed to the call, if its client's
// level admits it.
func (s *stdioCall) deliverLog(p *mcp.LoggingMessageParams) {
	if !logLevelAdmits(s.call.LogLevel, p.Level) {
		return
	}
	b, err := json.Marshal(p)
	if err != nil {
		return
	}
	s.push(false, []byte(`{"jsonrpc":"2.0","method":"`+methodLog+`","params":`), b, []byte("}"))
}

// wantsProgress reports whether c's client asked for progress: a token
// that is not null, as the go-sdk reads one.
func wantsProgress(c *RelayedCall) bool {
	return len(c.ProgressToken) > 0 && string(c.ProgressToken) != "null"
}

// logLevelAsked is the level the SDK path's call for c's client asks the
// upstream to log at (askingOptions, then call): debug for a 2025-11-25
// client, whose own session filters the messages, and a 2026-07-28
// client's own level; "" when the client wants none.
func logLevelAsked(c *RelayedCall) mcp.LoggingLevel {
	if c.ServerInfo == nil {
		return upstreamLogLevel
	}
	return c.LogLevel
}

// relayStdio is RelayCall for a stdio upstream: c goes out on the one
// supervised connection under a request ID and progress token of the
// gateway's, and the tap hands its answer and progress to it, never to the
// go-sdk. It shares the session's gate as the SDK path's calls do.
func (u *Upstream) relayStdio(ctx context.Context, c *RelayedCall) (*http.Response, error) {
	u.mu.Lock()
	cn := u.conn
	u.mu.Unlock()
	if cn == nil || cn.tap == nil || cn.over() {
		return nil, fmt.Errorf("%w: upstream %s has no stdio session now", ErrNotForwardable, u.cfg.Name)
	}
	if c.Capabilities != nil && (cn.protocol < protocolExtension || c.Asked != nil) {
		// A 2025-11-25 child's questions name no call, so a call whose
		// client can answer them holds the session alone, which the SDK
		// path does. A 2026-07-28 child asks in the call's own answer
		// (input_required), which the caller takes, so such a call may be
		// relayed unless its caller waits for questions as requests. A
		// caller that chose by Kind asks for neither; the child may have
		// been replaced since.
		return nil, fmt.Errorf("%w: a stdio call whose client can be asked holds the session alone", ErrNotForwardable)
	}
	var meta *requestMeta
	if cn.protocol >= protocolExtension {
		if meta = cn.tap.requestMeta.Load(); meta == nil {
			return nil, fmt.Errorf("%w: the go-sdk's request _meta of upstream %s is unknown", ErrNotForwardable, u.cfg.Name)
		}
	}
	ctx, cancel := u.bound(ctx)
	start := time.Now()
	fail := func(err error) (*http.Response, error) {
		cancel()
		if u.observe != nil {
			u.observe(u.cfg.Name, "tools/call", time.Since(start), err)
		}
		return nil, err
	}
	if err := cn.gate.share(ctx); err != nil {
		return fail(fmt.Errorf("upstream %s: waiting for a call that may ask its client to finish: %w", u.cfg.Name, err))
	}
	if cn.over() {
		cn.gate.unshare()
		cancel()
		return nil, fmt.Errorf("%w: the stdio child of upstream %s has exited", ErrNotForwardable, u.cfg.Name)
	}
	id := relayIDPrefix + strconv.FormatUint(u.tokens.Add(1), 10)
	params := stdioParams(c, id, cn.protocol, meta)
	s := &stdioCall{call: c, wake: make(chan struct{}, 1)}
	sink := &logSink{}
	if logLevelAsked(c) != "" {
		sink.fn = s.deliverLog
	}
	untrack := u.logs.track(sink)
	s.release = func() {
		cn.tap.forget(id)
		sink.close()
		untrack()
		cn.gate.unshare()
	}
	cn.tap.register(id, s)
	reqID, err := jsonrpc.MakeID(id)
	if err == nil {
		err = cn.tap.write(ctx, &jsonrpc.Request{ID: reqID, Method: "tools/call", Params: params})
	}
	if err != nil {
		s.end(nil)
		s.done()
		return fail(fmt.Errorf("upstream %s: tools/call %s: %w", u.cfg.Name, c.Tool, err))
	}
	body := &stdioBody{u: u, s: s, id: id, tap: cn.tap, ctx: ctx, cancel: cancel, start: start}
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache, no-transform"}},
		Body:          body,
		ContentLength: -1,
	}, nil
}

// stdioParams encodes c's params as the SDK path sends them on a session
// of protocol: c's own, the tool's name, and _meta without the protocol's
// own keys or a progress token of the client's, with token as the progress
// token when the client asked for progress and, on a 2026-07-28 session,
// what the go-sdk adds to every request (meta) and the log level the SDK
// path asks for. The values are c's bytes, never decoded.
func stdioParams(c *RelayedCall, token, protocol string, meta *requestMeta) json.RawMessage {
	m := make(map[string]json.RawMessage, len(c.Meta)+5)
	for k, v := range c.Meta {
		if !strings.HasPrefix(k, "io.modelcontextprotocol/") && k != "progressToken" {
			m[k] = v
		}
	}
	if wantsProgress(c) {
		m["progressToken"] = quoted(token)
	}
	if protocol >= protocolExtension && meta != nil {
		m[mcp.MetaKeyProtocolVersion] = quoted(protocol)
		if meta.clientInfo != nil {
			m[mcp.MetaKeyClientInfo] = meta.clientInfo
		}
		m[mcp.MetaKeyClientCapabilities] = meta.clientCapabilities
		if c.ClientCapabilities != nil {
			m[mcp.MetaKeyClientCapabilities] = c.ClientCapabilities
		}
		if level := logLevelAsked(c); level != "" {
			m[mcp.MetaKeyLogLevel] = quoted(string(level))
		}
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"name":`...)
	b = appendQuoted(b, c.Tool)
	for _, k := range slices.Sorted(maps.Keys(c.Params)) {
		if k == "name" || k == "_meta" {
			continue
		}
		b = append(appendQuoted(append(b, ','), k), ':')
		b = appendValue(b, c.Params[k])
	}
	if len(m) > 0 {
		b = append(b, `,"_meta":{`...)
		for i, k := range slices.Sorted(maps.Keys(m)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendQuoted(b, k), ':')
			b = appendValue(b, m[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendValue appends v, or null for nothing.
func appendValue(b []byte, v json.RawMessage) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	return append(b, v...)
}

func quoted(s string) json.RawMessage { return appendQuoted(nil, s) }

// appendQuoted appends s as a JSON string.
func appendQuoted(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// stdioBody is a relayed call's response body: its progress, log messages
// and answer as events, as the connection's reader queued them.
type stdioBody struct {
	u      *Upstream
	s      *stdioCall
	id     string
	tap    *tapConn
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	// err ends the body of a call whose caller went away.
	err      error
	observed bool
	closed   bool
}

func (b *stdioBody) Read(p []byte) (int, error) {
	s := b.s
	for {
		s.mu.Lock()
		n := copy(p, s.queue)
		s.queue = s.queue[n:]
		over, answered := s.over, s.answered
		s.mu.Unlock()
		if answered && !b.observed {
			b.observed = true
			if b.u.observe != nil {
				b.u.observe(b.u.cfg.Name, "tools/call", time.Since(b.start), nil)
			}
		}
		switch {
		case n > 0:
			return n, nil
		case over && b.err != nil:
			return 0, b.err
		case over:
			return 0, io.EOF
		}
		select {
		case <-s.wake:
		case <-b.tap.ended:
			// The child's output ended: whatever it sent for the call is
			// queued by now, so a call not answered never will be.
			if s.end(s.call.Unanswered) {
				b.u.logger.Warn("a relayed call's stdio child exited before answering", "tool", s.call.Tool)
				s.done()
			}
		case <-b.ctx.Done():
			b.giveUp()
		}
	}
}

// giveUp ends a call whose answer is no longer awaited and cancels it at
// the child. A call that ran out of the upstream's time ends with
// Unanswered, as the SDK path answers one; one whose caller went away ends
// without.
func (b *stdioBody) giveUp() {
	var tail []byte
	if errors.Is(b.ctx.Err(), context.DeadlineExceeded) {
		tail = b.s.call.Unanswered
		b.u.logger.Warn("a relayed call was not answered within the upstream's timeout", "tool", b.s.call.Tool, "timeout", b.u.timeout)
	}
	if !b.s.end(tail) {
		return
	}
	if tail == nil {
		b.err = cmp.Or(b.ctx.Err(), context.Canceled)
	}
	b.s.done()
	go b.tap.cancelRelayed(b.id, b.u.timeout)
}

// Close ends the call; one not answered by then is cancelled at the child.
func (b *stdioBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.giveUp()
	b.cancel()
	return nil
}

// register routes the answer and progress of request id to s until forget.
func (c *tapConn) register(id string, s *stdioCall) {
	c.relayMu.Lock()
	if c.relayed == nil {
		c.relayed = map[string]*stdioCall{}
	}
	c.relayed[id] = s
	c.relayMu.Unlock()
}

func (c *tapConn) forget(id string) {
	c.relayMu.Lock()
	delete(c.relayed, id)
	c.relayMu.Unlock()
}

func (c *tapConn) relayedCall(id string) *stdioCall {
	c.relayMu.Lock()
	defer c.relayMu.Unlock()
	return c.relayed[id]
}

// takeRelayed hands a message of the child's that belongs to a relayed
// call (its answer, or progress on its token) to the call, and reports
// whether it did; the go-sdk never sees such a message, even when no call
// waits for it any more. msg is decoded by the go-sdk's own decoder
// (decodeOne), so its members are matched as the go-sdk matches them:
// exactly, escapes decoded.
func (c *tapConn) takeRelayed(msg jsonrpc.Message) bool {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		id, ok := m.ID.Raw().(string)
		if !ok || !strings.HasPrefix(id, relayIDPrefix) {
			return false
		}
		if s := c.relayedCall(id); s != nil {
			s.deliverAnswer(m)
		}
		return true
	case *jsonrpc.Request:
		if m.ID.IsValid() || m.Method != methodProgress {
			return false
		}
		var params map[string]json.RawMessage
		var tok any
		if json.Unmarshal(m.Params, &params) != nil || json.Unmarshal(params["progressToken"], &tok) != nil {
			return false
		}
		token, ok := tok.(string)
		if !ok || !strings.HasPrefix(token, relayIDPrefix) {
			return false
		}
		if s := c.relayedCall(token); s != nil {
			s.deliverProgress(m.Params)
		}
		return true
	}
	return false
}

// validUTF8 is b with each byte that is not part of valid UTF-8 replaced
// by U+FFFD, as the go-sdk's decoder replaces it in what it decodes: a
// relayed call's bytes reach its client without being decoded.
func validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// noteRequestMeta keeps what the go-sdk put in the _meta of a
// server/discover it sends: the per-request _meta of the session it opens.
func (c *tapConn) noteRequestMeta(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "server/discover" {
		return
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &p) != nil || p.Meta[mcp.MetaKeyClientCapabilities] == nil {
		return
	}
	c.requestMeta.Store(&requestMeta{clientInfo: p.Meta[mcp.MetaKeyClientInfo], clientCapabilities: p.Meta[mcp.MetaKeyClientCapabilities]})
}

// cancelRelayed tells the child that the relayed request id is no longer
// wanted.
func (c *tapConn) cancelRelayed(id string, within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	params, _ := json.Marshal(map[string]string{"requestId": id})
	_ = c.write(ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
}
