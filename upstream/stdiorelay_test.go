package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
)

// recordEnv names the file a "recorded" server appends every tools/call
// and notifications/cancelled it reads to, one JSON object a line.
const recordEnv = "TASKGATE_UPSTREAM_TEST_RECORD"

// serveRecorded serves the tiny server, with a tool "wait" that reports
// progress once and then waits to be cancelled, over stdio, recording
// what it reads.
func serveRecorded(ctx context.Context, legacyOnly bool) error {
	s := newTinyServer(legacyOnly)
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Reports progress once, then waits until it is cancelled."}, waitCancelled)
	return s.Run(ctx, &recordingTransport{inner: &mcp.StdioTransport{}, path: os.Getenv(recordEnv)})
}

func waitCancelled(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	if token := req.Params.GetProgressToken(); token != nil {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Message: "waiting"}); err != nil {
			return nil, nil, err
		}
	}
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

type recordingTransport struct {
	inner mcp.Transport
	path  string
}

func (t *recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Connection: conn, path: t.path}, nil
}

type recordingConn struct {
	mcp.Connection
	path string
}

// recorded is one message a recorded server read.
type recorded struct {
	Method string          `json:"method"`
	ID     any             `json:"id"`
	Params json.RawMessage `json:"params"`
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && (req.Method == "tools/call" || req.Method == "notifications/cancelled") {
		line, merr := json.Marshal(recorded{Method: req.Method, ID: req.ID.Raw(), Params: req.Params})
		if merr != nil {
			return nil, merr
		}
		f, ferr := os.OpenFile(c.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if ferr != nil {
			return nil, ferr
		}
		_, werr := f.Write(append(line, '\n'))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, werr
		}
	}
	return msg, err
}

// records reads what a recorded server has read so far.
func records(t *testing.T, path string) []recorded {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []recorded
	for line := range strings.Lines(string(b)) {
		var r recorded
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// toolCalls returns the recorded calls of tool.
func toolCalls(t *testing.T, path, tool string) []recorded {
	t.Helper()
	var out []recorded
	for _, r := range records(t, path) {
		var p struct {
			Name string `json:"name"`
		}
		if r.Method == "tools/call" && json.Unmarshal(r.Params, &p) == nil && p.Name == tool {
			out = append(out, r)
		}
	}
	return out
}

// startRecorded starts a pool for a recorded stdio server and returns the
// file it records in.
func startRecorded(t *testing.T, legacy bool) (context.Context, *Upstream, string) {
	t.Helper()
	mode := "recorded"
	if legacy {
		mode = "recorded-legacy"
	}
	record := filepath.Join(t.TempDir(), "record.jsonl")
	cfg := stdioConfig("tiny", mode)
	cfg.Env[recordEnv] = record
	_, u := startPool(t, cfg, nil)
	ctx := testCtx(t)
	waitReady(ctx, t, u)
	return ctx, u, record
}

// eras are the stdio sessions a relayed call may go out in.
var eras = []struct {
	name   string
	legacy bool
	tiny   tinyUpstream
}{
	{"stdio 2025-11-25", true, tinyStdioLegacy},
	{"stdio 2026-07-28", false, tinyStdioModern},
}

// message is a relayed call's message, as its client reads it.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProgressToken json.RawMessage  `json:"progressToken"`
		Progress      float64          `json:"progress"`
		Message       string           `json:"message"`
		Level         mcp.LoggingLevel `json:"level"`
		Data          any              `json:"data"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// decode decodes a message, reporting (not fatally: calls run in
// goroutines too) one that is not JSON.
func decode(t *testing.T, data string) message {
	t.Helper()
	var m message
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Errorf("message %s: %v", data, err)
	}
	return m
}

// resultText is an answer's first text content.
func (m message) resultText(t *testing.T) string {
	t.Helper()
	var res mcp.CallToolResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Errorf("result %s: %v", m.Result, err)
	}
	return text(&res)
}

// nextEvent reads one event of a relayed call's stream and returns its
// data.
func nextEvent(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading an event: %v (so far %q)", err, data)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && data != "":
			return data
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// relayAll relays c and returns the data of every event of its stream.
func relayAll(ctx context.Context, t *testing.T, u *Upstream, c *RelayedCall) []string {
	t.Helper()
	events, err := relayEvents(ctx, u, c)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// relayEvents is relayAll for a goroutine of its own.
func relayEvents(ctx context.Context, u *Upstream, c *RelayedCall) ([]string, error) {
	resp, err := u.RelayCall(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("RelayCall(%s) = %w", c.Tool, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		return nil, fmt.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the relayed stream of %s: %w", c.Tool, err)
	}
	var out []string
	for _, ev := range strings.Split(string(b), "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "event: message\ndata: ")
		if !ok || strings.Contains(data, "\n") {
			return nil, fmt.Errorf("not one message event: %q", ev)
		}
		out = append(out, data)
	}
	return out, nil
}

func countCall(label string, n int) *RelayedCall {
	args, _ := json.Marshal(countArgs{N: n, Label: label})
	return &RelayedCall{ID: json.RawMessage(`1`), Tool: "count", Params: map[string]json.RawMessage{"arguments": args}, ProgressToken: json.RawMessage(`"p"`)}
}

const gatewayInfo = `{"name":"taskgate","version":"test"}`

// Calls relayed at once, all under the same client ID and progress token,
// each get their own progress, in order, and their own answer; a
// 2026-07-28 client's answer is annotated as the gateway's server
// annotates one.
func TestStdioRelayedCallsGetTheirOwnAnswerAndProgress(t *testing.T) {
	const calls, n = 8, 3
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			var o observed
			ctx, u := startTiny(t, era.tiny, &Options{Observe: o.observe})
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					label := fmt.Sprintf("call-%d", i)
					c := countCall(label, n)
					if i%2 == 1 {
						c.ServerInfo = json.RawMessage(gatewayInfo)
					}
					got, err := relayEvents(ctx, u, c)
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) != n+1 {
						t.Errorf("%s: %d messages %q, want %d progress and the answer", label, len(got), got, n)
						return
					}
					for j, data := range got[:n] {
						m := decode(t, data)
						if m.Method != methodProgress || string(m.Params.ProgressToken) != `"p"` || m.Params.Progress != float64(j+1) || m.Params.Message != label {
							t.Errorf("%s: message %d = %s, want progress %d of %s under token \"p\"", label, j, data, j+1, label)
						}
					}
					answer := decode(t, got[n])
					if string(answer.ID) != "1" || answer.resultText(t) != label {
						t.Errorf("%s: answer %s, want id 1 and text %q", label, got[n], label)
					}
					var res struct {
						ResultType string                     `json:"resultType"`
						Meta       map[string]json.RawMessage `json:"_meta"`
					}
					if err := json.Unmarshal(answer.Result, &res); err != nil {
						t.Error(err)
						return
					}
					if c.ServerInfo != nil && (res.ResultType != "complete" || res.Meta[mcp.MetaKeyServerInfo] == nil) {
						t.Errorf("%s: a 2026-07-28 client's answer %s lacks resultType complete or serverInfo", label, got[n])
					}
					if c.ServerInfo != nil && era.legacy && string(res.Meta[mcp.MetaKeyServerInfo]) != gatewayInfo {
						t.Errorf("%s: serverInfo %s, want the gateway's %s", label, res.Meta[mcp.MetaKeyServerInfo], gatewayInfo)
					}
				})
			}
			wg.Wait()
			// The SDK path works beside the relayed calls, and none is left.
			res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: countArgs{Label: "sdk"}}, nil)
			if err != nil || text(res) != "sdk" {
				t.Fatalf("CallTool after relayed calls = %v, %v", res, err)
			}
			u.mu.Lock()
			tap := u.conn.tap
			u.mu.Unlock()
			tap.relayMu.Lock()
			left := len(tap.relayed)
			tap.relayMu.Unlock()
			if left != 0 {
				t.Errorf("%d relayed calls still routed after every answer", left)
			}
			if got := o.count("tiny tools/call"); got != calls+1 {
				t.Errorf("%d tools/call observed, want %d", got, calls+1)
			}
		})
	}
}

// The child's JSON-RPC error reaches the client as the SDK path reports it.
func TestStdioRelayedErrorIsTheChilds(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, u := startTiny(t, era.tiny, nil)
			_, sdkErr := u.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}, nil)
			var want *jsonrpc.Error
			if !errors.As(sdkErr, &want) {
				t.Fatalf("CallTool(no_such_tool) = %v, want the child's JSON-RPC error", sdkErr)
			}
			got := relayAll(ctx, t, u, &RelayedCall{ID: json.RawMessage(`"c-1"`), Tool: "no_such_tool"})
			if len(got) != 1 {
				t.Fatalf("relayed messages %q, want the answer only", got)
			}
			m := decode(t, got[0])
			if string(m.ID) != `"c-1"` || m.Error == nil || m.Result != nil {
				t.Fatalf("answer %s, want an error under id \"c-1\"", got[0])
			}
			if m.Error.Code != want.Code || m.Error.Message != want.Message || string(m.Error.Data) != string(want.Data) {
				t.Errorf("relayed error %+v, want the SDK path's %+v", m.Error, want)
			}
		})
	}
}

// Log messages of a relayed call, the one call in flight, reach it in wire
// order with its progress, at its client's level or above.
func TestStdioRelayedCallGetsItsLogMessages(t *testing.T) {
	for _, era := range eras {
		for _, client := range []struct {
			name       string
			serverInfo json.RawMessage
		}{{"2025-11-25 client", nil}, {"2026-07-28 client", json.RawMessage(gatewayInfo)}} {
			t.Run(era.name+", "+client.name, func(t *testing.T) {
				ctx, u := startTiny(t, era.tiny, nil)
				args, _ := json.Marshal(countArgs{N: 6, Label: "L"})
				got := relayAll(ctx, t, u, &RelayedCall{
					ID: json.RawMessage(`1`), Tool: "chatty", Params: map[string]json.RawMessage{"arguments": args},
					ProgressToken: json.RawMessage(`"p"`), LogLevel: "info", ServerInfo: client.serverInfo,
				})
				var seen, want []string
				for _, data := range got[:len(got)-1] {
					m := decode(t, data)
					switch m.Method {
					case methodProgress:
						seen = append(seen, fmt.Sprintf("progress %v", m.Params.Progress))
					case methodLog:
						seen = append(seen, fmt.Sprintf("%s %v", m.Params.Level, m.Params.Data))
					default:
						t.Errorf("unexpected message %s", data)
					}
				}
				for i := 1; i <= 6; i++ {
					want = append(want, fmt.Sprintf("progress %d", i))
					if level := chattyLevel(i); level != "debug" {
						want = append(want, fmt.Sprintf("%s L-%d", level, i))
					}
				}
				if !slices.Equal(seen, want) {
					t.Errorf("relayed before the answer:\n%q\nwant\n%q", seen, want)
				}
				if m := decode(t, got[len(got)-1]); m.resultText(t) != "L" {
					t.Errorf("last message %s, want the answer", got[len(got)-1])
				}
			})
		}
	}
}

// The child reads the same request from a relayed call as from the SDK
// path's call of the same client (passThrough with askingOptions), but for
// the request ID and the progress token, which are the gateway's either
// way.
func TestStdioRelayedRequestIsTheSDKPaths(t *testing.T) {
	for _, era := range eras {
		for _, client := range []struct {
			name       string
			serverInfo json.RawMessage
			level      mcp.LoggingLevel
			// sdkLevel is the SDK path's CallOptions.LogLevel for the client.
			sdkLevel mcp.LoggingLevel
		}{
			{"2025-11-25 client", nil, "info", ""},
			{"2026-07-28 client", json.RawMessage(gatewayInfo), "warning", "warning"},
		} {
			t.Run(era.name+", "+client.name, func(t *testing.T) {
				ctx, u, record := startRecorded(t, era.legacy)
				args := json.RawMessage(`{"n":1,"label":"same"}`)
				params := &mcp.CallToolParams{Name: "count", Arguments: args, Meta: mcp.Meta{"trace": "t-1"}}
				params.SetProgressToken("p")
				if _, err := u.CallTool(ctx, params, &CallOptions{
					Progress: func(*mcp.ProgressNotificationParams) {},
					Log:      func(*mcp.LoggingMessageParams) {},
					LogLevel: client.sdkLevel,
				}); err != nil {
					t.Fatal(err)
				}
				relayAll(ctx, t, u, &RelayedCall{
					ID: json.RawMessage(`1`), Tool: "count", Params: map[string]json.RawMessage{"arguments": args},
					Meta: map[string]json.RawMessage{"trace": json.RawMessage(`"t-1"`)}, ProgressToken: json.RawMessage(`"p"`),
					LogLevel: client.level, ServerInfo: client.serverInfo,
				})
				calls := toolCalls(t, record, "count")
				if len(calls) != 2 {
					t.Fatalf("the child read %d calls, want 2", len(calls))
				}
				sdk, relayed := withoutToken(t, calls[0]), withoutToken(t, calls[1])
				if !strings.HasPrefix(sdk.token, "taskgate-") || strings.HasPrefix(sdk.token, relayIDPrefix) || !strings.HasPrefix(relayed.token, relayIDPrefix) {
					t.Errorf("progress tokens %q (SDK path) and %q (relayed), want the gateway's own, apart", sdk.token, relayed.token)
				}
				if _, numeric := calls[0].ID.(float64); !numeric || calls[1].ID != relayed.token {
					t.Errorf("request IDs %v (SDK path) and %v (relayed), want a number and the relayed call's token", calls[0].ID, calls[1].ID)
				}
				if !reflect.DeepEqual(sdk.params, relayed.params) {
					t.Errorf("the child read\n%s\nfrom the relay and\n%s\nfrom the SDK path", calls[1].Params, calls[0].Params)
				}
				if _, ok := relayed.params["_meta"].(map[string]any)[mcp.MetaKeyClientCapabilities]; ok == era.legacy {
					t.Errorf("client capabilities in the _meta of a %s request: %v, want %v", era.name, ok, !era.legacy)
				}
			})
		}
	}
}

type tokenless struct {
	params map[string]any
	token  string
}

// withoutToken decodes a recorded call's params and takes out its
// progress token.
func withoutToken(t *testing.T, r recorded) tokenless {
	t.Helper()
	var out tokenless
	if err := json.Unmarshal(r.Params, &out.params); err != nil {
		t.Fatal(err)
	}
	meta, _ := out.params["_meta"].(map[string]any)
	out.token, _ = meta["progressToken"].(string)
	delete(meta, "progressToken")
	return out
}

// A relayed call given up on, its caller gone or its body closed, is
// cancelled at the child under the request ID it went out with; the
// session keeps serving calls, relayed and not, and its gate is free.
func TestStdioRelayedCallIsCancelled(t *testing.T) {
	for _, era := range eras {
		for _, how := range []string{"context", "close"} {
			t.Run(era.name+", "+how, func(t *testing.T) {
				ctx, u, record := startRecorded(t, era.legacy)
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				resp, err := u.RelayCall(cctx, &RelayedCall{ID: json.RawMessage(`9`), Tool: "wait", ProgressToken: json.RawMessage(`"p"`)})
				if err != nil {
					t.Fatal(err)
				}
				r := bufio.NewReader(resp.Body)
				if m := decode(t, nextEvent(t, r)); m.Params.Message != "waiting" {
					t.Fatalf("first message %+v, want the wait's progress", m)
				}
				if how == "context" {
					cancel()
					if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
						t.Errorf("reading on after the caller went away = %v, want context.Canceled", err)
					}
				}
				resp.Body.Close()
				calls := toolCalls(t, record, "wait")
				if len(calls) != 1 {
					t.Fatalf("the child read %d wait calls, want 1", len(calls))
				}
				testwait.Until(t, ctx, "the child to read notifications/cancelled for the relayed call", func() (bool, error) {
					for _, rec := range records(t, record) {
						var p struct {
							RequestID any `json:"requestId"`
						}
						if rec.Method == "notifications/cancelled" && json.Unmarshal(rec.Params, &p) == nil && p.RequestID == calls[0].ID {
							return true, nil
						}
					}
					return false, nil
				})
				if got := relayAll(ctx, t, u, countCall("after", 1)); len(got) != 2 || decode(t, got[1]).resultText(t) != "after" {
					t.Errorf("a relayed call after the cancelled one got %q", got)
				}
				if era.legacy {
					// A call that holds the session alone gets it: the
					// cancelled call no longer shares it.
					res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: askArgs{Label: "A"}}, &CallOptions{
						Elicit: func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
							return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}, nil
						},
					})
					if err != nil || text(res) != "accept:yes" {
						t.Errorf("an eliciting call after the cancelled one = %v, %v", res, err)
					}
				}
			})
		}
	}
}

// A relayed call whose child dies before answering ends with Unanswered
// and is not sent again; the next call goes to the next child.
func TestStdioRelayedCallOfADeadChildIsUnanswered(t *testing.T) {
	unanswered := `{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"upstream tiny did not answer; try again shortly"}}`
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, u, record := startRecorded(t, era.legacy)
			dying := u.pid()
			resp, err := u.RelayCall(ctx, &RelayedCall{ID: json.RawMessage(`9`), Tool: "wait", ProgressToken: json.RawMessage(`"p"`), Unanswered: []byte(unanswered)})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			nextEvent(t, r) // the wait has begun
			kill(t, dying)
			if got := nextEvent(t, r); got != unanswered {
				t.Errorf("after the child died the stream went on with %s, want %s", got, unanswered)
			}
			if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
				t.Errorf("after Unanswered the stream held %q, %v; want its end", rest, err)
			}
			testwait.Until(t, ctx, "the next child", func() (bool, error) {
				p := u.pid()
				return p != 0 && p != dying, nil
			})
			waitReady(ctx, t, u)
			if got := relayAll(ctx, t, u, countCall("next", 1)); len(got) != 2 || decode(t, got[1]).resultText(t) != "next" {
				t.Errorf("a relayed call to the next child got %q", got)
			}
			if n := len(toolCalls(t, record, "wait")); n != 1 {
				t.Errorf("the children read %d wait calls, want 1: a call that went out is not sent again", n)
			}
		})
	}
}

// While a call that may be asked questions holds the stdio session alone,
// relayed calls wait, as the SDK path's shared calls do: one whose
// deadline passes meanwhile fails having sent nothing, and one that waits
// goes out once the session is free.
func TestStdioRelayedCallsWaitForACallHoldingTheSession(t *testing.T) {
	ctx, u, record := startRecorded(t, true)
	asked, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: askArgs{Label: "H"}}, &CallOptions{
			Elicit: func(ctx context.Context, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				close(asked)
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "held"}}, nil
			},
		})
		if err == nil && text(res) != "accept:held" {
			err = fmt.Errorf("ask answered %q", text(res))
		}
		held <- err
	}()
	<-asked
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if resp, err := u.RelayCall(short, countCall("short", 1)); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNotForwardable) {
		if resp != nil {
			resp.Body.Close()
		}
		t.Fatalf("RelayCall while the session is held = %v, want it to wait until its deadline", err)
	}
	if n := len(toolCalls(t, record, "count")); n != 0 {
		t.Fatalf("the child read %d count calls while the session was held, want 0", n)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the call holding the session: %v", err)
	}
	if got := relayAll(ctx, t, u, countCall("after", 1)); len(got) != 2 || decode(t, got[1]).resultText(t) != "after" {
		t.Errorf("a relayed call after the session was free got %q", got)
	}
}

// The child's requests during a relayed call go to the go-sdk, which
// answers them as for any call whose client cannot be asked: an
// elicitation is declined.
func TestStdioChildsRequestsDuringARelayedCallGoToTheSDK(t *testing.T) {
	ctx, u := startTiny(t, tinyStdioLegacy, nil)
	args, _ := json.Marshal(askArgs{Label: "R"})
	got := relayAll(ctx, t, u, &RelayedCall{ID: json.RawMessage(`1`), Tool: "ask", Params: map[string]json.RawMessage{"arguments": args}})
	if len(got) != 1 || decode(t, got[0]).resultText(t) != "decline:" {
		t.Errorf("relayed ask got %q, want its answer after a declined elicitation", got)
	}
}

// A stdio upstream without a session takes no relayed call: the caller
// takes the SDK path.
func TestStdioRelayWithoutASessionIsNotForwardable(t *testing.T) {
	_, u := startPool(t, stdioConfig("crash", "crash"), nil)
	resp, err := u.RelayCall(testCtx(t), countCall("x", 1))
	if resp != nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrNotForwardable) {
		t.Fatalf("RelayCall to a stdio upstream with no session = %v, want ErrNotForwardable", err)
	}
}
