package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const methodProgress = "notifications/progress"

// progressRouter delivers progress notifications read off the wire to the
// call whose token they carry.
type progressRouter struct {
	mu    sync.Mutex
	sinks map[string]*progressSink
}

type progressSink struct {
	mu       sync.Mutex // held while delivering; unregister waits for it
	done     bool
	fn       func(*mcp.ProgressNotificationParams)
	original any // the caller's own token
}

// register routes notifications carrying token to fn until the returned
// func is called; after it returns, fn is never called again.
func (r *progressRouter) register(token string, fn func(*mcp.ProgressNotificationParams), original any) func() {
	s := &progressSink{fn: fn, original: original}
	r.mu.Lock()
	r.sinks[token] = s
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.sinks, token)
		r.mu.Unlock()
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
	}
}

// deliver hands a notifications/progress params object to its call, if
// any is waiting for it.
func (r *progressRouter) deliver(raw json.RawMessage) {
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	r.mu.Lock()
	s := r.sinks[token]
	r.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	p.ProgressToken = s.original
	s.fn(&p)
}

// deliverMessage inspects one JSON-RPC message as sent on the wire.
func (r *progressRouter) deliverMessage(msg []byte) {
	if !bytes.Contains(msg, []byte(methodProgress)) {
		return
	}
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &env) != nil || env.ID != nil || env.Method != methodProgress {
		return
	}
	r.deliver(env.Params)
}

// tapTransport wraps a stdio transport so that progress is delivered from
// the connection's Read, in wire order.
type tapTransport struct {
	inner    mcp.Transport
	progress *progressRouter
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: conn, progress: t.progress}, nil
}

type tapConn struct {
	mcp.Connection
	progress *progressRouter
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.IsCall() && req.Method == methodProgress {
		c.progress.deliver(req.Params)
	}
	return msg, err
}

// callHeaderKey carries CallOptions.Header through the go-sdk to the
// RoundTripper.
type callHeaderKey struct{}

func withCallHeader(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, callHeaderKey{}, h)
}

// roundTripper adds the configured and per-call headers, delivers progress
// from response streams as they are read, and reports failed round trips.
type roundTripper struct {
	next     http.RoundTripper
	static   http.Header
	progress *progressRouter
	suspect  func()
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	if h, _ := req.Context().Value(callHeaderKey{}).(http.Header); h != nil {
		for k, vs := range h {
			if _, set := out.Header[http.CanonicalHeaderKey(k)]; !set {
				out.Header[http.CanonicalHeaderKey(k)] = vs
			}
		}
	}
	for k, vs := range t.static {
		out.Header[k] = vs
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		if req.Context().Err() == nil {
			t.suspect()
		}
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" {
		resp.Body = &sseTap{src: bufio.NewReader(resp.Body), body: resp.Body, progress: t.progress}
	}
	return resp, nil
}

func mediaType(v string) string {
	t, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// sseTap passes a server-sent event stream through event by event,
// delivering each progress notification before any byte of the events after
// it reaches the reader.
type sseTap struct {
	src      *bufio.Reader
	body     io.Closer
	progress *progressRouter
	pending  []byte
	err      error
}

func (s *sseTap) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.pending, s.err = s.nextEvent()
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

func (s *sseTap) Close() error { return s.body.Close() }

// nextEvent reads the lines of one event, up to and including the blank
// line that ends it, and delivers its data if it is progress.
func (s *sseTap) nextEvent() ([]byte, error) {
	var event, data []byte
	for {
		line, err := readLine(s.src, mcp.DefaultMaxEventSize-len(event))
		if errors.Is(err, errLineTooLong) {
			return nil, fmt.Errorf("a server-sent event exceeds %d bytes", mcp.DefaultMaxEventSize)
		}
		event = append(event, line...)
		trimmed := bytes.TrimRight(line, "\r\n")
		if v, ok := bytes.CutPrefix(trimmed, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
		if err != nil {
			// An event cut off by the end of the stream is discarded by
			// its reader too.
			return event, err
		}
		if len(trimmed) == 0 {
			if data != nil {
				s.progress.deliverMessage(data)
			}
			return event, nil
		}
	}
}

// errLineTooLong is readLine's error for a line beyond its limit.
var errLineTooLong = errors.New("line too long")

// readLine reads up to and including the next newline, failing with
// errLineTooLong as soon as the line exceeds limit bytes, so that a stream
// without newlines cannot make it buffer without bound.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}
