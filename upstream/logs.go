package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const methodLog = "notifications/message"

// upstreamLogLevel is the level a 2025-11-25 session asks its upstream to
// log at: the lowest, so that whatever level a client sets can be honoured
// by filtering on the gateway's side.
const upstreamLogLevel mcp.LoggingLevel = "debug"

// logLevelAdmits reports whether a message at level reaches a client that
// asked for messages at min or above. An empty min asks for none; a level
// the protocol does not name is admitted only by the lowest min, debug.
func logLevelAdmits(min, level mcp.LoggingLevel) bool {
	lo, hi := rank(min), rank(level)
	switch {
	case min == "" || lo < 0:
		return false
	case hi < 0:
		return lo == 0
	}
	return hi >= lo
}

// rank is a level's place among the protocol's levels, lowest first, or
// -1.
func rank(l mcp.LoggingLevel) int {
	switch l {
	case "debug":
		return 0
	case "info":
		return 1
	case "notice":
		return 2
	case "warning":
		return 3
	case "error":
		return 4
	case "critical":
		return 5
	case "alert":
		return 6
	case "emergency":
		return 7
	}
	return -1
}

// logSink is one call's receiver of its upstream's log messages.
type logSink struct {
	mu   sync.Mutex // held while delivering; close waits for it
	done bool
	fn   func(*mcp.LoggingMessageParams) // nil: the call wants none
}

func (s *logSink) deliver(p *mcp.LoggingMessageParams) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.fn == nil {
		return false
	}
	s.fn(p)
	return true
}

// close ends delivery; after it returns, fn is never called again.
func (s *logSink) close() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// logRouter delivers log messages read off the wire to the call they
// belong to. Over HTTP a message belongs to the call on whose response
// stream it came. Over stdio nothing on the wire ties a message to a call,
// so it goes to the call in flight when there is exactly one. Messages of
// no call (the standalone stream, several calls in flight, a call that
// wants none) go to the gateway's log: the gateway cannot tell whose they
// are, and one tenant's client must not read another's.
type logRouter struct {
	logger *slog.Logger

	mu       sync.Mutex
	inFlight map[*logSink]struct{} // stdio calls
}

// track counts a stdio call in flight until the returned func is called.
func (r *logRouter) track(s *logSink) func() {
	r.mu.Lock()
	if r.inFlight == nil {
		r.inFlight = map[*logSink]struct{}{}
	}
	r.inFlight[s] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.inFlight, s)
		r.mu.Unlock()
	}
}

// trackRequest counts a stdio request that is not a tool call (a listing,
// a read, a task poll) as in flight, wanting no log messages, until the
// returned func is called: a call beside it then does not take messages
// that may be that request's.
func (u *Upstream) trackRequest() func() {
	if u.httpClient != nil {
		return func() {}
	}
	return u.logs.track(&logSink{})
}

// deliverStdio delivers a notifications/message params object read from a
// stdio upstream.
func (r *logRouter) deliverStdio(raw json.RawMessage) {
	var sole *logSink
	r.mu.Lock()
	if len(r.inFlight) == 1 {
		for s := range r.inFlight {
			sole = s
		}
	}
	r.mu.Unlock()
	r.deliver(raw, sole)
}

// deliverMessage inspects one JSON-RPC message of a response stream whose
// call's sink is s (nil: no call's).
func (r *logRouter) deliverMessage(msg []byte, s *logSink) {
	if !bytes.Contains(msg, []byte(methodLog)) {
		return
	}
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &env) != nil || env.ID != nil || env.Method != methodLog {
		return
	}
	r.deliver(env.Params, s)
}

func (r *logRouter) deliver(raw json.RawMessage, s *logSink) {
	var p mcp.LoggingMessageParams
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	if s != nil && s.deliver(&p) {
		return
	}
	r.logger.Debug("upstream log message for no client", "level", p.Level, "logger", p.Logger, "data", p.Data)
}

// callLogKey carries a call's log sink through the go-sdk to the
// RoundTripper, which reads the call's response stream.
type callLogKey struct{}

func withCallLog(ctx context.Context, s *logSink) context.Context {
	return context.WithValue(ctx, callLogKey{}, s)
}

func callLogOf(ctx context.Context) *logSink {
	s, _ := ctx.Value(callLogKey{}).(*logSink)
	return s
}
