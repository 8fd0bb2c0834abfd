package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/limits"
)

// CodeLimitReached is the JSON-RPC error code of a request refused because
// a limit was reached; data.reason names the limit and data.retry_after
// says, in seconds, when to try again.
const CodeLimitReached = -32029

// streamWrites bounds each write of an /mcp answer instead of the whole
// answer. Those answers may be event streams that last as long as a call
// or a session (a standalone stream is kept alive by the session's pings),
// so the server's write deadline, which bounds a whole answer, would cut
// them; a client that stops reading is cut off at its next write instead.
// The read deadline, which bounds the request, is lifted once its body is
// read: past it the server only watches for the client going away, and an
// expired deadline there would end the request.
func streamWrites(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{})
		if r.Body == nil || r.Body == http.NoBody {
			_ = rc.SetReadDeadline(time.Time{})
		} else {
			r.Body = &liftOnEOF{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, timeout: timeout}, r)
	})
}

// liftOnEOF calls lift once the body it reads has ended.
type liftOnEOF struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (l *liftOnEOF) Read(p []byte) (int, error) {
	n, err := l.ReadCloser.Read(p)
	if err == io.EOF {
		l.once.Do(l.lift)
	}
	return n, err
}

// deadlineWriter gives each write and flush its own deadline.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.ResponseWriter.Write(b)
}

func (d *deadlineWriter) Flush() {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	_ = d.rc.Flush()
}

// Unwrap lets an http.ResponseController reach the writer underneath.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// admit holds, for each authenticated /mcp request, what it takes of the
// tenant's limits: a session for an initialize that opens one (given back
// when the session ends, by its client or for idleness), a stream for a
// standalone stream (given back when it closes), a call in progress and a
// token for a tools/call. A request past a limit is refused before
// anything else reads it.
func (g *Gateway) admit(keeper *limits.Keeper, sessions *mcp.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := userOf(r)
		sessionID := r.Header.Get(sessionIDHeader)
		switch r.Method {
		case http.MethodGet:
			release, refusal := keeper.Hold(limits.Streams, tenant)
			if refusal != nil {
				refuse(w, http.StatusTooManyRequests, nil, refusal)
				return
			}
			defer release()
			next.ServeHTTP(w, r)
			return
		case http.MethodPost:
		default:
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &msg) // what is not JSON-RPC, the handler answers
		switch {
		case msg.Method == "initialize" && sessionID == "":
			release, refusal := keeper.Hold(limits.Sessions, tenant)
			if refusal != nil {
				refuse(w, http.StatusTooManyRequests, msg.ID, refusal)
				return
			}
			next.ServeHTTP(w, r)
			holdUntilEnd(sessions, w.Header().Get(sessionIDHeader), release)
		case msg.Method == "tools/call":
			release, refusal := keeper.Call(r.Context(), tenant, time.Now())
			if refusal != nil {
				// A tenant refused faster than one that waits retry_after is
				// answered late: it holds only this goroutine and its
				// connection, and its next call cannot come sooner.
				if !holdFor(r.Context(), refusal.Pace) {
					return
				}
				// A JSON-RPC error in a 200 reaches the model with its data;
				// clients take a 429 for a transport failure.
				refuse(w, http.StatusOK, msg.ID, refusal)
				return
			}
			defer release()
			next.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// holdFor waits d, or until ctx ends; it reports whether d passed.
func holdFor(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// holdUntilEnd calls release once the session id of server ends, or at
// once when there is no such session (the initialize failed, or opened
// none).
func holdUntilEnd(server *mcp.Server, id string, release func()) {
	if id != "" {
		for ss := range server.Sessions() {
			if ss.ID() == id {
				go func() {
					_ = ss.Wait()
					release()
				}()
				return
			}
		}
	}
	release()
}

// refuse answers a request refused by a limit: a JSON-RPC error naming it
// in data.reason, with data.retry_after and a Retry-After header.
func refuse(w http.ResponseWriter, status int, rawID json.RawMessage, r *limits.Refusal) {
	data, _ := json.Marshal(map[string]any{"reason": r.Reason, "scope": r.Scope, "limit": r.Limit, "retry_after": r.RetryAfterSeconds()})
	var idv any
	if len(rawID) > 0 {
		_ = json.Unmarshal(rawID, &idv)
	}
	id, err := jsonrpc.MakeID(idv)
	if err != nil {
		id = jsonrpc.ID{}
	}
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: CodeLimitReached, Message: r.Error(), Data: data}})
	if err != nil {
		http.Error(w, r.Error(), http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(r.RetryAfterSeconds()))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// limitSignIns refuses console sign-in attempts from a source address past
// its rate with 429 and Retry-After, before the console checks a
// credential.
func limitSignIns(keeper *limits.Keeper, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/console/sign-in" {
			if refusal := keeper.SignIn(r.RemoteAddr, time.Now()); refusal != nil {
				w.Header().Set("Retry-After", strconv.Itoa(refusal.RetryAfterSeconds()))
				http.Error(w, refusal.Error(), http.StatusTooManyRequests)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
