package taskwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InstallClient registers the tasks/* methods on client so that [GetTask],
// [AwaitTask], [UpdateTask], [CancelTask], [TaskResult] and [ListTasks] can
// send them. Call it once, before connecting.
func InstallClient(client *mcp.Client) error {
	for _, register := range []func() error{
		func() error { return mcp.AddSendingCustomMethod[*taskIDParams, *rawResult](client, methodTasksGet) },
		func() error { return mcp.AddSendingCustomMethod[*taskIDParams, *rawResult](client, methodTasksCancel) },
		func() error { return mcp.AddSendingCustomMethod[*taskIDParams, *rawResult](client, methodTasksUpdate) },
		func() error {
			return mcp.AddSendingCustomMethod[*taskIDParams, *mcp.CallToolResult](client, methodTasksResult)
		},
		func() error { return mcp.AddSendingCustomMethod[*listParams, *rawResult](client, methodTasksList) },
	} {
		if err := register(); err != nil {
			return fmt.Errorf("taskwire: registering client task methods: %w", err)
		}
	}
	return nil
}

// ClientCapabilitiesWithTasks returns a copy of base (nil means the go-sdk
// client defaults) that declares the tasks extension. Set it as
// mcp.ClientOptions.Capabilities to let a 2026-07-28 server answer any
// tools/call with a task; read such answers with [TaskFromResult].
// [CallToolAsTask] declares the extension on its own requests without it.
func ClientCapabilitiesWithTasks(base *mcp.ClientCapabilities) *mcp.ClientCapabilities {
	var caps mcp.ClientCapabilities
	if base != nil {
		caps = *base
		caps.Extensions = maps.Clone(base.Extensions)
	} else {
		// The go-sdk's defaults when ClientOptions.Capabilities is nil.
		caps.RootsV2 = &mcp.RootCapabilities{ListChanged: true}
	}
	caps.AddExtension(ExtensionID, nil)
	return &caps
}

// ServerOffersTasks reports which task design the connected server offers:
// EraExtension for a 2026-07-28 server advertising the extension, EraLegacy
// for a 2025-11-25 server with capabilities.tasks.requests.tools.call (seen
// only through a transport wrapped with [WrapClientTransport]), EraNone
// otherwise.
func ServerOffersTasks(cs *mcp.ClientSession) Era {
	ir := cs.InitializeResult()
	if ir == nil {
		return EraNone
	}
	switch {
	case ir.ProtocolVersion >= protocolExtension:
		if ir.Capabilities != nil {
			if _, ok := ir.Capabilities.Extensions[ExtensionID]; ok {
				return EraExtension
			}
		}
	case ir.ProtocolVersion == protocolLegacy:
		var caps struct {
			Requests struct {
				Tools struct {
					Call *struct{} `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		}
		if remarshal(ir.Meta[metaTasksCapability], &caps) == nil && caps.Requests.Tools.Call != nil {
			return EraLegacy
		}
	}
	return EraNone
}

// ToolTaskSupport returns a tool's 2025-11-25 execution.taskSupport, as
// listed by a server through a transport wrapped with [WrapClientTransport].
// 2026-07-28 servers list no task support: they decide per call.
func ToolTaskSupport(tool *mcp.Tool) TaskSupport {
	var exec struct {
		TaskSupport TaskSupport `json:"taskSupport"`
	}
	if tool == nil || remarshal(tool.Meta[metaExecution], &exec) != nil {
		return TaskForbidden
	}
	switch exec.TaskSupport {
	case TaskOptional, TaskRequired:
		return exec.TaskSupport
	default:
		return TaskForbidden
	}
}

// CallToolAsTask calls a tool and lets the server answer with a task. On a
// 2026-07-28 session it declares the extension on this request (the server
// decides); on a 2025-11-25 session whose server offers tasks it sends
// params.task with ttl (nil leaves the retention to the server); otherwise it
// makes a plain call. It returns the task, or nil and the direct result.
//
// The session's transport must be wrapped with [WrapClientTransport]: the
// go-sdk discards task replies while decoding a CallToolResult.
func CallToolAsTask(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams, ttl *time.Duration) (*Task, *mcp.CallToolResult, error) {
	if params == nil {
		return nil, nil, errors.New("taskwire: CallToolAsTask needs params naming the tool")
	}
	p := *params
	p.Meta = maps.Clone(params.Meta)
	if p.Meta == nil {
		p.Meta = mcp.Meta{}
	}
	ir := cs.InitializeResult()
	switch {
	case ir != nil && ir.ProtocolVersion >= protocolExtension:
		p.Meta[metaTask] = map[string]any{}
	case ServerOffersTasks(cs) == EraLegacy:
		task := map[string]any{}
		if ttl != nil {
			task["ttl"] = ttl.Milliseconds()
		}
		p.Meta[metaTask] = task
	}
	res, err := cs.CallTool(ctx, &p)
	if err != nil {
		return nil, nil, err
	}
	t, err := TaskFromResult(res)
	if err != nil || t != nil {
		return t, nil, err
	}
	return nil, res, nil
}

// TaskFromResult returns the task a tools/call was answered with, or nil if
// res is a direct result. It needs a transport wrapped with
// [WrapClientTransport].
func TaskFromResult(res *mcp.CallToolResult) (*Task, error) {
	if res == nil {
		return nil, nil
	}
	raw, ok := res.Meta[metaTask]
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("taskwire: re-encoding task reply: %w", err)
	}
	return decodeTask(b)
}

// GetTask polls a task with tasks/get. In the extension era the task carries
// the inlined result, error or input requests.
func GetTask(ctx context.Context, cs *mcp.ClientSession, taskID string) (*Task, error) {
	res, err := mcp.CallCustomMethod[*taskIDParams, *rawResult](ctx, cs, methodTasksGet, &taskIDParams{TaskID: taskID})
	if err != nil {
		return nil, fmt.Errorf("taskwire: tasks/get %q: %w", taskID, err)
	}
	return decodeTask(res.body)
}

// AwaitTask polls tasks/get until the task is terminal or needs input,
// waiting the task's pollInterval between polls (fallback when the server
// gives none).
func AwaitTask(ctx context.Context, cs *mcp.ClientSession, taskID string, fallback time.Duration) (*Task, error) {
	for {
		t, err := GetTask(ctx, cs, taskID)
		if err != nil {
			return nil, err
		}
		if t.Status.IsTerminal() || t.Status == StatusInputRequired {
			return t, nil
		}
		wait := t.PollInterval
		if wait <= 0 {
			wait = fallback
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("taskwire: waiting for task %q: %w", taskID, ctx.Err())
		case <-timer.C:
		}
	}
}

// UpdateTask delivers input responses with tasks/update (extension era).
func UpdateTask(ctx context.Context, cs *mcp.ClientSession, taskID string, responses map[string]json.RawMessage) error {
	_, err := mcp.CallCustomMethod[*taskIDParams, *rawResult](ctx, cs, methodTasksUpdate, &taskIDParams{TaskID: taskID, InputResponses: responses})
	if err != nil {
		return fmt.Errorf("taskwire: tasks/update %q: %w", taskID, err)
	}
	return nil
}

// CancelTask requests cancellation with tasks/cancel. It returns the
// cancelled task in the legacy era and nil in the extension era, where the
// answer is only an acknowledgement.
func CancelTask(ctx context.Context, cs *mcp.ClientSession, taskID string) (*Task, error) {
	res, err := mcp.CallCustomMethod[*taskIDParams, *rawResult](ctx, cs, methodTasksCancel, &taskIDParams{TaskID: taskID})
	if err != nil {
		return nil, fmt.Errorf("taskwire: tasks/cancel %q: %w", taskID, err)
	}
	var probe struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(res.body, &probe) != nil || probe.TaskID == "" {
		return nil, nil
	}
	return decodeTask(res.body)
}

// TaskResult blocks on tasks/result (legacy era) until the task is terminal
// and returns the tool result, or the JSON-RPC error the call ended with.
func TaskResult(ctx context.Context, cs *mcp.ClientSession, taskID string) (*mcp.CallToolResult, error) {
	res, err := mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, cs, methodTasksResult, &taskIDParams{TaskID: taskID})
	if err != nil {
		return nil, fmt.Errorf("taskwire: tasks/result %q: %w", taskID, err)
	}
	return res, nil
}

// ListTasks returns one page of tasks/list (legacy era) and the next cursor.
func ListTasks(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]*Task, string, error) {
	res, err := mcp.CallCustomMethod[*listParams, *rawResult](ctx, cs, methodTasksList, &listParams{Cursor: cursor})
	if err != nil {
		return nil, "", fmt.Errorf("taskwire: tasks/list: %w", err)
	}
	var page struct {
		Tasks      []json.RawMessage `json:"tasks"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(res.body, &page); err != nil {
		return nil, "", fmt.Errorf("taskwire: decoding tasks/list result: %w", err)
	}
	tasks := make([]*Task, 0, len(page.Tasks))
	for _, raw := range page.Tasks {
		t, err := decodeTask(raw)
		if err != nil {
			return nil, "", err
		}
		tasks = append(tasks, t)
	}
	return tasks, page.NextCursor, nil
}

// remarshal decodes a value from a decoded-JSON tree into v.
func remarshal(from, v any) error {
	if from == nil {
		return errors.New("no value")
	}
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
