package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// legacySessions follows the gateway's 2025-11-25 sessions, so that a
// pass-through call in one can be relayed as bytes (see relayLegacy)
// without the SDK's session handler. It knows what that handler would
// check of such a request: that the session exists and belongs to the
// caller. It also keeps the handler's idle timer honest: only requests
// the handler serves restart it, so a call is relayed only when it would
// end within half the idle period after the handler last served the
// session; a request after that goes to the handler. It notes each
// session's log level (logging/setLevel), so that a relayed call's
// upstream log messages are filtered as the session's Log would.
type legacySessions struct {
	server *mcp.Server
	idle   time.Duration
	now    func() time.Time

	mu   sync.Mutex
	byID map[string]*legacySession
	// levels holds each session's log level by session ID; apart from
	// byID, since a client may set it before opened has run.
	levels map[string]mcp.LoggingLevel
	// asked numbers the questions passed to clients.
	asked uint64
}

// legacySession is what relaying needs to know of one session.
type legacySession struct {
	// userID is the TokenInfo user that opened the session; the SDK's
	// handler refuses a request from anyone else, and so does relaying.
	userID string
	// caps, for a client that declared elicitation or sampling, are the
	// capabilities its relayed calls' relay session declares, as the SDK
	// path's session for its calls would: elicitation, sampling and roots
	// as the client declared them. nil for a client that cannot be asked.
	caps       json.RawMessage
	clientInfo *mcp.Implementation
	// lastSDK is when the SDK's handler last finished a request of the
	// session (its idle timer restarts then); sdkActive counts those in
	// progress (its timer is paused meanwhile).
	lastSDK   time.Time
	sdkActive int
	// relayed holds the cancel functions of calls in progress, relayed or
	// on the SDK's path (serveCancellable), by their JSON-RPC request ID,
	// for the client's notifications/cancelled.
	relayed map[string]context.CancelFunc
	// questions are the upstreams' questions to the client that await
	// its answer, by the request ID the client saw.
	questions map[string]pendingQuestion
}

// pendingQuestion is an upstream's question on a relayed call's stream.
type pendingQuestion struct {
	q    question
	call string // the relayed call's request ID
}

// question is a request to a client whose answer goes back to whoever
// asked: an upstream in a relay session (upstream.Question), or a bridged
// input request (inputQuestion).
type question interface {
	Method() string
	Answer(ctx context.Context, msg []byte) error
}

// newLegacySessions follows server's sessions; it installs a receiving
// middleware on server to note log levels.
func newLegacySessions(server *mcp.Server, idle time.Duration, now func() time.Time) *legacySessions {
	l := &legacySessions{server: server, idle: idle, now: now, byID: map[string]*legacySession{}, levels: map[string]mcp.LoggingLevel{}}
	server.AddReceivingMiddleware(l.noteLogLevel)
	return l
}

// noteLogLevel records the level a session's client set, once the SDK
// has accepted it.
func (l *legacySessions) noteLogLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		p, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if err == nil && ok && method == "logging/setLevel" && ss != nil && ss.ID() != "" {
			l.mu.Lock()
			l.levels[ss.ID()] = p.Level
			l.mu.Unlock()
		}
		return res, err
	}
}

// watch wraps the SDK's handler: it notes each session the handler opens
// and when the handler last served each one, counting only the requests
// that reach the session (and so its idle timer) there.
func (l *legacySessions) watch(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(sessionIDHeader)
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if id == "" && statelessVersion(r.Header.Get("Mcp-Protocol-Version")) {
			// A 2026-07-28 request opens no session; most of the SDK path's
			// requests are such.
			next.ServeHTTP(w, r)
			return
		}
		if id == "" {
			// An initialize that opened a session answers with its ID. The
			// session is noted as that answer's header is written, before
			// the client can learn the ID: noted only once the handler
			// returned, it would be unknown to the first calls the client
			// may send meanwhile, which would take the SDK path.
			user := userOf(r)
			ow := &openingWriter{ResponseWriter: w, note: func(id string) bool { return l.opened(id, user) }}
			next.ServeHTTP(ow, r)
			ow.opened() // in case the session was not ready as the header went out
			return
		}
		if !acceptsJSONAndStream(r) || !l.sdkStart(id, userOf(r)) {
			next.ServeHTTP(w, r)
			return
		}
		defer l.sdkEnd(id)
		next.ServeHTTP(w, r)
	})
}

const sessionIDHeader = "Mcp-Session-Id"

// openingWriter notes the session its answer's header names, through
// note, as the header is written, and again on opened until note has
// recorded it.
type openingWriter struct {
	http.ResponseWriter
	note func(id string) bool

	mu    sync.Mutex
	noted bool
}

func (o *openingWriter) opened() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id := o.ResponseWriter.Header().Get(sessionIDHeader); !o.noted && id != "" {
		o.noted = o.note(id)
	}
}

func (o *openingWriter) WriteHeader(code int) {
	o.opened()
	o.ResponseWriter.WriteHeader(code)
}

func (o *openingWriter) Write(b []byte) (int, error) {
	o.opened()
	return o.ResponseWriter.Write(b)
}

func (o *openingWriter) Flush() {
	o.opened()
	_ = http.NewResponseController(o.ResponseWriter).Flush()
}

// Unwrap lets an http.ResponseController reach the writer underneath.
func (o *openingWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

func userOf(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	return ""
}

// opened records a session the SDK's handler has just opened, and forgets
// it once the session ends; it reports whether it recorded it. A session
// the handler closed at once (its initialization failed), or has not
// initialized yet, is not recorded.
func (l *legacySessions) opened(id, userID string) bool {
	var ss *mcp.ServerSession
	for s := range l.server.Sessions() {
		if s.ID() == id {
			ss = s
			break
		}
	}
	var ip *mcp.InitializeParams
	if ss != nil {
		ip = ss.InitializeParams()
	}
	if ip == nil {
		l.mu.Lock()
		delete(l.levels, id)
		l.mu.Unlock()
		return false
	}
	s := &legacySession{
		userID: userID, lastSDK: l.now(), relayed: map[string]context.CancelFunc{}, questions: map[string]pendingQuestion{},
		caps: askingCapabilities(ip.Capabilities), clientInfo: ip.ClientInfo,
	}
	l.mu.Lock()
	l.byID[id] = s
	l.mu.Unlock()
	go func() {
		_ = ss.Wait()
		l.mu.Lock()
		delete(l.byID, id)
		delete(l.levels, id)
		l.mu.Unlock()
	}()
	return true
}

// sdkStart counts a request the SDK's handler takes in session id, if it
// will: the session exists and userID owns it.
func (l *legacySessions) sdkStart(id, userID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.byID[id]
	if s == nil || (s.userID != "" && s.userID != userID) {
		return false
	}
	s.sdkActive++
	return true
}

func (l *legacySessions) sdkEnd(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.byID[id]; s != nil {
		s.sdkActive--
		s.lastSDK = l.now()
	}
}

// known reports whether the SDK's handler opened session id.
func (l *legacySessions) known(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byID[id] != nil
}

// askingCapabilities returns what the relay session of a client that
// declared caps declares, or nil when the client cannot be asked.
func askingCapabilities(caps *mcp.ClientCapabilities) json.RawMessage {
	if caps == nil {
		return nil
	}
	return askingCaps{caps.Elicitation, caps.Sampling, caps.RootsV2}.declared()
}

// askingCaps are the client capabilities an upstream may ask by, as the
// wire spells them in both eras (the go-sdk's ClientCapabilities spells
// roots two ways).
type askingCaps struct {
	Elicitation *mcp.ElicitationCapabilities `json:"elicitation,omitempty"`
	Sampling    *mcp.SamplingCapabilities    `json:"sampling,omitempty"`
	Roots       *mcp.RootCapabilities        `json:"roots,omitempty"`
}

// declared is c as a session declares it, or nil when c has nothing a
// client could be asked by: roots alone are only asked for along with a
// question.
func (c askingCaps) declared() json.RawMessage {
	if c.Elicitation == nil && c.Sampling == nil {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	return b
}

// relayInfo is what relaying a call needs of its session.
type relayInfo struct {
	// caps are the session's relay capabilities (legacySession.caps).
	caps   json.RawMessage
	client *mcp.Implementation
	// logLevel is the level the client set; empty: none, so it gets no
	// log messages.
	logLevel mcp.LoggingLevel
}

// relayable returns what relaying needs of session id for a call by userID
// that may last maxCall, or false when the call must go to the SDK's
// handler: the session is unknown, belongs to someone else, or the
// handler's idle timer, which relayed calls do not
// pause, could run out before the call ends.
func (l *legacySessions) relayable(id, userID string, maxCall time.Duration) (*relayInfo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.byID[id]
	if !relayableSession(s, userID, l.now(), l.idle, maxCall) {
		return nil, false
	}
	return &relayInfo{caps: s.caps, client: s.clientInfo, logLevel: l.levels[id]}, true
}

// relayableSession is relayable's decision. The session's idle timer
// restarts when the handler last finished a request and is paused while it
// serves one; half the idle period is kept in reserve.
func relayableSession(s *legacySession, userID string, now time.Time, idle, maxCall time.Duration) bool {
	switch {
	case s == nil:
		return false
	case s.userID != "" && s.userID != userID:
		return false
	case s.sdkActive > 0:
		return maxCall < idle/2
	}
	return now.Sub(s.lastSDK)+maxCall < idle/2
}

// track registers a call's cancel function under its request ID
// and returns the function that removes it; false when the session is gone
// or the ID is already in flight.
func (l *legacySessions) track(id string, requestID json.RawMessage, cancel context.CancelFunc) (func(), bool) {
	key := string(bytes.TrimSpace(requestID))
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.byID[id]
	if s == nil || s.relayed[key] != nil {
		return nil, false
	}
	s.relayed[key] = cancel
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(s.relayed, key)
		maps.DeleteFunc(s.questions, func(_ string, p pendingQuestion) bool { return p.call == key })
	}, true
}

// ask notes q, asked on the stream of session id's relayed call
// requestID, and returns the request ID its client sees it under: the
// gateway's own, so that it cannot meet one the SDK's session uses.
func (l *legacySessions) ask(id string, requestID json.RawMessage, q question) (json.RawMessage, bool) {
	key := string(bytes.TrimSpace(requestID))
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.byID[id]
	if s == nil || s.relayed[key] == nil {
		return nil, false
	}
	l.asked++
	clientID := strconv.Quote("taskgate-ask-" + strconv.FormatUint(l.asked, 10))
	s.questions[clientID] = pendingQuestion{q: q, call: key}
	return json.RawMessage(clientID), true
}

// answered returns, and forgets, the question that the answer with
// request ID answerID in session id answers; userID must own the session.
func (l *legacySessions) answered(id, userID string, answerID json.RawMessage) question {
	key := string(bytes.TrimSpace(answerID))
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.byID[id]
	if s == nil || (s.userID != "" && s.userID != userID) {
		return nil
	}
	p, ok := s.questions[key]
	if !ok {
		return nil
	}
	delete(s.questions, key)
	return p.q
}

// cancel ends the relayed call requestID of session id, if it is one, as
// the SDK ends a handler on notifications/cancelled; userID must own the
// session.
func (l *legacySessions) cancel(id, userID string, requestID json.RawMessage) {
	l.mu.Lock()
	s := l.byID[id]
	if s == nil || (s.userID != "" && s.userID != userID) {
		l.mu.Unlock()
		return
	}
	cancel := s.relayed[string(bytes.TrimSpace(requestID))]
	l.mu.Unlock()
	// Outside the lock: a cancel may wait for its request to end, whose
	// handler takes the lock on its way out.
	if cancel != nil {
		cancel()
	}
}
