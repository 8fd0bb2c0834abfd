package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sse"
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

// tapTransport connects to a stdio child over a stdioPipe, so that
// progress is delivered from the connection's Read, in wire order, so that
// the end of the connection's input is known before any call hears of it,
// and so that calls relayed as bytes (RelayCall) get their own messages,
// which the go-sdk never sees. conn is the connection it made.
type tapTransport struct {
	cmd      *exec.Cmd
	progress *progressRouter
	logs     *logRouter
	// ended is closed when a Read fails: the go-sdk reads nothing more,
	// and fails the calls in flight only after Read has returned.
	ended chan struct{}
	conn  *tapConn
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	pipe, err := startStdio(t.cmd, mcp.DefaultMaxLineLength)
	if err != nil {
		return nil, err
	}
	t.conn = &tapConn{pipe: pipe, progress: t.progress, logs: t.logs, ended: t.ended}
	return t.conn, nil
}

// tapConn is the go-sdk's connection to a stdio child. Its Read is the
// only reader of the child's output.
type tapConn struct {
	pipe     *stdioPipe
	progress *progressRouter
	logs     *logRouter
	ended    chan struct{}
	endOnce  sync.Once
	// queue holds the rest of a batch the child sent; only Read, which
	// the go-sdk never calls concurrently, touches it.
	queue []jsonrpc.Message

	// relayed are the relayed calls awaiting their answer, by request ID.
	relayMu sync.Mutex
	relayed map[string]*stdioCall
	// requestMeta is set once the go-sdk has sent server/discover.
	requestMeta atomic.Pointer[requestMeta]
}

// Read returns the child's next message for the go-sdk. A relayed call's
// answer and progress go to the call: the go-sdk's decoder reads each
// message once, and a relayed result or progress reaches its client as the
// bytes the child sent (invalid UTF-8 replaced), never decoded into types.
func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if len(c.queue) > 0 {
			msg := c.queue[0]
			c.queue = c.queue[1:]
			return msg, nil
		}
		frame, err := c.pipe.readFrame(ctx)
		if err != nil {
			c.endOnce.Do(func() { close(c.ended) })
			return nil, err
		}
		msgs, err := c.decode(frame)
		if err != nil {
			c.endOnce.Do(func() { close(c.ended) })
			return nil, err
		}
		for _, msg := range msgs {
			if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() {
				switch req.Method {
				case methodProgress:
					c.progress.deliver(req.Params)
				case methodLog:
					c.logs.deliverStdio(req.Params)
				}
			}
		}
		c.queue = msgs
	}
}

// decode returns the messages of a frame that are not a relayed call's,
// decoded as the go-sdk decodes them. A batch (which JSON-RPC allows
// before 2025-06-18) gives its messages one by one.
func (c *tapConn) decode(frame json.RawMessage) ([]jsonrpc.Message, error) {
	if frame[0] != '[' {
		msg, err := c.decodeOne(frame)
		if msg == nil || err != nil {
			return nil, err
		}
		return []jsonrpc.Message{msg}, nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(frame, &batch); err != nil {
		return nil, fmt.Errorf("reading a batch from the stdio child: %w", err)
	}
	if len(batch) == 0 {
		return nil, errors.New("the stdio child sent an empty batch")
	}
	var msgs []jsonrpc.Message
	for _, m := range batch {
		msg, err := c.decodeOne(m)
		if err != nil {
			return nil, err
		}
		if msg != nil {
			msgs = append(msgs, msg)
		}
	}
	return msgs, nil
}

// decodeOne decodes one message of the child's as the go-sdk decodes it,
// once, and hands it to its relayed call if it is one: nil, nil then.
func (c *tapConn) decodeOne(m json.RawMessage) (jsonrpc.Message, error) {
	msg, err := jsonrpc.DecodeMessage(m)
	if err != nil {
		return nil, err
	}
	if c.takeRelayed(msg) {
		return nil, nil
	}
	return msg, nil
}

// Write notes the go-sdk's per-request _meta as it goes out.
func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.noteRequestMeta(msg)
	return c.write(ctx, msg)
}

func (c *tapConn) write(ctx context.Context, msg jsonrpc.Message) error {
	frame, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message to the stdio child: %w", err)
	}
	return c.pipe.writeFrame(ctx, frame)
}

func (c *tapConn) Close() error { return c.pipe.Close() }

func (c *tapConn) SessionID() string { return "" }

// callHeaderKey carries CallOptions.Header through the go-sdk to the
// RoundTripper.
type callHeaderKey struct{}

func withCallHeader(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, callHeaderKey{}, h)
}

// roundTripper adds the configured URL's userinfo (as basic
// authentication, as http.Client would, unless a header authorizes the
// request) and query, the configured and per-call headers, delivers
// progress and log messages from response streams as they are read, and
// reports failed round trips.
type roundTripper struct {
	next     http.RoundTripper
	user     *url.Userinfo
	query    string
	static   http.Header
	progress *progressRouter
	logs     *logRouter
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
	if t.query != "" {
		if out.URL.RawQuery == "" {
			out.URL.RawQuery = t.query
		} else {
			out.URL.RawQuery = t.query + "&" + out.URL.RawQuery
		}
	}
	if t.user != nil && out.Header.Get("Authorization") == "" {
		pass, _ := t.user.Password()
		out.SetBasicAuth(t.user.Username(), pass)
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		if req.Context().Err() == nil {
			t.suspect()
		}
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" {
		// Progress and log messages are delivered event by event, before
		// the bytes of any later event — the response included — reach the
		// SDK. Log messages go to the call whose stream this is.
		logs := callLogOf(req.Context())
		resp.Body = sse.NewReader(resp.Body, mcp.DefaultMaxEventSize, func(data []byte) []byte {
			t.progress.deliverMessage(data)
			t.logs.deliverMessage(data, logs)
			return data
		})
	}
	return resp, nil
}

func mediaType(v string) string {
	t, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(t))
}
