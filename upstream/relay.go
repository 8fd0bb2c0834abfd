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
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/sse"
)

// relayProtocol is the protocol of the session RelayCall relays in.
const relayProtocol = "2025-11-25"

// relayRetry is how long an upstream that refused a relay session is left
// alone before it is asked again.
const relayRetry = time.Minute

// maxRelayedJSON bounds a relayed call's answer when it comes as one JSON
// body rather than an event stream.
const maxRelayedJSON = 32 << 20

// RelayedCall is a pass-through tools/call of a 2025-11-25 client, to be
// relayed as bytes in the gateway's own 2025-11-25 session with the
// upstream. The session is shared by every client, so the call goes out
// under a request ID and a progress token of the gateway's, and the answer
// comes back under the client's own.
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
}

// relaySession is the gateway's own 2025-11-25 session with an HTTP
// upstream, opened on first use. It declares no client capabilities, so
// the upstream sends it no requests of its own.
type relaySession struct {
	// mu is held while the session is opened, so that one caller opens it
	// and the others wait for the result.
	mu        sync.Mutex
	id        string // Mcp-Session-Id; empty until opened
	refusedAt time.Time
	seq       uint64
}

// RelayCall sends c in the relay session and returns the upstream's
// response, its messages carrying c's request ID and progress token; the
// caller relays it and closes its body. It fails with ErrNotForwardable,
// having sent nothing, when the upstream is a stdio server, is not
// connected, or does not offer 2025-11-25 sessions; the caller then takes
// another path. A session the upstream has forgotten (HTTP 404) is opened
// again and the call sent once more: a 404 means the call did not run. If
// the response ends before the call's answer (the client went away or
// cancelled), the upstream is sent notifications/cancelled for it.
func (u *Upstream) RelayCall(ctx context.Context, c *RelayedCall) (*http.Response, error) {
	if u.httpClient == nil || !u.connected() {
		return nil, ErrNotForwardable
	}
	ctx, cancel := u.bound(ctx)
	start := time.Now()
	resp, upID, token, err := u.sendRelayed(ctx, c)
	if err != nil && !errors.Is(err, ErrNotForwardable) && u.observe != nil {
		u.observe(u.cfg.Name, "tools/call", time.Since(start), err)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	rb := &relayedBody{u: u, sid: resp.Request.Header.Get(sessionIDHeader), upID: upID, cancel: cancel, start: start}
	restore := func(data []byte) []byte { return rb.restore(data, c, token) }
	if mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" {
		rb.ReadCloser = sse.NewReader(resp.Body, mcp.DefaultMaxEventSize, restore)
	} else {
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxRelayedJSON))
		resp.Body.Close()
		if err != nil {
			cancel()
			return nil, fmt.Errorf("upstream %s: read a relayed answer: %w", u.cfg.Name, err)
		}
		rb.ReadCloser = io.NopCloser(bytes.NewReader(restore(data)))
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	resp.Body = rb
	return resp, nil
}

const sessionIDHeader = "Mcp-Session-Id"

func (u *Upstream) connected() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conn != nil
}

// sendRelayed posts c in the relay session, opening it first if need be,
// and returns a 2xx response with the request ID and progress token it was
// sent under.
func (u *Upstream) sendRelayed(ctx context.Context, c *RelayedCall) (*http.Response, json.RawMessage, json.RawMessage, error) {
	for attempt := 0; ; attempt++ {
		sid, n, err := u.relaySession(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		upID := json.RawMessage(strconv.Quote("taskgate-relay-" + strconv.FormatUint(n, 10)))
		var token json.RawMessage
		meta := c.Meta
		if c.ProgressToken != nil {
			token = upID
			meta = make(map[string]json.RawMessage, len(c.Meta)+1)
			for k, v := range c.Meta {
				meta[k] = v
			}
			meta["progressToken"] = token
		}
		params := make(map[string]any, len(c.Params)+2)
		for k, v := range c.Params {
			params[k] = v
		}
		params["name"] = c.Tool
		if len(meta) > 0 {
			params["_meta"] = meta
		}
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": upID, "method": "tools/call", "params": params})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("upstream %s: encode a relayed call: %w", u.cfg.Name, err)
		}
		resp, err := u.postRelay(ctx, sid, body)
		if err != nil {
			if ctx.Err() != nil {
				// The call may have reached the upstream before its
				// answer was given up on.
				go u.cancelRelayed(sid, upID)
			}
			return nil, nil, nil, err
		}
		if resp.StatusCode == http.StatusNotFound && attempt == 0 {
			resp.Body.Close()
			u.forgetRelaySession(sid)
			continue
		}
		if resp.StatusCode/100 != 2 {
			resp.Body.Close()
			return nil, nil, nil, fmt.Errorf("upstream %s answered a relayed call with HTTP %d", u.cfg.Name, resp.StatusCode)
		}
		return resp, upID, token, nil
	}
}

// relaySession returns the relay session's ID, opening the session if
// need be, and the sequence number of a new request in it.
func (u *Upstream) relaySession(ctx context.Context) (string, uint64, error) {
	r := &u.relay
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.id == "" {
		if !r.refusedAt.IsZero() && time.Since(r.refusedAt) < relayRetry {
			return "", 0, ErrNotForwardable
		}
		id, err := u.openRelaySession(ctx)
		if err != nil {
			if errors.Is(err, ErrNotForwardable) {
				r.refusedAt = time.Now()
				u.logger.Info("upstream offers no 2025-11-25 session to relay calls in", "upstream", u.cfg.Name, "err", err)
			}
			return "", 0, err
		}
		r.id, r.refusedAt = id, time.Time{}
	}
	r.seq++
	return r.id, r.seq, nil
}

// forgetRelaySession drops the relay session sid, unless another caller
// has already replaced it.
func (u *Upstream) forgetRelaySession(sid string) {
	u.relay.mu.Lock()
	defer u.relay.mu.Unlock()
	if u.relay.id == sid {
		u.relay.id = ""
	}
}

// openRelaySession initializes a 2025-11-25 session that declares no
// client capabilities. An upstream that answers with another protocol
// version or without a session ID cannot hold one: ErrNotForwardable.
func (u *Upstream) openRelaySession(ctx context.Context) (string, error) {
	init, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "taskgate-relay-init", "method": "initialize", "params": map[string]any{
		"protocolVersion": relayProtocol, "capabilities": map[string]any{}, "clientInfo": u.impl,
	}})
	resp, err := u.postRelay(ctx, "", init)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sid := resp.Header.Get(sessionIDHeader)
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%w: initialize answered HTTP %d", ErrNotForwardable, resp.StatusCode)
	}
	msg, err := firstMessage(resp)
	if err != nil {
		return "", fmt.Errorf("upstream %s: read the relay session's initialize answer: %w", u.cfg.Name, err)
	}
	var res struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &res); err != nil || res.Result == nil {
		return "", fmt.Errorf("%w: initialize answered %s", ErrNotForwardable, msg)
	}
	if res.Result.ProtocolVersion != relayProtocol || sid == "" {
		return "", fmt.Errorf("%w: initialize offered protocol %q, session %q", ErrNotForwardable, res.Result.ProtocolVersion, sid)
	}
	resp, err = u.postRelay(ctx, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("upstream %s answered notifications/initialized with HTTP %d", u.cfg.Name, resp.StatusCode)
	}
	return sid, nil
}

// firstMessage reads the first JSON-RPC message of a JSON or event-stream
// response.
func firstMessage(resp *http.Response) ([]byte, error) {
	if mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		return io.ReadAll(io.LimitReader(resp.Body, maxRelayedJSON))
	}
	var first []byte
	r := sse.NewReader(resp.Body, mcp.DefaultMaxEventSize, func(data []byte) []byte {
		if first == nil {
			first = bytes.Clone(data)
		}
		return data
	})
	buf := make([]byte, 4096)
	for first == nil {
		if _, err := r.Read(buf); err != nil {
			return nil, err
		}
	}
	return first, nil
}

// postRelay posts one message in session sid (none for initialize), with
// the configured headers.
func (u *Upstream) postRelay(ctx context.Context, sid string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", relayProtocol)
	if sid != "" {
		req.Header.Set(sessionIDHeader, sid)
	}
	for k, v := range u.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := u.httpTransport.RoundTrip(req)
	if err != nil {
		if ctx.Err() == nil {
			u.markSuspect()
		}
		return nil, fmt.Errorf("upstream %s: relay: %w", u.cfg.Name, err)
	}
	return resp, nil
}

// relayedBody is a relayed call's response body. It restores the client's
// request ID and progress token in each message and, closed before the
// call's answer passed, cancels the call upstream.
type relayedBody struct {
	io.ReadCloser
	u        *Upstream
	sid      string
	upID     json.RawMessage
	cancel   context.CancelFunc
	start    time.Time
	mu       sync.Mutex
	answered bool
	closed   bool
}

// restore rewrites one message from the upstream for the client: the
// call's answer and progress get the client's ID and token back; a request
// the upstream sends (it was told the session's client can do nothing) is
// refused and not passed on; everything else passes as it is.
func (b *relayedBody) restore(data []byte, c *RelayedCall, token json.RawMessage) []byte {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil {
		return data
	}
	switch {
	case msg.Method == "" && bytes.Equal(msg.ID, b.upID):
		b.mu.Lock()
		b.answered = true
		b.mu.Unlock()
		if b.u.observe != nil {
			b.u.observe(b.u.cfg.Name, "tools/call", time.Since(b.start), nil)
		}
		if out, ok := withMember(data, "id", c.ID); ok {
			return out
		}
	case msg.Method != "" && len(msg.ID) > 0 && string(msg.ID) != "null":
		go b.u.refuseRelayRequest(b.sid, msg.ID, msg.Method)
		return nil
	case msg.Method == "notifications/progress" && token != nil && bytes.Equal(msg.Params.ProgressToken, token):
		var params map[string]json.RawMessage
		if json.Unmarshal(mustMember(data, "params"), &params) != nil {
			return data
		}
		params["progressToken"] = c.ProgressToken
		p, err := json.Marshal(params)
		if err != nil {
			return data
		}
		if out, ok := withMember(data, "params", p); ok {
			return out
		}
	}
	return data
}

func (b *relayedBody) Close() error {
	err := b.ReadCloser.Close()
	b.mu.Lock()
	answered, closed := b.answered, b.closed
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	if !answered && !closed {
		go b.u.cancelRelayed(b.sid, b.upID)
	}
	return err
}

// cancelRelayed tells the upstream that the relayed call upID is no longer
// wanted.
func (u *Upstream) cancelRelayed(sid string, upID json.RawMessage) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": upID}})
	u.postBestEffort(sid, body)
}

// refuseRelayRequest answers a request the upstream sent in the relay
// session, whose client declared no capabilities, with -32601.
func (u *Upstream) refuseRelayRequest(sid string, id json.RawMessage, method string) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": -32601, "message": fmt.Sprintf("%s is not supported by this client", method),
	}})
	u.postBestEffort(sid, body)
}

func (u *Upstream) postBestEffort(sid string, body []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), u.timeout)
	defer cancel()
	resp, err := u.postRelay(ctx, sid, body)
	if err != nil {
		u.logger.Debug("relay session message not delivered", "upstream", u.cfg.Name, "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
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

// mustMember returns member key of the JSON object msg, or nil.
func mustMember(msg []byte, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return nil
	}
	return m[key]
}
