package taskwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/canon"
)

// This file holds the wire shapes of both eras and the conversions between
// them and the era-neutral Task.

const (
	resultTypeTask          = "task"
	resultTypeComplete      = "complete"
	resultTypeInputRequired = "input_required"
)

// legacyTask is the 2025-11-25 Task object.
type legacyTask struct {
	TaskID        string `json:"taskId"`
	Status        Status `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"` // null means unlimited
	PollInterval  *int64 `json:"pollInterval,omitempty"`
}

// extensionTask is the SEP-2663 Task object, without its detailed fields.
type extensionTask struct {
	TaskID         string `json:"taskId"`
	Status         Status `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs"` // null means unlimited
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
}

// legacyCreateResult answers a task-augmented tools/call in 2025-11-25.
type legacyCreateResult struct {
	mcp.ResultBase
	Task legacyTask `json:"task"`
}

// legacyTaskResult answers tasks/get and tasks/cancel in 2025-11-25.
type legacyTaskResult struct {
	mcp.ResultBase
	legacyTask
}

// legacyListResult answers tasks/list in 2025-11-25.
type legacyListResult struct {
	mcp.ResultBase
	Tasks      []legacyTask `json:"tasks"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// extensionCreateResult is the flat CreateTaskResult of SEP-2663.
type extensionCreateResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	extensionTask
}

// extensionGetResult is the DetailedTask answer to tasks/get in SEP-2663.
type extensionGetResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	extensionTask
	Result        json.RawMessage `json:"result,omitempty"`
	Error         *jsonrpc.Error  `json:"error,omitempty"`
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
}

// ackResult is the empty acknowledgement of tasks/update and tasks/cancel in
// SEP-2663.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func millis(d time.Duration) *int64 {
	ms := int64(d / time.Millisecond)
	return &ms
}

func ttlMillis(ttl *time.Duration) *int64 {
	if ttl == nil {
		return nil
	}
	return millis(*ttl)
}

func pollMillis(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	return millis(d)
}

// resultIsError reports whether a CallToolResult JSON has isError:true.
func resultIsError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return len(result) > 0 && json.Unmarshal(result, &r) == nil && r.IsError
}

// legacyStatus is the 2025-11-25 status of t: a tool result with isError:true
// makes the task failed in that era.
func legacyStatus(t *Task) Status {
	if t.Status == StatusCompleted && resultIsError(t.Result) {
		return StatusFailed
	}
	return t.Status
}

// extensionStatus is the SEP-2663 status of t: failed is reserved for JSON-RPC
// errors, so a failed task that holds a tool result shows as completed.
func extensionStatus(t *Task) Status {
	if t.Status == StatusFailed && t.Error == nil && len(t.Result) > 0 {
		return StatusCompleted
	}
	return t.Status
}

func toLegacyTask(t *Task) legacyTask {
	return legacyTask{
		TaskID:        t.ID,
		Status:        legacyStatus(t),
		StatusMessage: t.StatusMessage,
		CreatedAt:     formatTime(t.CreatedAt),
		LastUpdatedAt: formatTime(t.LastUpdatedAt),
		TTL:           ttlMillis(t.TTL),
		PollInterval:  pollMillis(t.PollInterval),
	}
}

func toExtensionTask(t *Task) extensionTask {
	return extensionTask{
		TaskID:         t.ID,
		Status:         extensionStatus(t),
		StatusMessage:  t.StatusMessage,
		CreatedAt:      formatTime(t.CreatedAt),
		LastUpdatedAt:  formatTime(t.LastUpdatedAt),
		TTLMs:          ttlMillis(t.TTL),
		PollIntervalMs: pollMillis(t.PollInterval),
	}
}

// MarshalTask is t's Task object as era's wire spells it: taskId, status,
// statusMessage, createdAt, lastUpdatedAt, and ttl and pollInterval
// (2025-11-25) or ttlMs and pollIntervalMs (2026-07-28), without the
// result, error or input requests a tasks/get may carry beside it. It is
// how a peer's task is kept as a record of what it said.
func MarshalTask(t *Task, era Era) (json.RawMessage, error) {
	switch era {
	case EraLegacy:
		return json.Marshal(toLegacyTask(t))
	case EraExtension:
		return json.Marshal(toExtensionTask(t))
	}
	return nil, fmt.Errorf("a task has no wire shape in era %s", era)
}

func newLegacyCreateResult(t *Task) *legacyCreateResult {
	return &legacyCreateResult{Task: toLegacyTask(t)}
}

func newLegacyTaskResult(t *Task) *legacyTaskResult {
	return &legacyTaskResult{legacyTask: toLegacyTask(t)}
}

func newLegacyListResult(tasks []*Task, next string) *legacyListResult {
	res := &legacyListResult{Tasks: []legacyTask{}, NextCursor: next}
	for _, t := range tasks {
		res.Tasks = append(res.Tasks, toLegacyTask(t))
	}
	return res
}

func newExtensionCreateResult(t *Task) *extensionCreateResult {
	return &extensionCreateResult{ResultType: resultTypeTask, extensionTask: toExtensionTask(t)}
}

func newAckResult() *ackResult { return &ackResult{ResultType: resultTypeComplete} }

// newExtensionGetResult renders t as a DetailedTask: completed tasks inline
// their result (without related-task _meta), failed tasks their error, and
// input_required tasks all outstanding input requests.
func newExtensionGetResult(t *Task) (*extensionGetResult, error) {
	res := &extensionGetResult{ResultType: resultTypeComplete, extensionTask: toExtensionTask(t)}
	switch res.Status {
	case StatusCompleted:
		result, err := withoutMetaKey(t.Result, RelatedTaskMetaKey)
		if err != nil {
			return nil, fmt.Errorf("task %s holds a result that is not a JSON object: %w", t.ID, err)
		}
		res.Result = result
	case StatusFailed:
		res.Error = t.Error
		if res.Error == nil {
			msg := t.StatusMessage
			if msg == "" {
				msg = "task failed"
			}
			res.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
		}
	case StatusInputRequired:
		requests := t.InputRequests
		if requests == nil {
			requests = map[string]json.RawMessage{}
		}
		raw, err := json.Marshal(requests)
		if err != nil {
			return nil, fmt.Errorf("task %s holds input requests that are not JSON: %w", t.ID, err)
		}
		res.InputRequests = raw
	}
	return res, nil
}

// rawResult is a result whose JSON object is kept as bytes. On the server it
// carries patched SDK results and replayed tool results; on the client it
// receives tasks/* answers of either era.
type rawResult struct {
	mcp.ResultBase
	body json.RawMessage
}

// MarshalJSON writes body with Meta merged into its _meta, so that _meta the
// SDK adds after the handler (serverInfo) is not lost.
func (r *rawResult) MarshalJSON() ([]byte, error) {
	if len(r.Meta) == 0 {
		return r.body, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &obj); err != nil {
		return nil, fmt.Errorf("result is not a JSON object: %w", err)
	}
	meta := map[string]json.RawMessage{}
	if m, ok := obj["_meta"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, fmt.Errorf("result _meta is not a JSON object: %w", err)
		}
	}
	for k, v := range r.Meta {
		b, err := marshalJSON(v)
		if err != nil {
			return nil, fmt.Errorf("result _meta %q: %w", k, err)
		}
		meta[k] = b
	}
	mb, err := marshalJSON(meta)
	if err != nil {
		return nil, err
	}
	obj["_meta"] = mb
	return marshalJSON(obj)
}

// UnmarshalJSON keeps the whole object.
func (r *rawResult) UnmarshalJSON(b []byte) error {
	r.body = bytes.Clone(b)
	return nil
}

// rewriteBody applies rewrite to the one JSON-RPC message in body, or to
// each message of a batch. A batch that does not parse is left as it is.
func rewriteBody(body []byte, rewrite func([]byte) []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return rewrite(body)
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(trimmed, &batch); err != nil {
		return body
	}
	for i, m := range batch {
		batch[i] = rewrite(m)
	}
	out, err := marshalJSON(batch)
	if err != nil {
		return body
	}
	return out
}

// marshalJSON is json.Marshal without HTML escaping, so rewritten payloads
// keep their bytes.
func marshalJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// withoutMetaKey returns the JSON object obj without _meta[key]; an empty
// _meta is dropped.
func withoutMetaKey(obj json.RawMessage, key string) (json.RawMessage, error) {
	if len(obj) == 0 {
		return json.RawMessage(`{"content":[]}`), nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil {
		return nil, err
	}
	m, ok := fields["_meta"]
	if !ok {
		return obj, nil
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(m, &meta); err != nil {
		return nil, err
	}
	if _, ok := meta[key]; !ok {
		return obj, nil
	}
	delete(meta, key)
	var err error
	if len(meta) == 0 {
		delete(fields, "_meta")
	} else if fields["_meta"], err = marshalJSON(meta); err != nil {
		return nil, err
	}
	return marshalJSON(fields)
}

// withMetaValue returns the JSON object obj with _meta[key] set to value.
func withMetaValue(obj json.RawMessage, key string, value any) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(obj) > 0 {
		if err := json.Unmarshal(obj, &fields); err != nil {
			return nil, err
		}
	}
	meta := map[string]json.RawMessage{}
	if m, ok := fields["_meta"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, err
		}
	}
	v, err := marshalJSON(value)
	if err != nil {
		return nil, err
	}
	meta[key] = v
	if fields["_meta"], err = marshalJSON(meta); err != nil {
		return nil, err
	}
	return marshalJSON(fields)
}

// anyTask decodes a Task object of either era.
type anyTask struct {
	TaskID         string                     `json:"taskId"`
	Status         Status                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTL            *float64                   `json:"ttl"`
	TTLMs          *float64                   `json:"ttlMs"`
	PollInterval   *float64                   `json:"pollInterval"`
	PollIntervalMs *float64                   `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result"`
	Error          *jsonrpc.Error             `json:"error"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
}

// decodeTask parses a Task object of either era into a Task.
func decodeTask(raw []byte) (*Task, error) {
	var w anyTask
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decoding task: %w", err)
	}
	if w.TaskID == "" {
		return nil, errors.New("decoding task: taskId is missing")
	}
	t := &Task{
		ID:            w.TaskID,
		Status:        w.Status,
		StatusMessage: w.StatusMessage,
		Error:         w.Error,
		InputRequests: w.InputRequests,
	}
	if len(w.Result) > 0 && string(w.Result) != "null" {
		t.Result = w.Result
	}
	var err error
	if t.CreatedAt, err = parseTime("createdAt", w.CreatedAt); err != nil {
		return nil, err
	}
	if t.LastUpdatedAt, err = parseTime("lastUpdatedAt", w.LastUpdatedAt); err != nil {
		return nil, err
	}
	if ttl := firstNumber(w.TTLMs, w.TTL); ttl != nil {
		d := msDuration(*ttl)
		t.TTL = &d
	}
	if poll := firstNumber(w.PollIntervalMs, w.PollInterval); poll != nil {
		t.PollInterval = msDuration(*poll)
	}
	return t, nil
}

func firstNumber(a, b *float64) *float64 {
	if a != nil {
		return a
	}
	return b
}

func msDuration(ms float64) time.Duration {
	return time.Duration(math.Round(ms)) * time.Millisecond
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("decoding task: %s %q is not an RFC 3339 timestamp: %w", field, s, err)
	}
	return t, nil
}

// Error constructors. The messages follow the examples in the specification.

func errTaskNotFound() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}
}

func errTaskExpired() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task has expired"}
}

func errCancelTerminal(s Status) *jsonrpc.Error {
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", s),
	}
}

// ReasonInvalidArguments is the data.reason of a -32602 error for a tool
// call's arguments that cannot be used as sent; data.path then names the
// offending value, such as arguments.items[2].n.
const ReasonInvalidArguments = "invalid_arguments"

// errUnreadableArguments is the error for arguments the go-sdk cannot decode
// (canon.CheckDoubles found a number beyond a double's range in them).
func errUnreadableArguments(err error) *jsonrpc.Error {
	data := map[string]string{"reason": ReasonInvalidArguments}
	var ie *canon.InputError
	if errors.As(err, &ie) {
		data["path"] = ie.Path
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid arguments: " + err.Error()}
	e.Data, _ = json.Marshal(data)
	return e
}

func errInvalidParams(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

func errMethodNotFound(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf(format, args...)}
}

func errInternal(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(format, args...)}
}

// errMissingCapability is the SEP-2663 error for a client that did not
// declare the extension on a request that needs it.
func errMissingCapability() *jsonrpc.Error {
	return &jsonrpc.Error{
		Code:    mcp.CodeMissingRequiredClientCapabilities,
		Message: "Missing required client capability",
		Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + ExtensionID + `":{}}}}`),
	}
}

// errTaskRequired is the error for a tools/call of a tool whose
// taskSupport is required, from a client that did not ask for a task. On
// 2025-11-25 the client could have (it sends params.task), and the
// specification's -32601 says so. A client of an earlier protocol has no
// tasks at all: it gets -32600 (the SDK sends every -32601 with a message of
// its own) saying which client the tool needs.
func errTaskRequired(tool, version string) *jsonrpc.Error {
	if version == protocolLegacy {
		return errMethodNotFound("Task augmentation required for tools/call requests: tool %q must be called as a task", tool)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
		"tool %q runs only as a task, and this client cannot receive tasks (protocol %q); "+
			"call it from a client with MCP tasks: protocol %s with tasks, or %s with the %s extension",
		tool, version, protocolLegacy, protocolExtension, ExtensionID)}
}

// errUnavailable is the answer to a request the server could not complete
// for reasons of its own; what went wrong is logged, never sent, since it
// may name databases, hosts or credentials.
func errUnavailable() *jsonrpc.Error {
	return errInternal("the server could not complete this request; try again shortly")
}

// hostError turns an error from a Host into the JSON-RPC error to send. A
// *jsonrpc.Error is sent as it is, since the SDK keeps the data of an error
// only when it is returned unwrapped; any other error becomes -32603 without
// its text.
func hostError(err error) *jsonrpc.Error {
	var werr *jsonrpc.Error
	switch {
	case errors.Is(err, ErrTaskNotFound):
		return errTaskNotFound()
	case errors.Is(err, ErrTaskExpired):
		return errTaskExpired()
	case errors.Is(err, ErrInvalidCursor):
		return errInvalidParams("Invalid cursor: %v", err)
	case errors.As(err, &werr):
		return werr
	default:
		return errUnavailable()
	}
}
