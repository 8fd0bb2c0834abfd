package taskwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testHost is a minimal in-memory Host for the tests.
//
// Tools:
//   - "slow" (optional) and "needs_task" (required): run as a task when the
//     caller may receive one, otherwise answer directly. A task stays working
//     until the test calls release. The "outcome" argument picks the ending:
//     "ok" (default), "iserror" (a tool result with isError:true), "error"
//     (a JSON-RPC error), "ask" (input_required until tasks/update answers).
//   - "quick" (optional): like slow, but the task completes on its own.
//   - "plain" and "ask_user" (forbidden): Pass, so the SDK's registered
//     handler answers; ask_user elicits the caller's name first.
//   - "direct" (forbidden): answered by the host with a result.
//   - "broken" (forbidden): the host fails with an error whose text names
//     internals (hostSecret); so does GetTask of task "broken".
type testHost struct {
	mu       sync.Mutex
	seq      int
	tasks    map[string]*hostTask
	order    []string
	calls    []ToolCall
	waiting  chan string // receives a task ID when WaitTask starts waiting
	pageSize int
}

type hostTask struct {
	task    Task
	owner   string
	outcome string
	release chan struct{}
	done    chan struct{}
}

func newTestHost() *testHost {
	return &testHost{tasks: map[string]*hostTask{}, waiting: make(chan string, 16), pageSize: 2}
}

func (h *testHost) TaskSupport(tool string) TaskSupport {
	switch tool {
	case "slow", "quick":
		return TaskOptional
	case "needs_task":
		return TaskRequired
	default:
		return TaskForbidden
	}
}

func ownerOf(c *Caller) string {
	switch {
	case c.TokenInfo != nil:
		return "user:" + c.TokenInfo.UserID
	case c.SessionID != "":
		return "session:" + c.SessionID
	default:
		return "anonymous"
	}
}

func (h *testHost) CallTool(ctx context.Context, call *ToolCall) (*Outcome, error) {
	h.mu.Lock()
	h.calls = append(h.calls, *call)
	h.mu.Unlock()

	var args struct {
		Outcome string `json:"outcome"`
		Name    string `json:"name"`
	}
	if len(call.Arguments) > 0 {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return &Outcome{Err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}}, nil
		}
	}
	switch call.Name {
	case "broken":
		return nil, errors.New(hostSecret)
	case "plain", "ask_user":
		return &Outcome{Pass: true}, nil
	case "direct":
		return &Outcome{Result: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "direct ok"}}}}, nil
	case "slow", "needs_task", "quick":
	default:
		return &Outcome{Err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool " + call.Name}}, nil
	}
	if call.Caller.Era == EraNone {
		t := finished(&Task{}, args.Outcome, args.Name)
		if t.Error != nil {
			return &Outcome{Err: t.Error}, nil
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(t.Result, &res); err != nil {
			return nil, err
		}
		return &Outcome{Result: &res}, nil
	}

	h.mu.Lock()
	h.seq++
	now := time.Now().UTC()
	ttl := time.Minute
	if call.Caller.RequestedTTL != nil {
		ttl = *call.Caller.RequestedTTL
	}
	ht := &hostTask{
		task: Task{
			ID:            fmt.Sprintf("task-%d", h.seq),
			Status:        StatusWorking,
			StatusMessage: "The operation is now in progress.",
			CreatedAt:     now,
			LastUpdatedAt: now,
			TTL:           &ttl,
			PollInterval:  5 * time.Millisecond,
		},
		owner:   ownerOf(&call.Caller),
		outcome: args.Outcome,
		release: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if args.Outcome == "ask" {
		ht.task.Status = StatusInputRequired
		ht.task.InputRequests = map[string]json.RawMessage{
			"name": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Please enter your name.","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`),
		}
	}
	h.tasks[ht.task.ID] = ht
	h.order = append(h.order, ht.task.ID)
	t := ht.task
	h.mu.Unlock()

	if call.Name == "quick" {
		h.release(t.ID)
	}
	go h.work(ht, args.Name)
	return &Outcome{Task: &t}, nil
}

// finished fills t with the result of an outcome.
func finished(t *Task, outcome, name string) *Task {
	switch outcome {
	case "iserror":
		t.Status = StatusCompleted
		t.Result = json.RawMessage(`{"content":[{"type":"text","text":"the tool reported a failure"}],"isError":true}`)
	case "error":
		t.Status = StatusFailed
		t.StatusMessage = "Tool execution failed: API rate limit exceeded"
		t.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "API rate limit exceeded"}
	case "ask":
		t.Status = StatusCompleted
		t.Result = json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"Hello, %s!"}],"isError":false}`, name))
	default:
		t.Status = StatusCompleted
		t.Result = json.RawMessage(`{"content":[{"type":"text","text":"slow done"}]}`)
	}
	return t
}

// work finishes the task once released, unless it was cancelled first.
func (h *testHost) work(ht *hostTask, name string) {
	select {
	case <-ht.release:
	case <-ht.done:
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ht.task.Status.IsTerminal() {
		return
	}
	if ht.outcome == "ask" && ht.task.Status == StatusInputRequired {
		return // finished by UpdateTask
	}
	finished(&ht.task, ht.outcome, name)
	ht.task.LastUpdatedAt = time.Now().UTC()
	close(ht.done)
}

func (h *testHost) release(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ht, ok := h.tasks[id]; ok {
		select {
		case <-ht.release:
		default:
			close(ht.release)
		}
	}
}

// lookup returns the caller's task; h.mu must be held.
func (h *testHost) lookup(c *Caller, id string) (*hostTask, error) {
	ht, ok := h.tasks[id]
	if !ok || ht.owner != ownerOf(c) {
		return nil, ErrTaskNotFound
	}
	return ht, nil
}

// hostSecret is the text of the testHost's internal failures; it must
// never reach a client.
const hostSecret = "dial tcp 10.0.0.5:5432: password authentication failed for user taskgate"

func (h *testHost) GetTask(_ context.Context, c *Caller, id string) (*Task, error) {
	if id == "broken" {
		return nil, fmt.Errorf("loading task: %w", errors.New(hostSecret))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ht, err := h.lookup(c, id)
	if err != nil {
		return nil, err
	}
	t := ht.task
	return &t, nil
}

func (h *testHost) CancelTask(_ context.Context, c *Caller, id string) (*Task, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ht, err := h.lookup(c, id)
	if err != nil {
		return nil, err
	}
	if !ht.task.Status.IsTerminal() {
		ht.task.Status = StatusCancelled
		ht.task.StatusMessage = "The task was cancelled by request."
		ht.task.InputRequests = nil
		ht.task.LastUpdatedAt = time.Now().UTC()
		close(ht.done)
	}
	t := ht.task
	return &t, nil
}

func (h *testHost) UpdateTask(_ context.Context, c *Caller, id string, responses map[string]json.RawMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ht, err := h.lookup(c, id)
	if err != nil {
		return err
	}
	raw, ok := responses["name"]
	if !ok || ht.task.Status != StatusInputRequired {
		return nil // responses for keys that are not outstanding are ignored
	}
	var resp struct {
		Action  string `json:"action"`
		Content struct {
			Input string `json:"input"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "inputResponses.name: " + err.Error()}
	}
	finished(&ht.task, "ask", resp.Content.Input)
	ht.task.InputRequests = nil
	ht.task.LastUpdatedAt = time.Now().UTC()
	close(ht.done)
	return nil
}

func (h *testHost) ListTasks(_ context.Context, c *Caller, cursor string) ([]*Task, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var mine []*Task
	for _, id := range h.order {
		if ht := h.tasks[id]; ht.owner == ownerOf(c) {
			t := ht.task
			mine = append(mine, &t)
		}
	}
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 || n > len(mine) {
			return nil, "", fmt.Errorf("cursor %q: %w", cursor, ErrInvalidCursor)
		}
		start = n
	}
	end := min(start+h.pageSize, len(mine))
	next := ""
	if end < len(mine) {
		next = strconv.Itoa(end)
	}
	return mine[start:end], next, nil
}

func (h *testHost) WaitTask(ctx context.Context, c *Caller, id string) (*Task, error) {
	h.mu.Lock()
	ht, err := h.lookup(c, id)
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case h.waiting <- id:
	default:
	}
	select {
	case <-ht.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t := ht.task
	return &t, nil
}

// callsTo returns the recorded calls of a tool.
func (h *testHost) callsTo(tool string) []ToolCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(h.calls), func(c ToolCall) bool { return c.Name != tool })
}

// newTestServer returns an MCP server with the test tools registered and
// taskwire installed on behalf of host.
func newTestServer(t *testing.T, host Host) *mcp.Server {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "taskwire-test", Version: "v0.0.1"}, nil)
	schema := json.RawMessage(`{"type":"object"}`)
	for _, name := range []string{"slow", "quick", "needs_task", "plain", "direct"} {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " handled by the SDK"}}}, nil
		})
	}
	// ask_user elicits from the client: a server-to-client request, which
	// only a stateful legacy session can carry.
	server.AddTool(&mcp.Tool{Name: "ask_user", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Mode:            "form",
			Message:         "Your name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
		})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("hello %v", res.Content["name"])}}}, nil
	})
	if err := Install(server, host, nil); err != nil {
		t.Fatalf("Install: %v", err)
	}
	return server
}

// testLogger logs through t, so that output appears only for failing tests.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
