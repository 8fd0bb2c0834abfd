package taskwire

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol identifiers shared by both sides of the wire.
const (
	// ExtensionID names the SEP-2663 Tasks extension in capabilities.
	ExtensionID = "io.modelcontextprotocol/tasks"
	// RelatedTaskMetaKey is the 2025-11-25 _meta key tying a message to a task.
	RelatedTaskMetaKey = "io.modelcontextprotocol/related-task"
	// MetaIdempotencyKey is the reserved _meta key that carries
	// params.idempotencyKey inside this package's shims. On the server it is
	// filled only from params.idempotencyKey (a client cannot set it through
	// _meta); on the client, a value set here is sent as params.idempotencyKey
	// by a transport wrapped with [WrapClientTransport].
	MetaIdempotencyKey = "dev.taskgate/idempotency-key"

	// metaTask carries params.task (server side) or a task reply (client side).
	metaTask = "dev.taskgate/task"
	// metaRequestID carries the JSON text of the JSON-RPC request ID.
	metaRequestID = "dev.taskgate/request-id"
	// metaTaskIDs carries params.notifications.taskIds of a
	// subscriptions/listen.
	metaTaskIDs = "dev.taskgate/task-ids"
	// metaTasksCapability carries the server's 2025-11-25 capabilities.tasks
	// in an initialize result's _meta on the client side.
	metaTasksCapability = "dev.taskgate/tasks-capability"
	// metaExecution carries a tool's execution object in its _meta on the
	// client side.
	metaExecution = "dev.taskgate/execution"

	protocolLegacy    = "2025-11-25"
	protocolExtension = "2026-07-28"

	methodCallTool    = "tools/call"
	methodListTools   = "tools/list"
	methodInitialize  = "initialize"
	methodDiscover    = "server/discover"
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksList   = "tasks/list"
	methodTasksCancel = "tasks/cancel"
	methodTasksUpdate = "tasks/update"

	methodSubscriptionsListen = "subscriptions/listen"
)

// RelatedTaskID is the task a 2025-11-25 message's _meta ties it to
// (under [RelatedTaskMetaKey]), or "" when it names none.
func RelatedTaskID(meta map[string]any) string {
	switch rel := meta[RelatedTaskMetaKey].(type) {
	case map[string]any:
		id, _ := rel["taskId"].(string)
		return id
	case map[string]string:
		return rel["taskId"]
	}
	return ""
}

// Era is the task wire design a request may be answered with.
type Era int

const (
	// EraNone: the request cannot receive a task (a client without tasks, a
	// 2025-11-25 request without params.task, a 2026-07-28 request that does
	// not declare the extension, or a tool whose [TaskSupport] is forbidden).
	EraNone Era = iota
	// EraLegacy: protocol 2025-11-25 experimental tasks (SEP-1686).
	EraLegacy
	// EraExtension: protocol 2026-07-28 with the io.modelcontextprotocol/tasks
	// extension (SEP-2663).
	EraExtension
)

// String returns "none", "legacy" or "extension".
func (e Era) String() string {
	switch e {
	case EraLegacy:
		return "legacy"
	case EraExtension:
		return "extension"
	default:
		return "none"
	}
}

// Status is a task status; the values are the wire values of both eras.
type Status string

const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// IsTerminal reports whether the status can never change again.
func (s Status) IsTerminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// TaskSupport is a tool's task policy; the values are the 2025-11-25 wire
// values of execution.taskSupport. The zero value means forbidden.
type TaskSupport string

const (
	TaskForbidden TaskSupport = "forbidden"
	TaskOptional  TaskSupport = "optional"
	TaskRequired  TaskSupport = "required"
)

// Task is the era-neutral task state a [Host] returns.
//
// Store tool results as they are: a tool result with isError:true belongs in
// a StatusCompleted task with Result set. taskwire renders it as "completed"
// in the extension era and as "failed" in the legacy era, as each design
// requires. StatusFailed with Error set is for JSON-RPC errors.
type Task struct {
	ID            string
	Status        Status
	StatusMessage string
	CreatedAt     time.Time
	LastUpdatedAt time.Time
	// TTL is the retention from CreatedAt; nil means unlimited.
	TTL *time.Duration
	// PollInterval suggests how often to poll; zero omits it.
	PollInterval time.Duration
	// Result is the CallToolResult JSON of a completed task.
	Result json.RawMessage
	// Error is the JSON-RPC error of a failed task.
	Error *jsonrpc.Error
	// InputRequests are the outstanding requests of an input_required task
	// (extension era), keyed by their IDs; each value is {method, params}.
	InputRequests map[string]json.RawMessage
}

// Caller describes who sent a request and how it may be answered.
type Caller struct {
	// Era is the task shape this request may be answered with.
	Era Era
	// TasksDeclared reports whether the client asked for tasks on this
	// request: the extension declared in its _meta (2026-07-28), or
	// params.task sent (2025-11-25 tools/call; always true for tasks/*). It
	// differs from Era != EraNone only when the tool's TaskSupport forbids a
	// task.
	TasksDeclared bool
	// ProtocolVersion is the request's protocol version: the per-request
	// _meta version on 2026-07-28, the session's version otherwise.
	ProtocolVersion string
	// RequestedTTL is the legacy params.task.ttl, if the client sent one.
	RequestedTTL *time.Duration
	// TokenInfo is the bearer token information the HTTP auth middleware
	// attached, if any.
	TokenInfo *auth.TokenInfo
	// SessionID is the MCP session ID (legacy HTTP sessions), or empty.
	SessionID string
	// Header is the HTTP request header, if the request came over HTTP.
	Header http.Header
	// RequestID is the JSON text of the JSON-RPC request ID (for example 7 or
	// "abc"), when the request came through [NewHTTPHandler] or
	// [NewStdioTransport].
	RequestID string
	// Meta is the request's _meta as the client sent it (on 2026-07-28 it
	// includes the io.modelcontextprotocol/* protocol keys), without the keys
	// this package reserves. It is shared with the request: do not modify it.
	Meta map[string]any
	// IdempotencyKey is params.idempotencyKey of a tools/call, if any.
	IdempotencyKey string
	// Elicit asks the user through the client, on a 2025-11-25 session
	// whose client declared elicitation; nil otherwise. (On 2026-07-28 a
	// Host asks by answering with InputRequests instead.)
	Elicit func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	// ElicitationDeclared reports whether the client declared elicitation:
	// in this request's per-request capabilities on 2026-07-28 (so that it
	// may be answered with input requests), in its initialize on a session.
	ElicitationDeclared bool
	// ElicitationURL reports whether the client declared URL-mode
	// elicitation (elicitation.url), where it shows the user a URL to open
	// instead of a form, in the same places as ElicitationDeclared.
	ElicitationURL bool
	// NotifyElicitationComplete tells the client of a 2025-11-25 session
	// that the out-of-band interaction of a URL-mode elicitation has ended
	// (notifications/elicitation/complete); nil where Elicit is nil.
	NotifyElicitationComplete func(ctx context.Context, p *mcp.ElicitationCompleteParams) error
}

// ToolCall is a tools/call the [Host] may take over.
type ToolCall struct {
	Caller        Caller
	Name          string
	Arguments     json.RawMessage
	ProgressToken any
	// InputResponses and RequestState carry a 2026-07-28 client's answers
	// to the InputRequests of an earlier input_required result.
	InputResponses mcp.InputResponseMap
	RequestState   string
}

// Outcome is the Host's answer to a [ToolCall]: exactly one of Task, Result,
// Err is set, or Pass is true.
type Outcome struct {
	// Task is a task the Host created durably; allowed only when the call's
	// Caller.Era is not EraNone.
	Task *Task
	// Result answers the call directly.
	Result *mcp.CallToolResult
	// Err is sent as the JSON-RPC error; use a *jsonrpc.Error to choose the
	// code and data (any other error becomes -32603).
	Err error
	// Pass lets the tool handler registered on the *mcp.Server run.
	Pass bool
}

// Host owns the tasks. Its methods may be called concurrently.
//
// Every method that names a task must answer [ErrTaskNotFound] both for an
// unknown ID and for a task that does not belong to the caller, so task IDs
// cannot be probed. Any other error is reported as -32603, except a
// *jsonrpc.Error, which is sent as it is.
type Host interface {
	// CallTool decides how to answer a tools/call. A returned Task must be
	// durably created: a GetTask for it must succeed before CallTool returns.
	CallTool(ctx context.Context, call *ToolCall) (*Outcome, error)
	// GetTask returns the caller's task.
	GetTask(ctx context.Context, c *Caller, taskID string) (*Task, error)
	// CancelTask requests cancellation and returns the task afterwards. For a
	// legacy caller it should move a non-terminal task to cancelled before
	// returning; taskwire itself rejects cancelling a task that is already
	// terminal in that era.
	CancelTask(ctx context.Context, c *Caller, taskID string) (*Task, error)
	// UpdateTask delivers input responses (extension era), keyed by the
	// inputRequests keys they answer.
	UpdateTask(ctx context.Context, c *Caller, taskID string, responses map[string]json.RawMessage) error
	// ListTasks returns one page of the caller's tasks and the next cursor
	// ("" at the end); an unusable cursor is ErrInvalidCursor.
	ListTasks(ctx context.Context, c *Caller, cursor string) ([]*Task, string, error)
	// WaitTask returns the task once it is terminal, or ctx's error.
	WaitTask(ctx context.Context, c *Caller, taskID string) (*Task, error)
	// TaskSupport is the tool's task policy. Required makes taskwire reject
	// calls that cannot receive a task; legacy tools/list advertises it as
	// execution.taskSupport.
	TaskSupport(toolName string) TaskSupport
}

// Errors a Host returns; taskwire maps them to -32602 with the messages the
// specification uses.
var (
	ErrTaskNotFound  = errors.New("task not found")
	ErrTaskExpired   = errors.New("task has expired")
	ErrInvalidCursor = errors.New("invalid tasks/list cursor")
)
