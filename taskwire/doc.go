// Package taskwire holds the MCP Tasks protocol layer for both protocol eras
// on top of github.com/modelcontextprotocol/go-sdk: the wire shapes, era
// detection and routing, the tasks/* method handlers, and the client-side
// calls.
//
// Two wire-incompatible designs are served side by side:
//
//   - [EraExtension]: protocol 2026-07-28 with the Tasks extension
//     io.modelcontextprotocol/tasks (SEP-2663). Stateless; the client declares
//     the extension in each request's _meta; the server decides when to answer
//     tools/call with a flat CreateTaskResult; tasks/get inlines the result,
//     tasks/update and tasks/cancel are acknowledgements.
//   - [EraLegacy]: protocol 2025-11-25 experimental tasks (SEP-1686). Stateful
//     sessions; the client opts in per request with params.task; tasks/get,
//     blocking tasks/result, tasks/list and tasks/cancel.
//
// A request that can take neither shape is [EraNone]; the [Host] decides how to
// answer it (typically by waiting for the result).
//
// # What this package must never do
//
// taskwire persists nothing and decides no business policy. A [Host] owns the
// tasks: it creates them durably before taskwire returns a task handle, binds
// them to callers, and answers every tasks/* request. taskwire only translates
// between the Host's era-neutral [Task] and the two wire designs, and enforces
// the protocol rules that do not depend on stored state (capability checks,
// error codes, header validation).
//
// # Server side
//
// Call [Install] on the *mcp.Server, then serve it through [NewHTTPHandler]
// (Streamable HTTP, routing each request to a stateless or a stateful go-sdk
// handler by era, optionally to a server of its own for each) or
// [NewStdioTransport]. Both front doors move the fields the go-sdk drops
// (params.task, params.idempotencyKey, and subscriptions/listen's
// notifications.taskIds) into reserved _meta keys before the SDK parses the
// request; serving the server another way loses them. The
// HTTP router reads the members it routes by (method, params.taskId) by
// their exact names, as the SDK does, and refuses a message that spells one
// of them twice, answers a body that is not JSON with -32700, and answers a
// tools/call whose arguments the SDK cannot decode (a number beyond a
// double's range) with -32602 [ReasonInvalidArguments], in either era, before
// the Host sees it. Errors a Host did not shape itself are logged and
// answered with -32603 without their text.
//
// # Client side
//
// Wrap the client transport with [WrapClientTransport], register the tasks/*
// methods with [InstallClient], then use [CallToolAsTask], [GetTask],
// [AwaitTask], [UpdateTask], [CancelTask], [TaskResult] and [ListTasks].
package taskwire
