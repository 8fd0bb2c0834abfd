package taskwire

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixedHost answers every task request with the same values.
type fixedHost struct {
	task      *Task // GetTask, WaitTask
	cancelled *Task // CancelTask
	list      []*Task
	next      string
	err       error
}

func (f *fixedHost) CallTool(context.Context, *ToolCall) (*Outcome, error) {
	return nil, errors.New("fixedHost does not run tools")
}
func (f *fixedHost) GetTask(context.Context, *Caller, string) (*Task, error) { return f.task, f.err }
func (f *fixedHost) WaitTask(context.Context, *Caller, string) (*Task, error) {
	return f.task, f.err
}
func (f *fixedHost) CancelTask(context.Context, *Caller, string) (*Task, error) {
	return f.cancelled, f.err
}
func (f *fixedHost) UpdateTask(context.Context, *Caller, string, map[string]json.RawMessage) error {
	return f.err
}
func (f *fixedHost) ListTasks(context.Context, *Caller, string) ([]*Task, string, error) {
	return f.list, f.next, f.err
}
func (f *fixedHost) TaskSupport(string) TaskSupport { return TaskOptional }

func at(hour, minute int) time.Time { return time.Date(2025, 11, 25, hour, minute, 0, 0, time.UTC) }

func ms(n int) *time.Duration {
	d := time.Duration(n) * time.Millisecond
	return &d
}

const specTaskID = "786512e2-9e0d-44bd-8f29-789f320fe840"

// specExample reads a JSON-RPC response from testdata and returns its result
// or error member as a decoded JSON tree.
func specExample(t *testing.T, file, member string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]any
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	v, ok := msg[member]
	if !ok {
		t.Fatalf("%s has no %q member", file, member)
	}
	return v
}

// decoded marshals v and decodes it into a JSON tree, so that comparisons
// ignore key order.
func decoded(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func compareJSON(t *testing.T, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("wire shape differs from the specification example\ngot:\n%s\nwant:\n%s", g, w)
	}
}

// compareJSONText is compareJSON for the decoded forms of got and want.
func compareJSONText(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	compareJSON(t, g, w)
}

func TestWireShapesMatchSpecExamples(t *testing.T) {
	working := &Task{
		ID: specTaskID, Status: StatusWorking, StatusMessage: "The operation is now in progress.",
		CreatedAt: at(10, 30), LastUpdatedAt: at(10, 40), TTL: ms(30000), PollInterval: 5 * time.Second,
	}
	created := *working
	created.TTL = ms(60000)
	cancelled := *working
	cancelled.Status = StatusCancelled
	cancelled.StatusMessage = "The task was cancelled by request."
	weather := &Task{
		ID: specTaskID, Status: StatusCompleted, CreatedAt: at(10, 30), LastUpdatedAt: at(10, 40), TTL: ms(30000),
		Result: json.RawMessage(`{"content":[{"type":"text","text":"Current weather in New York:\nTemperature: 72°F\nConditions: Partly cloudy"}],"isError":false}`),
	}
	listed := []*Task{
		{ID: specTaskID, Status: StatusWorking, CreatedAt: at(10, 30), LastUpdatedAt: at(10, 40), TTL: ms(30000), PollInterval: 5 * time.Second},
		{ID: "abc123-def456-ghi789", Status: StatusCompleted, CreatedAt: at(9, 15), LastUpdatedAt: at(10, 40), TTL: ms(60000),
			Result: json.RawMessage(`{"content":[]}`)},
	}
	extCreated := &Task{
		ID: specTaskID, Status: StatusWorking, CreatedAt: at(10, 30), LastUpdatedAt: at(10, 50), TTL: ms(3600000), PollInterval: 5 * time.Second,
	}
	inputRequired := *extCreated
	inputRequired.Status = StatusInputRequired
	inputRequired.InputRequests = map[string]json.RawMessage{
		"name": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Please enter your name.","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`),
	}
	completed := *extCreated
	completed.Status = StatusCompleted
	// The host may keep the related-task _meta of a legacy replay; the inlined
	// extension result must not carry it.
	completed.Result = json.RawMessage(`{"content":[{"type":"text","text":"Hello, Luca!"}],"isError":false,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + specTaskID + `"}}}`)
	failed := &Task{
		ID: "786512e2-9e0d-44bd-8f29-789f820fe840", Status: StatusFailed, StatusMessage: "Tool execution failed: API rate limit exceeded",
		CreatedAt: at(10, 30), LastUpdatedAt: at(10, 40), TTL: ms(3600000),
		Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "API rate limit exceeded"},
	}

	legacy := &Caller{Era: EraLegacy, ProtocolVersion: protocolLegacy}
	extension := &Caller{Era: EraExtension, ProtocolVersion: protocolExtension}

	tests := []struct {
		name   string
		file   string
		host   *fixedHost
		caller *Caller
		call   func(context.Context, *serverTasks) (mcp.Result, error)
		// fix adjusts a specification example that contradicts its own rules.
		fix func(t *testing.T, want map[string]any)
	}{
		{
			name: "legacy CreateTaskResult", file: "legacy_create_task_result.json",
			call: func(context.Context, *serverTasks) (mcp.Result, error) { return newLegacyCreateResult(&created), nil },
		},
		{
			name: "legacy tasks/get working", file: "legacy_tasks_get_working.json",
			host: &fixedHost{task: working}, caller: legacy,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.get(ctx, nil, &taskIDParams{TaskID: specTaskID})
			},
		},
		{
			name: "legacy tasks/result with related-task meta", file: "legacy_tasks_result.json",
			host: &fixedHost{task: weather}, caller: legacy,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.result(ctx, nil, &taskIDParams{TaskID: specTaskID})
			},
		},
		{
			name: "legacy tasks/list", file: "legacy_tasks_list.json",
			host: &fixedHost{list: listed, next: "next-page-cursor"}, caller: legacy,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.list(ctx, nil, &listParams{Cursor: "optional-cursor-value"})
			},
		},
		{
			name: "legacy tasks/cancel", file: "legacy_tasks_cancel.json",
			host: &fixedHost{task: working, cancelled: &cancelled}, caller: legacy,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.cancel(ctx, nil, &taskIDParams{TaskID: specTaskID})
			},
		},
		{
			name: "flat CreateTaskResult", file: "extension_create_task_result.json",
			call: func(context.Context, *serverTasks) (mcp.Result, error) {
				return newExtensionCreateResult(extCreated), nil
			},
		},
		{
			name: "extension tasks/get input_required", file: "extension_tasks_get_input_required.json",
			host: &fixedHost{task: &inputRequired}, caller: extension,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.get(ctx, nil, &taskIDParams{TaskID: specTaskID})
			},
		},
		{
			name: "extension tasks/get completed", file: "extension_tasks_get_completed.json",
			host: &fixedHost{task: &completed}, caller: extension,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.get(ctx, nil, &taskIDParams{TaskID: specTaskID})
			},
		},
		{
			name: "extension tasks/get failed", file: "extension_tasks_get_failed.json",
			host: &fixedHost{task: failed}, caller: extension,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.get(ctx, nil, &taskIDParams{TaskID: failed.ID})
			},
			// The specification's failed example shows resultType "task", but
			// its rule says tasks/get results MUST have resultType "complete"
			// and "task" is reserved for CreateTaskResult. We follow the rule.
			fix: func(t *testing.T, want map[string]any) {
				if want["resultType"] != "task" {
					t.Fatalf("the failed example changed: resultType = %v; revisit this fix", want["resultType"])
				}
				want["resultType"] = "complete"
			},
		},
		{
			name: "extension tasks/update ack", file: "extension_tasks_update_ack.json",
			host: &fixedHost{}, caller: extension,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.update(ctx, nil, &taskIDParams{TaskID: specTaskID, InputResponses: map[string]json.RawMessage{
					"name": json.RawMessage(`{"action":"accept","content":{"input":"Luca"}}`),
				}})
			},
		},
		{
			name: "extension tasks/cancel ack", file: "extension_tasks_cancel_ack.json",
			host: &fixedHost{cancelled: &completed}, caller: extension,
			call: func(ctx context.Context, s *serverTasks) (mcp.Result, error) {
				return s.cancel(ctx, nil, &taskIDParams{TaskID: specTaskID})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var host Host = &fixedHost{}
			if tt.host != nil {
				host = tt.host
			}
			s := &serverTasks{host: host, logger: testLogger(t)}
			ctx := context.Background()
			if tt.caller != nil {
				ctx = context.WithValue(ctx, callerKey{}, tt.caller)
			}
			res, err := tt.call(ctx, s)
			if err != nil {
				t.Fatalf("handler error: %v", err)
			}
			want := specExample(t, tt.file, "result").(map[string]any)
			if tt.fix != nil {
				tt.fix(t, want)
			}
			compareJSON(t, decoded(t, res), want)
		})
	}
}

func TestErrorsMatchSpecExamples(t *testing.T) {
	completed := &Task{ID: specTaskID, Status: StatusCompleted, CreatedAt: at(10, 30), LastUpdatedAt: at(10, 40),
		Result: json.RawMessage(`{"content":[]}`)}
	legacy := &Caller{Era: EraLegacy, ProtocolVersion: protocolLegacy}
	tests := []struct {
		name string
		file string
		call func() error
	}{
		{
			name: "unknown task", file: "legacy_error_not_found.json",
			call: func() error {
				s := &serverTasks{host: &fixedHost{err: ErrTaskNotFound}, logger: testLogger(t)}
				_, err := s.get(context.WithValue(context.Background(), callerKey{}, legacy), nil, &taskIDParams{TaskID: "nope"})
				return err
			},
		},
		{
			name: "expired task", file: "legacy_error_expired.json",
			call: func() error {
				s := &serverTasks{host: &fixedHost{err: ErrTaskExpired}, logger: testLogger(t)}
				_, err := s.result(context.WithValue(context.Background(), callerKey{}, legacy), nil, &taskIDParams{TaskID: "old"})
				return err
			},
		},
		{
			name: "cancel of a terminal task", file: "legacy_error_cancel_terminal.json",
			call: func() error {
				s := &serverTasks{host: &fixedHost{task: completed, cancelled: completed}, logger: testLogger(t)}
				_, err := s.cancel(context.WithValue(context.Background(), callerKey{}, legacy), nil, &taskIDParams{TaskID: specTaskID})
				return err
			},
		},
		{
			name: "missing required client capability", file: "extension_error_missing_capability.json",
			call: func() error { return errMissingCapability() },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || err != error(werr) {
				t.Fatalf("error = %#v, want an unwrapped *jsonrpc.Error", err)
			}
			compareJSON(t, decoded(t, werr), specExample(t, tt.file, "error"))
		})
	}
}

func TestLegacyTasksResultReplaysTheError(t *testing.T) {
	failed := &Task{ID: "t1", Status: StatusFailed, CreatedAt: at(10, 0), LastUpdatedAt: at(10, 1),
		Error: &jsonrpc.Error{Code: -32042, Message: "URL elicitation required", Data: json.RawMessage(`{"elicitations":[]}`)}}
	s := &serverTasks{host: &fixedHost{task: failed}, logger: testLogger(t)}
	ctx := context.WithValue(context.Background(), callerKey{}, &Caller{Era: EraLegacy})
	_, err := s.result(ctx, nil, &taskIDParams{TaskID: "t1"})
	if err != error(failed.Error) {
		t.Errorf("tasks/result error = %v, want the task's own *jsonrpc.Error %v (code and data intact)", err, failed.Error)
	}
}

func TestStatusByEra(t *testing.T) {
	isError := json.RawMessage(`{"content":[],"isError":true}`)
	ok := json.RawMessage(`{"content":[]}`)
	rpcErr := &jsonrpc.Error{Code: -32603, Message: "boom"}
	tests := []struct {
		name          string
		task          Task
		wantLegacy    Status
		wantExtension Status
	}{
		{"success", Task{Status: StatusCompleted, Result: ok}, StatusCompleted, StatusCompleted},
		{"isError result stored as completed", Task{Status: StatusCompleted, Result: isError}, StatusFailed, StatusCompleted},
		{"isError result stored as failed", Task{Status: StatusFailed, Result: isError}, StatusFailed, StatusCompleted},
		{"JSON-RPC error", Task{Status: StatusFailed, Error: rpcErr}, StatusFailed, StatusFailed},
		{"working", Task{Status: StatusWorking}, StatusWorking, StatusWorking},
		{"cancelled", Task{Status: StatusCancelled}, StatusCancelled, StatusCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := legacyStatus(&tt.task); got != tt.wantLegacy {
				t.Errorf("legacyStatus = %q, want %q", got, tt.wantLegacy)
			}
			if got := extensionStatus(&tt.task); got != tt.wantExtension {
				t.Errorf("extensionStatus = %q, want %q", got, tt.wantExtension)
			}
		})
	}
}

func TestEraKeysDoNotMix(t *testing.T) {
	task := &Task{ID: "t", Status: StatusWorking, CreatedAt: at(10, 0), LastUpdatedAt: at(10, 0),
		TTL: nil, PollInterval: 1500 * time.Microsecond}
	get, err := newExtensionGetResult(task)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		shape     any
		mustHave  map[string]any // key -> value (nil value means JSON null)
		forbidden []string
	}{
		{"flat CreateTaskResult", newExtensionCreateResult(task),
			map[string]any{"ttlMs": nil, "pollIntervalMs": float64(1), "resultType": "task"},
			[]string{"ttl", "pollInterval", "requestState", "task"}},
		{"extension tasks/get", get,
			map[string]any{"ttlMs": nil, "pollIntervalMs": float64(1), "resultType": "complete"},
			[]string{"ttl", "pollInterval", "requestState"}},
		{"legacy CreateTaskResult task", newLegacyCreateResult(task).Task,
			map[string]any{"ttl": nil, "pollInterval": float64(1)},
			[]string{"ttlMs", "pollIntervalMs", "resultType", "requestState"}},
		{"legacy tasks/get", newLegacyTaskResult(task),
			map[string]any{"ttl": nil, "pollInterval": float64(1)},
			[]string{"ttlMs", "pollIntervalMs", "resultType", "requestState"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := decoded(t, tt.shape).(map[string]any)
			for k, want := range tt.mustHave {
				got, ok := obj[k]
				if !ok || !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
				}
			}
			for _, k := range tt.forbidden {
				if _, ok := obj[k]; ok {
					t.Errorf("key %q must not appear in this era's shape: %v", k, obj)
				}
			}
		})
	}
}

func TestDecodeTaskRoundTrip(t *testing.T) {
	base := Task{ID: "t-1", Status: StatusWorking, StatusMessage: "busy", CreatedAt: at(10, 0).Add(123 * time.Millisecond),
		LastUpdatedAt: at(10, 5), TTL: ms(90000), PollInterval: 250 * time.Millisecond}
	unlimited := base
	unlimited.TTL = nil
	completed := base
	completed.Status = StatusCompleted
	completed.Result = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	tests := []struct {
		name   string
		encode func(*Task) any
		task   Task
	}{
		{"legacy", func(t *Task) any { return toLegacyTask(t) }, base},
		{"legacy unlimited ttl", func(t *Task) any { return toLegacyTask(t) }, unlimited},
		{"extension create", func(t *Task) any { return newExtensionCreateResult(t) }, base},
		{"extension get completed", func(t *Task) any {
			r, err := newExtensionGetResult(t)
			if err != nil {
				panic(err)
			}
			return r
		}, completed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.encode(&tt.task))
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeTask(b)
			if err != nil {
				t.Fatalf("decodeTask(%s): %v", b, err)
			}
			if got.Result != nil {
				got.Result = decodedRaw(t, got.Result)
			}
			want := tt.task
			if want.Result != nil {
				want.Result = decodedRaw(t, want.Result)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("decodeTask(%s) = %+v, want %+v", b, *got, want)
			}
		})
	}
}

// decodedRaw normalises JSON bytes for comparison.
func decodedRaw(t *testing.T, b json.RawMessage) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRelatedTaskID(t *testing.T) {
	tests := []struct {
		name string
		meta map[string]any
		want string
	}{
		{"as decoded from the wire", map[string]any{RelatedTaskMetaKey: map[string]any{"taskId": "t-1"}}, "t-1"},
		{"as built to send", map[string]any{RelatedTaskMetaKey: map[string]string{"taskId": "t-2"}}, "t-2"},
		{"no related task", map[string]any{"other": map[string]any{"taskId": "t-3"}}, ""},
		{"a task ID that is not a string", map[string]any{RelatedTaskMetaKey: map[string]any{"taskId": 7}}, ""},
		{"no _meta", nil, ""},
	}
	for _, tt := range tests {
		if got := RelatedTaskID(tt.meta); got != tt.want {
			t.Errorf("%s: RelatedTaskID = %q, want %q", tt.name, got, tt.want)
		}
	}
}
