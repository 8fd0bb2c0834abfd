package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
)

// start serves the fixture on a free loopback port through run, as the
// command does, and returns its /mcp URL.
func start(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, slog.New(slog.DiscardHandler), "127.0.0.1:0", w)
		w.Close()
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("reading the announced URL: %v (run: %v)", err, <-errc)
	}
	go io.Copy(io.Discard, r)
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return strings.TrimSpace(line)
}

// connect opens a client session. The client answers no input requests by
// itself: the tests see them, as a gateway's background call does.
func connect(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "fixture-test", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), p)
	if err != nil {
		t.Fatalf("%s(%v): %v", p.Name, p.Arguments, err)
	}
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("result has no content: %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("first content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func field(t *testing.T, res *mcp.CallToolResult, name string) any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("structured content is %T, want an object: %+v", res.StructuredContent, res)
	}
	return m[name]
}

func lookup(t *testing.T, cs *mcp.ClientSession, key string) (status string, jobID any) {
	t.Helper()
	res := call(t, cs, &mcp.CallToolParams{Name: toolLookupJob, Arguments: map[string]any{"idempotency_key": key}})
	if res.IsError {
		t.Fatalf("lookup_job(%q) failed: %s", key, text(t, res))
	}
	status, _ = field(t, res, "status").(string)
	return status, field(t, res, "job_id")
}

func TestListsEveryToolTheScenariosCall(t *testing.T) {
	cs := connect(t, start(t))
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{toolGreet, toolSlowCompute, toolFailingJob, toolProtocolErrorJob, toolConfirmDelete,
		toolMultiInput, toolWithTask, toolLookupJob, toolGetJob, toolCancelJob} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s; it has %v", want, names)
		}
	}
}

func TestGreetAnswersAtOnce(t *testing.T) {
	cs := connect(t, start(t))
	res := call(t, cs, &mcp.CallToolParams{Name: toolGreet, Arguments: map[string]any{"name": "World"}})
	if got := text(t, res); res.IsError || got != "Hello, World!" {
		t.Errorf("greet = %q (isError %v), want Hello, World!", got, res.IsError)
	}
}

func TestAKeyRunsOneJobThatTheContractFinds(t *testing.T) {
	cs := connect(t, start(t))
	if status, _ := lookup(t, cs, "key-1"); status != lookupNotFound {
		t.Fatalf("lookup before any call = %q, want %q", status, lookupNotFound)
	}
	args := map[string]any{"seconds": 0, "label": "first", "idempotency_key": "key-1"}
	first := call(t, cs, &mcp.CallToolParams{Name: toolSlowCompute, Arguments: args})
	if first.IsError || !strings.Contains(text(t, first), "first") {
		t.Fatalf("slow_compute = %q (isError %v), want its label in the text", text(t, first), first.IsError)
	}
	jobID := field(t, first, "job_id")
	again := call(t, cs, &mcp.CallToolParams{Name: toolSlowCompute, Arguments: args})
	if got := field(t, again, "job_id"); got != jobID {
		t.Errorf("a repeated key ran job %v, want the key's job %v", got, jobID)
	}
	other := call(t, cs, &mcp.CallToolParams{Name: toolSlowCompute, Arguments: map[string]any{"seconds": 0, "idempotency_key": "key-2"}})
	if got := field(t, other, "job_id"); got == jobID {
		t.Errorf("another key got the first key's job %v", got)
	}
	if status, id := lookup(t, cs, "key-1"); status != string(jobCompleted) || id != jobID {
		t.Errorf("lookup = %q, %v; want %q, %v", status, id, jobCompleted, jobID)
	}
	got := call(t, cs, &mcp.CallToolParams{Name: toolGetJob, Arguments: map[string]any{"job_id": jobID}})
	if field(t, got, "status") != string(jobCompleted) || text(t, got) != text(t, first) {
		t.Errorf("get_job = %q, %v; want the job's own answer %q, completed", text(t, got), field(t, got, "status"), text(t, first))
	}
}

func TestCancelStopsARunningSlowCompute(t *testing.T) {
	cs := connect(t, start(t))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolSlowCompute, Arguments: map[string]any{"seconds": 60, "idempotency_key": "long"}})
		done <- answer{res, err}
	}()
	var jobID any
	testwait.Until(t, ctx, "the job to be found running", func() (bool, error) {
		status, id := lookup(t, cs, "long")
		jobID = id
		return status == string(jobRunning), errors.New("lookup answered " + status)
	})
	res := call(t, cs, &mcp.CallToolParams{Name: toolCancelJob, Arguments: map[string]any{"job_id": jobID}})
	if field(t, res, "effect_reversed") != true || field(t, res, "status") != string(jobCancelled) {
		t.Errorf("cancel_job of a running job = %+v, want cancelled with its effect reversed", res.StructuredContent)
	}
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		t.Fatal("slow_compute did not answer after its job was cancelled")
	}
	if a.err != nil || !a.res.IsError || !strings.Contains(text(t, a.res), "cancelled") {
		t.Errorf("the cancelled call answered %+v, %v; want a tool error saying it was cancelled", a.res, a.err)
	}
	if status, _ := lookup(t, cs, "long"); status != string(jobCancelled) {
		t.Errorf("lookup after cancel = %q, want cancelled", status)
	}

	ended := call(t, cs, &mcp.CallToolParams{Name: toolSlowCompute, Arguments: map[string]any{"seconds": 0, "idempotency_key": "short"}})
	res = call(t, cs, &mcp.CallToolParams{Name: toolCancelJob, Arguments: map[string]any{"job_id": field(t, ended, "job_id")}})
	if field(t, res, "effect_reversed") != false || field(t, res, "status") != string(jobCompleted) {
		t.Errorf("cancel_job of an ended job = %+v, want it left completed, nothing reversed", res.StructuredContent)
	}
}

func TestFailingJobEndsInAToolError(t *testing.T) {
	cs := connect(t, start(t))
	res := call(t, cs, &mcp.CallToolParams{Name: toolFailingJob, Arguments: map[string]any{"idempotency_key": "fail"}})
	if !res.IsError {
		t.Fatalf("failing_job = %q without isError", text(t, res))
	}
	if status, _ := lookup(t, cs, "fail"); status != string(jobCompleted) {
		t.Errorf("lookup = %q, want completed: the tool ran and reported its error", status)
	}
	got := call(t, cs, &mcp.CallToolParams{Name: toolGetJob, Arguments: map[string]any{"job_id": field(t, res, "job_id")}})
	if got.IsError || field(t, got, "is_error") != true {
		t.Errorf("get_job = %+v (isError %v), want an answer that says the job ended in a tool error", got.StructuredContent, got.IsError)
	}
}

func TestProtocolErrorJobEndsInAJSONRPCError(t *testing.T) {
	cs := connect(t, start(t))
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: toolProtocolErrorJob, Arguments: map[string]any{"idempotency_key": "crash"}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("protocol_error_job: err = %v, want a JSON-RPC error %d", err, jsonrpc.CodeInternalError)
	}
	if status, _ := lookup(t, cs, "crash"); status != string(jobFailed) {
		t.Errorf("lookup = %q, want failed", status)
	}
}

// elicits reports whether res asks for input under exactly keys, each an
// elicitation.
func elicits(t *testing.T, res *mcp.CallToolResult, keys ...string) {
	t.Helper()
	if !res.NeedsInput() || len(res.InputRequests) != len(keys) {
		t.Fatalf("result = %+v, want input requests %v", res, keys)
	}
	for _, k := range keys {
		if _, ok := res.InputRequests[k].(*mcp.ElicitParams); !ok {
			t.Errorf("inputRequests[%q] = %T, want an elicitation", k, res.InputRequests[k])
		}
	}
}

func accept(content map[string]any) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: content}
}

func TestConfirmDeleteAsksThenDeletes(t *testing.T) {
	cs := connect(t, start(t))
	p := &mcp.CallToolParams{Name: toolConfirmDelete, Arguments: map[string]any{"filename": "a.txt", "idempotency_key": "del"}}
	elicits(t, call(t, cs, p), "confirm")
	if status, _ := lookup(t, cs, "del"); status != lookupNotFound {
		t.Errorf("asking started a job: lookup = %q", status)
	}
	p.InputResponses = mcp.InputResponseMap{"confirm": accept(map[string]any{"confirm": true})}
	res := call(t, cs, p)
	if got := text(t, res); res.IsError || got != "deleted a.txt" {
		t.Errorf("confirmed confirm_delete = %q (isError %v), want deleted a.txt", got, res.IsError)
	}
}

func TestMultiInputTakesItsAnswersOneAtATime(t *testing.T) {
	cs := connect(t, start(t))
	p := &mcp.CallToolParams{Name: toolMultiInput, Arguments: map[string]any{}}
	first := call(t, cs, p)
	elicits(t, first, "name", "confirm")

	p.InputResponses = mcp.InputResponseMap{"name": accept(map[string]any{"name": "partial-1"})}
	p.RequestState = first.RequestState
	second := call(t, cs, p)
	elicits(t, second, "confirm")

	p.InputResponses = mcp.InputResponseMap{"confirm": accept(map[string]any{"confirm": true})}
	p.RequestState = second.RequestState
	res := call(t, cs, p)
	if got := text(t, res); res.IsError || got != "name=partial-1 confirm=true" {
		t.Errorf("multi_input = %q (isError %v), want both answers", got, res.IsError)
	}
}

func TestToolWithTaskGreetsTheNameItAskedFor(t *testing.T) {
	cs := connect(t, start(t))
	p := &mcp.CallToolParams{Name: toolWithTask, Arguments: map[string]any{}}
	elicits(t, call(t, cs, p), "user_name")
	p.InputResponses = mcp.InputResponseMap{"user_name": accept(map[string]any{"name": "Alice"})}
	res := call(t, cs, p)
	if got := text(t, res); res.IsError || !strings.Contains(got, "Alice") {
		t.Errorf("test_tool_with_task = %q (isError %v), want it to greet Alice", got, res.IsError)
	}
}
